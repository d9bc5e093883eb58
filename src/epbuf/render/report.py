"""One report for people: ``epbuf hint`` (records, buffers with their regions, totals, findings,
limits) and ``epbuf layout`` (the byte map of every token record)."""

from __future__ import annotations

from ..report import RecordLayout, Report
from ..units import format_bytes, format_int
from . import bytes_cell, finding_lines, header_lines, render_inputs, table, wrap

__all__ = ["render_report", "render_layout"]


def _record_summary(record: RecordLayout) -> str:
    parts = []
    for f in record.fields:
        if f.is_padding:
            parts.append(f"pad {f.num_bytes}")
        else:
            parts.append(f"{f.name} {f.num_bytes}")
    return " | ".join(parts)


def _buffer_lines(b, where: str = "", width: int | None = None, sources: bool = True) -> list[str]:
    """One buffer: its rule (and, with ``sources``, the upstream lines), the regions with
    formulas, the allocation and the real need."""
    rule = {"max": "max of the regions (they reuse the memory)", "sum": "sum of the regions"}[b.rule]
    align_text = f", aligned to {format_bytes(b.alignment)}" if b.alignment > 1 else ""
    where_text = f" ({where})" if where else ""
    source = f"   [{b.source}]" if b.source and sources else ""
    out = wrap(f"{b.name}{where_text} = {rule}{align_text}{source}", width, "    ", "")
    rows = []
    for r in b.regions:
        used = format_int(r.num_bytes_used) if r.num_bytes_used != r.num_bytes else "same"
        rows.append([r.name, format_int(r.num_bytes), format_bytes(r.num_bytes), used, r.formula])
    out.append(table(["region", "hint bytes", "", "real run", "formula"], rows, right={1, 2, 3}, width=width,
                     wrap_columns=(0, 4), below=4))
    pad = " " * 21
    if b.rule == "max" and len(b.regions) > 1:
        largest = b.binding_region()
        out += wrap(f"{bytes_cell(largest.num_bytes)}   ({largest.name})", width, pad, "  max:               ")
    out.append(f"  allocated (hint):  {bytes_cell(b.num_bytes)}")
    if b.num_bytes_needed < b.num_bytes:
        need = f"(hint over-reserves {bytes_cell(b.num_bytes - b.num_bytes_needed)})"
    elif b.num_bytes_needed > b.num_bytes:
        need = f"(hint UNDER-reserves {bytes_cell(b.num_bytes_needed - b.num_bytes)})"
    else:
        need = "(the hint reserves exactly this)"
    out += wrap(f"{bytes_cell(b.num_bytes_needed)}   {need}", width, pad, "  real need:         ")
    out.append("")
    return out


def render_report(report: Report, device: tuple[str, int] | None = None, verbose: bool = False,
                  budget: int | None = None, width: int | None = None) -> str:
    """The human form of ``epbuf hint``: records, buffers with their regions, totals,
    findings and limits. ``device`` is ``(name, capacity bytes)`` for the share line,
    ``budget`` the ``--budget`` bytes; lines are wrapped at ``width`` (None: not at all)."""
    out = [f"{report.title}"]
    out += header_lines("  upstream: ", report.upstream, width)
    out += header_lines("  inputs:   ", render_inputs(report.inputs), width)
    out.append("")

    if report.records:
        out.append("Token records (bytes per slot)")
        rows = [[r.name, format_int(r.num_bytes), _record_summary(r)] for r in report.records]
        out.append(table(["record", "bytes", "fields (bytes, in order)"], rows, right={1}, width=width,
                         wrap_columns=(0, 2)))
        out.append("")

    sources = verbose or width is None  # upstream lines of each buffer: --verbose / --wide
    for b in report.buffers:
        out.extend(_buffer_lines(b, width=width, sources=sources))
    for b in report.host_buffers:
        out.extend(_buffer_lines(b, where="host memory, not in the device total", width=width, sources=sources))

    if len(report.buffers) > 1:
        out += wrap(f"Total device allocation: {bytes_cell(report.num_bytes)}"
                    f"   (real need {bytes_cell(report.num_bytes_needed)})", width, "  ", "")
    if report.host_buffers:
        out += wrap(f"Total host allocation:   {bytes_cell(report.host_num_bytes)}   (per device, pinned)", width, "  ", "")
    if device is not None:
        from ..placement import capacity_label

        name, capacity = device
        share = report.num_bytes / capacity * 100
        state = "" if report.num_bytes <= capacity else "   DOES NOT FIT"
        out += wrap(f"Share of {capacity_label(name, capacity)}: {share:.2f} %{state}", width, "  ", "")
    if budget is not None:
        state = "fits" if report.num_bytes <= budget else "OVER BUDGET"
        out += wrap(f"Share of --budget {format_bytes(budget)}: {report.num_bytes / budget * 100:.2f} %   ({state})",
                    width, "  ", "")
    if len(report.buffers) > 1 or device is not None or budget is not None:
        out.append("")

    if report.findings:
        out.append("Findings")
        out += finding_lines(report.findings, width)
        out.append("")

    failed = report.failed_limits()
    shown = report.limits if verbose else failed
    if shown:
        out.append("Limits" + ("" if verbose else " broken"))
        rows = [[lim.name, format_int(lim.value), lim.relation,
                 "the set" if lim.relation == "in" else format_int(lim.bound), "ok" if lim.ok else "BROKEN",
                 lim.source] for lim in shown]
        out.append(table(["limit", "value", "", "bound", "", "source"], rows, right={1, 3}, width=width,
                         wrap_columns=(0,), below=5))
        if not sources:
            out += wrap("(--verbose lists every limit and the sources of the buffers)", width)
    else:
        out += wrap(f"Limits: all {len(report.limits)} upstream limits hold (--verbose lists them"
                    + (", with the sources of the buffers)" if not sources else ")"), width, "  ", "")
    return "\n".join(out).rstrip() + "\n"


def render_layout(report: Report, width: int | None = None) -> str:
    """The byte map of every token record: offset, end, size, field, element type x count."""
    out = [f"{report.title} — token record byte maps"]
    out += header_lines("  inputs: ", render_inputs(report.inputs), width)
    out.append("")
    for record in report.records:
        view = f", {record.view} view" if record.view else ""
        out.append(f"{record.name}: {format_int(record.num_bytes)} B per record{view}")
        rows = []
        for f in record.fields:
            what = "" if f.is_padding else f"{f.dtype} x {format_int(f.count)}"
            rows.append([format_int(f.offset), format_int(f.end), format_int(f.num_bytes), f.name, what])
        out.append(table(["offset", "end", "bytes", "field", "elements"], rows, right={0, 1, 2}))
        over = record.overrun_bytes()
        pad = record.padding_bytes()
        out.append(f"  padding {format_int(pad)} B ({pad / record.num_bytes * 100:.1f} %)"
                   + (f"; fields end {over} B past the record" if over else ""))
        out.append("")
    for b in report.buffers:
        for r in b.regions:
            if r.formula:
                out += wrap(f"{r.name}: {r.formula} = {bytes_cell(r.num_bytes)}", width, "    ", "")
    shown = [f for f in report.findings if f.severity in ("error", "warning") or f.code == "device.backend-chosen"]
    if shown:
        out.append("")
        out.append("Findings")
        out += finding_lines(shown, width)
    return "\n".join(out).rstrip() + "\n"
