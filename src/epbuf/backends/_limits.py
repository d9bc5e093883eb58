"""Limits as rows, the way every backend states them: ``(name, value, relation, bound, ok, source,
enforced)``. A report turns its rows into :class:`~epbuf.report.LimitCheck` records and one
``error`` finding per broken limit (naming the assertion's ``file:line``); a summary (the sweep's
fast path) reads the names of the broken rows, so a report and its summary cannot disagree.

>>> checks = limit_checks([("num_topk", 40, "<=", 32, False, "buffer.hpp:10", "host")])
>>> limit_findings("x.limit", checks)[0].message
'num_topk = 40 breaks <= 32 (buffer.hpp:10)'
>>> limit_findings("x.kernel-limit", checks, {"host": "dispatch refuses it"})[0].data["enforced"]
'host'
"""

from __future__ import annotations

from ..report import Finding, LimitCheck
from ..units import format_int

__all__ = ["LimitRow", "limit_checks", "limit_finding", "limit_findings"]

LimitRow = tuple[str, int, str, int, bool, str, str]


def limit_checks(rows) -> list[LimitCheck]:
    """One :class:`~epbuf.report.LimitCheck` per row, in order."""
    return [LimitCheck(name=n, value=value, relation=r, bound=b, ok=ok, source=src, enforced=e)
            for n, value, r, b, ok, src, e in rows]


def limit_finding(code: str, lim: LimitCheck, consequence: str | None = None) -> Finding:
    """The ``error`` finding of one broken limit: ``<name> = <value> breaks <relation> <bound>
    (<source>)``; with a ``consequence`` (what upstream does, by where it enforces the limit),
    ``; <consequence>`` after it and ``enforced`` in the data."""
    message = f"{lim.name} = {format_int(lim.value)} breaks {lim.relation} {format_int(lim.bound)} ({lim.source})"
    data = {"limit": lim.name, "value": lim.value, "bound": lim.bound}
    if consequence is not None:
        message += f"; {consequence}"
        data["enforced"] = lim.enforced
    return Finding(severity="error", code=code, message=message, data=data)


def limit_findings(code: str, limits, consequences: dict[str, str] | None = None) -> list[Finding]:
    """:func:`limit_finding` of every broken limit; ``consequences`` maps ``enforced`` (``host``,
    ``kernel``, ``assumed``) to what upstream does then."""
    return [limit_finding(code, lim, None if consequences is None else consequences[lim.enforced])
            for lim in limits if not lim.ok]
