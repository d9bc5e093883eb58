"""The ``uccl-ll`` report: UCCL-EP's low-latency ``Buffer`` for a plan (the RDMA buffer of
:mod:`.low_latency`, the proxies, pinned host memory), and its fast summary."""

from __future__ import annotations

from functools import lru_cache

from ...errors import Checker, InvalidArgumentError
from ...report import Finding, Quantity, Region, Report, Summary, summary_of
from ...units import INT64_MAX, format_int
from . import _deepep
from .limits import low_latency_limit_rows
from .low_latency import (
    K_ATOMIC_BUFFER_SIZE,
    LowLatencyLayout,
    combine_message_record,
    dispatch_message_record,
    get_low_latency_rdma_size_hint,
    hint_round_up,
)
from .memory import placement, rdma_allocation
from .._limits import limit_checks, limit_findings
from .report_parts import (CFG, dropped_checks_finding, host_memory_finding, nic_of, platform_of, runtime_buffers,
                           upstream_line)
from .smem import device_spec
from .versions import cite, get_version

__all__ = ["report_low_latency", "summarize_low_latency"]


_LL_FORMULA_LINES = {"signaling buffer": "243-256", "send buffer": "199-227", "recv buffer": "229-240"}
_ROUNDING = "hint rounding block"


def _ll_layout(plan) -> LowLatencyLayout:
    return LowLatencyLayout(num_max_dispatch_tokens_per_rank=plan.num_max_tokens_per_rank, hidden=plan.hidden,
                            num_ranks=plan.num_ranks, num_experts=plan.num_total_experts,
                            per_expert_batching=plan.per_expert_batching)


def _ll_hint(layout: LowLatencyLayout) -> int:
    hint = get_low_latency_rdma_size_hint(layout.num_max_dispatch_tokens_per_rank, layout.hidden, layout.num_ranks,
                                          layout.num_experts, per_expert_batching=layout.per_expert_batching)
    if hint > INT64_MAX:
        c = Checker()
        c.add("num_max_tokens_per_rank", layout.num_max_dispatch_tokens_per_rank,
              f"the low-latency RDMA buffer would need {hint:,} B, beyond the long num_rdma_bytes of Buffer "
              f"({INT64_MAX:,}, {cite('src/uccl_ep.cc', '350')}); lower --tokens or --experts")
        c.raise_if_any()
    return hint


def _ll_regions(layout: LowLatencyLayout, hint: int) -> list[Region]:
    t, e, r = layout.num_max_dispatch_tokens_per_rank, layout.num_experts, layout.num_ranks
    d, c = layout.num_bytes_per_dispatch_msg, layout.num_bytes_per_combine_msg
    if layout.per_expert_batching:
        send = (f"max(({e} + 1) experts x {format_int(t)} tokens x {format_int(d)} B (per-expert batching), "
                f"{e} x {format_int(t)} x {format_int(c)} B)")
        signaling = f"max({r} x {r} ranks, {e} experts) ints x 4 B, aligned to 128 B"
    else:
        send = (f"max({format_int(t)} tokens x {format_int(d)} B, "
                f"{e} experts x {format_int(t)} tokens x {format_int(c)} B)")
        signaling = f"{e} experts x 4 B, aligned to 128 B"
    formulas = {"signaling buffer": signaling, "send buffer": send,
                "recv buffer": f"{e} experts x {format_int(t)} tokens x max({format_int(d)}, {format_int(c)}) B"}
    regions = []
    for span in layout.spans():
        kind = span.name.rsplit(" ", 1)[0]
        grid = _deepep.slot_grid(span.num_bytes, e, t, c) if kind != "signaling buffer" else {}
        regions.append(Region(name=span.name, num_bytes=span.num_bytes, num_bytes_used=span.num_bytes,
                              formula=f"at offset {format_int(span.offset)}: {formulas[kind]}",
                              source=cite(CFG, _LL_FORMULA_LINES[kind]), **grid))
    total = layout.total_bytes
    regions.append(Region(name=_ROUNDING, num_bytes=hint - total, num_bytes_used=0,
                          formula=f"((total {format_int(total)} + 128) / 128) x 128 - total: a full block even when "
                                  "aligned", source=cite(CFG, "318-327")))
    return regions


def _default_hint(plan, hint: int) -> int:
    """The hint of the default (non-batching) build for ``plan`` (``hint`` when that is the build)."""
    if not plan.per_expert_batching:
        return hint
    return _deepep.ll_hint(plan.num_max_tokens_per_rank, plan.hidden, plan.num_ranks, plan.num_total_experts)


def report_low_latency(plan) -> Report:
    """Size UCCL-EP's low-latency ``Buffer`` for ``plan``: the RDMA buffer of
    ``Buffer.get_low_latency_rdma_size_hint(num_max_tokens_per_rank, hidden, num_ranks, num_experts +
    redundant)`` (its six spans and the hint's rounding block), the atomic buffer's signaling
    part, every other allocation per GPU, message byte maps and launch limits. ``num_nvl_bytes``
    is 0, as in UCCL-EP's low-latency tests (``ep/bench/test_low_latency.py:475-484``).

    Raises:
        InvalidArgumentError: an unknown version; a shape whose send/receive buffers are not
            multiples of 16 B (the layout asserts it); a hint beyond int64.
    """
    v = get_version(plan.version)
    platform, nic = platform_of(plan), nic_of(plan)
    layout = _ll_layout(plan)
    hint = _ll_hint(layout)
    tokens, hidden, ranks, experts = plan.num_max_tokens_per_rank, plan.hidden, plan.num_ranks, plan.num_total_experts
    rpn = plan.ranks_per_node
    rdma_in_host, _, rdma_why, _ = placement(platform, nic)
    rdma = rdma_allocation(_ll_regions(layout, hint), hint, rdma_in_host, rdma_why)
    workspace, runtime, host = runtime_buffers(rpn, platform, nic)
    buffers = ((rdma,) if not rdma_in_host else ()) + (workspace, runtime)
    host_buffers = ((rdma,) if rdma_in_host else ()) + (host,)
    limits = tuple(limit_checks(low_latency_limit_rows(v, platform, ranks, rpn, plan.num_topk, experts, hidden,
                                                       plan.use_fp8_dispatch, tokens, layout.atomic_buffer_bytes_used,
                                                       plan.per_expert_batching, device_spec(plan.device))))
    records = (dispatch_message_record(hidden, plan.use_fp8_dispatch, layout.num_bytes_per_dispatch_msg),
               combine_message_record(hidden))

    default_hint = _default_hint(plan, hint)
    try:
        deepep = _deepep.deepep_ll_hint(tokens, hidden, ranks, experts)
        deepep_text = (f"DeepEP V1 {_deepep.LL_VERSION_NEWEST} sizes {format_int(deepep)} B for the same shape "
                       f"({format_int(deepep - default_hint)} B more than UCCL-EP's default build)")
    except InvalidArgumentError as error:  # DeepEP's newer, larger combine slot breaks its own 16-byte asserts
        deepep = None
        deepep_text = f"DeepEP V1 {_deepep.LL_VERSION_NEWEST} rejects this shape ({error})"
    findings = [
        Finding(severity="info", code="uccl-ll.deepep-layout",
                message=f"UCCL-EP's layout is DeepEP V1's as of {_deepep.LL_VERSION} (42253d0): combine slots of "
                        f"2 x hidden = {format_int(layout.num_bytes_per_combine_msg)} B with no LogFMT min/max (its "
                        f"LogFMT is simulated in BF16, {cite('src/internode_ll.cu', '950-951')}); " + deepep_text,
                data={"deepep_version": _deepep.LL_VERSION, "deepep_newest_num_bytes": deepep,
                      "uccl_default_num_bytes": default_hint}),
        Finding(severity="info", code="uccl-ll.hint-extra-block",
                message=f"the hint rounds total_bytes = {format_int(layout.total_bytes)} to the next multiple of 128 "
                        f"strictly above it ({format_int(hint)}); {format_int(rdma.num_bytes_needed)} B is the least "
                        "a run accepts",
                data={"total_bytes": layout.total_bytes, "hint": hint, "needed": rdma.num_bytes_needed}),
        Finding(severity="info", code="uccl-ll.atomic-signaling",
                message=f"the internode signaling buffers (2 x "
                        f"{format_int(layout.signaling_buffer_bytes_internode_aligned)} B of 64-bit counters) live in "
                        f"the proxy's {format_int(K_ATOMIC_BUFFER_SIZE)} B atomic buffer, "
                        f"not in the RDMA buffer ({cite(CFG, '258-281')})",
                data={"num_bytes": layout.atomic_buffer_bytes_used, "atomic_buffer_num_bytes": K_ATOMIC_BUFFER_SIZE}),
    ]
    if plan.per_expert_batching:
        findings.append(Finding(
            severity="info", code="uccl-ll.per-expert-batching",
            message=f"PER_EXPERT_BATCHING build: each send buffer holds a {format_int(tokens)}-token batch per expert "
                    f"plus the temporary slots, and the counters are num_ranks^2, so num_ranks enters the hint; "
                    f"{format_int(hint - default_hint)} B more than the default build",
            data={"default_build_num_bytes": default_hint, "num_bytes": hint}))
    else:
        findings.append(Finding(severity="info", code="uccl-ll.num-ranks-unused",
                                message="num_ranks does not enter the low-latency hint (only num_experts does) unless "
                                        "UCCL-EP is built with PER_EXPERT_BATCHING=1 (--per-expert-batching), the build "
                                        "the DeepEP drop-in's instructions use (ep/deep_ep_wrapper/README.md:6 "
                                        "@da914a2)", data={}))
    if plan.num_redundant_experts:
        findings.append(Finding(
            severity="info", code="uccl-ll.eplb",
            message=f"EPLB: the library sees {experts} experts ({plan.num_experts} routed + "
                    f"{plan.num_redundant_experts} redundant); send and receive buffers grow linearly with them",
            data={"num_experts": experts}))
    if not plan.use_fp8_dispatch:
        findings.append(Finding(severity="info", code="uccl-ll.bf16-slots",
                                message="BF16 dispatch: the layout always sizes BF16 slots (FP8 uses less of them)",
                                data={}))
    if platform == "rocm" and v.ll_num_max_topk + 1 > 16:
        findings.append(Finding(
            severity="error", code="uccl-ll.rocm-dispatch-warps",
            message=f"on ROCm the low-latency dispatch launcher asserts kNumMaxTopK + 1 = {v.ll_num_max_topk + 1} <= "
                    f"num_warp_groups x num_warps_per_group, which kNumMaxWarpGroups = 16 caps at 16 "
                    f"({cite('src/internode_ll.cu', '16-20, 670-674')}): every dispatch fails since kNumMaxTopK became "
                    "16 (66170bc); v0.1.1 (kNumMaxTopK = 9) passes",
            data={"kNumMaxTopK": v.ll_num_max_topk, "kNumMaxWarpGroups": 16}))
    if rdma_in_host:
        findings.append(Finding(
            severity="warning", code="uccl-ll.rdma-buffer-in-host-memory",
            message=f"the NIC cannot register GPU memory, so the {format_int(hint)} B RDMA buffer is pinned host "
                    f"memory ({cite('src/uccl_ep.cc', '294-304')})", data={"num_bytes": hint}))
    findings.append(host_memory_finding("uccl-ll", host_buffers, runtime))
    findings.append(dropped_checks_finding("uccl-ll", True, hint))
    # The ROCm warp cap has its own finding above; the other broken limits get the generic one.
    findings += limit_findings("uccl-ll.limit", [lim for lim in limits
                                            if not (platform == "rocm" and lim.name.startswith("kNumMaxWarpGroups"))])

    quantities = (
        Quantity(name="num_scales", value=layout.num_scales, source=cite(CFG, "182")),
        Quantity(name="num_bytes_per_dispatch_msg", value=layout.num_bytes_per_dispatch_msg, unit="B",
                 source=cite(CFG, "193-195")),
        Quantity(name="num_bytes_per_combine_msg", value=layout.num_bytes_per_combine_msg, unit="B",
                 source=cite(CFG, "196")),
        Quantity(name="send_buffer_bytes", value=layout.send_buffer_bytes, unit="B", source=cite(CFG, "199-225")),
        Quantity(name="recv_buffer_bytes", value=layout.recv_buffer_bytes, unit="B", source=cite(CFG, "231-238")),
        Quantity(name="signaling_buffer_bytes", value=layout.signaling_buffer_bytes, unit="B",
                 source=cite(CFG, "243-253")),
        Quantity(name="signaling_buffer_bytes_aligned", value=layout.signaling_buffer_bytes_aligned, unit="B"),
        Quantity(name="signaling_buffer_bytes_internode_aligned", value=layout.signaling_buffer_bytes_internode_aligned,
                 unit="B", source=cite(CFG, "258-274")),
        Quantity(name="total_bytes", value=layout.total_bytes, unit="B"),
        Quantity(name="num_rdma_bytes", value=hint, unit="B", source=cite(CFG, "318-327")),
    ) + ((Quantity(name="deepep_num_rdma_bytes", value=deepep, unit="B"),) if deepep is not None else ()) + (
        Quantity(name="host_num_bytes", value=sum(b.num_bytes for b in host_buffers), unit="B"),
    )
    inputs = {
        "version": v.id, "num_max_dispatch_tokens_per_rank": tokens, "hidden": hidden, "num_ranks": ranks,
        "num_ranks_per_node": rpn, "num_experts": experts, "num_routed_experts": plan.num_experts,
        "num_redundant_experts": plan.num_redundant_experts, "num_topk": plan.num_topk,
        "use_fp8_dispatch": plan.use_fp8_dispatch, "platform": platform, "nic": nic,
        "per_expert_batching": plan.per_expert_batching,
    }
    return Report(backend="uccl-ll", title="UCCL-EP low-latency Buffer (RDMA buffer, proxies)", upstream=upstream_line(v),
                  inputs=inputs, buffers=buffers, records=records, quantities=quantities, findings=tuple(findings),
                  limits=limits, host_buffers=host_buffers)


@lru_cache(maxsize=4096)
def _ll_static(version, hidden: int, ranks: int, experts: int, per_expert_batching: bool, ranks_per_node: int,
               platform: str, nic: str):
    """The token-independent part of :func:`summarize_low_latency`, or ``None`` when the
    one-token layout is rejected (then the full report decides). Every send and receive term
    of the layout is a product with ``T`` (``ep_config.hpp:212-236``), so the send and receive
    buffers at ``T`` tokens are ``T`` times their one-token value; the signaling buffers do not
    depend on ``T``."""
    try:
        v = get_version(version)
        one = LowLatencyLayout(num_max_dispatch_tokens_per_rank=1, hidden=hidden, num_ranks=ranks,
                               num_experts=experts, per_expert_batching=per_expert_batching)
    except InvalidArgumentError:
        return None
    rdma_in_host = placement(platform, nic)[0]
    workspace, runtime, _ = runtime_buffers(ranks_per_node, platform, nic)
    return (v, one.send_buffer_bytes, one.recv_buffer_bytes, one.signaling_buffer_bytes_aligned,
            one.atomic_buffer_bytes_used, rdma_in_host, workspace.num_bytes + runtime.num_bytes, workspace.num_bytes)


def summarize_low_latency(plan) -> Summary:
    """``summary_of(report_low_latency(plan))`` without records, findings or formulas: the
    layout's sizes from the cached one-token layout (:func:`_ll_static`), the hint and the
    limit rows, as integers.

    Raises:
        InvalidArgumentError: as :func:`report_low_latency`.
    """
    platform, nic = platform_of(plan), nic_of(plan)
    key = (plan.version, plan.hidden, plan.num_ranks, plan.num_total_experts, plan.per_expert_batching,
           plan.ranks_per_node, platform, nic)
    try:
        static = _ll_static(*key)
    except TypeError:  # an unhashable version: rejected by the report below
        static = None
    if static is not None:
        v, send1, recv1, signaling, atomic_used, rdma_in_host, runtime_bytes, workspace_bytes = static
        tokens = plan.num_max_tokens_per_rank
        send, recv = tokens * send1, tokens * recv1
        total = 2 * (signaling + send + recv)
        hint = hint_round_up(total)
        if hint <= INT64_MAX:
            rows = low_latency_limit_rows(v, platform, plan.num_ranks, plan.ranks_per_node, plan.num_topk,
                                          plan.num_total_experts, plan.hidden, plan.use_fp8_dispatch, tokens,
                                          atomic_used, plan.per_expert_batching, device_spec(plan.device))
            broken = tuple(row[0] for row in rows if not row[4])
            if rdma_in_host:
                return Summary(num_bytes=runtime_bytes, num_bytes_needed=runtime_bytes, binding="workspace",
                               broken=broken)
            # The six spans in address order; the binding region is the first largest (Buffer.binding_region).
            if hint < workspace_bytes:
                binding = "workspace"
            elif signaling >= send and signaling >= recv:
                binding = "signaling buffer 0"
            else:
                binding = "send buffer 0" if send >= recv else "recv buffer 0"
            return Summary(num_bytes=hint + runtime_bytes, num_bytes_needed=-(-total // 128) * 128 + runtime_bytes,
                           binding=binding, broken=broken)
    return summary_of(report_low_latency(plan))
