"""What each rank runs in tests/test_twin_pplx.py (spawned by run_gloo, so importable by name).

The checks are pplx-kernels' own (``tests/test_all_to_all.py`` and ``tests/all_to_all_utils.py``
@12cecfd): the same generated data (one seed, the same draws, every DP group's data on every
rank), the same per-expert count and set-of-tokens assertions after dispatch, the same
``expert_y = expert_x * 1.5`` and ``torch.testing.assert_close`` against the weighted sum after
combine, written against the twin as ``pplx_kernels``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from _twin_cases import _refusal  # the DeepEP twin's cases: one refusal as every rank reports it


def pplx():
    import epbuf.twin.pplx_kernels as twin

    twin.install()
    import pplx_kernels

    return pplx_kernels


class RankTestData:
    """pplx's ``RankTestData``: the draws in its order (``tests/all_to_all_utils.py:19-55``)."""

    def __init__(self, num_experts, experts_per_token, hidden_dim, max_num_tokens, in_dtype, rng, use_max_tokens):
        self.num_tokens = max_num_tokens if use_max_tokens else int(torch.randint(1, max_num_tokens, [1],
                                                                                  generator=rng).item())
        self.indices = torch.empty(self.num_tokens, experts_per_token, dtype=torch.int32)
        for i in range(self.num_tokens):
            self.indices[i] = torch.randperm(num_experts, generator=rng)[:experts_per_token]
        self.weights = torch.rand(self.num_tokens, experts_per_token, dtype=torch.float32, generator=rng)
        self.x_scale = None
        if in_dtype.itemsize == 1:
            x_fp32 = torch.rand(self.num_tokens, hidden_dim, dtype=torch.float32, generator=rng)
            self.x = ((x_fp32 - 0.5) * 400).to(in_dtype)
            self.x_scale = torch.rand(self.num_tokens, (hidden_dim + 127) // 128, dtype=torch.float32, generator=rng)
        else:
            self.x = torch.randn(self.num_tokens, hidden_dim, dtype=in_dtype, generator=rng)


def all_to_all(rank, world_size, dp_size, moe, internode, in_dtype, out_dtype, split=False) -> int:
    """pplx's ``_do_test_all_to_all``; returns the number of tokens it checked on this rank."""
    p = pplx()
    num_experts, experts_per_token, hidden_dim, max_num_tokens = moe
    dp_rank, num_dp = rank // dp_size, world_size // dp_size
    scale_bytes = 0 if in_dtype.itemsize != 1 else (hidden_dim + 127) // 128 * torch.float32.itemsize
    make = p.AllToAll.internode if internode else p.AllToAll.intranode
    ata = make(max_num_tokens=max_num_tokens, num_experts=num_experts, experts_per_token=experts_per_token,
               rank=rank, world_size=world_size, dp_size=dp_size, hidden_dim=hidden_dim,
               hidden_dim_bytes=hidden_dim * in_dtype.itemsize, hidden_dim_scale_bytes=scale_bytes)
    rng = torch.Generator()
    rng.manual_seed(123)
    all_rank_data = [RankTestData(num_experts, experts_per_token, hidden_dim, max_num_tokens, in_dtype, rng, False)
                     for _ in range(num_dp)]
    rank_data = all_rank_data[dp_rank]
    expert_token_from = [[] for _ in range(num_experts)]
    for i_rank, rd in enumerate(all_rank_data):
        for token_idx in range(rd.num_tokens):
            for expert_idx in rd.indices[token_idx]:
                expert_token_from[expert_idx].append((i_rank, token_idx))
    num_local_experts = num_experts // world_size
    expert_num_tokens = torch.empty(num_local_experts, dtype=torch.int32)
    expert_x = torch.empty((num_local_experts, max_num_tokens * num_dp, hidden_dim), dtype=in_dtype)
    expert_x_scale = None
    if in_dtype.itemsize == 1:
        expert_x_scale = torch.empty((num_local_experts, expert_x.size(1), (expert_x.size(2) + 127) // 128),
                                     dtype=torch.float32)
    bound_m = torch.tensor([rank_data.num_tokens], dtype=torch.uint32)
    args = dict(out_expert_num_tokens=expert_num_tokens, out_expert_x=expert_x, out_expert_x_scale=expert_x_scale,
                dp_x=rank_data.x, dp_x_scale=rank_data.x_scale, indices=rank_data.indices.to(torch.uint32),
                bound_m=bound_m)
    if split:  # vLLM's micro-batched prepare: the send half, then the receive half
        ata.dispatch(**args, do_send=True, do_recv=False)
        ata.dispatch(**args, do_send=False, do_recv=True)
    else:
        ata.dispatch(**args)
    checked = 0
    for i_local_expert in range(num_local_experts):
        expert_idx = rank * num_local_experts + i_local_expert
        cnt_tokens = int(expert_num_tokens[i_local_expert].item())
        assert cnt_tokens == len(expert_token_from[expert_idx])
        src_tokens, src_scales, dst_tokens, dst_scales = set(), set(), set(), set()
        for i_token in range(cnt_tokens):
            src_dp_rank, src_token_idx = expert_token_from[expert_idx][i_token]
            src_rank_data = all_rank_data[src_dp_rank]
            dst_tokens.add(tuple(expert_x[i_local_expert, i_token].float().tolist()))
            src_tokens.add(tuple(src_rank_data.x[src_token_idx].float().tolist()))
            if in_dtype.itemsize == 1:
                src_scales.add(tuple(src_rank_data.x_scale[src_token_idx].tolist()))
                dst_scales.add(tuple(expert_x_scale[i_local_expert, i_token].tolist()))
            checked += 1
        assert src_scales == dst_scales
        assert src_tokens == dst_tokens
    val = 1.5
    expert_y = expert_x.to(out_dtype) * val
    y = torch.full((max_num_tokens, hidden_dim), torch.nan, dtype=out_dtype)
    args = dict(out_tokens=y, indices=rank_data.indices.to(torch.uint32), weights=rank_data.weights,
                expert_y=expert_y, bound_m=bound_m)
    if split:
        ata.combine(**args, do_send=True, do_recv=False)
        ata.combine(**args, do_send=False, do_recv=True)
    else:
        ata.combine(**args)
    ata.destroy()
    ref_y = torch.zeros(rank_data.num_tokens, hidden_dim, dtype=y.dtype)
    for i_token in range(rank_data.num_tokens):
        for i_expert in range(experts_per_token):
            weight = float(rank_data.weights[i_token, i_expert].item())
            ref_y[i_token] += rank_data.x[i_token].to(y.dtype) * val * weight
    torch.testing.assert_close(y[:rank_data.num_tokens], ref_y)
    assert bool(y[rank_data.num_tokens:].isnan().all())  # rows past bound_m untouched, as the kernel leaves them
    return checked


def refusals(rank: int, world_size: int) -> dict:
    """Each case runs on every rank; a rank-specific argument is hostile on rank 1 only."""
    p = pplx()
    T, E, K, H = 8, 4 * world_size, 2, 256
    L = E // world_size
    base = dict(max_num_tokens=T, num_experts=E, experts_per_token=K, rank=rank, world_size=world_size, dp_size=1,
                hidden_dim=H, hidden_dim_bytes=2 * H, hidden_dim_scale_bytes=0)
    out = {}
    for name, change in (("dp_size does not divide", dict(dp_size=3)), ("one DP group", dict(dp_size=world_size)),
                         ("hidden bytes % 16", dict(hidden_dim_bytes=2 * H + 8)),
                         ("scale bytes % 16", dict(hidden_dim_scale_bytes=4)),
                         ("no local experts", dict(num_experts=0)),
                         ("scale bytes > hidden bytes", dict(hidden_dim_bytes=16, hidden_dim_scale_bytes=32)),
                         ("wrong rank", dict(rank=(rank + 1) % world_size)),
                         ("ranks disagree", dict(max_num_tokens=T + rank))):
        out[name] = _refusal(lambda: p.AllToAll.internode(**{**base, **change}))
    ata = p.AllToAll.intranode(**base)
    x = torch.randn(T, H, dtype=torch.bfloat16)
    idx = torch.stack([torch.randperm(E)[:K] for _ in range(T)]).to(torch.uint32)

    def dispatch(dp_x=x, indices=idx, bound_m=None, rows=T * world_size, out_dtype=torch.bfloat16, **kw):
        num = torch.empty(L, dtype=torch.int32)
        ex = torch.empty((L, rows, H), dtype=out_dtype)
        ata.dispatch(num, ex, None, dp_x, None, indices, bound_m, **kw)
        return int(num.sum())

    out["accepted"] = _refusal(dispatch)
    mine = rank == 1
    many = torch.randn(T + 1, H, dtype=torch.bfloat16)
    many_idx = torch.zeros((T + 1, K), dtype=torch.uint32)
    many_idx[:, 1] = 1
    out["tokens > max_num_tokens"] = _refusal(lambda: dispatch(many if mine else x, many_idx if mine else idx))
    out["int64 indices"] = _refusal(lambda: dispatch(indices=idx.long() if mine else idx))
    bad = idx.clone()
    bad[0, 0] = E
    out["expert id out of range"] = _refusal(lambda: dispatch(indices=bad if mine else idx))
    twice = idx.clone()
    twice[0, 1] = twice[0, 0]
    out["expert twice"] = _refusal(lambda: dispatch(indices=twice if mine else idx))
    rows = torch.empty((L, T * world_size, H), dtype=torch.bfloat16)
    out["scales without scale bytes"] = _refusal(
        lambda: ata.dispatch(torch.empty(L, dtype=torch.int32), rows, torch.empty((L, T * world_size, 1)), x,
                             torch.ones(T, 1), idx, None))
    out["out_expert_x too short"] = _refusal(lambda: dispatch(rows=1 if mine else T * world_size))
    out["float32 bound_m"] = _refusal(lambda: dispatch(bound_m=torch.tensor([T], dtype=torch.float32 if mine else
                                                                             torch.uint32)))
    out["invalid split mode"] = _refusal(lambda: dispatch(do_send=False, do_recv=False))
    dispatch()
    y = torch.ones((L, T * world_size, H), dtype=torch.bfloat16)
    w = torch.rand(T, K)
    out["combine accepted"] = _refusal(lambda: ata.combine(torch.empty(T, H, dtype=torch.bfloat16), idx, w, y, None))
    out["combine float32 out"] = _refusal(lambda: ata.combine(torch.empty(T, H, dtype=torch.float32 if mine else
                                                                          torch.bfloat16), idx, w, y, None))
    short = torch.tensor([T - 1 if mine else T], dtype=torch.uint32)
    out["combine bound_m differs"] = _refusal(lambda: ata.combine(torch.empty(T, H, dtype=torch.bfloat16), idx, w, y,
                                                                  short))
    ata.destroy()
    out["after destroy"] = _refusal(dispatch)
    fp8 = p.AllToAll.internode(**{**base, "hidden_dim_bytes": H, "hidden_dim_scale_bytes": 16})
    per_token = torch.rand(T, 1)  # vLLM's per-token scales: 1 float a token, 16 scale bytes
    scale_out = torch.full((L, T * world_size, 4), -1.0)
    got = torch.empty(L, dtype=torch.int32)
    fp8.dispatch(got, torch.empty((L, T * world_size, H), dtype=torch.float8_e4m3fn), scale_out,
                 x.to(torch.float8_e4m3fn), per_token, idx, None)
    everyone = [torch.empty_like(per_token) for _ in range(world_size)]
    dist.all_gather(everyone, per_token)
    sent = {float(s) for s in torch.cat(everyone)[:, 0]}
    received = {float(scale_out[e, i, 0]) for e in range(L) for i in range(int(got[e]))}
    out["per-token scales"] = "accepted" if received and received <= sent and int(got.sum()) else str(received)
    uneven = p.AllToAll.internode(**{**base, "num_experts": E + 1})
    out["num_experts % world_size"] = _refusal(
        lambda: uneven.dispatch(torch.empty(L, dtype=torch.int32), rows, None, x, None, idx, None))
    wide = p.AllToAll.intranode(**{**base, "hidden_dim": 32768, "hidden_dim_bytes": 65536})
    wide_x = torch.zeros(T, 32768, dtype=torch.bfloat16)
    wide_out = torch.empty((L, T * world_size, 32768), dtype=torch.bfloat16)
    out["intranode shared memory"] = _refusal(
        lambda: wide.dispatch(torch.empty(L, dtype=torch.int32), wide_out, None, wide_x, None, idx, None))
    return out


def everything(rank: int, world_size: int, dp_sizes: tuple, moe: tuple, hostile: bool) -> dict:
    """One spawn, many cases (each spawn costs a torch import per rank)."""
    checked = {}
    for dp_size in dp_sizes:
        for internode in (True, False):
            for in_dtype, out_dtype in ((torch.bfloat16, torch.bfloat16), (torch.float8_e4m3fn, torch.float16),
                                        (torch.float16, torch.bfloat16)):
                key = f"dp{dp_size} {'internode' if internode else 'intranode'} {in_dtype} -> {out_dtype}"
                checked[key] = all_to_all(rank, world_size, dp_size, moe, internode, in_dtype, out_dtype)
        checked[f"dp{dp_size} split"] = all_to_all(rank, world_size, dp_size, moe, True, torch.float8_e4m3fn,
                                                   torch.bfloat16, split=True)
    out = {"checked": checked}
    if hostile:
        out["refusals"] = refusals(rank, world_size)
    dist.barrier()
    return out
