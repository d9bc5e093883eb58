"""Byte-map diagrams as plain SVG text (no dependency).

For every token record of a report: a bar of coloured fields drawn to scale, with the
offsets of field boundaries, and — when one field (the hidden data) dwarfs the rest — a
zoomed bar of the record's tail so the scale factors, indices, weights and padding can
be read. Fields that a reader view places past the record stride are drawn beyond the
record's end in red. Then, for every region that is an array of records, a grid of
slots (ranks x tokens) with each slot's byte offset.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from .report import RecordLayout, Region, Report
from .units import format_bytes, format_int

__all__ = ["render_svg", "FIELD_COLORS"]

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


def _bar(record: RecordLayout, start: int, end: int, y: float, extra: dict[str, str], label_offsets: bool) -> list[str]:
    """Fields intersecting ``[start, end)`` drawn from x=LEFT, scaled so ``end - start`` spans BAR_WIDTH.
    Anything past the record stride is outlined in red."""
    out: list[str] = []
    span = max(1, end - start)
    scale = BAR_WIDTH / span
    stride = record.num_bytes
    last_label_x = [-1e9, -1e9]  # two staggered label rows, so close boundaries still get a label
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
        if w >= 7 * len(label) + 6:
            color = "#333" if f.is_padding else "#fff"
            out.append(_text(x0 + w / 2, y + BAR_HEIGHT / 2 + 4, label, 11, "middle", color))
        if label_offsets:
            for row in (0, 1):
                if x0 - last_label_x[row] >= 44:
                    drop = 5 + 12 * row
                    out.append(f"<line x1='{x0:.1f}' y1='{y + BAR_HEIGHT:.1f}' x2='{x0:.1f}' "
                               f"y2='{y + BAR_HEIGHT + drop:.1f}' stroke='#555'/>")
                    out.append(_text(x0, y + BAR_HEIGHT + 16 + 12 * row, format_int(lo), 10, "middle", "#444"))
                    last_label_x[row] = x0
                    break
    # The record's end, and a marker for reads past it.
    if start < stride <= end:
        xs = LEFT + (stride - start) * scale
        out.append(f"<line x1='{xs:.1f}' y1='{y - 6:.1f}' x2='{xs:.1f}' y2='{y + BAR_HEIGHT + 6:.1f}' stroke='#d62728' stroke-width='2'/>")
        out.append(_text(xs + 4, y - 8, f"record end {format_int(stride)}", 10, "start", "#d62728"))
    return out


def _record_block(record: RecordLayout, y: float, extra: dict[str, str]) -> tuple[list[str], float]:
    out: list[str] = []
    view = f", {record.view} view" if record.view else ""
    over = record.overrun_bytes()
    title = f"{record.name}: {format_int(record.num_bytes)} B per record{view}"
    if over:
        title += f" — fields end {over} B past the record"
    out.append(_text(LEFT, y, title, 14, weight="bold", color="#d62728" if over else "#222"))
    y += 10
    end = record.num_bytes + over
    y += 14
    out += _bar(record, 0, end, y, extra, label_offsets=True)
    y += BAR_HEIGHT + 46
    data = [f for f in record.fields]
    biggest = max(data, key=lambda f: f.num_bytes)
    if biggest.num_bytes > 0.7 * record.num_bytes and biggest.end < end:
        zoom_start = biggest.end - min(biggest.num_bytes, 32)
        out.append(_text(LEFT, y, f"zoom: bytes {format_int(zoom_start)}..{format_int(end)} "
                                  f"(x{record.num_bytes / max(1, end - zoom_start):.0f})", 11, color="#555"))
        y += 18
        out += _bar(record, zoom_start, end, y, extra, label_offsets=True)
        y += BAR_HEIGHT + 46
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


def render_svg(report: Report) -> str:
    """The whole diagram for ``report`` as an SVG document string."""
    extra: dict[str, str] = {}
    body: list[str] = []
    y = 30.0
    body.append(_text(LEFT, y, f"{report.title} — token record byte maps", 18, weight="bold"))
    y += 20
    inputs = ", ".join(f"{k}={v}" for k, v in report.inputs.items() if v is not None)
    body.append(_text(LEFT, y, inputs[:170], 11, color="#555"))
    y += 30
    for record in report.records:
        block, y = _record_block(record, y, extra)
        body += block
    records = {r.name: r for r in report.records}
    for buffer in report.buffers:
        for region in buffer.regions:
            if len(region.shape) == 2:
                block, y = _region_block(region, records.get(region.record), y)
                body += block
    # Legend, at the bottom so it lists every colour used.
    names = list(FIELD_COLORS) + list(extra)
    x = LEFT
    for name in names:
        color = FIELD_COLORS.get(name) or extra[name]
        body.append(f"<rect x='{x}' y='{y:.1f}' width='14' height='14' fill='{color}' stroke='#999'/>")
        body.append(_text(x + 18, y + 12, name, 11))
        x += 26 + 7 * len(name)
        if x > WIDTH - 150:
            x = LEFT
            y += 20
    y += 34
    height = int(y)
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{height}' viewBox='0 0 {WIDTH} {height}'>\n"
            f"<rect width='100%' height='100%' fill='white'/>\n" + "\n".join(body) + "\n</svg>\n")
