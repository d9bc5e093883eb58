"""The small MoE layer the conformance tests run through each engine's dispatch/combine on the
twin, and its dense single-process reference (every expert on every token it selects)."""

from __future__ import annotations

import torch

HIDDEN, NUM_EXPERTS, TOPK, FFN = 256, 8, 2, 64


def expert_weights(num_experts: int = NUM_EXPERTS, hidden: int = HIDDEN, ffn: int = FFN):
    """The same weights on every rank (seeded): ``w1 [E, hidden, ffn]``, ``w2 [E, ffn, hidden]``."""
    g = torch.Generator().manual_seed(1234)
    w1 = torch.randn((num_experts, hidden, ffn), generator=g) / hidden ** 0.5
    w2 = torch.randn((num_experts, ffn, hidden), generator=g) / ffn ** 0.5
    return w1, w2


def expert(x, e: int, w1, w2):
    """``silu(x @ w1[e]) @ w2[e]`` in fp32."""
    return torch.nn.functional.silu(x.float() @ w1[e]) @ w2[e]


def routed_inputs(rank: int, num_tokens: int, num_experts: int = NUM_EXPERTS, topk: int = TOPK,
                  hidden: int = HIDDEN):
    """A rank's tokens (BF16), top-k expert ids (int64, distinct per token) and fp32 weights."""
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn((num_tokens, hidden), generator=g).to(torch.bfloat16)
    scores = torch.randn((num_tokens, num_experts), generator=g)
    probs, idx = torch.topk(scores.softmax(-1), topk, dim=-1)
    return x, idx.to(torch.int64), probs.float()


def dense_reference(x, idx, probs, w1, w2):
    """``sum_k probs[t, k] * expert(idx[t, k])(x[t])`` per token, fp32."""
    out = torch.zeros((x.shape[0], x.shape[1]), dtype=torch.float32)
    for t in range(x.shape[0]):
        for k in range(idx.shape[1]):
            e = int(idx[t, k])
            if e >= 0:
                out[t] += probs[t, k] * expert(x[t:t + 1], e, w1, w2)[0]
    return out
