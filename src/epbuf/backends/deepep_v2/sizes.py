"""DeepEP V2's size functions, argument order as upstream: records, phases and the hint.

``calculate_buffer_size`` (what ``get_buffer_size_hint`` and the constructor call) derives the
logical domain ``(num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink)`` from the
communicator (:mod:`.domain`), then:

* *direct* mode (one scale-out rank): dispatch = receive ``N x T`` records plus a one-rank
  send buffer unless the scale-up domain is NVLink; combine = receive ``min(N, topk)``
  (``allow_multiple_reduction``) or ``topk`` slots per token plus, off NVLink, an ``N``-rank
  send buffer (``topk``-fold without multiple reduction).
* *hybrid* mode (several scale-out ranks): scale-up receive ``su x (so*T)``, scale-out send
  ``1 x T`` and scale-out receive ``so x (T + kNumMaxChannels)``; combine mirrors it.

The hint is ``max(dispatch, combine)`` (the phases reuse the buffer), rounded to 2 MiB from
``"2026-07"`` on. Top-k 0 means 32, and FP8 dispatch reserves ``ceil(hidden / 32)`` 4-byte SF
packs per token (an upper bound: a real FP8 dispatch sends ``ceil(hidden / 128)``).

Every function here checks its arguments: negative, float, NaN, string or bool values, and
values the size function itself asserts against or whose ``int`` arithmetic upstream would
overflow, raise :class:`~epbuf.errors.InvalidArgumentError`. The checks run as one test on the
good path (``benchmarks/api_speed.py`` measures them against the bare formula); only when it
fails do the detailed checks run to name every problem.
"""

from __future__ import annotations

from ..._record import Record
from ...errors import Checker, InvalidArgumentError, Problem, check_bool, check_int
from ...units import INT32_MAX, align, ceil_div
from .constants import (COMBINE_ELEMENT_SIZE, FP8_BLOCK_SIZE, HINT_SF_GRANULARITY, NUM_DEFAULT_TOPK, NUM_MAX_CHANNELS,
                        NUM_MAX_TOPK, NUM_TMA_ALIGNMENT_BYTES, SF_PACK_BYTES)
from .domain import Domain, check_domain, logical_domain
from .layout import BufferLayout, TokenLayout, record_num_bytes
from .versions import DEFAULT_VERSION, Generation, get_generation, lookup, version_problem

__all__ = [
    "effective_topk", "element_size", "hint_num_sf_packs", "actual_num_sf_packs",
    "get_dispatch_token_layout", "get_combine_token_layout", "dispatch_buffer_layouts", "combine_buffer_layouts",
    "get_dispatch_buffer_size", "get_combine_buffer_size", "calculate_buffer_size", "calculate_buffer_size_logical",
    "get_buffer_size_hint",
]

_DEFAULT = get_generation(DEFAULT_VERSION)
_MBARRIER_SLOT = 32  # align(sizeof(mbarrier), 32): what get_num_bytes<true> adds


def _generation(version: object) -> Generation:
    return _DEFAULT if version is None else get_generation(version)


# --- per-token quantities -------------------------------------------------------------------
def effective_topk(num_topk: int) -> int:
    """``num_topk == 0 ? 32 : num_topk`` (``buffer.hpp:662-663 @dd758ca``, ``ep.hpp:259-260 @def8651``)."""
    if not (type(num_topk) is int and 0 <= num_topk <= INT32_MAX):
        check_int("num_topk", num_topk, 0, INT32_MAX, "0 means 32")
    return NUM_DEFAULT_TOPK if num_topk == 0 else num_topk


def element_size(use_fp8_dispatch: bool) -> int:
    """``sizeof(__nv_fp8_e4m3)`` = 1 or ``sizeof(nv_bfloat16)`` = 2 (``buffer.hpp:671 @dd758ca``)."""
    if use_fp8_dispatch is True:
        return 1
    if use_fp8_dispatch is False:
        return 2
    return check_bool("use_fp8_dispatch", use_fp8_dispatch)


def hint_num_sf_packs(hidden: int, use_fp8_dispatch: bool) -> int:
    """The hint's SF packs per token: ``ceil_div(hidden, 32)`` for FP8 ("An approximation for
    number of SF packs", ``buffer.hpp:672 @dd758ca``): one 4-byte pack per 32 elements, the
    worst case the hint asserts fits (``ceil_div(hidden, 32) * sizeof(float) <= hidden``)."""
    if not (type(hidden) is int and 0 < hidden <= INT32_MAX):
        check_int("hidden", hidden, 1, INT32_MAX)
    return ceil_div(hidden, HINT_SF_GRANULARITY) if element_size(use_fp8_dispatch) == 1 else 0


def actual_num_sf_packs(hidden: int, use_fp8_dispatch: bool) -> int:
    """SF packs a real FP8 dispatch sends per token: ``ceil(hidden / 128)``.

    The ``sf`` tensor is ``[num_tokens, num_sf_packs]`` of 4-byte ``sf_pack_t`` (fp32 or
    packed UE8M0x4, ``buffer.hpp:762-771 @dd758ca``). Upstream's ``per_token_cast_to_fp8``
    gives one fp32 scale per 128 elements; UE8M0 scales per 32 elements packed four to an
    int give the same count, ``ceil(ceil(hidden / 32) / 4) == ceil(hidden / 128)``. (UE8M0
    per 128 elements packed by four would be ``ceil(hidden / 512)``, smaller still.)
    """
    if not (type(hidden) is int and 0 < hidden <= INT32_MAX):
        check_int("hidden", hidden, 1, INT32_MAX)
    return ceil_div(hidden, FP8_BLOCK_SIZE) if element_size(use_fp8_dispatch) == 1 else 0


# --- records ------------------------------------------------------------------------------------
def check_hidden(c: Checker, hidden: int, elem_size: int, what: str) -> bool:
    """``TokenLayout``'s ``EP_UNIFIED_ASSERT(num_hidden_bytes % 32 == 0)`` and its int range."""
    num_hidden_bytes = hidden * elem_size
    if num_hidden_bytes > INT32_MAX:
        c.add("hidden", hidden, f"{what} hidden bytes = {hidden} x {elem_size} = {num_hidden_bytes} must fit int32")
        return False
    if num_hidden_bytes % NUM_TMA_ALIGNMENT_BYTES:
        c.add("hidden", hidden,
              f"{what} hidden bytes = {hidden} x {elem_size} = {num_hidden_bytes} must be a multiple of 32 "
              f"(TokenLayout: EP_UNIFIED_ASSERT(num_hidden_bytes % kNumTMAAlignBytes == 0)); "
              f"use hidden % {max(1, NUM_TMA_ALIGNMENT_BYTES // elem_size)} == 0")
        return False
    return True


def check_record_int(c: Checker, record: TokenLayout, argument: str, value: int) -> bool:
    """``TokenLayout::get_num_bytes`` is an ``int`` (with the mbarrier slot the kernels stage)."""
    num_bytes = record.num_bytes(True)
    if num_bytes > INT32_MAX:
        c.add(argument, value, f"the {'dispatch' if record.with_metadata else 'combine'} record of {num_bytes} "
                               "bytes must fit int32 (TokenLayout::get_num_bytes is int)")
        return False
    return True


def _token_layout(hidden: int, elem_size: int, num_sf_packs: int, num_topk: int, with_metadata: bool,
                  version: object, what: str) -> TokenLayout:
    gen = _generation(version)
    c = Checker()
    ok = c.int_range("hidden", hidden, 1, INT32_MAX)
    ok = c.int_range("elem_size", elem_size, 1, INT32_MAX) and ok
    ok = c.int_range("num_sf_packs", num_sf_packs, 0, INT32_MAX // SF_PACK_BYTES, "sf bytes are an int") and ok
    ok = c.int_range("num_topk", num_topk, 0, INT32_MAX) and ok
    if ok and check_hidden(c, hidden, elem_size, what):
        record = TokenLayout(num_hidden_bytes=hidden * elem_size, num_sf_bytes=num_sf_packs * SF_PACK_BYTES,
                             num_topk=num_topk, with_metadata=with_metadata,
                             num_rdma_alignment_bytes=gen.num_rdma_alignment_bytes)
        if check_record_int(c, record, "num_topk" if num_topk > NUM_MAX_TOPK else "hidden",
                            num_topk if num_topk > NUM_MAX_TOPK else hidden):
            return record
    c.raise_if_any()
    raise AssertionError("unreachable")  # pragma: no cover


def get_dispatch_token_layout(hidden: int, elem_size: int, num_sf_packs: int, num_topk: int, *,
                              version: str | None = None) -> TokenLayout:
    """``get_dispatch_token_layout(hidden, elem_size, num_sf_packs, num_topk)``: ``TokenLayout(hidden *
    elem_size, num_sf_packs * sizeof(sf_pack_t), num_topk, true)`` (``dispatch.hpp:136-139 @dd758ca``,
    ``csrc/kernels/ep/dispatch.hpp:26-29 @2578e50``). DeepEP-Ascend's takes the hidden *bytes*
    instead: ``get_dispatch_token_layout(num_hidden_bytes, num_sf_packs, num_topk)``.

    >>> get_dispatch_token_layout(7168, 1, 224, 12, version="2026-07").num_bytes()
    8224
    >>> get_dispatch_token_layout(7168, 1, 224, 12).num_bytes()
    8256
    """
    return _token_layout(hidden, elem_size, num_sf_packs, num_topk, True, version, "dispatch")


def get_combine_token_layout(hidden: int, elem_size: int, num_topk: int, *,
                             version: str | None = None) -> TokenLayout:
    """``get_combine_token_layout(hidden, elem_size, num_topk)``: ``TokenLayout(hidden * elem_size, 0,
    num_topk, false)``, always called with ``sizeof(nv_bfloat16)`` (``combine.hpp:109-112``,
    ``buffer.hpp:621 @dd758ca``). DeepEP-Ascend's takes ``(num_hidden_bytes, num_topk)``."""
    return _token_layout(hidden, elem_size, 0, num_topk, False, version, "combine")


# --- the regions of each phase ------------------------------------------------------------------
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


def _region_rows_x_tokens(regions, num_max_tokens_per_rank: int) -> int | None:
    """``sum(rows x (multiplier x T + offset))``, or ``None`` when a token count overflows int."""
    total = 0
    for _, rows, multiplier, offset, _ in regions:
        tokens = multiplier * num_max_tokens_per_rank + offset
        if tokens > INT32_MAX:
            return None
        total += rows * tokens
    return total


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
    gen = _generation(version)
    hidden_bytes = hidden * elem_size if type(hidden) is int and type(elem_size) is int else -1
    if (type(num_max_tokens_per_rank) is int and type(num_sf_packs) is int and type(num_topk) is int
            and type(num_scaleout_ranks) is int and type(num_scaleup_ranks) is int
            and 0 <= num_max_tokens_per_rank <= INT32_MAX and hidden > 0 and elem_size > 0
            and 0 < hidden_bytes <= INT32_MAX and hidden_bytes % NUM_TMA_ALIGNMENT_BYTES == 0
            and 0 <= num_sf_packs <= INT32_MAX // SF_PACK_BYTES and 0 <= num_topk <= INT32_MAX
            and 0 < num_scaleout_ranks <= INT32_MAX and 0 < num_scaleup_ranks <= INT32_MAX
            and num_scaleout_ranks * num_scaleup_ranks <= INT32_MAX
            and (is_scaleup_nvlink is True or is_scaleup_nvlink is False)):
        record = record_num_bytes(hidden_bytes, num_sf_packs * SF_PACK_BYTES, num_topk, True,
                                  gen.num_rdma_alignment_bytes)
        if record + _MBARRIER_SLOT <= INT32_MAX:
            rows_x_tokens = _region_rows_x_tokens(
                dispatch_regions(num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink), num_max_tokens_per_rank)
            if rows_x_tokens is not None:
                return rows_x_tokens * record
    layouts = dispatch_buffer_layouts(num_max_tokens_per_rank, hidden, num_sf_packs, num_topk, elem_size,
                                      num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink, version=version)
    return sum(layout.num_bytes for layout in layouts.values())


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
    gen = _generation(version)
    if (type(num_max_tokens_per_rank) is int and type(hidden) is int and type(num_topk) is int
            and type(num_scaleout_ranks) is int and type(num_scaleup_ranks) is int
            and 0 <= num_max_tokens_per_rank <= INT32_MAX and 0 < hidden <= INT32_MAX // COMBINE_ELEMENT_SIZE
            and hidden * COMBINE_ELEMENT_SIZE % NUM_TMA_ALIGNMENT_BYTES == 0 and 0 <= num_topk <= INT32_MAX
            and 0 < num_scaleout_ranks <= INT32_MAX and 0 < num_scaleup_ranks <= INT32_MAX
            and num_scaleout_ranks * num_scaleup_ranks <= INT32_MAX
            and (is_scaleup_nvlink is True or is_scaleup_nvlink is False)
            and (allow_multiple_reduction is True or allow_multiple_reduction is False)):
        record = record_num_bytes(hidden * COMBINE_ELEMENT_SIZE, 0, num_topk, False, gen.num_rdma_alignment_bytes)
        if record + _MBARRIER_SLOT <= INT32_MAX:
            rows_x_tokens = _region_rows_x_tokens(
                combine_regions(num_topk, num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink,
                                allow_multiple_reduction), num_max_tokens_per_rank)
            if rows_x_tokens is not None:
                return rows_x_tokens * record
    layouts = combine_buffer_layouts(num_max_tokens_per_rank, hidden, num_topk, num_scaleout_ranks,
                                     num_scaleup_ranks, is_scaleup_nvlink, allow_multiple_reduction,
                                     version=version)
    return sum(layout.num_bytes for layout in layouts.values())


# --- the hint -------------------------------------------------------------------------------------
def check_tokens(c: Checker, num_max_tokens_per_rank: int) -> bool:
    """``EP_HOST_ASSERT(num_max_tokens_per_rank > 0)``, an int."""
    return c.int_range("num_max_tokens_per_rank", num_max_tokens_per_rank, 1, INT32_MAX,
                       "EP_HOST_ASSERT(num_max_tokens_per_rank > 0), an int")


def check_hint_arguments(c: Checker, num_max_tokens_per_rank: int | None, hidden: int, num_topk: int,
                         use_fp8_dispatch: bool, logical: tuple[int, int, bool] | None, allow_multiple_reduction: bool,
                         num_rdma_alignment_bytes: int) -> None:
    """What ``calculate_buffer_size`` and the records it builds assert, plus the int32
    arithmetic that must not overflow for the hint to mean anything, collected in ``c``.

    ``logical``: ``(num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink)``, or ``None`` when
    the domain is invalid (the token-count checks then wait). ``num_max_tokens_per_rank=None``
    runs only the checks that do not depend on the token count (what the plan's cached shape
    holds); :func:`check_tokens` and :func:`check_region_tokens` are the others, in this order.
    """
    tokens_ok = num_max_tokens_per_rank is None or check_tokens(c, num_max_tokens_per_rank)
    hidden_ok = c.int_range("hidden", hidden, 1, INT32_MAX, "EP_HOST_ASSERT(hidden > 0), an int")
    topk_ok = c.int_range("num_topk", num_topk, 0, INT32_MAX, "0 means 32")
    fp8_ok = type(use_fp8_dispatch) is bool or c.add("use_fp8_dispatch", use_fp8_dispatch, "must be True or False")
    amr_ok = type(allow_multiple_reduction) is bool or c.add("allow_multiple_reduction", allow_multiple_reduction,
                                                             "must be True or False")
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
    if num_max_tokens_per_rank is not None and logical is not None:
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
    dispatch_record = record_num_bytes(hidden_bytes, num_sf_bytes, topk, True, rdma)
    combine_record = record_num_bytes(hidden * COMBINE_ELEMENT_SIZE, 0, topk, False, rdma)
    if max(dispatch_record, combine_record) + _MBARRIER_SLOT > INT32_MAX:
        return None
    dispatch = _region_rows_x_tokens(dispatch_regions(num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink),
                                     num_max_tokens_per_rank)
    combine = _region_rows_x_tokens(combine_regions(topk, num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink,
                                                    allow_multiple_reduction), num_max_tokens_per_rank)
    if dispatch is None or combine is None:
        return None
    return ep_buffer_num_bytes(dispatch * dispatch_record, combine * combine_record, gen.num_hint_alignment_bytes)


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
        gen = _DEFAULT if version is None else lookup(version)[0]
        if gen is not None:
            so, su = (num_ranks // num_nvl_ranks, num_nvl_ranks) if allow_hybrid_mode else (1, num_ranks)
            hint = _hint(gen, so, su, su == num_nvl_ranks, num_max_tokens_per_rank, hidden, num_topk,
                         use_fp8_dispatch, allow_multiple_reduction)
            if hint is not None:
                return hint
    # Something failed: name every problem, in upstream's order.
    c = Checker()
    problem = version_problem(version)
    if problem is not None:
        c.problems.append(problem)
    domain_ok = check_domain(c, num_ranks, num_nvl_ranks)
    hybrid_ok = type(allow_hybrid_mode) is bool or c.add("allow_hybrid_mode", allow_hybrid_mode,
                                                         "must be True or False")
    logical = None
    if domain_ok and hybrid_ok:
        d = logical_domain(num_ranks, num_nvl_ranks, allow_hybrid_mode)
        logical = (d.num_scaleout_ranks, d.num_scaleup_ranks, d.is_scaleup_nvlink)
    gen = lookup(version)[0] or _DEFAULT
    check_hint_arguments(c, num_max_tokens_per_rank, hidden, num_topk, use_fp8_dispatch, logical,
                         allow_multiple_reduction, gen.num_rdma_alignment_bytes)
    c.raise_if_any()
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
        gen = _DEFAULT if version is None else lookup(version)[0]
        if gen is not None:
            hint = _hint(gen, num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink, num_max_tokens_per_rank,
                         hidden, num_topk, use_fp8_dispatch, allow_multiple_reduction)
            if hint is not None:
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
    ok = (type(is_scaleup_nvlink) is bool or c.add("is_scaleup_nvlink", is_scaleup_nvlink, "must be True or False")) \
        and ok
    gen = lookup(version)[0] or _DEFAULT
    check_hint_arguments(c, num_max_tokens_per_rank, hidden, num_topk, use_fp8_dispatch,
                         (num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink) if ok else None,
                         allow_multiple_reduction, gen.num_rdma_alignment_bytes)
    c.raise_if_any()
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
        c = Checker()
        if c.int_range("num_nodes", num_rdma_ranks, 1, INT32_MAX) and c.int_range("num_ranks_per_node", num_nvl_ranks,
                                                                                 1, INT32_MAX):
            num_ranks = num_rdma_ranks * num_nvl_ranks
        c.raise_if_any()
    else:
        raise InvalidArgumentError([Problem("num_ranks", group, "give num_ranks or (num_rdma_ranks, num_nvl_ranks)")])
    return calculate_buffer_size(num_ranks, num_nvl_ranks, num_max_tokens_per_rank, hidden, num_topk,
                                 use_fp8_dispatch, allow_hybrid_mode, allow_multiple_reduction, version=version)
