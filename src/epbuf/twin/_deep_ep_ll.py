"""DeepEP's low-latency dispatch and combine on the twin engine.

Upstream: ``Buffer::low_latency_dispatch`` / ``low_latency_combine`` (``csrc/legacy/buffer.hpp:
1463-1715 @dd758ca``, ``BUF``) and ``csrc/kernels/legacy/internode_ll.cu``. The capacity check
is upstream's ``EP_HOST_ASSERT(layout.total_bytes <= num_rdma_bytes)`` with
:class:`epbuf.backends.deepep_v1.LowLatencyLayout`; the dispatch message on the wire is the
``deepep-ll`` report's record (``src_idx``, the BF16 or FP8 data, the fp32 scales), the combine
message its combine record. Returned as upstream: ``packed_recv_x [num_local_experts,
num_ranks * T, hidden]`` (BF16, or FP8 with column-major scales: fp32 ``[.., hidden / 128]``
or UE8M0 int32 ``[.., hidden / 512]``), ``packed_recv_count``, and the handle
``(packed_recv_src_info, packed_recv_layout_range, T, hidden, num_experts)`` with
``layout_range = begin << 32 | count`` per (local expert, source rank). With
``return_recv_hook`` the call returns once the records are sent; the data, the counts and the
source info are written into the returned tensors by the hook.
"""

from __future__ import annotations

from functools import lru_cache

from ._engine import UpstreamAssertion, expect
from ._engine_experts import ExpertRoute, cast_fp8, reduce_weighted, send_expert_rows, slots_of, ue8m0_pack
from ._engine_records import pack_rows, unpack_rows

__all__ = ["low_latency_dispatch", "low_latency_combine", "ll_layout"]

BUF = "csrc/legacy/buffer.hpp:{} @dd758ca"
_MASK = (1 << 32) - 1


@lru_cache(maxsize=64)
def ll_layout(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int, num_experts: int):
    """The ``LowLatencyLayout`` and the ``deepep-ll`` report's dispatch (BF16, FP8) and combine records."""
    from .. import Plan, report
    from ..backends.deepep_v1 import LowLatencyLayout

    layout = LowLatencyLayout(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts)
    records = []
    for fp8 in (False, True):
        plan = Plan(hidden=hidden, num_topk=1, num_experts=num_experts, num_ranks=num_ranks,
                    num_max_tokens_per_rank=num_max_dispatch_tokens_per_rank, use_fp8_dispatch=fp8)
        r = report(plan, "deepep-ll")
        records.append(r.record("low-latency dispatch message"))
    return layout, records[0], records[1], r.record("low-latency combine message")


def _common_checks(buf, T: int, num_experts: int, hidden: int, R: int, line: str):
    expect(buf.low_latency_mode, "EP_HOST_ASSERT(low_latency_mode)", BUF.format(line))
    expect(buf.nvshmem_qp_depth >= (T + 1) * 2, "assert self.nvshmem_qp_depth >= "
           "(num_max_dispatch_tokens_per_rank + 1) * 2", "deep_ep/buffers/legacy.py:599 @dd758ca")
    layout = ll_layout(T, hidden, R, num_experts)[0]
    expect(layout.total_bytes <= buf.num_rdma_bytes, "EP_HOST_ASSERT(layout.total_bytes <= num_rdma_bytes)",
           BUF.format("1503, 1643"), f"LowLatencyLayout({T}, {hidden}, {R}, {num_experts}).total_bytes = "
           f"{layout.total_bytes:,} B > num_rdma_bytes = {buf.num_rdma_bytes:,} B")


def low_latency_dispatch(buf, x, topk_idx, cumulative_local_expert_recv_stats, dispatch_wait_recv_cost_stats,
                         T, num_experts, use_fp8, round_scale, use_ue8m0, async_finish, return_recv_hook):
    engine, torch = buf._engine, buf._engine.torch
    R, me = engine.num_ranks, engine.rank

    def prepare():
        expect(buf.low_latency_mode, "EP_HOST_ASSERT(low_latency_mode)", BUF.format(1474))
        expect(x.dim() == 2 and x.is_contiguous() and x.dtype == torch.bfloat16, "EP_HOST_ASSERT(x.dim() == 2 and "
               "x.is_contiguous() and x.scalar_type() == torch::kBFloat16)", BUF.format(1478),
               f"x is {x.dtype} {tuple(x.shape)}")
        hidden = int(x.shape[1])
        expect(hidden % 8 == 0 and hidden % 128 == 0, "EP_HOST_ASSERT(x.size(1) % sizeof(int4) == 0 and "
               "x.size(1) % 128 == 0)", BUF.format(1479), f"hidden = {hidden}")
        expect(topk_idx.dim() == 2 and topk_idx.is_contiguous(), "EP_HOST_ASSERT(topk_idx.dim() == 2 and "
               "topk_idx.is_contiguous())", BUF.format(1480), f"shape {tuple(topk_idx.shape)}")
        expect(x.shape[0] == topk_idx.shape[0] and x.shape[0] <= T, "EP_HOST_ASSERT(x.size(0) == topk_idx.size(0) "
               "and x.size(0) <= num_max_dispatch_tokens_per_rank)", BUF.format(1481),
               f"{int(x.shape[0])} tokens, topk_idx {int(topk_idx.shape[0])}, num_max_dispatch_tokens_per_rank {T}")
        expect(topk_idx.dtype == torch.int64, "EP_HOST_ASSERT(topk_idx.scalar_type() == topk_idx_t)",
               BUF.format(1482), f"topk_idx is {topk_idx.dtype}")
        expect(num_experts % R == 0, "EP_HOST_ASSERT(num_experts % num_ranks == 0)", BUF.format(1483),
               f"{num_experts} experts, {R} ranks")
        L = num_experts // R
        stats = cumulative_local_expert_recv_stats
        if stats is not None:
            expect(stats.dtype == torch.int32 and stats.dim() == 1 and stats.is_contiguous() and stats.shape[0] == L,
                   "EP_HOST_ASSERT(cumulative_local_expert_recv_stats: torch::kInt [num_experts / num_ranks])",
                   BUF.format("1487-1489"), f"{stats.dtype} {tuple(stats.shape)}")
        cost = dispatch_wait_recv_cost_stats
        if cost is not None:
            expect(cost.dtype == torch.int64 and cost.dim() == 1 and cost.is_contiguous() and cost.shape[0] == R,
                   "EP_HOST_ASSERT(dispatch_wait_recv_cost_stats: torch::kInt64 [num_ranks])", BUF.format("1492-1494"))
        _common_checks(buf, T, num_experts, hidden, R, 1474)
        expect(not (async_finish and return_recv_hook), "EP_HOST_ASSERT(not(async and return_recv_hook))",
               BUF.format(1511))
        expect((R * T) % 4 == 0, 'EP_HOST_ASSERT((num_ranks * num_max_dispatch_tokens_per_rank) % 4 == 0 and '
               '"TMA requires the number of tokens to be multiple of 4")', BUF.format(1526))
        if use_fp8:
            expect(hidden % 512 == 0, "EP_HOST_ASSERT(hidden % 512 == 0)", BUF.format(1530), f"hidden = {hidden}")
            if use_ue8m0:
                expect(round_scale, "EP_HOST_ASSERT(round_scale)", BUF.format(1535))
        bad = (topk_idx < -1) | (topk_idx >= num_experts)
        expect(not bool(bad.any()), "topk_idx in [-1, num_experts)", "the kernel indexes experts with it",
               f"{int(bad.sum())} ids out of range")
        route = ExpertRoute(torch, topk_idx, num_experts, R)
        return [hidden, T, num_experts, int(bool(use_fp8))], route.per_expert, (route, hidden, L)

    (route, hidden, L), _, counts = engine.agree_counts(  # counts: [sources, experts]
        "low_latency_dispatch", "hidden, num_max_dispatch_tokens_per_rank, num_experts and use_fp8", 4, prepare)
    local = counts[:, me * L:(me + 1) * L]  # [sources, local experts]
    begin = torch.cumsum(local, 0) - local
    _, bf16_record, fp8_record, _ = ll_layout(T, hidden, R, num_experts)
    record = fp8_record if use_fp8 else bf16_record
    src_idx = torch.arange(int(x.shape[0]), dtype=torch.int32)
    if use_fp8:
        codes, scale_inv = cast_fp8(torch, x, round_scale)
        fields = {"src_idx": src_idx, "hidden": codes, "scales": scale_inv}
    else:
        fields = {"src_idx": src_idx, "hidden": x}
    parity = buf._flip_low_latency_buffer()
    pending = send_expert_rows(engine, record, route, local.sum(1).tolist(), "low_latency_dispatch",
                               ("low_latency_dispatch", parity), **fields)
    capacity = R * T
    packed_x = buf._low_latency_tensor("x", parity, (L, capacity, hidden),
                                       torch.float8_e4m3fn if use_fp8 else torch.bfloat16)
    packed_src_info = torch.zeros((L, capacity), dtype=torch.int32)
    packed_layout_range = torch.zeros((L, R), dtype=torch.int64)
    packed_count = torch.zeros(L, dtype=torch.int32)
    packed_scales = None
    if use_fp8:
        columns = hidden // 512 if use_ue8m0 else hidden // 128
        dtype = torch.int32 if use_ue8m0 else torch.float32
        packed_scales = buf._low_latency_tensor("scales", parity, (L, columns, capacity), dtype).transpose(1, 2)

    def receive() -> None:
        recv = pending.wait()
        got = unpack_rows(record, recv)
        slots = slots_of(torch, begin, local, capacity)
        expert, position = slots // capacity, slots % capacity
        data = got["hidden"]
        if use_fp8:  # index_copy_ has no float8 kernel on CPU: move the codes as bytes
            packed_x.view(torch.uint8).view(L * capacity, hidden).index_copy_(0, slots, data.view(torch.uint8))
        else:
            packed_x.view(L * capacity, hidden).index_copy_(0, slots, data)
        packed_src_info.view(-1).index_copy_(0, slots, got["src_idx"].reshape(-1))
        if use_fp8:
            scales = ue8m0_pack(torch, got["scales"]) if use_ue8m0 else got["scales"]
            packed_scales[expert, position] = scales
        packed_layout_range.copy_(((begin << 32) | local).t())
        packed_count.copy_(local.sum(0))
        if cumulative_local_expert_recv_stats is not None:
            cumulative_local_expert_recv_stats.add_(local.sum(0).to(torch.int32))

    hook = None
    if return_recv_hook:
        hook = receive
    else:
        receive()
    handle = (packed_src_info, packed_layout_range, T, hidden, num_experts)
    recv_x = (packed_x, packed_scales) if use_fp8 else packed_x
    return recv_x, packed_count, handle, buf._event(async_finish), hook


def low_latency_combine(buf, x, topk_idx, topk_weights, handle, use_logfmt, zero_copy, async_finish,
                        return_recv_hook, out, combine_wait_recv_cost_stats):
    engine, torch = buf._engine, buf._engine.torch
    R = engine.num_ranks
    src_info, layout_range, T, hidden, num_experts = handle

    def prepare():
        expect(buf.low_latency_mode, "EP_HOST_ASSERT(low_latency_mode)", BUF.format(1612))
        L = num_experts // R
        expect(x.dim() == 3 and x.is_contiguous() and x.dtype == torch.bfloat16, "EP_HOST_ASSERT(x.dim() == 3 and "
               "x.is_contiguous() and x.scalar_type() == torch::kBFloat16)", BUF.format(1615),
               f"x is {x.dtype} {tuple(x.shape)}")
        expect(tuple(x.shape[:2]) == (L, R * T) and x.shape[2] % 128 == 0, "EP_HOST_ASSERT(x.size(0) == num_experts "
               "/ num_ranks, x.size(1) == num_ranks * num_max_dispatch_tokens_per_rank, x.size(2) % 128 == 0)",
               BUF.format("1616-1618"), f"x {tuple(x.shape)}, expected ({L}, {R * T}, hidden)")
        expect(topk_idx.dim() == 2 and topk_idx.is_contiguous() and topk_idx.dtype == torch.int64,
               "EP_HOST_ASSERT(topk_idx.dim() == 2 and topk_idx.is_contiguous(), topk_idx_t)", BUF.format("1619, 1621"))
        expect(topk_weights.dim() == 2 and topk_weights.is_contiguous() and topk_weights.dtype == torch.float32,
               "EP_HOST_ASSERT(topk_weights.dim() == 2 and topk_weights.is_contiguous(), torch::kFloat32)",
               BUF.format("1622, 1624"))
        expect(tuple(topk_idx.shape) == tuple(topk_weights.shape), "EP_HOST_ASSERT(topk_idx.size(0) == "
               "topk_weights.size(0) and topk_idx.size(1) == topk_weights.size(1))", BUF.format(1620))
        expect(topk_weights.shape[0] <= T, "EP_HOST_ASSERT(topk_weights.size(0) <= num_max_dispatch_tokens_per_rank)",
               BUF.format(1623), f"{int(topk_weights.shape[0])} > {T}")
        expect(src_info.dim() == 2 and src_info.dtype == torch.int32 and x.shape[0] == src_info.shape[0],
               "EP_HOST_ASSERT(src_info.scalar_type() == torch::kInt32 and x.size(0) == src_info.size(0))",
               BUF.format("1625-1626"))
        expect(layout_range.dtype == torch.int64 and tuple(layout_range.shape) == (L, R),
               "EP_HOST_ASSERT(layout_range: torch::kInt64 [num_experts / num_ranks, num_ranks])",
               BUF.format("1628-1629"))
        _common_checks(buf, T, num_experts, hidden, R, 1612)
        expect(not (async_finish and return_recv_hook), "EP_HOST_ASSERT(not(async and return_recv_hook))",
               BUF.format(1651))
        if out is not None:
            expect(out.dim() == 2 and out.is_contiguous() and tuple(out.shape) == (topk_idx.shape[0], hidden)
                   and out.dtype == x.dtype, "EP_HOST_ASSERT(out: [num_combined_tokens, hidden], x's dtype)",
                   BUF.format("1658-1660"))
        bad = (topk_idx < -1) | (topk_idx >= num_experts)
        expect(not bool(bad.any()), "topk_idx in [-1, num_experts)", "the kernel indexes experts with it",
               f"{int(bad.sum())} ids out of range")
        route = ExpertRoute(torch, topk_idx, num_experts, R)
        back = (layout_range & _MASK).sum(0)  # rows this rank sends back to each source
        return [hidden, T, num_experts] + back.tolist() + route.per_rank.tolist(), (route, L)

    # One all-gather: the shapes, and the rows each rank sends back and expects (2 x num_ranks).
    (route, L), rows = engine.agree("low_latency_combine", 3 + 2 * R, prepare)
    engine.same_everywhere(rows, slice(0, 3), "low_latency_combine", "hidden, num_max_dispatch_tokens_per_rank and "
                           "num_experts")
    count = (layout_range & _MASK).t()  # [sources, local experts]
    begin = (layout_range >> 32).t()
    back = count.sum(1)
    counts = rows[:, 3:]
    if not torch.equal(counts[:, :R], counts[:, R:].t()):
        raise UpstreamAssertion("low_latency_combine: topk_idx or the handle differ from the dispatch's (rows sent "
                                f"{counts[:, :R].tolist()} vs expected {counts[:, R:].t().tolist()})")
    _, _, _, record = ll_layout(T, hidden, R, num_experts)
    source = buf._zero_copy_buffer(handle) if zero_copy else x
    slots = slots_of(torch, begin, count, R * T)
    rows_out = source.reshape(L * R * T, hidden)
    parity = buf._flip_low_latency_buffer()
    key = ("low_latency_combine", parity)
    num_rows = int(slots.shape[0])
    send = pack_rows(torch, record, num_rows, slots, out=engine.scratch(key + ("send",), num_rows * record.num_bytes),
                     hidden=rows_out)
    pending = engine.exchange(send, back.tolist(), route.per_rank.tolist(), "low_latency_combine", key=key + ("recv",))
    result = out if out is not None else engine.output("low_latency_combine", (int(topk_idx.shape[0]), hidden),
                                                       torch.bfloat16)

    def receive() -> None:
        reduce_weighted(engine, record, pending.wait(), route, topk_weights, int(topk_idx.shape[0]), result)

    hook = None
    if return_recv_hook:
        hook = receive
    else:
        receive()
    return result, buf._event(async_finish), hook
