"""Backend-agnostic result records: byte maps, buffers, findings, limits, reports.

Every backend turns a :class:`~epbuf.plan.Plan` into a :class:`Report` built from
these records; the CLI, JSON output, diagrams and simulations read only these.
All sizes are ``int`` bytes; formatting happens at the edge (``epbuf.render``). Their stable
JSON form (schema ``epbuf.report/1``: ``report_to_dict``, ``report_from_dict``) is
:mod:`.json_form`, loaded on first use of those names (``epbuf hint`` without ``--json`` does not
need it).

Vocabulary
----------
Field
    One named byte range of a token record (``hidden``, ``sf``, ``topk_idx`` ...).
RecordLayout
    A token record: its stride (``num_bytes``) and its fields at their offsets.
Region
    One term of an allocation, e.g. "dispatch receive buffer = ranks x tokens x record".
    ``num_bytes`` is what the size hint reserves for it; ``num_bytes_used`` what a
    real run with the same shapes checks or touches (equal unless upstream's hint
    approximates, as Ascend's scale-factor count does).
Buffer
    One device allocation made of regions, combined by ``rule``: ``"max"`` (regions
    share the memory, e.g. dispatch and combine reuse one buffer) or ``"sum"``
    (regions sit side by side), then rounded up to ``alignment``.
Finding
    Something the user should know: an upstream inconsistency, a kernel limit, an
    approximation. ``severity`` is ``"error"`` (upstream will refuse or misbehave),
    ``"warning"`` or ``"info"``.
LimitCheck
    One upstream limit evaluated for this plan.
"""

from __future__ import annotations

from .._lazy import exports
from .._record import Record, factory

from ..units import align

__all__ = ["Field", "RecordLayout", "Region", "RecordArray", "Buffer", "Finding", "LimitCheck", "Quantity", "Report",
           "Summary"]


def _not_found(where: str, kind: str, name: object, items) -> Exception:
    """The error of a look-up by name that found nothing: one line listing the names there are."""
    from ..errors import NotInReportError

    names = ", ".join(repr(item.name) for item in items) or "none"
    return NotInReportError(f"{kind} {name!r} is not in {where}; it has: {names}")


class Field(Record):
    """A byte range ``[offset, offset + num_bytes)`` of a token record.

    Attributes:
        name: upstream's name for it (``hidden``, ``sf``, ``topk_idx``,
            ``topk_weights``, ``src_token_global_idx``, ``padding`` ...).
        offset: byte offset from the start of the record.
        num_bytes: length in bytes.
        dtype: element type as upstream stores it (``"int64"``, ``"float32"`` ...).
        count: number of elements of ``dtype`` (0 for padding).
    """

    name: str
    offset: int
    num_bytes: int
    dtype: str = "uint8"
    count: int = 0

    @property
    def end(self) -> int:
        return self.offset + self.num_bytes

    @property
    def is_padding(self) -> bool:
        return self.name == "padding"


class RecordLayout(Record):
    """One token record: stride ``num_bytes`` and its fields in offset order.

    ``fields`` includes explicit ``padding`` fields for every gap, so the fields of a
    consistent record tile ``[0, num_bytes)`` exactly. A record built from a view
    that disagrees with the stride (see Ascend's reader/writer finding) may have
    fields that end past ``num_bytes``; :meth:`overrun_bytes` says by how much.
    """

    name: str
    num_bytes: int
    fields: tuple[Field, ...]
    view: str = ""

    @classmethod
    def from_fields(cls, name: str, num_bytes: int, fields: list[Field], view: str = "") -> "RecordLayout":
        """Sort ``fields``, drop empty ones and insert ``padding`` for every gap."""
        ordered = sorted((f for f in fields if f.num_bytes > 0), key=lambda f: (f.offset, f.end))
        tiled: list[Field] = []
        cursor = 0
        for f in ordered:
            if f.offset > cursor:
                tiled.append(Field(name="padding", offset=cursor, num_bytes=f.offset - cursor))
            tiled.append(f)
            cursor = max(cursor, f.end)
        if cursor < num_bytes:
            tiled.append(Field(name="padding", offset=cursor, num_bytes=num_bytes - cursor))
        return cls(name=name, num_bytes=num_bytes, fields=tuple(tiled), view=view)

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise _not_found(f"record {self.name!r}", "field", name, self.fields)

    def data_fields(self) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if not f.is_padding)

    def overlaps(self) -> list[tuple[str, str]]:
        """Pairs of data fields whose byte ranges intersect."""
        data = self.data_fields()
        return [
            (a.name, b.name)
            for i, a in enumerate(data)
            for b in data[i + 1 :]
            if a.offset < b.end and b.offset < a.end
        ]

    def overrun_bytes(self) -> int:
        """How far the last field ends past the stride (0 when everything fits)."""
        return max(0, max((f.end for f in self.fields), default=0) - self.num_bytes)

    def padding_bytes(self) -> int:
        return sum(f.num_bytes for f in self.fields if f.is_padding)


class Region(Record):
    """One term of an allocation.

    Attributes:
        name: what it holds ("dispatch receive buffer").
        num_bytes: bytes the size hint reserves for it.
        num_bytes_used: bytes a real run with these shapes needs for it.
        formula: the arithmetic in words, with the numbers filled in.
        source: upstream ``file:line`` of the formula.
        shape: for a region that is an array of token slots, its ``(rows, slots)``
            (e.g. ``(num_ranks, num_max_tokens_per_rank)``); ``()`` otherwise. A slot is
            ``num_bytes / (rows x slots)`` bytes.
        record: the name of the :class:`RecordLayout` each slot holds (with ``shape``; it may be
            smaller than the slot, e.g. an FP8 message in a slot sized for BF16); ``""`` when
            each slot holds one field, the region being one of several field arrays (DeepEP
            V1's normal-mode hints).
        arrays: for a region made of several arrays of records one after another (DeepEP V2:
            a phase's receive and send buffers), each :class:`RecordArray` at its offset in the
            region; ``()`` otherwise.
    """

    name: str
    num_bytes: int
    num_bytes_used: int
    formula: str = ""
    source: str = ""
    shape: tuple = ()
    record: str = ""
    arrays: tuple = ()


class RecordArray(Record):
    """One array of token records inside a :class:`Region`.

    Attributes:
        name: upstream's name for it (``"scaleup_recv_buffer"``).
        offset: byte offset from the start of the region.
        shape: ``(rows, slots)``.
        record: the name of the :class:`RecordLayout` each slot holds.
        num_bytes: ``rows x slots x`` the record's stride.
    """

    name: str
    offset: int
    shape: tuple
    record: str
    num_bytes: int


class Buffer(Record):
    """One device allocation: regions combined by ``rule`` and rounded to ``alignment``.

    Attributes:
        name: e.g. "EP buffer", "NVL buffer", "workspace".
        regions: its terms.
        rule: ``"max"`` — regions reuse the same memory; ``"sum"`` — side by side.
        alignment: the allocation granularity upstream applies (1 = none).
        num_bytes: what upstream's hint allocates.
        num_bytes_needed: the smallest allocation, at the same alignment, that a real
            run with these shapes passes upstream's size checks with.
        source: upstream ``file:line`` of the combination / alignment.
    """

    name: str
    regions: tuple[Region, ...]
    rule: str
    alignment: int
    num_bytes: int
    num_bytes_needed: int
    source: str = ""

    @classmethod
    def combine(
        cls, name: str, regions: list[Region] | tuple[Region, ...], rule: str, alignment: int, source: str = ""
    ) -> "Buffer":
        """Build a buffer whose size is ``align(max|sum(regions), alignment)``."""
        op = max if rule == "max" else sum
        hint = op(r.num_bytes for r in regions) if regions else 0
        used = op(r.num_bytes_used for r in regions) if regions else 0
        return cls(
            name=name,
            regions=tuple(regions),
            rule=rule,
            alignment=alignment,
            num_bytes=align(hint, alignment),
            num_bytes_needed=align(used, alignment),
            source=source,
        )

    def binding_region(self) -> Region | None:
        """The region that sets the size (the largest, for ``rule == "max"``)."""
        if not self.regions:
            return None
        return max(self.regions, key=lambda r: r.num_bytes)


class Finding(Record):
    """Something a user should know about this plan.

    Attributes:
        severity: ``"error"`` (upstream refuses or misbehaves), ``"warning"``, ``"info"``.
        code: stable identifier, e.g. ``"ascend.reader-writer-mismatch"``.
        message: one or two sentences for people.
        data: the numbers behind it, for scripts.
    """

    severity: str
    code: str
    message: str
    data: dict = factory(dict)


class LimitCheck(Record):
    """An upstream limit evaluated for this plan: ``value <relation> bound``."""

    name: str
    value: int
    relation: str
    bound: int
    ok: bool
    source: str = ""
    enforced: str = "host"  # "host" assert, "kernel" static assert, "assumed" (not checked upstream)


class Quantity(Record):
    """A named number of the report that is neither a region nor a limit (e.g. SF pack counts)."""

    name: str
    value: int
    unit: str = ""
    source: str = ""


class Summary(Record):
    """The part of a report a sweep row needs, computable much faster than a full report.

    Attributes:
        num_bytes: total device allocation (``Report.num_bytes``).
        num_bytes_needed: what a real run needs (``Report.num_bytes_needed``).
        binding: the region that sets the largest buffer's size.
        broken: names of the upstream limits the plan breaks.
    """

    num_bytes: int
    num_bytes_needed: int
    binding: str
    broken: tuple = ()


def summary_of(report: "Report") -> Summary:
    """The summary of a full report (what backends without a fast path return)."""
    largest = max(report.buffers, key=lambda b: b.num_bytes)
    region = largest.binding_region()
    return Summary(num_bytes=report.num_bytes, num_bytes_needed=report.num_bytes_needed,
                   binding=region.name if region else largest.name,
                   broken=tuple(lim.name for lim in report.failed_limits()))


class Report(Record):
    """What one backend allocates for one plan, and why.

    Attributes:
        backend: backend name (``"ascend"``, ``"deepep-v2"`` ...).
        title: one line for people.
        upstream: the upstream version / commit the formulas follow.
        inputs: the plan values this backend used, after defaults (``num_topk`` 0 -> 32 ...).
        buffers: the device allocations; the total is their sum.
        records: byte maps of the token records.
        quantities: other named numbers of the computation.
        findings: inconsistencies, approximations and kernel limits worth knowing.
        limits: every upstream limit checked, with its value.
        host_buffers: allocations in (pinned) host memory, per device; *not* part of
            :attr:`num_bytes`, which is device memory only (UCCL-EP's proxy FIFOs, for example).
    """

    backend: str
    title: str
    upstream: str
    inputs: dict
    buffers: tuple[Buffer, ...]
    records: tuple[RecordLayout, ...] = ()
    quantities: tuple[Quantity, ...] = ()
    findings: tuple[Finding, ...] = ()
    limits: tuple[LimitCheck, ...] = ()
    host_buffers: tuple[Buffer, ...] = ()

    @property
    def num_bytes(self) -> int:
        """Total device allocation as upstream's hints size it."""
        return sum(b.num_bytes for b in self.buffers)

    @property
    def host_num_bytes(self) -> int:
        """Total host allocation (:attr:`host_buffers`), bytes; 0 for backends without any."""
        return sum(b.num_bytes for b in self.host_buffers)

    @property
    def num_bytes_needed(self) -> int:
        """Total allocation a real run with these shapes needs."""
        return sum(b.num_bytes_needed for b in self.buffers)

    def buffer(self, name: str) -> Buffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise _not_found(f"the {self.backend} report", "buffer", name, self.buffers)

    def record(self, name: str) -> RecordLayout:
        for r in self.records:
            if r.name == name:
                return r
        raise _not_found(f"the {self.backend} report", "record", name, self.records)

    def quantity(self, name: str) -> int:
        for q in self.quantities:
            if q.name == name:
                return q.value
        raise _not_found(f"the {self.backend} report", "quantity", name, self.quantities)

    def failed_limits(self) -> tuple[LimitCheck, ...]:
        return tuple(lim for lim in self.limits if not lim.ok)


def tightest_limit(report: Report) -> LimitCheck | None:
    """The limit that binds first: a broken one if any, else the ``<=`` limit whose value
    is closest to its bound (largest value / bound)."""
    broken = report.failed_limits()
    if broken:
        return broken[0]
    upper = [lim for lim in report.limits if lim.relation in ("<=", "<") and lim.bound > 0]
    if not upper:
        return None
    return max(upper, key=lambda lim: lim.value / lim.bound)


# _record_dict: epbuf.codec.replay writes its records in the report's JSON form.
__getattr__, __dir__ = exports(__name__, dict.fromkeys(("SCHEMA", "report_to_dict", "report_from_dict", "_record_dict"),
                                                       "json_form"))
