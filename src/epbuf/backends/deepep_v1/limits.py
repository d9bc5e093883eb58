"""What both V1 reports share: limits defined once as rows (turned into checks and findings by
:mod:`epbuf.backends._limits`, as in every backend), the upstream line.

The summaries (the sweep's fast paths) read the names of the broken rows, so a report and
its summary cannot disagree. This is how a plan upstream's size functions accept but a later
step refuses is answered: the sizes, the limit with ``ok=False`` and the assertion's ``file:line``.
"""

from __future__ import annotations

from ...errors import InvalidArgumentError, Problem
from ...plan import Plan
from ...report import Finding
from ...units import INT32_MAX
from .._limits import LimitRow, limit_checks, limit_findings
from .constants import INT4_BYTES
from .versions import Version

__all__ = ["LimitRow", "limit_checks", "limit_findings", "set_name", "in_row", "upstream_line", "unmerged_finding",
           "check_plan", "passes_int4_check"]

def set_name(name: str, allowed: tuple[int, ...]) -> str:
    """The name of a set-membership limit: the set is part of it."""
    return f"{name} in {{{', '.join(map(str, allowed))}}}"


def in_row(name: str, value: int, allowed: tuple[int, ...], source: str, enforced: str) -> LimitRow:
    """A set-membership limit (``name`` from :func:`set_name`): relation "in", bound the largest member."""
    return (name, value, "in", max(allowed), value in allowed, source, enforced)


def upstream_line(v: Version) -> str:
    state = "" if v.merged else " — UNMERGED pull request"
    return f"DeepEP {v.id} @ {v.commit} ({v.date}){state}"


def unmerged_finding(v: Version) -> list[Finding]:
    if v.merged:
        return []
    return [Finding(severity="warning", code="deepep-v1.unmerged-version",
                    message=f"{v.id} follows an unmerged pull request ({v.short}); no released DeepEP computes this",
                    data={"commit": v.commit})]


def check_plan(plan: object) -> None:
    """Reports take an :class:`epbuf.plan.Plan` (whose constructor checks every value)."""
    if not isinstance(plan, Plan):
        raise InvalidArgumentError([Problem("plan", plan, "must be an epbuf.Plan")])


def passes_int4_check(num_bytes: int) -> bool:
    """``num_bytes / sizeof(int4) < std::numeric_limits<int>::max()``: ``Buffer``'s size ceiling
    from 4623c67 on (``BUF:111-112``), for the NVL and the RDMA buffer of both modes."""
    return num_bytes // INT4_BYTES < INT32_MAX
