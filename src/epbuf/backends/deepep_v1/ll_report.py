"""The ``deepep-ll`` report: DeepEP V1's low-latency RDMA buffer for a plan, and its fast summary.

The buffer is :func:`.low_latency.low_latency_buffer` (the hint
``Buffer.get_low_latency_rdma_size_hint(num_max_tokens_per_rank, hidden, num_ranks, num_experts
+ redundant)``, ``DOC:250-256``). The size function accepts any rank count and expert count;
what ``Buffer``'s constructor (ranks below 8 or a multiple of 8, the 32 GiB ceiling) and
``low_latency_dispatch`` (experts divisible by ranks, ``kNumMaxTopK``, ``SWITCH_HIDDEN``, TMA,
workspace) refuse later are limits with ``ok=False`` and an ``error`` finding. The total adds
the constructor's 32 MiB workspace (:mod:`.memory`).
"""

from __future__ import annotations

from functools import lru_cache
from operator import itemgetter

from ...errors import InvalidArgumentError
from ...report import Field, Finding, Quantity, RecordLayout, Report, Summary, summary_of
from ...units import INT32_MAX, align, format_int
from .constants import (BF16_BYTES, BF162_BYTES, FLOAT_BYTES, INT4_BYTES, INT_BYTES, MAX_NUM_BYTES_INT4_CHECK,
                        NUM_BUFFER_ALIGNMENT_BYTES, NUM_MAX_NVL_PEERS, NUM_WORKSPACE_BYTES)
from .limits import (LimitRow, check_plan, in_row, limit_checks, limit_findings, passes_int4_check, set_name,
                     unmerged_finding, upstream_line)
from .ll_formulas import ROUNDING_BLOCK, hint_round_up, layout_problems, send_recv, slots, span_rows
from .low_latency import LowLatencyLayout, max_low_latency_tokens, rdma_buffer
from .memory import workspace_allocation
from .versions import Version, get_version, topk_idx_bytes
from .smem import device_spec, low_latency_launches, smem_rows

__all__ = ["report_low_latency", "summarize_low_latency"]

INT4_LIMIT = "num_rdma_bytes / sizeof(int4) (hint <= 2^35 - 128 B, the 32 GiB ceiling)"
RANKS_LIMIT = "num_ranks % 8 above 8 ranks (Buffer: below 8 or a multiple of 8)"


def _dispatch_record(hidden: int, use_fp8: bool, variant: int, slot_bytes: int) -> RecordLayout:
    """The dispatch message as the LL kernel sends it (``LLK:176-182``): an ``int4`` whose first
    int is the source token index, then FP8 data + fp32 scales or BF16 data. LL0/LL1 (FP8
    only) put the data first and the source index after the scales."""
    scales = hidden // 128 if use_fp8 else 0
    data_bytes = hidden if use_fp8 else hidden * BF16_BYTES
    num_bytes = INT4_BYTES + data_bytes + scales * FLOAT_BYTES
    if variant <= 1:
        fields = [Field(name="hidden", offset=0, num_bytes=hidden, dtype="float8_e4m3", count=hidden),
                  Field(name="scales", offset=hidden, num_bytes=scales * FLOAT_BYTES, dtype="float32", count=scales),
                  Field(name="src_idx", offset=hidden + scales * FLOAT_BYTES, num_bytes=INT_BYTES, dtype="int32",
                        count=1)]
    else:
        fields = [Field(name="src_idx", offset=0, num_bytes=INT_BYTES, dtype="int32", count=1),
                  Field(name="hidden", offset=INT4_BYTES, num_bytes=data_bytes,
                        dtype="float8_e4m3" if use_fp8 else "bfloat16", count=hidden),
                  Field(name="scales", offset=INT4_BYTES + data_bytes, num_bytes=scales * FLOAT_BYTES,
                        dtype="float32", count=scales)]
    return RecordLayout.from_fields(
        "low-latency dispatch message", num_bytes, fields,
        view=f"as sent ({'FP8' if use_fp8 else 'BF16'}); the layout reserves {format_int(slot_bytes)} B per slot")


def _combine_record(hidden: int, variant: int, num_bytes: int) -> RecordLayout:
    """The combine slot (``LLK:766-770``): BF16 data; LL0-LL2 behind a control ``int4``; LL5
    reserves ``4 * H/128`` bytes of LogFMT min/max (used only with ``use_logfmt``)."""
    fields, offset = [], 0
    if variant <= 2:
        fields.append(Field(name="control", offset=0, num_bytes=INT4_BYTES, dtype="int32", count=4))
        offset = INT4_BYTES
    fields.append(Field(name="hidden", offset=offset, num_bytes=hidden * BF16_BYTES, dtype="bfloat16", count=hidden))
    view = "BF16 (use_logfmt=False); with LogFMT the first 4 x hidden/128 B hold min/max" if variant >= 5 else "BF16"
    return RecordLayout.from_fields("low-latency combine message", num_bytes, fields, view=view)


@lru_cache(maxsize=None)
def _limit_texts(version: str) -> tuple[str, ...]:
    """The version-dependent names and sources of the limits, in :func:`_limit_rows`' order."""
    v = get_version(version)
    return (v.cite("LLK", "501, 1179", "kNumMaxTopK"), v.cite("BUF", "1483", "low_latency_dispatch"),
            v.cite("BUF", "112"), set_name("hidden (SWITCH_HIDDEN)", v.ll_hidden_sizes),
            v.cite("LAUNCH", "113-135", "SWITCH_HIDDEN"), v.cite("BUF", "1530", "low_latency_dispatch"),
            v.cite("BUF", "1526", "low_latency_dispatch"), v.cite("LLK", "506", "dispatch workspace"),
            v.cite("BUF", "114", "Buffer constructor"))


def _limit_rows(v: Version, texts: tuple[str, ...], topk: int, experts: int, ranks: int, hidden: int, fp8: bool,
                tokens: int, hint: int, device=None) -> list[LimitRow]:
    """Every low-latency limit, in report order (``texts``: :func:`_limit_texts` of ``v``; ``device``:
    the :class:`~epbuf.devices.DeviceSpec` bounding the combine launch's shared memory, :mod:`.smem`)."""
    src_topk, src_experts, src_int4, hidden_name, src_hidden, src_fp8, src_tma, src_workspace, src_ranks = texts
    odd_ranks = ranks % NUM_MAX_NVL_PEERS if ranks > NUM_MAX_NVL_PEERS else 0
    rows: list[LimitRow] = [
        ("num_topk", topk, "<=", v.ll_num_max_topk, topk <= v.ll_num_max_topk, src_topk, "host"),
        ("num_experts % num_ranks", experts % ranks, "==", 0, experts % ranks == 0, src_experts, "host"),
        (RANKS_LIMIT, odd_ranks, "==", 0, odd_ranks == 0, src_ranks, "host"),
    ]
    if v.int4_count_check:
        rows.append((INT4_LIMIT, hint // INT4_BYTES, "<", INT32_MAX, passes_int4_check(hint), src_int4, "host"))
    rows.append(in_row(hidden_name, hidden, v.ll_hidden_sizes, src_hidden, "host"))
    if fp8 and v.ll_fp8_hidden_512:
        rows.append(("hidden % 512 (FP8 dispatch)", hidden % 512, "==", 0, hidden % 512 == 0, src_fp8, "host"))
    tma = ranks * tokens
    workspace = experts * INT_BYTES * 2
    rows += [
        ("num_ranks x num_max_dispatch_tokens_per_rank % 4 (TMA)", tma % 4, "==", 0, tma % 4 == 0, src_tma, "host"),
        ("num_experts x 2 ints (workspace)", workspace, "<=", NUM_WORKSPACE_BYTES, workspace <= NUM_WORKSPACE_BYTES,
         src_workspace, "host"),
    ]
    if hidden in v.ll_hidden_sizes:  # another hidden stops at SWITCH_HIDDEN's assert before the launch
        rows += smem_rows(v, device, low_latency_launches(v, hidden))
    return rows


def report_low_latency(plan) -> Report:
    """Size DeepEP V1's low-latency RDMA buffer for ``plan``: the layout's six buffers, the hint,
    message byte maps, the constructor's size ceiling and kernel limits. The report adds the
    constructor's 32 MiB workspace (:mod:`.memory`); no NVL allocation, as upstream's recipe and
    test build the low-latency ``Buffer`` with ``num_nvl_bytes = 0`` (``DOC:256``,
    ``tests/legacy/test_low_latency.py:263-270``).

    Raises:
        InvalidArgumentError: an unknown version or commit; ``experts x tokens`` beyond the C++
            ``int`` the layout multiplies in; a hidden size whose buffers are not multiples of 16 B
            (the layout's own asserts). Everything else is a limit and a finding.
    """
    check_plan(plan)
    v = get_version(plan.version)
    topk_idx_bytes(v, plan.num_topk_idx_bits)  # 32-bit builds exist from da6ca24 on
    tokens, hidden, ranks = plan.num_max_tokens_per_rank, plan.hidden, plan.num_ranks
    experts = plan.num_total_experts
    layout = LowLatencyLayout(tokens, hidden, ranks, experts, version=v.id)
    buffer = rdma_buffer(layout, v)
    hint = buffer.num_bytes
    fp8 = plan.use_fp8_dispatch
    message_fp8 = fp8 or not v.ll_bf16_dispatch
    records = [_dispatch_record(hidden, message_fp8, v.low_latency, layout.num_bytes_per_dispatch_msg),
               _combine_record(hidden, v.low_latency, layout.num_bytes_per_combine_msg)]
    limits = limit_checks(_limit_rows(v, _limit_texts(v.id), plan.num_topk, experts, ranks, hidden, fp8, tokens,
                                      hint, device_spec(plan.device)))

    needed = buffer.num_bytes_needed
    findings = [
        Finding(severity="info", code="deepep-ll.hint-extra-block",
                message=f"the hint rounds total_bytes = {format_int(layout.total_bytes)} to the next multiple of 128 "
                        f"strictly above it ({format_int(hint)}); {format_int(needed)} B "
                        "(total_bytes aligned to 128) is the least a run accepts",
                data={"total_bytes": layout.total_bytes, "hint": hint, "needed": needed}),
    ]
    if v.low_latency == 0:
        findings.append(Finding(severity="info", code="deepep-ll.num-ranks-used",
                                message=f"{v.id} reserves E / num_ranks = {experts // ranks} atomic token counters "
                                        "per signaling buffer, so num_ranks enters the hint", data={}))
    else:
        findings.append(Finding(severity="info", code="deepep-ll.num-ranks-unused",
                                message="num_ranks does not enter the low-latency hint (only num_experts does)",
                                data={}))
    if plan.num_redundant_experts:
        findings.append(Finding(
            severity="info", code="deepep-ll.eplb",
            message=f"EPLB: the library sees {experts} experts ({plan.num_experts} routed + "
                    f"{plan.num_redundant_experts} redundant); send and receive buffers grow linearly with them",
            data={"num_experts": experts}))
    if not fp8:
        if v.ll_bf16_dispatch:
            findings.append(Finding(severity="info", code="deepep-ll.bf16-slots",
                                    message="BF16 dispatch: the layout always sizes BF16 slots (FP8 uses less of them)",
                                    data={}))
        else:
            findings.append(Finding(severity="error", code="deepep-ll.bf16-unsupported",
                                    message=f"{v.id} dispatches FP8 only (BF16 low-latency dispatch arrived with "
                                            "ed7487c, ll2); the record shows the FP8 message", data={}))
    if v.low_latency >= 5:
        findings.append(Finding(
            severity="info", code="deepep-ll.logfmt-space",
            message=f"combine slots reserve {layout.num_scales * BF162_BYTES} B of LogFMT min/max per message "
                    "even when LogFMT is off", data={"num_bytes": layout.num_scales * BF162_BYTES}))
    try:
        best = max_low_latency_tokens(hidden, ranks, experts, version=v.id) if v.int4_count_check else None
    except InvalidArgumentError:  # a shape one token cannot have, though this token count can
        best = None
    if best is not None:
        findings.append(Finding(
            severity="info", code="deepep-ll.max-tokens",
            message=f"the largest num_max_dispatch_tokens_per_rank whose hint Buffer accepts here is "
                    f"{format_int(best)} (hint <= {format_int(MAX_NUM_BYTES_INT4_CHECK)} B)",
            data={"max_tokens": best}))
    elif not passes_int4_check(hint):
        findings.append(Finding(
            severity="warning", code="deepep-ll.newer-ceiling",
            message=f"{v.id} accepts this {format_int(hint)} B buffer, but from 4623c67 on (main, 2.x) Buffer "
                    f"rejects more than {format_int(MAX_NUM_BYTES_INT4_CHECK)} B (num_rdma_bytes / 16 < INT_MAX)",
            data={"limit": MAX_NUM_BYTES_INT4_CHECK}))
    findings += unmerged_finding(v)
    findings += limit_findings("deepep-ll.limit", limits)

    element_size = 1 if message_fp8 else BF16_BYTES
    quantities = [
        Quantity(name="num_topk", value=plan.num_topk, source=v.cite("BUF", "1480", "topk_idx.size(1)")),
        Quantity(name="element_size", value=element_size, unit="B"),
        Quantity(name="hidden_bytes", value=hidden * element_size, unit="B"),
        Quantity(name="num_scales", value=layout.num_scales, source=v.cite("CFG", "132")),
        Quantity(name="num_bytes_per_dispatch_msg", value=layout.num_bytes_per_dispatch_msg, unit="B",
                 source=v.cite("CFG", "143")),
        Quantity(name="num_bytes_per_combine_msg", value=layout.num_bytes_per_combine_msg, unit="B",
                 source=v.cite("CFG", "144")),
        Quantity(name="dispatch_message_num_bytes", value=records[0].num_bytes, unit="B", source=v.cite("LLK", "180")),
        Quantity(name="dispatch_record_num_bytes", value=records[0].num_bytes, unit="B", source=v.cite("LLK", "180")),
        Quantity(name="hint_dispatch_record_num_bytes", value=layout.num_bytes_per_dispatch_msg, unit="B",
                 source=v.cite("CFG", "143")),
        Quantity(name="combine_record_num_bytes", value=records[1].num_bytes, unit="B", source=v.cite("CFG", "144")),
        Quantity(name="send_buffer_bytes", value=layout.send_buffer_bytes, unit="B"),
        Quantity(name="recv_buffer_bytes", value=layout.recv_buffer_bytes, unit="B"),
        Quantity(name="signaling_buffer_bytes", value=layout.signaling_buffer_bytes, unit="B"),
        Quantity(name="signaling_buffer_bytes_aligned", value=layout.signaling_buffer_bytes_aligned, unit="B"),
        Quantity(name="total_bytes", value=layout.total_bytes, unit="B"),
        Quantity(name="num_rdma_bytes", value=hint, unit="B", source=v.cite("CFG", "187")),
        Quantity(name="workspace_num_bytes", value=NUM_WORKSPACE_BYTES, unit="B", source=v.cite("CPL", "7")),
    ]
    if v.int4_count_check:
        quantities.append(Quantity(name="max_num_rdma_bytes", value=MAX_NUM_BYTES_INT4_CHECK, unit="B",
                                   source=v.cite("BUF", "112")))
    if best is not None:
        quantities.append(Quantity(name="max_num_max_dispatch_tokens_per_rank", value=best))
    inputs = {
        "version": v.id, "deepep_version": v.id, "num_max_dispatch_tokens_per_rank": tokens, "hidden": hidden,
        "num_ranks": ranks, "num_experts": experts, "num_routed_experts": plan.num_experts,
        "num_redundant_experts": plan.num_redundant_experts, "num_topk": plan.num_topk, "use_fp8_dispatch": fp8,
        "num_topk_idx_bits": plan.num_topk_idx_bits or 64,
    }
    return Report(backend="deepep-ll", title="DeepEP V1 low-latency RDMA buffer", upstream=upstream_line(v),
                  inputs=inputs, buffers=(buffer, workspace_allocation(v)), records=tuple(records),
                  quantities=tuple(quantities),
                  findings=tuple(findings), limits=tuple(limits))


@lru_cache(maxsize=4096)
def _static(version: str | None, hidden: int, ranks: int, experts: int, bits: int | None) -> tuple | None:
    """The token-independent part of :func:`summarize_low_latency`: ``(version, message slots and
    aligned signaling, limit texts)``; ``None`` for a version or build the report rejects."""
    try:
        v = get_version(version)
        topk_idx_bytes(v, bits)
    except InvalidArgumentError:
        return None
    return (v,) + slots(hidden, ranks, experts, v.low_latency) + (_limit_texts(v.id),)


_SIZE = itemgetter(2)


def summarize_low_latency(plan) -> Summary:
    """``summary_of(report_low_latency(plan))`` without building the report: the token-independent
    parts are cached (:func:`_static`); per call, the layout's span rows and rounding row (the
    regions of the RDMA buffer) and the limit rows, as integers. Relies on ``plan`` holding
    checked integers (``Plan`` checks them).

    Raises:
        InvalidArgumentError: as :func:`report_low_latency`.
    """
    check_plan(plan)
    experts = plan.num_experts + plan.num_redundant_experts
    try:
        static = _static(plan.version, plan.hidden, plan.num_ranks, experts, plan.num_topk_idx_bits)
    except TypeError:  # an unhashable version: rejected by the report
        static = None
    if static is not None:
        v, dispatch, combine, signaling, texts = static
        tokens = plan.num_max_tokens_per_rank
        send, recv = send_recv(tokens, experts, dispatch, combine)
        if not layout_problems(tokens, plan.hidden, experts, send, recv):
            rows = span_rows(v.low_latency, send, recv, signaling)
            total = 2 * (send + recv + signaling)
            hint = hint_round_up(total)
            rows.append((ROUNDING_BLOCK, total, hint - total))
            broken = tuple([row[0] for row in _limit_rows(v, texts, plan.num_topk, experts, plan.num_ranks,
                                                           plan.hidden, plan.use_fp8_dispatch, tokens, hint,
                                                           device_spec(plan.device))
                            if not row[4]])
            # The RDMA buffer, then the workspace (summary_of's order: the first largest buffer
            # binds, and within it the first largest region, as Buffer.binding_region picks it).
            binding = max(rows, key=_SIZE)[0] if hint >= NUM_WORKSPACE_BYTES else "workspace"
            return Summary(num_bytes=hint + NUM_WORKSPACE_BYTES,
                           num_bytes_needed=align(total, NUM_BUFFER_ALIGNMENT_BYTES) + NUM_WORKSPACE_BYTES,
                           binding=binding, broken=broken)
    return summary_of(report_low_latency(plan))  # a rejected plan: the report raises its error
