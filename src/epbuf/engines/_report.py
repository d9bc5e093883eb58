"""What an engine recipe returns: :class:`EngineReport` (the allocations as an
:class:`~epbuf.report.Report`, the settings used, what to set instead) and its stable JSON form,
schema ``epbuf.engine/1`` (:func:`engine_report_to_dict`, documented in :mod:`epbuf.engines`).
"""

from __future__ import annotations

from .._record import Record
from ..report import Finding, LimitCheck, Report
from ._knobs import Setting

__all__ = ["SCHEMA", "Recommendation", "EngineReport", "engine_report_to_dict"]

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
        to_set: the recommendations to follow together (:func:`~._libraries.compose`): one value per token
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
