"""What each rank runs in tests/test_twin_elastic.py (spawned by run_gloo): DeepEP's
tests/elastic/test_ep.py @dd758ca reference assertions, with its reference dispatch and
combine computed here from every rank's inputs (each rank's draws are seeded by its rank)."""

from __future__ import annotations

import torch
import torch.distributed as dist

import epbuf.twin.deep_ep as deep_ep

NMAX, HIDDEN, TOPK, EXPERTS = 16, 256, 3, 8


def _inputs(rank: int, num_ranks: int, fp8: bool):
    g = torch.Generator().manual_seed(100 + rank)
    n = max(1, NMAX - rank)  # test_ep.py:62
    scores = torch.rand(n, EXPERTS, generator=g)
    topk_weights, topk_idx = torch.topk(scores, TOPK, dim=-1, sorted=False)
    topk_idx = topk_idx.to(deep_ep.topk_idx_t)
    topk_idx[torch.rand(n, TOPK, generator=g) < 0.2] = -1  # masked_ratio
    topk_weights.masked_fill_(topk_idx < 0, 0)
    x = torch.randn(n, HIDDEN, generator=g).to(torch.bfloat16)
    sf = torch.rand(n, HIDDEN // 128, generator=g) + 0.5 if fp8 else None
    x = (x.to(torch.float8_e4m3fn), sf) if fp8 else x
    bias = torch.randn(n, HIDDEN, generator=g).to(torch.bfloat16)
    return n, x, topk_idx, topk_weights, bias


def _gather(num_ranks: int, fp8: bool):
    """Every rank's inputs (each rank draws from its own seed, so any rank can make them all)."""
    return [_inputs(q, num_ranks, fp8) for q in range(num_ranks)]


def round_trip(rank: int, num_ranks: int, fp8: bool, alignment: int) -> dict:
    n, x, topk_idx, topk_weights, bias = _inputs(rank, num_ranks, fp8)
    buffer = deep_ep.ElasticBuffer(dist.group.WORLD, num_max_tokens_per_rank=NMAX, hidden=HIDDEN, num_topk=TOPK,
                                   use_fp8_dispatch=fp8)
    L = EXPERTS // num_ranks
    stats = torch.zeros(L, dtype=torch.int)
    recv_x, recv_idx, recv_w, handle, _ = buffer.dispatch(
        x, topk_idx=topk_idx, topk_weights=topk_weights, cumulative_local_expert_recv_stats=stats,
        num_experts=EXPERTS, expert_alignment=alignment)
    # the reference dispatch: each source's tokens holding one of my experts, source by source
    ref_src, ref_x, ref_idx, ref_w, per_rank = [], [], [], [], []
    for q, (nq, xq, iq, wq, _) in enumerate(_gather(num_ranks, fp8)):
        mine = ((iq >= rank * L) & (iq < (rank + 1) * L)).any(1)
        per_rank.append(int(mine.sum()))
        ref_src.append(q * NMAX + torch.arange(nq)[mine])
        ref_x.append((xq[0][mine], xq[1][mine]) if fp8 else xq[mine])
        local = torch.where((iq >= rank * L) & (iq < (rank + 1) * L), iq - rank * L, -1)
        ref_idx.append(local[mine])
        ref_w.append(wq[mine])
    ref_src, ref_idx, ref_w = torch.cat(ref_src), torch.cat(ref_idx), torch.cat(ref_w)
    m = handle.num_recv_tokens
    recv_bf16 = recv_x[0] if fp8 else recv_x
    assert recv_bf16.size(0) == m == int(ref_src.numel())  # test_ep.py:447
    assert m == handle.psum_num_recv_tokens_per_scaleup_rank[-1].item()  # :181
    for i in range(L):  # :449-462
        ref_count = (ref_idx == i).sum().item()
        assert ref_count == stats[i].item()
        aligned = -(-ref_count // alignment) * alignment
        assert aligned == handle.num_recv_tokens_per_expert_list[i]
        psum = [0] + handle.psum_num_recv_tokens_per_expert.tolist()
        assert psum[i + 1] - psum[i] == aligned
    psum = [0] + handle.psum_num_recv_tokens_per_scaleup_rank.tolist()  # :465-469
    assert [psum[i + 1] - psum[i] for i in range(num_ranks)] == per_rank
    order = torch.sort(handle.recv_src_metadata[:, 0])  # :474-500: bitwise identical data
    assert torch.equal(ref_src, order.values.long())
    checks = [(ref_w, recv_w), (ref_idx, recv_idx)]
    if fp8:
        checks += [(torch.cat([r[0] for r in ref_x]).view(torch.uint8), recv_x[0].view(torch.uint8)),
                   (torch.cat([r[1] for r in ref_x]), recv_x[1])]
    else:
        checks.append((torch.cat(ref_x), recv_x))
    for ref_t, t in checks:
        assert torch.equal(ref_t, t[order.indices]), (ref_t, t)
    # cached dispatch: the same layout and data (:434-443)
    cached = buffer.dispatch(x, topk_weights=topk_weights, handle=handle)
    assert torch.equal(cached[1], recv_idx) and torch.equal(cached[3].dst_buffer_slot_idx, handle.dst_buffer_slot_idx)
    assert torch.equal(cached[0][0] if fp8 else cached[0], recv_x[0] if fp8 else recv_x)
    # combine: each rank sends back its rows times 2 ** rank (exact: the fp32 sum is the same in any order);
    # the reference sums in fp32 (:129-137, :503-510)
    y = recv_x[0].to(torch.bfloat16) if fp8 else recv_x
    y = (y.float() * 2 ** rank).to(torch.bfloat16)
    combined, combined_w, _ = buffer.combine(y, handle, topk_weights=recv_w, bias=bias)
    holders = torch.stack([((topk_idx >= q * L) & (topk_idx < (q + 1) * L)).any(1) for q in range(num_ranks)], 1)
    factor = (holders.float() * (2.0 ** torch.arange(num_ranks)).float()).sum(1, keepdim=True)
    x_bf16 = x[0].to(torch.bfloat16) if fp8 else x
    ref = (x_bf16.float() * factor + bias.float()).to(torch.bfloat16)
    assert torch.equal(combined, ref), (combined - ref).abs().max()
    assert torch.equal(combined_w, topk_weights)
    return {"received": m, "hint": deep_ep.ElasticBuffer.get_buffer_size_hint(dist.group.WORLD, NMAX, HIDDEN, TOPK,
                                                                              fp8), "num_bytes": buffer.num_bytes}


def _refusal(call) -> str:
    try:
        call()
    except deep_ep.UpstreamAssertion as error:
        return str(error)
    return "no refusal"


def refusals(rank: int, num_ranks: int) -> dict:
    n, x, topk_idx, topk_weights, _ = _inputs(rank, num_ranks, False)
    buffer = deep_ep.ElasticBuffer(dist.group.WORLD, num_max_tokens_per_rank=NMAX, hidden=HIDDEN, num_topk=TOPK)
    small = deep_ep.ElasticBuffer(dist.group.WORLD, num_bytes=1 << 20, num_max_tokens_per_rank=NMAX)
    big_x = torch.zeros(NMAX + 1, HIDDEN, dtype=torch.bfloat16)
    big_idx = torch.zeros(NMAX + 1, TOPK, dtype=torch.int64)
    far = topk_idx.clone()
    far[0, 0] = EXPERTS if rank else 0  # only rank 1's is out of range
    out = {
        # only rank 1 passes too many tokens: every rank raises rank 1's refusal
        "too many tokens": _refusal(lambda: buffer.dispatch(
            big_x if rank else x, topk_idx=big_idx if rank else topk_idx, num_experts=EXPERTS)),
        "small buffer": _refusal(lambda: small.dispatch(x, topk_idx=topk_idx, num_experts=EXPERTS)),
        "num_experts": _refusal(lambda: buffer.dispatch(x, topk_idx=topk_idx, num_experts=EXPERTS + 1)),
        "expert out of range": _refusal(lambda: buffer.dispatch(x, topk_idx=far,
                                                                num_experts=EXPERTS)),
        "float x": _refusal(lambda: buffer.dispatch(x.float(), topk_idx=topk_idx, num_experts=EXPERTS)),
        "expand": _refusal(lambda: buffer.dispatch(x, topk_idx=topk_idx, num_experts=EXPERTS, do_expand=True)),
        "hidden differs": _refusal(lambda: buffer.dispatch(x[:, :HIDDEN - 128 * rank].contiguous(), topk_idx=topk_idx,
                                                           num_experts=EXPERTS)),
        "combine handle": _refusal(lambda: buffer.combine(x, "handle")),
    }
    _, _, _, handle, _ = buffer.dispatch(x, topk_idx=topk_idx, num_experts=EXPERTS)
    out["cached with topk_idx"] = _refusal(lambda: buffer.dispatch(x, topk_idx=topk_idx, handle=handle))
    out["qps"] = _refusal(lambda: buffer.combine(x, handle, num_qps=1000))
    out["combine rows"] = _refusal(lambda: buffer.combine(x[:0], handle))
    out["hint"] = _refusal(lambda: deep_ep.ElasticBuffer.get_buffer_size_hint(dist.group.WORLD, 0, HIDDEN))
    return out


def everything(rank: int, num_ranks: int) -> dict:
    return {"bf16": round_trip(rank, num_ranks, False, 1), "bf16 aligned": round_trip(rank, num_ranks, False, 4),
            "fp8": round_trip(rank, num_ranks, True, 1), "refusals": refusals(rank, num_ranks)}
