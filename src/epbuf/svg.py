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
                    out.append(_text(x0, y + BAR_HEIGHT + 14 + 12 * row, text, 10, "middle", "#444"))
                    row_ends[row] = x0 + half
                    break
    # The record's end, and a marker for reads past it.
    if start < stride <= end:
        xs = LEFT + (stride - start) * scale
        out.append(f"<line x1='{xs:.1f}' y1='{y - 6:.1f}' x2='{xs:.1f}' y2='{y + BAR_HEIGHT + 6:.1f}' stroke='#d62728' stroke-width='2'/>")
        out.append(_text(xs + 4, y - 8, f"record end {format_int(stride)}", 10, "start", "#d62728"))
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


def _region_block(region: Region, record: RecordLayout | None, y: float) -> tuple[list[str], float]:
    rows, slots = region.shape
    stride = record.num_bytes if record else region.num_bytes // max(1, rows * slots)
    out = [_text(LEFT, y, f"{region.name}: {format_int(rows)} x {format_int(slots)} slots x "
                          f"{format_int(stride)} B = {format_int(region.num_bytes)} B ({format_bytes(region.num_bytes)})",
                 14, weight="bold")]
    y += 8
    out.append(_text(LEFT, y + 14, f"offset(row r, slot t) = r x {format_int(slots)} x {format_int(stride)} + "
                                   f"t x {format_int(stride)}", 11, color="#555"))
    y += 24
    show_rows = list(range(min(rows, 3))) + ([rows - 1] if rows > 3 else [])
    show_slots = list(range(min(slots, 4))) + ([slots - 1] if slots > 4 else [])
    cell_w, cell_h, label_w = 150, 26, 90
    for i, r in enumerate(show_rows):
        if rows > 3 and i == 3:
            out.append(_text(LEFT + label_w / 2, y + 12, "...", 14, "middle"))
            y += 18
        out.append(_text(LEFT, y + cell_h / 2 + 4, f"row {r}", 11))
        for j, t in enumerate(show_slots):
            x = LEFT + label_w + j * (cell_w + 6) + (40 if slots > 4 and j == 4 else 0)
            if slots > 4 and j == 4:
                out.append(_text(x - 24, y + cell_h / 2 + 4, "...", 14, "middle"))
            offset = r * slots * stride + t * stride
            out.append(f"<rect x='{x}' y='{y:.1f}' width='{cell_w}' height='{cell_h}' fill='#4e79a7' fill-opacity='0.15' "
                       f"stroke='#4e79a7'/>")
            out.append(_text(x + cell_w / 2, y + cell_h / 2 + 4, f"t={t}: {format_int(offset)}", 10, "middle"))
        y += cell_h + 6
    return out, y + 20


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

        raise EpbufError(f"{option}: {path}: the byte map is SVG; name the file .svg (for PNG, convert it, "
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
        for region in buffer.regions:
            if len(region.shape) == 2:
                block, y = _region_block(region, records.get(region.record), y)
                body += block
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
