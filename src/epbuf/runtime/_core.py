"""One rank's side of dispatch and combine, whatever moves the bytes between ranks.

:class:`RankState` does everything but the exchange: it validates the inputs, routes
tokens, packs send records with :func:`epbuf.codec.pack`, places received records in
their slots of the buffer, and reads them back with :func:`epbuf.codec.unpack`. The
torch.distributed :class:`~epbuf.runtime.Buffer` and the single-process
:class:`~epbuf.runtime.Simulator` call the same steps and differ only in how the counts
and the packed records reach the peers.

Semantics: DeepEP's reference ``deep_ep/utils/refs.py @dd758ca``.

* ``dispatch`` (``refs.py:10-123``): rank ``s`` sends token ``i`` once to every rank that
  hosts one of its experts (``expert // (num_experts / num_ranks)``), with the top-k
  indices of other ranks' experts set to -1 (``:76-77``), all its weights, and
  ``src_token_global_idx = s * num_max_tokens_per_rank + i`` (``:90``). The receiver
  gets the tokens not expanded, sorted by ``src_token_global_idx`` (by source rank, then
  token), with its own experts' indices made local and the rest -1 (``:112-117``).
* ``combine`` (``refs.py:177-243``, ``reduce_in_local=True``; ``ordered_accumulate``
  ``:156-174``): each rank first reduces a token's top-k slots of its own experts (fp32
  sum in top-k order, rounded to BF16), then the source rank sums those per-rank partials
  in fp32 in the order of each rank's last top-k slot (``grouped_reduce``, ``:201-234``,
  keeps a group's sum at its rightmost slot; ``ordered_accumulate`` adds slots in order)
  and rounds to BF16.

The bytes: slot ``(r, t)`` of the dispatch region holds the ``t``-th token received from
rank ``r``; slot ``(k, i)`` of the combine region holds, for source token ``i``, the
partial of its ``k``-th destination rank in that accumulation order — the region's
``min(top-k, ranks)`` rows are exactly enough — and slots past a token's destinations hold
zeros (epbuf writes them so the reduction is one strided sum over the rows). Shapes,
offsets and strides come from :func:`epbuf.codec.region_slots` of the backend's report.

Memory: besides the buffer, a rank keeps a workspace (send records, and the records a
combine receives before they move to their slots) and a small fp32 block for the reduction,
both grown to the largest call and reused: allocating them per call costs a page fault per
4 KiB on every call, more than the copies (``RankState.workspace_num_bytes``).
"""

from __future__ import annotations

import zlib
from functools import cached_property, lru_cache
from typing import NamedTuple

from .._record import Record
from ..codec._arrays import ops_for
from ..codec.records import RecordSlots
from ..codec.regions import RegionSlots, region_slots
from ..errors import ArgumentProblem, EpbufError, InvalidArgumentError
from ..report import Report

__all__ = ["RuntimeLayout", "RankState", "Handle", "DispatchResult", "CombineResult", "PeerError"]


class PeerError(EpbufError):
    """A peer refused its input, uses another layout, or the exchange failed or timed out."""


class RuntimeLayout(Record):
    """What the runtime reads from a backend's report: the buffer to allocate and where the
    dispatch and combine records sit in it.

    Attributes:
        report: the backend's report for the plan.
        dispatch: the array of ``"dispatch"`` records (rows = source ranks).
        combine: the array of ``"combine"`` records (rows = destination ordinals).
        num_bytes: the buffer's size (the hint).
    """

    report: Report
    dispatch: RegionSlots
    combine: RegionSlots
    num_bytes: int

    @classmethod
    def from_plan(cls, plan, backend: str) -> "RuntimeLayout":
        from ..plan import report as make_report

        experts = plan.num_total_experts
        if experts % plan.num_ranks:
            # The sizes exist (the report answers with an error finding), but the routing needs
            # every rank to hold num_experts / num_ranks experts, as upstream's dispatch asserts.
            from ..errors import InvalidArgumentError, Problem

            raise InvalidArgumentError([Problem("num_experts", experts, f"must be divisible by num_ranks = "
                                                                        f"{plan.num_ranks} (each rank holds "
                                                                        "num_experts / num_ranks experts)")])
        rep = make_report(plan, backend)
        dispatch, combine = region_slots(rep, "dispatch"), region_slots(rep, "combine")
        if dispatch.buffer != combine.buffer:
            raise EpbufError(f"{backend}: dispatch and combine records live in different buffers "
                             f"({dispatch.buffer.name!r}, {combine.buffer.name!r}); the runtime allocates one")
        for region in (dispatch, combine):
            problems = region.record.overlaps()
            if problems or region.record.overrun_bytes():
                raise EpbufError(
                    f"{backend}: the {region.record.name!r} record's fields overlap {problems} or end "
                    f"{region.record.overrun_bytes()} B past its {region.record.num_bytes}-byte stride "
                    f"(see the report's findings); consecutive slots would clobber each other")
        if dispatch.rows != plan.num_ranks or dispatch.slots != plan.num_max_tokens_per_rank:
            raise EpbufError(f"{backend}: the dispatch region is {dispatch.rows} x {dispatch.slots} slots, "
                             f"not ranks x tokens = {plan.num_ranks} x {plan.num_max_tokens_per_rank}")
        return cls(report=rep, dispatch=dispatch, combine=combine, num_bytes=dispatch.buffer.num_bytes)

    @cached_property  # asked for several times per call; the layout never changes
    def num_ranks(self) -> int:
        return self.dispatch.rows

    @cached_property  # asked for several times per call; the layout never changes
    def num_max_tokens_per_rank(self) -> int:
        return self.dispatch.slots

    @cached_property  # asked for several times per call; the layout never changes
    def num_topk(self) -> int:
        return self.dispatch.record.field("topk_idx").count

    @cached_property  # asked for several times per call; the layout never changes
    def hidden(self) -> int:
        return self.dispatch.record.field("hidden").count

    @cached_property  # asked for several times per call; the layout never changes
    def num_sf_bytes(self) -> int:
        """SF bytes per token of a real FP8 dispatch (0 for BF16)."""
        try:
            return self.dispatch.record.field("sf").num_bytes
        except KeyError:
            return 0

    @cached_property  # asked for several times per call; the layout never changes
    def num_experts(self) -> int:
        return int(self.report.inputs["num_experts"]) + int(self.report.inputs.get("num_redundant_experts", 0))


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


def _problem(argument: str, value: object, allowed: str) -> InvalidArgumentError:
    return InvalidArgumentError([ArgumentProblem(argument, value, allowed)])


def _describe(ops, value) -> str:
    return f"{ops.dtype_name(value)} {[int(d) for d in value.shape]}"


class RankState:
    """One rank's buffer and the steps of dispatch and combine around the exchange."""

    def __init__(self, layout: RuntimeLayout, rank: int, buffer) -> None:
        self.layout = layout
        self.rank = rank
        self.buffer = buffer
        self.ops = ops_for(buffer)
        d, c = layout.dispatch, layout.combine
        self.dispatch_region = buffer[d.offset:d.offset + d.num_bytes]
        self.combine_region = buffer[c.offset:c.offset + c.num_bytes]
        self._layout_key = repr((layout.report.backend, d.record, c.record, layout.num_ranks,
                                 layout.num_max_tokens_per_rank, layout.num_experts))
        self.dispatch_slots = RecordSlots(d.record, self.dispatch_region)
        self.combine_slots = RecordSlots(c.record, self.combine_region)
        self._workspace = None  # send records and combine staging, reused across calls
        self._workspace_slots: dict = {}  # record name -> RecordSlots over the workspace
        self._accumulator = None  # fp32 rows of the combine reduction, reused across calls
        self._views = None  # zero-copy views of the combine region's partials and weights

    def workspace(self, num_bytes: int):
        """``num_bytes`` of scratch memory next to the buffer, reused by every call and grown
        to the largest need: packed send records (dispatch) and the records a combine
        receives before they move to their slots. Allocating them per call costs a page
        fault per 4 KiB page on every call, more than the copies themselves."""
        if self._workspace is None or self.ops.length(self._workspace) < num_bytes:
            self._workspace, self._workspace_slots = None, {}  # free the old one before allocating the new one
            self._workspace = self.ops.empty(num_bytes, self.ops.uint8, like=self.buffer)
        return self._workspace[:num_bytes]

    def _workspace_records(self, record) -> RecordSlots:
        """The workspace as an array of ``record`` records (views kept until it grows)."""
        slots = self._workspace_slots.get(record.name)
        if slots is None:
            slots = self._workspace_slots[record.name] = RecordSlots(record, self._workspace)
        return slots

    @property
    def workspace_num_bytes(self) -> int:
        """Bytes the scratch memory holds now (0 before the first call)."""
        ws = 0 if self._workspace is None else self.ops.length(self._workspace)
        acc = 0 if self._accumulator is None else int(self._accumulator.shape[0]) * int(self._accumulator.shape[1]) * 4
        return ws + acc

    # --- checks ------------------------------------------------------------------------
    def _fingerprint(self, *extra: object) -> int:
        """A number every rank computes alike from the layout and the call's dtypes (not
        ``hash``: string hashes differ between processes)."""
        return zlib.crc32((self._layout_key + repr(extra)).encode()) & 0x7FFFFFFF

    def check_dispatch(self, x, topk_idx, topk_weights):
        """Every input problem, before any communication. Returns ``(x, sf)``."""
        lay, ops = self.layout, self.ops
        problems: list[ArgumentProblem] = []
        hidden_field = lay.dispatch.record.field("hidden")
        fp8 = lay.num_sf_bytes > 0
        sf = None
        if isinstance(x, tuple):
            if not fp8 or len(x) != 2:
                problems.append(ArgumentProblem("x", "a tuple", "BF16 dispatch takes one [num_tokens, hidden] tensor"
                                                if not fp8 else "FP8 dispatch takes (x, sf)"))
                x = x[0] if x else None
            else:
                x, sf = x
        elif fp8:
            problems.append(ArgumentProblem("x", "one tensor", "the plan dispatches FP8: give (x, sf) with the "
                                                               "e4m3fn codes and their fp32 scales"))
        for name, value in (("x", x), ("sf", sf), ("topk_idx", topk_idx), ("topk_weights", topk_weights)):
            if value is not None and not ops.is_array(value):
                raise _problem(name, type(value).__name__, f"must be a {ops.kind} array like the buffer")
        if x is None or topk_idx is None:
            raise InvalidArgumentError(problems or [ArgumentProblem("x", None, "required")])
        num_tokens = int(x.shape[0]) if x.ndim == 2 else -1
        want = ops.dtype(hidden_field.dtype)
        if x.ndim != 2 or x.shape[1] != lay.hidden or x.dtype != want:
            problems.append(ArgumentProblem("x", _describe(ops, x), f"must be {str(want).removeprefix('torch.')} "
                                                                    f"[num_tokens, hidden = {lay.hidden}]"))
        if num_tokens > lay.num_max_tokens_per_rank:
            problems.append(ArgumentProblem("x", f"{num_tokens} tokens", f"allowed 0..{lay.num_max_tokens_per_rank} "
                                                                         "(num_max_tokens_per_rank of the plan)"))
        if sf is not None:
            per_token = ops.itemsize(sf) * (int(sf.shape[1]) if sf.ndim == 2 else -1)
            if sf.ndim != 2 or int(sf.shape[0]) != num_tokens or per_token != lay.num_sf_bytes:
                problems.append(ArgumentProblem("sf", _describe(ops, sf),
                                                f"must be [num_tokens = {num_tokens}, n] with n x element size = "
                                                f"{lay.num_sf_bytes} B per token (the record's SF field)"))
        topk = lay.num_topk
        if topk_idx.ndim != 2 or int(topk_idx.shape[0]) != num_tokens or int(topk_idx.shape[1]) != topk \
                or ops.dtype_name(topk_idx) not in ("int64", "int32"):
            problems.append(ArgumentProblem("topk_idx", _describe(ops, topk_idx),
                                            f"must be int64 or int32 [num_tokens = {num_tokens}, num_topk = {topk}]"))
        else:
            host_idx = ops.to_numpy(topk_idx)
            if host_idx.size and (host_idx.min() < -1 or host_idx.max() >= lay.num_experts):
                problems.append(ArgumentProblem("topk_idx", f"values {int(host_idx.min())}..{int(host_idx.max())}",
                                                f"allowed -1..{lay.num_experts - 1} (-1: no expert)"))
        if topk_weights is not None and (topk_weights.ndim != 2 or tuple(int(d) for d in topk_weights.shape)
                                         != (num_tokens, topk) or ops.dtype_name(topk_weights) != "float32"):
            problems.append(ArgumentProblem("topk_weights", _describe(ops, topk_weights),
                                            f"must be float32 [num_tokens = {num_tokens}, num_topk = {topk}] or None"))
        if problems:
            raise InvalidArgumentError(problems)
        return x, sf

    # --- dispatch ------------------------------------------------------------------------
    def prepare_dispatch(self, x, topk_idx, topk_weights) -> DispatchSend:
        """Validate and route; raises before anything leaves the rank. :meth:`pack_dispatch_peers`
        then packs the records for the peers into ``send`` (while the counts travel); the
        records this rank sends itself skip the exchange: :meth:`pack_dispatch_self` writes
        them straight into its own row of the dispatch region."""
        x, sf = self.check_dispatch(x, topk_idx, topk_weights)
        lay, ops = self.layout, self.ops
        np = _numpy()
        num_ranks, num_tokens = lay.num_ranks, int(x.shape[0])
        host_idx = ops.to_numpy(topk_idx).astype(np.int64)
        experts_per_rank = lay.num_experts // num_ranks
        valid = host_idx >= 0
        dest = np.where(valid, host_idx // experts_per_rank, -1)
        sent = np.zeros((num_ranks, num_tokens), dtype=bool)
        token, slot = np.nonzero(valid)
        sent[dest[token, slot], token] = True
        send_dest, send_token = np.nonzero(sent)  # grouped by destination rank, then token (refs.py:62-83)
        send_counts = sent.sum(axis=1).astype(np.int64)
        # refs.py combine order: a rank's partial sits at its last top-k slot; partials add in slot order.
        topk = host_idx.shape[1]
        same = dest[:, :, None] == dest[:, None, :]
        is_last = valid & ~(same & _later(topk)).any(axis=2)
        ordinal = np.cumsum(is_last, axis=1) - 1
        rank_ordinal = np.full((num_tokens, num_ranks), -1, dtype=np.int64)
        token, slot = np.nonzero(is_last)
        rank_ordinal[token, dest[token, slot]] = ordinal[token, slot]
        combine_slots = rank_ordinal[send_token, send_dest] * lay.num_max_tokens_per_rank + send_token
        masked_idx = np.where(dest[send_token] == send_dest[:, None], host_idx[send_token], -1)  # refs.py:76-77
        src = (self.rank * lay.num_max_tokens_per_rank + send_token).astype(np.int32)  # refs.py:90

        stride = lay.dispatch.record.num_bytes
        to_self = send_dest == self.rank
        bypass = self.bypasses_self(int(send_counts[self.rank]) * stride)
        if bypass:
            self_begin = int(send_counts[:self.rank].sum())
            self_end = self_begin + int(send_counts[self.rank])
            peers = np.concatenate((np.arange(self_begin), np.arange(self_end, len(send_token))))
            self_fields = {"hidden": x, "sf": sf, "topk_idx": masked_idx[self_begin:self_end],
                           "topk_weights": topk_weights, "src_token_global_idx": src[self_begin:self_end],
                           "rows": send_token[self_begin:self_end]}
            peer_fields = {"hidden": x, "sf": sf, "topk_idx": masked_idx[peers], "topk_weights": topk_weights,
                           "src_token_global_idx": src[peers], "rows": send_token[peers]}
        else:  # every record travels, this rank's own included
            self_fields = None
            peer_fields = {"hidden": x, "sf": sf, "topk_idx": masked_idx, "topk_weights": topk_weights,
                           "src_token_global_idx": src, "rows": send_token}
        send = self.workspace(len(peer_fields["rows"]) * stride)
        sf_dtype = None if sf is None else ops.dtype_name(sf)
        fingerprint = self._fingerprint(ops.dtype_name(x), sf_dtype, topk_weights is not None)
        return DispatchSend(send=send, send_counts=send_counts, send_token=send_token,
                            combine_slots=combine_slots, combine_to_self=to_self, bypass_self=bypass,
                            self_fields=self_fields, peer_fields=peer_fields,
                            num_destinations=sent.sum(axis=0), num_tokens=num_tokens, fingerprint=fingerprint,
                            like=x, sf_dtype=None if sf is None else sf.dtype, idx_dtype=topk_idx.dtype,
                            with_weights=topk_weights is not None)

    # Records a rank sends itself skip the exchange from this many bytes on: gloo copies them
    # through its own buffers (a 3.8 MB share costs ~6 ms more than writing it in place, at 512
    # tokens of benchmarks/dispatch_combine.py), while for a few kB the extra pack call costs more.
    SELF_BYPASS_BYTES = 1 << 20

    def bypasses_self(self, num_bytes: int) -> bool:
        """Whether this rank writes ``num_bytes`` of records to itself in place instead of
        sending them through the exchange (each rank decides for itself: only its own
        split sizes change)."""
        return num_bytes >= self.SELF_BYPASS_BYTES

    def peer_counts(self, counts, bypass: bool = True):
        """The split sizes of the exchange: ``counts``, with this rank's own entry 0 when its
        records to itself skip the exchange (they are written in place)."""
        if not bypass:
            return counts
        counts = counts.copy()
        counts[self.rank] = 0
        return counts

    def count_rows(self, counts, fingerprint: int):
        """The per-peer ``[count, fingerprint]`` rows this rank sends in the count exchange;
        ``counts=None`` (a rank that refused its input) sends ``-1`` so its peers stop too."""
        np = _numpy()
        rows = np.zeros((self.layout.num_ranks, 2), dtype=np.int64)
        rows[:, 0] = -1 if counts is None else counts
        rows[:, 1] = fingerprint
        return rows

    def check_peers(self, received_rows, fingerprint: int, what: str, expected=None):
        """Counts from every peer, after checking they took part with the same layout (and,
        for combine, send back as many records as this rank dispatched to them)."""
        refused = [int(r) for r in (received_rows[:, 0] < 0).nonzero()[0]]
        if refused:
            raise PeerError(f"{what}: rank(s) {refused} refused their input (see their error); no records were "
                            "exchanged")
        other = [int(r) for r in (received_rows[:, 1] != fingerprint).nonzero()[0]]
        if other:
            raise PeerError(f"{what}: rank(s) {other} call with another plan, backend or dtypes (x, sf, weights or "
                            f"not) than rank {self.rank}; every rank must call with the same layout")
        counts = received_rows[:, 0].copy()
        if expected is not None and (counts != expected).any():
            raise PeerError(f"{what}: peers return {counts.tolist()} records but rank {self.rank} dispatched "
                            f"{expected.tolist()}; every rank must combine with the handle of the same dispatch")
        if (counts > self.layout.num_max_tokens_per_rank).any():  # pragma: no cover - same fingerprint prevents it
            raise PeerError(f"{what}: a peer sent more than num_max_tokens_per_rank tokens: {counts.tolist()}")
        return counts

    def _first_row(self, bypass: bool) -> int:
        """The first row the exchange fills: 0, or 1 for rank 0 when its own records skip it."""
        return 1 if bypass and self.rank == 0 else 0

    def dispatch_landing(self, recv_counts, bypass: bool):
        """Where the exchange delivers the records, one source after the other: from the
        first exchanged row of the dispatch region on (``finish_dispatch`` moves each later
        source's records to its own row; with one peer and bypass they land in place)."""
        stride = self.layout.dispatch.record.num_bytes
        start = self._first_row(bypass) * self.layout.num_max_tokens_per_rank * stride
        total = int(self.peer_counts(recv_counts, bypass).sum())
        return self.dispatch_region[start:start + total * stride]

    def landing_spares_own_row(self, recv_counts, bypass: bool) -> bool:
        """Whether this rank writes its own records itself and the peers' land clear of its
        row (always with 2 ranks), so :meth:`pack_dispatch_self` may run while they travel."""
        if not bypass:
            return False
        lay = self.layout
        first = self._first_row(bypass)
        end = first * lay.num_max_tokens_per_rank + int(self.peer_counts(recv_counts).sum())
        return self.rank < first or end <= self.rank * lay.num_max_tokens_per_rank

    def _pack_dispatch(self, prepared: DispatchSend, f: dict, records: RecordSlots, slots: int) -> None:
        count = len(f["rows"])
        if not count:
            return
        ops, like = self.ops, prepared.like
        rows = ops.index(f["rows"], like=like)
        fields = {  # (array, rows): gathered straight into the records
            "hidden": (f["hidden"], rows),
            "topk_idx": ops.from_numpy(f["topk_idx"], like=like),
            "topk_weights": None if f["topk_weights"] is None else (f["topk_weights"], rows),
            "src_token_global_idx": ops.from_numpy(f["src_token_global_idx"], like=like),
        }
        if f["sf"] is not None:
            fields["sf"] = (f["sf"], rows)
        records.pack(slots=slots, **fields)

    def pack_dispatch_peers(self, prepared: DispatchSend) -> None:
        """Pack the records for the peers into ``prepared.send``, grouped by destination."""
        self._pack_dispatch(prepared, prepared.peer_fields, self._workspace_records(self.layout.dispatch.record), 0)

    def pack_dispatch_self(self, prepared: DispatchSend) -> None:
        """Write the records this rank dispatches to itself straight into its row ``(rank, t)``
        (nothing when they travel through the exchange)."""
        if prepared.self_fields is None:
            return
        self._pack_dispatch(prepared, prepared.self_fields, self.dispatch_slots,
                            self.rank * self.layout.num_max_tokens_per_rank)

    def finish_dispatch(self, prepared: DispatchSend, recv_counts, self_packed: bool = False) -> DispatchResult:
        """Move each peer's records from where the exchange delivered them to their slots
        ``(source rank, t)`` (last peer first: a row never lands on records still to move),
        write this rank's own records into its row unless ``self_packed``, and read every
        received record back in ``src_token_global_idx`` order (one gather per field)."""
        lay, ops = self.layout, self.ops
        np = _numpy()
        tokens = lay.num_max_tokens_per_rank
        stride = lay.dispatch.record.num_bytes
        total = int(recv_counts.sum())
        peer_counts = self.peer_counts(recv_counts, prepared.bypass_self)
        first_row = self._first_row(prepared.bypass_self)
        landed = first_row * tokens + np.concatenate(([0], np.cumsum(peer_counts)[:-1])).astype(np.int64)
        for r in range(lay.num_ranks - 1, first_row, -1):
            count, source, target = int(peer_counts[r]), int(landed[r]) * stride, r * tokens * stride
            if count and source != target:
                ops.move(self.dispatch_region, source, target, count * stride)
        if not self_packed:
            self.pack_dispatch_self(prepared)
        first = np.concatenate(([0], np.cumsum(recv_counts)[:-1])).astype(np.int64)
        recv_slots = np.arange(total, dtype=np.int64) + np.repeat(np.arange(lay.num_ranks) * tokens - first,
                                                                   recv_counts)
        fields = self.dispatch_slots.unpack(slots=ops.index(recv_slots, like=self.buffer))
        global_idx = fields["topk_idx"]
        start = self.rank * (lay.num_experts // lay.num_ranks)
        local = (global_idx >= start) & (global_idx < start + lay.num_experts // lay.num_ranks)
        recv_topk_idx = ops.cast(ops.where(local, global_idx - start, -1), prepared.idx_dtype)
        recv_x = fields["hidden"]
        if prepared.sf_dtype is not None:
            recv_x = (recv_x, ops.as_dtype(ops.byte_rows(fields["sf"], total, lay.num_sf_bytes), prepared.sf_dtype))
        weights = fields["topk_weights"] if prepared.with_weights else None
        handle = Handle(num_tokens=prepared.num_tokens, send_counts=prepared.send_counts,
                        combine_slots=prepared.combine_slots, combine_to_self=prepared.combine_to_self,
                        num_destinations=prepared.num_destinations,
                        recv_counts=np.asarray(recv_counts, dtype=np.int64), recv_slots=recv_slots,
                        recv_topk_idx=recv_topk_idx, recv_topk_weights=weights, dispatch_stride=stride,
                        combine_stride=lay.combine.record.num_bytes)
        counts = recv_counts.astype(np.int32)
        num_recv = ops.from_numpy(counts) if ops.kind == "torch" else counts  # host, as refs.py returns it
        src = fields["src_token_global_idx"].reshape(total)
        return DispatchResult(recv_x, recv_topk_idx, weights, src, num_recv, handle)

    # --- combine -------------------------------------------------------------------------
    def check_combine(self, y, handle: Handle, topk_weights):
        lay, ops = self.layout, self.ops
        if not isinstance(handle, Handle):
            raise _problem("handle", type(handle).__name__, "must be the handle of this buffer's dispatch")
        for name, value in (("y", y), ("topk_weights", topk_weights)):
            if value is not None and not ops.is_array(value):
                raise _problem(name, type(value).__name__, f"must be a {ops.kind} array like the buffer")
        n, hidden, topk = handle.num_recv_tokens, lay.hidden, lay.num_topk
        shape = tuple(int(d) for d in y.shape)
        if not ops.is_bfloat16(y) or shape not in ((n, hidden), (n, topk, hidden)):
            raise _problem("y", _describe(ops, y),
                           f"must be BF16 [num_recv_tokens = {n}, hidden = {hidden}] (each received token reduced over "
                           f"this rank's experts) or [{n}, num_topk = {topk}, {hidden}] (per top-k slot)")
        if topk_weights is not None and (ops.dtype_name(topk_weights) != "float32"
                                         or tuple(int(d) for d in topk_weights.shape) != (n, topk)):
            raise _problem("topk_weights", _describe(ops, topk_weights),
                           f"must be float32 [num_recv_tokens = {n}, num_topk = {topk}] or None")

    def _local_reduce(self, y, handle: Handle):
        """A token's top-k slots of this rank's experts: fp32 sum in top-k order of each slot's
        BF16 output weighted by its dispatched weight (``bf16(w * y)``), rounded to BF16
        (``refs.py`` ``grouped_reduce`` by rank)."""
        ops = self.ops
        acc = ops.zeros((int(y.shape[0]), int(y.shape[2])), ops.dtype("float32"), like=y)
        weights = handle.recv_topk_weights
        valid = ops.to_numpy(handle.recv_topk_idx) >= 0
        for j in range(int(y.shape[1])):
            token = ops.index(valid[:, j].nonzero()[0], like=y)
            if not len(token):
                continue
            contribution = ops.bf16_to_float32(ops.take(y[:, j], token))
            if weights is not None:
                w = ops.take(weights[:, j:j + 1], token)
                contribution = ops.bf16_to_float32(ops.float32_to_bf16(w * contribution))
            ops.index_add(acc, token, contribution)
        return ops.float32_to_bf16(acc)

    def prepare_combine(self, y, handle: Handle, topk_weights) -> CombineSend:
        """Validate (and reduce a 3-D ``y`` over this rank's slots); where the records go. Then
        :meth:`pack_combine_peers` packs the peers' records into the workspace while the
        counts travel; the tokens this rank sent itself go straight to their slots
        (:meth:`pack_combine_self`)."""
        self.check_combine(y, handle, topk_weights)
        partial = y if y.ndim == 2 else self._local_reduce(y, handle)
        stride = self.layout.combine.record.num_bytes
        counts = handle.recv_counts
        first = int(counts[:self.rank].sum())
        end = first + int(counts[self.rank])
        bypass = self.bypasses_self((end - first) * stride)
        if not bypass:
            first = end = 0  # every record travels, this rank's own included
        num_send = int(self.peer_counts(counts, bypass).sum())
        num_back = int(self.peer_counts(handle.send_counts, bypass).sum())
        workspace = self.workspace((num_send + num_back) * stride)
        send, landing = workspace[:num_send * stride], workspace[num_send * stride:]
        return CombineSend(send=send, landing=landing, partial=partial, topk_weights=topk_weights,
                           self_rows=(first, end), bypass_self=bypass, with_weights=topk_weights is not None,
                           like=y, fingerprint=self._fingerprint("combine", topk_weights is not None))

    def pack_combine_peers(self, prepared: CombineSend) -> None:
        """Pack one record per token received from a peer into ``prepared.send``: the rows
        before and after this rank's own, in receive order."""
        first, end = prepared.self_rows
        partial, weights = prepared.partial, prepared.topk_weights
        records = self._workspace_records(self.layout.combine.record)
        num_recv = int(partial.shape[0])
        for begin, stop, slot in ((0, first, 0), (end, num_recv, first)):
            if stop > begin:
                records.pack(slots=slot, hidden=partial[begin:stop],
                             topk_weights=None if weights is None else weights[begin:stop])

    def pack_combine_self(self, prepared: CombineSend, handle: Handle) -> None:
        """Write the partials of the tokens this rank sent itself straight into their slots
        ``(k, i)`` of the combine region (the peers' records meanwhile land in the workspace)."""
        first, end = prepared.self_rows
        if end == first:
            return
        ops = self.ops
        slots = ops.index(handle.combine_slots[handle.combine_to_self], like=self.buffer)
        weights = prepared.topk_weights
        self.combine_slots.pack(slots=slots, hidden=prepared.partial[first:end],
                                topk_weights=None if weights is None else weights[first:end])

    def _reduce_views(self):
        """The combine region's BF16 partials ``[rows, slots, hidden]`` and weights ``[rows,
        slots, num_topk]``: zero-copy views built once, or copies where the element type
        allows no view (then read afresh each call)."""
        if self._views is None:
            lay, records = self.layout, self.combine_slots
            hidden, weights = records.field_view("hidden"), records.field_view("topk_weights")
            cache = hidden is not None and weights is not None
            if not cache:
                fields = records.unpack(num_slots=lay.combine.num_slots, fields=["hidden", "topk_weights"], copy=False)
                hidden, weights = fields["hidden"], fields["topk_weights"]
            shape = (lay.combine.rows, lay.num_max_tokens_per_rank)
            views = (hidden[:lay.combine.num_slots].reshape(*shape, lay.hidden),
                     weights[:lay.combine.num_slots].reshape(*shape, lay.num_topk))
            if not cache:
                return views
            self._views = views
        return self._views

    # Tokens per block of the reduction: its fp32 rows stay in the cache between the additions.
    _REDUCE_BLOCK_BYTES = 2 << 20

    def finish_combine(self, prepared: CombineSend, handle: Handle, staging,
                       self_packed: bool = False) -> CombineResult:
        """Place each peer's partial at its slot ``(k, i)`` with one row scatter (and this
        rank's own partials unless ``self_packed``), zero the slots no partial reached (``k
        >=`` the token's destinations), then sum the rows ``k = 0, 1, ...`` in order through
        strided views of the region, in fp32, a block of tokens at a time, rounded once to BF16
        (``refs.py`` ``ordered_accumulate``). refs.py's sum starts from +0.0; this one starts
        from the first partial and adds +0.0 before rounding: the same bits (the two differ
        only in the sign of a zero sum), one pass less. A zeroed slot adds +0.0, which changes
        no such sum."""
        lay, ops = self.layout, self.ops
        np = _numpy()
        record = lay.combine.record
        stride, tokens, rows = record.num_bytes, lay.num_max_tokens_per_rank, lay.combine.rows
        with_weights = prepared.with_weights
        num_tokens = handle.num_tokens
        region, size = self.combine_slots.whole_records(size=True)
        peer_slots = handle.combine_slots[~handle.combine_to_self] if prepared.bypass_self else handle.combine_slots
        if len(peer_slots):
            received = staging[:len(peer_slots) * stride].reshape(len(peer_slots), stride)
            words = ops.as_words(received, size)
            if words is None:  # the staging's offset allows no words: move bytes
                region, size, words = self.combine_slots.whole_records_bytes(), 1, received
            ops.scatter_into(region, ops.index(peer_slots, like=self.buffer), words)
        if not self_packed:
            self.pack_combine_self(prepared, handle)
        destinations = handle.num_destinations
        used = int(destinations.max()) if num_tokens else 0
        if num_tokens and int(destinations.min()) < rows:
            empty = np.concatenate([k * tokens + np.nonzero(destinations <= k)[0] for k in range(rows)])
            ops.zero_at(region, ops.index(empty, like=self.buffer))
        hidden, weights = self._reduce_views()
        combined = ops.empty((num_tokens, lay.hidden), ops.dtype("bfloat16"), like=self.buffer)
        f32 = ops.dtype("float32")
        block = max(1, min(num_tokens, self._REDUCE_BLOCK_BYTES // (4 * lay.hidden)))
        if num_tokens and (self._accumulator is None or int(self._accumulator.shape[0]) < block):
            self._accumulator = ops.empty((block, lay.hidden), f32, like=self.buffer)
        for start in range(0, num_tokens, block):
            end = min(start + block, num_tokens)
            acc = self._accumulator[:end - start]
            ops.load_bfloat16(acc, hidden[0, start:end])
            for k in range(1, used):
                ops.add_bfloat16(acc, hidden[k, start:end])
            ops.store_bfloat16(combined[start:end], acc)
        combined_weights = None
        if with_weights:
            combined_weights = ops.zeros((num_tokens, lay.num_topk), f32, like=self.buffer)
            for k in range(used):
                combined_weights += weights[k, :num_tokens]
        return CombineResult(combined, combined_weights)


@lru_cache(maxsize=64)
def _later(num_topk: int):
    """``[1, k, k]`` booleans: slot ``j2`` comes after slot ``j``."""
    np = _numpy()
    return np.triu(np.ones((num_topk, num_topk), dtype=bool), 1)[None]


_NP: list = []


def _numpy():
    if not _NP:
        from ..codec._arrays import numpy_ops

        _NP.append(numpy_ops().np)
    return _NP[0]
