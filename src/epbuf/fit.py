"""What fits a memory budget: the largest token count or EP size, solved exactly.

Every backend's allocation is monotone non-decreasing in ``num_max_tokens_per_rank``
(each region is a product with the token count, or does not depend on it), and so is
every token-dependent upstream limit, so :func:`fit_tokens` finds the exact largest
token count by binary search over the real report — no estimate. The allocation is
*not* monotone in the rank count for every backend (DeepEP V1's default configs change
with it, experts must divide evenly), so :func:`fit_ranks` evaluates every candidate.

>>> from epbuf.plan import Plan
>>> plan = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=1)
>>> result = fit_tokens(plan, "ascend", 1 << 30)
>>> result.value, result.binding
(8648, 'budget')
"""

from __future__ import annotations

from ._record import Record
from ._search import largest_true
from .errors import EpbufError, InvalidArgumentError, Problem, check_int
from .plan import Plan, get_backend, report
from .report import Report, summary_of
from .units import INT32_MAX

__all__ = ["FitResult", "fit_tokens", "fit_ranks", "MAX_RANKS_SEARCHED"]

MAX_RANKS_SEARCHED = 2048  # above every backend's rank limit (DeepEP V2: 1024)


class FitResult(Record):
    """The answer of a fit.

    Attributes:
        backend: the backend asked.
        variable: ``"num_max_tokens_per_rank"`` or ``"num_ranks"``.
        budget: the memory granted, bytes.
        value: the largest value of ``variable`` that fits the budget and every upstream
            limit; ``None`` when not even the smallest does.
        binding: what stops ``value + 1``: ``"budget"``, the name of an upstream limit, or
            ``"none"`` (the allocation does not grow with ``variable`` and no limit binds
            up to the search bound).
        reason: one sentence for people.
        report: the report at ``value`` (``None`` when nothing fits).
        budget_value: the largest value the budget alone allows (``None``: none; the search
            bound when the budget never binds).
        limit_value: the largest value the upstream limits alone allow.
        next_num_bytes: the allocation one step past ``value`` (when it exists).
        constant_failures: limits broken at every value (they do not depend on ``variable``).
        independent: the allocation is the same at the smallest and the largest value
            searched (DeepEP V1 normal mode does not depend on the token count).
        binding_region: at ``value``, the region that sets the size of the largest buffer
            (the term that grows into the budget).
        advice: a setting that would let more fit, in one sentence (mori-ep's static heap,
            reserved whole: the ``MORI_SHMEM_HEAP_SIZE`` sized to the handle and the tokens it
            then allows), else ``""``.
    """

    backend: str
    variable: str
    budget: int
    value: int | None
    binding: str
    reason: str
    report: Report | None = None
    budget_value: int | None = None
    limit_value: int | None = None
    next_num_bytes: int | None = None
    constant_failures: tuple = ()
    independent: bool = False
    binding_region: str = ""
    advice: str = ""


def _check_arguments(plan: object, backend: object, budget: object, bound_name: str, bound: object) -> None:
    """The arguments of :func:`fit_tokens` / :func:`fit_ranks`, each named in one line."""
    if not isinstance(plan, Plan):
        raise InvalidArgumentError([Problem("plan", plan, "must be an epbuf.Plan")])
    get_backend(backend)  # one-line UnknownNameError
    if type(budget) is not int:
        raise InvalidArgumentError([Problem("budget", budget, "must be an integer number of bytes "
                                            "(epbuf.units.parse_bytes reads '8GiB')")])
    check_int("budget", budget, 1, None, "a positive number of bytes")
    check_int(bound_name, bound, 1, INT32_MAX)


def _evaluate(plan: Plan, backend: str, changes: dict) -> Report | EpbufError:
    try:
        return report(plan.replace(**changes), backend)
    except EpbufError as error:
        return error


def _broken(rep: Report | EpbufError) -> frozenset[str]:
    if isinstance(rep, EpbufError):
        return frozenset({str(rep)})
    return frozenset(lim.name for lim in rep.failed_limits())


def fit_tokens(plan: Plan, backend: str, budget: int, max_tokens: int = INT32_MAX) -> FitResult:
    """The largest ``num_max_tokens_per_rank`` whose total allocation fits ``budget`` bytes
    and breaks no upstream limit that the smallest token count keeps.

    Raises:
        EpbufError: the plan is invalid for ``backend`` whatever the token count, or an
            argument is not what it should be (``budget`` a positive ``int`` of bytes,
            ``max_tokens`` an ``int`` in ``1..2^31-1``).
    """
    _check_arguments(plan, backend, budget, "max_tokens", max_tokens)
    variable = "num_max_tokens_per_rank"
    first = report(plan.replace(num_max_tokens_per_rank=1), backend)  # raises for token-independent errors
    constant = _broken(first)
    cache: dict[int, Report | EpbufError] = {1: first}

    def at(tokens: int) -> Report | EpbufError:
        if tokens not in cache:
            cache[tokens] = _evaluate(plan, backend, {variable: tokens})
        return cache[tokens]

    def within_limits(tokens: int) -> bool:
        return _broken(at(tokens)) <= constant

    def within_budget(tokens: int) -> bool:
        rep = at(tokens)
        return isinstance(rep, Report) and rep.num_bytes <= budget

    limit_value = largest_true(1, max_tokens, within_limits)
    budget_value = largest_true(1, max_tokens, within_budget)
    value = None if limit_value is None or budget_value is None else min(limit_value, budget_value)
    nxt = value + 1 if value is not None and value < max_tokens else None
    result = _result(backend, variable, budget, at, value, nxt, limit_value, budget_value, max_tokens, constant)
    last = at(max_tokens)
    if value == max_tokens and isinstance(last, Report) and last.num_bytes == first.num_bytes:
        result = result.replace(independent=True, reason=f"any: the allocation ({first.num_bytes:,} B) does not "
                                                         f"depend on {variable}")
    if backend == "mori-ep" and (value is None or result.binding.startswith("symmetric heap usage")):
        result = _mori_heap_advice(plan, budget, max_tokens, constant, result)
    return result


def _mori_heap_advice(plan: Plan, budget: int, max_tokens: int, constant: frozenset, result: FitResult) -> FitResult:
    """Where MORI's static heap binds (reserved whole at init: ``MORI_SHMEM_HEAP_SIZE``, default
    4 GiB, ``src/shmem/init.cpp:219-240 @624002c``): the largest token count whose allocation fits
    ``budget`` with the heap set to the whole MiB its symmetric buffers need (``ParseSizeString``
    reads ``M``), and that setting, in ``result.advice`` and its reason."""
    from .backends import mori_ep
    from .units import MiB, ceil_div, format_bytes

    settings = mori_ep.shmem_settings(plan)
    if settings.comm != "shmem" or settings.shmem_mode != "static_heap":
        return result
    heap_limit = "symmetric heap usage (bytes, MORI_SHMEM_HEAP_SIZE)"

    def sized(tokens: int) -> tuple[int, Report | EpbufError]:
        rep = _evaluate(plan, "mori-ep", {"num_max_tokens_per_rank": tokens})
        if isinstance(rep, EpbufError):
            return 0, rep
        usage, local = rep.quantity("symmetric_usage_num_bytes"), rep.quantity("local_num_bytes")
        return ceil_div(usage, MiB), rep

    def fits(tokens: int) -> bool:
        mib, rep = sized(tokens)
        return (isinstance(rep, Report) and _broken(rep) - {heap_limit} <= constant
                and mib * MiB + rep.quantity("local_num_bytes") <= budget)

    best = largest_true(1, max_tokens, fits)
    heap = f"the MORI-shmem static heap is reserved whole ({format_bytes(settings.heap_num_bytes)}, " \
           "MORI_SHMEM_HEAP_SIZE, default 4 GiB)"
    if best is None:
        advice = f"{heap}; even sized to the handle, 1 token does not fit the budget"
    elif result.value is not None and best <= result.value:
        return result
    else:
        advice = (f"{heap} and binds: with --env MORI_SHMEM_HEAP_SIZE={sized(best)[0]}M, up to {best:,} tokens "
                  "per rank fit the budget")
    return result.replace(advice=advice, reason=f"{result.reason}; {advice}")


def fit_ranks(plan: Plan, backend: str, budget: int, max_ranks: int = MAX_RANKS_SEARCHED) -> FitResult:
    """The largest EP size (``num_ranks``) that fits ``budget`` with the plan's tokens.

    Every rank count from 1 to ``max_ranks`` that the backend accepts for this plan
    (experts divisible, supported topology ...) is evaluated; ranks per node follow the
    plan (``None``: ``min(ranks, 8)``).

    Raises:
        EpbufError: no rank count is valid, or an argument is not what it should be
            (``budget`` a positive ``int`` of bytes, ``max_ranks`` an ``int`` >= 1).
    """
    _check_arguments(plan, backend, budget, "max_ranks", max_ranks)
    variable = "num_ranks"
    candidates: dict[int, Report] = {}
    for ranks in range(1, max_ranks + 1):
        per_node = plan.num_ranks_per_node
        if per_node is not None and ranks % per_node:
            continue
        if per_node is None and ranks > 8 and ranks % 8:
            continue
        rep = _evaluate(plan, backend, {variable: ranks})
        if isinstance(rep, Report):
            candidates[ranks] = rep
    if not candidates:
        report(plan, backend)  # raises the backend's own explanation
        raise EpbufError(f"--ranks: no rank count 1..{max_ranks} is valid for {backend} with this plan")
    smallest = min(candidates)
    constant = _broken(candidates[smallest])
    fits_limits = [r for r, rep in candidates.items() if _broken(rep) <= constant]
    fits_budget = [r for r, rep in candidates.items() if rep.num_bytes <= budget]
    limit_value = max(fits_limits) if fits_limits else None
    budget_value = max(fits_budget) if fits_budget else None
    both = [r for r in fits_budget if r in fits_limits]
    value = max(both) if both else None

    larger = sorted(r for r in candidates if value is not None and r > value)
    return _result(backend, variable, budget, candidates.get, value, larger[0] if larger else None,
                   limit_value, budget_value, max_ranks, constant, smallest=smallest)


def _result(backend, variable, budget, at, value, nxt_value, limit_value, budget_value, bound, constant,
            smallest: int = 1) -> FitResult:
    constant_failures = tuple(sorted(constant))
    if value is None:
        first = at(smallest)
        need = first.num_bytes if isinstance(first, Report) else None
        reason = (f"nothing fits: even {variable} = {smallest:,} needs {need:,} B" if need is not None
                  else f"no {variable} fits the budget and the upstream limits")
        return FitResult(backend=backend, variable=variable, budget=budget, value=None, binding="budget",
                         reason=reason, budget_value=budget_value, limit_value=limit_value,
                         constant_failures=constant_failures)
    rep = at(value)
    nxt = at(nxt_value) if nxt_value is not None else None
    next_bytes = nxt.num_bytes if isinstance(nxt, Report) else None
    new_broken = sorted(_broken(nxt) - frozenset(constant)) if nxt is not None else []
    if next_bytes is not None and next_bytes > budget:
        binding = "budget"
        reason = f"{variable} = {nxt_value:,} would need {next_bytes:,} B, over the {budget:,} B budget"
    elif new_broken:
        binding = new_broken[0]
        reason = f"{variable} = {nxt_value:,} breaks an upstream limit before the budget binds: {binding}"
    elif nxt_value is None and variable == "num_ranks":
        binding = "none"
        reason = f"no larger rank count up to {bound:,} is valid for {backend} with this plan"
    else:
        binding = "none"
        reason = f"fits up to the search bound {bound:,}: the allocation never outgrows the budget"
    rep = rep if isinstance(rep, Report) else None
    return FitResult(backend=backend, variable=variable, budget=budget, value=value, binding=binding, reason=reason,
                     report=rep, budget_value=budget_value, limit_value=limit_value, next_num_bytes=next_bytes,
                     constant_failures=constant_failures,
                     binding_region=summary_of(rep).binding if rep is not None else "")
