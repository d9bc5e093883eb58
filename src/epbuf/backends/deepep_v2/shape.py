"""A plan's checks and everything of it but the token count, computed once per shape.

:func:`check_plan` is what makes a plan invalid (``InvalidArgumentError``): an unknown version,
or what the size functions themselves refuse (:func:`~.sizes.check_hint_arguments`). Limits of
later steps are rows (:mod:`.limits`). :func:`validate` returns the plan's cached :class:`Shape`,
which :func:`~.report.report` and :func:`~.report.summarize` both read, so the two agree.
"""

from __future__ import annotations

from functools import lru_cache
from operator import attrgetter

from ..._record import Record
from ...errors import Checker, InvalidArgumentError, Problem
from ...report import Buffer
from .domain import Domain, nvl_domain
from .limits import limit_rows_static
from .hint import check_hint_arguments, sizes
from .records import actual_num_sf_packs, hint_num_sf_packs
from .sizes import combine_regions, dispatch_regions, max_tokens
from .versions import DEFAULT_VERSION, Generation, get_generation, lookup, version_problem
from .workspace import workspace_buffer

__all__ = ["check_plan", "Shape", "SHAPE_KEY", "shape_of", "validate"]


def check_plan(c: Checker, version: object, num_ranks: int, ranks_per_node: int, scaleup_is_nvlink: bool,
               allow_hybrid_mode: bool, hidden: int, num_topk: int, use_fp8_dispatch: bool,
               allow_multiple_reduction: bool, num_max_tokens_per_rank: int | None, *,
               token_checks: bool = True) -> tuple[Generation | None, Domain]:
    """What no size function can evaluate, collected in ``c``: an unknown version, and what
    ``calculate_buffer_size`` and the records it builds assert or overflow (``int`` arithmetic).
    ``token_checks=False`` skips the checks that depend on the token count.

    Raises:
        InvalidArgumentError: at once, for an NVLink size that does not divide the ranks.
    """
    problem = version_problem(version)
    if problem is not None:
        c.problems.append(problem)
    gen = lookup(version)[0]
    domain = nvl_domain(num_ranks, ranks_per_node, scaleup_is_nvlink, allow_hybrid_mode)
    rdma = (gen or get_generation(DEFAULT_VERSION)).num_rdma_alignment_bytes
    check_hint_arguments(c, num_max_tokens_per_rank, hidden, num_topk, use_fp8_dispatch,
                         (domain.num_scaleout_ranks, domain.num_scaleup_ranks, domain.is_scaleup_nvlink),
                         allow_multiple_reduction, rdma, token_checks=token_checks)
    return gen, domain


# What a plan's size depends on besides the token count: the key of :func:`shape_of`.
SHAPE_KEY = attrgetter("version", "num_ranks", "ranks_per_node", "scaleup_is_nvlink", "allow_hybrid_mode",
                       "num_total_experts", "hidden", "num_topk", "use_fp8_dispatch", "allow_multiple_reduction")


class Shape(Record):
    """Everything of a valid plan but its token count (:func:`shape_of`).

    Attributes:
        gen: the generation.
        domain: the logical domain; ``hybrid``: ``domain.mode == "hybrid"``.
        num_ranks: the plan's ranks.
        topk: top-k after its default (0 -> 32).
        allow_multiple_reduction: the plan's flag.
        max_tokens: the largest token count whose regions' ``int`` token counts fit.
        dispatch, real_dispatch, combine: bytes of the hint's dispatch phase (``ceil(hidden / 32)``
            SF packs), of a real run's and of the combine phase as ``(per token, base)``:
            ``bytes = per token x T + base`` (:func:`_affine`).
        workspace: the workspace allocation; ``workspace_binding``: its largest region.
        limit_rows: the limit rows that do not depend on the token count
            (:func:`~.limits.limit_rows_static`): those before ``ranks x tokens`` and the hybrid ones.
        broken: the names of the failed rows of each part of ``limit_rows``.
    """

    gen: Generation
    domain: Domain
    hybrid: bool
    num_ranks: int
    topk: int
    allow_multiple_reduction: bool
    max_tokens: int
    dispatch: tuple[int, int]
    real_dispatch: tuple[int, int]
    combine: tuple[int, int]
    workspace: Buffer
    workspace_binding: str
    limit_rows: tuple[tuple, tuple]
    broken: tuple[tuple, tuple]


def _affine(num_bytes) -> tuple[int, int]:
    """``(a, b)`` with ``num_bytes(T) == a * T + b``. Every region holds ``rows x (multiplier x T +
    offset)`` records (:func:`~.sizes.dispatch_regions`, :func:`~.sizes.combine_regions`), so a
    phase's bytes are affine in T and two evaluations of the real formula (T = 0 and 1) give them."""
    base = num_bytes(0)
    return num_bytes(1) - base, base


@lru_cache(maxsize=4096)
def shape_of(version: object, num_ranks: int, ranks_per_node: int, scaleup_is_nvlink: bool,
             allow_hybrid_mode: bool, experts: int, hidden: int, num_topk: int, use_fp8_dispatch: bool,
             allow_multiple_reduction: bool) -> Shape | None:
    """The :class:`Shape` of plans with these values (:data:`SHAPE_KEY`), or ``None`` when the
    checks that do not depend on the token count fail."""
    c = Checker()
    try:
        gen, domain = check_plan(c, version, num_ranks, ranks_per_node, scaleup_is_nvlink, allow_hybrid_mode,
                                 hidden, num_topk, use_fp8_dispatch, allow_multiple_reduction, None,
                                 token_checks=False)
    except InvalidArgumentError:
        return None
    if c.problems:
        return None
    assert gen is not None
    fp8, amr = use_fp8_dispatch, allow_multiple_reduction
    hint_packs = hint_num_sf_packs(hidden, fp8)
    real_packs = actual_num_sf_packs(hidden, fp8)

    def phases(tokens: int, packs: int):
        return sizes(domain, tokens, hidden, num_topk, fp8, amr, packs, gen.id)

    hint = phases(1, hint_packs)
    workspace = workspace_buffer(gen.id)
    so, su, nvl = domain.num_scaleout_ranks, domain.num_scaleup_ranks, domain.is_scaleup_nvlink
    rows = limit_rows_static(gen, domain, num_ranks, experts, hidden, hint.elem_size, hint.topk,
                             next(iter(hint.dispatch.values())).token_layout)
    return Shape(
        gen=gen, domain=domain, hybrid=domain.mode == "hybrid", num_ranks=num_ranks, topk=hint.topk,
        allow_multiple_reduction=amr,
        max_tokens=max_tokens(dispatch_regions(so, su, nvl), combine_regions(hint.topk, so, su, nvl, amr)),
        dispatch=_affine(lambda tokens: phases(tokens, hint_packs).num_dispatch_bytes),
        real_dispatch=_affine(lambda tokens: phases(tokens, real_packs).num_dispatch_bytes),
        combine=_affine(lambda tokens: phases(tokens, hint_packs).num_combine_bytes),
        workspace=workspace, workspace_binding=workspace.binding_region().name,
        limit_rows=rows, broken=tuple(tuple(row[0] for row in part if not row[4]) for part in rows),
    )


def validate(plan) -> Shape:
    """Check ``plan`` (:func:`check_plan`) and return its :class:`Shape`.

    The checks that do not depend on the token count run once per distinct other inputs
    (:func:`shape_of`); the token checks (positive, regions' ``int`` token counts) run on every
    call. When any fails, every check runs again on the plan so the error lists each problem in
    upstream's order.

    Raises:
        InvalidArgumentError: every problem of the plan.
    """
    try:
        key = SHAPE_KEY(plan)
        tokens = plan.num_max_tokens_per_rank
    except AttributeError:
        raise InvalidArgumentError([Problem("plan", plan, "must be an epbuf.Plan")]) from None
    try:
        shape = shape_of(*key)
    except TypeError:  # an unhashable value, which no Plan holds; the checks below name it
        shape = None
    if shape is not None and type(tokens) is int and 0 < tokens <= shape.max_tokens:
        return shape
    c = Checker()
    check_plan(c, *key[:5], *key[6:], tokens)
    c.raise_if_any()
    raise AssertionError(f"the checks of {plan!r} pass one by one but not together")  # pragma: no cover
