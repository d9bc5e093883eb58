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


def bench(rank: int, num_ranks: int, token_counts: list[int], hidden: int, topk: int, iters: int) -> list[dict]:
    import torch
    import torch.distributed as dist

    import epbuf
    from epbuf.runtime import Buffer

    num_experts = 64
    rows = []
    for num_tokens in token_counts:
        plan = epbuf.Plan(hidden=hidden, num_topk=topk, num_experts=num_experts, num_ranks=num_ranks,
                          num_max_tokens_per_rank=num_tokens, use_fp8_dispatch=True)
        buffer = Buffer(None, plan, timeout=120)
        x, sf, idx, w = inputs(rank, num_tokens, hidden, topk, num_experts)

        def ours():
            r = buffer.dispatch((x, sf), idx, w)
            y = (r.recv_src_token_global_idx.float().unsqueeze(1) * 1e-4).expand(-1, hidden).to(torch.bfloat16)
            return r, buffer.combine(y, r.handle, r.recv_topk_weights)

        def theirs():
            recv_x, recv_idx, recv_w, recv_src, state = baseline_dispatch(x, sf, idx, w, num_tokens, num_experts)
            y = (recv_src.float().unsqueeze(1) * 1e-4).expand(-1, hidden).to(torch.bfloat16)
            return (recv_x, recv_idx, recv_w, recv_src), baseline_combine(y, recv_w, state, num_tokens)

        (r, combined), ((bx, bsf), bidx, bw, bsrc), (bcombined, bcombined_w) = ours(), *theirs()
        identical = (torch.equal(r.recv_x[0].view(torch.uint8), bx.view(torch.uint8))
                     and torch.equal(r.recv_x[1], bsf) and torch.equal(r.recv_topk_idx, bidx)
                     and torch.equal(r.recv_topk_weights, bw) and torch.equal(r.recv_src_token_global_idx, bsrc)
                     and torch.equal(combined.combined_x.view(torch.int16), bcombined.view(torch.int16))
                     and torch.equal(combined.combined_topk_weights, bcombined_w))
        t_ours, t_theirs = [], []
        for i in range(iters):
            pair = ((ours, t_ours), (theirs, t_theirs))
            for fn, times in (pair if i % 2 == 0 else pair[::-1]):
                dist.barrier()
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
        h = r.handle
        baseline_bytes = int(sum(h.send_counts)) * (hidden + sf.shape[1] * 4 + topk * (8 + 4) + 4) \
            + h.num_recv_tokens * (hidden * 2 + topk * 4)
        rows.append(dict(tokens=num_tokens, ours=statistics.median(t_ours), theirs=statistics.median(t_theirs),
                         identical=identical, reserved=buffer.num_bytes, dispatch_sent=h.dispatch_num_bytes_sent,
                         combine_sent=h.combine_num_bytes_sent, baseline_moved=baseline_bytes,
                         workspace=getattr(buffer, "workspace_num_bytes", 0),
                         dispatch_record=h.dispatch_stride, combine_record=h.combine_stride))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", default="16,128,512,4096",
                    help="num_max_tokens_per_rank values (each rank sends that many)")
    ap.add_argument("--hidden", type=int, default=7168)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--iters", type=int, default=21)
    args = ap.parse_args(argv)

    from epbuf.runtime.testing import run_gloo

    token_counts = [int(t) for t in args.tokens.split(",")]
    results = run_gloo(bench, 2, token_counts, args.hidden, args.topk, args.iters, timeout=1800,
                       collective_timeout=300)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; 2 gloo ranks on loopback, 1 torch thread each; "
          f"FP8 hidden {args.hidden}, top-k {args.topk}, 64 experts, 10% of slots -1; median of {args.iters}")
    print(f"{'tokens/rank':>11} {'epbuf ms':>9} {'refs-style ms':>14} {'speed-up':>9} {'identical':>9} "
          f"{'dispatch sent B':>16} {'combine sent B':>15} {'baseline sent B':>16} {'reserved B':>11} "
          f"{'workspace B':>12}")
    for rank_rows in zip(*results):
        ours = max(row["ours"] for row in rank_rows)  # the slower rank sets the pace
        theirs = max(row["theirs"] for row in rank_rows)
        row = rank_rows[0]
        print(f"{row['tokens']:>11,} {ours * 1e3:9.2f} {theirs * 1e3:14.2f} {theirs / ours:8.2f}x "
              f"{str(all(r['identical'] for r in rank_rows)):>9} {row['dispatch_sent']:>16,} "
              f"{row['combine_sent']:>15,} {row['baseline_moved']:>16,} {row['reserved']:>11,} "
              f"{max(r['workspace'] for r in rank_rows):>12,}")
    first = results[0][0]
    print(f"records: dispatch {first['dispatch_record']:,} B, combine {first['combine_record']:,} B (rank 0's bytes shown)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
