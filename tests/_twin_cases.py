"""What each rank runs in tests/test_twin_deep_ep.py (spawned by run_gloo, so importable by name).

The checks are DeepEP's own (``tests/legacy/test_low_latency.py`` and ``test_intranode.py``
@dd758ca): the same inputs, the same assertions, the same tolerances, written against the
twin as ``deep_ep``. The FP8 helpers below compute what ``deep_ep.utils.math``'s do.
"""

from __future__ import annotations

import os
import random
import time

import torch
import torch.distributed as dist


def deep_ep():
    import epbuf.twin.deep_ep as twin

    twin.install()
    import deep_ep as module

    return module


def calc_diff(x, y) -> float:
    """1 - the cosine-like similarity of ``x + 1`` and ``y + 1`` in float64 (DeepEP's ``calc_diff``)."""
    x, y = x.double() + 1, y.double() + 1
    return (1 - 2 * (x * y).sum() / (x * x + y * y).sum()).item()


def per_token_cast_to_fp8(x):
    """Per-128-channel e4m3 codes and fp32 scales ``amax / 448`` (amax clamped to 1e-4)."""
    m, n = x.shape
    blocks = x.float().view(m, -1, 128)
    amax = blocks.abs().amax(dim=2).clamp(1e-4)
    codes = (blocks * (448.0 / amax.unsqueeze(2))).to(torch.float8_e4m3fn).view(m, n)
    return codes, amax / 448.0


def per_token_cast_back(codes, scales):
    """Codes times their block's scale, BF16; int32 scales are UE8M0 bytes, four to an int."""
    if codes.numel() == 0:
        return codes.to(torch.bfloat16)
    if scales.dtype == torch.int32:
        packed = torch.empty(scales.shape, dtype=scales.dtype).copy_(scales)  # stride 1 in the last dimension
        scales = (packed.view(torch.uint8).to(torch.int32) << 23).view(torch.float32)
    m, n = codes.shape
    return (codes.float().view(m, -1, 128) * scales.reshape(m, -1, 1)).view(m, n).to(torch.bfloat16)


# --- low latency ---------------------------------------------------------------------------
def low_latency(rank: int, num_ranks: int, num_tokens: int, hidden: int, num_experts: int, num_topk: int) -> dict:
    d = deep_ep()
    group = dist.group.WORLD
    hint = d.Buffer.get_low_latency_rdma_size_hint(num_tokens, hidden, num_ranks, num_experts)
    buffer = d.Buffer(group, 0, hint, low_latency_mode=True, num_qps_per_rank=num_experts // num_ranks)
    torch.manual_seed(rank)
    random.seed(rank)
    num_local_experts = num_experts // num_ranks
    rank_offset = 128
    x = torch.ones((num_tokens, hidden), dtype=torch.bfloat16) * (rank - rank_offset)
    x[:, -128:] = torch.arange(num_tokens).to(torch.bfloat16).view(-1, 1)
    x_list = [x, torch.randn((num_tokens, hidden), dtype=torch.bfloat16) * 0.1]
    scores = torch.randn((num_tokens, num_experts), dtype=torch.float32).abs() + 1
    topk_idx = torch.topk(scores, num_topk, dim=-1, largest=True, sorted=True)[1].to(d.topk_idx_t)
    topk_weights = torch.randn((num_tokens, num_topk), dtype=torch.float32).abs()
    for _ in range(10):
        topk_idx[random.randint(0, num_tokens - 1), random.randint(0, num_topk - 1)] = -1
    all_topk_idx = torch.empty((num_ranks, num_tokens, num_topk), dtype=topk_idx.dtype)
    dist.all_gather_into_tensor(all_topk_idx.view(-1, num_topk), topk_idx, group=group)
    int_mask = (2 ** 32) - 1
    checked = {"dispatch": 0, "combine": 0, "hook empty before": 0}
    for current_x in x_list:
        for return_recv_hook in (False, True):
            for use_fp8 in (False, True):
                for round_scale in (False, True) if use_fp8 else (False,):
                    for use_ue8m0 in (False, True) if round_scale else (False,):
                        stats = torch.zeros((num_local_experts,), dtype=torch.int)
                        packed_recv_x, packed_recv_count, handle, event, hook = buffer.low_latency_dispatch(
                            current_x, topk_idx, num_tokens, num_experts, use_fp8=use_fp8, round_scale=round_scale,
                            use_ue8m0=use_ue8m0, cumulative_local_expert_recv_stats=stats,
                            async_finish=not return_recv_hook, return_recv_hook=return_recv_hook)
                        if return_recv_hook:
                            assert hook is not None and int(packed_recv_count.sum()) == 0
                            checked["hook empty before"] += 1
                            hook()
                        else:
                            assert hook is None
                            event.current_stream_wait()
                        capacity = num_ranks * num_tokens
                        if use_fp8:
                            codes, scales = packed_recv_x
                            assert codes.dtype == torch.float8_e4m3fn and codes.shape == (num_local_experts, capacity,
                                                                                          hidden)
                            columns = hidden // 512 if use_ue8m0 else hidden // 128
                            assert scales.dtype == (torch.int32 if use_ue8m0 else torch.float32)
                            assert scales.shape == (num_local_experts, capacity, columns)
                            assert scales.stride(1) == 1  # column-major in the last two dimensions (TMA)
                            packed_recv_x = (codes, scales.contiguous())
                            gemm_x = torch.stack([per_token_cast_back(codes[i], packed_recv_x[1][i])
                                                  for i in range(num_local_experts)])
                        else:
                            assert packed_recv_x.dtype == torch.bfloat16
                            assert packed_recv_x.shape == (num_local_experts, capacity, hidden)
                            gemm_x = packed_recv_x.clone()
                        assert packed_recv_count.dtype == torch.int32
                        assert packed_recv_count.shape == (num_local_experts,)
                        assert handle[0].dtype == torch.int32 and handle[0].shape == (num_local_experts, capacity)
                        assert handle[1].dtype == torch.int64 and handle[1].shape == (num_local_experts, num_ranks)
                        for i in range(num_local_experts):
                            expert_id = rank * num_local_experts + i
                            recv_x = gemm_x[i]
                            recv_count, recv_src_info, recv_layout_range = packed_recv_count[i], handle[0][i], \
                                handle[1][i]
                            num_valid_tokens = recv_count.item()
                            assert stats[i].item() == num_valid_tokens
                            assert num_valid_tokens == (recv_layout_range & int_mask).sum().item()
                            assert num_valid_tokens == (all_topk_idx == expert_id).sum().item()
                            if num_valid_tokens == 0 or current_x is not x:
                                continue
                            recv_x = recv_x[:num_valid_tokens]
                            recv_x_amin = recv_x[:, :-128].amin(dim=-1)
                            recv_src_info = recv_src_info[:num_valid_tokens]
                            assert torch.equal(recv_x_amin, recv_x[:, :-128].amax(dim=-1))
                            if round_scale:
                                assert calc_diff(recv_x[:, -1], recv_src_info.view(-1)) < 0.007
                            else:
                                assert (recv_x[:, -128:] - recv_src_info.view(-1, 1) % num_tokens).sum().item() == 0
                            for j in range(num_ranks):
                                begin_idx = (recv_layout_range[j] >> 32).item()
                                count = (recv_layout_range[j] & int_mask).item()
                                if not round_scale:
                                    assert (recv_x_amin == j - rank_offset).sum().item() == \
                                        (all_topk_idx[j] == expert_id).sum().item()
                                    assert (recv_x[begin_idx:begin_idx + count, :-128] - j + rank_offset).sum() == 0
                        checked["dispatch"] += 1
                        for zero_copy in (False, True):
                            if zero_copy:
                                buffer.get_next_low_latency_combine_buffer(handle)[:, :, :] = gemm_x
                            out = torch.empty((num_tokens, hidden), dtype=torch.bfloat16)
                            combined_x, event, hook = buffer.low_latency_combine(
                                gemm_x, topk_idx, topk_weights, handle, async_finish=not return_recv_hook,
                                zero_copy=zero_copy, return_recv_hook=return_recv_hook, out=out)
                            hook() if return_recv_hook else event.current_stream_wait()
                            assert combined_x is out
                            weight_sums = topk_weights.masked_fill(topk_idx == -1, 0).sum(dim=1).view(-1, 1)
                            diff = calc_diff(current_x * weight_sums, combined_x)
                            assert torch.isnan(combined_x).sum().item() == 0
                            if not round_scale:
                                assert diff < (9e-4 if use_fp8 else 1e-5), f"{diff=}, {use_fp8=}, {zero_copy=}"
                            checked["combine"] += 1
    return checked


# --- normal (intranode) --------------------------------------------------------------------
def intranode(rank: int, num_ranks: int, num_tokens: int, hidden: int, num_experts: int, num_topk: int) -> dict:
    d = deep_ep()
    group = dist.group.WORLD
    num_sms = 24
    config = d.Config(num_sms, 8, 256)
    num_nvl_bytes = max(cfg.get_nvl_buffer_size_hint(hidden * 2, num_ranks) for cfg in (
        config, d.Buffer.get_dispatch_config(num_ranks), d.Buffer.get_combine_config(num_ranks)))
    buffer = d.Buffer(group, num_nvl_bytes, 0)
    torch.manual_seed(rank)
    x = torch.ones((num_tokens, hidden), dtype=torch.bfloat16) * rank
    x_pure_rand = torch.randn((num_tokens, hidden), dtype=torch.bfloat16)
    x_e4m3 = per_token_cast_to_fp8(x)
    x_e4m3 = (x_e4m3[0], x_e4m3[1].T.contiguous().T)
    scores = torch.randn((num_tokens, num_experts), dtype=torch.float32).abs() + 1
    topk_idx = torch.topk(scores, num_topk, dim=-1, largest=True, sorted=False)[1].to(d.topk_idx_t)
    topk_weights = torch.ones((num_tokens, num_topk), dtype=torch.float32) * rank
    topk_weights_pure_rand = torch.randn((num_tokens, num_topk), dtype=torch.float32)
    rank_idx = topk_idx // (num_experts // num_ranks)
    rank_idx.masked_fill_(topk_idx == -1, -1)
    num_tokens_per_expert = torch.zeros((num_experts,), dtype=torch.int)
    for i in range(num_experts):
        num_tokens_per_expert[i] = (topk_idx == i).sum()
    gbl_num_tokens_per_expert = num_tokens_per_expert.clone()
    dist.all_reduce(gbl_num_tokens_per_expert, group=group)
    num_tokens_per_rank = torch.empty((num_ranks,), dtype=torch.int)
    is_token_in_rank = torch.zeros((num_tokens, num_ranks), dtype=torch.bool)
    for i in range(num_ranks):
        is_token_in_rank[:, i] = (rank_idx == i).any(dim=1)
        num_tokens_per_rank[i] = is_token_in_rank[:, i].sum()
    gbl_num_tokens_per_rank = num_tokens_per_rank.clone()
    dist.all_reduce(gbl_num_tokens_per_rank, group=group)
    ref_per_rank, ref_per_rdma, ref_per_expert, ref_in_rank, _ = buffer.get_dispatch_layout(topk_idx, num_experts)
    assert ref_per_rdma is None and ref_per_rank.dtype == torch.int32 and ref_in_rank.dtype == torch.bool
    assert torch.allclose(ref_per_rank, num_tokens_per_rank)
    assert torch.allclose(ref_per_expert, num_tokens_per_expert)
    assert torch.equal(ref_in_rank, is_token_in_rank)

    def check_data(check_x, rank_prefix_matrix):
        assert torch.allclose(check_x.amin(dim=1), check_x.amax(dim=1))
        check_start = 0
        for i in range(num_ranks):
            check_end = rank_prefix_matrix[i][rank].item()
            assert (check_x[check_start:check_end, :].int() - i).sum().item() == 0
            check_start = check_end

    checked = 0
    for previous_mode in (False, True):
        for async_mode in (False, True):
            for current_x in (x_pure_rand, x, x_e4m3):
                for with_topk in (False, True):
                    args = {"x": current_x, "num_tokens_per_rank": num_tokens_per_rank,
                            "is_token_in_rank": is_token_in_rank, "num_tokens_per_expert": num_tokens_per_expert,
                            "config": config, "async_finish": async_mode}
                    if with_topk:
                        args.update({"topk_idx": topk_idx, "topk_weights": topk_weights_pure_rand
                                     if current_x is x_pure_rand else topk_weights})
                    if previous_mode:
                        args.update({"previous_event": buffer.capture()})
                    recv_x, recv_topk_idx, recv_topk_weights, recv_list, handle, event = buffer.dispatch(**args)
                    event.current_stream_wait() if async_mode else ()
                    if isinstance(current_x, tuple):
                        assert recv_x[0].dtype == torch.float8_e4m3fn and recv_x[1].dtype == torch.float32
                        assert recv_x[1].shape == (recv_x[0].shape[0], hidden // 128)
                    recv_x = per_token_cast_back(*recv_x) if isinstance(recv_x, tuple) else recv_x
                    rank_prefix_matrix = handle[0]
                    assert [t.dtype for t in handle] == [torch.int32] * 4 + [torch.bool, torch.int32]
                    assert handle[1].shape == handle[2].shape == (num_ranks, num_sms // 2)
                    assert gbl_num_tokens_per_rank[rank].item() == recv_x.size(0)
                    assert gbl_num_tokens_per_expert.view(num_ranks, -1)[rank].tolist() == recv_list
                    if current_x is not x_pure_rand:
                        check_data(recv_x, rank_prefix_matrix)
                    recv_topk_weights_clone = None
                    if with_topk:
                        assert (recv_topk_idx.eq(-1) | ((recv_topk_idx >= 0) & (recv_topk_idx < (
                            num_experts // num_ranks)))).sum().item() == recv_topk_idx.numel()
                        for i, count in enumerate(recv_list):
                            assert recv_topk_idx.eq(i).sum().item() == count
                        recv_topk_weights_clone = recv_topk_weights.clone()
                        if current_x is not x_pure_rand:
                            recv_topk_weights[recv_topk_idx.eq(-1)] = recv_topk_weights.amax(
                                dim=1, keepdim=True).expand_as(recv_topk_weights)[recv_topk_idx.eq(-1)]
                            check_data(recv_topk_weights, rank_prefix_matrix)
                        worst = num_tokens * num_ranks
                        w_x, w_idx, w_weights, empty_list, _, event = buffer.dispatch(**args, num_worst_tokens=worst)
                        event.current_stream_wait() if async_mode else ()
                        w_x = per_token_cast_back(*w_x) if isinstance(w_x, tuple) else w_x
                        assert len(empty_list) == 0
                        assert worst == w_x.size(0) == w_idx.size(0) == w_weights.size(0)
                        assert torch.equal(recv_x, w_x[:recv_x.size(0)])
                        assert torch.equal(recv_topk_idx, w_idx[:recv_x.size(0)])
                        assert torch.equal(recv_topk_weights_clone, w_weights[:recv_x.size(0)])
                        assert torch.all(w_idx[recv_x.size(0):] == -1).item()
                    if not with_topk:
                        cached = {"x": current_x, "handle": handle, "config": config, "async_finish": async_mode}
                        if previous_mode:
                            cached.update({"previous_event": buffer.capture()})
                        recv_x, _, _, _, _, event = buffer.dispatch(**cached)
                        event.current_stream_wait() if async_mode else ()
                        recv_x = per_token_cast_back(*recv_x) if isinstance(recv_x, tuple) else recv_x
                        if current_x is not x_pure_rand:
                            check_data(recv_x, rank_prefix_matrix)
                    combine_args = {"x": recv_x, "handle": handle, "config": config, "async_finish": async_mode}
                    if with_topk:
                        combine_args.update({"topk_weights": recv_topk_weights})
                    if previous_mode:
                        combine_args.update({"previous_event": buffer.capture()})
                    combined_x, combined_topk_weights, event = buffer.combine(**combine_args)
                    event.current_stream_wait() if async_mode else ()
                    check_x = combined_x.float() / is_token_in_rank.sum(dim=1).unsqueeze(1)
                    ref_x = x_pure_rand if current_x is x_pure_rand else x
                    assert calc_diff(check_x, ref_x) < 5e-6
                    if with_topk:
                        check_topk_weights = combined_topk_weights if current_x is x_pure_rand else (
                            combined_topk_weights / is_token_in_rank.sum(dim=1).unsqueeze(1))
                        ref_topk_weights = topk_weights_pure_rand if current_x is x_pure_rand else topk_weights
                        assert calc_diff(check_topk_weights, ref_topk_weights) < 1e-9
                    checked += 1
    # A held result is never reused for a later call's output (the twin pools outputs nobody holds).
    recv_x, _, recv_w, _, handle, _ = buffer.dispatch(x_pure_rand, num_tokens_per_rank=num_tokens_per_rank,
                                                      is_token_in_rank=is_token_in_rank,
                                                      num_tokens_per_expert=num_tokens_per_expert,
                                                      topk_idx=topk_idx, topk_weights=topk_weights_pure_rand)
    first = buffer.combine(recv_x, handle)[0]
    view_of_second = buffer.combine(recv_x * 2, handle)[0][:1]
    snapshot = first.clone()
    third = buffer.combine(recv_x * 3, handle)[0]
    assert torch.equal(first, snapshot) and third.data_ptr() not in (first.data_ptr(), view_of_second.data_ptr())
    assert torch.equal(view_of_second, (first[:1].float() * 2).to(torch.bfloat16))
    return {"checked": checked}


# --- refusals ------------------------------------------------------------------------------
def _refusal(call) -> str:
    started = time.monotonic()
    try:
        call()
    except Exception as error:  # the one exception every rank raises
        return f"{type(error).__name__}: {error} [{time.monotonic() - started:.1f} s]"
    return "accepted"


def refusals(rank: int, num_ranks: int) -> dict:
    """Each case runs on every rank; a rank-specific argument is hostile on rank 1 only."""
    d = deep_ep()
    from epbuf.backends.deepep_v1 import LowLatencyLayout, intranode_dispatch_nvl_bytes

    group = dist.group.WORLD
    T, hidden, E, K = 8, 512, 4 * num_ranks, 2
    total = LowLatencyLayout(T, hidden, num_ranks, E).total_bytes
    smallest = -(-total // 128) * 128
    torch.manual_seed(rank)
    x = torch.randn((T, hidden), dtype=torch.bfloat16)
    topk = torch.topk(torch.randn(T, E), K, dim=-1)[1]
    out: dict = {"total": total}

    def ll(num_bytes, xx=x, tt=topk, **kw):
        buffer = d.Buffer(group, 0, num_bytes, low_latency_mode=True, num_qps_per_rank=1)
        recv, count, handle, _, _ = buffer.low_latency_dispatch(xx, tt, T, E, **kw)
        return int(count.sum())

    out["smallest"] = _refusal(lambda: ll(smallest))
    out["smallest - 128"] = _refusal(lambda: ll(smallest - 128))
    out["hint - 128"] = _refusal(lambda: ll(d.Buffer.get_low_latency_rdma_size_hint(T, hidden, num_ranks, E) - 128))
    out["unaligned"] = _refusal(lambda: ll(smallest + 64))
    too_many = torch.randn((T + 1, hidden), dtype=torch.bfloat16)
    too_many_idx = torch.zeros((T + 1, K), dtype=torch.int64)
    out["tokens > T"] = _refusal(lambda: ll(smallest, *((too_many, too_many_idx) if rank == 1 else (x, topk))))
    out["float32 x"] = _refusal(lambda: ll(smallest, x.float() if rank == 1 else x))
    out["int32 topk"] = _refusal(lambda: ll(smallest, x, topk.int() if rank == 1 else topk))
    bad = topk.clone()
    bad[0, 0] = E
    out["expert id out of range"] = _refusal(lambda: ll(smallest, x, bad if rank == 1 else topk))
    out["ue8m0 without round_scale"] = _refusal(lambda: ll(smallest, use_fp8=True, use_ue8m0=True))
    # normal mode: the NVL bytes the dispatch assert needs, to the byte (rounded to 128 for the constructor)
    config = d.Config(24, 8, 256)
    need = intranode_dispatch_nvl_bytes(config, num_ranks, hidden * 2, K, 0)
    ntr, _, nte, itr, _ = d.Buffer(group, 128, 0).get_dispatch_layout(topk, E)

    def normal(num_bytes, **kw):
        buffer = d.Buffer(group, num_bytes, 0)
        recv_x = buffer.dispatch(x, num_tokens_per_rank=ntr, is_token_in_rank=itr, num_tokens_per_expert=nte,
                                 topk_idx=topk, topk_weights=torch.ones(T, K), config=config, **kw)[0]
        return int(recv_x.shape[0])

    out["nvl need"] = need
    out["nvl smallest"] = _refusal(lambda: normal(-(-need // 128) * 128))
    out["nvl smallest - 128"] = _refusal(lambda: normal(-(-need // 128) * 128 - 128))
    out["odd num_sms"] = _refusal(lambda: d.Buffer(group, -(-need // 128) * 128, 0).dispatch(
        x, num_tokens_per_rank=ntr, is_token_in_rank=itr, num_tokens_per_expert=nte, config=d.Config(23, 8, 256)))
    out["rdma bytes without low latency"] = _refusal(lambda: d.Buffer(group, 0, 1 << 20))
    wrong = ntr.clone()
    wrong[0] += 1
    out["num_tokens_per_rank disagrees"] = _refusal(lambda: normal(-(-need // 128) * 128) if rank == 0 else
                                                    d.Buffer(group, -(-need // 128) * 128, 0).dispatch(
        x, num_tokens_per_rank=wrong, is_token_in_rank=itr, num_tokens_per_expert=nte, topk_idx=topk,
        topk_weights=torch.ones(T, K), config=config))
    return out


def dead_peer(rank: int, num_ranks: int) -> dict:
    d = deep_ep()
    T, hidden, E = 8, 512, 4 * num_ranks
    buffer = d.Buffer(dist.group.WORLD, 0, d.Buffer.get_low_latency_rdma_size_hint(T, hidden, num_ranks, E),
                      low_latency_mode=True, num_qps_per_rank=1)
    if rank == 1:
        os._exit(0)
    x = torch.randn((T, hidden), dtype=torch.bfloat16)
    topk = torch.topk(torch.randn(T, E), 2, dim=-1)[1]
    out = {"dispatch": _refusal(lambda: buffer.low_latency_dispatch(x, topk, T, E))}
    out["after"] = _refusal(lambda: buffer.low_latency_dispatch(x, topk, T, E))
    return out


def everything(rank: int, num_ranks: int, ll_shape: tuple, normal_shape: tuple, die: bool) -> dict:
    """One spawn, many cases (each spawn costs a torch import per rank): low latency, intranode,
    the refusals, then (``die``) rank 1 exits and the others see a dead peer."""
    out = {"low_latency": low_latency(rank, num_ranks, *ll_shape),
           "intranode": intranode(rank, num_ranks, *normal_shape), "refusals": refusals(rank, num_ranks)}
    if die:
        out["dead peer"] = dead_peer(rank, num_ranks)
    return out
