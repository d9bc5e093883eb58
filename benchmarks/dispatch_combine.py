"""Dispatch + combine on 2 gloo ranks: ``epbuf.runtime.Buffer`` against a baseline written like
DeepEP's ``deep_ep/utils/refs.py`` (per-destination masking in a Python loop, one
``all_to_all_single`` per tensor), in the same run, with identical results checked.

Per rank and iteration both do a full dispatch (FP8 tokens + scales, top-k ids and weights)
and a combine (BF16, one partial per received token, and the top-k weights summed back). Each
iteration times both, after a barrier each, epbuf first in even iterations and the baseline
first in odd ones; the figures are medians over the iterations of the slower rank, and the
speed-up is ``baseline / epbuf`` (target >= 1.5). Also printed: the bytes rank 0's records
take in its dispatch and in its combine (its own share included, whether or not it travels)
against the bytes its buffer reserves (dispatch and combine reuse the same bytes), and the
scratch bytes epbuf keeps besides the buffer (``Buffer.workspace_num_bytes``).

    python benchmarks/dispatch_combine.py
    python benchmarks/dispatch_combine.py --tokens 16,64,256 --iters 31
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the spawned ranks import this module


def baseline_dispatch(x, sf, topk_idx, topk_weights, num_max_tokens_per_rank: int, num_experts: int):
    """refs.py-style dispatch: a mask and an index per destination, one all_to_all_single per tensor."""
    import torch
    import torch.distributed as dist

    rank, num_ranks = dist.get_rank(), dist.get_world_size()
    per_rank = num_experts // num_ranks
    xs, sfs, idxs, ws, srcs, counts, sent = [], [], [], [], [], [], []
    for dst in range(num_ranks):
        start, end = dst * per_rank, (dst + 1) * per_rank
        indices = ((start <= topk_idx) & (topk_idx < end)).any(dim=1).nonzero(as_tuple=True)[0]
        counts.append(indices.numel())
        sent.append(indices)
        xs.append(x[indices].view(torch.uint8))  # gloo has no float8 all_to_all: move the codes as bytes
        sfs.append(sf[indices])
        chosen = topk_idx[indices]
        idxs.append(torch.where((start <= chosen) & (chosen < end), chosen, torch.full_like(chosen, -1)))
        ws.append(topk_weights[indices])
        srcs.append(indices.to(torch.int32) + rank * num_max_tokens_per_rank)
    send_counts = torch.tensor(counts, dtype=torch.int64)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    recv_list, send_list = recv_counts.tolist(), counts
    n = sum(recv_list)
    out = []
    for parts, row in ((xs, x.shape[1:]), (sfs, sf.shape[1:]), (idxs, topk_idx.shape[1:]),
                       (ws, topk_weights.shape[1:]), (srcs, ())):
        send = torch.cat(parts)
        recv = torch.empty((n, *row), dtype=send.dtype)
        dist.all_to_all_single(recv, send, recv_list, send_list)
        out.append(recv)
    recv_x, recv_sf, recv_idx, recv_w, recv_src = out
    recv_x = recv_x.view(x.dtype)
    start = rank * per_rank
    local = (start <= recv_idx) & (recv_idx < start + per_rank)
    recv_idx = torch.where(local, recv_idx - start, torch.full_like(recv_idx, -1))
    return (recv_x, recv_sf), recv_idx, recv_w, recv_src, (send_list, recv_list, sent)


def baseline_combine(y, topk_weights, state, num_tokens: int):
    """Send each received token's partial and weights back (one all_to_all_single per tensor)
    and add them per destination into the source's token order (fp32; BF16 for the tokens).
    With 2 ranks a token has at most 2 partials, so the order of the additions cannot matter."""
    import torch
    import torch.distributed as dist

    send_list, recv_list, sent = state
    back = torch.empty((sum(send_list), y.shape[1]), dtype=y.dtype)
    dist.all_to_all_single(back, y, send_list, recv_list)
    back_w = torch.empty((sum(send_list), topk_weights.shape[1]), dtype=topk_weights.dtype)
    dist.all_to_all_single(back_w, topk_weights, send_list, recv_list)
    acc = torch.zeros(num_tokens, y.shape[1])
    acc_w = torch.zeros(num_tokens, topk_weights.shape[1])
    first = 0
    for indices, count in zip(sent, send_list):
        acc.index_add_(0, indices, back[first:first + count].float())
        acc_w.index_add_(0, indices, back_w[first:first + count])
        first += count
    return acc.to(torch.bfloat16), acc_w


def inputs(rank: int, num_tokens: int, hidden: int, topk: int, num_experts: int):
    import torch

    from epbuf.codec.fp8 import quantize_fp8

    g = torch.Generator().manual_seed(rank)
    codes, scales = quantize_fp8(torch.randn(num_tokens, hidden, generator=g).numpy())
    x = torch.from_numpy(codes).view(torch.float8_e4m3fn)
    idx = torch.rand(num_tokens, num_experts, generator=g).argsort(dim=1)[:, :topk]
    idx = idx.masked_fill(torch.rand(num_tokens, topk, generator=g) < 0.1, -1)
    return x, torch.from_numpy(scales), idx, torch.rand(num_tokens, topk, generator=g)


def digest(*tensors) -> int:
    """A checksum of the tensors' bytes (to compare results computed in other processes)."""
    import zlib

    import torch

    crc = 0
    for t in tensors:
        crc = zlib.crc32(t.contiguous().view(torch.uint8).numpy().tobytes(), crc)
    return crc


def bench(rank: int, num_ranks: int, token_counts: list[int], hidden: int, topk: int, iters: int,
          who: str) -> list[dict]:
    """Time ``who`` ("epbuf", "baseline" or "both", alternating which runs first) on this
    rank: per token count, 2 warm-up calls, then ``iters`` timed calls, each after a barrier."""
    import torch
    import torch.distributed as dist

    import epbuf
    from epbuf.runtime import Buffer

    num_experts = 64
    rows = []
    for num_tokens in token_counts:
        plan = epbuf.Plan(hidden=hidden, num_topk=topk, num_experts=num_experts, num_ranks=num_ranks,
                          num_max_tokens_per_rank=num_tokens, use_fp8_dispatch=True)
        x, sf, idx, w = inputs(rank, num_tokens, hidden, topk, num_experts)
        buffer = Buffer(None, plan, timeout=120) if who != "baseline" else None

        def ours():
            r = buffer.dispatch((x, sf), idx, w)
            y = (r.recv_src_token_global_idx.float().unsqueeze(1) * 1e-4).expand(-1, hidden).to(torch.bfloat16)
            c = buffer.combine(y, r.handle, r.recv_topk_weights)
            return (r.recv_x[0], r.recv_x[1], r.recv_topk_idx, r.recv_topk_weights, r.recv_src_token_global_idx,
                    c.combined_x, c.combined_topk_weights), r.handle

        def theirs():
            recv_x, recv_idx, recv_w, recv_src, state = baseline_dispatch(x, sf, idx, w, num_tokens, num_experts)
            y = (recv_src.float().unsqueeze(1) * 1e-4).expand(-1, hidden).to(torch.bfloat16)
            combined, combined_w = baseline_combine(y, recv_w, state, num_tokens)
            return (recv_x[0], recv_x[1], recv_idx, recv_w, recv_src, combined, combined_w), None

        runs = {"epbuf": ours, "baseline": theirs}
        runs = {k: v for k, v in runs.items() if who in (k, "both")}
        times: dict = {k: [] for k in runs}
        cpu: dict = {k: [] for k in runs}
        outputs = {k: fn() for k, fn in runs.items()}  # warm-up, and the results to compare
        for fn in runs.values():
            fn()
        for i in range(iters):
            order = list(runs) if i % 2 == 0 else list(runs)[::-1]
            for name in order:
                dist.barrier()
                start, start_cpu = time.perf_counter(), time.process_time()
                runs[name]()
                times[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)  # all of the rank's threads (gloo's too)
        row = dict(tokens=num_tokens, digest={k: digest(*out) for k, (out, _) in outputs.items()},
                   times={k: statistics.median(v) for k, v in times.items()},
                   cpu={k: statistics.median(v) for k, v in cpu.items()})
        handle = outputs.get("epbuf", (None, None))[1]
        if handle is not None:
            row.update(reserved=buffer.num_bytes, dispatch_sent=handle.dispatch_num_bytes_sent,
                       combine_sent=handle.combine_num_bytes_sent,
                       workspace=getattr(buffer, "workspace_num_bytes", 0),
                       dispatch_record=handle.dispatch_stride, combine_record=handle.combine_stride)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", default="16,128,512,4096",
                    help="num_max_tokens_per_rank values (each rank sends that many)")
    ap.add_argument("--hidden", type=int, default=7168)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--iters", type=int, default=21, help="timed calls per process and token count")
    ap.add_argument("--rounds", type=int, default=3, help="process pairs per implementation (separate mode)")
    ap.add_argument("--interleaved", action="store_true",
                    help="time both in the same processes, alternating call by call (each then shares the "
                         "other's allocator and cache state)")
    args = ap.parse_args(argv)

    from epbuf.runtime.testing import run_gloo

    token_counts = [int(t) for t in args.tokens.split(",")]

    def run(who: str) -> list:
        ranks = run_gloo(bench, 2, token_counts, args.hidden, args.topk, args.iters, who, timeout=3600,
                         collective_timeout=300)
        return list(zip(*ranks))  # per token count: (rank 0 row, rank 1 row)

    rounds = []  # per round: {"epbuf": per-token rows, "baseline": per-token rows}
    if args.interleaved:
        for _ in range(args.rounds):
            both = run("both")
            rounds.append({"epbuf": both, "baseline": both})
    else:
        for r in range(args.rounds):
            order = ("epbuf", "baseline") if r % 2 == 0 else ("baseline", "epbuf")
            rounds.append({who: run(who) for who in order})
    mode = ("both in the same processes, alternating call by call" if args.interleaved else
            "each in its own pair of processes, the two alternating")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; 2 gloo ranks on loopback, 1 torch thread each; "
          f"FP8 hidden {args.hidden}, top-k {args.topk}, 64 experts, 10% of slots -1; {mode}; per round the median "
          f"of {args.iters} calls of the slower rank, then the median [range] over {args.rounds} rounds")
    print(f"{'tokens/rank':>11} {'epbuf ms':>9} {'refs-style ms':>14} {'speed-up':>9} {'speed-up range':>15} "
          f"{'identical':>9} {'CPU ms':>13} {'dispatch B':>11} {'combine B':>11} {'baseline B':>11} "
          f"{'reserved B':>11} {'workspace B':>12}")
    for t, num_tokens in enumerate(token_counts):
        per_round, cpu = [], []
        identical = True
        for rnd in rounds:
            cpu.append((max(row["cpu"]["epbuf"] for row in rnd["epbuf"][t]),
                        max(row["cpu"]["baseline"] for row in rnd["baseline"][t])))
            ours = max(row["times"]["epbuf"] for row in rnd["epbuf"][t])  # the slower rank sets the pace
            theirs = max(row["times"]["baseline"] for row in rnd["baseline"][t])
            per_round.append((ours, theirs))
            identical &= all(a["digest"]["epbuf"] == b["digest"]["baseline"]
                             for a, b in zip(rnd["epbuf"][t], rnd["baseline"][t]))
        ours = statistics.median(o for o, _ in per_round)
        theirs = statistics.median(b for _, b in per_round)
        ups = [b / o for o, b in per_round]
        row = rounds[0]["epbuf"][t][0]
        moved = int(row["dispatch_sent"] // row["dispatch_record"]) * (args.hidden + 4 * -(-args.hidden // 128)
                                                                        + args.topk * (8 + 4) + 4) \
            + int(row["combine_sent"] // row["combine_record"]) * (args.hidden * 2 + args.topk * 4)
        print(f"{num_tokens:>11,} {ours * 1e3:9.2f} {theirs * 1e3:14.2f} {statistics.median(ups):8.2f}x "
              f"{min(ups):6.2f}-{max(ups):.2f}x {str(identical):>9} "
              f"{statistics.median(c for c, _ in cpu) * 1e3:6.1f}/{statistics.median(c for _, c in cpu) * 1e3:<6.1f} "
              f"{row['dispatch_sent']:>11,} "
              f"{row['combine_sent']:>11,} {moved:>11,} {row['reserved']:>11,} "
              f"{max(r['workspace'] for r in rounds[0]['epbuf'][t]):>12,}")
    first = rounds[0]["epbuf"][0][0]
    print(f"records: dispatch {first['dispatch_record']:,} B, combine {first['combine_record']:,} B (rank 0's bytes "
          "shown; dispatch/combine B: epbuf's records, its own share included; baseline B: the baseline's tensors); "
          "CPU ms: epbuf/baseline process CPU time per call (all threads), the busier rank")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
