"""What an engine recipe returns: :class:`EngineReport` (the allocations as an
:class:`~epbuf.report.Report`, the settings used, what to set instead) and its stable JSON form,
schema ``epbuf.engine/1`` (:func:`engine_report_to_dict`, documented in :mod:`epbuf.engines`).
"""

from __future__ import annotations

from .._record import Record
from ..report import Finding, LimitCheck, Report
from ._knobs import Setting

__all__ = ["SCHEMA", "Recommendation", "EngineReport", "engine_report_to_dict", "compose"]

#: JSON schema id of :func:`engine_report_to_dict` (documented in ``epbuf.engines``).
SCHEMA = "epbuf.engine/1"


class Recommendation(Record):
    """What to set instead, and why.

    Attributes:
        setting: the flag or environment variable to set (``VLLM_MOE_DP_CHUNK_SIZE``).
        value: the value to set (``None`` when no value satisfies the goal).
        goal: ``"load"`` (the smallest value that serves ``--max-tokens-under-load``),
            ``"budget"`` (the largest value whose allocation fits ``--budget``), ``"limit"``
            (the largest value an upstream hard limit allows) or ``"fix"`` (a value that
            repairs a broken check).
        num_bytes: total device allocation with that value (``None`` when not computed).
        message: one sentence for people.
    """

    setting: str
    value: object
    goal: str
    message: str
    num_bytes: int | None = None


class EngineReport(Record):
    """What an engine allocates per device with the given flags, whether it fits, and what to set.

    Attributes:
        engine: registry name (``"vllm"``).
        version: the engine version whose recipe applied (``"main"``).
        version_note: that version in words, with its upstream reference.
        title: one line for people.
        settings: every setting the recipe used, with its source.
        report: the allocations (one :class:`~epbuf.report.Buffer` per allocation the engine
            makes), limits and findings, as an :class:`~epbuf.report.Report`.
        recommendations: what to set instead (smallest for the load, largest for the budget,
            largest a limit allows).
        device_name, device_num_bytes: the device the share refers to (``""``/``None``: none given).
        budget: ``--budget`` bytes, or ``None``.
        to_set: the recommendations to follow together (:func:`compose`): one value per token
            count, and the fixes that value still needs; ``recommendations`` keeps every goal's
            own search.
    """

    engine: str
    version: str
    version_note: str
    title: str
    settings: tuple
    report: Report
    recommendations: tuple = ()
    device_name: str = ""
    device_num_bytes: int | None = None
    budget: int | None = None
    to_set: tuple = ()

    @property
    def num_bytes(self) -> int:
        """Total bytes the engine allocates per device for these buffers."""
        return self.report.num_bytes

    @property
    def num_bytes_needed(self) -> int:
        return self.report.num_bytes_needed

    @property
    def share(self) -> float | None:
        """``num_bytes`` as a fraction of the device's memory (``None`` without a device)."""
        return self.num_bytes / self.device_num_bytes if self.device_num_bytes else None

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.report.findings

    @property
    def limits(self) -> tuple[LimitCheck, ...]:
        return self.report.limits

    def setting(self, name: str) -> Setting:
        for s in self.settings:
            if s.name == name:
                return s
        raise KeyError(name)

    def recommendation(self, setting: str, goal: str) -> Recommendation:
        for r in self.recommendations:
            if r.setting == setting and r.goal == goal:
                return r
        raise KeyError((setting, goal))

    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.report.findings if f.severity == "error")


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
    if len(chosen) == 1 and isinstance(current.get("NVSHMEM_QP_DEPTH"), int):
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


def _json_value(value: object) -> object:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return str(value)


def _rec_json(r: Recommendation) -> dict:
    return {"setting": r.setting, "value": _json_value(r.value), "goal": r.goal, "num_bytes": r.num_bytes,
            "message": r.message}


def engine_report_to_dict(rep: EngineReport) -> dict:
    """The stable JSON form (schema ``epbuf.engine/1``, documented in :mod:`epbuf.engines`)."""
    from ..report.json_form import report_to_dict

    device = None
    if rep.device_num_bytes:
        device = {"name": rep.device_name, "num_bytes": rep.device_num_bytes, "share": rep.share}
    return {
        "schema": SCHEMA,
        "engine": rep.engine,
        "version": rep.version,
        "version_note": rep.version_note,
        "title": rep.title,
        "settings": [{"name": s.name, "value": _json_value(s.value), "source": s.source, "note": s.note}
                     for s in rep.settings],
        "num_bytes": rep.num_bytes,
        "num_bytes_needed": rep.num_bytes_needed,
        "device": device,
        "budget": rep.budget,
        "fits_budget": None if rep.budget is None else rep.num_bytes <= rep.budget,
        "errors": [f.code for f in rep.errors()],
        "recommendations": [_rec_json(r) for r in rep.recommendations],
        "to_set": [_rec_json(r) for r in rep.to_set],
        "report": report_to_dict(rep.report),
    }
