"""Text rendering of reports for people. No arithmetic beyond formatting lives here."""

from __future__ import annotations

from .report import RecordLayout, Report, tightest_limit
from .units import format_bytes, format_int

__all__ = ["table", "bytes_cell", "render_report", "render_layout", "render_inputs", "render_compare",
           "render_fit", "render_sweep", "render_engine_report"]


def wrap(text: str, width: int | None, indent: str = "", first: str | None = None) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` characters, the first prefixed
    by ``first`` (default ``indent``), the others by ``indent``; a word longer than a line is cut
    (after a ``/`` or ``,`` where it has one). ``width`` None: one line."""
    first = indent if first is None else first
    if width is None or len(first) + len(text) <= width:
        return [first + text]
    room = max(8, width - len(indent))
    words: list[str] = []
    for word in text.split():
        while len(word) > room:
            cut = max(word.rfind("/", 0, room), word.rfind(",", 0, room)) + 1 or room
            words.append(word[:cut])
            word = word[cut:]
        words.append(word)
    lines: list[str] = []
    line, prefix = "", first
    for word in words:
        if line and len(prefix) + len(line) + 1 + len(word) > width:
            lines.append(prefix + line)
            line, prefix = word, indent
        else:
            line = f"{line} {word}" if line else word
    lines.append(prefix + line)
    return lines


def table(headers: list[str], rows: list[list[str]], right: set[int] | None = None, indent: str = "  ",
          width: int | None = None, wrap_columns: tuple[int, ...] = (-1,), below: int | tuple = ()) -> str:
    """A plain-text table; columns in ``right`` are right-aligned (numbers).

    When a line would be longer than ``width``, the widest of ``wrap_columns`` (default the
    last) are narrowed, down to 12 characters (or their header), and their cells wrapped onto
    continuation lines. When that cannot fit the width, the columns ``below`` (a long sentence
    such as a formula or a reason), one after another until the rest fits, move under their row,
    wrapped to the full width."""
    right = right or set()
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    ncols = len(headers)
    wrapping = sorted({c % ncols for c in wrap_columns})

    def floor(c: int) -> int:
        return min(widths[c], max(12, len(headers[c])))

    def total(cols: list[int], narrowed: list[int]) -> int:
        return len(indent) + sum(floor(c) if c in narrowed else widths[c] for c in cols) + 2 * (len(cols) - 1)

    under: list[list[str]] = [[] for _ in rows]
    moving = [c % ncols for c in ((below,) if isinstance(below, int) else below)]
    if width is not None and moving:
        cols = list(range(ncols))
        moved = []
        for c in moving:
            if total(cols, wrapping) <= width:
                break
            cols.remove(c)
            moved.append(c)
        for k, r in enumerate(rows):
            under[k] = [f"{headers[c]}: {r[c]}" for c in moved if c < len(r) and r[c]]
        right = {cols.index(i) for i in right if i in cols}
        wrapping = [cols.index(c) for c in wrapping if c in cols]
        headers = [headers[i] for i in cols]
        rows = [[r[i] for i in cols if i < len(r)] for r in rows]
        widths = [widths[i] for i in cols]
    if width is not None and wrapping:
        over = len(indent) + sum(widths) + 2 * (len(widths) - 1) - width
        while over > 0:
            col = max(wrapping, key=lambda c: widths[c] - floor(c))
            if widths[col] <= floor(col):
                break
            widths[col] -= 1
            over -= 1

    def line(cells: list[str]) -> list[str]:
        pieces = {c: (wrap(cells[c], widths[c]) if c < len(cells) and len(cells[c]) > widths[c] else None)
                  for c in wrapping}
        depth = max([len(p) for p in pieces.values() if p] or [1])
        out = []
        for k in range(depth):
            row = list(cells) if k == 0 else [""] * len(cells)
            for c, p in pieces.items():
                if p is not None:
                    row[c] = p[k] if k < len(p) else ""
            parts = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(row)]
            out.append((indent + "  ".join(parts)).rstrip())
        return out

    out = line(headers) + [indent + "  ".join("-" * w for w in widths)]
    for k, r in enumerate(rows):
        out.extend(line(r))
        for text in under[k]:
            out.extend(wrap(text, width, indent + "    "))
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


def _finding_lines(findings, width: int | None) -> list[str]:
    out = []
    for f in findings:
        out += wrap(f"{f.severity}: {f.message}  [{f.code}]", width, "    ", "  ")
    return out


def _header(label: str, text: str, width: int | None) -> list[str]:
    """``  label   text``, wrapped under the text."""
    return wrap(text, width, " " * len(label), label)


def render_report(report: Report, device: tuple[str, int] | None = None, verbose: bool = False,
                  budget: int | None = None, width: int | None = None) -> str:
    """The human form of ``epbuf hint``: records, buffers with their regions, totals,
    findings and limits. ``device`` is ``(name, capacity bytes)`` for the share line,
    ``budget`` the ``--budget`` bytes; lines are wrapped at ``width`` (None: not at all)."""
    out = [f"{report.title}"]
    out += _header("  upstream: ", report.upstream, width)
    out += _header("  inputs:   ", render_inputs(report.inputs), width)
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
        from .placement import capacity_label

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
        out += _finding_lines(report.findings, width)
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
    out += _header("  inputs: ", render_inputs(report.inputs), width)
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
        out += _finding_lines(shown, width)
    return "\n".join(out).rstrip() + "\n"


def _device_line(device: tuple[str, int]) -> str:
    from .placement import capacity_label

    return f"of device: shares of {capacity_label(*device)}"


def _runs_cell(name: str, runs_on: dict | None) -> list[str]:
    """The "on device" cell of ``name`` when ``runs_on`` ({backend: bool}) is given."""
    if runs_on is None:
        return []
    return ["yes" if runs_on.get(name, True) else "no"]


def _runs_note(runs_on: dict | None, device_name: str, width: int | None) -> list[str]:
    """One line naming where the backends that do not run on the device run."""
    if not runs_on or all(runs_on.values()):
        return []
    from .placement import vendors_text

    off = [n for n, ok in runs_on.items() if not ok]
    return [""] + wrap("not on " + device_name + ": " + "; ".join(f"{n} runs on {vendors_text(n)}" for n in off),
                       width, "  ", "")


def render_compare(results: dict, device: tuple[str, int] | None = None, runs_on: dict | None = None,
                   width: int | None = None) -> str:
    """One table: the same plan across backends (``results``: name -> Report or error).
    ``runs_on`` ({backend: bool}, with ``--device``) adds a column saying which run on the device."""
    rows = []
    for name, rep in results.items():
        if not isinstance(rep, Report):
            rows.append([name, "n/a", "", "", ""] + _runs_cell(name, runs_on) + ["", f"rejected: {rep}"])
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
                     format_bytes(over) if over else "0", share] + _runs_cell(name, runs_on)
                    + [", ".join(b.name for b in rep.buffers), limit_text])
    headers = (["backend", "allocation", "real need", "over-reserved", "of device" if device else ""]
               + (["on device"] if runs_on is not None else []) + ["buffers", "tightest limit"])
    shift = 1 if runs_on is not None else 0
    out = [_device_line(device)] if device else []
    out.append(table(headers, rows, right={1, 2, 3, 4}, width=width, wrap_columns=(5 + shift,),
                     below=(6 + shift, 5 + shift)))
    out += _runs_note(runs_on, device[0] if device else "", width) + [""]
    for name, rep in results.items():
        if not isinstance(rep, Report):
            continue
        out += wrap(f"{name} — {rep.title}  [{rep.upstream}]", width, "    ", "")
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
        out.append(table(["buffer", "region", "hint bytes", "", "real run"], region_rows, right={2, 3, 4}, width=width,
                         wrap_columns=(0, 1)))
        shown = [f for f in rep.findings if f.severity == "error" or f.code == "device.backend-mismatch"]
        out += _finding_lines(shown, width)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def render_fit(results: dict, budget: int, variable: str, budget_note: str = "", runs_on: dict | None = None,
               width: int | None = None, device_name: str = "the device") -> str:
    """The ``epbuf fit`` table: per backend, the largest value that fits and what binds.
    ``budget_note`` says where a default budget came from; ``runs_on`` as :func:`render_compare`."""
    label = "tokens per rank" if variable == "num_max_tokens_per_rank" else "EP ranks"
    rows = []
    notes = []
    for name, r in results.items():
        if isinstance(r, Exception):
            rows.append([name] + _runs_cell(name, runs_on) + ["n/a", "", "", "", f"rejected: {r}"])
            continue
        value = "any" if r.independent else format_int(r.value) if r.value is not None else "none"
        alloc = format_bytes(r.report.num_bytes) if r.report is not None else ""
        share = f"{r.report.num_bytes / budget * 100:.1f} %" if r.report is not None else ""
        rows.append([name] + _runs_cell(name, runs_on) + [value, alloc, share, r.binding_region, r.reason])
        if r.constant_failures:
            notes += wrap(f"{name}: broken whatever the {label}: " + "; ".join(r.constant_failures), width, "    ",
                          "  ")
    shift = 1 if runs_on is not None else 0
    headers = (["backend"] + (["on device"] if runs_on is not None else [])
               + ["largest", "allocation", "of budget", "largest region", "what binds next"])
    out = wrap(f"Largest {label} within a budget of {bytes_cell(budget)}"
               + (f" ({budget_note})" if budget_note else ""), width, "  ", "")
    out += ["", table(headers, rows, right={1 + shift, 2 + shift, 3 + shift}, width=width,
                      wrap_columns=(4 + shift,), below=5 + shift)]
    out += _runs_note(runs_on, device_name, width)
    if notes:
        out += ["", "Limits broken independently of the fitted value:"] + notes
    return "\n".join(out).rstrip() + "\n"


_SWEEP_AXES = (("hidden", "hidden"), ("num_topk", "top-k"), ("num_experts", "experts"), ("num_ranks", "ranks"),
               ("num_max_tokens_per_rank", "tokens"), ("use_fp8_dispatch", "dtype"))


def render_sweep(result, device: tuple[str, int] | None = None, width: int | None = None) -> str:
    """The sweep as a table for people: one line per configuration. Axes with one value across
    the sweep are said once above the table, not repeated in a column (``--wide``: every column)."""
    cols = result.columns

    def cell(name: str, value) -> str:
        return ("FP8" if value else "BF16") if name == "use_fp8_dispatch" else format_int(value)

    shown = [(n, h) for n, h in _SWEEP_AXES if width is None or n in result.varying or not result.rows]
    fixed = [(n, h) for n, h in _SWEEP_AXES if (n, h) not in shown]
    headers = (["backend"] + [h for _, h in shown] + ["allocation", "bytes", "real need"]
               + (["of device"] if device else []) + ["binding region", "broken limits / error"])
    rows = []
    for row in result.rows:
        r = dict(zip(cols, row))
        cells = [r["backend"]] + [cell(n, r[n]) for n, _ in shown]
        if r["num_bytes"] is None:
            cells += ["rejected", "", ""] + ([""] if device else []) + ["", r["error"]]
        else:
            cells += [format_bytes(r["num_bytes"]), format_int(r["num_bytes"]), format_int(r["num_bytes_needed"])]
            if device:
                cells.append(f"{r['num_bytes'] / device[1] * 100:.1f} %")
            cells += [r["binding"], r["broken_limits"].replace(";", "; ")]
        rows.append(cells)
    first_result = 1 + len(shown)  # allocation, bytes, real need (and the share) are numbers too
    right = ({i for i, (n, _) in enumerate(shown, start=1) if n != "use_fp8_dispatch"}
             | set(range(first_result, first_result + 3 + (1 if device else 0))))
    head = [_device_line(device)] if device else []
    if fixed and result.rows:
        first = dict(zip(cols, result.rows[0]))
        head += wrap("every row: " + ", ".join(f"{h} {cell(n, first[n])}" for n, h in fixed), width)
    return "\n".join(head + [table(headers, rows, right=right, indent="", width=width, wrap_columns=(-2,),
                                    below=(-1,))]) + "\n"


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


def render_engine_report(rep, verbose: bool = False, width: int | None = None) -> str:
    """The human form of an :class:`~epbuf.engines._report.EngineReport`: settings, allocations per
    device, findings, limits, what to set. ``width``: the column text wraps at (None: no wrapping)."""
    r = rep.report
    out = wrap(rep.title, width, "  ", "")
    out += _header("  version:  ", f"{rep.engine} {rep.version} - {rep.version_note}", width)
    out += _header("  upstream: ", r.upstream, width)
    out.append("")
    out.append("Settings")
    # Without --verbose, switches left at their default "off" are not listed.
    rows = [[s.name, _setting_value(s.value), s.source, s.note] for s in rep.settings
            if verbose or not (s.source == "default" and s.value is False)]
    out.append(table(["setting", "value", "from", "note"], rows, width=width, wrap_columns=(0, 3), below=3))
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
        out.append(table(["buffer", "bytes", "", "needed", "formula"], rows, right={1, 2, 3}, width=width,
                         wrap_columns=(0, 4), below=4))
    else:
        out.append("  (none)")
    if r.host_buffers:  # pinned host memory (UCCL-EP), per device but not device memory
        parts = ", ".join(f"{b.name} {format_int(b.num_bytes)} B" for b in r.host_buffers)
        out += wrap(f"+ {format_bytes(r.host_num_bytes)} of pinned host memory per device, not in the total ({parts})",
                    width, "    ", "  ")
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
            out += wrap(f"{b.name} = {b.rule} of its regions   [{b.source}]", width, "    ", "")
            rows = [[x.name, format_int(x.num_bytes), format_bytes(x.num_bytes), x.formula, x.source] for x in b.regions]
            out.append(table(["region", "bytes", "", "formula", "source"], rows, right={1, 2}, width=width,
                             wrap_columns=(3, 4), below=(4, 3)))
    out.append("")
    shown = [f for f in r.findings if verbose or f.severity != "info"]
    notes = len(r.findings) - len(shown)
    if shown:
        out.append("Findings")
        out += _finding_lines(shown, width)
    if notes:
        out.append(f"  ({notes} note{'s' if notes > 1 else ''}; --verbose shows {'them' if notes > 1 else 'it'})")
    broken = r.failed_limits()
    limits = r.limits if verbose else broken
    if limits:
        out.append("")
        out.append("Limits" + ("" if verbose else " broken"))
        rows = [[lim.name, format_int(lim.value), lim.relation, format_int(lim.bound), "ok" if lim.ok else "BROKEN",
                 lim.source] for lim in limits]
        out.append(table(["limit", "value", "", "bound", "", "source"], rows, right={1, 3}, width=width,
                         wrap_columns=(0,), below=5))
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
        out.append(table(["setting", "goal", "total", "why"], rows, right={2}, width=width, below=3))
    return "\n".join(out).rstrip() + "\n"
