"""The records of one token: per-token counts and upstream's ``get_*_token_layout``.

Top-k 0 means 32; FP8 dispatch sends 1-byte elements plus 4-byte SF packs (the hint reserves
``ceil(hidden / 32)``, a real run ``ceil(hidden / 128)``); combine records are BF16. Every
function checks its arguments (negative, float, NaN, string or bool values raise
:class:`~epbuf.errors.InvalidArgumentError`), as one test on the good path.
"""

from __future__ import annotations

from ...errors import Checker, check_int
from ...units import INT32_MAX, ceil_div
from .._v2_and_ascend import element_size
from .constants import (FP8_BLOCK_SIZE, HINT_SF_GRANULARITY, NUM_DEFAULT_TOPK, NUM_MAX_TOPK, NUM_TMA_ALIGNMENT_BYTES,
                        SF_PACK_BYTES)
from .layout import TokenLayout
from .versions import DEFAULT_VERSION, Generation, get_generation

__all__ = ["effective_topk", "element_size", "hint_num_sf_packs", "actual_num_sf_packs", "get_dispatch_token_layout",
           "get_combine_token_layout", "check_hidden", "check_record_int", "generation_of", "DEFAULT_GENERATION",
           "MBARRIER_SLOT_BYTES"]

DEFAULT_GENERATION = get_generation(DEFAULT_VERSION)
MBARRIER_SLOT_BYTES = 32  # align(sizeof(mbarrier), 32): what get_num_bytes<true> adds to get_num_bytes<false>


def generation_of(version: object) -> Generation:
    """:func:`~.versions.get_generation`, with the default looked up once."""
    return DEFAULT_GENERATION if version is None else get_generation(version)


# --- per-token quantities -------------------------------------------------------------------
def effective_topk(num_topk: int) -> int:
    """``num_topk == 0 ? 32 : num_topk`` (``buffer.hpp:662-663 @dd758ca``, ``ep.hpp:259-260 @def8651``)."""
    if not (type(num_topk) is int and 0 <= num_topk <= INT32_MAX):
        check_int("num_topk", num_topk, 0, INT32_MAX, "0 means 32")
    return NUM_DEFAULT_TOPK if num_topk == 0 else num_topk


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
    gen = generation_of(version)
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
