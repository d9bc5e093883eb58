"""What each rank runs in test_vllm_deepep.py: vLLM 0.33.0's DeepEP prepare/finalize
(``vllm/model_executor/layers/fused_moe/prepare_finalize/deepep_ll.py`` and ``deepep_ht.py``,
unmodified) on the twin installed as ``deep_ep``, with a small MoE layer's experts."""

from __future__ import annotations

import torch
import torch.distributed as dist

from _moe import dense_reference, expert, expert_weights, routed_inputs

HIDDEN = 2048  # DeepEPLLPrepareAndFinalize.SUPPORTED_HIDDEN_SIZES starts at 2048
NUM_EXPERTS, TOPK = 8, 2


def _cos_diff(x, y) -> float:
    x, y = x.double() + 1, y.double() + 1
    return (1 - 2 * (x * y).sum() / (x * x + y * y).sum()).item()


def _setup():
    import epbuf.twin.deep_ep as twin

    twin.install()
    import _vllm_standins

    _vllm_standins.install()
    from vllm.model_executor.layers.fused_moe import config as moe_config
    from vllm.model_executor.layers.fused_moe.topk_weight_and_reduce import TopKWeightAndReduceDelegate

    return twin, moe_config, TopKWeightAndReduceDelegate


def low_latency(rank: int, num_ranks: int, num_tokens: int, max_tokens: int) -> dict:
    twin, moe_config, Delegate = _setup()
    from vllm.model_executor.layers.fused_moe.prepare_finalize.deepep_ll import DeepEPLLPrepareAndFinalize

    group = dist.group.WORLD
    w1, w2 = expert_weights(NUM_EXPERTS, HIDDEN)
    x, idx, probs = routed_inputs(rank, num_tokens, NUM_EXPERTS, TOPK, HIDDEN)
    idx[0, 1] = -1  # a slot with no expert
    ref = dense_reference(x, idx, probs, w1, w2)
    L = NUM_EXPERTS // num_ranks
    hint = twin.Buffer.get_low_latency_rdma_size_hint(max_tokens, HIDDEN, num_ranks, NUM_EXPERTS)
    buffer = twin.Buffer(group, 0, hint, low_latency_mode=True, num_qps_per_rank=L)
    out = {}
    for fp8, use_async in ((False, False), (True, False), (False, True), (True, True)):
        pf = DeepEPLLPrepareAndFinalize(buffer, max_tokens_per_rank=max_tokens, num_dispatchers=num_ranks,
                                        use_fp8_dispatch=fp8)
        qc = (moe_config.fp8_w8a8_moe_quant_config(w1_scale=torch.ones(1), w2_scale=torch.ones(1),
                                                   block_shape=[128, 128])
              if fp8 else moe_config.FUSED_MOE_UNQUANTIZED_CONFIG)
        if use_async:
            hook, receiver = pf.prepare_async(x, probs, idx, NUM_EXPERTS, None, False, qc)
            hook()
            expert_x, expert_x_scale, meta, _, _ = receiver()
        else:
            expert_x, expert_x_scale, meta, _, _ = pf.prepare(x, probs, idx, NUM_EXPERTS, None, False, qc)
        assert expert_x.shape == (L, num_ranks * max_tokens, HIDDEN)
        fused = torch.zeros((L, num_ranks * max_tokens, HIDDEN), dtype=torch.bfloat16)
        for e in range(L):
            n = int(meta.expert_num_tokens[e])
            rows = expert_x[e, :n]
            if fp8:
                scales = expert_x_scale[e, :n].contiguous()
                rows = (rows.float().view(n, -1, 128) * scales.view(n, -1, 1)).view(n, HIDDEN)
            fused[e, :n] = expert(rows, rank * L + e, w1, w2).to(torch.bfloat16)
        output = torch.empty((num_tokens, HIDDEN), dtype=torch.bfloat16)
        if use_async:
            recv_hook, finish = pf.finalize_async(output, fused, probs, idx, False, Delegate())
            recv_hook()
            finish()
        else:
            pf.finalize(output, fused, probs, idx, False, Delegate())
        diff = _cos_diff(output.float(), ref)
        if not fp8:
            torch.testing.assert_close(output.float(), ref, rtol=2e-2, atol=2e-2)
        assert diff < (2e-3 if fp8 else 1e-5), diff
        out[f"{'fp8' if fp8 else 'bf16'}{' async' if use_async else ''}"] = diff
    return out


def high_throughput(rank: int, num_ranks: int, num_tokens: int) -> dict:
    twin, moe_config, Delegate = _setup()
    from vllm.model_executor.layers.fused_moe.prepare_finalize.deepep_ht import DeepEPHTPrepareAndFinalize

    group = dist.group.WORLD
    w1, w2 = expert_weights(NUM_EXPERTS, HIDDEN)
    x, idx, probs = routed_inputs(rank, num_tokens, NUM_EXPERTS, TOPK, HIDDEN)
    ref = dense_reference(x, idx, probs, w1, w2)
    L = NUM_EXPERTS // num_ranks
    hidden_bytes = HIDDEN * 2
    num_nvl_bytes = max(cfg.get_nvl_buffer_size_hint(hidden_bytes, num_ranks) for cfg in (
        twin.Buffer.get_dispatch_config(num_ranks), twin.Buffer.get_combine_config(num_ranks)))
    buffer = twin.Buffer(group, num_nvl_bytes, 0)
    out = {}
    for use_async in (False, True):
        pf = DeepEPHTPrepareAndFinalize(buffer, num_dispatchers=num_ranks, dp_size=1, rank_expert_offset=rank * L)
        qc = moe_config.FUSED_MOE_UNQUANTIZED_CONFIG
        if use_async:
            expert_x, _, meta, topk_ids, topk_weights = pf.prepare_async(x, probs, idx, NUM_EXPERTS, None, False,
                                                                         qc)()
        else:
            expert_x, _, meta, topk_ids, topk_weights = pf.prepare(x, probs, idx, NUM_EXPERTS, None, False, qc)
        assert meta.expert_num_tokens_cpu.tolist() == [int(((topk_ids == rank * L + e) & (topk_weights != 0)).sum())
                                                       for e in range(L)]
        fused = torch.zeros((expert_x.shape[0], TOPK, HIDDEN), dtype=torch.bfloat16)
        for e in range(L):
            rows, slot = ((topk_ids == rank * L + e) & (topk_weights != 0)).nonzero(as_tuple=True)
            if rows.numel():
                fused[rows, slot] = expert(expert_x[rows], rank * L + e, w1, w2).to(torch.bfloat16)
        output = torch.empty((num_tokens, HIDDEN), dtype=torch.bfloat16)
        if use_async:
            pf.finalize_async(output, fused, topk_weights, topk_ids, False, Delegate())()
        else:
            pf.finalize(output, fused, topk_weights, topk_ids, False, Delegate())
        torch.testing.assert_close(output.float(), ref, rtol=2e-2, atol=2e-2)
        out["async" if use_async else "sync"] = _cos_diff(output.float(), ref)
    return out


def both(rank: int, num_ranks: int) -> dict:
    return {"ll": low_latency(rank, num_ranks, 6, 8), "ht": high_throughput(rank, num_ranks, 12)}
