"""One rank's memory and the count exchange, what dispatch and combine share: the buffer and
its two regions as arrays of records, the workspace, the layout fingerprint, the split sizes
of the exchange and the checks of what the peers sent.

Memory: besides the buffer, a rank keeps a workspace (send records, and the records a
combine receives before they move to their slots) and a small fp32 block for the reduction,
both grown to the largest call and reused: allocating them per call costs a page fault per
4 KiB on every call, more than the copies (``RankBase.workspace_num_bytes``).
"""

from __future__ import annotations

import zlib

from ..codec._arrays import numpy_ops, ops_for
from ..codec.record_slots import RecordSlots
from ..errors import ArgumentProblem, EpbufError, InvalidArgumentError
from ._layout import RuntimeLayout

__all__ = ["PeerError", "RankBase", "argument_error"]


class PeerError(EpbufError):
    """A peer refused its input, uses another layout, or the exchange failed or timed out."""


def argument_error(argument: str, value: object, allowed: str) -> InvalidArgumentError:
    return InvalidArgumentError([ArgumentProblem(argument, value, allowed)])


class RankBase:
    """One rank's buffer, workspace and count exchange; :class:`~epbuf.runtime._core.RankState`
    adds the steps of dispatch (:mod:`epbuf.runtime._dispatch`) and combine
    (:mod:`epbuf.runtime._combine`)."""

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

    def _fingerprint(self, *extra: object) -> int:
        """A number every rank computes alike from the layout and the call's dtypes (not
        ``hash``: string hashes differ between processes)."""
        return zlib.crc32((self._layout_key + repr(extra)).encode()) & 0x7FFFFFFF

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
        np = numpy_ops().np
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
