"""DeepEP-Ascend's dispatch writer against its receive epilogue, on real bytes.

The dispatch kernel writes a token record as ``num_hidden_bytes`` of data followed by a
metadata block laid out by ``TokenLayout(0, sf, topk)`` (``impls/ep/dispatch.hpp:402-416,
440-442, 635-636``); the receive epilogue reads SF packs, top-k indices, weights and the
source index through ``TokenLayout``'s getters, which start the SF packs at
``align(num_hidden_bytes, 32)`` (``impls/ep/dispatch_copy_epilogue.hpp``, ``token.hpp:53-82``).
:func:`replay` writes a sample token and the token after it into two consecutive slots
with the writer's byte map and reads the first slot back with the getters' byte map,
both from :mod:`epbuf.backends.ascend` (``TokenLayout.writer_record`` /
``reader_record``). When ``num_hidden_bytes % 32 == 0`` the two maps coincide and every
field comes back as written; otherwise (FP8, hidden 7000, top-k 6) the reader gets
shifted scales, expert ids and weights, and a source index made of the next slot's first
four bytes.

Standard library only (``struct``), so ``epbuf replay`` starts as fast as the other
commands. The sample values are synthetic and chosen to be recognisable: scale ``k`` is
``(k + 1) / 448`` (the scale of a block whose amax is ``k + 1``), weight ``j`` is
``2**-(j + 1)``, expert ids are spread over the experts.

JSON schema ``epbuf.replay/1`` (:func:`replay_to_dict`): ``schema``, ``backend``,
``upstream``, ``inputs`` (the report's), ``num_slot_bytes`` (the record stride),
``writer`` and ``reader`` (record objects as in ``epbuf.report/1`` ``records[]``),
``sample`` {``slot`` (0), ``src_token_global_idx``, ``next_src_token_global_idx`` (slot 1)},
``fields[]`` {``name``, ``dtype``, ``count``, ``num_bytes``, ``written_offset``,
``read_offset``, ``read_end``, ``reads_next_slot`` (the read ends past the stride),
``written``, ``read`` (element lists: integers, floats, FP8 codes, BF16 bit patterns),
``num_differing`` (elements), and for the SF packs when they hold whole fp32 scales
``written_float32`` / ``read_float32``}, ``consistent`` (every field read as written),
``findings[]`` (the report's, as in ``epbuf.report/1``).

>>> import epbuf
>>> r = replay(epbuf.Plan(hidden=7000, num_topk=6, num_experts=256, num_ranks=8, num_max_tokens_per_rank=4096))
>>> [(f.name, f.num_differing) for f in r.fields]
[('hidden', 0), ('sf', 109), ('topk_idx', 6), ('topk_weights', 6), ('src_token_global_idx', 1)]
>>> r.field("topk_idx").written, r.field("topk_idx").read
((21, 64, 106, 149, 192, 234), (64, 106, 149, 192, 234, 0))
"""

from __future__ import annotations

import struct

from .._record import Record
from ..report import RecordLayout, _record_dict
from ..units import format_int

__all__ = ["ReplayField", "Replay", "replay", "replay_to_dict", "render_replay", "SCHEMA"]

SCHEMA = "epbuf.replay/1"
WRITER_SOURCE = "deep_ep/include/deep_ep/impls/ep/dispatch.hpp:402-416, 440-442, 635-636"
READER_SOURCE = "deep_ep/include/deep_ep/impls/ep/dispatch_copy_epilogue.hpp via TokenLayout getters (token.hpp:53-82)"

# record dtype -> struct format of one element (little-endian, as the devices are)
_FORMATS = {"uint8": "B", "float8_e4m3fn": "B", "bfloat16": "H", "int16": "h", "int32": "i", "int64": "q",
            "float32": "f"}


class ReplayField(Record):
    """One field: where the writer put it, where the reader looked, and the values."""

    name: str
    dtype: str
    count: int
    num_bytes: int
    written_offset: int
    read_offset: int
    written: tuple
    read: tuple
    num_slot_bytes: int

    @property
    def read_end(self) -> int:
        return self.read_offset + self.num_bytes

    @property
    def reads_next_slot(self) -> bool:
        return self.read_end > self.num_slot_bytes

    @property
    def num_differing(self) -> int:
        """Elements (of ``dtype``) read differently from how they were written."""
        return _num_differing(self.written, self.read)

    def as_float32(self, values: tuple) -> tuple | None:
        """int16 SF packs as the fp32 scales they carry (two packs each), when whole."""
        if self.dtype != "int16" or self.num_bytes % 4:
            return None
        raw = struct.pack(f"<{len(values)}h", *values)
        return struct.unpack(f"<{len(raw) // 4}f", raw)


def _num_differing(written: tuple, read: tuple) -> int:
    return sum(1 for w, r in zip(written, read) if _bits(w) != _bits(r))


def _bits(value: object) -> object:
    """Compare floats by their bits (NaN == NaN, 0.0 != -0.0)."""
    return struct.pack("<f", value) if isinstance(value, float) else value


class Replay(Record):
    """A sample token written as the dispatch kernel does and read as the receive epilogue does."""

    backend: str
    upstream: str
    inputs: dict
    writer: RecordLayout
    reader: RecordLayout
    src_token_global_idx: int
    next_src_token_global_idx: int
    fields: tuple
    findings: tuple

    @property
    def consistent(self) -> bool:
        return all(f.num_differing == 0 for f in self.fields)

    def field(self, name: str) -> ReplayField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


def _sample_values(field, src_token_global_idx: int, num_experts: int) -> tuple:
    """Synthetic, recognisable values of one field of token ``src_token_global_idx``."""
    n = field.count
    if field.name == "hidden":
        if field.dtype == "bfloat16":  # positive BF16 numbers in [2**-7, 2**-6)
            return tuple(0x3C00 + ((i * 37 + src_token_global_idx * 11) % 0x80) for i in range(n))
        # FP8 e4m3fn codes below 0x7F (never NaN), some negative
        return tuple(((i + src_token_global_idx) * 37 + 11) % 0x7F | (0x80 if (i + src_token_global_idx) % 3 == 0 else 0)
                     for i in range(n))
    if field.name == "sf":
        if field.num_bytes % 4 == 0:  # fp32 scales (k + 1) / 448, as two int16 packs each
            raw = struct.pack(f"<{field.num_bytes // 4}f", *((k + 1) / 448 for k in range(field.num_bytes // 4)))
            return struct.unpack(f"<{n}h", raw)
        return tuple(k + 1 for k in range(n))
    if field.name == "topk_idx":  # spread over the experts: 21, 64, 106, 149, 192, 234 for 256 / top-6
        return tuple(min(num_experts - 1, (2 * j + 1) * num_experts // (2 * n)) for j in range(n))
    if field.name == "topk_weights":
        return tuple(2.0 ** -(j + 1) for j in range(n))
    if field.name == "src_token_global_idx":
        return (src_token_global_idx,)
    return (0,) * n


def _format(field) -> str:
    return f"<{field.count}{_FORMATS[field.dtype]}"


def replay(plan) -> Replay:
    """Write the sample token (source rank ``num_ranks - 1``, its token 0; rank 0 when that
    index would not fit upstream's int) into slot 0 and the
    next token into slot 1 of a two-slot buffer with the dispatch kernel's byte map, and
    read slot 0 with the receive epilogue's. See the module docstring.

    Raises:
        InvalidArgumentError: a plan DeepEP-Ascend cannot size (as ``epbuf.report``).
    """
    from ..backends import ascend
    from ..plan import report

    rep = report(plan, "ascend")
    reader_in_report = rep.record("dispatch")
    hidden = reader_in_report.field("hidden")
    token_layout = ascend.get_dispatch_token_layout(hidden.num_bytes, rep.inputs["num_sf_packs"],
                                                    rep.quantity("num_topk"))
    reader = token_layout.reader_record("dispatch", hidden.dtype)
    writer = token_layout.writer_record("dispatch (as written)", hidden.dtype)
    assert reader == reader_in_report, "the replay reads the report's own record"
    stride = writer.num_bytes
    num_experts = plan.num_total_experts
    sample = (plan.num_ranks - 1) * plan.num_max_tokens_per_rank
    if sample + 1 > (1 << 31) - 1:
        # The global index is an int upstream; past it (a plan whose kernel limits already fail,
        # see the report) the last rank's index cannot be written, so rank 0 gives the sample.
        sample = 0
    buffer = bytearray(2 * stride)
    for slot, src in ((0, sample), (1, sample + 1)):
        for f in writer.data_fields():
            struct.pack_into(_format(f), buffer, slot * stride + f.offset, *_sample_values(f, src, num_experts))
    fields = []
    for w in writer.data_fields():
        r = reader.field(w.name)
        fields.append(ReplayField(
            name=w.name, dtype=w.dtype, count=w.count, num_bytes=w.num_bytes, written_offset=w.offset,
            read_offset=r.offset, written=_sample_values(w, sample, num_experts),
            read=struct.unpack_from(_format(r), buffer, r.offset), num_slot_bytes=stride))
    findings = tuple(f for f in rep.findings if f.code in ("ascend.reader-writer-mismatch", "ascend.unaligned-fields"))
    return Replay(backend="ascend", upstream=rep.upstream, inputs=dict(rep.inputs), writer=writer, reader=reader,
                  src_token_global_idx=sample, next_src_token_global_idx=sample + 1, fields=tuple(fields),
                  findings=findings)


def replay_to_dict(result: Replay) -> dict:
    """The stable JSON form (schema ``epbuf.replay/1``, module docstring)."""
    fields = []
    for f in result.fields:
        entry = {"name": f.name, "dtype": f.dtype, "count": f.count, "num_bytes": f.num_bytes,
                 "written_offset": f.written_offset, "read_offset": f.read_offset, "read_end": f.read_end,
                 "reads_next_slot": f.reads_next_slot, "written": list(f.written), "read": list(f.read),
                 "num_differing": f.num_differing}
        as_float = f.as_float32(f.written)
        if as_float is not None:
            entry["written_float32"] = list(as_float)
            entry["read_float32"] = list(f.as_float32(f.read))
        fields.append(entry)
    return {
        "schema": SCHEMA, "backend": result.backend, "upstream": result.upstream, "inputs": dict(result.inputs),
        "num_slot_bytes": result.writer.num_bytes, "writer": _record_dict(result.writer),
        "reader": _record_dict(result.reader),
        "sample": {"slot": 0, "src_token_global_idx": result.src_token_global_idx,
                   "next_src_token_global_idx": result.next_src_token_global_idx},
        "fields": fields, "consistent": result.consistent,
        "findings": [{"severity": f.severity, "code": f.code, "message": f.message, "data": f.data}
                     for f in result.findings],
    }


def _short(values: tuple, limit: int = 8) -> str:
    """All values up to ``limit``, else the first three and the last two."""
    def one(v: object) -> str:
        return f"{v:.6g}" if isinstance(v, float) else str(v)

    if len(values) == 1:
        return one(values[0])
    if len(values) <= limit:
        return "[" + ", ".join(one(v) for v in values) + "]"
    return "[" + ", ".join(one(v) for v in values[:3]) + ", ..., " + ", ".join(one(v) for v in values[-2:]) + "]"


def render_replay(result: Replay, width: int | None = None) -> str:
    """The text form of ``epbuf replay``; lines fit ``width`` (None: each line whole)."""
    from ..render import finding_lines, render_inputs, table, wrap

    stride = result.writer.num_bytes
    pad = " " * 12
    out = wrap("DeepEP-Ascend dispatch record on real bytes: written as the dispatch kernel does, read as the "
               "receive epilogue does", width, "  ", "")
    out += wrap(result.upstream, width, pad, "  upstream: ")
    out += wrap(render_inputs(result.inputs), width, pad, "  inputs:   ")
    out += wrap(f"{WRITER_SOURCE} (hidden bytes, then the metadata block laid out with hidden = 0)", width, pad,
                "  writer:   ")
    out += wrap(READER_SOURCE, width, pad, "  reader:   ")
    out += wrap(f"2 slots of {format_int(stride)} B; slot 0 holds source token "
                f"{format_int(result.src_token_global_idx)} (the sample), slot 1 source token "
                f"{format_int(result.next_src_token_global_idx)}", width, pad, "  buffer:   ")
    out.append("")
    rows = []
    for f in result.fields:
        written, read, label, dtype = f.written, f.read, f.name, f.dtype
        as_float = f.as_float32(written)
        if as_float is not None:
            written, read, label, dtype = as_float, f.as_float32(read), f"{f.name} (fp32 scales)", "float32"
        note = " (next slot)" if f.reads_next_slot else ""
        rows.append([label, f"{dtype} x {format_int(len(written))}", format_int(f.written_offset),
                     format_int(f.read_offset) + note,
                     f"{format_int(_num_differing(written, read))}/{format_int(len(written))}",
                     _short(written), _short(read)])
    out.append(table(["field", "elements", "written at", "read at", "differ", "written", "read"], rows,
                     right={2, 3, 4}, width=width, below=(6, 5), wrap_columns=(1,)))
    out.append("")
    wrong = [f for f in result.fields if f.num_differing]
    if not wrong:
        out += wrap("every field reads back exactly as written: the writer's and the getters' byte maps coincide",
                    width, "  ", "")
    else:
        out += wrap(f"{len(wrong)} of {len(result.fields)} fields read back wrong: "
                    f"{', '.join(f.name for f in wrong)}", width, "  ", "")
        for f in result.fields:
            if f.reads_next_slot:
                out += wrap(f"{f.name} is read from bytes {format_int(f.read_offset)}..{format_int(f.read_end - 1)}: "
                            f"{format_int(f.read_end - stride)} B of it belong to the next slot (source token "
                            f"{format_int(result.next_src_token_global_idx)})", width, "    ", "  ")
    out += finding_lines(result.findings, width)
    return "\n".join(out) + "\n"
