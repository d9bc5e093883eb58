"""What the engine recipes for the non-DeepEP libraries share (vLLM's ``pplx`` and MORI all2all
backends, SGLang's MORI backend, the UCCL-EP drop-in): the library environment variables as
engine knobs, the ``--env`` values handed to a :class:`~epbuf.plan.Plan`, and exact searches
over a token count for the ``load`` / ``budget`` / ``limit`` recommendations.

No formula lives here: every size comes from ``epbuf.backends.pplx`` / ``mori_ep`` /
``uccl_ep`` through a callable the recipe passes in.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding, Report
from ..units import INT32_MAX, format_bytes, format_int
from .._search import largest_true
from ._common import EngineContext
from ._knobs import Knob
from ._report import EngineReport, Recommendation

__all__ = ["compose", "MORI_ENV_KNOBS", "PPLX_ENV_KNOBS", "library_env", "token_recommendations", "with_findings",
           "no_buffer_report"]

_MORI = "ROCm/mori @624002c"
#: The MORI environment the ``mori-ep`` backend reads (``epbuf.backends.mori_ep.env``); values are
#: handed over as text and parsed there, as MORI parses them.
MORI_ENV_KNOBS = (
    Knob(name="MORI_SHMEM_HEAP_SIZE", kind="text", source=f"{_MORI} src/shmem/init.cpp:96-150",
         default_note="MORI's default 4 GiB static heap (include/mori/shmem/internal.hpp:61)",
         help="MORI-shmem static heap, allocated whole at init (default 4G)"),
    Knob(name="MORI_SHMEM_MODE", kind="text", source=f"{_MORI} src/shmem/init.cpp:615-638",
         help="static_heap (default) or isolation (one allocation per symmetric buffer)"),
    Knob(name="MORI_EP_COMM", kind="text", source=f"{_MORI} python/mori/ops/dispatch_combine.py:346-364",
         help="cco: carve the handle's buffers from one CCO arena (default shmem on gfx942/gfx950)"),
    Knob(name="MORI_FP8_COMBINE_SCALE_DIM", kind="text",
         source=f"{_MORI} src/ops/dispatch_combine/dispatch_combine.cpp:127-136",
         help="scales per token of a blockwise combine (default 56)"),
)
#: ``NVSHMEM_SYMMETRIC_SIZE``, which the ``pplx`` backend compares the nvshmem_malloc buffers with.
PPLX_ENV_KNOBS = (
    Knob(name="NVSHMEM_SYMMETRIC_SIZE", kind="text", source="docs.nvidia.com/nvshmem/api/gen/env.html",
         default_note="NVSHMEM's default 1073741824 (1g)",
         help="NVSHMEM symmetric heap for pplx-kernels' internode buffers (default 1g)"),
)


def library_env(ctx: EngineContext, knobs: tuple) -> tuple:
    """The ``(name, value)`` pairs of ``knobs`` the user set (``Plan.env``): the library parses
    them itself, so an unset variable is left out rather than given its default."""
    return tuple((k.name, ctx.value(k.name)) for k in knobs if ctx.value(k.name) is not None)


def _safe(fn, t: int):
    try:
        return fn(t)
    except InvalidArgumentError:
        return None


def token_recommendations(ctx: EngineContext, knob: str, total, broken, *, what: str, hi: int = INT32_MAX,
                          load_text: str = "", cap: int | None = None, cap_text: str = "",
                          step_ok=None, budget_total=None, budget_text: str = "",
                          budget_ignores: tuple = ()) -> list[Recommendation]:
    """``limit`` / ``load`` / ``budget`` recommendations for a token count ``knob``.

    Args:
        total: ``total(t)``: the engine's allocation per device for ``t`` tokens (non-decreasing).
        broken: ``broken(t)``: the names of the limits the plan at ``t`` tokens breaks; a limit that
            holds at one token and breaks at ``t`` is one the token count alone breaks (non-decreasing).
            Either callable may raise ``InvalidArgumentError`` where upstream cannot size ``t``.
        what: the allocation in words (``MORI's EpDispatchCombineHandle``) for the messages.
        hi: the largest count worth searching (the int product upstream computes sizes in).
        cap, cap_text: a hard cap the engine itself asserts (and why), or ``None``.
        step_ok: ``step_ok(t)``: a divisibility check the values must also pass (UCCL-EP's
            ``num_ranks x T % 4``), left out of ``broken`` because it is not monotone; recommended
            values are moved down (limit, budget) or up (load) to the nearest count that passes.
        budget_total, budget_text: the allocation the ``budget`` search uses instead of ``total``, and
            what it assumes (MORI: the static heap sized to the handle).
        budget_ignores: limit names the budget search leaves out (what ``budget_total`` resizes).

    The searches are exact: :func:`~epbuf._search.largest_true` over the callables, which the
    backends evaluate with upstream's integer arithmetic.
    """
    base = _safe(broken, 1)
    base = set(base or ())
    ok = step_ok or (lambda t: True)

    def down(t):
        while t is not None and t > 0 and not ok(t):
            t -= 1
        return t or None

    def fits_limits(t: int) -> bool:
        names = _safe(broken, t)
        return names is not None and set(names) <= base

    top = min(hi, cap) if cap is not None else hi
    recs = []
    raw = largest_true(1, top, fits_limits)
    best = down(raw)
    if raw is not None and raw < top:
        newly = sorted(set(_safe(broken, raw + 1) or ()) - base) or ["upstream cannot size it"]
        recs.append(Recommendation(setting=knob, value=best, goal="limit", num_bytes=_safe(total, best) if best else None,
                                   message=f"the largest {knob} {what} accepts: {format_int(raw + 1)} breaks "
                                           f"{'; '.join(newly)} (exact search over the library's own arithmetic)"))
    elif cap is not None and raw == top:
        recs.append(Recommendation(setting=knob, value=best, goal="limit", num_bytes=_safe(total, best) if best else None,
                                   message=f"the largest {knob} allowed: {cap_text}"))
    ceiling = best if best is not None else 0
    if ctx.load is not None:
        load = ctx.load
        while not ok(load):
            load += 1
        if load > ceiling:
            why = cap_text if cap is not None and ctx.load > cap else f"{what} breaks a limit above {format_int(ceiling)}"
            recs.append(Recommendation(setting=knob, value=None, goal="load",
                                       message=f"no {knob} serves {format_int(ctx.load)} tokens per rank in one call: "
                                               f"{why}"))
        else:
            recs.append(Recommendation(setting=knob, value=load, goal="load", num_bytes=_safe(total, load),
                                       message=f"the smallest {knob} that dispatches {format_int(ctx.load)} tokens per "
                                               f"rank in one call{load_text}"))
    if ctx.budget is not None:
        spend = budget_total or total

        def fits_budget_limits(t: int) -> bool:
            names = _safe(broken, t)
            return names is not None and set(names) - set(budget_ignores) <= base

        bound = largest_true(1, top, fits_budget_limits) if budget_ignores else raw

        def fits(t: int) -> bool:
            n = _safe(spend, t)
            return n is not None and n <= ctx.budget and fits_budget_limits(t)

        value = down(largest_true(1, bound, fits)) if bound else None
        recs.append(Recommendation(
            setting=knob, value=value, goal="budget", num_bytes=_safe(spend, value) if value else None,
            message=(f"the largest {knob} whose {what} fits --budget {format_bytes(ctx.budget)}{budget_text} (exact "
                     "search)" if value else f"nothing fits --budget {format_bytes(ctx.budget)}{budget_text}: one token "
                                             f"per rank already takes {format_bytes(_safe(spend, 1) or 0)}")))
    return recs


def with_findings(rep: Report, findings: list[Finding], limits: list | None = None) -> Report:
    """``rep`` with ``findings`` (and ``limits``) appended."""
    return rep.replace(findings=rep.findings + tuple(findings), limits=rep.limits + tuple(limits or ()))


def no_buffer_report(backend: str, title: str, upstream: str, finding: Finding) -> Report:
    """A report with no allocation and the one finding that says why."""
    return Report(backend=backend, title=title, upstream=upstream, inputs={}, buffers=(), findings=(finding,))


_TOKEN_GOALS = ("load", "budget", "limit")


def compose(rep: EngineReport) -> EngineReport:
    """``rep`` with ``to_set``: one consistent set of its recommendations, one value per token count.

    The recipes search each goal alone (:func:`~._libraries.token_recommendations`): the largest
    value a limit allows, the largest within ``--budget``, the smallest serving the load. Shown side
    by side they contradict each other, so per setting this keeps: the ``load`` value when given
    (it is within the limit; the ``budget`` value stays beside it only when the load does not fit
    the budget, or no value serves the load); else the ``budget`` value (the search stays within
    the limit); else the ``limit`` value only when the current value is above it (a ceiling the
    current value keeps is no advice to raise it). A ``NVSHMEM_QP_DEPTH`` fix computed for the
    current token count follows the one token count recommended (dropped when the current depth
    covers it).
    """
    recs = list(rep.recommendations)
    current = {s.name: s.value for s in rep.settings}
    by_knob: dict[str, dict[str, Recommendation]] = {}
    for r in recs:
        if r.goal in _TOKEN_GOALS:
            by_knob.setdefault(r.setting, {})[r.goal] = r
    drop: set[int] = set()
    chosen: dict[str, int] = {}
    for knob, goals in by_knob.items():
        load, budget, limit = goals.get("load"), goals.get("budget"), goals.get("limit")
        keep: list[Recommendation] = []
        value = None
        if load is not None:
            keep.append(load)
            conflict = load.value is None or (budget is not None and (budget.value is None or load.value > budget.value))
            bound = budget if budget is not None else limit
            if conflict and bound is not None:
                keep.append(bound)
            elif not conflict:
                value = load.value
        elif budget is not None:
            keep.append(budget)
            value = budget.value
            if budget.value is None and limit is not None and _above(current.get(knob), limit.value):
                keep.append(limit)
        elif limit is not None and (limit.value is None or _above(current.get(knob), limit.value)):
            keep.append(limit)
            value = limit.value
        drop.update(id(r) for r in goals.values() if all(r is not k for k in keep))
        if isinstance(value, int) and value != current.get(knob):
            chosen[knob] = value
    out = [r for r in recs if id(r) not in drop]
    # The depth only matters where DeepEP's low-latency assert is one of the report's limits (a MORI
    # or pplx line lists the variable among vLLM's settings, but nothing of it reads the depth).
    qp_limited = any(lim.name.startswith("NVSHMEM_QP_DEPTH") for lim in rep.report.limits)
    if len(chosen) == 1 and qp_limited and isinstance(current.get("NVSHMEM_QP_DEPTH"), int):
        from ._deepep import qp_depth_recommendation

        (tokens,) = chosen.values()
        depth = current["NVSHMEM_QP_DEPTH"]
        out = [r for r in out if not (r.setting == "NVSHMEM_QP_DEPTH" and r.goal == "fix")]
        fix = qp_depth_recommendation(depth, tokens)
        if fix is not None:
            out.append(fix)
    return rep.replace(to_set=tuple(out))


def _above(current: object, ceiling: object) -> bool:
    """Whether a setting's ``current`` value is above ``ceiling`` (unknown: True, so the ceiling shows)."""
    return not isinstance(current, int) or not isinstance(ceiling, int) or current > ceiling
