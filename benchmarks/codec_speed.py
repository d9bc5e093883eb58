"""Codec throughput: ``epbuf.codec.pack`` + ``unpack`` of real tokens against a plain copy of
the same bytes, in the same run (numpy: ``numpy.copy``; torch: ``Tensor.clone``).

What is compared (``B`` = the fields' bytes, e.g. 4,096 FP8 tokens = 29.3 MiB):

* pack + unpack throughput = ``B / (t_pack + t_unpack)``: one round trip fields -> buffer ->
  fields, where ``pack`` writes into a preallocated buffer of the record layout and ``unpack``
  returns arrays of their own (``copy=True``, the default). Every byte moves twice.
* copy throughput = ``B / t_copy``: one copy of the same bytes into a fresh array.
* ratio = ``copy / (pack+unpack)`` = ``t_copy / (t_pack + t_unpack)``: the issue's figure
  (target >= 0.5; 0.5 = both passes at the speed of one plain copy).

Also printed, not compared with the target: each pass against one copy; ``views``: the round
trip when ``unpack(copy=False)`` returns zero-copy views into the buffer (only ``pack`` moves
bytes); ``floor``: the same two passes done by bare strided copies — ``np.copyto`` /
``Tensor.copy_`` of each field column, word-wide like the codec, padding zeroed — i.e. the
best ratio any codec built on these libraries reaches at this record layout.

Each repetition runs every timed step once, in an order rotated from one repetition to the
next (a fixed order lets one step inherit another's cache state); medians of the repetitions.

    python benchmarks/codec_speed.py                 # Ascend FP8 dispatch records, 4,096 tokens
    python benchmarks/codec_speed.py --tokens 1024,4096 --bf16
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def rotated_medians(steps: dict, repeats: int) -> dict:
    """Median seconds of each step; repetition ``r`` runs the steps starting at the
    ``r % len(steps)``-th one."""
    names = list(steps)
    times: dict = {name: [] for name in names}
    for r in range(repeats):
        for i in range(len(names)):
            name = names[(r + i) % len(names)]
            start = time.perf_counter()
            steps[name]()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def floor_steps(record, fields: dict, buffer, kind: str):
    """Bare strided copies moving the same bytes as pack and unpack (no codec logic): one
    ``np.copyto`` / ``Tensor.copy_`` per field column, 8-byte words where the field allows
    (as the codec copies), padding zeroed; unpack copies each column into a fresh array."""
    import numpy as np

    n = next(iter(fields.values())).shape[0]
    stride = record.num_bytes
    if kind == "torch":
        import torch

        flat = buffer
        words = torch.int64

        def column(f):
            return flat.as_strided((n, f.num_bytes), (stride, 1), f.offset)

        def source(f):
            return fields[f.name].contiguous().view(torch.uint8).reshape(n, f.num_bytes)

        copy, fill, empty = (lambda d, s: d.copy_(s)), (lambda d: d.zero_()), \
            (lambda f: torch.empty((n, f.num_bytes), dtype=torch.uint8))
    else:
        words = np.uint64

        def column(f):
            return np.lib.stride_tricks.as_strided(buffer[f.offset:], (n, f.num_bytes), (stride, 1))

        def source(f):
            return np.ascontiguousarray(fields[f.name]).view(np.uint8).reshape(n, f.num_bytes)

        copy, fill, empty = np.copyto, (lambda d: d.fill(0)), (lambda f: np.empty((n, f.num_bytes), np.uint8))

    def wide(f, a):  # 8-byte words when the offset, width and stride allow (numpy: fields under 1 KiB)
        ok = f.offset % 8 == 0 and f.num_bytes % 8 == 0 and stride % 8 == 0 and (kind == "torch" or f.num_bytes < 1024)
        return a.view(words) if ok else a

    columns = [(f, wide(f, column(f)), None if f.is_padding else wide(f, source(f))) for f in record.fields]

    def pack() -> None:
        for _, dst, src in columns:
            if src is None:
                fill(dst)
            else:
                copy(dst, src)

    def unpack() -> list:
        out = []
        for f, col, src in columns:
            if src is not None:
                owned = empty(f)
                copy(wide(f, owned), col)
                out.append(owned)
        return out

    return pack, unpack


def measure(num_tokens: int, hidden: int, topk: int, bf16: bool, repeats: int) -> list:
    import numpy as np

    import epbuf
    from epbuf.codec import pack, unpack
    from epbuf.codec._arrays import numpy_ops

    plan = epbuf.Plan(hidden=hidden, num_topk=topk, num_experts=256, num_ranks=8,
                      num_max_tokens_per_rank=num_tokens, use_fp8_dispatch=not bf16)
    record = epbuf.report(plan, "ascend").record("dispatch")
    n = num_tokens
    rng = np.random.default_rng(0)
    fields = {f.name: rng.integers(0, 256, (n, f.num_bytes), dtype=np.uint8).view(numpy_ops().dtype(f.dtype))
              for f in record.data_fields()}
    field_bytes = sum(v.nbytes for v in fields.values())
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

            def as_bytes(a):
                return a.contiguous().view(torch.uint8).numpy().reshape(n, -1)
        else:
            values = fields
            buffer = np.zeros(n * record.num_bytes, dtype=np.uint8)
            flat = rng.integers(0, 256, field_bytes, dtype=np.uint8)
            copy = flat.copy

            def as_bytes(a):
                return np.ascontiguousarray(a).view(np.uint8).reshape(n, -1)
        pack(record, out=buffer, **values)  # warm up, and check the round trip
        same = all(np.array_equal(as_bytes(unpack(record, buffer)[k]), as_bytes(values[k])) for k in values)
        same = same and all(np.array_equal(as_bytes(unpack(record, buffer, copy=False)[k]), as_bytes(values[k]))
                            for k in values)
        floor_pack, floor_unpack = floor_steps(record, values, buffer, kind)
        t = rotated_medians({
            "pack": lambda: pack(record, out=buffer, **values),
            "unpack": lambda: unpack(record, buffer),
            "views": lambda: unpack(record, buffer, copy=False),
            "copy": copy,
            "floor pack": floor_pack,
            "floor unpack": floor_unpack,
        }, repeats)
        rows.append((kind, t, same))
    return record, field_bytes, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", default="4096", help="token counts, comma-separated")
    ap.add_argument("--hidden", type=int, default=7168)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args(argv)

    print(f"python {sys.version.split()[0]}; Ascend dispatch records ({'BF16' if args.bf16 else 'FP8'}, hidden "
          f"{args.hidden}, top-k {args.topk}); median of {args.repeats} rotated repetitions; times in ms")
    print(f"{'tokens':>6} {'arrays':6} {'MiB':>5} {'pack':>6} {'unpack':>6} {'copy':>6} {'GB/s':>5} "
          f"{'copy/pack':>9} {'copy/unpack':>11} {'copy/(pack+unpack)':>18} {'views':>6} {'floor':>6}  bit-exact")
    for num_tokens in (int(t) for t in args.tokens.split(",")):
        record, field_bytes, rows = measure(num_tokens, args.hidden, args.topk, args.bf16, args.repeats)
        for kind, t, same in rows:
            p, u, c = t["pack"], t["unpack"], t["copy"]
            print(f"{num_tokens:>6,} {kind:6} {field_bytes / 2**20:5.1f} {p * 1e3:6.2f} {u * 1e3:6.2f} {c * 1e3:6.2f} "
                  f"{field_bytes / c / 1e9:5.1f} {c / p:9.2f} {c / u:11.2f} {c / (p + u):18.2f} "
                  f"{c / (p + t['views']):6.2f} {c / (t['floor pack'] + t['floor unpack']):6.2f}  {same}")
    print(f"record {record.num_bytes:,} B; copy = numpy.copy / Tensor.clone of the same bytes; target: "
          "copy/(pack+unpack) >= 0.5 (unpack returning owned arrays); views: unpack(copy=False); floor: bare strided "
          "copies of the same bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
