"""UCCL-EP low-latency mode: ``LowLatencyLayout`` and ``get_low_latency_rdma_size_hint``, for
the default build and the ``PER_EXPERT_BATCHING`` build, and the message byte maps.

``ep/include/ep_config.hpp:168-327 @da914a2``. Per buffer set (two sets, odd/even calls):

* signaling: ``max(dispatch counts, combine flags)`` ints, aligned to 128 B, placed first
  (lines 243-256); dispatch counts are ``E`` ints, or ``R x R`` with per-expert batching;
* send: ``max(dispatch send, E x T x combine_msg)`` (lines 199-227); dispatch send is
  ``T x dispatch_msg``, or ``(E + 1) x T x dispatch_msg`` with per-expert batching (a
  temporary slot per token plus a ``T``-slot batch per expert, lines 199-214);
* receive: ``E x T x max(dispatch_msg, combine_msg)`` (lines 229-240).

``total_bytes`` is their sum; the hint rounds it to the next multiple of 128 *strictly above*
(``((total + 128) / 128) * 128``, lines 318-327). The internode signaling buffers (64-bit
counters for RDMA atomics) are *not* in the RDMA buffer: they live in the proxy's atomic buffer
of ``kAtomicBufferSize = 81,960`` B, which bounds them (lines 258-281).

The default build is DeepEP V1's layout at ``ll4``; those numbers come from
:mod:`epbuf.backends.deepep_v1` (:mod:`._deepep`), and only the per-expert-batching
difference and the atomic-buffer part are computed here.
"""

from __future__ import annotations

from functools import lru_cache

from ..._record import Record
from .._span import Span  # a named byte range of the RDMA buffer or of the atomic buffer
from ...errors import Checker, check_bool, check_int
from ...report import Field, RecordLayout
from ...units import INT32_MAX, align, format_int
from . import _deepep
from .versions import cite

__all__ = ["LowLatencyLayout", "Span", "get_low_latency_rdma_size_hint", "dispatch_message_record",
           "combine_message_record", "K_ATOMIC_BUFFER_SIZE", "NUM_BUFFER_ALIGNMENT_BYTES", "hint_round_up"]

NUM_BUFFER_ALIGNMENT_BYTES = 128  # NUM_BUFFER_ALIGNMENT_BYTES (ep/include/ep_configs.cuh:9)
K_ATOMIC_BUFFER_SIZE = 81960  # kAtomicBufferSize (ep/include/common.hpp:61)
INT_BYTES = 4
INT64_BYTES = 8
INT4_BYTES = 16
NUM_BUFFER_SETS = 2  # buffers[0] / buffers[1] (ep_config.hpp:170, 286)
_CFG = "include/ep_config.hpp"


@lru_cache(maxsize=4096)
def _deepep_layout(tokens: int, hidden: int, num_ranks: int, num_experts: int):
    return _deepep.ll_layout(tokens, hidden, num_ranks, num_experts)


#: ``((num_bytes + 128) / 128) * 128`` (``ep_config.hpp:324-326``): DeepEP V1's rounding of the hint, the
#: next multiple of 128 strictly above, so an aligned total gets a whole extra block.
hint_round_up = _deepep.hint_round_up


class LowLatencyLayout(Record):
    """``uccl::LowLatencyLayout`` (``ep/include/ep_config.hpp:168-316``).

    Attributes:
        num_max_dispatch_tokens_per_rank: ``T``.
        hidden: ``H`` (elements).
        num_ranks: ``R`` (enters only with per-expert batching).
        num_experts: ``E``, every expert the library sees (EPLB redundant ones included).
        per_expert_batching: the ``PER_EXPERT_BATCHING`` build (``ep/Makefile:106-110``,
            ``ep/setup.py:410-413``).

    >>> layout = LowLatencyLayout(num_max_dispatch_tokens_per_rank=128, hidden=7168, num_ranks=16, num_experts=256)
    >>> layout.num_bytes_per_dispatch_msg, layout.num_bytes_per_combine_msg, layout.total_bytes
    (14352, 14336, 1880098816)
    >>> LowLatencyLayout(num_max_dispatch_tokens_per_rank=128, hidden=7168, num_ranks=16, num_experts=256,
    ...                  per_expert_batching=True).total_bytes
    1884821504

    Raises:
        InvalidArgumentError: negative or non-integer inputs, and the ``send/recv_buffer_bytes
            % sizeof(int4) == 0`` asserts (``ep_config.hpp:226, 239``).
    """

    num_max_dispatch_tokens_per_rank: int
    hidden: int
    num_ranks: int
    num_experts: int
    per_expert_batching: bool = False

    def __post_init__(self) -> None:
        check_bool("per_expert_batching", self.per_expert_batching)
        self._base  # DeepEP's layout validates the shape (and its own send/recv asserts)
        if self.per_expert_batching and self.send_buffer_bytes % INT4_BYTES:
            c = Checker()
            c.add("hidden", self.hidden,
                  f"the per-expert-batching send buffer ({format_int(self.send_buffer_bytes)} B) must be a multiple "
                  f"of 16 B (EP_HOST_ASSERT, {cite(_CFG, '226')}); use hidden % 8 == 0")
            c.raise_if_any()

    @property
    def _base(self):
        """DeepEP V1's ``LowLatencyLayout`` at ``ll4`` for the same shape."""
        return _deepep_layout(self.num_max_dispatch_tokens_per_rank, self.hidden, self.num_ranks, self.num_experts)

    @property
    def num_scales(self) -> int:
        """``hidden / 128`` (``ep_config.hpp:182``)."""
        return self._base.num_scales

    @property
    def num_bytes_per_dispatch_msg(self) -> int:
        """``sizeof(int4) + max(2H, H + 4 * H/128)`` (``ep_config.hpp:193-195``)."""
        return self._base.num_bytes_per_dispatch_msg

    @property
    def num_bytes_per_combine_msg(self) -> int:
        """``H * sizeof(nv_bfloat16)`` (``ep_config.hpp:196``): no LogFMT min/max term."""
        return self._base.num_bytes_per_combine_msg

    @property
    def dispatch_send_buffer_bytes(self) -> int:
        """``T x dispatch_msg``, or ``(E + 1) x T x dispatch_msg`` with per-expert batching
        (``ep_config.hpp:199-220``)."""
        tokens, msg = self.num_max_dispatch_tokens_per_rank, self.num_bytes_per_dispatch_msg
        return (self.num_experts + 1) * tokens * msg if self.per_expert_batching else tokens * msg

    @property
    def send_buffer_bytes(self) -> int:
        """``max(dispatch send, E x T x combine_msg)`` (``ep_config.hpp:221-225``). The default
        build's is DeepEP's; batching only enlarges the dispatch side, which stays ``>=`` the
        default's, so ``max(batched dispatch send, DeepEP's send)`` is the same maximum."""
        base = self._base.send_buffer_bytes
        return max(self.dispatch_send_buffer_bytes, base) if self.per_expert_batching else base

    @property
    def recv_buffer_bytes(self) -> int:
        """``max(E x T x dispatch_msg, E x T x combine_msg)`` (``ep_config.hpp:231-238``)."""
        return self._base.recv_buffer_bytes

    @property
    def signaling_buffer_bytes(self) -> int:
        """``max(dispatch counts, E ints)``: ``4E``, or ``max(4 R^2, 4E)`` with per-expert
        batching, one count per (destination, source) rank pair (``ep_config.hpp:243-253``)."""
        base = self._base.signaling_buffer_bytes
        if self.per_expert_batching:
            return max(self.num_ranks * self.num_ranks * INT_BYTES, base)
        return base

    @property
    def signaling_buffer_bytes_aligned(self) -> int:
        """``align(signaling, 128)`` (``ep_config.hpp:254-255``)."""
        return align(self.signaling_buffer_bytes, NUM_BUFFER_ALIGNMENT_BYTES)

    @property
    def signaling_buffer_bytes_internode(self) -> int:
        """The 64-bit counters for RDMA atomics: ``8E``, or ``max(8 R^2, 8E)`` with per-expert
        batching (``ep_config.hpp:258-272``)."""
        combine = self.num_experts * INT64_BYTES
        if self.per_expert_batching:
            return max(self.num_ranks * self.num_ranks * INT64_BYTES, combine)
        return combine

    @property
    def signaling_buffer_bytes_internode_aligned(self) -> int:
        """``align(internode signaling, 128)`` (``ep_config.hpp:273-274``)."""
        return align(self.signaling_buffer_bytes_internode, NUM_BUFFER_ALIGNMENT_BYTES)

    @property
    def atomic_buffer_bytes_used(self) -> int:
        """``2 x`` the aligned internode signaling buffer: what the kernels use of the atomic
        buffer; the layout asserts it is ``<= kAtomicBufferSize`` (``ep_config.hpp:275-281``)."""
        return NUM_BUFFER_SETS * self.signaling_buffer_bytes_internode_aligned

    def spans(self) -> tuple[Span, ...]:
        """The six buffers of the RDMA buffer in address order: both signaling buffers, both
        send buffers, both receive buffers (``ep_config.hpp:286-314``)."""
        out = []
        offset = 0
        for kind, size in (("signaling buffer", self.signaling_buffer_bytes_aligned),
                           ("send buffer", self.send_buffer_bytes), ("recv buffer", self.recv_buffer_bytes)):
            for i in range(NUM_BUFFER_SETS):
                out.append(Span(name=f"{kind} {i}", offset=offset, num_bytes=size))
                offset += size
        return tuple(out)

    def atomic_spans(self) -> tuple[Span, ...]:
        """The two internode signaling buffers in the atomic buffer (``ep_config.hpp:295-308``)."""
        size = self.signaling_buffer_bytes_internode_aligned
        return tuple(Span(name=f"internode signaling buffer {i}", offset=i * size, num_bytes=size)
                     for i in range(NUM_BUFFER_SETS))

    @property
    def total_bytes(self) -> int:
        """``2 x (signaling aligned + send + recv)`` (``ep_config.hpp:227, 240, 256``): what the
        low-latency dispatch and combine check against ``num_rdma_bytes`` (``uccl_ep.cc:1337,
        1464``)."""
        if not self.per_expert_batching:
            return self._base.total_bytes
        return NUM_BUFFER_SETS * (self.signaling_buffer_bytes_aligned + self.send_buffer_bytes
                                  + self.recv_buffer_bytes)


def get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank: int, hidden: int, num_ranks: int,
                                   num_experts: int, *, per_expert_batching: bool = False) -> int:
    """``uccl::get_low_latency_rdma_size_hint`` (``ep_config.hpp:318-327``;
    ``Buffer.get_low_latency_rdma_size_hint``, ``ep/bench/buffer.py:629-649``), argument order as
    upstream.

    The default build is DeepEP V1's hint at ``ll4``; with ``per_expert_batching`` the layout
    of this module, rounded the same way.

    >>> get_low_latency_rdma_size_hint(128, 7168, 16, 256)
    1880098944
    >>> get_low_latency_rdma_size_hint(128, 7168, 16, 256, per_expert_batching=True)
    1884821632

    Raises:
        InvalidArgumentError: negative/non-integer inputs and the layout's asserts.
    """
    check_int("num_max_tokens_per_rank", num_max_dispatch_tokens_per_rank, 0, INT32_MAX,
              "num_max_dispatch_tokens_per_rank, an int upstream")
    check_int("hidden", hidden, 1, INT32_MAX)
    check_int("num_ranks", num_ranks, 1, INT32_MAX)
    check_int("num_experts", num_experts, 0, INT32_MAX)
    if not check_bool("per_expert_batching", per_expert_batching):
        return _deepep.ll_hint(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts)
    layout = LowLatencyLayout(num_max_dispatch_tokens_per_rank=num_max_dispatch_tokens_per_rank, hidden=hidden,
                              num_ranks=num_ranks, num_experts=num_experts, per_expert_batching=True)
    return hint_round_up(layout.total_bytes)


def dispatch_message_record(hidden: int, use_fp8: bool, slot_bytes: int) -> RecordLayout:
    """The dispatch message as the kernel writes it (``ep/src/internode_ll.cu:102-108,
    145-157``): an ``int4`` whose first int is the source token index ("3 reserved int fields"),
    then FP8 data and ``H/128`` fp32 scales, or BF16 data. The layout reserves ``slot_bytes``
    (the BF16 size) per slot."""
    scales = hidden // 128 if use_fp8 else 0
    data = hidden if use_fp8 else hidden * 2
    fields = [
        Field(name="src_idx", offset=0, num_bytes=INT_BYTES, dtype="int32", count=1),
        Field(name="hidden", offset=INT4_BYTES, num_bytes=data, dtype="float8_e4m3" if use_fp8 else "bfloat16",
              count=hidden),
        Field(name="scales", offset=INT4_BYTES + data, num_bytes=scales * 4, dtype="float32", count=scales),
    ]
    return RecordLayout.from_fields(
        "low-latency dispatch message", INT4_BYTES + data + scales * 4, fields,
        view=f"as sent ({'FP8' if use_fp8 else 'BF16'}); the layout reserves {format_int(slot_bytes)} B per slot")


def combine_message_record(hidden: int) -> RecordLayout:
    """The combine slot: ``H`` BF16 values, nothing else (``ep_config.hpp:196``,
    ``internode_ll.cu:782``); ``use_logfmt`` is a simulated cast that stays BF16 in the slot
    (``internode_ll.cu:950-951``), so no min/max bytes are reserved."""
    fields = [Field(name="hidden", offset=0, num_bytes=hidden * 2, dtype="bfloat16", count=hidden)]
    return RecordLayout.from_fields("low-latency combine message", hidden * 2, fields, view="BF16 (LogFMT simulated)")
