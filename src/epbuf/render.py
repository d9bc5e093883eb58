"""Text rendering of reports for people. No arithmetic beyond formatting lives here."""

from __future__ import annotations

from .report import RecordLayout, Report, tightest_limit
from .units import format_bytes, format_int

__all__ = ["table", "bytes_cell", "render_report", "render_layout", "render_inputs", "render_compare",
           "render_fit", "render_sweep", "render_engine_report"]


def table(headers: list[str], rows: list[list[str]], right: set[int] | None = None, indent: str = "  ") -> str:
    """A plain-text table; columns in ``right`` are right-aligned (numbers)."""
    right = right or set()
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: list[str]) -> str:
        parts = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)]
        return (indent + "  ".join(parts)).rstrip()

    out = [line(headers), indent + "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


def bytes_cell(num_bytes: int) -> str:
    """``354,418,688 B (338.00 MiB)``; small values without the IEC part."""
    if num_bytes < 1024:
        return f"{format_int(num_bytes)} B"
    return f"{format_int(num_bytes)} B ({format_bytes(num_bytes)})"


def render_inputs(inputs: dict) -> str:
    return ", ".join(f"{k}={_value(v)}" for k, v in inputs.items() if v is not None)


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return format_int(v)
    return str(v)


def _record_summary(record: RecordLayout) -> str:
    parts = []
    for f in record.fields:
        if f.is_padding:
            parts.append(f"pad {f.num_bytes}")
        else:
            parts.append(f"{f.name} {f.num_bytes}")
    return " | ".join(parts)


def _buffer_lines(b, where: str = "") -> list[str]:
    """One buffer: its rule, the regions with formulas, the allocation and the real need."""
    rule = {"max": "max of the regions (they reuse the memory)", "sum": "sum of the regions"}[b.rule]
    align_text = f", aligned to {format_bytes(b.alignment)}" if b.alignment > 1 else ""
    where_text = f" ({where})" if where else ""
    out = [f"{b.name}{where_text} = {rule}{align_text}" + (f"   [{b.source}]" if b.source else "")]
    rows = []
    for r in b.regions:
        used = format_int(r.num_bytes_used) if r.num_bytes_used != r.num_bytes else "same"
        rows.append([r.name, format_int(r.num_bytes), format_bytes(r.num_bytes), used, r.formula])
    out.append(table(["region", "hint bytes", "", "real run", "formula"], rows, right={1, 2, 3}))
    if b.rule == "max" and len(b.regions) > 1:
        largest = b.binding_region()
        out.append(f"  max:               {bytes_cell(largest.num_bytes)}   ({largest.name})")
    out.append(f"  allocated (hint):  {bytes_cell(b.num_bytes)}")
    if b.num_bytes_needed < b.num_bytes:
        out.append(f"  real need:         {bytes_cell(b.num_bytes_needed)}   "
                   f"(hint over-reserves {bytes_cell(b.num_bytes - b.num_bytes_needed)})")
    elif b.num_bytes_needed > b.num_bytes:
        out.append(f"  real need:         {bytes_cell(b.num_bytes_needed)}   "
                   f"(hint UNDER-reserves {bytes_cell(b.num_bytes_needed - b.num_bytes)})")
    else:
        out.append(f"  real need:         {bytes_cell(b.num_bytes_needed)}   (the hint reserves exactly this)")
    out.append("")
    return out


def render_report(report: Report, device: tuple[str, int] | None = None, verbose: bool = False) -> str:
    """The human form of ``epbuf hint``: records, buffers with their regions, totals,
    findings and limits. ``device`` is ``(name, capacity bytes)`` for the share line."""
    out = [f"{report.title}", f"  upstream: {report.upstream}", f"  inputs:   {render_inputs(report.inputs)}", ""]

    if report.records:
        out.append("Token records (bytes per slot)")
        rows = [[r.name, format_int(r.num_bytes), _record_summary(r)] for r in report.records]
        out.append(table(["record", "bytes", "fields (bytes, in order)"], rows, right={1}))
        out.append("")

    for b in report.buffers:
        out.extend(_buffer_lines(b))
    for b in report.host_buffers:
        out.extend(_buffer_lines(b, where="host memory, not in the device total"))

    if len(report.buffers) > 1:
        out.append(f"Total device allocation: {bytes_cell(report.num_bytes)}"
                   f"   (real need {bytes_cell(report.num_bytes_needed)})")
    if report.host_buffers:
        out.append(f"Total host allocation:   {bytes_cell(report.host_num_bytes)}   (per device, pinned)")
    if device is not None:
        name, capacity = device
        share = report.num_bytes / capacity * 100
        out.append(f"Share of {name} memory ({format_bytes(capacity)}): {share:.2f} %")
    if len(report.buffers) > 1 or device is not None:
        out.append("")

    if report.findings:
        out.append("Findings")
        for f in report.findings:
            out.append(f"  {f.severity}: {f.message}  [{f.code}]")
        out.append("")

    failed = report.failed_limits()
    shown = report.limits if verbose else failed
    if shown:
        out.append("Limits" + ("" if verbose else " broken"))
        rows = [[lim.name, format_int(lim.value), lim.relation,
                 "the set" if lim.relation == "in" else format_int(lim.bound), "ok" if lim.ok else "BROKEN",
                 lim.source] for lim in shown]
        out.append(table(["limit", "value", "", "bound", "", "source"], rows, right={1, 3}))
    else:
        out.append(f"Limits: all {len(report.limits)} upstream limits hold (--verbose lists them)")
    return "\n".join(out).rstrip() + "\n"


def render_layout(report: Report) -> str:
    """The byte map of every token record: offset, end, size, field, element type x count."""
    out = [f"{report.title} — token record byte maps", f"  inputs: {render_inputs(report.inputs)}", ""]
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
                out.append(f"{r.name}: {r.formula} = {bytes_cell(r.num_bytes)}")
    mismatches = [f for f in report.findings if f.severity in ("error", "warning")]
    if mismatches:
        out.append("")
        out.append("Findings")
        for f in mismatches:
            out.append(f"  {f.severity}: {f.message}  [{f.code}]")
    return "\n".join(out).rstrip() + "\n"


def render_compare(results: dict, device: tuple[str, int] | None = None) -> str:
    """One table: the same plan across backends (``results``: name -> Report or error)."""
    rows = []
    for name, rep in results.items():
        if not isinstance(rep, Report):
            rows.append([name, "n/a", "", "", "", "", f"rejected: {rep}"])
            continue
        limit = tightest_limit(rep)
        if limit is None:
            limit_text = ""
        else:
            state = "BROKEN" if not limit.ok else f"{limit.value / limit.bound * 100:.0f} % of bound"
            limit_text = f"{limit.name} {format_int(limit.value)} {limit.relation} {format_int(limit.bound)} ({state})"
        over = rep.num_bytes - rep.num_bytes_needed
        share = f"{rep.num_bytes / device[1] * 100:.1f} %" if device else ""
        rows.append([name, format_bytes(rep.num_bytes), format_bytes(rep.num_bytes_needed),
                     format_bytes(over) if over else "0", share,
                     ", ".join(b.name for b in rep.buffers), limit_text])
    headers = ["backend", "allocation", "real need", "over-reserved", f"of {device[0]}" if device else "",
               "buffers", "tightest limit"]
    out = [table(headers, rows, right={1, 2, 3, 4}), ""]
    for name, rep in results.items():
        if not isinstance(rep, Report):
            continue
        out.append(f"{name} — {rep.title}  [{rep.upstream}]")
        region_rows = []
        for b in rep.buffers:
            for r in b.regions:
                region_rows.append([b.name, r.name, format_int(r.num_bytes), format_bytes(r.num_bytes),
                                    format_int(r.num_bytes_used) if r.num_bytes_used != r.num_bytes else "same"])
            region_rows.append([b.name, f"= {b.rule}, aligned to {format_bytes(b.alignment)}" if b.alignment > 1
                                else f"= {b.rule}", format_int(b.num_bytes), format_bytes(b.num_bytes),
                                format_int(b.num_bytes_needed) if b.num_bytes_needed != b.num_bytes else "same"])
        for b in rep.host_buffers:
            for r in b.regions:
                region_rows.append([f"{b.name} (host)", r.name, format_int(r.num_bytes), format_bytes(r.num_bytes),
                                    "same" if r.num_bytes_used == r.num_bytes else format_int(r.num_bytes_used)])
        out.append(table(["buffer", "region", "hint bytes", "", "real run"], region_rows, right={2, 3, 4}))
        errors = [f for f in rep.findings if f.severity == "error"]
        for f in errors:
            out.append(f"  error: {f.message}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def render_fit(results: dict, budget: int, variable: str) -> str:
    """The ``epbuf fit`` table: per backend, the largest value that fits and what binds."""
    label = "tokens per rank" if variable == "num_max_tokens_per_rank" else "EP ranks"
    rows = []
    notes = []
    for name, r in results.items():
        if isinstance(r, Exception):
            rows.append([name, "n/a", "", "", "", f"rejected: {r}"])
            continue
        value = "any" if r.independent else format_int(r.value) if r.value is not None else "none"
        alloc = format_bytes(r.report.num_bytes) if r.report is not None else ""
        share = f"{r.report.num_bytes / budget * 100:.1f} %" if r.report is not None else ""
        rows.append([name, value, alloc, share, r.binding_region, r.reason])
        if r.constant_failures:
            notes.append(f"  {name}: broken whatever the {label}: " + "; ".join(r.constant_failures))
    out = [f"Largest {label} within a budget of {bytes_cell(budget)}", "",
           table(["backend", f"largest {label}", "allocation", "of budget", "largest region", "what binds next"], rows,
                 right={1, 2, 3})]
    if notes:
        out += ["", "Limits broken independently of the fitted value:"] + notes
    return "\n".join(out).rstrip() + "\n"


def render_sweep(result, device: tuple[str, int] | None = None) -> str:
    """The sweep as a table for people: one line per configuration."""
    cols = result.columns
    show = ["backend"] + [c for c in ("hidden", "num_topk", "num_experts", "num_ranks", "num_max_tokens_per_rank",
                                      "use_fp8_dispatch")]
    headers = ["backend", "hidden", "top-k", "experts", "ranks", "tokens", "dtype", "allocation", "bytes",
               "real need"] + ([f"of {device[0]}"] if device else []) + ["binding region", "broken limits / error"]
    rows = []
    for row in result.rows:
        r = dict(zip(cols, row))
        cells = [r["backend"]] + [format_int(r[c]) for c in show[1:-1]] + ["FP8" if r["use_fp8_dispatch"] else "BF16"]
        if r["num_bytes"] is None:
            cells += ["rejected", "", ""] + ([""] if device else []) + ["", r["error"]]
        else:
            cells += [format_bytes(r["num_bytes"]), format_int(r["num_bytes"]), format_int(r["num_bytes_needed"])]
            if device:
                cells.append(f"{r['num_bytes'] / device[1] * 100:.1f} %")
            cells += [r["binding"], r["broken_limits"].replace(";", "; ")]
        rows.append(cells)
    right = {1, 2, 3, 4, 5, 7, 8, 9} | ({10} if device else set())
    return table(headers, rows, right=right, indent="") + "\n"


# --- engine reports (epbuf engine) ---------------------------------------------------------
def _setting_value(v: object) -> str:
    """A setting's value as it is typed: JSON objects compact, integers without thousands
    separators (``--max-num-batched-tokens=2304`` pastes; ``2,304`` does not), switches yes/no."""
    if isinstance(v, dict):
        import json

        return json.dumps(v, separators=(",", ":"))
    if isinstance(v, bool):
        return _value(v)
    return str(v)


def render_engine_report(rep, verbose: bool = False) -> str:
    """The human form of an :class:`~epbuf.engines._report.EngineReport`: settings, allocations per
    device, findings, limits, what to set."""
    r = rep.report
    out = [rep.title, f"  version:  {rep.engine} {rep.version} - {rep.version_note}", f"  upstream: {r.upstream}", ""]
    out.append("Settings")
    # Without --verbose, switches left at their default "off" are not listed.
    rows = [[s.name, _setting_value(s.value), s.source, s.note] for s in rep.settings
            if verbose or not (s.source == "default" and s.value is False)]
    out.append(table(["setting", "value", "from", "note"], rows))
    out.append("")
    out.append("Allocations per device")
    if r.buffers:
        rows = []
        for b in r.buffers:
            formula = (b.regions[0].formula if len({x.formula for x in b.regions}) == 1
                       else f"{b.rule} of {len(b.regions)} regions")
            needed = format_int(b.num_bytes_needed) if b.num_bytes_needed != b.num_bytes else "same"
            rows.append([b.name, format_int(b.num_bytes), format_bytes(b.num_bytes), needed, formula])
        rows.append(["total", format_int(rep.num_bytes), format_bytes(rep.num_bytes),
                     format_int(rep.num_bytes_needed) if rep.num_bytes_needed != rep.num_bytes else "same", ""])
        out.append(table(["buffer", "bytes", "", "needed", "formula"], rows, right={1, 2, 3}))
    else:
        out.append("  (none)")
    if r.host_buffers:  # pinned host memory (UCCL-EP), per device but not device memory
        parts = ", ".join(f"{b.name} {format_int(b.num_bytes)} B" for b in r.host_buffers)
        out.append(f"  + {format_bytes(r.host_num_bytes)} of pinned host memory per device, not in the total ({parts})")
    if rep.device_num_bytes:
        out.append(f"  share of {rep.device_name} ({format_bytes(rep.device_num_bytes)}): {rep.share * 100:.2f} %")
    if rep.budget is not None:
        state = "fits" if rep.num_bytes <= rep.budget else f"over by {bytes_cell(rep.num_bytes - rep.budget)}"
        out.append(f"  --budget {format_bytes(rep.budget)}: {state}")
    if verbose:
        for b in r.buffers:
            if len(b.regions) < 2 and not b.source:
                continue
            out.append("")
            out.append(f"{b.name} = {b.rule} of its regions   [{b.source}]")
            rows = [[x.name, format_int(x.num_bytes), format_bytes(x.num_bytes), x.formula, x.source] for x in b.regions]
            out.append(table(["region", "bytes", "", "formula", "source"], rows, right={1, 2}))
    out.append("")
    shown = [f for f in r.findings if verbose or f.severity != "info"]
    notes = len(r.findings) - len(shown)
    if shown:
        out.append("Findings")
        out += [f"  {f.severity}: {f.message}  [{f.code}]" for f in shown]
    if notes:
        out.append(f"  ({notes} notes; --verbose shows them)")
    broken = r.failed_limits()
    limits = r.limits if verbose else broken
    if limits:
        out.append("")
        out.append("Limits" + ("" if verbose else " broken"))
        rows = [[lim.name, format_int(lim.value), lim.relation, format_int(lim.bound), "ok" if lim.ok else "BROKEN",
                 lim.source] for lim in limits]
        out.append(table(["limit", "value", "", "bound", "", "source"], rows, right={1, 3}))
    elif r.limits:
        out.append(f"Limits: all {len(r.limits)} hold (--verbose lists them)")
    if rep.recommendations:
        out.append("")
        out.append("What to set")
        rows = []
        for x in rep.recommendations:
            value = f"{x.setting}={_setting_value(x.value)}" if x.value is not None else f"{x.setting}: none"
            total = format_bytes(x.num_bytes) if x.num_bytes is not None else ""
            rows.append([value, x.goal, total, x.message])
        out.append(table(["setting", "goal", "total", "why"], rows, right={2}))
    return "\n".join(out).rstrip() + "\n"
