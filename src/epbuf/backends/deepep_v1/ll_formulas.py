"""DeepEP V1's low-latency layout as integer formulas: message slots, send/receive/signaling
buffers, their order, the hint's rounding and what the layout's constructor refuses.

Upstream: ``csrc/legacy/config.hpp:102-188 @ dd758ca`` (``CFG``); ``variant`` is
``Version.low_latency`` (``LL0`` .. ``LL5``). Each formula is one function here, on plain
integers: :class:`~.low_latency.LowLatencyLayout`, the hint, the report, the fast summary
(:mod:`.ll_report`) and the token ceiling all call them.
"""

from __future__ import annotations

from functools import lru_cache

from ...errors import Checker, check_int
from ...units import INT32_MAX, align, format_int
from .constants import (BF16_BYTES, BF162_BYTES, FLOAT_BYTES, FP8_SCALE_BLOCK, INT4_BYTES, INT_BYTES,
                        NUM_BUFFER_ALIGNMENT_BYTES)
from .versions import CFG

__all__ = ["SPAN_NAMES", "ROUNDING_BLOCK", "dispatch_msg_bytes", "combine_msg_bytes", "signaling_bytes", "slots",
           "send_recv", "span_rows", "hint_round_up", "layout_problems", "check_arguments"]

_NUM_BUFFER_SETS = 2  # buffers[0] / buffers[1]: odd and even calls alternate (CFG:171-181)
SPAN_NAMES = {kind: tuple(f"{kind} {i}" for i in range(_NUM_BUFFER_SETS))
              for kind in ("signaling buffer", "send buffer", "recv buffer")}
ROUNDING_BLOCK = "hint rounding block"  # the hint's extra bytes, last region of the buffer


def dispatch_msg_bytes(hidden: int, variant: int) -> int:
    """LL0/LL1: ``H + 4 * H/128 + 16`` (FP8 only); LL2 on: ``16 + max(2H, H + 4 * H/128)`` (``CFG:143``)."""
    if variant <= 1:
        return hidden + hidden // FP8_SCALE_BLOCK * FLOAT_BYTES + INT4_BYTES
    return INT4_BYTES + max(hidden * BF16_BYTES, hidden + hidden // FP8_SCALE_BLOCK * FLOAT_BYTES)


def combine_msg_bytes(hidden: int, variant: int) -> int:
    """LL0-LL2: ``16 + 2H`` (a control ``int4``); LL3/LL4: ``2H``; LL5: ``4 * H/128 + 2H`` (room for
    LogFMT's per-128-channel min/max, reserved even when LogFMT is off) (``CFG:144``)."""
    if variant <= 2:
        return INT4_BYTES + hidden * BF16_BYTES
    if variant <= 4:
        return hidden * BF16_BYTES
    return hidden // FP8_SCALE_BLOCK * BF162_BYTES + hidden * BF16_BYTES


def signaling_bytes(experts: int, num_ranks: int, variant: int) -> int:
    """``max(dispatch count ints, combine flag ints)`` = ``4E`` (``CFG:162-164``); LL0 adds
    ``E / num_ranks`` atomic token counters to the dispatch side."""
    if variant == 0:
        return experts * INT_BYTES + experts // num_ranks * INT_BYTES
    return experts * INT_BYTES


def signaling_bytes_aligned(experts: int, num_ranks: int, variant: int) -> int:
    """``align_up(signaling, 128)`` from LL4 (``CFG:165``); unaligned before."""
    signaling = signaling_bytes(experts, num_ranks, variant)
    return align(signaling, NUM_BUFFER_ALIGNMENT_BYTES) if variant >= 4 else signaling


@lru_cache(maxsize=4096)
def slots(hidden: int, num_ranks: int, experts: int, variant: int) -> tuple[int, int, int]:
    """The token-independent parts: ``(dispatch_msg, combine_msg, signaling_buffer_bytes_aligned)``."""
    return (dispatch_msg_bytes(hidden, variant), combine_msg_bytes(hidden, variant),
            signaling_bytes_aligned(experts, num_ranks, variant))


def send_recv(tokens: int, experts: int, dispatch_msg: int, combine_msg: int) -> tuple[int, int]:
    """``send = max(T * dispatch, E * T * combine)``, ``recv = max(E * T * dispatch, E * T * combine)``
    (``CFG:147-149, 155-157``)."""
    return (max(tokens * dispatch_msg, experts * tokens * combine_msg),
            max(experts * tokens * dispatch_msg, experts * tokens * combine_msg))


def span_rows(variant: int, send: int, recv: int, signaling: int) -> list[tuple[str, int, int]]:
    """``(name, offset, num_bytes)`` of the six buffers in address order (``CFG:171-181``): each kind
    once per buffer set, back to back; from LL4 (#313) the signaling buffers come first, before last."""
    kinds = ((("signaling buffer", signaling), ("send buffer", send), ("recv buffer", recv)) if variant >= 4
             else (("send buffer", send), ("recv buffer", recv), ("signaling buffer", signaling)))
    rows, offset = [], 0
    for kind, size in kinds:
        for name in SPAN_NAMES[kind]:
            rows.append((name, offset, size))
            offset += size
    return rows


def hint_round_up(total_bytes: int) -> int:
    """``((num_bytes + 128) / 128) * 128`` (``CFG:187``; the same since ebfe47e). Upstream's quirk:
    not a round-up but "next multiple of 128 strictly above", so an aligned total gets a whole block."""
    return (total_bytes + NUM_BUFFER_ALIGNMENT_BYTES) // NUM_BUFFER_ALIGNMENT_BYTES * NUM_BUFFER_ALIGNMENT_BYTES


def layout_problems(tokens: int, hidden: int, experts: int, send: int, recv: int) -> list:
    """What the layout's constructor refuses for checked integers: ``E * T`` beyond the C++ ``int``
    it multiplies in (``CFG:146, 154``), and ``send/recv_buffer_bytes % sizeof(int4) == 0``
    (``CFG:150, 158``). Empty when the size function evaluates."""
    c = Checker()
    if experts * tokens > INT32_MAX:
        c.add("num_max_tokens_per_rank", tokens,
              f"num_experts x num_max_dispatch_tokens_per_rank = {experts} x {tokens} overflows the C++ int "
              f"LowLatencyLayout multiplies in ({CFG}:146, 154); upstream cannot compute this size")
    for what, num_bytes, line in (("send", send, "150"), ("receive", recv, "158")):
        if num_bytes % INT4_BYTES:
            c.add("hidden", hidden, f"the low-latency {what} buffer ({format_int(num_bytes)} B) must be a multiple "
                                    f"of 16 B (EP_HOST_ASSERT, {CFG}:{line}); use hidden % 8 == 0")
    return c.problems


def check_arguments(tokens: object, hidden: object, num_ranks: object, experts: object) -> None:
    """The layout's ``int`` arguments: one comparison chain on the good path (validation must
    not cost more than the arithmetic, benchmarks/api_speed.py)."""
    if (type(tokens) is int and 0 <= tokens <= INT32_MAX and type(hidden) is int and 0 < hidden <= INT32_MAX
            and type(num_ranks) is int and 0 < num_ranks <= INT32_MAX and type(experts) is int
            and 0 <= experts <= INT32_MAX):
        return
    check_int("num_max_tokens_per_rank", tokens, 0, INT32_MAX, "num_max_dispatch_tokens_per_rank, an int upstream")
    check_int("hidden", hidden, 1, INT32_MAX)
    check_int("num_ranks", num_ranks, 1, INT32_MAX)
    check_int("num_experts", experts, 0, INT32_MAX)
