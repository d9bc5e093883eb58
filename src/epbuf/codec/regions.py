"""Where a report's arrays of records sit: the region, its byte offset in its buffer, its
``(rows, slots)`` shape and the record each slot holds — read from the report, never
recomputed.

A :class:`~epbuf.report.Region` with ``shape = (rows, slots)`` is an array of records:
slot ``(r, t)`` starts at ``region offset + (r * slots + t) * stride`` (DeepEP-Ascend's
``BufferLayout::get_rank_buffer(r).get_token_buffer(t)``, ``token.hpp:118-128``). Regions
of a ``"max"`` buffer share its memory from offset 0; those of a ``"sum"`` buffer sit
side by side in report order.

>>> import epbuf
>>> rep = epbuf.report(epbuf.Plan(hidden=7168, num_topk=6, num_experts=256, num_ranks=8,
...                               num_max_tokens_per_rank=4096), "ascend")
>>> s = region_slots(rep, "dispatch")
>>> s.region.name, s.offset, s.rows, s.slots, s.record.num_bytes, s.buffer.num_bytes
('dispatch receive buffer', 0, 8, 4096, 7488, 354418688)
>>> s.slot_offset(7, 4095) + s.record.num_bytes <= s.buffer.num_bytes
True
"""

from __future__ import annotations

from .._record import Record
from ..errors import EpbufError
from ..report import Buffer, RecordLayout, Region, Report

__all__ = ["RegionSlots", "region_slots", "region_offset"]


class RegionSlots(Record):
    """An array of records in a buffer.

    Attributes:
        buffer: the allocation holding it.
        region: the region (``shape = (rows, slots)``).
        record: the record a real run writes in each slot (the hint may reserve a larger one).
        offset: the region's byte offset in ``buffer``.
        rows: e.g. source ranks; ``slots``: records per row.
    """

    buffer: Buffer
    region: Region
    record: RecordLayout
    offset: int
    rows: int
    slots: int

    @property
    def num_slots(self) -> int:
        return self.rows * self.slots

    @property
    def num_bytes(self) -> int:
        """Bytes the slots of a real run span."""
        return self.num_slots * self.record.num_bytes

    def slot_index(self, row: int, slot: int) -> int:
        """The flat slot number of ``(row, slot)``."""
        if not (0 <= row < self.rows and 0 <= slot < self.slots):
            raise IndexError(f"slot ({row}, {slot}) outside {self.rows} x {self.slots}")
        return row * self.slots + slot

    def slot_offset(self, row: int, slot: int) -> int:
        """Byte offset of slot ``(row, slot)`` in the buffer."""
        return self.offset + self.slot_index(row, slot) * self.record.num_bytes


def region_offset(buffer: Buffer, region: Region) -> int:
    """Byte offset of ``region`` in ``buffer``: 0 when the regions share the memory
    (``rule == "max"``), else the sum of the regions before it."""
    if buffer.rule == "max":
        return 0
    offset = 0
    for r in buffer.regions:
        if r is region or r == region:
            return offset
        offset += r.num_bytes
    raise KeyError(region.name)


def region_slots(report: Report, record: str) -> RegionSlots:
    """The array of ``record`` records of ``report`` (``"dispatch"``, ``"combine"``).

    A region names the record its *hint* reserves (``"dispatch (hint)"`` when the hint
    over-reserves SF packs); a real run writes ``record`` into the same ``(rows, slots)``
    grid, which must then span the region's ``num_bytes_used`` exactly.

    Raises:
        EpbufError: the report has no region of ``record`` records with a ``(rows, slots)``
            shape (today: ``deepep-v2`` and ``deepep-ll`` regions carry no shape).
    """
    names = [r.name for r in getattr(report, "records", ())]
    if record not in names:  # Report.record raises a bare KeyError
        raise EpbufError(f"record = {record!r}: not a record of the report; its records: {', '.join(names) or 'none'}")
    layout = report.record(record)
    for buffer in report.buffers:
        for region in buffer.regions:
            if len(region.shape) != 2 or region.record not in (record, f"{record} (hint)"):
                continue
            rows, slots = region.shape
            found = RegionSlots(buffer=buffer, region=region, record=layout, offset=region_offset(buffer, region),
                                rows=rows, slots=slots)
            if found.num_bytes != region.num_bytes_used:
                raise EpbufError(f"{report.backend}: region {region.name!r} of {rows} x {slots} slots uses "
                                 f"{region.num_bytes_used:,} B, not {found.num_bytes:,} B of {record!r} records")
            return found
    raise EpbufError(f"{report.backend}: no region of the report holds {record!r} records with a (rows, slots) "
                     "shape (Region.shape / Region.record); the codec needs them to place slots")
