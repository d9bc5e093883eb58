"""Exact searches over monotone integer predicates (every size epbuf solves for is monotone).

>>> largest_true(1, 10**9, lambda x: x * x <= 2 * 10**6)
1414
>>> smallest_true(0, 10**6, lambda x: x * 7 >= 100)
15
"""

from __future__ import annotations

__all__ = ["largest_true", "smallest_true"]


def largest_true(lo: int, hi: int, pred) -> int | None:
    """The largest ``x`` in ``[lo, hi]`` with ``pred(x)``, for a ``pred`` that is true up to
    some point and false after it; ``None`` when ``pred(lo)`` is false. ``O(log(hi - lo))`` calls."""
    if lo > hi or not pred(lo):
        return None
    if pred(hi):
        return hi
    while hi - lo > 1:  # pred(lo), not pred(hi)
        mid = (lo + hi) // 2
        if pred(mid):
            lo = mid
        else:
            hi = mid
    return lo


def smallest_true(lo: int, hi: int, pred) -> int | None:
    """The smallest ``x`` in ``[lo, hi]`` with ``pred(x)``, for a ``pred`` false up to some
    point and true after it; ``None`` when ``pred(hi)`` is false."""
    if lo > hi or not pred(hi):
        return None
    if pred(lo):
        return lo
    while hi - lo > 1:  # not pred(lo), pred(hi)
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi
