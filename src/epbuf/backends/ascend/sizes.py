"""DeepEP-Ascend's size functions, argument order as upstream: records, the receive and reduce
buffers, and the hint ``calculate_buffer_size`` (``csrc/buffers/ep.hpp:560-605``).

``calculate_buffer_size`` is ``align(max(dispatch, combine), 2 MiB)``: dispatch = ``ranks x
tokens`` records with ``ceil(hidden / 32)`` SF packs for FP8 (an approximation: a real run sends
``2 x ceil(hidden / 128)``), combine = ``min(topk, ranks) x tokens`` BF16 records; top-k 0 means
32. Every function checks its arguments as one test on the good path; only when it fails do
the detailed checks run to name every problem (``benchmarks/api_speed.py`` measures the cost).
"""

from __future__ import annotations

from ...errors import Checker, check_int
from ...units import INT32_MAX, INT64_MAX, align, ceil_div
from .._v2_and_ascend import element_size
from .constants import (EPB, FP8_BLOCK_SIZE, HINT_SF_GRANULARITY, NUM_ALLOCATION_ALIGNMENT_BYTES, NUM_DEFAULT_TOPK,
                        NUM_MAX_TOPK, SF_PACK_BYTES, SF_PACKS_PER_SCALE, TOK)
from .layout import BufferLayout, TokenLayout, _record_num_bytes

__all__ = ["get_dispatch_token_layout", "get_combine_token_layout", "dispatch_buffer_layout", "combine_buffer_layout",
           "get_dispatch_buffer_size", "get_combine_buffer_size", "effective_topk", "hint_num_sf_packs",
           "actual_num_sf_packs", "element_size", "calculate_buffer_size"]


def get_dispatch_token_layout(num_hidden_bytes: int, num_sf_packs: int, num_topk: int) -> TokenLayout:
    """``get_dispatch_token_layout(num_hidden_bytes, num_sf_packs, num_topk)`` (``KDISPATCH:13-18``): with
    metadata, SF packs of int16. DeepEP V2's takes ``(hidden, elem_size, num_sf_packs, num_topk)``."""
    _check_record("dispatch", num_hidden_bytes, num_sf_packs, num_topk, True)
    return TokenLayout(num_hidden_bytes=num_hidden_bytes, num_sf_bytes=num_sf_packs * SF_PACK_BYTES,
                       num_topk=num_topk)


def get_combine_token_layout(num_hidden_bytes: int, num_topk: int) -> TokenLayout:
    """``get_combine_token_layout(num_hidden_bytes, num_topk)`` (``KCOMBINE:14-16``): no SF, no metadata.
    DeepEP V2's takes ``(hidden, elem_size, num_topk)`` and keeps the top-k index slots."""
    _check_record("combine", num_hidden_bytes, 0, num_topk, False)
    return TokenLayout(num_hidden_bytes=num_hidden_bytes, num_sf_bytes=0, num_topk=num_topk, with_metadata=False)


def _check_record(what: str, num_hidden_bytes: int, num_sf_packs: int, num_topk: int, with_metadata: bool) -> None:
    """Non-negative ints, and a stride that fits the ``int`` upstream adds it up in."""
    if not (type(num_hidden_bytes) is int and type(num_sf_packs) is int and type(num_topk) is int
            and 0 <= num_hidden_bytes <= INT32_MAX and 0 <= num_sf_packs <= INT32_MAX and 0 <= num_topk <= INT32_MAX
            and _record_num_bytes(num_hidden_bytes, num_sf_packs * SF_PACK_BYTES, num_topk, with_metadata)
            <= INT32_MAX):
        c = Checker()
        ok = c.int_range("num_hidden_bytes", num_hidden_bytes, 0, INT32_MAX, "an int upstream")
        ok = c.int_range("num_sf_packs", num_sf_packs, 0, INT32_MAX) and ok
        if c.int_range("num_topk", num_topk, 0, INT32_MAX) and ok:
            _check_record_int(c, what, _record_num_bytes(num_hidden_bytes, num_sf_packs * SF_PACK_BYTES, num_topk,
                                                        with_metadata), num_topk, "num_hidden_bytes", num_hidden_bytes)
        c.raise_if_any()


def _check_record_int(c: Checker, what: str, num_bytes: int, num_topk: int, argument: str, value: int) -> bool:
    """``TokenLayout::get_num_bytes`` adds ``int`` terms (``TOK:36-43``): the stride must fit int32.
    The problem names top-k when it is beyond the kernels' 32, else ``argument``."""
    if num_bytes <= INT32_MAX:
        return True
    if num_topk > NUM_MAX_TOPK:
        argument, value = "num_topk", num_topk
    c.add(argument, value, f"the {what} record of {num_bytes} B must fit int32 (TokenLayout::get_num_bytes "
                           f"adds ints, {TOK}:36-43)")
    return False


def dispatch_buffer_layout(num_max_tokens_per_rank: int, hidden: int, num_sf_packs: int, num_topk: int,
                           element_size: int, num_ranks: int) -> BufferLayout:
    """The receive buffer of ``get_dispatch_buffer_size`` (``EPB:560-569``)."""
    if not (type(hidden) is int and type(element_size) is int and 0 < hidden <= INT32_MAX
            and 0 < element_size and hidden * element_size <= INT32_MAX):
        _check_hidden_bytes(hidden, element_size)
    token_layout = get_dispatch_token_layout(hidden * element_size, num_sf_packs, num_topk)
    return BufferLayout(token_layout=token_layout, num_ranks=num_ranks, num_max_tokens_per_rank=num_max_tokens_per_rank)


def combine_buffer_layout(num_ranks: int, num_max_tokens_per_rank: int, hidden: int, num_topk: int) -> BufferLayout:
    """The reduce buffer of ``get_combine_buffer_size`` (``EPB:571-579``): BF16 records,
    ``min(num_topk, num_ranks)`` of them per token slot."""
    if not (type(hidden) is int and 0 < hidden <= INT32_MAX // 2):
        _check_hidden_bytes(hidden, 2)
    token_layout = get_combine_token_layout(hidden * 2, num_topk)  # sizeof(uint16_t): BF16
    check_int("num_ranks", num_ranks, 0, INT32_MAX)
    return BufferLayout(token_layout=token_layout, num_ranks=min(num_topk, num_ranks),
                        num_max_tokens_per_rank=num_max_tokens_per_rank)


def _check_hidden_bytes(hidden: int, element_size: int) -> None:
    """``hidden * element_size`` is an ``int`` product upstream (``EPB:565``, ``:575``)."""
    c = Checker()
    if c.int_range("hidden", hidden, 1, INT32_MAX) & c.int_range("element_size", element_size, 1, INT32_MAX):
        if hidden * element_size > INT32_MAX:
            c.add("hidden", hidden, f"hidden x element size = {hidden * element_size} must fit int32 "
                                    "(num_hidden_bytes is int)")
    c.raise_if_any()


def get_dispatch_buffer_size(num_max_tokens_per_rank: int, hidden: int, num_sf_packs: int, num_topk: int,
                             element_size: int, num_ranks: int) -> int:
    """``EPBuffer::get_dispatch_buffer_size(num_max_tokens_per_rank, hidden, num_sf_packs, num_topk,
    element_size, num_ranks)`` (``EPB:560-569``), argument order as upstream. DeepEP V2's ends with the
    logical domain ``(..., elem_size, num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink)``.

    >>> get_dispatch_buffer_size(4096, 7168, 224, 6, 1, 8)
    252706816
    """
    hidden_bytes = hidden * element_size if type(hidden) is int and type(element_size) is int else -1
    if (0 < hidden_bytes <= INT32_MAX and hidden > 0 and type(num_max_tokens_per_rank) is int
            and type(num_sf_packs) is int and type(num_topk) is int and type(num_ranks) is int
            and 0 <= num_max_tokens_per_rank <= INT32_MAX and 0 <= num_sf_packs <= INT32_MAX
            and 0 <= num_topk <= INT32_MAX and 0 <= num_ranks <= INT32_MAX):
        record = _record_num_bytes(hidden_bytes, num_sf_packs * SF_PACK_BYTES, num_topk)
        if record <= INT32_MAX and num_ranks * (num_max_tokens_per_rank * record) <= INT64_MAX:
            return num_ranks * (num_max_tokens_per_rank * record)
    num_bytes = dispatch_buffer_layout(num_max_tokens_per_rank, hidden, num_sf_packs, num_topk, element_size,
                                       num_ranks).num_bytes
    _check_int64(num_max_tokens_per_rank, num_bytes)
    return num_bytes


def get_combine_buffer_size(num_ranks: int, num_max_tokens_per_rank: int, hidden: int, num_topk: int) -> int:
    """``EPBuffer::get_combine_buffer_size(num_ranks, num_max_tokens_per_rank, hidden, num_topk)``
    (``EPB:571-579``), argument order as upstream: ranks first. DeepEP V2's is ``(num_max_tokens_per_rank,
    hidden, num_topk, num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink, allow_multiple_reduction)``.

    >>> get_combine_buffer_size(8, 4096, 7168, 6)
    353107968
    """
    if (type(num_ranks) is int and type(num_max_tokens_per_rank) is int and type(hidden) is int
            and type(num_topk) is int and 0 <= num_ranks <= INT32_MAX and 0 <= num_max_tokens_per_rank <= INT32_MAX
            and 0 < hidden <= INT32_MAX // 2 and 0 <= num_topk <= INT32_MAX):
        record = _record_num_bytes(hidden * 2, 0, num_topk, False)
        if record <= INT32_MAX and min(num_topk, num_ranks) * (num_max_tokens_per_rank * record) <= INT64_MAX:
            return min(num_topk, num_ranks) * (num_max_tokens_per_rank * record)
    num_bytes = combine_buffer_layout(num_ranks, num_max_tokens_per_rank, hidden, num_topk).num_bytes
    _check_int64(num_max_tokens_per_rank, num_bytes)
    return num_bytes


def effective_topk(num_topk: int) -> int:
    """``num_topk == 0 ? 32 : num_topk`` (``EPB:589-590``)."""
    if not (type(num_topk) is int and 0 <= num_topk <= INT32_MAX):
        check_int("num_topk", num_topk, 0, INT32_MAX, "0 means 32")
    return NUM_DEFAULT_TOPK if num_topk == 0 else num_topk


def hint_num_sf_packs(hidden: int, use_fp8_dispatch: bool) -> int:
    """The hint's SF pack count: ``ceil_div(hidden, 32)`` for FP8 (``EPB:593-594``) — an
    approximation, "because the size-hint API does not receive an SF tensor"."""
    if not (type(hidden) is int and 0 < hidden <= INT32_MAX):
        check_int("hidden", hidden, 1, INT32_MAX)
    return ceil_div(hidden, HINT_SF_GRANULARITY) if element_size(use_fp8_dispatch) == 1 else 0


def actual_num_sf_packs(hidden: int, use_fp8_dispatch: bool) -> int:
    """SF packs a real FP8 dispatch sends: ``ceil(hidden / 128)`` fp32 scales, each
    viewed as two int16 packs (dispatch asserts ``sf.element_size() == sizeof(sf_pack_t)``, ``EPB:151``)."""
    if not (type(hidden) is int and 0 < hidden <= INT32_MAX):
        check_int("hidden", hidden, 1, INT32_MAX)
    return ceil_div(hidden, FP8_BLOCK_SIZE) * SF_PACKS_PER_SCALE if element_size(use_fp8_dispatch) == 1 else 0


def calculate_buffer_size(num_ranks: int, num_max_tokens_per_rank: int, hidden: int, num_topk: int,
                          use_fp8_dispatch: bool) -> int:
    """``EPBuffer::calculate_buffer_size(num_ranks, num_max_tokens_per_rank, hidden, num_topk,
    use_fp8_dispatch)`` (``EPB:581-605``): the size hint. DeepEP V2's takes ``nccl_comm`` in place of
    ``num_ranks`` (world and NVLink sizes) and the two mode flags after ``use_fp8_dispatch``.

    ``align(max(dispatch, combine), 2 MiB)`` where dispatch reserves ``ceil(hidden/32)``
    SF packs for FP8 and top-k 0 means 32.

    >>> calculate_buffer_size(8, 4096, 7168, 6, True)
    354418688

    Raises:
        InvalidArgumentError: what upstream asserts (``num_ranks``, tokens and hidden > 0,
            top-k >= 0, ``EPB:584-587``), or sizes beyond the ``int`` / ``int64_t`` upstream computes in.
    """
    if (type(num_ranks) is int and type(num_max_tokens_per_rank) is int and type(hidden) is int
            and type(num_topk) is int and 0 < num_ranks <= INT32_MAX and 0 < num_max_tokens_per_rank <= INT32_MAX
            and 0 < hidden <= INT32_MAX // 2 and 0 <= num_topk <= INT32_MAX
            and (use_fp8_dispatch is True or use_fp8_dispatch is False)):
        topk = NUM_DEFAULT_TOPK if num_topk == 0 else num_topk
        if use_fp8_dispatch:
            dispatch_record = _record_num_bytes(hidden, ceil_div(hidden, HINT_SF_GRANULARITY) * SF_PACK_BYTES, topk)
        else:
            dispatch_record = _record_num_bytes(hidden * 2, 0, topk)
        combine_record = _record_num_bytes(hidden * 2, 0, topk, False)
        if dispatch_record <= INT32_MAX and combine_record <= INT32_MAX:
            dispatch = num_ranks * (num_max_tokens_per_rank * dispatch_record)
            combine = min(topk, num_ranks) * (num_max_tokens_per_rank * combine_record)
            hint = align(max(dispatch, combine), NUM_ALLOCATION_ALIGNMENT_BYTES)
            if hint <= INT64_MAX:
                return hint
    # Something failed: name it.
    c = Checker()
    c.int_range("num_ranks", num_ranks, 1, INT32_MAX)
    c.int_range("num_max_tokens_per_rank", num_max_tokens_per_rank, 1, INT32_MAX)
    c.int_range("hidden", hidden, 1, INT32_MAX)
    c.int_range("num_topk", num_topk, 0, INT32_MAX)
    if type(use_fp8_dispatch) is not bool:
        c.add("use_fp8_dispatch", use_fp8_dispatch, "must be True or False")
    c.raise_if_any()
    topk = effective_topk(num_topk)
    dispatch = get_dispatch_buffer_size(num_max_tokens_per_rank, hidden, hint_num_sf_packs(hidden, use_fp8_dispatch),
                                        topk, element_size(use_fp8_dispatch), num_ranks)
    combine = get_combine_buffer_size(num_ranks, num_max_tokens_per_rank, hidden, topk)
    hint = align(max(dispatch, combine), NUM_ALLOCATION_ALIGNMENT_BYTES)
    _check_int64(num_max_tokens_per_rank, hint)
    return hint


def _check_int64(num_max_tokens_per_rank: int, hint_bytes: int) -> None:
    """Upstream computes and stores the sizes as ``int64_t`` (``TOK:102-112``, ``EPB:28``): a
    hint beyond it is not a size upstream can hold, so the plan is invalid, not just large."""
    if hint_bytes > INT64_MAX:
        c = Checker()
        c.add("num_max_tokens_per_rank", num_max_tokens_per_rank,
              f"the buffer would need {hint_bytes:,} B, beyond int64 ({INT64_MAX:,}; int64_t num_buffer_bytes, "
              f"{EPB}:28); lower --tokens, --ranks or --hidden")
        c.raise_if_any()
