"""DeepEP V2's buffers of each phase: ``get_dispatch_buffer_size`` / ``get_combine_buffer_size``.

* *direct* mode (one scale-out rank): dispatch = receive ``N x T`` records plus a one-rank
  send buffer unless the scale-up domain is NVLink; combine = receive ``min(N, topk)``
  (``allow_multiple_reduction``) or ``topk`` slots per token plus, off NVLink, an ``N``-rank
  send buffer (``topk``-fold without multiple reduction).
* *hybrid* mode (several scale-out ranks): scale-up receive ``su x (so*T)``, scale-out send
  ``1 x T`` and scale-out receive ``so x (T + kNumMaxChannels)``; combine mirrors it.

The region tables (:func:`dispatch_regions`, :func:`combine_regions`) are the one definition
of every buffer; the layouts, the sizes, the plan's affine sizes (:mod:`.shape`) and the
``int`` checks of the token counts all read them. The size functions check their arguments
as one test on the good path; only when it fails do the detailed checks run to name every
problem (``benchmarks/api_speed.py`` measures them against the bare formula).
"""

from __future__ import annotations

from functools import lru_cache

from ...errors import Checker, InvalidArgumentError, Problem, check_bool
from ...units import INT32_MAX, INT64_MAX
from .constants import COMBINE_ELEMENT_SIZE, NUM_MAX_CHANNELS, NUM_TMA_ALIGNMENT_BYTES, SF_PACK_BYTES
from .layout import BufferLayout, TokenLayout, _record_num_bytes
from .records import MBARRIER_SLOT_BYTES, generation_of, get_combine_token_layout, get_dispatch_token_layout

__all__ = ["dispatch_regions", "combine_regions", "max_tokens", "check_region_tokens", "dispatch_affine", "combine_affine", "check_int64",
           "dispatch_buffer_layouts", "combine_buffer_layouts", "get_dispatch_buffer_size", "get_combine_buffer_size"]


# Each buffer of a phase as ``(name, rows, token multiplier, token offset, token expression)``:
# ``rows`` x ``(multiplier x T + offset)`` records of the phase's record, T = num_max_tokens_per_rank.
# The one definition of every region: the layouts, the sizes, the summaries' affine sizes and the
# int checks of the token counts (BufferLayout takes an int) all read these tables.
def dispatch_regions(num_scaleout_ranks: int, num_scaleup_ranks: int,
                     is_scaleup_nvlink: bool) -> tuple[tuple[str, int, int, int, str], ...]:
    """The buffers of ``get_dispatch_buffer_size`` in kernel order (``buffer.hpp:586-614 @dd758ca``,
    ``ep.hpp:183-211 @def8651``); see :func:`dispatch_buffer_layouts`."""
    so, su = num_scaleout_ranks, num_scaleup_ranks
    if so == 1:
        return (
            ("recv_buffer", so * su, 1, 0, "tokens"),
            ("send_buffer", 0 if is_scaleup_nvlink else 1, 1, 0, "tokens"),
        )
    return (
        ("scaleup_recv_buffer", su, so, 0, "num_scaleout_ranks x tokens"),
        ("scaleout_send_buffer", 1, 1, 0, "tokens"),
        ("scaleout_recv_buffer", so, 1, NUM_MAX_CHANNELS, "tokens + kNumMaxChannels"),
    )


def combine_regions(num_topk: int, num_scaleout_ranks: int, num_scaleup_ranks: int, is_scaleup_nvlink: bool,
                    allow_multiple_reduction: bool) -> tuple[tuple[str, int, int, int, str], ...]:
    """The buffers of ``get_combine_buffer_size`` in kernel order (``buffer.hpp:616-650 @dd758ca``,
    ``ep.hpp:213-247 @def8651``); see :func:`combine_buffer_layouts`."""
    so, su, amr = num_scaleout_ranks, num_scaleup_ranks, allow_multiple_reduction
    if so == 1:
        num_ranks = so * su
        return (
            ("recv_buffer", min(num_ranks, num_topk) if amr else num_topk, 1, 0, "tokens"),
            ("send_buffer", 0 if is_scaleup_nvlink else num_ranks, 1 if amr else num_topk, 0,
             "tokens" if amr else "tokens x num_topk"),
        )
    return (
        ("scaleup_recv_buffer", min(su, num_topk) if amr else num_topk, so, 0, "num_scaleout_ranks x tokens"),
        ("scaleout_recv_buffer", min(so, num_topk) if amr else num_topk, 1, 0, "tokens"),
        ("scaleout_send_buffer", 1 if amr else num_topk, so, so * NUM_MAX_CHANNELS,
         "num_scaleout_ranks x (tokens + kNumMaxChannels)"),
    )


def max_tokens(*phases: tuple[tuple[str, int, int, int, str], ...]) -> int:
    """The largest ``num_max_tokens_per_rank`` whose every region's token count fits ``int``."""
    return min((INT32_MAX - offset) // multiplier for phase in phases for _, _, multiplier, offset, _ in phase)


def check_region_tokens(c: Checker, num_max_tokens_per_rank: int, **phases) -> bool:
    """``BufferLayout`` takes its token count as an ``int``: the largest region's
    ``multiplier x T + offset`` must fit int32 (``phases``: name -> region table)."""
    tokens, phase, name, expr = max((multiplier * num_max_tokens_per_rank + offset, phase, name, expr)
                                    for phase, table in phases.items() for name, _, multiplier, offset, expr in table)
    if tokens <= INT32_MAX:
        return True
    c.add("num_max_tokens_per_rank", num_max_tokens_per_rank,
          f"the {phase} {name} holds {expr} = {tokens} tokens per rank, which must fit int32 "
          "(BufferLayout takes an int)")
    return False


def check_int64(num_max_tokens_per_rank: int, num_bytes: int) -> int:
    """``num_bytes`` when it fits the ``int64_t`` upstream's sizes are (``BufferLayout::get_num_bytes``,
    ``get_*_buffer_size``, ``calculate_buffer_size``), else :class:`InvalidArgumentError`: beyond it
    is no size upstream can hold, so the plan is invalid, not just large."""
    if num_bytes <= INT64_MAX:
        return num_bytes
    raise InvalidArgumentError([Problem(
        "num_max_tokens_per_rank", num_max_tokens_per_rank,
        f"the buffer would need {num_bytes:,} B, beyond int64 ({INT64_MAX:,}; upstream's sizes are int64_t); "
        "lower --tokens, --ranks or --hidden")])


def _buffer_layouts(token_layout: TokenLayout, regions, num_max_tokens_per_rank: int) -> dict[str, BufferLayout]:
    """One ``BufferLayout`` per region row, by upstream's variable name, in kernel order."""
    return {name: BufferLayout(token_layout=token_layout, num_ranks=rows,
                               num_max_tokens_per_rank=multiplier * num_max_tokens_per_rank + offset)
            for name, rows, multiplier, offset, _ in regions}


def _check_layout_domain(num_max_tokens_per_rank: int, num_scaleout_ranks: int, num_scaleup_ranks: int,
                         is_scaleup_nvlink: bool, **phases) -> None:
    c = Checker()
    tokens_ok = c.int_range("num_max_tokens_per_rank", num_max_tokens_per_rank, 0, INT32_MAX)
    ok = c.int_range("num_scaleout_ranks", num_scaleout_ranks, 1, INT32_MAX)
    ok = c.int_range("num_scaleup_ranks", num_scaleup_ranks, 1, INT32_MAX) and ok
    if ok and num_scaleout_ranks * num_scaleup_ranks > INT32_MAX:
        c.add("num_scaleup_ranks", num_scaleup_ranks,
              f"num_ranks = {num_scaleout_ranks} x {num_scaleup_ranks} must fit int32")
    if type(is_scaleup_nvlink) is not bool:
        c.add("is_scaleup_nvlink", is_scaleup_nvlink, "must be True or False")
    c.raise_if_any()
    if tokens_ok:
        check_region_tokens(c, num_max_tokens_per_rank, **{k: v() for k, v in phases.items()})
    c.raise_if_any()


def dispatch_buffer_layouts(num_max_tokens_per_rank: int, hidden: int, num_sf_packs: int, num_topk: int,
                            elem_size: int, num_scaleout_ranks: int, num_scaleup_ranks: int,
                            is_scaleup_nvlink: bool, *, version: str | None = None) -> dict[str, BufferLayout]:
    """The buffers ``get_dispatch_buffer_size`` adds up, by upstream's variable name, in the
    order the kernels place them (``buffer.hpp:586-614 @dd758ca``, ``ep.hpp:183-211 @def8651``).

    Direct (``num_scaleout_ranks == 1``): ``recv_buffer`` = all ranks x T, then
    ``send_buffer`` of 0 ranks on NVLink (the kernel only touches it ``if constexpr (not
    kIsScaleupNVLink)``) else 1. Hybrid: ``scaleup_recv_buffer`` = su x (so x T),
    ``scaleout_send_buffer`` = 1 x T, ``scaleout_recv_buffer`` = so x (T + kNumMaxChannels);
    the kernel uses ``kNumChannels * ceil(T / kNumChannels)`` tokens there, which never
    exceeds ``T + kNumMaxChannels``.
    """
    token_layout = get_dispatch_token_layout(hidden, elem_size, num_sf_packs, num_topk, version=version)
    _check_layout_domain(num_max_tokens_per_rank, num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink,
                         dispatch=lambda: dispatch_regions(num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink))
    return _buffer_layouts(token_layout, dispatch_regions(num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink),
                           num_max_tokens_per_rank)


def combine_buffer_layouts(num_max_tokens_per_rank: int, hidden: int, num_topk: int, num_scaleout_ranks: int,
                           num_scaleup_ranks: int, is_scaleup_nvlink: bool, allow_multiple_reduction: bool, *,
                           version: str | None = None) -> dict[str, BufferLayout]:
    """The buffers ``get_combine_buffer_size`` adds up, in kernel order (``buffer.hpp:616-650
    @dd758ca``, ``ep.hpp:213-247 @def8651``). Records are BF16 whatever the dispatch dtype.

    Direct: ``recv_buffer`` = ``min(N, topk)`` (multiple reduction) or ``topk`` slots x T,
    then ``send_buffer`` = 0 ranks on NVLink else N, x ``T`` tokens, or ``T * topk`` without
    multiple reduction ("we assume the bad case of `do_expand=True`"). Hybrid:
    ``scaleup_recv_buffer`` = ``min(su, topk)`` (or ``topk``) x (so x T), ``scaleout_recv_buffer``
    = ``min(so, topk)`` (or ``topk``) x T, ``scaleout_send_buffer`` = 1 (or ``topk``) x
    ``so * (T + kNumMaxChannels)``.
    """
    token_layout = get_combine_token_layout(hidden, COMBINE_ELEMENT_SIZE, num_topk, version=version)
    check_bool("allow_multiple_reduction", allow_multiple_reduction)

    def regions():
        return combine_regions(num_topk, num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink,
                               allow_multiple_reduction)

    _check_layout_domain(num_max_tokens_per_rank, num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink,
                         combine=regions)
    return _buffer_layouts(token_layout, regions(), num_max_tokens_per_rank)


def _affine(regions) -> tuple[int, int, int]:
    """``(a, b, t)``: ``sum(rows x (multiplier x T + offset)) = a x T + b`` records, for ``T <= t``
    (:func:`max_tokens`: every region's token count fits int)."""
    return (sum(rows * multiplier for _, rows, multiplier, _, _ in regions),
            sum(rows * offset for _, rows, _, offset, _ in regions), max_tokens(regions))


@lru_cache(maxsize=4096)
def dispatch_affine(num_scaleout_ranks: int, num_scaleup_ranks: int, is_scaleup_nvlink: bool) -> tuple[int, int, int]:
    """:func:`dispatch_regions` as ``(records per token, base records, largest T)``, per topology."""
    return _affine(dispatch_regions(num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink))


@lru_cache(maxsize=4096)
def combine_affine(num_topk: int, num_scaleout_ranks: int, num_scaleup_ranks: int, is_scaleup_nvlink: bool,
                   allow_multiple_reduction: bool) -> tuple[int, int, int]:
    """:func:`combine_regions` as ``(records per token, base records, largest T)``, per topology."""
    return _affine(combine_regions(num_topk, num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink,
                                   allow_multiple_reduction))


def get_dispatch_buffer_size(num_max_tokens_per_rank: int, hidden: int, num_sf_packs: int, num_topk: int,
                             elem_size: int, num_scaleout_ranks: int, num_scaleup_ranks: int,
                             is_scaleup_nvlink: bool, *, version: str | None = None) -> int:
    """``get_dispatch_buffer_size(num_max_tokens_per_rank, hidden, num_sf_packs, num_topk, elem_size,
    num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink)``, argument order as upstream: the
    sum of :func:`dispatch_buffer_layouts`. DeepEP-Ascend's ends ``element_size, num_ranks`` instead
    of the logical domain (one flat domain there).

    >>> get_dispatch_buffer_size(4096, 7168, 224, 8, 1, 4, 8, True)
    1283457024
    """
    gen = generation_of(version)
    hidden_bytes = hidden * elem_size if type(hidden) is int and type(elem_size) is int else -1
    if (type(num_max_tokens_per_rank) is int and type(num_sf_packs) is int and type(num_topk) is int
            and type(num_scaleout_ranks) is int and type(num_scaleup_ranks) is int
            and 0 <= num_max_tokens_per_rank <= INT32_MAX and 0 < hidden_bytes <= INT32_MAX and hidden > 0
            and elem_size > 0 and hidden_bytes % NUM_TMA_ALIGNMENT_BYTES == 0
            and 0 <= num_sf_packs <= INT32_MAX // SF_PACK_BYTES and 0 <= num_topk <= INT32_MAX
            and 0 < num_scaleout_ranks <= INT32_MAX and 0 < num_scaleup_ranks <= INT32_MAX
            and num_scaleout_ranks * num_scaleup_ranks <= INT32_MAX
            and (is_scaleup_nvlink is True or is_scaleup_nvlink is False)):
        record = _record_num_bytes(hidden_bytes, num_sf_packs * SF_PACK_BYTES, num_topk, True,
                                  gen.num_rdma_alignment_bytes)
        if record + MBARRIER_SLOT_BYTES <= INT32_MAX:
            per_token, base, tokens_max = dispatch_affine(num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink)
            num_bytes = (per_token * num_max_tokens_per_rank + base) * record
            if num_max_tokens_per_rank <= tokens_max and num_bytes <= INT64_MAX:
                return num_bytes
    layouts = dispatch_buffer_layouts(num_max_tokens_per_rank, hidden, num_sf_packs, num_topk, elem_size,
                                      num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink, version=version)
    return check_int64(num_max_tokens_per_rank, sum(layout.num_bytes for layout in layouts.values()))


def get_combine_buffer_size(num_max_tokens_per_rank: int, hidden: int, num_topk: int, num_scaleout_ranks: int,
                            num_scaleup_ranks: int, is_scaleup_nvlink: bool, allow_multiple_reduction: bool, *,
                            version: str | None = None) -> int:
    """``get_combine_buffer_size(num_max_tokens_per_rank, hidden, num_topk, num_scaleout_ranks,
    num_scaleup_ranks, is_scaleup_nvlink, allow_multiple_reduction)``, argument order as upstream:
    the sum of :func:`combine_buffer_layouts`. DeepEP-Ascend's is ``(num_ranks,
    num_max_tokens_per_rank, hidden, num_topk)``: ranks first, one flat domain, always multiple
    reduction.

    >>> get_combine_buffer_size(4096, 7168, 8, 4, 8, True, True)
    2433024000
    """
    gen = generation_of(version)
    if (type(num_max_tokens_per_rank) is int and type(hidden) is int and type(num_topk) is int
            and type(num_scaleout_ranks) is int and type(num_scaleup_ranks) is int
            and 0 <= num_max_tokens_per_rank <= INT32_MAX and 0 < hidden <= INT32_MAX // COMBINE_ELEMENT_SIZE
            and hidden * COMBINE_ELEMENT_SIZE % NUM_TMA_ALIGNMENT_BYTES == 0 and 0 <= num_topk <= INT32_MAX
            and 0 < num_scaleout_ranks <= INT32_MAX and 0 < num_scaleup_ranks <= INT32_MAX
            and num_scaleout_ranks * num_scaleup_ranks <= INT32_MAX
            and (is_scaleup_nvlink is True or is_scaleup_nvlink is False)
            and (allow_multiple_reduction is True or allow_multiple_reduction is False)):
        record = _record_num_bytes(hidden * COMBINE_ELEMENT_SIZE, 0, num_topk, False, gen.num_rdma_alignment_bytes)
        if record + MBARRIER_SLOT_BYTES <= INT32_MAX:
            per_token, base, tokens_max = combine_affine(num_topk, num_scaleout_ranks, num_scaleup_ranks,
                                                         is_scaleup_nvlink, allow_multiple_reduction)
            num_bytes = (per_token * num_max_tokens_per_rank + base) * record
            if num_max_tokens_per_rank <= tokens_max and num_bytes <= INT64_MAX:
                return num_bytes
    layouts = combine_buffer_layouts(num_max_tokens_per_rank, hidden, num_topk, num_scaleout_ranks,
                                     num_scaleup_ranks, is_scaleup_nvlink, allow_multiple_reduction,
                                     version=version)
    return check_int64(num_max_tokens_per_rank, sum(layout.num_bytes for layout in layouts.values()))
