"""The cache of a report whose costly part does not depend on the token count (DeepEP V1's and
UCCL-EP's normal mode): the part is computed once per plan *shape* and kept, and a summary per
shape is kept longer still (sweeps ask for it once per configuration).

``core(*key)`` is an ``lru_cache``'d function returning a record with a ``summary`` field, or the
:class:`~epbuf.errors.InvalidArgumentError` of a plan upstream refuses (returned, not raised, so
rejected shapes are cached too); ``key_of(plan)`` gives its arguments.
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import InvalidArgumentError

__all__ = ["shape_cache"]


def shape_cache(core, key_of, check=None, summaries: int = 16384):
    """``(lookup, summary)``: ``lookup(plan)`` is ``core``'s record for ``plan`` and
    ``lookup(plan, summary)`` its summary, cached in ``summary`` (``summaries`` entries); both
    raise the plan's error. ``check(plan)``, when given, runs first. A key that cannot be hashed
    (a value the checks reject) is computed without the caches."""

    @lru_cache(maxsize=summaries)
    def summary(*key):
        record = core(*key)
        return record if isinstance(record, InvalidArgumentError) else record.summary

    def lookup(plan, cached=core):
        if check is not None:
            check(plan)
        key = key_of(plan)
        try:
            result = cached(*key)
        except TypeError:  # an unhashable version / deepep_config, which the checks reject: not cached
            result = core.__wrapped__(*key)
            if cached is summary and not isinstance(result, InvalidArgumentError):
                result = result.summary
        if isinstance(result, InvalidArgumentError):
            raise InvalidArgumentError(result.problems)
        return result

    return lookup, summary
