"""Rank code for tests/test_twin_mori.py: MORI-EP's own test (tests/python/ops/
dispatch_combine_test_utils.py @624002c: gen_test_data, check_dispatch_result, check_combine_result)
written again against ``import mori`` given by epbuf.twin.mori, and hostile arguments."""

from __future__ import annotations

import torch
import torch.distributed as dist
from _twin_cases import _refusal  # the DeepEP twin's cases: one refusal as every rank reports it


def mori():
    import epbuf.twin.mori as twin

    twin.install()
    import mori as m

    return m


def config(rank, world_size, dtype, hidden=256, max_tokens=16, experts=4, topk=3, scale_dim=8, **change):
    m = mori()
    base = dict(data_type=dtype, rank=rank, world_size=world_size, hidden_dim=hidden, scale_dim=scale_dim,
                scale_type_size=4, max_num_inp_token_per_rank=max_tokens, num_experts_per_rank=experts,
                num_experts_per_token=topk, max_token_type_size=4, block_num=64, warp_num_per_block=4,
                kernel_type=m.ops.EpDispatchCombineKernelType.IntraNode)
    return m.ops.EpDispatchCombineConfig(**{**base, **change})


def gen_test_data(cfg, seed: int, sentinel: bool = False):
    """gen_test_data's "random" routing, the same draws on every rank (one generator, one seed)."""
    rng = torch.Generator().manual_seed(seed)
    R, K, E = cfg.world_size, cfg.num_experts_per_token, cfg.num_experts_per_rank * cfg.world_size
    num_token = torch.randint(0, cfg.max_num_inp_token_per_rank + 1, [R], generator=rng)
    indices = []
    for r in range(R):
        idx = torch.stack([torch.randperm(E, generator=rng)[:K] for _ in range(int(num_token[r]))]) \
            if int(num_token[r]) else torch.empty(0, K, dtype=torch.int64)
        if sentinel and K > 1:
            idx[:, 1::2] = -1  # the "every_other" sentinel pattern
        indices.append(idx.to(torch.int32))
    weights = [torch.rand(int(num_token[r]), K, generator=rng) for r in range(R)]
    scales = [torch.rand(int(num_token[r]), cfg.scale_dim, generator=rng) for r in range(R)]
    inputs = [torch.randn(int(num_token[r]), cfg.hidden_dim, generator=rng).to(cfg.data_type) for r in range(R)]
    return num_token, indices, inputs, weights, scales


def run_once(op, cfg, data, atol) -> int:
    """MORI's run_test_once: dispatch, check_dispatch_result, combine, check_combine_result."""
    num_token, all_indices, all_input, all_weights, all_scales = data
    me = cfg.rank
    out, out_w, out_s, out_i, recv_num = op.dispatch(all_input[me], all_weights[me], all_scales[me], all_indices[me])
    max_recv = op.max_num_tokens_to_recv()
    assert out.shape == (max_recv, cfg.hidden_dim) and out.dtype == cfg.data_type
    assert out_w.shape == (max_recv, cfg.num_experts_per_token) and out_w.dtype == torch.float32
    assert out_i.dtype == torch.int32 and recv_num.dtype == torch.int32 and recv_num.shape == (1,)
    src_token_pos = op.get_dispatch_src_token_pos()
    for i, pos in enumerate(src_token_pos):
        src_rank, src_id = op.decode_send_flat_idx(pos)
        assert torch.equal(all_input[src_rank][src_id], out[i])
        assert torch.equal(all_weights[src_rank][src_id], out_w[i])
        assert torch.equal(all_scales[src_rank][src_id], out_s[i])
        assert torch.equal(all_indices[src_rank][src_id], out_i[i])
    assert len(torch.unique(src_token_pos)) == len(src_token_pos)
    assert len(src_token_pos) == recv_num[0]
    total = int(recv_num[0])
    combine_in = out[:total].to(torch.bfloat16) if cfg.quant_type == "fp8_direct_cast" else out
    comb, comb_w = op.combine(combine_in, out_w, all_indices[me], call_reset=False)
    assert comb.shape == (cfg.max_num_inp_token_per_rank, cfg.hidden_dim) and comb.dtype == combine_in.dtype
    for i in range(int(num_token[me])):
        pes = {idx // cfg.num_experts_per_rank for idx in all_indices[me][i].tolist() if idx >= 0}
        inp = all_input[me][i].to(combine_in.dtype)
        expected = (inp.to(torch.float32) * len(pes)).to(combine_in.dtype)
        assert torch.allclose(comb[i].float(), expected.float(), atol=atol, rtol=atol), (i, comb[i], expected)
        assert torch.allclose(comb_w[i], all_weights[me][i] * len(pes), atol=1e-5, rtol=1e-5)
    return total


def checked(rank: int, world_size: int) -> dict:
    m, out = mori(), {}
    for name, dtype, change, atol in (("bf16", torch.bfloat16, {}, 1e-2),
                                      ("fp8", torch.float8_e4m3fn, {}, 1e-2),
                                      ("bf16 fp8_direct_cast", torch.bfloat16, {"quant_type": "fp8_direct_cast"}, 1e-1),
                                      ("bf16 cap", torch.bfloat16, {"max_total_recv_tokens": 64}, 1e-2)):
        cfg = config(rank, world_size, dtype, **change)
        op = m.ops.EpDispatchCombineOp(cfg)
        out[name] = [run_once(op, cfg, gen_test_data(cfg, seed), atol) for seed in (1, 2)]
    cfg = config(rank, world_size, torch.bfloat16)
    out["bf16 sentinel"] = [run_once(m.ops.EpDispatchCombineOp(cfg), cfg, gen_test_data(cfg, 3, sentinel=True), 1e-2)]
    return out


def refusals(rank: int, world_size: int) -> dict:
    m, out = mori(), {}
    mine = rank == 1
    cfg = config(rank, world_size, torch.bfloat16)
    op = m.ops.EpDispatchCombineOp(cfg)
    T, K, H = 4, cfg.num_experts_per_token, cfg.hidden_dim
    x, w, s = torch.ones(T, H, dtype=torch.bfloat16), torch.ones(T, K), torch.ones(T, cfg.scale_dim)
    idx = torch.tensor([[0, 1, 2]] * T, dtype=torch.int32)
    out["combine before dispatch"] = _refusal(lambda: op.combine(x, w, idx))
    many = torch.ones(cfg.max_num_inp_token_per_rank + 1, H, dtype=torch.bfloat16)
    n = cfg.max_num_inp_token_per_rank + 1
    out["tokens > max_num_inp_token_per_rank"] = _refusal(lambda: op.dispatch(
        many if mine else x, torch.ones(n, K) if mine else w, torch.ones(n, cfg.scale_dim) if mine else s,
        idx[:1].expand(n, K).contiguous() if mine else idx))
    out["int64 indices"] = _refusal(lambda: op.dispatch(x, w, s, idx.long() if mine else idx))
    out["expert out of range"] = _refusal(lambda: op.dispatch(x, w, s, idx + 100 if mine else idx))
    out["float16 input"] = _refusal(lambda: op.dispatch(x.half() if mine else x, w, s, idx))
    out["hidden too wide"] = _refusal(lambda: op.dispatch(torch.ones(T, 4 * H) if mine else x, w, s, idx))
    capped = m.ops.EpDispatchCombineOp(config(rank, world_size, torch.bfloat16, max_total_recv_tokens=2))
    out["receive cap"] = _refusal(lambda: capped.dispatch(x, w, s, idx))
    out["accepted"] = _refusal(lambda: op.dispatch(x, w, s, idx))
    out["combine int64 indices"] = _refusal(lambda: op.combine(x.repeat(world_size, 1), w.repeat(world_size, 1),
                                                               idx.long() if mine else idx))
    out["combine accepted"] = _refusal(lambda: op.combine(torch.zeros(T * world_size, H, dtype=torch.bfloat16),
                                                          w.repeat(world_size, 1), idx))
    out["wrong rank"] = _refusal(lambda: m.ops.EpDispatchCombineOp(config(0 if mine else rank, world_size,
                                                                          torch.bfloat16)))
    out["unknown quant_type"] = _refusal(lambda: m.ops.EpDispatchCombineOp(config(
        rank, world_size, torch.bfloat16, quant_type="int4" if mine else "none")))
    out["max_tokens differs"] = _refusal(lambda: m.ops.EpDispatchCombineOp(config(
        rank, world_size, torch.bfloat16, max_tokens=8 if mine else 16)))
    out["zero top-k"] = _refusal(lambda: m.ops.EpDispatchCombineOp(config(rank, world_size, torch.bfloat16, topk=0)))
    dist.barrier()
    return out


def everything(rank: int, world_size: int) -> dict:
    return {"checked": checked(rank, world_size), "refusals": refusals(rank, world_size)}
