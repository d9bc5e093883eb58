"""DeepEP V2's physical and logical domains, as the communicator context derives them.

Upstream reads two numbers from the NCCL communicator: the world size and the size of the
LSA team (the ranks that load/store each other's memory: the NVLink domain). Physical domain
``(num_rdma_ranks, num_nvl_ranks) = (world / lsa, lsa)``; logical domain ``(num_scaleout_ranks,
num_scaleup_ranks)`` = the physical one with ``allow_hybrid_mode``, else ``(1, world)``
(``csrc/kernels/backend/nccl.cu:49-60 @dd758ca``, ``csrc/kernels/comm/context.cpp:52-63 @855fa9d``).
Here the two numbers are given instead of a communicator.
"""

from __future__ import annotations

from ..._record import Record
from ...errors import Checker, InvalidArgumentError, Problem, check_bool
from ...units import INT32_MAX

__all__ = ["Domain", "get_physical_domain_size", "get_logical_domain_size", "logical_domain", "plan_domain"]


class Domain(Record):
    """Physical ``(num_rdma_ranks, num_nvl_ranks)`` and logical ``(num_scaleout_ranks,
    num_scaleup_ranks)`` domains, and ``is_scaleup_nvlink`` (``num_scaleup_ranks == num_nvl_ranks``)."""

    num_ranks: int
    num_rdma_ranks: int
    num_nvl_ranks: int
    num_scaleout_ranks: int
    num_scaleup_ranks: int
    is_scaleup_nvlink: bool

    @property
    def mode(self) -> str:
        """``"direct"`` when there is one scale-out rank (``num_scaleout_ranks == 1``), else ``"hybrid"``."""
        return "direct" if self.num_scaleout_ranks == 1 else "hybrid"


def check_domain(c: Checker, num_ranks: int, num_nvl_ranks: int) -> bool:
    """Both counts positive ints and ``EP_HOST_ASSERT(num_ranks % num_nvl_ranks == 0)``
    (``nccl.cu:52 @dd758ca``), collected in ``c``."""
    ok = c.int_range("num_ranks", num_ranks, 1, INT32_MAX)
    ok = c.int_range("num_ranks_per_node", num_nvl_ranks, 1, INT32_MAX, "the NVLink (LSA team) size") and ok
    if ok and num_ranks % num_nvl_ranks:
        c.add("num_ranks_per_node", num_nvl_ranks,
              f"must divide num_ranks = {num_ranks} (EP_HOST_ASSERT(num_ranks % num_nvl_ranks == 0))")
        return False
    return ok


def get_physical_domain_size(num_ranks: int, num_nvl_ranks: int) -> tuple[int, int]:
    """``(num_rdma_ranks, num_nvl_ranks)`` = ``(num_ranks / num_nvl_ranks, num_nvl_ranks)``
    (``nccl.cu:49-54 @dd758ca``, ``context.cpp:52-57 @855fa9d``). Upstream's argument is the
    communicator, read for the world size and the NCCL LSA (NVLink) team size; here they are given.

    >>> get_physical_domain_size(32, 8)
    (4, 8)
    """
    c = Checker()
    check_domain(c, num_ranks, num_nvl_ranks)
    c.raise_if_any()
    return num_ranks // num_nvl_ranks, num_nvl_ranks


def get_logical_domain_size(num_ranks: int, num_nvl_ranks: int, allow_hybrid_mode: bool) -> tuple[int, int]:
    """``(num_scaleout_ranks, num_scaleup_ranks)``: the physical domain with hybrid mode,
    else ``(1, num_ranks)`` (``nccl.cu:56-60 @dd758ca``, ``context.cpp:59-63 @855fa9d``); upstream's
    ``(nccl_comm, allow_hybrid_mode)`` with the communicator given by its two sizes.

    >>> get_logical_domain_size(32, 8, True), get_logical_domain_size(32, 8, False)
    ((4, 8), (1, 32))
    """
    check_bool("allow_hybrid_mode", allow_hybrid_mode)
    num_rdma_ranks, num_nvl_ranks = get_physical_domain_size(num_ranks, num_nvl_ranks)
    if allow_hybrid_mode:
        return num_rdma_ranks, num_nvl_ranks
    return 1, num_rdma_ranks * num_nvl_ranks


def logical_domain(num_ranks: int, num_nvl_ranks: int, allow_hybrid_mode: bool) -> Domain:
    """Both domains plus ``is_scaleup_nvlink = num_scaleup_ranks == num_nvl_ranks``
    (``buffer.hpp:666-668 @dd758ca``, ``ep.hpp:263-265 @def8651``).

    Note the consequence upstream accepts: with an LSA team of one rank and hybrid mode
    allowed, ``(so, su) = (N, 1)`` and ``is_scaleup_nvlink`` is true (``1 == 1``).
    """
    scaleout, scaleup = get_logical_domain_size(num_ranks, num_nvl_ranks, allow_hybrid_mode)
    return Domain(num_ranks=num_ranks, num_rdma_ranks=num_ranks // num_nvl_ranks, num_nvl_ranks=num_nvl_ranks,
                  num_scaleout_ranks=scaleout, num_scaleup_ranks=scaleup, is_scaleup_nvlink=scaleup == num_nvl_ranks)


def plan_domain(plan) -> Domain:
    """The domain of a :class:`~epbuf.plan.Plan`.

    The NCCL LSA team is the NVLink domain: ``plan.ranks_per_node`` ranks when
    ``plan.scaleup_is_nvlink`` (default ``min(num_ranks, 8)``), else one rank (GPUs that
    cannot load/store each other's memory form LSA teams of one). Upstream never reads a
    node size, only the LSA team size, so with ``scaleup_is_nvlink=False`` the plan's
    ``num_ranks_per_node`` does not enter the arithmetic; :func:`~.report.report` says so in
    a ``deepep-v2.ranks-per-node-unused`` finding when it was given.
    """
    try:
        values = plan.num_ranks, plan.ranks_per_node, plan.scaleup_is_nvlink, plan.allow_hybrid_mode
    except AttributeError:
        raise InvalidArgumentError([Problem("plan", plan, "must be an epbuf.Plan")]) from None
    return nvl_domain(*values)


def nvl_domain(num_ranks: int, ranks_per_node: int, scaleup_is_nvlink: bool, allow_hybrid_mode: bool) -> Domain:
    """:func:`plan_domain` from the plan's values (``ranks_per_node`` after its default)."""
    num_nvl_ranks = ranks_per_node if scaleup_is_nvlink else 1
    return logical_domain(num_ranks, num_nvl_ranks, allow_hybrid_mode)
