"""DeepEP-Ascend's report of one plan: the workspace, every limit, the report and the sweep's summary.

What no upstream size function can evaluate (an ``int`` product or stride beyond int32, sizes
beyond int64) makes a plan invalid; everything upstream refuses later (the dispatch/combine host
asserts, kernel limits, fixed-size signal arrays) is a limit row, broken or not, and the report
keeps its sizes (README, "Plans upstream would refuse: one rule"). :func:`report` and
:func:`summarize` read the same rows, so a summary is exactly the report's.
"""

from __future__ import annotations

from functools import lru_cache

from ...errors import Checker, InvalidArgumentError, Problem
from ...report import Buffer, Finding, LimitCheck, Quantity, Region, Report, Summary
from ...units import INT32_MAX, INT64_MAX, align, format_int
from .._cstruct import struct_offsets
from .._limits import limit_checks, limit_findings
from .constants import (CPL, DISPATCH_NUM_THREADS, EPB, IDISPATCH, IEPILOGUE, KCOMBINE, NUM_ALLOCATION_ALIGNMENT_BYTES,
                        NUM_MAX_EXPERTS, NUM_MAX_EXPERTS_PER_RANK, NUM_MAX_RANKS, NUM_MAX_TOPK,
                        NUM_MAX_VEC_CORES, NUM_SECTOR_INTS, RED, REDUCTION_MAX_HIGH_COUNT,
                        REDUCTION_MAX_LOW_COUNT, SF_PACK_BYTES, SIG, TOK, TOPK_IDX_BYTES, UPSTREAM, WSP)
from .layout import BufferLayout, _buffer_num_bytes, _record_num_bytes, check_record
from .sizes import (_check_int64, _check_record_int, actual_num_sf_packs, combine_buffer_layout,
                    dispatch_buffer_layout, effective_topk, element_size, hint_num_sf_packs)

__all__ = ["workspace_num_bytes", "report", "summarize"]


# --- workspace ----------------------------------------------------------------------------
@lru_cache(maxsize=1)
def workspace_num_bytes() -> int:
    """``sizeof(EPSignals)``, the workspace ``EPBuffer`` allocates beside the buffer (``EPB:44-46``).

    ``EPSignals`` is ``alignas(kNumAllocationAlignmentBytes)`` (``WSP:8-18``) and holds
    ``CommonSignals`` (``SIG:9-17``: 256 peer pointers and two 512-byte-aligned barrier
    words) and histograms sized by the compile-time maxima, so it does not depend on
    the plan. Laid out here member by member, as the compiler does.
    """
    _, common = struct_offsets(
        [("peer_ptrs", 8 * NUM_MAX_RANKS, 8), ("grid_sync_count", 4, 512),
         ("barrier_counter", 8, 512), ("barrier_signals", 4 * 2, 4)],
    )
    _, signals = struct_offsets(
        [
            ("common_signals", common, 512),
            ("local_expert_histogram", 4 * NUM_MAX_EXPERTS * NUM_SECTOR_INTS, 4),
            ("remote_expert_histogram", 4 * NUM_MAX_EXPERTS, 4),
            ("local_rank_histogram", 4 * NUM_MAX_VEC_CORES * align(NUM_MAX_RANKS, NUM_SECTOR_INTS), 4),
            ("remote_rank_histogram", 4 * NUM_MAX_RANKS, 4),
            ("host_rank_expert_count", 4 * (NUM_MAX_RANKS + NUM_MAX_EXPERTS), 4),
            ("epilogue_expert_counter", 4 * NUM_MAX_VEC_CORES * NUM_MAX_EXPERTS, 4),
        ],
        NUM_ALLOCATION_ALIGNMENT_BYTES,
    )
    return signals


# --- limits ---------------------------------------------------------------------------
# What no size function can evaluate makes a plan invalid (InvalidArgumentError): an ``int``
# product or stride beyond int32, sizes beyond int64. Everything upstream refuses later (the
# dispatch/combine host asserts, kernel limits) is a limit row below, broken or not: the
# report keeps its sizes (README, "Plans upstream would refuse: one rule").
def _validate(plan) -> None:
    """Arguments no upstream size function can evaluate (beyond the ``int`` it computes in)."""
    error = _validation_error(plan.num_topk, plan.hidden, plan.use_fp8_dispatch, plan.num_sf_packs)
    if error is not None:
        raise error


@lru_cache(maxsize=4096)
def _validation_error(num_topk: int, hidden: int, use_fp8_dispatch: bool, num_sf_packs: int | None):
    c = Checker()
    hidden_bytes = hidden * element_size(use_fp8_dispatch)
    if hidden_bytes > INT32_MAX:
        c.add("hidden", hidden, f"hidden x element size = {hidden_bytes} must fit int32 (num_hidden_bytes is int)")
    else:
        topk = effective_topk(num_topk)
        real_packs = _real_num_sf_packs(hidden, use_fp8_dispatch, num_sf_packs)
        records = (("dispatch", hidden_bytes, hint_num_sf_packs(hidden, use_fp8_dispatch), True, "hidden", hidden),
                   ("dispatch", hidden_bytes, real_packs, True, "num_sf_packs" if num_sf_packs else "hidden",
                    num_sf_packs if num_sf_packs else hidden),
                   ("combine", hidden * 2, 0, False, "hidden", hidden))
        for what, num_hidden_bytes, packs, with_metadata, argument, value in records:
            num_bytes = _record_num_bytes(num_hidden_bytes, packs * SF_PACK_BYTES, topk, with_metadata)
            if not _check_record_int(c, what, num_bytes, topk, argument, value):
                break
    try:
        c.raise_if_any()
    except InvalidArgumentError as error:
        return error
    return None


def _real_num_sf_packs(hidden: int, use_fp8_dispatch: bool, num_sf_packs: int | None) -> int:
    """``Plan.num_sf_packs`` for FP8 when given, else :func:`actual_num_sf_packs`."""
    if num_sf_packs is not None and use_fp8_dispatch:
        return num_sf_packs
    return actual_num_sf_packs(hidden, use_fp8_dispatch)


_SRC_RANKS = f"{CPL}:35 kNumMaxRanks (signal arrays sized by it)"
_SRC_ARRIVALS = f"{IDISPATCH}:586-587 \"Reduction arrival count exceeds 8 bits\"; {RED}:16"
_SRC_TOKENS_RANKS = f"{IDISPATCH}:588-589 \"Per-expert token count exceeds the 24-bit reduction value\"; {RED}:17"
_SRC_TOPK = f"{IDISPATCH}:112; {KCOMBINE}:85"
_SRC_EXPERTS = f"{CPL}:36 kNumMaxExperts (histograms sized by it)"
_SRC_DIVISIBLE = f"{EPB}:139 EP_HOST_ASSERT(num_experts % context->num_ranks == 0) (dispatch; combine asserts it too)"
_SRC_SIMT = f"{IDISPATCH}:109 EP_STATIC_ASSERT(kNumExperts <= kNumThreads), kNumThreads = 512 (:661)"
_SRC_EPR = f"{IEPILOGUE}:246 EP_STATIC_ASSERT(kNumExpertsPerRank <= 512)"
_SRC_HIDDEN = f"{KCOMBINE}:86 EP_HOST_ASSERT(hidden % (kNumVectorRegisterBytes / sizeof(uint16_t)) == 0)"
_SRC_EXPANDED = f"{IDISPATCH}:593-596 \"Expanded token count including expert padding overflows int\""
_SRC_INT64 = f"{EPB}:28 int64_t num_buffer_bytes"
_SRC_TOPK_IDX = f"{EPB}:167 EP_HOST_ASSERT(topk_idx.scalar_type() == torch::kInt64) (dispatch; combine asserts it too)"
TOPK_IDX_BITS = 8 * TOPK_IDX_BYTES  # int64 routing indices; a DeepEP build with 32-bit topk_idx_t does not fit


def _limit_rows(num_ranks: int, num_tokens: int, topk: int, experts: int, hidden: int, hint_bytes: int,
                topk_idx_bits: int | None = None) -> tuple:
    """Every limit as ``(name, value, relation, bound, ok, source, enforced)`` — the one
    definition both :func:`report` (as ``LimitCheck`` records) and :func:`summarize` read.
    ``topk_idx_bits``: ``Plan.num_topk_idx_bits`` (``None``: int64, what Ascend expects)."""
    idx_bits = TOPK_IDX_BITS if topk_idx_bits is None else topk_idx_bits
    experts_per_rank = experts // num_ranks
    tokens_x_ranks = num_tokens * num_ranks
    expanded = tokens_x_ranks * min(topk, experts_per_rank)
    return (
        ("num_ranks", num_ranks, "<=", NUM_MAX_RANKS, num_ranks <= NUM_MAX_RANKS, _SRC_RANKS, "kernel"),
        ("num_ranks (8-bit reduction arrival count)", num_ranks, "<=", REDUCTION_MAX_HIGH_COUNT,
         num_ranks <= REDUCTION_MAX_HIGH_COUNT, _SRC_ARRIVALS, "kernel"),
        ("tokens x ranks (24-bit reduction value)", tokens_x_ranks, "<=", REDUCTION_MAX_LOW_COUNT,
         tokens_x_ranks <= REDUCTION_MAX_LOW_COUNT, _SRC_TOKENS_RANKS, "kernel"),
        ("num_topk", topk, "<=", NUM_MAX_TOPK, topk <= NUM_MAX_TOPK, _SRC_TOPK, "kernel"),
        ("num_experts", experts, "<=", NUM_MAX_EXPERTS, experts <= NUM_MAX_EXPERTS, _SRC_EXPERTS, "assumed"),
        ("num_experts % num_ranks", experts % num_ranks, "==", 0, experts % num_ranks == 0, _SRC_DIVISIBLE, "host"),
        ("num_experts (dispatch SIMT worker)", experts, "<=", DISPATCH_NUM_THREADS,
         experts <= DISPATCH_NUM_THREADS, _SRC_SIMT, "kernel"),
        ("num_experts_per_rank (receive epilogue)", experts_per_rank, "<=", NUM_MAX_EXPERTS_PER_RANK,
         experts_per_rank <= NUM_MAX_EXPERTS_PER_RANK, _SRC_EPR, "kernel"),
        ("hidden % 128 (combine reduce epilogue)", hidden % 128, "==", 0, hidden % 128 == 0, _SRC_HIDDEN, "host"),
        ("expanded tokens (ranks x tokens x min(topk, experts per rank))", expanded, "<=", INT32_MAX,
         expanded <= INT32_MAX, _SRC_EXPANDED, "kernel"),
        ("buffer bytes", hint_bytes, "<=", INT64_MAX, hint_bytes <= INT64_MAX, _SRC_INT64, "host"),
        ("topk_idx bits", idx_bits, "==", TOPK_IDX_BITS, idx_bits == TOPK_IDX_BITS, _SRC_TOPK_IDX, "host"),
    )


def _limits(plan, topk: int, hint_bytes: int) -> list[LimitCheck]:
    return limit_checks(_limit_rows(plan.num_ranks, plan.num_max_tokens_per_rank, topk, plan.num_total_experts,
                                    plan.hidden, hint_bytes, plan.num_topk_idx_bits))


# Why a broken limit refuses the plan, by where upstream enforces it.
_CONSEQUENCE = {
    "kernel": "the dispatch/combine call will be rejected",
    "host": "the dispatch/combine call will be rejected",
    "assumed": "upstream does not check it, but its fixed-size signal arrays would overflow",
}


def report(plan) -> Report:
    """Size DeepEP-Ascend's ``EPBuffer`` for ``plan``: the hint, the real need, every
    record's byte map, writer/reader consistency and kernel limits.

    A plan the size functions evaluate gets its sizes even when a later step refuses it:
    ranks above 256, top-k above 32, experts above 2048 or not divisible by the ranks, kernel
    limits — each a limit with ``ok=False`` and an ``ascend.kernel-limit`` error finding.

    Raises:
        InvalidArgumentError: not a :class:`~epbuf.plan.Plan`; hidden bytes or a record stride
            beyond the int32 upstream computes them in; sizes beyond int64.
    """
    from ...plan import Plan

    if not isinstance(plan, Plan):
        raise InvalidArgumentError([Problem("plan", plan, "must be an epbuf.Plan")])
    _validate(plan)
    fp8 = plan.use_fp8_dispatch
    topk = effective_topk(plan.num_topk)
    elem = element_size(fp8)
    hint_packs = hint_num_sf_packs(plan.hidden, fp8)
    real_packs = _real_num_sf_packs(plan.hidden, fp8, plan.num_sf_packs)
    ranks, tokens, hidden = plan.num_ranks, plan.num_max_tokens_per_rank, plan.hidden

    hint_dispatch = dispatch_buffer_layout(tokens, hidden, hint_packs, topk, elem, ranks)
    real_dispatch = dispatch_buffer_layout(tokens, hidden, real_packs, topk, elem, ranks)
    combine = combine_buffer_layout(ranks, tokens, hidden, topk)

    def formula(layout: BufferLayout) -> str:
        return (f"{layout.num_ranks} x {format_int(layout.num_max_tokens_per_rank)} tokens x "
                f"{format_int(layout.num_bytes_per_token)} B/record")

    regions = [
        Region(name="dispatch receive buffer", num_bytes=hint_dispatch.num_bytes, num_bytes_used=real_dispatch.num_bytes,
               formula=formula(hint_dispatch)
               + (f" (a real run: {format_int(real_dispatch.num_bytes_per_token)} B/record)" if real_packs != hint_packs else ""),
               source=f"{EPB}:560-569", shape=(ranks, tokens),
               record="dispatch (hint)" if real_packs != hint_packs else "dispatch"),
        Region(name="combine reduce buffer", num_bytes=combine.num_bytes, num_bytes_used=combine.num_bytes,
               formula=f"min(topk {topk}, ranks {ranks}) = " + formula(combine), source=f"{EPB}:571-579",
               shape=(combine.num_ranks, tokens), record="combine"),
    ]
    buffer = Buffer.combine("EP buffer", regions, "max", NUM_ALLOCATION_ALIGNMENT_BYTES, source=f"{EPB}:581-605")
    _check_int64(tokens, buffer.num_bytes)
    workspace = workspace_num_bytes()
    workspace_buffer = Buffer.combine(
        "workspace",
        [Region(name="EPSignals", num_bytes=workspace, num_bytes_used=workspace,
                formula="sizeof(EPSignals): signals and histograms at kNumMaxRanks/kNumMaxExperts maxima",
                source=f"{WSP}:8-18; {SIG}:9-17")],
        "sum", NUM_ALLOCATION_ALIGNMENT_BYTES, source=f"{EPB}:44-46",
    )

    dtype = "float8_e4m3fn" if fp8 else "bfloat16"
    records = [
        real_dispatch.token_layout.reader_record("dispatch", dtype),
        combine.token_layout.reader_record("combine", "bfloat16"),
    ]
    if hint_packs != real_packs:
        records.insert(1, hint_dispatch.token_layout.reader_record("dispatch (hint)", dtype))
    findings = check_record(real_dispatch.token_layout)
    if any(f.code == "ascend.reader-writer-mismatch" for f in findings):
        records.insert(1, real_dispatch.token_layout.writer_record("dispatch (as written)", dtype))
    if hint_packs != real_packs:
        findings.append(Finding(
            severity="info", code="ascend.hint-sf-approximation",
            message=(f"the hint reserves ceil(hidden/32) = {hint_packs} SF packs per token; a real FP8 dispatch sends "
                     f"{real_packs}, so the dispatch region is "
                     + (f"{format_int(hint_dispatch.num_bytes - real_dispatch.num_bytes)} B larger than used"
                        if hint_dispatch.num_bytes >= real_dispatch.num_bytes else
                        f"{format_int(real_dispatch.num_bytes - hint_dispatch.num_bytes)} B smaller than a real run "
                        f"needs")),
            data={"hint_num_sf_packs": hint_packs, "real_num_sf_packs": real_packs,
                  "num_bytes_over_reserved": hint_dispatch.num_bytes - real_dispatch.num_bytes},
        ))
    if buffer.num_bytes_needed > buffer.num_bytes:
        findings.append(Finding(
            severity="error", code="ascend.hint-too-small",
            message=(f"with {real_packs} SF packs per token a real dispatch needs {format_int(buffer.num_bytes_needed)} B "
                     f"but the hint allocates {format_int(buffer.num_bytes)} B; dispatch fails "
                     f"EP_HOST_ASSERT(get_dispatch_buffer_size(...) <= num_buffer_bytes) ({EPB})"),
            data={"num_bytes_needed": buffer.num_bytes_needed, "num_bytes_hint": buffer.num_bytes},
        ))
    limits = _limits(plan, topk, buffer.num_bytes)
    findings.extend(limit_findings("ascend.kernel-limit", limits, _CONSEQUENCE))

    quantities = (
        Quantity(name="num_topk", value=topk, source=f"{EPB}:590"),
        Quantity(name="element_size", value=elem, unit="B", source=f"{EPB}:595"),
        Quantity(name="hidden_bytes", value=hidden * elem, unit="B", source=f"{EPB}:560-569"),
        Quantity(name="num_scaleup_ranks", value=ranks, source=f"{EPB}:44-46 comm::Context(..., num_ranks, ...): one flat domain"),
        Quantity(name="num_scaleout_ranks", value=1, source=f"{EPB}:44-46 comm::Context(..., num_ranks, ...): one flat domain"),
        Quantity(name="hint_num_sf_packs", value=hint_packs, source=f"{EPB}:594"),
        Quantity(name="real_num_sf_packs", value=real_packs),
        Quantity(name="dispatch_record_num_bytes", value=real_dispatch.num_bytes_per_token, unit="B", source=f"{TOK}:36-43"),
        Quantity(name="hint_dispatch_record_num_bytes", value=hint_dispatch.num_bytes_per_token, unit="B"),
        Quantity(name="combine_record_num_bytes", value=combine.num_bytes_per_token, unit="B"),
        Quantity(name="combine_num_buffers", value=combine.num_ranks, source=f"{EPB}:577"),
        Quantity(name="hint_dispatch_num_bytes", value=hint_dispatch.num_bytes, unit="B"),
        Quantity(name="real_dispatch_num_bytes", value=real_dispatch.num_bytes, unit="B"),
        Quantity(name="combine_num_bytes", value=combine.num_bytes, unit="B"),
        Quantity(name="hint_num_bytes", value=buffer.num_bytes, unit="B", source=f"{EPB}:604"),
        Quantity(name="needed_num_bytes", value=buffer.num_bytes_needed, unit="B"),
        Quantity(name="workspace_num_bytes", value=workspace, unit="B", source=f"{WSP}:8-18"),
    )
    inputs = {
        "num_ranks": ranks, "num_max_tokens_per_rank": tokens, "hidden": hidden, "num_topk": plan.num_topk,
        "num_experts": plan.num_experts, "num_redundant_experts": plan.num_redundant_experts,
        "use_fp8_dispatch": fp8, "num_sf_packs": real_packs,
    }
    return Report(
        backend="ascend",
        title="DeepEP-Ascend EPBuffer",
        upstream=UPSTREAM,
        inputs=inputs,
        buffers=(buffer, workspace_buffer),
        records=tuple(records),
        quantities=quantities,
        findings=tuple(findings),
        limits=tuple(limits),
    )


@lru_cache(maxsize=65536)
def _token_independent(num_topk: int, hidden: int, use_fp8_dispatch: bool, num_sf_packs: int | None):
    """Everything :func:`summarize` needs that does not depend on the token count or the ranks:
    the validation error (or ``None``), effective top-k and the three record strides."""
    error = _validation_error(num_topk, hidden, use_fp8_dispatch, num_sf_packs)
    if error is not None:
        return error
    topk = effective_topk(num_topk)
    hidden_bytes = hidden * element_size(use_fp8_dispatch)
    real_packs = _real_num_sf_packs(hidden, use_fp8_dispatch, num_sf_packs)
    return (
        topk,
        _record_num_bytes(hidden_bytes, hint_num_sf_packs(hidden, use_fp8_dispatch) * SF_PACK_BYTES, topk, True),
        _record_num_bytes(hidden_bytes, real_packs * SF_PACK_BYTES, topk, True),
        _record_num_bytes(hidden * 2, 0, topk, False),
    )


def summarize(plan) -> Summary:
    """:func:`report`'s totals, binding region and broken limits without byte maps or findings,
    through the same record formula (cached per token-independent shape) — what sweeps call."""
    try:
        ranks, tokens, experts = plan.num_ranks, plan.num_max_tokens_per_rank, plan.num_total_experts
        shape = _token_independent(plan.num_topk, plan.hidden, plan.use_fp8_dispatch, plan.num_sf_packs)
    except (AttributeError, TypeError):
        raise InvalidArgumentError([Problem("plan", plan, "must be an epbuf.Plan")]) from None
    if type(shape) is not tuple:
        raise shape
    topk, hint_record, real_record, combine_record = shape
    dispatch = _buffer_num_bytes(ranks, tokens, hint_record)
    combine = _buffer_num_bytes(min(topk, ranks), tokens, combine_record)
    hint = align(max(dispatch, combine), NUM_ALLOCATION_ALIGNMENT_BYTES)
    _check_int64(tokens, hint)
    needed = align(max(_buffer_num_bytes(ranks, tokens, real_record), combine), NUM_ALLOCATION_ALIGNMENT_BYTES)
    workspace = workspace_num_bytes()
    broken = tuple(row[0] for row in _limit_rows(ranks, tokens, topk, experts, plan.hidden, hint,
                                                 plan.num_topk_idx_bits) if not row[4])
    return Summary(num_bytes=hint + workspace, num_bytes_needed=needed + workspace,
                   binding="dispatch receive buffer" if dispatch >= combine else "combine reduce buffer",
                   broken=broken)
