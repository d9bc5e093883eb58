"""Normal-mode internode token records and the notify kernels' clean ranges.

Upstream: ``csrc/kernels/legacy/internode.cu @ dd758ca`` (``INK``; ``csrc/kernels/internode.cu``
before 2.0.0). A token crosses the RDMA and NVL channel buffers as one record of
:func:`get_num_bytes_per_token` bytes. Before a dispatch or combine, ``notify_dispatch`` /
``cached_notify`` clean each buffer's channel metadata, which starts after the token
slots; the host asserts that range fits (``(clean_meta.first + clean_meta.second) *
sizeof(int) <= num_rdma_bytes / num_nvl_bytes``, ``INK:430-431, 1515-1516``): the limits
:mod:`.normal` reports for internode plans.
"""

from __future__ import annotations

from ...errors import Checker, check_bool, check_int
from ...report import Field, RecordLayout
from ...units import INT32_MAX, align
from .constants import (BF16_BYTES, FLOAT_BYTES, FP8_SCALE_BLOCK, INT4_BYTES, INT_BYTES, RDMA_CLEAN_META_INTS,
                        SOURCE_META_BYTES)
from .versions import get_version

__all__ = ["get_num_bytes_per_token", "get_rdma_clean_meta", "get_nvl_clean_meta"]


def record_num_bytes(hidden_bytes: int, num_scales: int, num_topk_idx: int, num_topk_weights: int) -> int:
    """``align_up(hidden + SourceMeta + scales x 4 + top-k indices x sizeof(int) + weights x 4, 16)``
    (``INK:47-51``) with the hidden part in bytes."""
    return align(hidden_bytes + SOURCE_META_BYTES + num_scales * FLOAT_BYTES + num_topk_idx * INT_BYTES
                 + num_topk_weights * FLOAT_BYTES, INT4_BYTES)


def _check_counts(**counts: object) -> None:
    for name, value in counts.items():
        check_int(name, value, 0, INT32_MAX)


def get_num_bytes_per_token(hidden_int4: int, num_scales: int, num_topk_idx: int, num_topk_weights: int) -> int:
    """``internode::get_num_bytes_per_token(hidden_int4, num_scales, num_topk_idx,
    num_topk_weights)`` (``INK:47-51``): the stride of one token record in the RDMA and NVL
    channel buffers. Named ``get_num_bytes_per_rdma_token`` until 06f417d, same formula since
    ebfe47e.

    Dispatch passes ``(hidden_int4, num_scales, num_topk, num_topk)``, combine ``(hidden_int4, 0,
    0, num_topk)``. Top-k indices are stored as ``int`` whatever ``topk_idx_t`` is (the kernel
    casts them, ``INK:723``), so 32-bit index builds have the same records. Unlike DeepEP V2
    and DeepEP-Ascend, whose token layouts take hidden *bytes* and an SF byte count and store
    64-bit indices, V1 counts the hidden size in ``int4`` (16-byte) units and fp32 scales.

    >>> get_num_bytes_per_token(7168 // 16, 56, 8, 8)   # FP8 hidden 7168, top-k 8
    7472

    Raises:
        InvalidArgumentError: a negative or non-integer argument, or a record beyond C++ ``int``.
    """
    _check_counts(hidden_int4=hidden_int4, num_scales=num_scales, num_topk_idx=num_topk_idx,
                  num_topk_weights=num_topk_weights)
    num_bytes = record_num_bytes(hidden_int4 * INT4_BYTES, num_scales, num_topk_idx, num_topk_weights)
    if num_bytes > INT32_MAX:
        c = Checker()
        c.add("hidden_int4", hidden_int4, f"the record ({num_bytes:,} B) does not fit the int upstream returns "
                                          "(INK:48, static_cast<int>)")
        c.raise_if_any()
    return num_bytes


def rdma_clean_meta(per_token: int, num_rdma_ranks: int, tokens: int, num_channels: int) -> tuple[int, int]:
    """``get_rdma_clean_meta`` from the record stride (``INK:53-65``): the token slots of both
    halves in ints, then ``(8 * 2 + 4)`` ints per RDMA rank and channel, twice."""
    return (per_token * tokens * num_rdma_ranks * 2 * num_channels // INT_BYTES,
            RDMA_CLEAN_META_INTS * num_rdma_ranks * 2 * num_channels)


def nvl_clean_meta(per_token: int, num_rdma_ranks: int, num_nvl_ranks: int, tokens: int,
                    num_channels: int) -> tuple[int, int]:
    """``get_nvl_clean_meta`` from the bytes per token slot (``INK:67-85``): the token slots in
    ints, then ``2 * num_rdma_ranks + 2`` ints per NVL rank and channel."""
    return (tokens * per_token * num_nvl_ranks * num_channels // INT_BYTES,
            num_nvl_ranks * (2 * num_rdma_ranks + 2) * num_channels)


def nvl_clean_token_bytes(variant: int, hidden_bytes: int, num_scales: int, num_topk_idx: int,
                          num_topk_weights: int, is_dispatch: bool) -> int:
    """The bytes per token slot ``get_nvl_clean_meta`` counts (``Version.nvl_clean_meta``):
    the aligned record (06f417d on; at a2fa3b7 for dispatch only), else the plain sum of the
    fields (ebfe47e: ``hidden + scales + indices + weights + SourceMeta``, not aligned)."""
    if variant == 2 or (variant == 1 and is_dispatch):
        return record_num_bytes(hidden_bytes, num_scales, num_topk_idx, num_topk_weights)
    return (hidden_bytes + num_scales * FLOAT_BYTES + num_topk_idx * INT_BYTES + num_topk_weights * FLOAT_BYTES
            + SOURCE_META_BYTES)


def get_rdma_clean_meta(hidden_int4: int, num_scales: int, num_topk_idx: int, num_topk_weights: int,
                        num_rdma_ranks: int, num_rdma_recv_buffer_tokens: int, num_channels: int) -> tuple[int, int]:
    """``internode::get_rdma_clean_meta(...)`` (``INK:53-65``): ``(offset, count)`` in ints of the
    RDMA buffer's channel metadata that ``notify_dispatch`` / ``cached_notify`` clean. Upstream
    asserts ``(first + second) * sizeof(int) <= num_rdma_bytes`` (``INK:430, 1515``), passing the
    *config's* ``get_rdma_buffer_size_hint(hidden_int4 * 16, num_ranks)`` as ``num_rdma_bytes``
    (``BUF:1038, 1080``). Same formula since ebfe47e (whose last argument was named ``num_sms``
    but received the channel count).

    >>> get_rdma_clean_meta(7168 // 16, 56, 8, 8, 2, 132, 10)
    (9863040, 800)

    Raises:
        InvalidArgumentError: a negative or non-integer argument, or a product beyond the C++
            ``int`` upstream computes it in.
    """
    _check_counts(num_rdma_ranks=num_rdma_ranks, num_rdma_recv_buffer_tokens=num_rdma_recv_buffer_tokens,
                  num_channels=num_channels)
    per_token = get_num_bytes_per_token(hidden_int4, num_scales, num_topk_idx, num_topk_weights)
    _check_product("num_rdma_recv_buffer_tokens", num_rdma_recv_buffer_tokens,
                   per_token * num_rdma_recv_buffer_tokens * num_rdma_ranks * 2 * num_channels, "INK:61-62")
    return rdma_clean_meta(per_token, num_rdma_ranks, num_rdma_recv_buffer_tokens, num_channels)


def get_nvl_clean_meta(hidden_int4: int, num_scales: int, num_topk_idx: int, num_topk_weights: int,
                       num_rdma_ranks: int, num_nvl_ranks: int, num_nvl_recv_buffer_tokens: int, num_channels: int,
                       is_dispatch: bool = True, *, version: str | None = None) -> tuple[int, int]:
    """``internode::get_nvl_clean_meta(...)`` (``INK:67-85``): ``(offset, count)`` in ints of the
    NVL buffer's channel metadata; upstream asserts ``(first + second) * sizeof(int) <=
    num_nvl_bytes`` (``INK:431, 1516``) against the Buffer's own NVL size.

    ``is_dispatch`` arrived with a2fa3b7 (before, eight arguments); the bytes per token slot
    depend on ``version`` (:func:`nvl_clean_token_bytes`).

    >>> get_nvl_clean_meta(7168 // 16, 56, 8, 8, 2, 8, 288, 10)
    (43038720, 480)

    Raises:
        InvalidArgumentError: as :func:`get_rdma_clean_meta`.
    """
    _check_counts(hidden_int4=hidden_int4, num_scales=num_scales, num_topk_idx=num_topk_idx,
                  num_topk_weights=num_topk_weights, num_rdma_ranks=num_rdma_ranks, num_nvl_ranks=num_nvl_ranks,
                  num_nvl_recv_buffer_tokens=num_nvl_recv_buffer_tokens, num_channels=num_channels)
    check_bool("is_dispatch", is_dispatch)
    v = get_version(version)
    per_token = nvl_clean_token_bytes(v.nvl_clean_meta, hidden_int4 * INT4_BYTES, num_scales, num_topk_idx,
                                      num_topk_weights, is_dispatch)
    _check_product("num_nvl_recv_buffer_tokens", num_nvl_recv_buffer_tokens,
                   num_nvl_recv_buffer_tokens * per_token * num_nvl_ranks * num_channels, "INK:79-80")
    return nvl_clean_meta(per_token, num_rdma_ranks, num_nvl_ranks, num_nvl_recv_buffer_tokens, num_channels)


def _check_product(name: str, value: int, product: int, where: str) -> None:
    if product > INT32_MAX:
        c = Checker()
        c.add(name, value, f"the clean-meta product {product:,} overflows the C++ int upstream computes it in ({where})")
        c.raise_if_any()


def internode_records(hidden: int, use_fp8: bool, num_topk: int) -> list[RecordLayout]:
    """The dispatch and combine token records as the kernels write them (``INK:688-727``,
    ``1757-1758, 1906-1910``): dispatch is hidden (FP8 or BF16), fp32 scales, SourceMeta,
    top-k indices (``int``) and weights; combine is BF16 hidden, SourceMeta and the weights.
    Strides are :func:`get_num_bytes_per_token` (dispatch: ``(hidden_int4, num_scales, num_topk,
    num_topk)``; combine: ``(hidden_int4, 0, 0, num_topk)``)."""
    scales = hidden // FP8_SCALE_BLOCK if use_fp8 else 0
    hidden_bytes = hidden * (1 if use_fp8 else BF16_BYTES)
    offset = hidden_bytes + scales * FLOAT_BYTES
    dispatch_fields = [
        Field(name="hidden", offset=0, num_bytes=hidden_bytes, dtype="float8_e4m3" if use_fp8 else "bfloat16",
              count=hidden),
        Field(name="scales", offset=hidden_bytes, num_bytes=scales * FLOAT_BYTES, dtype="float32", count=scales),
        Field(name="source_meta", offset=offset, num_bytes=SOURCE_META_BYTES, dtype="int32", count=2),
        Field(name="topk_idx", offset=offset + SOURCE_META_BYTES, num_bytes=num_topk * INT_BYTES, dtype="int32",
              count=num_topk),
        Field(name="topk_weights", offset=offset + SOURCE_META_BYTES + num_topk * INT_BYTES,
              num_bytes=num_topk * FLOAT_BYTES, dtype="float32", count=num_topk),
    ]
    combine_hidden = hidden * BF16_BYTES
    combine_fields = [
        Field(name="hidden", offset=0, num_bytes=combine_hidden, dtype="bfloat16", count=hidden),
        Field(name="source_meta", offset=combine_hidden, num_bytes=SOURCE_META_BYTES, dtype="int32", count=2),
        Field(name="topk_weights", offset=combine_hidden + SOURCE_META_BYTES, num_bytes=num_topk * FLOAT_BYTES,
              dtype="float32", count=num_topk),
    ]
    view = "RDMA/NVL channel slot, as the kernel writes it"
    return [
        RecordLayout.from_fields("internode dispatch token",
                                 record_num_bytes(hidden_bytes, scales, num_topk, num_topk), dispatch_fields, view),
        RecordLayout.from_fields("internode combine token", record_num_bytes(combine_hidden, 0, 0, num_topk),
                                 combine_fields, view),
    ]
