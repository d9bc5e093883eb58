"""Byte-map diagrams as plain SVG text (no dependency).

For every token record of a report: a bar of coloured fields drawn to scale, with the
offsets of field boundaries, and — when one field (the hidden data) dwarfs the rest — a
zoomed bar of the record's tail so the scale factors, indices, weights and padding can
be read (and one of the head, when a small header precedes it). Fields that a reader view places past the record stride are drawn beyond the
record's end in red. Then, for every region that is an array of records, a grid of
slots (ranks x tokens) with each slot's byte offset.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from .report import RecordLayout, Region, Report
from .units import format_bytes, format_int

__all__ = ["render_svg", "check_svg_path", "FIELD_COLORS"]

FIELD_COLORS = {
    "hidden": "#4e79a7",
    "sf": "#f28e2b",
    "topk_idx": "#e15759",
    "topk_weights": "#76b7b2",
    "src_token_global_idx": "#59a14f",
    "padding": "#e6e6e6",
}
_FALLBACK = ("#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#86bcb6", "#d4a6c8", "#8cd17d")

WIDTH = 1100
LEFT = 40
BAR_WIDTH = WIDTH - 2 * LEFT - 60  # room on the right for fields past the record end
BAR_HEIGHT = 30
FONT = "font-family='DejaVu Sans, Arial, sans-serif'"


def _color(name: str, extra: dict[str, str]) -> str:
    if name in FIELD_COLORS:
        return FIELD_COLORS[name]
    if name not in extra:
        extra[name] = _FALLBACK[len(extra) % len(_FALLBACK)]
    return extra[name]


def _text(x: float, y: float, text: str, size: int = 12, anchor: str = "start", color: str = "#222",
          weight: str = "normal") -> str:
    return (f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' text-anchor='{anchor}' fill='{color}' "
            f"font-weight='{weight}' {FONT}>{escape(text)}</text>")


_CHAR_WIDTH = {10: 6.0, 11: 6.6, 12: 7.2, 14: 8.8, 18: 11.0}  # DejaVu Sans, average advance per character
_LABEL_ROWS = 3


def _width(text: str, size: int) -> float:
    return len(text) * _CHAR_WIDTH.get(size, size * 0.6)


def _wrap(text: str, size: int, width: float = WIDTH - 2 * LEFT) -> list[str]:
    """``text`` broken at spaces into lines that fit ``width`` pixels at font ``size``."""
    limit = max(10, int(width / _CHAR_WIDTH.get(size, size * 0.6)))
    lines: list[str] = []
    line = ""
    for word in text.split(" "):
        candidate = f"{line} {word}" if line else word
        if len(candidate) <= limit or not line:
            line = candidate
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return lines


def _bar(record: RecordLayout, start: int, end: int, y: float, extra: dict[str, str], label_offsets: bool) -> list[str]:
    """Fields intersecting ``[start, end)`` drawn from x=LEFT, scaled so ``end - start`` spans BAR_WIDTH.
    Anything past the record stride is outlined in red. Every field boundary gets a tick; its
    offset is written in the first of three label rows where it does not touch a neighbour,
    and left out (the zoomed bar shows it) when no row has room."""
    out: list[str] = []
    span = max(1, end - start)
    scale = BAR_WIDTH / span
    stride = record.num_bytes
    row_ends = [-1e9] * _LABEL_ROWS
    labels: list[str] = []  # drawn after every tick and leader line
    for f in record.fields:
        lo, hi = max(f.offset, start), min(f.end, end)
        if hi <= lo:
            continue
        x0 = LEFT + (lo - start) * scale
        w = max(1.0, (hi - lo) * scale)
        past = f.end > stride
        stroke = "stroke='#d62728' stroke-width='2' stroke-dasharray='4 2'" if past else "stroke='#ffffff' stroke-width='1'"
        fill = _color(f.name, extra)
        pattern = " fill-opacity='0.55'" if f.is_padding else ""
        out.append(f"<rect x='{x0:.1f}' y='{y:.1f}' width='{w:.1f}' height='{BAR_HEIGHT}' fill='{fill}'{pattern} {stroke}>"
                   f"<title>{escape(f.name)}: bytes {f.offset}..{f.end} ({f.num_bytes} B)</title></rect>")
        label = "pad" if f.is_padding else f.name
        if w >= _width(label, 11) + 6:
            color = "#333" if f.is_padding else "#fff"
            out.append(_text(x0 + w / 2, y + BAR_HEIGHT / 2 + 4, label, 11, "middle", color))
        if label_offsets:
            text = format_int(lo)
            half = _width(text, 10) / 2
            out.append(f"<line x1='{x0:.1f}' y1='{y + BAR_HEIGHT:.1f}' x2='{x0:.1f}' y2='{y + BAR_HEIGHT + 4:.1f}' "
                       f"stroke='#555'/>")
            for row in range(_LABEL_ROWS):
                if x0 - half >= row_ends[row] + 4:
                    drop = 4 + 12 * row
                    if row:
                        out.append(f"<line x1='{x0:.1f}' y1='{y + BAR_HEIGHT + 4:.1f}' x2='{x0:.1f}' "
                                   f"y2='{y + BAR_HEIGHT + drop:.1f}' stroke='#bbb'/>")
                    # A white patch under the label hides the leader lines of the rows below it.
                    labels.append(f"<rect x='{x0 - half - 1:.1f}' y='{y + BAR_HEIGHT + 5 + 12 * row:.1f}' "
                                  f"width='{2 * half + 2:.1f}' height='11' fill='white'/>")
                    labels.append(_text(x0, y + BAR_HEIGHT + 14 + 12 * row, text, 10, "middle", "#444"))
                    row_ends[row] = x0 + half
                    break
    out += labels
    # The record's end, and a marker for reads past it.
    if start < stride <= end:
        xs = LEFT + (stride - start) * scale
        out.append(f"<line x1='{xs:.1f}' y1='{y - 6:.1f}' x2='{xs:.1f}' y2='{y + BAR_HEIGHT + 6:.1f}' stroke='#d62728' stroke-width='2'/>")
        label = f"record end {format_int(stride)}"
        if xs + 4 + _width(label, 10) <= WIDTH - 4:
            out.append(_text(xs + 4, y - 8, label, 10, "start", "#d62728"))
        else:  # no room right of the line: the label ends at it
            out.append(_text(xs - 4, y - 8, label, 10, "end", "#d62728"))
    return out


def _zoom_windows(record: RecordLayout, end: int) -> list[tuple[int, int]]:
    """Byte windows worth a zoomed bar: around the small fields before and after the one field
    that dwarfs the rest (a 16-byte message header before the hidden data, the scales and
    indices after it), with up to 32 bytes of the big field for context."""
    biggest = max(record.fields, key=lambda f: f.num_bytes)
    if biggest.num_bytes <= 0.7 * record.num_bytes:
        return []
    context = min(biggest.num_bytes, 32)
    windows = []
    if biggest.offset > 0:
        windows.append((0, biggest.offset + context))
    if biggest.end < end:
        windows.append((biggest.end - context, end))
    return windows


def _record_block(record: RecordLayout, y: float, extra: dict[str, str]) -> tuple[list[str], float]:
    out: list[str] = []
    view = f", {record.view} view" if record.view else ""
    over = record.overrun_bytes()
    title = f"{record.name}: {format_int(record.num_bytes)} B per record{view}"
    if over:
        title += f" — fields end {over} B past the record"
    for line in _wrap(title, 14):
        out.append(_text(LEFT, y, line, 14, weight="bold", color="#d62728" if over else "#222"))
        y += 18
    end = record.num_bytes + over
    y += 6
    out += _bar(record, 0, end, y, extra, label_offsets=True)
    y += BAR_HEIGHT + 12 * _LABEL_ROWS + 20
    for zoom_start, zoom_end in _zoom_windows(record, end):
        out.append(_text(LEFT, y, f"zoom: bytes {format_int(zoom_start)}..{format_int(zoom_end)} "
                                  f"(x{end / max(1, zoom_end - zoom_start):.0f})", 11, color="#555"))
        y += 18
        out += _bar(record, zoom_start, zoom_end, y, extra, label_offsets=True)
        y += BAR_HEIGHT + 12 * _LABEL_ROWS + 20
    return out, y


def _grid(title: str, note: str, rows: int, slots: int, stride: int, base: int, y: float) -> tuple[list[str], float]:
    """A grid of slots (the first rows and slots, and the last of each) with each slot's byte
    offset ``base + r x slots x stride + t x stride`` from the start of its region."""
    out = []
    for line in _wrap(title, 14):
        out.append(_text(LEFT, y, line, 14, weight="bold"))
        y += 18
    for line in _wrap(note, 11):
        out.append(_text(LEFT, y, line, 11, color="#555"))
        y += 15
    y += 4
    show_rows = list(range(min(rows, 3))) + ([rows - 1] if rows > 3 else [])
    show_slots = list(range(min(slots, 4))) + ([slots - 1] if slots > 4 else [])
    cell_w, cell_h, label_w = 150, 26, 90
    for i, r in enumerate(show_rows):
        if rows > 3 and i == 3:
            out.append(_text(LEFT + label_w / 2, y + 12, "...", 14, "middle"))
            y += 18
        out.append(_text(LEFT, y + cell_h / 2 + 4, f"row {format_int(r)}", 11))
        for j, t in enumerate(show_slots):
            x = LEFT + label_w + j * (cell_w + 6) + (40 if slots > 4 and j == 4 else 0)
            if slots > 4 and j == 4:
                out.append(_text(x - 24, y + cell_h / 2 + 4, "...", 14, "middle"))
            label = f"t={format_int(t)}: {format_int(base + r * slots * stride + t * stride)}"
            size = 10 if _width(label, 10) <= cell_w - 8 else max(6, int((cell_w - 8) / (len(label) * 0.6)))
            out.append(f"<rect x='{x}' y='{y:.1f}' width='{cell_w}' height='{cell_h}' fill='#4e79a7' fill-opacity='0.15' "
                       f"stroke='#4e79a7'/>")
            out.append(_text(x + cell_w / 2, y + cell_h / 2 + 4, label, size, "middle"))
        y += cell_h + 6
    return out, y + 20


def _stride(num_bytes: int, rows: int, slots: int, record: RecordLayout | None) -> int:
    """Bytes per slot: the region's bytes over its slots (a slot may be larger than its record)."""
    if rows * slots and num_bytes % (rows * slots) == 0:
        return num_bytes // (rows * slots)
    return record.num_bytes if record else 0


def _holds(record: RecordLayout | None, stride: int) -> str:
    """``; record: NAME`` (and how much of each slot it fills when it is smaller)."""
    if record is None:
        return ""
    if record.num_bytes == stride:
        return f"; record: {record.name}"
    return f"; record: {record.name} ({format_int(record.num_bytes)} B of each slot)"


def _region_blocks(buffer: str, region: Region, records: dict[str, RecordLayout], fields: int,
                   y: float) -> tuple[list[str], float]:
    """The slot grids of ``region`` (of ``buffer``): one for a region that is an array of slots
    (``shape``), one per array of a composite region (``arrays``). ``fields`` > 1: the region is
    the first of that many field arrays of the same shape (DeepEP V1's hints), the others get a
    line each (drawn by the caller)."""
    out: list[str] = []
    total = f" = {format_int(region.num_bytes)} B ({format_bytes(region.num_bytes)})"
    if region.arrays:
        for a in region.arrays:
            rows, slots = a.shape
            record = records.get(a.record)
            stride = _stride(a.num_bytes, rows, slots, record)
            title = (f"{buffer} / {region.name} / {a.name}: {format_int(rows)} x {format_int(slots)} slots x "
                     f"{format_int(stride)} B = {format_int(a.num_bytes)} B{_holds(record, stride)}")
            note = (f"bytes {format_int(a.offset)}..{format_int(a.offset + a.num_bytes)} of the {region.name} region "
                    f"({format_bytes(region.num_bytes)}); offset(row r, slot t) = {format_int(a.offset)} + "
                    f"r x {format_int(slots)} x {format_int(stride)} + t x {format_int(stride)}")
            block, y = _grid(title, note, rows, slots, stride, a.offset, y)
            out += block
        return out, y
    rows, slots = region.shape
    record = records.get(region.record)
    stride = _stride(region.num_bytes, rows, slots, record)
    what = _holds(record, stride)
    note = (f"offset(row r, slot t) = r x {format_int(slots)} x {format_int(stride)} + t x {format_int(stride)}, "
            "from the region's start")
    if fields > 1:
        note += f"; one field per slot: this and the {fields - 1} field arrays below have the same rows and slots"
    return _grid(f"{buffer} / {region.name}: {format_int(rows)} x {format_int(slots)} slots x {format_int(stride)} B"
                 + total + what, note, rows, slots, stride, 0, y)


def _field_line(region: Region, y: float, same_as: str = "") -> tuple[list[str], float]:
    """One line for a region whose grid would repeat one drawn before (a field array of the same
    shape, or DeepEP's second low-latency buffer set)."""
    rows, slots = region.shape
    stride = region.num_bytes // max(1, rows * slots)
    text = (f"{region.name}: {format_int(rows)} x {format_int(slots)} slots x {format_int(stride)} B = "
            f"{format_int(region.num_bytes)} B ({format_bytes(region.num_bytes)}); offset(row r, slot t) = "
            f"r x {format_int(slots)} x {format_int(stride)} + t x {format_int(stride)}")
    if same_as:
        text = f"{region.name}: the same slots as {same_as} ({format_int(rows)} x {format_int(slots)} x " \
               f"{format_int(stride)} B = {format_bytes(region.num_bytes)}; offsets from its own start)"
    out = []
    for line in _wrap(text, 11):
        out.append(_text(LEFT + 20, y, line, 11, color="#333"))
        y += 15
    return out, y + 3


def _field_groups(regions) -> list[list[Region]]:
    """Regions with a grid; adjacent field arrays (no record, the same shape) grouped together."""
    groups: list[list[Region]] = []
    previous = None
    for region in regions:
        field_array = len(region.shape) == 2 and not region.record and not region.arrays
        if field_array and previous is not None and previous.shape == region.shape:
            groups[-1].append(region)
        elif region.arrays or len(region.shape) == 2:
            groups.append([region])
        previous = region if field_array else None
    return groups


def check_svg_path(path: str, option: str = "--svg") -> None:
    """Refuse a file name whose extension names another format (``x.png``, ``x.pdf``): the
    diagram is SVG text. Names without an extension (``-``, ``/dev/stdout``) are fine.

    Raises:
        EpbufError: one line naming ``option`` and the path.
    """
    import os

    suffix = os.path.splitext(os.path.basename(path))[1].lower()
    if suffix not in ("", ".svg"):
        from .errors import EpbufError

        raise EpbufError(f"{option}: {path}: the byte map is SVG; name the file .svg (convert it for PNG, "
                         "e.g. with cairosvg or rsvg-convert)")


def render_svg(report: Report) -> str:
    """The whole diagram for ``report`` as an SVG document string."""
    extra: dict[str, str] = {}
    body: list[str] = []
    y = 30.0
    for line in _wrap(f"{report.title} — token record byte maps", 18):
        body.append(_text(LEFT, y, line, 18, weight="bold"))
        y += 22
    inputs = ", ".join(f"{k}={v}" for k, v in report.inputs.items() if v is not None)
    for line in _wrap(inputs, 11):
        body.append(_text(LEFT, y, line, 11, color="#555"))
        y += 15
    y += 15
    for record in report.records:
        block, y = _record_block(record, y, extra)
        body += block
    records = {r.name: r for r in report.records}
    for buffer in report.buffers:
        drawn: dict[tuple, str] = {}
        for group in _field_groups(buffer.regions):
            first = group[0]
            key = (first.shape, first.record, first.num_bytes, len(group)) if not first.arrays else None
            if key in drawn:  # DeepEP's second low-latency buffer set: the grid of the first again
                y -= 8
                for region in group:
                    block, y = _field_line(region, y, same_as=drawn[key])
                    body += block
                y += 16
                continue
            if key is not None:
                drawn[key] = first.name
            block, y = _region_blocks(buffer.name, first, records, len(group), y)
            body += block
            if len(group) > 1:
                y -= 8
                for region in group[1:]:
                    block, y = _field_line(region, y)
                    body += block
                y += 16
    # Legend, at the bottom: exactly the fields the records have, in the order they appear.
    names = list(dict.fromkeys(f.name for record in report.records for f in record.fields))
    x = LEFT
    for name in names:
        color = _color(name, extra)
        step = 26 + _width(name, 11)
        if x + step > WIDTH - LEFT and x > LEFT:
            x = LEFT
            y += 20
        body.append(f"<rect x='{x:.1f}' y='{y:.1f}' width='14' height='14' fill='{color}' stroke='#999'/>")
        body.append(_text(x + 18, y + 12, name, 11))
        x += step
    y += 34
    height = int(y)
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{height}' viewBox='0 0 {WIDTH} {height}'>\n"
            f"<rect width='100%' height='100%' fill='white'/>\n" + "\n".join(body) + "\n</svg>\n")
