"""DeepEP-Ascend's token records and buffers: ``TokenLayout``, ``BufferLayout``, and where the
dispatch kernel's writes and the receive epilogue's reads of a record disagree.

A token record is ``hidden | SF packs | top-k indices | top-k weights | source index``.
``TokenLayout.get_num_bytes()`` is ``hidden_bytes + align(sf_bytes, 32) + align(metadata_bytes,
32)`` — the hidden bytes are *not* aligned — while the pointer getters start the SF packs at
``align(hidden_bytes, 32)``. :func:`_record_num_bytes` is the one formula of the stride; the size
functions (:mod:`.sizes`) and :class:`TokenLayout` both read it. :func:`check_record` compares the
writer's and the reader's view.
"""

from __future__ import annotations

from ..._record import Record
from .._v2_and_ascend import RankTokenBuffer
from ...errors import InvalidArgumentError, Problem, check_bool, check_int
from ...report import Field, Finding, RecordLayout
from ...units import align
from .constants import (DTYPE_BYTES, IDISPATCH, IEPILOGUE, NUM_UB_ALIGNMENT_BYTES, SF_PACK_BYTES, SRC_IDX_BYTES,
                        TOPK_IDX_BYTES, TOPK_WEIGHT_BYTES)

__all__ = ["TokenLayout", "BufferLayout", "check_record"]


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
        elem = DTYPE_BYTES.get(hidden_dtype, 1)
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


class BufferLayout(RankTokenBuffer):
    """``num_ranks`` x ``num_max_tokens_per_rank`` records (``TOK:85-130``); slot offsets as
    ``get_rank_buffer(r).get_token_buffer(t)`` (``TOK:118-128``)."""

    token_layout: TokenLayout
    _token_layout_type = TokenLayout
    _token_layout_name = "an ascend.TokenLayout"

    @property
    def num_bytes_per_token(self) -> int:
        return self.token_layout.num_bytes()

    @property
    def num_bytes(self) -> int:
        """``get_num_bytes`` (int64 upstream, ``TOK:102-112``): ranks x tokens x record bytes."""
        return _buffer_num_bytes(self.num_ranks, self.num_max_tokens_per_rank, self.num_bytes_per_token)


def _buffer_num_bytes(num_ranks: int, num_max_tokens_per_rank: int, num_bytes_per_token: int) -> int:
    """``BufferLayout::get_num_bytes``: ``num_ranks * (num_max_tokens_per_rank * bytes per token)`` (``TOK:102-112``)."""
    return num_ranks * (num_max_tokens_per_rank * num_bytes_per_token)


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
