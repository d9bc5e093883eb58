"""DeepEP V2's token records and buffers of records: ``TokenLayout`` and ``BufferLayout``.

A record is ``hidden | SF packs | top-k idx (int32) | top-k weights (fp32) | source global
index | linked-list indices``, each part rounded up to 32 bytes (``kNumTMAAlignBytes``); in
``"refactor"`` the sum is rounded up again to 64 bytes (``kNumRDMAAlignmentBytes``). Combine
records carry the top-k slots but no source index. A ``BufferLayout`` packs ``ranks x tokens``
records without padding. :func:`_record_num_bytes` is the one formula of the stride; the size
functions (:mod:`.sizes`) and :class:`TokenLayout` both read it.
"""

from __future__ import annotations

from ..._record import Record
from .._v2_and_ascend import RankTokenBuffer
from ...errors import InvalidArgumentError, Problem, check_bool, check_int
from ...report import Field, RecordLayout
from ...units import align
from .constants import (DTYPE_BYTES, LINKED_LIST_IDX_BYTES, MBARRIER_BYTES, NUM_RDMA_ALIGNMENT_BYTES,
                        NUM_TMA_ALIGNMENT_BYTES, SF_PACK_BYTES, SRC_IDX_BYTES, TOPK_IDX_BYTES, TOPK_WEIGHT_BYTES)

__all__ = ["TokenLayout", "BufferLayout", "check_record"]


def _metadata_num_bytes(num_topk: int, with_metadata: bool) -> int:
    """``num_topk * (sizeof(int) + sizeof(float)) + (with_metadata ? (1 + num_topk) * sizeof(int) : 0)``
    (``layout.cuh:194-195 @dd758ca``, ``token.cuh:25-26 @1a1ffba``): top-k indices and weights, plus
    the source index and ``num_topk`` linked-list indices in dispatch records."""
    topk_slots = num_topk * (TOPK_IDX_BYTES + TOPK_WEIGHT_BYTES)
    return topk_slots + ((SRC_IDX_BYTES + num_topk * LINKED_LIST_IDX_BYTES) if with_metadata else 0)


def _record_num_bytes(num_hidden_bytes: int, num_sf_bytes: int, num_topk: int, with_metadata: bool,
                     num_rdma_alignment_bytes: int) -> int:
    """``TokenLayout::get_num_bytes<false>()``: ``align(h, 32) + align(s, 32) + align(metadata, 32)``,
    rounded to ``num_rdma_alignment_bytes`` (64 in ``"refactor"``, ``token.cuh:32-41 @1a1ffba``;
    1 = none in generation A, ``layout.cuh:201-208 @dd758ca``). Upstream computes it in ``int``.

    >>> _record_num_bytes(7168, 896, 8, True, 64), _record_num_bytes(14336, 0, 12, False, 1)
    (8192, 14432)
    """
    t, r = NUM_TMA_ALIGNMENT_BYTES, num_rdma_alignment_bytes  # sum of align(x, t) = t x sum of ceil_div(x, t)
    parts = ((num_hidden_bytes + t - 1) // t + (num_sf_bytes + t - 1) // t
             + (_metadata_num_bytes(num_topk, with_metadata) + t - 1) // t) * t
    return (parts + r - 1) // r * r  # align(parts, r)


class TokenLayout(Record):
    """One token record, as ``TokenLayout`` computes it (``layout.cuh:179-249 @dd758ca``,
    ``token.cuh:10-82 @1a1ffba``).

    Attributes:
        num_hidden_bytes: ``hidden * element size`` (upstream asserts ``% 32 == 0``).
        num_sf_bytes: ``num_sf_packs * sizeof(sf_pack_t)`` (4-byte packs).
        num_topk: top-k slots.
        with_metadata: dispatch records carry the source global index and ``num_topk``
            linked-list indices; combine records do not (they still reserve the top-k
            index and weight slots).
        num_rdma_alignment_bytes: rounding of the whole record: 64 in ``"refactor"``,
            1 (none) in ``ElasticBuffer`` generations.

    >>> t = TokenLayout(num_hidden_bytes=7168, num_sf_bytes=896, num_topk=8, with_metadata=True)
    >>> t.num_metadata_bytes, t.num_bytes(), t.num_bytes(with_mbarrier=True)
    (100, 8192, 8224)
    """

    num_hidden_bytes: int
    num_sf_bytes: int
    num_topk: int
    with_metadata: bool
    num_rdma_alignment_bytes: int = NUM_RDMA_ALIGNMENT_BYTES

    def __post_init__(self) -> None:
        hidden, sf, topk, rdma = self.num_hidden_bytes, self.num_sf_bytes, self.num_topk, self.num_rdma_alignment_bytes
        if not (type(hidden) is int and type(sf) is int and type(topk) is int and type(rdma) is int
                and hidden >= 0 and sf >= 0 and topk >= 0 and rdma >= 1
                and (self.with_metadata is True or self.with_metadata is False)):
            check_int("num_hidden_bytes", hidden)
            check_int("num_sf_bytes", sf)
            check_int("num_topk", topk)
            check_bool("with_metadata", self.with_metadata)
            check_int("num_rdma_alignment_bytes", rdma, 1)

    @property
    def num_metadata_bytes(self) -> int:
        """``num_topk * (sizeof(int) + sizeof(float)) + (with_metadata ? (1 + num_topk) * sizeof(int) : 0)``
        (``layout.cuh:194-195 @dd758ca``, ``token.cuh:25-26``)."""
        return _metadata_num_bytes(self.num_topk, self.with_metadata)

    @property
    def num_data_bytes(self) -> int:
        """``get_num_bytes<false>()``: :func:`_record_num_bytes` of this record."""
        return _record_num_bytes(self.num_hidden_bytes, self.num_sf_bytes, self.num_topk, self.with_metadata,
                                self.num_rdma_alignment_bytes)

    @property
    def num_rdma_padding_bytes(self) -> int:
        """Bytes the 64-byte RDMA rounding adds (0 or 32; always 0 without it)."""
        return self.num_data_bytes - self.mbarrier_offset_unrounded

    def num_bytes(self, with_mbarrier: bool = False) -> int:
        """``get_num_bytes<kWithMBarrier>()``: the record stride. Buffers use ``false``; the
        shared-memory staging slot adds ``align(sizeof(mbarrier), 32)`` = 32 bytes."""
        return self.num_data_bytes + align(MBARRIER_BYTES if with_mbarrier else 0, NUM_TMA_ALIGNMENT_BYTES)

    # Offsets exactly as the pointer getters compute them (layout.cuh:218-248 @dd758ca, token.cuh:55-81).
    @property
    def sf_offset(self) -> int:
        """``get_sf_ptr``: ``align(num_hidden_bytes, 32)``. With no SF bytes it equals the metadata offset."""
        return align(self.num_hidden_bytes, NUM_TMA_ALIGNMENT_BYTES)

    @property
    def metadata_offset(self) -> int:
        """``get_metadata_ptr`` = ``get_topk_idx_ptr``: after ``align(num_sf_bytes, 32)``."""
        return self.sf_offset + align(self.num_sf_bytes, NUM_TMA_ALIGNMENT_BYTES)

    @property
    def topk_idx_offset(self) -> int:
        return self.metadata_offset

    @property
    def topk_weights_offset(self) -> int:
        """``get_topk_weights_ptr``: ``metadata + num_topk * sizeof(int)``."""
        return self.metadata_offset + TOPK_IDX_BYTES * self.num_topk

    @property
    def src_token_global_idx_offset(self) -> int:
        """``get_src_token_global_idx_ptr``: ``weights + num_topk * sizeof(float)``."""
        return self.topk_weights_offset + TOPK_WEIGHT_BYTES * self.num_topk

    @property
    def linked_list_idx_offset(self) -> int:
        """``get_linked_list_idx_ptr``: ``src_token_global_idx_ptr + 1``."""
        return self.src_token_global_idx_offset + SRC_IDX_BYTES

    @property
    def mbarrier_offset_unrounded(self) -> int:
        """Generation A's ``get_mbarrier_ptr``: ``metadata + align(num_metadata_bytes, 32)`` (``layout.cuh:246-248``)."""
        return self.metadata_offset + align(self.num_metadata_bytes, NUM_TMA_ALIGNMENT_BYTES)

    @property
    def mbarrier_offset(self) -> int:
        """``get_mbarrier_ptr``: ``base + get_num_bytes<false>()`` in ``"refactor"`` (``token.cuh:79-81``),
        which is generation A's formula when records are not RDMA-rounded."""
        return self.num_bytes(with_mbarrier=False)

    def fields(self, hidden_dtype: str = "uint8", with_mbarrier: bool = False) -> list[Field]:
        """Every field at the offset its getter returns and with the size the kernels use."""
        elem = DTYPE_BYTES.get(hidden_dtype, 1)
        fields = [
            Field(name="hidden", offset=0, num_bytes=self.num_hidden_bytes, dtype=hidden_dtype,
                  count=self.num_hidden_bytes // elem),
            Field(name="sf", offset=self.sf_offset, num_bytes=self.num_sf_bytes, dtype="sf_pack_t",
                  count=self.num_sf_bytes // SF_PACK_BYTES),
            # Combine records reserve the index slots too (num_metadata_bytes counts them) but only
            # the weights are written there (combine.cuh, "Write topk weights").
            Field(name="topk_idx", offset=self.topk_idx_offset, num_bytes=TOPK_IDX_BYTES * self.num_topk,
                  dtype="int32", count=self.num_topk),
            Field(name="topk_weights", offset=self.topk_weights_offset, num_bytes=TOPK_WEIGHT_BYTES * self.num_topk,
                  dtype="float32", count=self.num_topk),
        ]
        if self.with_metadata:
            fields.append(Field(name="src_token_global_idx", offset=self.src_token_global_idx_offset,
                                num_bytes=SRC_IDX_BYTES, dtype="int32", count=1))
            fields.append(Field(name="linked_list_idx", offset=self.linked_list_idx_offset,
                                num_bytes=LINKED_LIST_IDX_BYTES * self.num_topk, dtype="int32", count=self.num_topk))
        if with_mbarrier:
            fields.append(Field(name="mbarrier", offset=self.mbarrier_offset, num_bytes=MBARRIER_BYTES,
                                dtype="mbarrier", count=1))
        return fields

    def record(self, name: str, hidden_dtype: str = "uint8", with_mbarrier: bool = False) -> RecordLayout:
        """The byte map: getters' offsets, ``get_num_bytes<with_mbarrier>()`` stride, gaps as padding.

        The kernels build the record in shared memory through these getters and move it
        whole (``tma_store_1d(..., get_num_bytes<false>())``), so writer and reader views
        are one and the same; :func:`check_record` verifies the getters against the stride.
        """
        view = "smem staging slot" if with_mbarrier else "getters"
        return RecordLayout.from_fields(name, self.num_bytes(with_mbarrier), self.fields(hidden_dtype, with_mbarrier),
                                        view=view)


def check_record(token_layout: TokenLayout, with_mbarrier: bool = False) -> list[str]:
    """Problems with one record's getters versus its stride; ``[]`` when consistent.

    Checked: no two fields overlap, every field ends within ``get_num_bytes``, the
    hidden, SF and metadata parts start 32-byte aligned (TMA), the stride is a multiple
    of 32 (64 with RDMA rounding), and the mbarrier slot lies after the data. Upstream
    is consistent for every input it accepts; the tests assert that property.
    """
    if type(token_layout) is not TokenLayout:
        raise InvalidArgumentError([Problem("token_layout", token_layout, "must be a deepep_v2.TokenLayout")])
    check_bool("with_mbarrier", with_mbarrier)
    record = token_layout.record("record", with_mbarrier=with_mbarrier)
    problems = [f"{a} overlaps {b}" for a, b in record.overlaps()]
    if record.overrun_bytes():
        problems.append(f"fields end {record.overrun_bytes()} bytes past the {record.num_bytes}-byte stride")
    for f in record.data_fields():
        if f.name in ("hidden", "sf", "topk_idx") and f.offset % NUM_TMA_ALIGNMENT_BYTES:
            problems.append(f"{f.name} at offset {f.offset} is not 32-byte aligned")
    stride_alignment = max(NUM_TMA_ALIGNMENT_BYTES, token_layout.num_rdma_alignment_bytes)
    if token_layout.num_bytes(False) % stride_alignment:
        problems.append(f"stride {token_layout.num_bytes(False)} is not a multiple of {stride_alignment}")
    if with_mbarrier and token_layout.mbarrier_offset < max(f.end for f in record.data_fields() if f.name != "mbarrier"):
        problems.append("the mbarrier slot overlaps the data")
    return problems


class BufferLayout(RankTokenBuffer):
    """``num_ranks`` x ``num_max_tokens_per_rank`` records, packed (``BufferLayout<false>``,
    ``layout.cuh:251-311 @dd758ca``, ``token.cuh:84-144 @1a1ffba``); slot offsets as
    ``get_rank_buffer(rank_idx).get_token_buffer(token_idx)``."""

    token_layout: TokenLayout
    _token_layout_type = TokenLayout
    _token_layout_name = "a deepep_v2.TokenLayout"

    @property
    def num_bytes_per_token(self) -> int:
        return self.token_layout.num_bytes(False)

    @property
    def num_bytes(self) -> int:
        """``get_num_bytes`` (int64 upstream): ranks x tokens x record bytes."""
        return self.num_bytes_per_rank * self.num_ranks
