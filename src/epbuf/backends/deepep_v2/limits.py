"""DeepEP V2's limits: every upstream check a plan's sizes can break, as rows.

A plan the size functions evaluate gets its sizes whatever these say; a broken row becomes a
``LimitCheck`` with ``ok=False`` and an ``error`` finding naming the assertion (the rule for
plans upstream would refuse, README). Rows that the size functions themselves assert (hidden
bytes % 32, the worst-case SF bytes, the ``int`` record and token counts) hold by the time a
report exists; they are listed so the report shows every bound.

Every limit is one row ``(name, value, relation, bound, ok, source, enforced)``, in report
order: the token-independent rows before ``ranks x tokens`` (cached in the plan's shape),
``ranks x tokens``, the hybrid rows (cached too), then the token-dependent rest.
:func:`~.report.report` turns them into ``LimitCheck`` records; :func:`~.report.summarize`
reads the names of the failed ones.
"""

from __future__ import annotations

from ...report import Finding, LimitCheck
from ...units import INT32_MAX, INT64_MAX, ceil_div
from .._limits import limit_checks
from .._limits import limit_findings as broken_limit_findings
from .constants import (COMBINE_HIDDEN_GRANULARITY, NUM_MAX_CHANNELS, NUM_MAX_EXPERTS, NUM_MAX_RANKS,
                        NUM_MAX_SCALEOUT_RANKS_KERNEL, NUM_MAX_SCALEUP_RANKS_KERNEL, NUM_MAX_TOPK, NUM_NOTIFY_WARPS,
                        NUM_TMA_ALIGNMENT_BYTES, SF_PACK_BYTES)
from .domain import Domain
from .layout import TokenLayout
from .versions import Generation

__all__ = ["limit_rows_static", "limit_rows_tokens", "limit_rows", "limits", "limit_findings"]


def limit_rows_static(gen: Generation, domain: Domain, num_ranks: int, experts: int, hidden: int, elem: int,
                      topk: int, dispatch_record: TokenLayout) -> tuple[tuple, tuple]:
    """The rows that do not depend on the token count: those before ``ranks x tokens``, and
    the hybrid ones after it (none in direct mode). ``dispatch_record``: the hint's.

    The four ``WorkspaceLayout`` rows are host assertions of later steps, not of the size
    functions: the buffer constructor builds a workspace layout for the rank count
    (``num_ranks <= kNumMaxRanks``), dispatch one with the experts (divisible by the ranks, at
    most ``kNumMaxExperts`` in all and ``kNumMaxExpertsPerRank`` per rank).
    """
    src = gen.sources
    ranks = num_ranks
    experts_per_rank = experts // ranks
    record = dispatch_record.num_bytes(True)
    head = (
        ("num_ranks", ranks, "<=", NUM_MAX_RANKS, ranks <= NUM_MAX_RANKS, src.limit_num_ranks, "host"),
        ("num_experts", experts, "<=", NUM_MAX_EXPERTS, experts <= NUM_MAX_EXPERTS, src.limit_num_experts, "host"),
        ("num_experts % num_ranks", experts % ranks, "==", 0, experts % ranks == 0, src.limit_experts_divisible,
         "host"),
        ("num_experts_per_rank", experts_per_rank, "<=", gen.num_max_experts_per_rank,
         experts_per_rank <= gen.num_max_experts_per_rank, src.limit_experts_per_rank, "host"),
        ("dispatch hidden bytes % 32", hidden * elem % NUM_TMA_ALIGNMENT_BYTES, "==", 0, True,
         f"{src.token_layout} EP_UNIFIED_ASSERT", "host"),
        ("combine hidden bytes % 32", hidden * 2 % NUM_TMA_ALIGNMENT_BYTES, "==", 0, True,
         f"{src.token_layout} EP_UNIFIED_ASSERT", "host"),
        ("ceil(hidden / 32) x 4 (worst-case SF bytes)", ceil_div(hidden, 32) * SF_PACK_BYTES, "<=", hidden, True,
         src.hint_asserts, "host"),
        ("record bytes (int)", record, "<=", INT32_MAX, True, f"{src.token_num_bytes} int get_num_bytes", "host"),
        ("num_topk", topk, "<=", NUM_MAX_TOPK, topk <= NUM_MAX_TOPK,
         f"{src.kernel_topk} (kernels only; the hint accepts any)", "kernel"),
        ("hidden % 256 (combine kernels)", hidden % COMBINE_HIDDEN_GRANULARITY, "==", 0,
         hidden % COMBINE_HIDDEN_GRANULARITY == 0, src.kernel_combine_hidden, "kernel"),
    )
    if domain.mode != "hybrid":
        return head, ()
    so, su = domain.num_scaleout_ranks, domain.num_scaleup_ranks
    notify = su + experts_per_rank
    return head, (
        ("num_scaleout_ranks (hybrid kernels)", so, "<=", NUM_MAX_SCALEOUT_RANKS_KERNEL,
         so <= NUM_MAX_SCALEOUT_RANKS_KERNEL, src.kernel_scaleout, "kernel"),
        ("num_scaleup_ranks (hybrid kernels)", su, "<=", NUM_MAX_SCALEUP_RANKS_KERNEL,
         su <= NUM_MAX_SCALEUP_RANKS_KERNEL, src.kernel_scaleup, "kernel"),
        ("num_scaleup_ranks + num_experts_per_rank (hybrid notify threads)", notify, "<=", NUM_NOTIFY_WARPS * 32,
         notify <= NUM_NOTIFY_WARPS * 32, src.kernel_notify, "kernel"),
    )


def limit_rows_tokens(shape, tokens: int, hint_bytes: int) -> tuple[tuple, tuple]:
    """The rows that depend on the token count: ``ranks x tokens``, and those after the hybrid
    rows. ``shape``: the plan's :class:`~.shape.Shape`."""
    src = shape.gen.sources
    src_idx = shape.num_ranks * tokens
    if shape.hybrid:
        so = shape.domain.num_scaleout_ranks
        tail = (("scale-out tokens so x (T + kNumMaxChannels) (int)", so * (tokens + NUM_MAX_CHANNELS), "<=",
                 INT32_MAX, True, src.combine_buffer_size, "host"),)
    elif not shape.allow_multiple_reduction:
        tail = (("tokens x num_topk (int)", tokens * shape.topk, "<=", INT32_MAX, True, src.combine_buffer_size,
                 "host"),)
    else:
        tail = ()
    return (
        ("ranks x tokens (int source global index)", src_idx, "<=", INT32_MAX, src_idx <= INT32_MAX,
         src.kernel_src_idx, "kernel"),
        tail + (("buffer bytes", hint_bytes, "<=", INT64_MAX, hint_bytes <= INT64_MAX,
                 f"{src.calculate_buffer_size} int64_t", "host"),),
    )


def limit_rows(shape, tokens: int, hint_bytes: int) -> tuple:
    """Every limit row, in report order."""
    head, hybrid = shape.limit_rows
    src_idx, tail = limit_rows_tokens(shape, tokens, hint_bytes)
    return head + (src_idx,) + hybrid + tail


def limits(shape, tokens: int, hint_bytes: int) -> list[LimitCheck]:
    return limit_checks(limit_rows(shape, tokens, hint_bytes))


# Why a broken limit refuses the plan, by where upstream enforces it.
_CONSEQUENCE = {
    "kernel": "the kernels will not compile or run for this plan",
    "host": "upstream's host code asserts it, so the buffer constructor or dispatch/combine refuses this plan",
}


def limit_findings(checks: list[LimitCheck]) -> list[Finding]:
    """One ``deepep-v2.kernel-limit`` error finding per broken limit (kernel or host: see ``enforced``)."""
    return broken_limit_findings("deepep-v2.kernel-limit", checks, _CONSEQUENCE)
