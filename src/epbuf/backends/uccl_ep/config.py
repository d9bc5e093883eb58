"""UCCL-EP normal mode: ``Config``, the default config tables (with the EFA variants), the
NVL/RDMA hints as named regions, and the internode token record.

The hints are DeepEP V1's (reused through :mod:`._deepep`); this module re-cites their regions
at UCCL's own source (``ep/include/ep_config.hpp:60-132 @da914a2``) and owns what is UCCL's:
the tables of ``Buffer.get_dispatch_config`` / ``get_combine_config``
(``ep/bench/buffer.py:741-794``, the ``deep_ep.Buffer`` of UCCL's ``deep_ep_wrapper``), whose
16- and 32-rank rows reserve 512 RDMA receive tokens instead of 128 when
``Buffer._is_efa()`` (``/opt/amazon/efa`` exists, ``buffer.py:258-259``).
"""

from __future__ import annotations

from ...errors import Checker, check_int
from ...report import Buffer, Field, RecordLayout
from . import _deepep
from .versions import cite

__all__ = ["Config", "DEFAULT_NUM_SMS", "supported_num_ranks", "get_dispatch_config", "get_combine_config",
           "get_hidden_bytes", "nvl_buffer", "rdma_buffer", "get_num_bytes_per_token", "SOURCE_META_BYTES",
           "internode_records"]

#: ``uccl::Config`` (``ep/include/ep_config.hpp:25-58``): DeepEP V1's ``Config``, same rules.
Config = _deepep.Config

DEFAULT_NUM_SMS = 20  # Buffer.num_sms (ep/bench/buffer.py:74)
SOURCE_META_BYTES = 8  # sizeof(internode::SourceMeta): two ints (ep/src/internode.cu:16-37, 52)
INT4_BYTES = 16

# (nvl_send, nvl_recv, rdma_send, rdma_recv) per rank count, as ep/bench/buffer.py:753-764 and
# 781-792 list them (the RDMA receive count before Config rounds it up). Rows 16 and 32 take
# 512 RDMA receive tokens on EFA (_EFA_RDMA_RECV). These equal DeepEP's tables at bdd119f
# (DeepEP v1.2.1); UCCL never took DeepEP's later 48/96-rank rows.
_Row = tuple[int, int, int, int]
_DISPATCH: dict[int, _Row] = {
    2: (24, 256, 6, 128), 4: (6, 256, 6, 128), 8: (6, 256, 6, 128), 16: (36, 288, 20, 128),
    24: (8, 288, 32, 128), 32: (32, 288, 32, 128), 64: (20, 288, 28, 128), 128: (20, 560, 32, 128),
    144: (32, 720, 12, 128), 160: (28, 720, 12, 128),
}
_COMBINE: dict[int, _Row] = {
    2: (10, 256, 6, 128), 4: (9, 256, 6, 128), 8: (4, 256, 6, 128), 16: (4, 288, 12, 128),
    24: (1, 288, 8, 128), 32: (1, 288, 8, 128), 64: (1, 288, 20, 128), 128: (1, 560, 12, 128),
    144: (2, 720, 8, 128), 160: (2, 720, 8, 128),
}
_EFA_RDMA_RECV = {16: 512, 32: 512}  # `512 if Buffer._is_efa() else 128` (buffer.py:757, 759, 785, 787)
_TABLE_LINES = ("753-765", "781-793")


def supported_num_ranks() -> tuple[int, ...]:
    """The rank counts the default tables list (others: "Unsupported number of EP ranks").

    >>> supported_num_ranks()
    (2, 4, 8, 16, 24, 32, 64, 128, 144, 160)
    """
    return tuple(sorted(_DISPATCH))


def _table_config(kind: int, num_ranks: int, num_sms: int, efa: bool) -> Config:
    name = ("get_dispatch_config", "get_combine_config")[kind]
    c = Checker()
    if not c.integer("num_ranks", num_ranks):
        c.raise_if_any()
    check_int("num_sms", num_sms, 0)
    row = (_DISPATCH, _COMBINE)[kind].get(num_ranks)
    if row is None:
        c.add("num_ranks", num_ranks,
              f"UCCL-EP Buffer.{name} knows {', '.join(map(str, supported_num_ranks()))} (\"Unsupported number of "
              f"EP ranks\", {cite('bench/buffer.py', _TABLE_LINES[kind])}); pass a Config instead")
        c.raise_if_any()
    nvl_send, nvl_recv, rdma_send, rdma_recv = row  # type: ignore[misc]
    if efa:
        rdma_recv = _EFA_RDMA_RECV.get(num_ranks, rdma_recv)
    return _deepep.make_config(num_sms, nvl_send, nvl_recv, rdma_send, rdma_recv)


def get_dispatch_config(num_ranks: int, num_sms: int = DEFAULT_NUM_SMS, *, efa: bool = False) -> Config:
    """``Buffer.get_dispatch_config(num_ranks)`` (``ep/bench/buffer.py:741-766``).

    Args:
        num_ranks: EP ranks, a key of the table (:func:`supported_num_ranks`).
        num_sms: ``Buffer.num_sms`` (20 unless ``Buffer.set_num_sms`` changed it).
        efa: ``Buffer._is_efa()``: the 16/32-rank rows reserve 512 RDMA receive tokens.

    >>> get_dispatch_config(16).as_tuple(), get_dispatch_config(16, efa=True).as_tuple()
    ((20, 36, 288, 20, 140), (20, 36, 288, 20, 520))

    Raises:
        InvalidArgumentError: a rank count the table does not list.
    """
    return _table_config(0, num_ranks, num_sms, efa)


def get_combine_config(num_ranks: int, num_sms: int = DEFAULT_NUM_SMS, *, efa: bool = False) -> Config:
    """``Buffer.get_combine_config(num_ranks)`` (``ep/bench/buffer.py:769-794``).

    >>> get_combine_config(32, efa=True).as_tuple()
    (20, 1, 288, 8, 512)
    """
    return _table_config(1, num_ranks, num_sms, efa)


def get_hidden_bytes(hidden: int, use_fp8_dispatch: bool) -> int:
    """The sizing recipe's ``hidden * max(element size, 2)`` (DeepEP's ``get_hidden_bytes``,
    which UCCL-EP's users follow): FP8 and BF16 size the same buffers.

    >>> get_hidden_bytes(7168, True)
    14336
    """
    check_int("hidden", hidden, 1)
    return _deepep.get_hidden_bytes(hidden, use_fp8_dispatch)


# Region name (as DeepEP V1 names the hint's terms) -> lines in ep/include/ep_config.hpp.
_NVL_LINES = {"channel metadata": "73-74", "hidden data": "75-76", "source meta": "77-81", "top-k indices": "82-84",
              "top-k weights": "85-86", "scales": "87-89", "alignment padding": "90"}
_RDMA_LINES = {"channel metadata": "109-110", "hidden data": "111-112", "source meta": "113-115",
               "top-k indices": "116-118", "top-k weights": "119-121", "scales": "122-124", "int4 per token": "125-126",
               "alignment padding": "127"}


def _recite(buffer: Buffer, lines: dict[str, str], whole: str) -> Buffer:
    regions = tuple(r.replace(source=cite("include/ep_config.hpp", lines[r.name])) for r in buffer.regions)
    return buffer.replace(regions=regions, source=cite("include/ep_config.hpp", whole))


def nvl_buffer(config: Config, hidden_bytes: int, num_ranks: int) -> Buffer:
    """``Config::get_nvl_buffer_size_hint`` (``ep/include/ep_config.hpp:60-92``) as named
    regions; ``num_bytes`` is the hint. With ``C = num_sms / 2``, ``N = min(R, 8)``, ``Rr =
    max(R / 8, 1)``, ``T = num_max_nvl_chunked_recv_tokens``: ``C*N*(2Rr + 3)`` ints, then per
    slot ``C*N*T`` x (hidden bytes + 8 B SourceMeta + 128 x 8 B top-k indices + 128 x 4 B
    weights + 128 x 4 B scales), rounded up to 128.

    >>> nvl_buffer(get_dispatch_config(16), 14336, 16).num_bytes
    377673984

    Raises:
        InvalidArgumentError: the hint's asserts (ranks not below or a multiple of 8; odd
            ``num_sms`` above 8 ranks), non-positive sizes.
    """
    return _recite(_deepep.nvl_buffer(config, hidden_bytes, num_ranks), _NVL_LINES, "60-92")


def rdma_buffer(config: Config, hidden_bytes: int, num_ranks: int) -> Buffer:
    """``Config::get_rdma_buffer_size_hint`` (``ep/include/ep_config.hpp:94-132``): 0 bytes for
    ``R <= 8`` ("Legacy mode", line 97); else per channel and RDMA peer, twice (send and
    receive halves), ``(8*2 + 2)`` ints and ``T`` slots (the *rounded* RDMA receive count) of
    hidden bytes + SourceMeta + 128 indices + 128 weights + 128 scales + an ``int4``.

    >>> rdma_buffer(get_dispatch_config(16), 14336, 16).num_bytes
    91887744
    """
    return _recite(_deepep.rdma_buffer(config, hidden_bytes, num_ranks), _RDMA_LINES, "94-132")


def get_num_bytes_per_token(hidden_int4: int, num_scales: int, num_topk_idx: int, num_topk_weights: int) -> int:
    """``internode::get_num_bytes_per_token`` (``ep/src/internode.cu:73-80``): the internode
    channel slot, ``align16(hidden_int4 * 16 + sizeof(SourceMeta) + 4 * num_scales + 4 *
    num_topk_idx + 4 * num_topk_weights)``.

    >>> get_num_bytes_per_token(7168 // 16, 56, 8, 8)
    7472

    DeepEP V1's function (reused, :mod:`._deepep`), with its argument checks.
    """
    return _deepep.get_num_bytes_per_token(hidden_int4, num_scales, num_topk_idx, num_topk_weights)


def internode_records(hidden: int, use_fp8_dispatch: bool, num_topk: int) -> list[RecordLayout]:
    """The internode dispatch and combine token records in the RDMA/NVL channel rings: what
    the dispatch kernel writes per token (hidden, FP8 scales, ``SourceMeta``, top-k int32
    indices and fp32 weights; ``internode.cu:73-80, 596-597``) and what combine sends
    (BF16 hidden, ``SourceMeta``, weights; ``internode.cu:2266-2269``)."""
    scales = hidden // 128 if use_fp8_dispatch else 0
    hidden_bytes = hidden * (1 if use_fp8_dispatch else 2)
    dtype = "float8_e4m3" if use_fp8_dispatch else "bfloat16"
    meta = hidden_bytes + scales * 4
    dispatch = [
        Field(name="hidden", offset=0, num_bytes=hidden_bytes, dtype=dtype, count=hidden),
        Field(name="scales", offset=hidden_bytes, num_bytes=scales * 4, dtype="float32", count=scales),
        Field(name="source_meta", offset=meta, num_bytes=SOURCE_META_BYTES, dtype="int32", count=2),
        Field(name="topk_idx", offset=meta + SOURCE_META_BYTES, num_bytes=num_topk * 4, dtype="int32",
              count=num_topk),
        Field(name="topk_weights", offset=meta + SOURCE_META_BYTES + num_topk * 4, num_bytes=num_topk * 4,
              dtype="float32", count=num_topk),
    ]
    combine_hidden = hidden * 2
    combine = [
        Field(name="hidden", offset=0, num_bytes=combine_hidden, dtype="bfloat16", count=hidden),
        Field(name="source_meta", offset=combine_hidden, num_bytes=SOURCE_META_BYTES, dtype="int32", count=2),
        Field(name="topk_weights", offset=combine_hidden + SOURCE_META_BYTES, num_bytes=num_topk * 4,
              dtype="float32", count=num_topk),
    ]
    view = "RDMA/NVL channel slot, as the kernel writes it"
    return [
        RecordLayout.from_fields("internode dispatch token",
                                 get_num_bytes_per_token(hidden_bytes // INT4_BYTES, scales, num_topk, num_topk),
                                 dispatch, view=view),
        RecordLayout.from_fields("internode combine token",
                                 get_num_bytes_per_token(combine_hidden // INT4_BYTES, 0, 0, num_topk),
                                 combine, view=view),
    ]
