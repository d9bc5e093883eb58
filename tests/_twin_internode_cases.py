"""Rank code of tests/test_twin_internode.py: DeepEP's tests/legacy/test_internode.py @dd758ca
assertions (without its benchmarks) on the twin's internode normal mode, plus the handle's
internode fields against references computed here, and refusals at upstream's asserts."""

from __future__ import annotations

import torch
import torch.distributed as dist
from _twin_cases import _refusal, calc_diff, deep_ep, per_token_cast_back, per_token_cast_to_fp8

NVL = 8  # NUM_MAX_NVL_PEERS


def _layout(d, rank, num_ranks, num_tokens, num_experts, num_topk):
    num_nodes = num_ranks // NVL
    scores = torch.randn((num_tokens, num_experts), dtype=torch.float32).abs() + 1
    group_scores = scores.view(num_tokens, num_nodes, -1).amax(dim=-1)
    group_idx = torch.topk(group_scores, k=min(num_nodes, 2), dim=-1, sorted=False).indices
    masked = scores.view(num_tokens, num_nodes, -1).clone()
    keep = torch.zeros((num_tokens, num_nodes), dtype=torch.bool).scatter_(1, group_idx, True)
    masked[~keep] = float("-inf")
    topk_idx = torch.topk(masked.view(num_tokens, -1), num_topk, dim=-1, sorted=False)[1].to(d.topk_idx_t)
    rank_idx = topk_idx // (num_experts // num_ranks)
    rank_idx.masked_fill_(topk_idx == -1, -1)
    is_token_in_rank = torch.zeros((num_tokens, num_ranks), dtype=torch.bool)
    num_tokens_per_rank = torch.empty((num_ranks,), dtype=torch.int)
    for i in range(num_ranks):
        is_token_in_rank[:, i] = (rank_idx == i).any(dim=1)
        num_tokens_per_rank[i] = is_token_in_rank[:, i].sum()
    num_tokens_per_rdma_rank = torch.empty((num_nodes,), dtype=torch.int)
    rdma_rank_idx = rank_idx // NVL
    rdma_rank_idx.masked_fill_(rank_idx == -1, -1)
    for i in range(num_nodes):
        num_tokens_per_rdma_rank[i] = (rdma_rank_idx == i).any(dim=1).sum()
    num_tokens_per_expert = torch.zeros((num_experts,), dtype=torch.int)
    for i in range(num_experts):
        num_tokens_per_expert[i] = (topk_idx == i).sum()
    return topk_idx, is_token_in_rank, num_tokens_per_rank, num_tokens_per_rdma_rank, num_tokens_per_expert


def internode(rank: int, num_ranks: int, num_tokens: int, hidden: int, num_experts: int, num_topk: int) -> dict:
    d = deep_ep()
    group = dist.group.WORLD
    num_nodes, num_sms = num_ranks // NVL, 24
    torch.manual_seed(rank)
    x = torch.ones((num_tokens, hidden), dtype=torch.bfloat16) * rank
    x_pure_rand = torch.randn((num_tokens, hidden), dtype=torch.bfloat16)
    x_e4m3 = per_token_cast_to_fp8(x)
    x_e4m3 = (x_e4m3[0], x_e4m3[1].T.contiguous().T)
    x_pure_rand_e4m3 = per_token_cast_to_fp8(x_pure_rand)
    topk_idx, is_token_in_rank, num_tokens_per_rank, num_tokens_per_rdma_rank, num_tokens_per_expert = _layout(
        d, rank, num_ranks, num_tokens, num_experts, num_topk)
    topk_weights = torch.ones((num_tokens, num_topk), dtype=torch.float32) * rank
    topk_weights_pure_rand = torch.randn((num_tokens, num_topk), dtype=torch.float32)
    gbl_num_tokens_per_rank = num_tokens_per_rank.clone()
    dist.all_reduce(gbl_num_tokens_per_rank, group=group)
    gbl_num_tokens_per_expert = num_tokens_per_expert.clone()
    dist.all_reduce(gbl_num_tokens_per_expert, group=group)
    # upstream's test: Buffer(group, int(2e9), int(1e9)); the twin checks sizes, it allocates none
    buffer = d.Buffer(group, int(2e9) // 128 * 128, int(1e9) // 128 * 128)
    assert buffer.get_num_rdma_ranks() == num_nodes
    ref_per_rank, ref_per_rdma, ref_per_expert, ref_in_rank, _ = buffer.get_dispatch_layout(topk_idx, num_experts)
    assert torch.allclose(ref_per_rank, num_tokens_per_rank)
    assert torch.allclose(ref_per_rdma, num_tokens_per_rdma_rank)
    assert torch.allclose(ref_per_expert, num_tokens_per_expert)
    assert torch.allclose(ref_in_rank, is_token_in_rank)
    config = d.Config(num_sms, 8, 512, 16, 128)  # upstream's: nvl_buffer_size 512 for 16 ranks

    def check_data(check_x, recv_gbl_rank_prefix_sum):
        assert torch.allclose(check_x.amin(dim=1), check_x.amax(dim=1))
        check_start = 0
        for i in range(num_ranks):
            check_end = recv_gbl_rank_prefix_sum[i].item()
            assert (check_x[check_start:check_end, :].int() - i).sum().item() == 0
            check_start = check_end

    # The handle's fields from their definitions: the rows from each rank, each node's tokens.
    sent = torch.stack([num_tokens_per_rank.clone() for _ in range(num_ranks)])
    dist.all_gather(list(sent.unbind(0)), num_tokens_per_rank.clone(), group=group)
    to_node = torch.stack([num_tokens_per_rdma_rank.clone() for _ in range(num_ranks)])
    dist.all_gather(list(to_node.unbind(0)), num_tokens_per_rdma_rank.clone(), group=group)
    peers = torch.arange(num_nodes) * NVL + rank % NVL

    checked = 0
    for previous_mode in (False,):  # upstream's True only adds capture(): tests/_twin_cases.py runs it
        for async_mode in (False, True):
            for current_x in (x_pure_rand, x, x_pure_rand_e4m3, x_e4m3):
                for with_topk in (False, True):
                    is_rand = current_x is x_pure_rand or current_x is x_pure_rand_e4m3
                    args = {"x": current_x, "num_tokens_per_rank": num_tokens_per_rank,
                            "num_tokens_per_rdma_rank": num_tokens_per_rdma_rank, "is_token_in_rank": is_token_in_rank,
                            "num_tokens_per_expert": num_tokens_per_expert, "config": config,
                            "async_finish": async_mode}
                    if with_topk:
                        args.update({"topk_idx": topk_idx, "topk_weights": topk_weights_pure_rand if is_rand
                                     else topk_weights})
                    if previous_mode:
                        args.update({"previous_event": buffer.capture()})
                    recv_x, recv_topk_idx, recv_topk_weights, recv_list, handle, event = buffer.dispatch(**args)
                    event.current_stream_wait() if async_mode else ()
                    recv_x = per_token_cast_back(*recv_x) if isinstance(recv_x, tuple) else recv_x
                    recv_gbl_rank_prefix_sum = handle[-4]
                    assert gbl_num_tokens_per_rank[rank].item() == recv_x.size(0)
                    assert gbl_num_tokens_per_expert.view(num_ranks, -1)[rank].tolist() == recv_list
                    if not is_rand:
                        check_data(recv_x, recv_gbl_rank_prefix_sum)
                    # the internode handle (not in upstream's test): dtypes, shapes, and values
                    assert len(handle) == 10 and handle[0] is is_token_in_rank
                    assert [t.dtype for t in handle[1:]] == [torch.int32] * 6 + [torch.uint8] + [torch.int32] * 2
                    assert handle[1].shape == handle[3].shape == (num_nodes, num_sms // 2)
                    assert handle[2].shape == handle[5].shape == (num_ranks, num_sms // 2)
                    assert torch.equal(handle[1][:, -1], num_tokens_per_rdma_rank)
                    assert torch.equal(handle[2][:, -1], num_tokens_per_rank)
                    assert torch.equal(recv_gbl_rank_prefix_sum, torch.cumsum(sent[:, rank], 0).to(torch.int32))
                    rdma_from = to_node[peers, rank // NVL]
                    assert torch.equal(handle[3][:, -1], rdma_from)
                    assert torch.equal(handle[4], torch.cumsum(rdma_from, 0).to(torch.int32))
                    meta = handle[7].view(torch.int32)
                    assert handle[7].shape == (recv_x.size(0), 8)
                    assert torch.equal(meta[:, 0], torch.repeat_interleave(torch.arange(num_ranks) // NVL,
                                                                           sent[:, rank]).to(torch.int32))
                    assert bool(((meta[:, 1] >> (rank % NVL)) & 1).all())  # each token is for this rank
                    assert handle[8].shape == (num_tokens, num_nodes) and handle[9].shape == (int(handle[4][-1]), NVL)
                    node_ranks = torch.arange(NVL) + rank // NVL * NVL  # each local rank's forwarded tokens
                    assert torch.equal((handle[9] >= 0).sum(0), sent[peers][:, node_ranks].sum(0).to(torch.int64))
                    for r in range(num_nodes):
                        assert sorted(handle[8][:, r][handle[8][:, r] >= 0].tolist()) == sorted(
                            [i for c in range(num_sms // 2) for i in range(int(handle[1][r, c]) - (
                                int(handle[1][r, c - 1]) if c else 0))])
                    if with_topk:
                        assert (recv_topk_idx.eq(-1) | ((recv_topk_idx >= 0) & (recv_topk_idx < (
                            num_experts // num_ranks)))).sum().item() == recv_topk_idx.numel()
                        for i, count in enumerate(recv_list):
                            assert recv_topk_idx.eq(i).sum().item() == count
                        if not is_rand:
                            recv_topk_weights[recv_topk_idx.eq(-1)] = recv_topk_weights.amax(
                                dim=1, keepdim=True).expand_as(recv_topk_weights)[recv_topk_idx.eq(-1)]
                            check_data(recv_topk_weights, recv_gbl_rank_prefix_sum)
                    if not with_topk:
                        cached = {"x": current_x, "handle": handle, "config": config, "async_finish": async_mode}
                        if previous_mode:
                            cached.update({"previous_event": buffer.capture()})
                        recv_x, _, _, _, _, event = buffer.dispatch(**cached)
                        event.current_stream_wait() if async_mode else ()
                        recv_x = per_token_cast_back(*recv_x) if isinstance(recv_x, tuple) else recv_x
                        if not is_rand:
                            check_data(recv_x, recv_gbl_rank_prefix_sum)
                    bias_0 = torch.ones((num_tokens, hidden), dtype=torch.bfloat16)
                    bias_1 = torch.randn((num_tokens, hidden), dtype=torch.bfloat16)
                    combine_args = {"x": recv_x, "bias": (bias_0, bias_1), "handle": handle, "config": config,
                                    "async_finish": async_mode}
                    if with_topk:
                        combine_args.update({"topk_weights": recv_topk_weights})
                    if previous_mode:
                        combine_args.update({"previous_event": buffer.capture()})
                    combined_x, combined_topk_weights, event = buffer.combine(**combine_args)
                    event.current_stream_wait() if async_mode else ()
                    check_x = (combined_x.float() - bias_0.float() - bias_1.float()) / is_token_in_rank.sum(
                        dim=1).unsqueeze(1)
                    ref_x = x_pure_rand if is_rand else x
                    assert calc_diff(check_x, ref_x) < (5e-4 if current_x is x_pure_rand_e4m3 else 5e-5)
                    if with_topk:
                        check_topk_weights = combined_topk_weights if is_rand else (
                            combined_topk_weights / is_token_in_rank.sum(dim=1).unsqueeze(1))
                        ref_topk_weights = topk_weights_pure_rand if is_rand else topk_weights
                        assert calc_diff(check_topk_weights, ref_topk_weights) < 1e-9
                    checked += 1
    return {"checked": checked, "refusals": refusals(d, buffer, rank, num_ranks, hidden, config, x, args)}


def refusals(d, buffer, rank, num_ranks, hidden, config, x, args) -> dict:
    from epbuf.backends.deepep_v1.internode import get_nvl_clean_meta

    out = {"worst tokens": _refusal(lambda: buffer.dispatch(**{**args, "num_worst_tokens": 64}))}
    bad = args["num_tokens_per_rdma_rank"] if rank != 1 else args["num_tokens_per_rdma_rank"][:1].clone()
    out["rdma counts shape"] = _refusal(lambda: buffer.dispatch(**{**args, "num_tokens_per_rdma_rank": bad}))
    plain = {k: v for k, v in args.items() if k not in ("topk_idx", "topk_weights", "previous_event")}
    plain.update(x=x, async_finish=False)
    N, C = num_ranks // NVL, config.num_sms // 2
    need = sum(get_nvl_clean_meta(hidden * 2 // 16, 0, 0, 0, N, NVL, config.num_max_nvl_chunked_recv_tokens, C)) * 4
    need = -(-need // 128) * 128
    for name, size in (("nvl need", need), ("nvl need - 128", need - 128)):
        small = d.Buffer(dist.group.WORLD, size, 1 << 20)
        out[name] = _refusal(lambda small=small: small.dispatch(**plain))
    odd = d.Config(7, 8, 512, 16, 128)
    out["odd num_sms"] = _refusal(lambda: buffer.dispatch(**{**plain, "config": odd}))
    return out
