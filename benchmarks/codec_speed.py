"""Codec throughput: ``epbuf.codec.pack`` + ``unpack`` of real tokens against a plain copy of
the same bytes, in the same run (numpy: ``numpy.copy``; torch: ``Tensor.clone``).

A round trip moves every byte twice (fields -> buffer -> fields). Printed: each pass against
one copy (``copy / pack``, ``copy / unpack``) and the round trip against one copy
(``copy / (pack + unpack)``: 0.5 when both passes run at copy speed; target >= 0.5).
Medians of alternating repetitions.

    python benchmarks/codec_speed.py                 # Ascend FP8 dispatch records, 4,096 tokens
    python benchmarks/codec_speed.py --tokens 1024 --bf16
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=7168)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args(argv)

    import numpy as np

    import epbuf
    from epbuf.codec import pack, unpack
    from epbuf.codec._arrays import numpy_ops

    plan = epbuf.Plan(hidden=args.hidden, num_topk=args.topk, num_experts=256, num_ranks=8,
                      num_max_tokens_per_rank=args.tokens, use_fp8_dispatch=not args.bf16)
    record = epbuf.report(plan, "ascend").record("dispatch")
    n = args.tokens
    rng = np.random.default_rng(0)
    ops = numpy_ops()
    fields = {f.name: rng.integers(0, 256, (n, f.num_bytes), dtype=np.uint8).view(ops.dtype(f.dtype))
              for f in record.data_fields()}
    field_bytes = sum(v.nbytes for v in fields.values())
    print(f"python {sys.version.split()[0]}; Ascend dispatch record {record.num_bytes:,} B "
          f"({'BF16' if args.bf16 else 'FP8'}, hidden {args.hidden}, top-k {args.topk}); {n:,} tokens = "
          f"{field_bytes / 2**20:.1f} MiB of fields; median of {args.repeats}")
    rows = []
    for kind in ("numpy", "torch"):
        if kind == "torch":
            try:
                import torch
            except ImportError:
                print("torch not installed: numpy only")
                break
            torch.set_num_threads(1)
            values = {k: torch.from_numpy(v.view(np.int16)).view(torch.bfloat16) if v.dtype == np.uint16
                      else torch.from_numpy(v) for k, v in fields.items()}
            buffer = torch.zeros(n * record.num_bytes, dtype=torch.uint8)
            flat = torch.from_numpy(rng.integers(0, 256, field_bytes, dtype=np.uint8))
            copy = flat.clone
        else:
            values = fields
            buffer = np.zeros(n * record.num_bytes, dtype=np.uint8)
            flat = rng.integers(0, 256, field_bytes, dtype=np.uint8)
            copy = flat.copy
        pack(record, out=buffer, **values)  # warm up
        back = unpack(record, buffer)
        same = all(np.array_equal(np.asarray(back[k].view(torch.uint8) if kind == "torch" else back[k].view(np.uint8)),
                                  np.asarray(values[k].contiguous().view(torch.uint8) if kind == "torch"
                                             else values[k].view(np.uint8)).reshape(n, -1))
                   for k in values)
        t_pack, t_unpack, t_copy = [], [], []
        for _ in range(args.repeats):  # alternate, so machine noise hits all three alike
            t_pack += timed(lambda: pack(record, out=buffer, **values), 1)
            t_unpack += timed(lambda: unpack(record, buffer), 1)
            t_copy += timed(copy, 1)
        p, u, c = (statistics.median(t) for t in (t_pack, t_unpack, t_copy))
        rows.append((kind, p, u, c, same))
    print(f"{'arrays':8} {'pack ms':>8} {'unpack ms':>10} {'copy ms':>8} {'copy GB/s':>10} {'copy/pack':>10} "
          f"{'copy/unpack':>12} {'copy/(pack+unpack)':>19}  bit-exact")
    for kind, p, u, c, same in rows:
        print(f"{kind:8} {p * 1e3:8.2f} {u * 1e3:10.2f} {c * 1e3:8.2f} {field_bytes / c / 1e9:10.2f} {c / p:10.2f} "
              f"{c / u:12.2f} {c / (p + u):19.2f}  {same}")
    print("copy = numpy.copy / Tensor.clone of the same bytes; round trip target: copy/(pack+unpack) >= 0.5")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
