"""DeepEP V2's size hint: ``calculate_buffer_size`` and ``get_buffer_size_hint``.

``calculate_buffer_size`` (what ``get_buffer_size_hint`` and the constructor call) asserts
its arguments, derives the logical domain from the communicator (:mod:`.domain`), sizes both
phases (:mod:`.sizes`) with ``ceil(hidden / 32)`` SF packs for FP8 and top-k 0 as 32, and
returns ``max(dispatch, combine)`` (the phases reuse the buffer), rounded to 2 MiB from
``"2026-07"`` on. Two entry points: :func:`calculate_buffer_size` from the physical topology
(world and NVLink sizes, what upstream reads from ``nccl_comm``) and
:func:`calculate_buffer_size_logical` from the logical one.
"""

from __future__ import annotations

from ..._record import Record
from ...errors import Checker, InvalidArgumentError, Problem
from ...units import INT32_MAX, INT64_MAX, align, ceil_div
from .constants import (COMBINE_ELEMENT_SIZE, HINT_SF_GRANULARITY, NUM_DEFAULT_TOPK, NUM_MAX_TOPK,
                        NUM_TMA_ALIGNMENT_BYTES, SF_PACK_BYTES)
from .domain import Domain, check_domain, logical_domain
from .layout import BufferLayout, TokenLayout, _record_num_bytes
from .records import (DEFAULT_GENERATION, MBARRIER_SLOT_BYTES, check_hidden, check_record_int, effective_topk,
                      element_size, hint_num_sf_packs)
from .sizes import (check_int64, check_region_tokens, combine_affine, combine_buffer_layouts, combine_regions,
                    dispatch_affine, dispatch_buffer_layouts, dispatch_regions)
from .versions import Generation, lookup, version_problem

__all__ = ["calculate_buffer_size", "calculate_buffer_size_logical", "get_buffer_size_hint", "check_tokens",
           "check_hint_arguments", "Sizes", "sizes", "ep_buffer_num_bytes"]


def check_flag(c: Checker, argument: str, value: object) -> bool:
    """``value`` is ``True`` or ``False`` (a C++ ``bool`` upstream), else a problem in ``c``."""
    if type(value) is bool:
        return True
    c.add(argument, value, "must be True or False")
    return False


def check_tokens(c: Checker, num_max_tokens_per_rank: int) -> bool:
    """``EP_HOST_ASSERT(num_max_tokens_per_rank > 0)``, an int."""
    return c.int_range("num_max_tokens_per_rank", num_max_tokens_per_rank, 1, INT32_MAX,
                       "EP_HOST_ASSERT(num_max_tokens_per_rank > 0), an int")


def check_hint_arguments(c: Checker, num_max_tokens_per_rank: int | None, hidden: int, num_topk: int,
                         use_fp8_dispatch: bool, logical: tuple[int, int, bool] | None, allow_multiple_reduction: bool,
                         num_rdma_alignment_bytes: int, *, token_checks: bool = True) -> None:
    """What ``calculate_buffer_size`` and the records it builds assert, plus the int32
    arithmetic that must not overflow for the hint to mean anything, collected in ``c``.

    ``logical``: ``(num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink)``, or ``None`` when
    the domain is invalid (the token-count checks then wait). ``token_checks=False`` runs only
    the checks that do not depend on the token count (what the plan's cached shape holds);
    :func:`check_tokens` and :func:`check_region_tokens` are the others, in this order.
    """
    tokens_ok = not token_checks or check_tokens(c, num_max_tokens_per_rank)
    hidden_ok = c.int_range("hidden", hidden, 1, INT32_MAX, "EP_HOST_ASSERT(hidden > 0), an int")
    topk_ok = c.int_range("num_topk", num_topk, 0, INT32_MAX, "0 means 32")
    fp8_ok = check_flag(c, "use_fp8_dispatch", use_fp8_dispatch)
    amr_ok = check_flag(c, "allow_multiple_reduction", allow_multiple_reduction)
    if hidden_ok and ceil_div(hidden, HINT_SF_GRANULARITY) * SF_PACK_BYTES > hidden:
        c.add("hidden", hidden, "EP_HOST_ASSERT(ceil_div(hidden, 32) * sizeof(float) <= hidden) "
                                "(worst-case SF bytes must not exceed the hidden size)")
        hidden_ok = False
    if hidden_ok and fp8_ok:
        # The combine record (BF16) passes whenever the dispatch record does: 2 x hidden is a
        # multiple of 32 whenever 1 or 2 x hidden is; its int range is checked with the record below.
        hidden_ok = check_hidden(c, hidden, element_size(use_fp8_dispatch), "dispatch")
    if not (tokens_ok and hidden_ok and topk_ok and fp8_ok and amr_ok):
        return
    topk = effective_topk(num_topk)
    argument, value = ("num_topk", num_topk) if topk > NUM_MAX_TOPK else ("hidden", hidden)
    for with_metadata, elem, packs in ((True, element_size(use_fp8_dispatch),
                                        hint_num_sf_packs(hidden, use_fp8_dispatch)), (False, 2, 0)):
        record = TokenLayout(num_hidden_bytes=hidden * elem, num_sf_bytes=packs * SF_PACK_BYTES, num_topk=topk,
                             with_metadata=with_metadata, num_rdma_alignment_bytes=num_rdma_alignment_bytes)
        if not check_record_int(c, record, argument, value):
            return
    if token_checks and logical is not None:
        so, su, nvlink = logical
        check_region_tokens(c, num_max_tokens_per_rank, dispatch=dispatch_regions(so, su, nvlink),
                            combine=combine_regions(topk, so, su, nvlink, allow_multiple_reduction))


class Sizes(Record):
    """Everything ``calculate_buffer_size`` computes, kept for the report."""

    domain: Domain
    topk: int
    elem_size: int
    num_sf_packs: int
    dispatch: dict[str, BufferLayout]
    combine: dict[str, BufferLayout]

    @property
    def num_dispatch_bytes(self) -> int:
        return sum(b.num_bytes for b in self.dispatch.values())

    @property
    def num_combine_bytes(self) -> int:
        return sum(b.num_bytes for b in self.combine.values())


def sizes(domain: Domain, num_max_tokens_per_rank: int, hidden: int, num_topk: int, use_fp8_dispatch: bool,
          allow_multiple_reduction: bool, num_sf_packs: int, version: str | None) -> Sizes:
    """The phases' layouts for a checked plan (``num_sf_packs``: the hint's or a real run's)."""
    topk = effective_topk(num_topk)
    elem = element_size(use_fp8_dispatch)
    so, su, nvl = domain.num_scaleout_ranks, domain.num_scaleup_ranks, domain.is_scaleup_nvlink
    return Sizes(
        domain=domain, topk=topk, elem_size=elem, num_sf_packs=num_sf_packs,
        dispatch=dispatch_buffer_layouts(num_max_tokens_per_rank, hidden, num_sf_packs, topk, elem, so, su, nvl,
                                         version=version),
        combine=combine_buffer_layouts(num_max_tokens_per_rank, hidden, topk, so, su, nvl, allow_multiple_reduction,
                                       version=version),
    )


def ep_buffer_num_bytes(num_dispatch_bytes: int, num_combine_bytes: int, alignment: int) -> int:
    """The two phases reuse one buffer: ``align(max(dispatch, combine), alignment)`` (``buffer.hpp:684-685
    @dd758ca``, ``ep.hpp:281-282 @def8651``; alignment 1 in ``"2026-04"``)."""
    return align(max(num_dispatch_bytes, num_combine_bytes), alignment)


def _hint(gen: Generation, num_scaleout_ranks: int, num_scaleup_ranks: int, is_scaleup_nvlink: bool,
          num_max_tokens_per_rank: int, hidden: int, num_topk: int, use_fp8_dispatch: bool,
          allow_multiple_reduction: bool) -> int | None:
    """The hint for a valid domain and typed arguments, or ``None`` when one of the hint's own
    checks fails (the caller then runs :func:`check_hint_arguments` to name it)."""
    if not (type(num_max_tokens_per_rank) is int and type(hidden) is int and type(num_topk) is int
            and 0 < num_max_tokens_per_rank <= INT32_MAX and 0 < hidden <= INT32_MAX // 2
            and 0 <= num_topk <= INT32_MAX and ceil_div(hidden, HINT_SF_GRANULARITY) * SF_PACK_BYTES <= hidden
            and (use_fp8_dispatch is True or use_fp8_dispatch is False)
            and (allow_multiple_reduction is True or allow_multiple_reduction is False)):
        return None
    topk = NUM_DEFAULT_TOPK if num_topk == 0 else num_topk
    if use_fp8_dispatch:
        hidden_bytes, num_sf_bytes = hidden, ceil_div(hidden, HINT_SF_GRANULARITY) * SF_PACK_BYTES
    else:
        hidden_bytes, num_sf_bytes = hidden * 2, 0
    if hidden_bytes % NUM_TMA_ALIGNMENT_BYTES:
        return None
    rdma = gen.num_rdma_alignment_bytes
    dispatch_record = _record_num_bytes(hidden_bytes, num_sf_bytes, topk, True, rdma)
    combine_record = _record_num_bytes(hidden * COMBINE_ELEMENT_SIZE, 0, topk, False, rdma)
    if max(dispatch_record, combine_record) + MBARRIER_SLOT_BYTES > INT32_MAX:
        return None
    d_per_token, d_base, d_max = dispatch_affine(num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink)
    c_per_token, c_base, c_max = combine_affine(topk, num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink,
                                                allow_multiple_reduction)
    if num_max_tokens_per_rank > min(d_max, c_max):
        return None
    return ep_buffer_num_bytes((d_per_token * num_max_tokens_per_rank + d_base) * dispatch_record,
                               (c_per_token * num_max_tokens_per_rank + c_base) * combine_record,
                               gen.num_hint_alignment_bytes)


def calculate_buffer_size(num_ranks: int, num_nvl_ranks: int, num_max_tokens_per_rank: int, hidden: int,
                          num_topk: int, use_fp8_dispatch: bool, allow_hybrid_mode: bool,
                          allow_multiple_reduction: bool, *, version: str | None = None) -> int:
    """``ElasticBuffer/EPBuffer::calculate_buffer_size(nccl_comm, num_max_tokens_per_rank, hidden,
    num_topk, use_fp8_dispatch, allow_hybrid_mode, allow_multiple_reduction)`` (``buffer.hpp:652-686
    @dd758ca``, ``ep.hpp:249-283 @def8651``), with upstream's ``nccl_comm`` replaced by what it is
    read for: the world size ``num_ranks`` and the NVLink (LSA team) size ``num_nvl_ranks``
    (the physical topology). :func:`calculate_buffer_size_logical` starts from the logical one.
    DeepEP-Ascend's is ``calculate_buffer_size(num_ranks, num_max_tokens_per_rank, hidden,
    num_topk, use_fp8_dispatch)``: no NVLink size, no mode flags.

    ``align(max(dispatch, combine), 2 MiB)`` (no rounding in ``"2026-04"``), where the
    dispatch reserves ``ceil(hidden / 32)`` SF packs for FP8 and top-k 0 means 32.

    >>> calculate_buffer_size(32, 8, 4096, 7168, 8, True, True, True)
    2434793472

    Raises:
        InvalidArgumentError: what upstream asserts (tokens and hidden > 0, worst-case SF
            bytes <= hidden, hidden bytes % 32 == 0, ranks divisible by the NVLink size),
            an unknown version, or int32 arithmetic that would overflow upstream.
    """
    if (type(num_ranks) is int and type(num_nvl_ranks) is int and 0 < num_ranks <= INT32_MAX
            and 0 < num_nvl_ranks <= INT32_MAX and num_ranks % num_nvl_ranks == 0
            and (allow_hybrid_mode is True or allow_hybrid_mode is False)):
        gen = DEFAULT_GENERATION if version is None else lookup(version)[0]
        if gen is not None:
            so, su = (num_ranks // num_nvl_ranks, num_nvl_ranks) if allow_hybrid_mode else (1, num_ranks)
            hint = _hint(gen, so, su, su == num_nvl_ranks, num_max_tokens_per_rank, hidden, num_topk,
                         use_fp8_dispatch, allow_multiple_reduction)
            if hint is not None and hint <= INT64_MAX:
                return hint
    # Something failed: name every problem, in upstream's order.
    c = Checker()
    problem = version_problem(version)
    if problem is not None:
        c.problems.append(problem)
    domain_ok = check_domain(c, num_ranks, num_nvl_ranks)
    hybrid_ok = check_flag(c, "allow_hybrid_mode", allow_hybrid_mode)
    logical = None
    if domain_ok and hybrid_ok:
        d = logical_domain(num_ranks, num_nvl_ranks, allow_hybrid_mode)
        logical = (d.num_scaleout_ranks, d.num_scaleup_ranks, d.is_scaleup_nvlink)
    gen = lookup(version)[0] or DEFAULT_GENERATION
    check_hint_arguments(c, num_max_tokens_per_rank, hidden, num_topk, use_fp8_dispatch, logical,
                         allow_multiple_reduction, gen.num_rdma_alignment_bytes)
    c.raise_if_any()
    so, su, nvlink = logical
    check_int64(num_max_tokens_per_rank, _hint(gen, so, su, nvlink, num_max_tokens_per_rank, hidden, num_topk,
                                               use_fp8_dispatch, allow_multiple_reduction))
    raise AssertionError(f"calculate_buffer_size{(num_ranks, num_nvl_ranks, num_max_tokens_per_rank, hidden)}: "
                         "the checks pass one by one but not together")  # pragma: no cover


def calculate_buffer_size_logical(num_scaleout_ranks: int, num_scaleup_ranks: int, is_scaleup_nvlink: bool,
                                  num_max_tokens_per_rank: int, hidden: int, num_topk: int, use_fp8_dispatch: bool,
                                  allow_multiple_reduction: bool, *, version: str | None = None) -> int:
    """The hint from the *logical* topology: ``calculate_buffer_size`` after its topology step.

    No generation's ``calculate_buffer_size`` takes the logical domain: each reads the world
    and LSA (NVLink) team sizes from ``nccl_comm``, derives ``(num_scaleout_ranks,
    num_scaleup_ranks)`` with ``allow_hybrid_mode`` (``nccl.cu:56-60 @dd758ca``) and
    ``is_scaleup_nvlink = num_scaleup_ranks == num_nvl_ranks`` (``buffer.hpp:666-668``), then
    calls ``get_dispatch_buffer_size`` / ``get_combine_buffer_size`` with them (``:670-682``). This
    entry point takes that triple in place of ``nccl_comm``, then upstream's remaining arguments in
    upstream's order; ``allow_hybrid_mode`` is not one of them because it only chooses the
    domain (``num_scaleout_ranks > 1`` is hybrid mode). Hybrid sizes do not read
    ``is_scaleup_nvlink`` (upstream's hybrid domain always has it true).

    >>> calculate_buffer_size_logical(4, 8, True, 4096, 7168, 8, True, True)
    2434793472
    >>> calculate_buffer_size_logical(1, 32, False, 4096, 7168, 8, True, True)  # 4 x 8 with hybrid mode off
    2359296000

    Raises:
        InvalidArgumentError: as :func:`calculate_buffer_size`; the ranks product must fit int32.
    """
    if (type(num_scaleout_ranks) is int and type(num_scaleup_ranks) is int and 0 < num_scaleout_ranks <= INT32_MAX
            and 0 < num_scaleup_ranks <= INT32_MAX and num_scaleout_ranks * num_scaleup_ranks <= INT32_MAX
            and (is_scaleup_nvlink is True or is_scaleup_nvlink is False)):
        gen = DEFAULT_GENERATION if version is None else lookup(version)[0]
        if gen is not None:
            hint = _hint(gen, num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink, num_max_tokens_per_rank,
                         hidden, num_topk, use_fp8_dispatch, allow_multiple_reduction)
            if hint is not None and hint <= INT64_MAX:
                return hint
    c = Checker()
    problem = version_problem(version)
    if problem is not None:
        c.problems.append(problem)
    ok = c.int_range("num_scaleout_ranks", num_scaleout_ranks, 1, INT32_MAX)
    ok = c.int_range("num_scaleup_ranks", num_scaleup_ranks, 1, INT32_MAX) and ok
    if ok and num_scaleout_ranks * num_scaleup_ranks > INT32_MAX:
        c.add("num_scaleup_ranks", num_scaleup_ranks,
              f"num_ranks = {num_scaleout_ranks} x {num_scaleup_ranks} must fit int32")
        ok = False
    ok = check_flag(c, "is_scaleup_nvlink", is_scaleup_nvlink) and ok
    gen = lookup(version)[0] or DEFAULT_GENERATION
    check_hint_arguments(c, num_max_tokens_per_rank, hidden, num_topk, use_fp8_dispatch,
                         (num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink) if ok else None,
                         allow_multiple_reduction, gen.num_rdma_alignment_bytes)
    c.raise_if_any()
    check_int64(num_max_tokens_per_rank, _hint(gen, num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink,
                                               num_max_tokens_per_rank, hidden, num_topk, use_fp8_dispatch,
                                               allow_multiple_reduction))
    raise AssertionError("calculate_buffer_size_logical: the checks pass one by one but not together")  # pragma: no cover


def get_buffer_size_hint(group: int | tuple[int, int], num_max_tokens_per_rank: int, hidden: int,
                         num_topk: int = 0, use_fp8_dispatch: bool = False, allow_hybrid_mode: bool = True,
                         allow_multiple_reduction: bool = True, *, version: str | None = None) -> int:
    """``ElasticBuffer.get_buffer_size_hint`` / ``EPBuffer.get_buffer_size_hint``
    (``deep_ep/buffers/elastic.py:380-406 @dd758ca``), same arguments and defaults.

    Args:
        group: the communication group, by size: ``num_ranks`` (all in one NVLink domain)
            or ``(num_rdma_ranks, num_nvl_ranks)`` = (nodes or NVLink domains, ranks in each).
        num_max_tokens_per_rank: the most tokens one rank dispatches per call.
        hidden: hidden size in elements.
        num_topk: experts per token; 0 reserves the maximum, 32.
        use_fp8_dispatch: FP8 (1 byte + SF packs) instead of BF16 (2 bytes) dispatch.
        allow_hybrid_mode: split into scale-out (RDMA) x scale-up (NVLink) when several NVLink domains.
        allow_multiple_reduction: combine reduces per rank before sending.
        version: a :data:`~.versions.VERSIONS` id, alias or commit id (``None`` = newest).

    Returns:
        The buffer size in bytes (2 MiB-aligned except in ``"2026-04"``), excluding the workspace.

    >>> get_buffer_size_hint(8, 4096, 7168, 8, True)
    471859200
    >>> get_buffer_size_hint((4, 8), 4096, 7168, 8, True)
    2434793472
    """
    if type(group) is int:
        num_ranks = num_nvl_ranks = group
    elif type(group) is tuple and len(group) == 2:
        num_rdma_ranks, num_nvl_ranks = group
        if not (type(num_rdma_ranks) is int and type(num_nvl_ranks) is int and 0 < num_rdma_ranks <= INT32_MAX
                and 0 < num_nvl_ranks <= INT32_MAX):
            c = Checker()
            c.int_range("num_nodes", num_rdma_ranks, 1, INT32_MAX)
            c.int_range("num_ranks_per_node", num_nvl_ranks, 1, INT32_MAX)
            c.raise_if_any()
        num_ranks = num_rdma_ranks * num_nvl_ranks
    else:
        raise InvalidArgumentError([Problem("num_ranks", group, "give num_ranks or (num_rdma_ranks, num_nvl_ranks)")])
    return calculate_buffer_size(num_ranks, num_nvl_ranks, num_max_tokens_per_rank, hidden, num_topk,
                                 use_fp8_dispatch, allow_hybrid_mode, allow_multiple_reduction, version=version)
