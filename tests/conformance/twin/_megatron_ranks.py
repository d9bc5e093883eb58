"""What each rank runs in test_megatron_fused_a2a.py: Megatron-LM's flex dispatcher DeepEP path
(``megatron/core/transformer/moe/fused_a2a.py``, megatron-core 0.16.1, unmodified) on the twin."""

from __future__ import annotations

import torch
import torch.distributed as dist

from _moe import NUM_EXPERTS, dense_reference, expert, expert_weights, routed_inputs


def megatron_layer(rank: int, num_ranks: int, num_tokens: int, async_finish: bool) -> dict:
    import epbuf.twin.deep_ep as twin

    twin.install()
    from megatron.core.transformer.moe import fused_a2a

    assert fused_a2a.HAVE_DEEP_EP and fused_a2a.fused_dispatch is not None
    group = dist.group.WORLD
    w1, w2 = expert_weights()
    x, idx, probs = routed_inputs(rank, num_tokens)
    x.requires_grad_(True)
    probs.requires_grad_(True)
    recv_x, recv_idx, recv_probs, tokens_per_expert, handle = fused_a2a.fused_dispatch(
        x, idx, probs, NUM_EXPERTS, group, async_finish=async_finish, allocate_on_comm_stream=async_finish)
    num_local = NUM_EXPERTS // num_ranks
    assert tokens_per_expert.tolist() == [int((recv_idx == e).sum()) for e in range(num_local)]
    partial = torch.zeros((recv_x.shape[0], recv_x.shape[1]), dtype=torch.float32)
    for e in range(num_local):
        rows, slot = (recv_idx == e).nonzero(as_tuple=True)
        if rows.numel():
            y = expert(recv_x[rows], rank * num_local + e, w1, w2) * recv_probs[rows, slot].unsqueeze(1)
            partial = partial.index_add(0, rows, y)
    combined, _ = fused_a2a.fused_combine(partial.to(torch.bfloat16), group, handle, async_finish=async_finish,
                                          allocate_on_comm_stream=async_finish)
    grad_out = torch.linspace(-1, 1, combined.numel()).view_as(combined)
    (combined.float() * grad_out).sum().backward()
    # the dense reference, on fresh leaves
    rx, rp = x.detach().clone().requires_grad_(True), probs.detach().clone().requires_grad_(True)
    ref = dense_reference(rx, idx, rp, w1, w2)
    (ref * grad_out).sum().backward()
    torch.testing.assert_close(combined.float(), ref, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(x.grad.float(), rx.grad.float(), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(probs.grad, rp.grad, rtol=2e-2, atol=2e-2)
    return {"tokens": num_tokens, "received": int(recv_x.shape[0]), "dtype": str(combined.dtype),
            "max |out - ref|": float((combined.float() - ref).abs().max()),
            "max |dx - ref|": float((x.grad.float() - rx.grad.float()).abs().max())}
