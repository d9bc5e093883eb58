"""A CPU twin of DeepEP-Ascend's Python ``EPBuffer`` (package ``deep_ep``; no git snapshot is published: the
class as the public code index holds it, file id 70645666942, read 2026-12-07, its path not shown there; ``PY``
below names that text; the C++ class is ``csrc/buffers/ep.hpp``, id 70701492328, ``EPB:``), over
:class:`epbuf.runtime.Buffer` (refs.py semantics, ``ascend`` layout).

Use it where code does ``from deep_ep import EPBuffer``::

    import epbuf.twin.deep_ep_ascend as deep_ep_ascend
    deep_ep_ascend.install()   # sys.modules["deep_ep"] (replaces epbuf.twin.deep_ep's install)
    buffer = EPBuffer(group, num_max_tokens_per_rank=128, hidden=7168, num_topk=8)
    recv_x, _, recv_w, handle, event = buffer.dispatch(x, topk_idx, topk_w, num_experts=64, do_expand=True)
    combined_x, combined_w, event = buffer.combine(expert_y, handle)

What upstream does and the twin keeps: the constructor's asserts (``allow_multiple_reduction``, 2 MiB-aligned
``num_bytes``, positive timeouts, no QP / service-level options), the hint
(:func:`epbuf.backends.ascend.calculate_buffer_size`), dispatch's ``do_expand`` and ``do_handle_copy`` asserts,
``num_tokens <= num_max_tokens_per_rank`` and ``get_dispatch_buffer_size(...) <= num_buffer_bytes`` (``EPB:``
dispatch). Dispatch returns upstream's five items, ``recv_topk_idx`` ``None`` as upstream returns it: the
expanded layout, one row per (received token, local expert), grouped by local expert, each group padded to
``expert_alignment`` with zero rows; within a group rows follow ``src_token_global_idx`` (refs.py's order).
Combine takes ``[num_expanded_tokens, hidden]`` and sums each received token's rows in fp32 in top-k
order, refs.py's local reduction (one BF16 partial per received token), then
:meth:`epbuf.runtime.Buffer.combine` reduces at the source. The order of upstream's own in-kernel reduction
is not visible in the Python wrapper; this order is the twin's. Not mirrored: cached dispatch (``handle=``),
``defer_epilogue``, ``bias``, combine's ``topk_weights``, LB storage, ``cumulative_local_expert_recv_stats``.
"""

from __future__ import annotations

import sys

from ..backends.ascend import NUM_ALLOCATION_ALIGNMENT_BYTES, calculate_buffer_size, get_dispatch_buffer_size
from ..backends.ascend import actual_num_sf_packs, element_size
from ._engine import UpstreamAssertion, torch_module

__all__ = ["EPBuffer", "EPHandle", "EventOverlap", "install", "UpstreamAssertion"]

torch = torch_module()
PY = "DeepEP-Ascend deep_ep EPBuffer (public code index id 70645666942, 2026-12-07)"


def _assert(ok: bool, assertion: str, where: str, value: str) -> None:
    if not ok:
        raise UpstreamAssertion(f"{assertion} failed ({where}): {value}")


class EventOverlap:
    """Upstream's event wrapper; the twin's work is done when the call returns."""

    def __init__(self, event=None) -> None:
        self.event = event

    def current_stream_wait(self) -> None:
        return None


class EPHandle:
    """What combine needs: the runtime's handle and the expanded rows' (received token, local expert)."""

    def __init__(self, runtime_handle, num_experts: int, expert_alignment: int, num_max_tokens_per_rank: int,
                 topk_idx, rows, slots, num_recv_tokens: int, num_recv_tokens_per_expert_list: list) -> None:
        self.do_expand = True
        self.runtime_handle, self.num_experts, self.expert_alignment = runtime_handle, num_experts, expert_alignment
        self.num_max_tokens_per_rank, self.topk_idx, self.rows = num_max_tokens_per_rank, topk_idx, rows
        self.slots, self.num_topk = slots, int(topk_idx.size(1))
        self.num_recv_tokens = num_recv_tokens
        self.num_expanded_tokens = int(rows.numel())
        self.num_recv_tokens_per_expert_list = num_recv_tokens_per_expert_list


class EPBuffer:
    """``deep_ep.EPBuffer`` on Ascend (``class EPBuffer(BufferBase)``, ``PY``), on a gloo group."""

    def __init__(self, group, num_bytes=None, num_max_tokens_per_rank: int = 0, hidden: int = 0, num_topk: int = 0,
                 use_fp8_dispatch: bool = False, lb_allocation_plan_or_num_bytes=0, deterministic: bool = False,
                 allow_hybrid_mode: bool = True, allow_multiple_reduction: bool = True,
                 prefer_overlap_with_compute: bool = True, sl_idx=None, num_allocated_qps: int = 0,
                 num_cpu_timeout_secs: int = 300, num_gpu_timeout_secs: int = 100, explicitly_destroy: bool = False,
                 *, use_huge1g_page: bool = True) -> None:
        import torch.distributed as dist

        group = dist.group.WORLD if group is None else group
        lb = lb_allocation_plan_or_num_bytes
        _assert(type(lb) is int and lb >= 0 and lb % NUM_ALLOCATION_ALIGNMENT_BYTES == 0,
                "assert isinstance(num_lb_bytes, int) and num_lb_bytes >= 0 and num_lb_bytes % alignment == 0",
                PY, f"lb_allocation_plan_or_num_bytes={lb!r}")
        if sl_idx is not None or num_allocated_qps != 0:
            raise NotImplementedError("RDMA service levels and QP configuration are not implemented on Ascend")
        _assert(allow_multiple_reduction is True, "assert allow_multiple_reduction, 'Ascend requires "
                "allow_multiple_reduction=True'", PY, f"allow_multiple_reduction={allow_multiple_reduction!r}")
        _assert(type(num_cpu_timeout_secs) is int and num_cpu_timeout_secs > 0 and type(num_gpu_timeout_secs) is int
                and num_gpu_timeout_secs > 0, "assert num_cpu_timeout_secs > 0 and num_gpu_timeout_secs > 0", PY,
                f"{num_cpu_timeout_secs!r}, {num_gpu_timeout_secs!r}")
        self.group, self.rank_idx, self.num_ranks = group, dist.get_rank(group), dist.get_world_size(group)
        self.num_max_tokens_per_rank, self.hidden, self.num_topk = num_max_tokens_per_rank, hidden, num_topk
        self.use_fp8_dispatch, self.deterministic = use_fp8_dispatch, deterministic
        self.allow_hybrid_mode, self.allow_multiple_reduction = allow_hybrid_mode, allow_multiple_reduction
        self.num_cpu_timeout_secs, self.num_lb_bytes, self.num_allocated_qps = num_cpu_timeout_secs, lb, 0
        if num_bytes is None:
            num_bytes = self.get_buffer_size_hint(group, num_max_tokens_per_rank, hidden, num_topk, use_fp8_dispatch,
                                                  allow_hybrid_mode, allow_multiple_reduction)
        _assert(type(num_bytes) is int and num_bytes >= 0 and num_bytes % NUM_ALLOCATION_ALIGNMENT_BYTES == 0,
                "assert num_bytes >= 0 and num_bytes % _C.get_num_allocation_alignment() == 0", PY,
                f"num_bytes={num_bytes!r}, alignment {NUM_ALLOCATION_ALIGNMENT_BYTES:,}")
        self.num_bytes = num_bytes
        self.num_scaleout_ranks, self.num_scaleup_ranks = 1, self.num_ranks  # one HCCL domain (PY's docstring)
        self.destroyed, self._runtime, self._num_experts = False, None, None

    @staticmethod
    def get_buffer_size_hint(group, num_max_tokens_per_rank: int, hidden: int, num_topk: int = 0,
                             use_fp8_dispatch: bool = False, allow_hybrid_mode: bool = True,
                             allow_multiple_reduction: bool = True) -> int:
        """``_C.calculate_ep_buffer_size(group.size(), ...)``: :func:`epbuf.backends.ascend.calculate_buffer_size`."""
        import torch.distributed as dist

        _assert(allow_multiple_reduction is True, "assert allow_multiple_reduction", PY,
                f"allow_multiple_reduction={allow_multiple_reduction!r}")
        size = dist.get_world_size(dist.group.WORLD if group is None else group)
        return calculate_buffer_size(size, num_max_tokens_per_rank, hidden, num_topk, use_fp8_dispatch)

    def get_logical_domain_size(self) -> tuple:
        return self.num_scaleout_ranks, self.num_scaleup_ranks

    get_physical_domain_size = get_logical_domain_size

    def destroy(self) -> None:
        _assert(not self.destroyed, "EP_HOST_ASSERT(not destroyed)", "EPB: EPBuffer::destroy", "destroyed twice")
        self.destroyed, self._runtime = True, None

    def _buffer(self, num_experts: int, x, num_topk: int):
        from ..plan import Plan
        from ..runtime import Buffer

        if self._runtime is None or self._num_experts != num_experts:
            plan = Plan(hidden=int(x.size(1)), num_topk=num_topk, num_experts=num_experts, num_ranks=self.num_ranks,
                        num_max_tokens_per_rank=self.num_max_tokens_per_rank,
                        use_fp8_dispatch=x.dtype == torch.float8_e4m3fn)
            from ..plan import report

            for finding in report(plan, "ascend").findings:  # upstream's kernel-launch host asserts
                _assert(finding.severity != "error", finding.code, "epbuf.report(plan, 'ascend')", finding.message)
            self._runtime, self._num_experts = Buffer(self.group, plan, "ascend", num_bytes=self.num_bytes,
                                                      timeout=float(self.num_cpu_timeout_secs)), num_experts
        return self._runtime

    def dispatch(self, x, topk_idx=None, topk_weights=None, cumulative_local_expert_recv_stats=None,
                 num_experts=None, num_max_tokens_per_rank=None, expert_alignment=None, num_sms: int = 0,
                 num_qps: int = 0, previous_event=None, async_with_compute_stream: bool = False,
                 allocate_on_comm_stream: bool = False, handle=None, do_handle_copy: bool = False,
                 do_cpu_sync=None, do_expand: bool = False, do_zero_padding: bool = False,
                 use_tma_aligned_col_major_sf: bool = False, defer_epilogue: bool = False):
        """``(recv_x, None, recv_topk_weights, handle, event)``: the expanded layout (see the module)."""
        if num_qps not in (None, 0):
            raise NotImplementedError("Explicit QP counts are not implemented on Ascend")
        _assert(not do_handle_copy, "assert not do_handle_copy", PY, "do_handle_copy=True")
        _assert(do_expand is True, "assert do_expand, 'Ascend dispatch only supports do_expand=True'", PY,
                f"do_expand={do_expand!r}")
        _assert(not self.destroyed, "EP_HOST_ASSERT(not destroyed)", "EPB: dispatch", "the EPBuffer was destroyed")
        if handle is not None or defer_epilogue or cumulative_local_expert_recv_stats is not None:
            raise NotImplementedError("the twin has no cached dispatch, defer_epilogue or recv stats")
        data, sf = x if isinstance(x, tuple) else (x, None)
        _assert(isinstance(topk_idx, torch.Tensor) and topk_idx.dim() == 2 and topk_idx.dtype == torch.int64,
                "EP_HOST_ASSERT(topk_idx.scalar_type() == torch::kInt64)", "EPB: dispatch", f"{topk_idx!r:.80}")
        _assert(isinstance(data, torch.Tensor) and data.dim() == 2 and data.is_contiguous(),
                "EP_HOST_ASSERT(x.dim() == 2 and x.is_contiguous())", "EPB: dispatch", f"{type(data).__name__}")
        _assert(data.dtype == (torch.float8_e4m3fn if sf is not None else torch.bfloat16),
                "EP_HOST_ASSERT(x.scalar_type() == kFloat8_e4m3fn with sf, else kBFloat16)", "EPB: dispatch",
                f"{data.dtype} with sf {'given' if sf is not None else 'absent'}")
        max_tokens = self.num_max_tokens_per_rank if num_max_tokens_per_rank is None else num_max_tokens_per_rank
        _assert(max_tokens == self.num_max_tokens_per_rank, "num_max_tokens_per_rank is the constructor's",
                "the twin's runtime buffer", f"{max_tokens!r} vs {self.num_max_tokens_per_rank!r}")
        _assert(type(num_experts) is int and num_experts > 0 and num_experts % self.num_ranks == 0,
                "EP_HOST_ASSERT(num_experts % context->num_ranks == 0)", "EPB: dispatch",
                f"num_experts={num_experts!r}")
        num_tokens, num_topk = int(data.size(0)), int(topk_idx.size(1))
        _assert(num_tokens <= max_tokens, "EP_HOST_ASSERT(num_tokens <= num_max_tokens_per_rank)", "EPB: dispatch",
                f"{num_tokens} > {max_tokens}")
        fp8 = sf is not None
        need = get_dispatch_buffer_size(max_tokens, int(data.size(1)), actual_num_sf_packs(int(data.size(1)), fp8),
                                        num_topk, element_size(fp8), self.num_ranks)
        _assert(need <= self.num_bytes, "EP_HOST_ASSERT(get_dispatch_buffer_size(...) <= num_buffer_bytes)",
                "EPB: dispatch", f"{need:,} > {self.num_bytes:,}")
        alignment = 1 if expert_alignment is None else expert_alignment
        _assert(type(alignment) is int and alignment > 0, "expert_alignment > 0", PY, f"{alignment!r}")
        result = self._buffer(num_experts, data, num_topk).dispatch(x, topk_idx, topk_weights)
        return self._expand(result, num_experts, alignment, max_tokens, topk_idx)

    def _expand(self, result, num_experts: int, alignment: int, max_tokens: int, topk_idx):
        per_rank = num_experts // self.num_ranks
        local = result.recv_topk_idx.to(torch.int64)
        rows, slots, per_expert = [], [], []
        for e in range(per_rank):
            token, k = (local == e).nonzero(as_tuple=True)
            pad = -int(token.numel()) % alignment
            rows.append(torch.cat([token, torch.full((pad,), -1, dtype=torch.int64)]))
            slots.append(torch.cat([k, torch.zeros(pad, dtype=torch.int64)]))
            per_expert.append(int(token.numel()) + pad)
        rows, slots = torch.cat(rows), torch.cat(slots)
        real = rows >= 0
        recv = result.recv_x if not isinstance(result.recv_x, tuple) else result.recv_x[0]
        expanded = torch.zeros((rows.numel(), recv.size(1)), dtype=recv.dtype)
        expanded[real] = recv[rows[real]]
        if isinstance(result.recv_x, tuple):
            sf = result.recv_x[1]
            expanded_sf = torch.zeros((rows.numel(), sf.size(1)), dtype=sf.dtype)
            expanded_sf[real] = sf[rows[real]]
            expanded = (expanded, expanded_sf)
        weights = None
        if result.recv_topk_weights is not None:
            weights = torch.zeros(rows.numel(), dtype=torch.float32)
            weights[real] = result.recv_topk_weights[rows[real], slots[real]]
        handle = EPHandle(result.handle, num_experts, alignment, max_tokens, topk_idx, rows, slots,
                          int(result.handle.num_recv_tokens), per_expert)
        return expanded, None, weights, handle, EventOverlap()

    def combine(self, x, handle: EPHandle, topk_weights=None, bias=None, num_sms: int = 0, num_qps: int = 0,
                previous_event=None, async_with_compute_stream: bool = False, allocate_on_comm_stream: bool = False,
                defer_epilogue: bool = False):
        """``(combined_x, combined_topk_weights, event)``; ``x`` is ``[num_expanded_tokens, hidden]`` BF16."""
        if num_qps not in (None, 0):
            raise NotImplementedError("Explicit QP counts are not implemented on Ascend")
        _assert(isinstance(handle, EPHandle), "assert handle.recv_src_metadata is not None", PY, f"{handle!r:.60}")
        _assert(not self.destroyed, "EP_HOST_ASSERT(not destroyed)", "EPB: combine", "the EPBuffer was destroyed")
        if bias is not None or defer_epilogue or topk_weights is not None:
            raise NotImplementedError("the twin's combine takes no bias, defer_epilogue or topk_weights")
        _assert(isinstance(x, torch.Tensor) and x.dtype == torch.bfloat16 and x.dim() == 2
                and x.size(0) == handle.num_expanded_tokens, "x is BF16 [num_expanded_tokens, hidden]", PY,
                f"{getattr(x, 'dtype', type(x).__name__)} {tuple(getattr(x, 'shape', ()))}, "
                f"{handle.num_expanded_tokens} expanded tokens")
        real = handle.rows >= 0
        dense = torch.zeros((handle.num_recv_tokens, handle.num_topk, x.size(1)), dtype=torch.float32)
        dense[handle.rows[real], handle.slots[real]] = x[real].float()
        acc = torch.zeros((handle.num_recv_tokens, x.size(1)), dtype=torch.float32)
        for k in range(handle.num_topk):  # each received token's local slots in top-k order, as refs.py
            acc += dense[:, k]
        out = self._runtime.combine(acc.to(torch.bfloat16), handle.runtime_handle)
        return out.combined_x, out.combined_topk_weights, EventOverlap()


def install() -> None:
    """Make ``import deep_ep`` / ``from deep_ep import EPBuffer`` give this twin."""
    sys.modules["deep_ep"] = sys.modules[__name__]
