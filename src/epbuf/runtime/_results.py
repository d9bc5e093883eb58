"""What one step of a rank hands to the next: the validated, packed sends of dispatch and
combine (``DispatchSend``, ``CombineSend``), the :class:`Handle` a dispatch leaves for its
combine, and the results callers get (``refs.py``'s, in its order)."""

from __future__ import annotations

from typing import NamedTuple

from .._record import Record

__all__ = ["Handle", "DispatchResult", "CombineResult", "DispatchSend", "CombineSend"]


class Handle:
    """What combine needs from a dispatch, on one rank. Integer bookkeeping is numpy on
    the host; ``recv_topk_idx`` / ``recv_topk_weights`` stay on the data's device.

    Attributes:
        num_tokens: tokens this rank dispatched.
        send_counts: tokens sent to each rank (``[num_ranks]``); combine gets as many back.
        combine_slots: for each record sent (grouped by destination, then token), the flat
            slot ``k * num_max_tokens_per_rank + i`` its combine partial lands in.
        combine_to_self: which of those records went to this rank itself.
        num_destinations: ranks each token went to (``[num_tokens]``).
        recv_counts: tokens received from each rank (``num_recv_tokens_per_rank``).
        recv_slots: the dispatch slot ``r * num_max_tokens_per_rank + t`` of each received token.
    """

    __slots__ = ("num_tokens", "send_counts", "combine_slots", "combine_to_self", "num_destinations", "recv_counts",
                 "recv_slots", "recv_topk_idx", "recv_topk_weights", "dispatch_stride", "combine_stride")

    def __init__(self, **values) -> None:
        for name in self.__slots__:
            setattr(self, name, values[name])

    @property
    def num_recv_tokens(self) -> int:
        return int(self.recv_counts.sum())

    @property
    def dispatch_num_bytes_sent(self) -> int:
        """Bytes of packed dispatch records this rank sent (to itself included)."""
        return int(self.send_counts.sum()) * self.dispatch_stride

    @property
    def dispatch_num_bytes_received(self) -> int:
        return self.num_recv_tokens * self.dispatch_stride

    @property
    def combine_num_bytes_sent(self) -> int:
        return self.num_recv_tokens * self.combine_stride

    @property
    def combine_num_bytes_received(self) -> int:
        return int(self.send_counts.sum()) * self.combine_stride


class DispatchResult(NamedTuple):
    """``refs.dispatch``'s results, in its order, plus the handle for :meth:`combine`.

    ``recv_x`` is ``[num_recv_tokens, hidden]`` (a ``(x, sf)`` tuple for FP8, ``sf`` in the
    caller's dtype); ``recv_topk_idx`` holds local expert ids or -1, in the caller's index
    dtype; ``recv_topk_weights`` is ``None`` when no weights were dispatched;
    ``recv_src_token_global_idx`` is int32; ``num_recv_tokens_per_rank`` int32 ``[num_ranks]``.
    """

    recv_x: object
    recv_topk_idx: object
    recv_topk_weights: object
    recv_src_token_global_idx: object
    num_recv_tokens_per_rank: object
    handle: Handle


class CombineResult(NamedTuple):
    """``combined_x`` BF16 ``[num_tokens, hidden]`` in the source rank's token order, and the
    combined top-k weights (fp32 ``[num_tokens, num_topk]``, ``None`` unless given)."""

    combined_x: object
    combined_topk_weights: object


class DispatchSend(Record):
    """A validated, packed dispatch of one rank, ready for the exchange."""

    send: object  # packed records for the peers, uint8 [(sum(send_counts) - send_counts[rank]) * stride]
    send_counts: object  # numpy int64 [num_ranks], this rank's own count included
    send_token: object  # numpy: source token of each record, grouped by destination (self included)
    combine_slots: object
    combine_to_self: object  # numpy bool: which of those records this rank sends itself
    bypass_self: bool  # this rank's records to itself skip the exchange (see RankState.bypasses_self)
    self_fields: object  # what pack_dispatch_self writes into this rank's own row (None: nothing)
    peer_fields: dict  # what pack_dispatch_peers writes into ``send``
    num_destinations: object
    num_tokens: int
    fingerprint: int
    like: object  # an input array (device, dtype family of the outputs)
    sf_dtype: object
    idx_dtype: object
    with_weights: bool


class CombineSend(Record):
    """A validated combine of one rank: the records for the peers packed, where theirs land."""

    send: object  # packed records for the peers
    landing: object  # workspace bytes the peers' records land in
    partial: object  # [num_recv_tokens, hidden] BF16: what each received token sends back
    topk_weights: object
    self_rows: tuple  # (first, end): the received tokens from this rank itself that skip the exchange
    bypass_self: bool
    with_weights: bool
    fingerprint: int
    like: object
