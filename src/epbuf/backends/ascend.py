"""DeepEP-Ascend: the expert-parallel ``EPBuffer`` on Huawei Ascend NPUs, exact to the byte.

Upstream: DeepEP-Ascend, as read on 2026-11-30 (no git snapshot is published; the
files were read from the public code index). Citations are ``path:line`` in that text:

* ``deep_ep/include/deep_ep/common/compiled.hpp`` — constants (``CPL``)
* ``deep_ep/include/deep_ep/layout/ep/token.hpp`` — ``TokenLayout``, ``BufferLayout`` (``TOK``)
* ``csrc/buffers/ep.hpp`` — ``get_dispatch_buffer_size``, ``get_combine_buffer_size``,
  ``calculate_buffer_size`` and the host checks (``EPB``)
* ``csrc/kernels/ep/dispatch.hpp`` / ``combine.hpp`` — ``get_dispatch_token_layout``,
  ``get_combine_token_layout`` and kernel launch checks
* ``deep_ep/include/deep_ep/impls/ep/dispatch.hpp`` — the dispatch kernel (writer)
* ``deep_ep/include/deep_ep/impls/ep/dispatch_copy_epilogue.hpp`` — the receive epilogue (reader)

What upstream computes
----------------------
A token record is ``hidden | SF packs | top-k indices | top-k weights | source index``.
``TokenLayout.get_num_bytes()`` is ``hidden_bytes + align(sf_bytes, 32) +
align(metadata_bytes, 32)`` — the hidden bytes are *not* aligned — while the pointer
getters start the SF packs at ``align(hidden_bytes, 32)``. The dispatch kernel writes
each record as the hidden bytes followed directly by a metadata block laid out with
``hidden = 0``; the receive epilogue reads SF, top-k and source index through the
getters. When ``hidden_bytes % 32 != 0`` and SF packs are present the two disagree;
:func:`check_record` reports it (see ``Report.findings``).
"""

from __future__ import annotations

from functools import lru_cache


from .._record import Record
from ..errors import Checker, InvalidArgumentError, Problem, check_bool, check_int
from ..report import Buffer, Field, Finding, LimitCheck, Quantity, RecordLayout, Region, Report, Summary
from ..units import INT32_MAX, INT64_MAX, align, ceil_div, format_int
from ._cstruct import struct_offsets

__all__ = [
    "TokenLayout",
    "BufferLayout",
    "get_dispatch_token_layout",
    "get_combine_token_layout",
    "get_dispatch_buffer_size",
    "get_combine_buffer_size",
    "calculate_buffer_size",
    "hint_num_sf_packs",
    "actual_num_sf_packs",
    "check_record",
    "report",
]

UPSTREAM = "DeepEP-Ascend (deep_ep + csrc/buffers/ep.hpp, public text read 2026-11-30)"

CPL = "deep_ep/include/deep_ep/common/compiled.hpp"
TOK = "deep_ep/include/deep_ep/layout/ep/token.hpp"
EPB = "csrc/buffers/ep.hpp"
KDISPATCH = "csrc/kernels/ep/dispatch.hpp"
KCOMBINE = "csrc/kernels/ep/combine.hpp"
IDISPATCH = "deep_ep/include/deep_ep/impls/ep/dispatch.hpp"
IEPILOGUE = "deep_ep/include/deep_ep/impls/ep/dispatch_copy_epilogue.hpp"
RED = "deep_ep/include/deep_ep/common/reduction.hpp"
WSP = "deep_ep/include/deep_ep/layout/ep/workspace.hpp"
SIG = "deep_ep/include/deep_ep/layout/common/signals.hpp"

# --- constants (compiled.hpp) -------------------------------------------------------
SF_PACK_BYTES = 2  # sizeof(sf_pack_t), sf_pack_t = int16_t (CPL:33)
NUM_MAX_RANKS = 256  # kNumMaxRanks (CPL:35)
NUM_MAX_EXPERTS = 2048  # kNumMaxExperts (CPL:36)
NUM_UB_ALIGNMENT_BYTES = 32  # kNumUbAlignmentBytes (CPL:38)
NUM_VECTOR_REGISTER_BYTES = 256  # kNumVectorRegisterBytes (CPL:39)
NUM_ALLOCATION_ALIGNMENT_BYTES = 2 * 1024 * 1024  # kNumAllocationAlignmentBytes = 2097152 (CPL:48)

# --- element sizes of the record's fields (token.hpp) --------------------------------
TOPK_IDX_BYTES = 8  # sizeof(int64_t): Ascend routes with int64 expert indices (TOK:25)
TOPK_WEIGHT_BYTES = 4  # sizeof(float) (TOK:24)
SRC_IDX_BYTES = 4  # sizeof(int), the source token's global index (TOK:25)

# --- kernel facts -------------------------------------------------------------------
NUM_MAX_TOPK = 32  # "dispatch requires kNumTopk <= 32" (EPB:589); kNumTopk <= warpSize (IDISPATCH:112)
NUM_DEFAULT_TOPK = NUM_MAX_TOPK  # calculate_buffer_size: top-k 0 reserves the maximum (EPB:590)
HINT_SF_GRANULARITY = 32  # hint: ceil_div(hidden, 32) SF packs (EPB:594)
FP8_BLOCK_SIZE = 128  # a real FP8 dispatch: one fp32 scale per 128 elements ...
SF_PACKS_PER_SCALE = 2  # ... viewed as two int16 packs (sf.element_size() == 2 is asserted, EPB:151)
DISPATCH_NUM_THREADS = 512  # SIMT worker threads (IDISPATCH:661); kNumExperts <= kNumThreads (IDISPATCH:109)
NUM_MAX_EXPERTS_PER_RANK = 512  # kNumExpertsPerRank <= 512 (IEPILOGUE:246)
# Arrival counts and token counts share one int: 8 high bits count arrivals, 24 low bits
# carry the value (RED:12-17), so ranks <= 255 and tokens x ranks <= 2^24 - 1.
REDUCTION_MAX_HIGH_COUNT = (1 << 8) - 1  # kReductionMaxHighCount (RED:16)
REDUCTION_MAX_LOW_COUNT = (1 << 24) - 1  # kReductionMaxLowCount (RED:17)
NUM_MAX_VEC_CORES = 64  # kNumMaxVecCores (CPL:37)
NUM_SECTOR_INTS = 512 // 4  # kNumSectorInts = kNumSectorBytes / sizeof(int) (CPL:40-41)


_DTYPE_BYTES = {"float8_e4m3fn": 1, "bfloat16": 2, "uint8": 1}


def _metadata_num_bytes(num_topk: int, with_metadata: bool = True) -> int:
    """``num_topk * sizeof(float) + (align(num_topk * sizeof(int64_t), 32) + sizeof(int))``
    with metadata, else only the weights (``TOK:24-25``)."""
    weights = num_topk * TOPK_WEIGHT_BYTES
    if not with_metadata:
        return weights
    return weights + align(num_topk * TOPK_IDX_BYTES, NUM_UB_ALIGNMENT_BYTES) + SRC_IDX_BYTES


def _record_num_bytes(num_hidden_bytes: int, num_sf_bytes: int, num_topk: int, with_metadata: bool = True) -> int:
    """``TokenLayout::get_num_bytes()`` (``TOK:36-43``), the record stride: ``hidden_bytes +
    align(sf_bytes, 32) + align(metadata, 32)``, the SF term only when there are SF bytes. The
    hidden bytes are *not* aligned. Upstream adds ``int`` terms, so the stride must fit int32.

    >>> _record_num_bytes(7168, 224, 6), _record_num_bytes(14336, 0, 6, False)
    (7488, 14368)
    """
    t = NUM_UB_ALIGNMENT_BYTES
    metadata = (_metadata_num_bytes(num_topk, with_metadata) + t - 1) // t * t
    if num_sf_bytes > 0:
        return num_hidden_bytes + (num_sf_bytes + t - 1) // t * t + metadata
    return num_hidden_bytes + metadata


class TokenLayout(Record):
    """One token record, as ``deep_ep::layout::TokenLayout`` (``TOK:9-83``) computes it.

    Attributes:
        num_hidden_bytes: ``hidden * element_size`` (int32 upstream).
        num_sf_bytes: ``num_sf_packs * sizeof(sf_pack_t)``.
        num_topk: top-k.
        with_metadata: dispatch records carry top-k indices and the source index;
            combine records (and cached dispatch) do not.

    >>> t = TokenLayout(num_hidden_bytes=7168, num_sf_bytes=224, num_topk=6)
    >>> t.num_metadata_bytes, t.num_bytes(), t.num_bytes(skip_hidden=True)
    (92, 7488, 320)
    """

    num_hidden_bytes: int
    num_sf_bytes: int
    num_topk: int
    with_metadata: bool = True

    def __post_init__(self) -> None:
        hidden, sf, topk = self.num_hidden_bytes, self.num_sf_bytes, self.num_topk
        if not (type(hidden) is int and type(sf) is int and type(topk) is int and hidden >= 0 and sf >= 0
                and topk >= 0 and (self.with_metadata is True or self.with_metadata is False)):
            check_int("num_hidden_bytes", hidden)
            check_int("num_sf_bytes", sf)
            check_int("num_topk", topk)
            check_bool("with_metadata", self.with_metadata)

    @property
    def num_metadata_bytes(self) -> int:
        """:func:`_metadata_num_bytes` of this record (``TOK:24-25``)."""
        return _metadata_num_bytes(self.num_topk, self.with_metadata)

    def num_bytes(self, skip_hidden: bool = False) -> int:
        """``get_num_bytes`` (``TOK:36-43``): the record stride (:func:`_record_num_bytes`)."""
        return _record_num_bytes(0 if skip_hidden else self.num_hidden_bytes, self.num_sf_bytes, self.num_topk,
                                self.with_metadata)

    # Offsets exactly as the pointer getters compute them (TOK:53-82).
    @property
    def sf_offset(self) -> int:
        """``get_sf_ptr``: ``align(num_hidden_bytes, 32)`` (``TOK:59-62``)."""
        return align(self.num_hidden_bytes, NUM_UB_ALIGNMENT_BYTES)

    @property
    def topk_idx_offset(self) -> int:
        """``get_topk_idx_ptr``: after the aligned SF block, or right after hidden without SF (``TOK:64-69``)."""
        if self.num_sf_bytes > 0:
            return self.sf_offset + align(self.num_sf_bytes, NUM_UB_ALIGNMENT_BYTES)
        return self.num_hidden_bytes

    @property
    def topk_weights_offset(self) -> int:
        """``get_topk_weights_ptr``: top-k indices take ``align(8 * num_topk, 32)`` with metadata, else 0 (``TOK:71-77``)."""
        skip = align(TOPK_IDX_BYTES * self.num_topk, NUM_UB_ALIGNMENT_BYTES) if self.with_metadata else 0
        return self.topk_idx_offset + skip

    @property
    def src_token_global_idx_offset(self) -> int:
        """``get_src_token_global_idx_ptr``: right after the ``num_topk`` fp32 weights (``TOK:79-82``)."""
        return self.topk_weights_offset + TOPK_WEIGHT_BYTES * self.num_topk

    def _fields(self, base: int, sf: int, topk_idx: int, weights: int, src: int, hidden_dtype: str) -> list[Field]:
        elem = _DTYPE_BYTES.get(hidden_dtype, 1)
        fields = [
            Field(name="hidden", offset=0, num_bytes=self.num_hidden_bytes, dtype=hidden_dtype,
                  count=self.num_hidden_bytes // elem),
            Field(name="sf", offset=base + sf, num_bytes=self.num_sf_bytes, dtype="int16",
                  count=self.num_sf_bytes // SF_PACK_BYTES),
        ]
        if self.with_metadata:
            fields.append(Field(name="topk_idx", offset=base + topk_idx, num_bytes=TOPK_IDX_BYTES * self.num_topk,
                                dtype="int64", count=self.num_topk))
        fields.append(Field(name="topk_weights", offset=base + weights, num_bytes=TOPK_WEIGHT_BYTES * self.num_topk,
                            dtype="float32", count=self.num_topk))
        if self.with_metadata:
            fields.append(Field(name="src_token_global_idx", offset=base + src, num_bytes=SRC_IDX_BYTES,
                                dtype="int32", count=1))
        return fields

    def reader_record(self, name: str, hidden_dtype: str = "uint8") -> RecordLayout:
        """The record as the pointer getters (and so the receive epilogue) see it."""
        fields = self._fields(0, self.sf_offset, self.topk_idx_offset, self.topk_weights_offset,
                              self.src_token_global_idx_offset, hidden_dtype)
        return RecordLayout.from_fields(name, self.num_bytes(), fields, view="getters")

    def writer_record(self, name: str, hidden_dtype: str = "uint8") -> RecordLayout:
        """The record as the dispatch kernel writes it: ``num_hidden_bytes`` of data, then
        a metadata block laid out by ``TokenLayout(0, sf, topk)`` (``IDISPATCH:635-636``). Each
        remote write is one SGE pair, ``num_hidden_bytes`` from ``x`` then ``get_num_bytes(true)``
        metadata bytes, landing at ``slot * get_num_bytes()`` (``IDISPATCH:402-416``, sizes
        passed at ``:682``); the local copy puts the metadata at ``slot * stride +
        num_hidden_bytes`` (``IDISPATCH:440-442``)."""
        block = TokenLayout(num_hidden_bytes=0, num_sf_bytes=self.num_sf_bytes, num_topk=self.num_topk,
                            with_metadata=self.with_metadata)
        fields = self._fields(self.num_hidden_bytes, block.sf_offset, block.topk_idx_offset,
                              block.topk_weights_offset, block.src_token_global_idx_offset, hidden_dtype)
        return RecordLayout.from_fields(name, self.num_bytes(), fields, view="writer")


class BufferLayout(Record):
    """``num_ranks`` x ``num_max_tokens_per_rank`` records (``TOK:85-130``)."""

    token_layout: TokenLayout
    num_ranks: int
    num_max_tokens_per_rank: int

    def __post_init__(self) -> None:
        ranks, tokens = self.num_ranks, self.num_max_tokens_per_rank
        if not (type(ranks) is int and type(tokens) is int and 0 <= ranks <= INT32_MAX and 0 <= tokens <= INT32_MAX
                and type(self.token_layout) is TokenLayout):
            check_int("num_ranks", ranks, 0, INT32_MAX, "an int upstream")
            check_int("num_max_tokens_per_rank", tokens, 0, INT32_MAX, "an int upstream")
            raise InvalidArgumentError([Problem("token_layout", self.token_layout, "must be an ascend.TokenLayout")])

    @property
    def num_bytes_per_token(self) -> int:
        return self.token_layout.num_bytes()

    @property
    def num_bytes_per_rank(self) -> int:
        return self.num_max_tokens_per_rank * self.num_bytes_per_token

    @property
    def num_bytes(self) -> int:
        """``get_num_bytes`` (int64 upstream, ``TOK:102-112``): ranks x tokens x record bytes."""
        return _buffer_num_bytes(self.num_ranks, self.num_max_tokens_per_rank, self.num_bytes_per_token)

    def slot_offset(self, rank_idx: int, token_idx: int) -> int:
        """Byte offset of slot (``rank_idx``, ``token_idx``): ``get_rank_buffer(r).get_token_buffer(t)`` (``TOK:118-128``)."""
        if not (0 <= rank_idx < self.num_ranks and 0 <= token_idx < self.num_max_tokens_per_rank):
            raise IndexError(f"slot ({rank_idx}, {token_idx}) outside {self.num_ranks} x {self.num_max_tokens_per_rank}")
        return rank_idx * self.num_bytes_per_rank + token_idx * self.num_bytes_per_token


def _buffer_num_bytes(num_ranks: int, num_max_tokens_per_rank: int, num_bytes_per_token: int) -> int:
    """``BufferLayout::get_num_bytes``: ``num_ranks * (num_max_tokens_per_rank * bytes per token)`` (``TOK:102-112``)."""
    return num_ranks * (num_max_tokens_per_rank * num_bytes_per_token)


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
    c.add(argument, value, f"the {what} record of {num_bytes} bytes must fit int32 (TokenLayout::get_num_bytes "
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


def element_size(use_fp8_dispatch: bool) -> int:
    """``sizeof(c10::Float8_e4m3fn)`` = 1 or ``sizeof(c10::BFloat16)`` = 2 (``EPB:595``)."""
    if use_fp8_dispatch is True:
        return 1
    if use_fp8_dispatch is False:
        return 2
    return check_bool("use_fp8_dispatch", use_fp8_dispatch)


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


# --- consistency of writer and reader ------------------------------------------------
def check_record(token_layout: TokenLayout) -> list[Finding]:
    """Compare the dispatch kernel's writes with the epilogue's reads for one record.

    Two findings are possible:

    * ``ascend.reader-writer-mismatch`` (error): a field is read at a different offset
      than it is written. Happens when SF packs are present and ``num_hidden_bytes %
      32 != 0``: the getters start SF at ``align(hidden, 32)``, the writer at ``hidden``.
    * ``ascend.unaligned-fields`` (warning): fields that upstream copies with 32-byte
      aligned DMA (hidden, sf, topk_idx, topk_weights) or the record stride itself
      are not 32-byte aligned. Upstream assumes ``num_hidden_bytes % 32 == 0``
      (a device assertion left commented out in ``TokenLayout``'s constructor, ``TOK:27-29``).
    """
    if type(token_layout) is not TokenLayout:
        raise InvalidArgumentError([Problem("token_layout", token_layout, "must be an ascend.TokenLayout")])
    findings: list[Finding] = []
    reader = token_layout.reader_record("dispatch")
    writer = token_layout.writer_record("dispatch")
    stride = token_layout.num_bytes()
    shifted = []
    for w in writer.data_fields():
        r = reader.field(w.name)
        if r.offset != w.offset:
            shifted.append({"field": w.name, "writer_offset": w.offset, "reader_offset": r.offset,
                            "shift_bytes": r.offset - w.offset, "num_bytes": w.num_bytes})
    overrun = reader.overrun_bytes()
    if shifted or overrun:
        last = max(reader.data_fields(), key=lambda f: f.end)
        names = ", ".join(s["field"] for s in shifted)
        shift = shifted[0]["shift_bytes"] if shifted else 0
        message = (
            f"the dispatch kernel writes {names} right after the {token_layout.num_hidden_bytes} hidden bytes, "
            f"but the receive epilogue reads them through TokenLayout's getters {shift} bytes later "
            f"(SF starts at align(hidden_bytes, 32) = {token_layout.sf_offset})"
        )
        if overrun:
            message += (
                f"; its last field, {last.name}, ends at byte {last.end}, {overrun} bytes past the "
                f"{stride}-byte record (it reads the next slot's first bytes)"
            )
        findings.append(Finding(
            severity="error",
            code="ascend.reader-writer-mismatch",
            message=message,
            data={"fields": shifted, "record_num_bytes": stride, "reader_end": last.end,
                  "overrun_bytes": overrun, "last_field": last.name,
                  "writer_source": f"{IDISPATCH}:402-416,440-442", "reader_source": f"{IEPILOGUE}:257,479-520"},
        ))
    dma_fields = [f for f in reader.data_fields()
                  if f.name in ("hidden", "sf", "topk_idx", "topk_weights") and f.offset % NUM_UB_ALIGNMENT_BYTES]
    if dma_fields or stride % NUM_UB_ALIGNMENT_BYTES:
        findings.append(Finding(
            severity="warning",
            code="ascend.unaligned-fields",
            message=(
                f"upstream assumes num_hidden_bytes % 32 == 0 (here {token_layout.num_hidden_bytes}, remainder "
                f"{token_layout.num_hidden_bytes % NUM_UB_ALIGNMENT_BYTES}); not 32-byte aligned: "
                + ", ".join([f"{f.name} at offset {f.offset}" for f in dma_fields]
                            + [f"the {stride}-byte record stride, so consecutive slots start unaligned"]
                            * bool(stride % NUM_UB_ALIGNMENT_BYTES))
            ),
            data={"fields": [{"field": f.name, "offset": f.offset} for f in dma_fields],
                  "record_num_bytes": stride, "num_hidden_bytes": token_layout.num_hidden_bytes},
        ))
    return findings


# --- workspace ----------------------------------------------------------------------------
@lru_cache(maxsize=1)
def workspace_num_bytes() -> int:
    """``sizeof(EPSignals)``, the workspace ``EPBuffer`` allocates beside the buffer (``EPB:44-46``).

    ``EPSignals`` is ``alignas(kNumAllocationAlignmentBytes)`` (``WSP:8-18``) and holds
    ``CommonSignals`` (``SIG:9-17``: 256 peer pointers and two 512-byte-aligned barrier
    words) and histograms sized by the compile-time maxima, so it does not depend on
    the plan. Laid out here member by member, as the compiler does.
    """
    _, common = struct_offsets(
        [("peer_ptrs", 8 * NUM_MAX_RANKS, 8), ("grid_sync_count", 4, 512),
         ("barrier_counter", 8, 512), ("barrier_signals", 4 * 2, 4)],
    )
    _, signals = struct_offsets(
        [
            ("common_signals", common, 512),
            ("local_expert_histogram", 4 * NUM_MAX_EXPERTS * NUM_SECTOR_INTS, 4),
            ("remote_expert_histogram", 4 * NUM_MAX_EXPERTS, 4),
            ("local_rank_histogram", 4 * NUM_MAX_VEC_CORES * align(NUM_MAX_RANKS, NUM_SECTOR_INTS), 4),
            ("remote_rank_histogram", 4 * NUM_MAX_RANKS, 4),
            ("host_rank_expert_count", 4 * (NUM_MAX_RANKS + NUM_MAX_EXPERTS), 4),
            ("epilogue_expert_counter", 4 * NUM_MAX_VEC_CORES * NUM_MAX_EXPERTS, 4),
        ],
        NUM_ALLOCATION_ALIGNMENT_BYTES,
    )
    return signals


# --- limits ---------------------------------------------------------------------------
# What no size function can evaluate makes a plan invalid (InvalidArgumentError): an ``int``
# product or stride beyond int32, sizes beyond int64. Everything upstream refuses later (the
# dispatch/combine host asserts, kernel limits) is a limit row below, broken or not: the
# report keeps its sizes (README, "Plans upstream would refuse: one rule").
def _validate(plan) -> None:
    """Arguments no upstream size function can evaluate (beyond the ``int`` it computes in)."""
    error = _validation_error(plan.num_topk, plan.hidden, plan.use_fp8_dispatch, plan.num_sf_packs)
    if error is not None:
        raise error


@lru_cache(maxsize=4096)
def _validation_error(num_topk: int, hidden: int, use_fp8_dispatch: bool, num_sf_packs: int | None):
    c = Checker()
    hidden_bytes = hidden * element_size(use_fp8_dispatch)
    if hidden_bytes > INT32_MAX:
        c.add("hidden", hidden, f"hidden x element size = {hidden_bytes} must fit int32 (num_hidden_bytes is int)")
    else:
        topk = effective_topk(num_topk)
        real_packs = _real_num_sf_packs(hidden, use_fp8_dispatch, num_sf_packs)
        records = (("dispatch", hidden_bytes, hint_num_sf_packs(hidden, use_fp8_dispatch), True, "hidden", hidden),
                   ("dispatch", hidden_bytes, real_packs, True, "num_sf_packs" if num_sf_packs else "hidden",
                    num_sf_packs if num_sf_packs else hidden),
                   ("combine", hidden * 2, 0, False, "hidden", hidden))
        for what, num_hidden_bytes, packs, with_metadata, argument, value in records:
            num_bytes = _record_num_bytes(num_hidden_bytes, packs * SF_PACK_BYTES, topk, with_metadata)
            if not _check_record_int(c, what, num_bytes, topk, argument, value):
                break
    try:
        c.raise_if_any()
    except InvalidArgumentError as error:
        return error
    return None


def _real_num_sf_packs(hidden: int, use_fp8_dispatch: bool, num_sf_packs: int | None) -> int:
    """``Plan.num_sf_packs`` for FP8 when given, else :func:`actual_num_sf_packs`."""
    if num_sf_packs is not None and use_fp8_dispatch:
        return num_sf_packs
    return actual_num_sf_packs(hidden, use_fp8_dispatch)


_SRC_RANKS = f"{CPL}:35 kNumMaxRanks (signal arrays sized by it)"
_SRC_ARRIVALS = f"{IDISPATCH}:586-587 \"Reduction arrival count exceeds 8 bits\"; {RED}:16"
_SRC_TOKENS_RANKS = f"{IDISPATCH}:588-589 \"Per-expert token count exceeds the 24-bit reduction value\"; {RED}:17"
_SRC_TOPK = f"{IDISPATCH}:112; {KCOMBINE}:85"
_SRC_EXPERTS = f"{CPL}:36 kNumMaxExperts (histograms sized by it)"
_SRC_DIVISIBLE = f"{EPB}:139 EP_HOST_ASSERT(num_experts % context->num_ranks == 0) (dispatch; combine asserts it too)"
_SRC_SIMT = f"{IDISPATCH}:109 EP_STATIC_ASSERT(kNumExperts <= kNumThreads), kNumThreads = 512 (:661)"
_SRC_EPR = f"{IEPILOGUE}:246 EP_STATIC_ASSERT(kNumExpertsPerRank <= 512)"
_SRC_HIDDEN = f"{KCOMBINE}:86 EP_HOST_ASSERT(hidden % (kNumVectorRegisterBytes / sizeof(uint16_t)) == 0)"
_SRC_EXPANDED = f"{IDISPATCH}:593-596 \"Expanded token count including expert padding overflows int\""
_SRC_INT64 = f"{EPB}:28 int64_t num_buffer_bytes"
_SRC_TOPK_IDX = f"{EPB}:167 EP_HOST_ASSERT(topk_idx.scalar_type() == torch::kInt64) (dispatch; combine asserts it too)"
TOPK_IDX_BITS = 8 * TOPK_IDX_BYTES  # int64 routing indices; a DeepEP build with 32-bit topk_idx_t does not fit


def _limit_rows(num_ranks: int, num_tokens: int, topk: int, experts: int, hidden: int, hint_bytes: int,
                topk_idx_bits: int | None = None) -> tuple:
    """Every limit as ``(name, value, relation, bound, ok, source, enforced)`` — the one
    definition both :func:`report` (as ``LimitCheck`` records) and :func:`summarize` read.
    ``topk_idx_bits``: ``Plan.num_topk_idx_bits`` (``None``: int64, what Ascend expects)."""
    idx_bits = TOPK_IDX_BITS if topk_idx_bits is None else topk_idx_bits
    experts_per_rank = experts // num_ranks
    tokens_x_ranks = num_tokens * num_ranks
    expanded = tokens_x_ranks * min(topk, experts_per_rank)
    return (
        ("num_ranks", num_ranks, "<=", NUM_MAX_RANKS, num_ranks <= NUM_MAX_RANKS, _SRC_RANKS, "kernel"),
        ("num_ranks (8-bit reduction arrival count)", num_ranks, "<=", REDUCTION_MAX_HIGH_COUNT,
         num_ranks <= REDUCTION_MAX_HIGH_COUNT, _SRC_ARRIVALS, "kernel"),
        ("tokens x ranks (24-bit reduction value)", tokens_x_ranks, "<=", REDUCTION_MAX_LOW_COUNT,
         tokens_x_ranks <= REDUCTION_MAX_LOW_COUNT, _SRC_TOKENS_RANKS, "kernel"),
        ("num_topk", topk, "<=", NUM_MAX_TOPK, topk <= NUM_MAX_TOPK, _SRC_TOPK, "kernel"),
        ("num_experts", experts, "<=", NUM_MAX_EXPERTS, experts <= NUM_MAX_EXPERTS, _SRC_EXPERTS, "assumed"),
        ("num_experts % num_ranks", experts % num_ranks, "==", 0, experts % num_ranks == 0, _SRC_DIVISIBLE, "host"),
        ("num_experts (dispatch SIMT worker)", experts, "<=", DISPATCH_NUM_THREADS,
         experts <= DISPATCH_NUM_THREADS, _SRC_SIMT, "kernel"),
        ("num_experts_per_rank (receive epilogue)", experts_per_rank, "<=", NUM_MAX_EXPERTS_PER_RANK,
         experts_per_rank <= NUM_MAX_EXPERTS_PER_RANK, _SRC_EPR, "kernel"),
        ("hidden % 128 (combine reduce epilogue)", hidden % 128, "==", 0, hidden % 128 == 0, _SRC_HIDDEN, "host"),
        ("expanded tokens (ranks x tokens x min(topk, experts per rank))", expanded, "<=", INT32_MAX,
         expanded <= INT32_MAX, _SRC_EXPANDED, "kernel"),
        ("buffer bytes", hint_bytes, "<=", INT64_MAX, hint_bytes <= INT64_MAX, _SRC_INT64, "host"),
        ("topk_idx bits", idx_bits, "==", TOPK_IDX_BITS, idx_bits == TOPK_IDX_BITS, _SRC_TOPK_IDX, "host"),
    )


def _check_int64(num_max_tokens_per_rank: int, hint_bytes: int) -> None:
    """Upstream computes and stores the sizes as ``int64_t`` (``TOK:102-112``, ``EPB:28``): a
    hint beyond it is not a size upstream can hold, so the plan is invalid, not just large."""
    if hint_bytes > INT64_MAX:
        c = Checker()
        c.add("num_max_tokens_per_rank", num_max_tokens_per_rank,
              f"the buffer would need {hint_bytes:,} B, beyond int64 ({INT64_MAX:,}; int64_t num_buffer_bytes, "
              f"{EPB}:28); lower --tokens, --ranks or --hidden")
        c.raise_if_any()


def _limits(plan, topk: int, hint_bytes: int) -> list[LimitCheck]:
    rows = _limit_rows(plan.num_ranks, plan.num_max_tokens_per_rank, topk, plan.num_total_experts, plan.hidden,
                       hint_bytes, plan.num_topk_idx_bits)
    return [LimitCheck(name=n, value=v, relation=r, bound=b, ok=ok, source=src, enforced=e)
            for n, v, r, b, ok, src, e in rows]


# Why a broken limit refuses the plan, by where upstream enforces it.
_CONSEQUENCE = {
    "kernel": "the dispatch/combine call will be rejected",
    "host": "the dispatch/combine call will be rejected",
    "assumed": "upstream does not check it, but its fixed-size signal arrays would overflow",
}


def _limit_findings(limits: list[LimitCheck]) -> list[Finding]:
    """One ``ascend.kernel-limit`` error finding per broken limit (kernel, host or assumed: see ``enforced``)."""
    return [
        Finding(severity="error", code="ascend.kernel-limit",
                message=f"{lim.name} = {format_int(lim.value)} breaks {lim.relation} {format_int(lim.bound)} "
                        f"({lim.source}); {_CONSEQUENCE[lim.enforced]}",
                data={"limit": lim.name, "value": lim.value, "bound": lim.bound, "enforced": lim.enforced})
        for lim in limits if not lim.ok
    ]


def report(plan) -> Report:
    """Size DeepEP-Ascend's ``EPBuffer`` for ``plan``: the hint, the real need, every
    record's byte map, writer/reader consistency and kernel limits.

    A plan the size functions evaluate gets its sizes even when a later step refuses it:
    ranks above 256, top-k above 32, experts above 2048 or not divisible by the ranks, kernel
    limits — each a limit with ``ok=False`` and an ``ascend.kernel-limit`` error finding.

    Raises:
        InvalidArgumentError: not a :class:`~epbuf.plan.Plan`; hidden bytes or a record stride
            beyond the int32 upstream computes them in; sizes beyond int64.
    """
    from ..plan import Plan

    if not isinstance(plan, Plan):
        raise InvalidArgumentError([Problem("plan", plan, "must be an epbuf.Plan")])
    _validate(plan)
    fp8 = plan.use_fp8_dispatch
    topk = effective_topk(plan.num_topk)
    elem = element_size(fp8)
    hint_packs = hint_num_sf_packs(plan.hidden, fp8)
    real_packs = _real_num_sf_packs(plan.hidden, fp8, plan.num_sf_packs)
    ranks, tokens, hidden = plan.num_ranks, plan.num_max_tokens_per_rank, plan.hidden

    hint_dispatch = dispatch_buffer_layout(tokens, hidden, hint_packs, topk, elem, ranks)
    real_dispatch = dispatch_buffer_layout(tokens, hidden, real_packs, topk, elem, ranks)
    combine = combine_buffer_layout(ranks, tokens, hidden, topk)

    def formula(layout: BufferLayout) -> str:
        return (f"{layout.num_ranks} x {format_int(layout.num_max_tokens_per_rank)} tokens x "
                f"{format_int(layout.num_bytes_per_token)} B/record")

    regions = [
        Region(name="dispatch receive buffer", num_bytes=hint_dispatch.num_bytes, num_bytes_used=real_dispatch.num_bytes,
               formula=formula(hint_dispatch)
               + (f" (a real run: {format_int(real_dispatch.num_bytes_per_token)} B/record)" if real_packs != hint_packs else ""),
               source=f"{EPB}:560-569", shape=(ranks, tokens),
               record="dispatch (hint)" if real_packs != hint_packs else "dispatch"),
        Region(name="combine reduce buffer", num_bytes=combine.num_bytes, num_bytes_used=combine.num_bytes,
               formula=f"min(topk {topk}, ranks {ranks}) = " + formula(combine), source=f"{EPB}:571-579",
               shape=(combine.num_ranks, tokens), record="combine"),
    ]
    buffer = Buffer.combine("EP buffer", regions, "max", NUM_ALLOCATION_ALIGNMENT_BYTES, source=f"{EPB}:581-605")
    _check_int64(tokens, buffer.num_bytes)
    workspace = workspace_num_bytes()
    workspace_buffer = Buffer.combine(
        "workspace",
        [Region(name="EPSignals", num_bytes=workspace, num_bytes_used=workspace,
                formula="sizeof(EPSignals): signals and histograms at kNumMaxRanks/kNumMaxExperts maxima",
                source=f"{WSP}:8-18; {SIG}:9-17")],
        "sum", NUM_ALLOCATION_ALIGNMENT_BYTES, source=f"{EPB}:44-46",
    )

    dtype = "float8_e4m3fn" if fp8 else "bfloat16"
    records = [
        real_dispatch.token_layout.reader_record("dispatch", dtype),
        combine.token_layout.reader_record("combine", "bfloat16"),
    ]
    if hint_packs != real_packs:
        records.insert(1, hint_dispatch.token_layout.reader_record("dispatch (hint)", dtype))
    findings = check_record(real_dispatch.token_layout)
    if any(f.code == "ascend.reader-writer-mismatch" for f in findings):
        records.insert(1, real_dispatch.token_layout.writer_record("dispatch (as written)", dtype))
    if hint_packs != real_packs:
        findings.append(Finding(
            severity="info", code="ascend.hint-sf-approximation",
            message=(f"the hint reserves ceil(hidden/32) = {hint_packs} SF packs per token; a real FP8 dispatch sends "
                     f"{real_packs}, so the dispatch region is {format_int(hint_dispatch.num_bytes - real_dispatch.num_bytes)} "
                     f"B larger than used"),
            data={"hint_num_sf_packs": hint_packs, "real_num_sf_packs": real_packs,
                  "num_bytes_over_reserved": hint_dispatch.num_bytes - real_dispatch.num_bytes},
        ))
    if buffer.num_bytes_needed > buffer.num_bytes:
        findings.append(Finding(
            severity="error", code="ascend.hint-too-small",
            message=(f"with {real_packs} SF packs per token a real dispatch needs {format_int(buffer.num_bytes_needed)} B "
                     f"but the hint allocates {format_int(buffer.num_bytes)} B; dispatch fails "
                     f"EP_HOST_ASSERT(get_dispatch_buffer_size(...) <= num_buffer_bytes) ({EPB})"),
            data={"num_bytes_needed": buffer.num_bytes_needed, "num_bytes_hint": buffer.num_bytes},
        ))
    limits = _limits(plan, topk, buffer.num_bytes)
    findings.extend(_limit_findings(limits))

    quantities = (
        Quantity(name="num_topk", value=topk, source=f"{EPB}:590"),
        Quantity(name="element_size", value=elem, unit="B", source=f"{EPB}:595"),
        Quantity(name="hidden_bytes", value=hidden * elem, unit="B", source=f"{EPB}:560-569"),
        Quantity(name="num_scaleup_ranks", value=ranks, source=f"{EPB}:44-46 comm::Context(..., num_ranks, ...): one flat domain"),
        Quantity(name="num_scaleout_ranks", value=1, source=f"{EPB}:44-46 comm::Context(..., num_ranks, ...): one flat domain"),
        Quantity(name="hint_num_sf_packs", value=hint_packs, source=f"{EPB}:594"),
        Quantity(name="real_num_sf_packs", value=real_packs),
        Quantity(name="dispatch_record_num_bytes", value=real_dispatch.num_bytes_per_token, unit="B", source=f"{TOK}:36-43"),
        Quantity(name="hint_dispatch_record_num_bytes", value=hint_dispatch.num_bytes_per_token, unit="B"),
        Quantity(name="combine_record_num_bytes", value=combine.num_bytes_per_token, unit="B"),
        Quantity(name="combine_num_buffers", value=combine.num_ranks, source=f"{EPB}:577"),
        Quantity(name="hint_dispatch_num_bytes", value=hint_dispatch.num_bytes, unit="B"),
        Quantity(name="real_dispatch_num_bytes", value=real_dispatch.num_bytes, unit="B"),
        Quantity(name="combine_num_bytes", value=combine.num_bytes, unit="B"),
        Quantity(name="hint_num_bytes", value=buffer.num_bytes, unit="B", source=f"{EPB}:604"),
        Quantity(name="needed_num_bytes", value=buffer.num_bytes_needed, unit="B"),
        Quantity(name="workspace_num_bytes", value=workspace, unit="B", source=f"{WSP}:8-18"),
    )
    inputs = {
        "num_ranks": ranks, "num_max_tokens_per_rank": tokens, "hidden": hidden, "num_topk": plan.num_topk,
        "num_experts": plan.num_experts, "num_redundant_experts": plan.num_redundant_experts,
        "use_fp8_dispatch": fp8, "num_sf_packs": real_packs,
    }
    return Report(
        backend="ascend",
        title="DeepEP-Ascend EPBuffer",
        upstream=UPSTREAM,
        inputs=inputs,
        buffers=(buffer, workspace_buffer),
        records=tuple(records),
        quantities=quantities,
        findings=tuple(findings),
        limits=tuple(limits),
    )


@lru_cache(maxsize=65536)
def _token_independent(num_topk: int, hidden: int, use_fp8_dispatch: bool, num_sf_packs: int | None):
    """Everything :func:`summarize` needs that does not depend on the token count or the ranks:
    the validation error (or ``None``), effective top-k and the three record strides."""
    error = _validation_error(num_topk, hidden, use_fp8_dispatch, num_sf_packs)
    if error is not None:
        return error
    topk = effective_topk(num_topk)
    hidden_bytes = hidden * element_size(use_fp8_dispatch)
    real_packs = _real_num_sf_packs(hidden, use_fp8_dispatch, num_sf_packs)
    return (
        topk,
        _record_num_bytes(hidden_bytes, hint_num_sf_packs(hidden, use_fp8_dispatch) * SF_PACK_BYTES, topk, True),
        _record_num_bytes(hidden_bytes, real_packs * SF_PACK_BYTES, topk, True),
        _record_num_bytes(hidden * 2, 0, topk, False),
    )


def summarize(plan) -> Summary:
    """:func:`report`'s totals, binding region and broken limits without byte maps or findings,
    through the same record formula (cached per token-independent shape) — what sweeps call."""
    try:
        ranks, tokens, experts = plan.num_ranks, plan.num_max_tokens_per_rank, plan.num_total_experts
        shape = _token_independent(plan.num_topk, plan.hidden, plan.use_fp8_dispatch, plan.num_sf_packs)
    except (AttributeError, TypeError):
        raise InvalidArgumentError([Problem("plan", plan, "must be an epbuf.Plan")]) from None
    if type(shape) is not tuple:
        raise shape
    topk, hint_record, real_record, combine_record = shape
    dispatch = _buffer_num_bytes(ranks, tokens, hint_record)
    combine = _buffer_num_bytes(min(topk, ranks), tokens, combine_record)
    hint = align(max(dispatch, combine), NUM_ALLOCATION_ALIGNMENT_BYTES)
    _check_int64(tokens, hint)
    needed = align(max(_buffer_num_bytes(ranks, tokens, real_record), combine), NUM_ALLOCATION_ALIGNMENT_BYTES)
    workspace = workspace_num_bytes()
    broken = tuple(row[0] for row in _limit_rows(ranks, tokens, topk, experts, plan.hidden, hint,
                                                 plan.num_topk_idx_bits) if not row[4])
    return Summary(num_bytes=hint + workspace, num_bytes_needed=needed + workspace,
                   binding="dispatch receive buffer" if dispatch >= combine else "combine reduce buffer",
                   broken=broken)
