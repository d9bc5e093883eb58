"""Expert-packed dispatch and combine: tokens land in ``[num_local_experts, capacity, hidden]``
(DeepEP's low-latency layout; pplx and MORI pack per expert too).

Dispatch: every rank shows the others how many ``(token, k)`` pairs it sends to each expert
(the agreement row), so every rank knows, for each of its local experts, how many rows each
source sends and where they go: source ``j``'s rows for local expert ``e`` occupy slots
``begin[j, e] .. begin[j, e] + count[j, e] - 1`` of that expert, sources in rank order, each
source's rows in token order. Combine sends each slot's row back to its source, which sums
the rows of each token weighted by its top-k weights (fp32, then the output dtype).

FP8: :func:`cast_fp8` is the low-latency kernel's cast (``csrc/kernels/legacy/internode_ll.cu:
219-243``, ``utils.cuh:477-512 @dd758ca``): per 128 channels ``amax = max(1e-4, max |x|)``,
``scale_inv = amax / 448`` and codes ``e4m3(x * 448 / amax)`` (saturating); with ``round_scale``
``scale_inv = 2^ceil(log2(amax / 448))``; UE8M0 keeps the exponent byte of ``scale_inv``.
"""

from __future__ import annotations

from ._engine import Pending
from ._engine_records import ExpertRoute, pack_rows, reduce_rows, unpack_rows

__all__ = ["cast_fp8", "ue8m0_pack", "slots_of", "ExpertRoute", "send_expert_rows", "reduce_weighted"]

_E4M3_MAX = 448.0


def cast_fp8(torch, x, round_scale: bool):
    """``(codes float8_e4m3fn [n, hidden], scale_inv float32 [n, hidden / 128])`` of BF16 ``x``."""
    n, hidden = int(x.shape[0]), int(x.shape[1])
    xf = x.float().view(n, hidden // 128, 128)
    amax = xf.abs().amax(dim=2).clamp_min(1e-4)
    if round_scale:
        bits = (amax * (1.0 / _E4M3_MAX)).view(torch.int32)
        exponent = ((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0).to(torch.int32)
        scale_inv = ((exponent + 127) << 23).view(torch.float32)
        scale = ((127 - exponent) << 23).view(torch.float32)
    else:
        scale_inv = amax * (1.0 / _E4M3_MAX)
        scale = _E4M3_MAX / amax
    codes = (xf * scale.unsqueeze(2)).clamp_(-_E4M3_MAX, _E4M3_MAX).to(torch.float8_e4m3fn)
    return codes.view(n, hidden), scale_inv


def ue8m0_pack(torch, scale_inv):
    """Each fp32 scale's exponent byte (``bits >> 23``), four to an ``int32`` (``[n, S / 4]``)."""
    n = int(scale_inv.shape[0])
    exponent = (scale_inv.contiguous().view(torch.int32) >> 23).to(torch.uint8)
    return exponent.view(n, -1).view(torch.int32)


def slots_of(torch, begin, count, capacity: int):
    """The flat slot (``expert * capacity + position``) of every row, source-major, then expert,
    then position: ``begin`` and ``count`` are ``[num_sources, num_local_experts]``."""
    counts = count.reshape(-1)
    total = int(counts.sum())
    local = torch.arange(int(begin.shape[1]), dtype=torch.int64) * capacity
    base = (local.unsqueeze(0) + begin).reshape(-1)
    run_start = torch.cumsum(counts, 0) - counts
    return torch.repeat_interleave(base - run_start, counts, output_size=total) + torch.arange(total)


def send_expert_rows(engine, layout, route: ExpertRoute, recv_counts, what: str, key, **fields) -> Pending:
    """Pack each routed pair's token row of ``fields`` (``route.token``) into scratch and start
    the exchange (``key``: the scratch pair this call uses, ``(name, parity)``)."""
    torch = engine.torch
    num_rows = int(route.pair.shape[0])
    send = pack_rows(torch, layout, num_rows, route.token, out=engine.scratch(key + ("send",),
                                                                               num_rows * layout.num_bytes), **fields)
    return engine.exchange(send, route.per_rank.tolist(), recv_counts, what, key=key + ("recv",))


def reduce_weighted(engine, layout, recv, route: ExpertRoute, topk_weights, num_tokens: int, out):
    """``sum_k w[t, k] * row(t, k)`` in fp32 per token, cast into ``out``."""
    rows = unpack_rows(layout, recv, ("hidden",))["hidden"]
    weights = topk_weights.reshape(-1)[route.pair]
    return reduce_rows(engine, rows, route.token, num_tokens, weights=weights, out=out)
