"""DeepEP V1's low-latency RDMA buffer: ``LowLatencyLayout`` and its size hint, exact to the byte.

Upstream: ``csrc/legacy/config.hpp:102-188 @ dd758ca`` (``CFG``). The layout holds two
(odd/even) sets of a send buffer ``max(T * dispatch_msg, E * T * combine_msg)``, a receive
buffer ``max(E * T * dispatch_msg, E * T * combine_msg)`` and a signaling buffer of ``E``
ints; ``total_bytes`` is their sum. ``get_low_latency_rdma_size_hint`` rounds it to the next
multiple of 128 *strictly above*, so an aligned total gains a whole block. Six layout
variants (``LL0`` .. ``LL5``) exist over upstream's history; a version id chooses one.

The formulas, on plain integers, are in :mod:`.ll_formulas`; :class:`LowLatencyLayout`, the
hint, :func:`low_latency_buffer` (the report's regions) and the ceiling search
(:func:`max_low_latency_tokens`) all call them.
"""

from __future__ import annotations

from functools import lru_cache

from ..._record import Record
from ..._search import largest_true
from ...errors import Checker, InvalidArgumentError, check_int
from ...report import Buffer, Region
from ...units import INT32_MAX, format_int
from .._span import Span  # a named byte range of the RDMA buffer (UCCL-EP's spans are the same records)
from .constants import FP8_SCALE_BLOCK, INT4_BYTES, INT_BYTES, NUM_BUFFER_ALIGNMENT_BYTES
from .limits import passes_int4_check
from .ll_formulas import (ROUNDING_BLOCK, SPAN_NAMES, check_arguments, combine_msg_bytes, dispatch_msg_bytes,
                          hint_round_up, layout_problems, send_recv, signaling_bytes, slots, span_rows)
from .versions import _DEFAULT, Version, get_version

__all__ = ["num_bytes_per_dispatch_msg", "num_bytes_per_combine_msg", "Span", "LowLatencyBuffer", "LowLatencyLayout",
           "low_latency_buffer", "get_low_latency_rdma_size_hint", "max_low_latency_tokens"]


def num_bytes_per_dispatch_msg(hidden: int, *, version: str | None = None) -> int:
    """``num_bytes_per_dispatch_msg`` of ``LowLatencyLayout`` (``CFG:143``): ``16 + max(2H, H + 4 * H/128)``
    (LL0/LL1: ``H + 4 * H/128 + 16``, FP8 only).

    >>> num_bytes_per_dispatch_msg(7168), num_bytes_per_dispatch_msg(7168, version="ll0")
    (14352, 7408)
    """
    check_int("hidden", hidden, 1, INT32_MAX)
    return dispatch_msg_bytes(hidden, get_version(version).low_latency)


def num_bytes_per_combine_msg(hidden: int, *, version: str | None = None) -> int:
    """``num_bytes_per_combine_msg`` of ``LowLatencyLayout`` (``CFG:144``): ``4 * H/128 + 2H`` (LL5);
    ``2H`` (LL3/LL4); ``16 + 2H`` (LL0-LL2).

    >>> num_bytes_per_combine_msg(7168), num_bytes_per_combine_msg(7168, version="ll4")
    (14560, 14336)
    """
    check_int("hidden", hidden, 1, INT32_MAX)
    return combine_msg_bytes(hidden, get_version(version).low_latency)


class LowLatencyBuffer(Record):
    """``LowLatencyBuffer`` (``CFG:102-120``): one of the two (odd/even) buffer sets, as byte
    offsets into the RDMA buffer. Dispatch and combine share the same memory.
    ``dispatch_rdma_atomic_token_counter`` exists only in LL0 (after the count buffer)."""

    num_clean_int: int
    dispatch_rdma_send_buffer: int
    dispatch_rdma_recv_data_buffer: int
    dispatch_rdma_recv_count_buffer: int
    combine_rdma_send_buffer: int
    combine_rdma_recv_data_buffer: int
    combine_rdma_recv_flag_buffer: int
    dispatch_rdma_atomic_token_counter: int | None = None


class LowLatencyLayout(Record):
    """``LowLatencyLayout(rdma_buffer, num_max_dispatch_tokens_per_rank, hidden, num_ranks,
    num_experts)`` (``CFG:122-183``) without the pointer: arguments in upstream's order,
    positional or by keyword, plus the version (id or commit) whose layout variant applies.

    Attributes:
        num_max_dispatch_tokens_per_rank: ``T``.
        hidden: ``H`` (elements; the layout sizes BF16 slots).
        num_ranks: only LL0 reads it.
        num_experts: ``E``, every expert the library sees (EPLB redundant ones included).
        version: a version id or commit (``None``: main).

    >>> layout = LowLatencyLayout(128, 7168, 16, 288)
    >>> layout.num_bytes_per_dispatch_msg, layout.num_bytes_per_combine_msg, layout.total_bytes
    (14352, 14560, 2146961664)

    Raises:
        InvalidArgumentError: negative or non-integer inputs, ``E * T`` beyond C++ ``int``, and
            upstream's ``send/recv_buffer_bytes % sizeof(int4) == 0`` asserts (``CFG:150, 158``).
    """

    num_max_dispatch_tokens_per_rank: int
    hidden: int
    num_ranks: int
    num_experts: int
    version: str | None

    def __init__(self, num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int, num_experts: int, *,
                 version: str | None = None) -> None:
        check_arguments(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts)
        v = get_version(version)
        d = self.__dict__
        d.update(num_max_dispatch_tokens_per_rank=num_max_dispatch_tokens_per_rank, hidden=hidden,
                 num_ranks=num_ranks, num_experts=num_experts, version=version)
        dispatch, combine, signaling = slots(hidden, num_ranks, num_experts, v.low_latency)
        send, recv = send_recv(num_max_dispatch_tokens_per_rank, num_experts, dispatch, combine)
        problems = layout_problems(num_max_dispatch_tokens_per_rank, hidden, num_experts, send, recv)
        if problems:
            raise InvalidArgumentError(problems)
        d["_v"] = v
        d["_sizes"] = (dispatch, combine, signaling, send, recv)

    @property
    def variant(self) -> int:
        """The layout variant of :attr:`version` (0..5 for ``LL0`` .. ``LL5``)."""
        return self._v.low_latency

    @property
    def num_scales(self) -> int:
        """``hidden / 128`` (``CFG:132``)."""
        return self.hidden // FP8_SCALE_BLOCK

    @property
    def num_bytes_per_dispatch_msg(self) -> int:
        return self._sizes[0]

    @property
    def num_bytes_per_combine_msg(self) -> int:
        return self._sizes[1]

    @property
    def send_buffer_bytes(self) -> int:
        """``max(T * dispatch_msg, E * T * combine_msg)`` (``CFG:147-149``)."""
        return self._sizes[3]

    @property
    def recv_buffer_bytes(self) -> int:
        """``max(E * T * dispatch_msg, E * T * combine_msg)`` (``CFG:155-157``)."""
        return self._sizes[4]

    @property
    def signaling_buffer_bytes(self) -> int:
        """``4E`` (``CFG:162-164``); LL0 adds ``E / num_ranks`` atomic token counters."""
        return signaling_bytes(self.num_experts, self.num_ranks, self.variant)

    @property
    def signaling_buffer_bytes_aligned(self) -> int:
        """``align_up(signaling, 128)`` from LL4 (``CFG:165``); unaligned before."""
        return self._sizes[2]

    def span_rows(self) -> list[tuple[str, int, int]]:
        """``(name, offset, num_bytes)`` of :meth:`spans`."""
        return span_rows(self.variant, self._sizes[3], self._sizes[4], self._sizes[2])

    def spans(self) -> tuple[Span, ...]:
        """The six buffers in address order (``CFG:171-181``)."""
        return tuple(Span(name=name, offset=offset, num_bytes=size) for name, offset, size in self.span_rows())

    @property
    def total_bytes(self) -> int:
        """``total_bytes``: the end of the last buffer; the size every LL kernel checks
        (``layout.total_bytes <= num_rdma_bytes``, ``BUF:1503, 1643``)."""
        return 2 * (self._sizes[2] + self._sizes[3] + self._sizes[4])

    def buffers(self) -> tuple[LowLatencyBuffer, LowLatencyBuffer]:
        """``buffers[0]`` and ``buffers[1]`` as offsets (``CFG:171-181``)."""
        by_name = {name: offset for name, offset, _ in self.span_rows()}

        def one(i: int) -> LowLatencyBuffer:
            sig = by_name[SPAN_NAMES["signaling buffer"][i]]
            send = by_name[SPAN_NAMES["send buffer"][i]]
            recv = by_name[SPAN_NAMES["recv buffer"][i]]
            return LowLatencyBuffer(
                num_clean_int=self.signaling_buffer_bytes // INT_BYTES, dispatch_rdma_send_buffer=send,
                dispatch_rdma_recv_data_buffer=recv, dispatch_rdma_recv_count_buffer=sig,
                combine_rdma_send_buffer=send, combine_rdma_recv_data_buffer=recv, combine_rdma_recv_flag_buffer=sig,
                dispatch_rdma_atomic_token_counter=sig + self.num_experts * INT_BYTES if self.variant == 0 else None)

        return one(0), one(1)


def get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int,
                                   num_experts: int, *, version: str | None = None) -> int:
    """``get_low_latency_rdma_size_hint`` (``CFG:185-188``; ``Buffer.get_low_latency_rdma_size_hint``,
    ``PY:176-189``): the low-latency RDMA buffer bytes, the layout's ``total_bytes`` rounded up
    to the next multiple of 128 strictly above. Unlike DeepEP V2's and DeepEP-Ascend's
    ``calculate_buffer_size``, it takes no top-k and no dtype: the layout reserves BF16 slots.

    Args:
        num_max_dispatch_tokens_per_rank: most tokens one rank dispatches per call.
        hidden: hidden size in elements (the size is computed for BF16 slots).
        num_ranks: expert-parallel ranks (only LL0 reads it).
        num_experts: experts the library sees, EPLB redundant experts included.
        version: a version id or commit (``None``: main).

    The vLLM #57894 shape (hidden 5120, 16 ranks, 384 + 64 redundant experts):

    >>> get_low_latency_rdma_size_hint(2048, 5120, 16, 448)
    38168170112

    Raises:
        InvalidArgumentError: as :class:`LowLatencyLayout`.
    """
    check_arguments(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts)
    variant = (_DEFAULT if version is None else get_version(version)).low_latency
    dispatch, combine, signaling = slots(hidden, num_ranks, num_experts, variant)
    send, recv = send_recv(num_max_dispatch_tokens_per_rank, num_experts, dispatch, combine)
    if send % INT4_BYTES or recv % INT4_BYTES or num_experts * num_max_dispatch_tokens_per_rank > INT32_MAX:
        raise InvalidArgumentError(layout_problems(num_max_dispatch_tokens_per_rank, hidden, num_experts, send, recv))
    return hint_round_up(2 * (send + recv + signaling))


def low_latency_buffer(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int, num_experts: int, *,
                       version: str | None = None) -> Buffer:
    """The low-latency RDMA buffer: :class:`LowLatencyLayout`'s six spans plus the hint's rounding
    block, rule ``"sum"``. ``num_bytes`` is the hint; ``num_bytes_needed`` is ``align(total_bytes,
    128)``, the smallest size the kernels and ``Buffer`` accept."""
    layout = LowLatencyLayout(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts, version=version)
    return rdma_buffer(layout, layout._v)


#: The records a low-latency slot holds (the report's record names): a send slot sized by the
#: combine phase holds a combine message; a receive slot, sized for the larger of the two
#: messages, holds a dispatch message in dispatch and a combine message in combine.
COMBINE_MESSAGE, DISPATCH_MESSAGE = "low-latency combine message", "low-latency dispatch message"


def slot_grid(num_bytes: int, num_experts: int, num_tokens: int, num_bytes_per_combine_msg: int) -> dict:
    """``shape`` and ``record`` of a send or receive span, as Region fields: ``(experts, tokens)``
    slots when the span is that many slots (the receive buffer; the send buffer when the combine
    phase sets its size, ``CFG:147-159``); the record is the combine message when the slot has
    its stride, else the dispatch message (the slot is sized for the hint's dispatch message,
    larger than an FP8 one as sent). ``{}`` when the span is not such a grid (a send buffer sized
    by the dispatch phase). The kernels index both as ``(expert, token)`` slots (``internode_ll.cu``
    dispatch receive, combine send and receive)."""
    slots = num_experts * num_tokens
    if not slots or num_bytes % slots:
        return {}
    record = COMBINE_MESSAGE if num_bytes == slots * num_bytes_per_combine_msg else DISPATCH_MESSAGE
    return {"shape": (num_experts, num_tokens), "record": record}


def rdma_buffer(layout: LowLatencyLayout, v: Version) -> Buffer:
    """:func:`low_latency_buffer` of a checked ``layout``: the layout's span rows and the rounding
    row (the rows the summary reads), with formulas."""
    t, e, num_ranks = layout.num_max_dispatch_tokens_per_rank, layout.num_experts, layout.num_ranks
    dispatch_msg, combine_msg = layout.num_bytes_per_dispatch_msg, layout.num_bytes_per_combine_msg
    formulas = {
        "send buffer": (f"max({format_int(t)} tokens x {format_int(dispatch_msg)} B, "
                        f"{e} experts x {format_int(t)} tokens x {format_int(combine_msg)} B)", "147-151"),
        "recv buffer": (f"{e} experts x {format_int(t)} tokens x max({format_int(dispatch_msg)}, "
                        f"{format_int(combine_msg)}) B", "155-159"),
        "signaling buffer": (
            (f"({e} + {e} / {num_ranks}) ints x 4 B" if v.low_latency == 0 else f"{e} experts x 4 B")
            + (", aligned to 128 B" if v.low_latency >= 4 else ""), "162-166"),
    }
    rows = layout.span_rows()
    regions = []
    for name, offset, size in rows:
        kind = name.rsplit(" ", 1)[0]
        formula, lines = formulas[kind]
        grid = slot_grid(size, e, t, combine_msg) if kind != "signaling buffer" else {}
        regions.append(Region(name=name, num_bytes=size, num_bytes_used=size,
                              formula=f"at offset {format_int(offset)}: {formula}",
                              source=v.cite("CFG", lines, "LowLatencyLayout"), **grid))
    total = layout.total_bytes
    source = v.cite("CFG", "185-188", "get_low_latency_rdma_size_hint")
    regions.append(Region(name=ROUNDING_BLOCK, num_bytes=hint_round_up(total) - total, num_bytes_used=0,
                          formula=f"((total {format_int(total)} + 128) / 128) x 128 - total: "
                                  "a full block even when aligned", source=source))
    return Buffer.combine("RDMA buffer", regions, "sum", NUM_BUFFER_ALIGNMENT_BYTES, source=source)


def max_low_latency_tokens(hidden: int, num_ranks: int, num_experts: int, *, version: str | None = None,
                           budget: int | None = None) -> int:
    """The largest ``num_max_dispatch_tokens_per_rank`` whose hint ``Buffer`` accepts.

    "Accepts" means, for versions that have it (4623c67 on: ``main``), the constructor check
    ``num_rdma_bytes / sizeof(int4) < INT_MAX`` (``BUF:112``), i.e. a hint of at most
    2^35 - 128 bytes; and, when ``budget`` is given, ``hint <= budget``. Token counts whose
    ``E * T`` overflows the layout's ``int`` never fit. The hint is non-decreasing in the token
    count, so this is an exact binary search over ``0 .. INT_MAX``, not an estimate; cached.

    Args:
        hidden, num_ranks, num_experts, version: as :func:`get_low_latency_rdma_size_hint`.
        budget: bytes the RDMA buffer may take (``None``: no budget).

    Returns:
        The token count; 0 when not even one token fits.

    >>> max_low_latency_tokens(5120, 16, 448)
    1843

    Raises:
        InvalidArgumentError: a version without the size check and no ``budget`` (no upper
            bound exists), a negative budget, or arguments the layout rejects.
    """
    v = get_version(version)
    if budget is not None:
        check_int("budget", budget, 0, None, "bytes")
    elif not v.int4_count_check:
        c = Checker()
        c.add("version", v.id, f"{v.id} has no upper bound on num_rdma_bytes (Buffer checks num_rdma_bytes / 16 < "
                               "INT_MAX only from 4623c67, i.e. in main); pass a budget")
        c.raise_if_any()
    # One token validates the arguments. Send/recv bytes are T times their one-token value,
    # so when their multiple-of-16 asserts hold for T = 1 they hold for every T (the search
    # then needs no alignment check). The converse fails: with a message size that is not a
    # multiple of 16 (only for hidden sizes the kernels do not support) some larger T still
    # pass; this function rejects such shapes rather than search a non-monotone set.
    LowLatencyLayout(1, hidden, num_ranks, num_experts, version=version)
    return _max_tokens(v, hidden, num_ranks, num_experts, budget)


@lru_cache(maxsize=4096)
def _max_tokens(v: Version, hidden: int, num_ranks: int, num_experts: int, budget: int | None) -> int:
    dispatch, combine, signaling = slots(hidden, num_ranks, num_experts, v.low_latency)

    def fits(tokens: int) -> bool:
        if num_experts * tokens > INT32_MAX:
            return False
        send, recv = send_recv(tokens, num_experts, dispatch, combine)
        hint = hint_round_up(2 * (send + recv + signaling))
        return (not v.int4_count_check or passes_int4_check(hint)) and (budget is None or hint <= budget)

    best = largest_true(0, INT32_MAX, fits)
    return 0 if best is None else best
