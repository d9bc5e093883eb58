"""``epbuf engine``: an engine report for people (settings, allocations per device, findings,
limits, what to set)."""

from __future__ import annotations

from ..units import format_bytes, format_int
from . import bytes_cell, finding_lines, header_lines, table, value_text, wrap

__all__ = ["render_engine_report"]


def _setting_value(v: object) -> str:
    """A setting's value as it is typed: JSON objects compact, integers without thousands
    separators (``--max-num-batched-tokens=2304`` pastes; ``2,304`` does not), switches yes/no."""
    if isinstance(v, dict):
        import json

        return json.dumps(v, separators=(",", ":"))
    if isinstance(v, bool):
        return value_text(v)
    return str(v)


def render_engine_report(rep, verbose: bool = False, width: int | None = None) -> str:
    """The human form of an :class:`~epbuf.engines._report.EngineReport`: settings, allocations per
    device, findings, limits, what to set. ``width``: the column text wraps at (None: no wrapping)."""
    r = rep.report
    out = wrap(rep.title, width, "  ", "")
    out += header_lines("  version:  ", f"{rep.engine} {rep.version} - {rep.version_note}", width)
    out += header_lines("  upstream: ", r.upstream, width)
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
        out += finding_lines(shown, width)
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
    to_set = rep.to_set
    bounds = [x for x in rep.recommendations if x.goal != "fix" and all(x is not y for y in to_set)]
    for title, recs in (("What to set", to_set), ("Bounds (each goal searched alone)", bounds)):
        if not recs:
            continue
        out.append("")
        out.append(title)
        rows = []
        for x in recs:
            value = f"{x.setting}={_setting_value(x.value)}" if x.value is not None else f"{x.setting}: none"
            if recs is bounds and x.value is not None:  # a bound, not a value to type
                value = f"{x.setting} {'>=' if x.goal == 'load' else '<='} {_setting_value(x.value)}"
            total = format_bytes(x.num_bytes) if x.num_bytes is not None else ""
            rows.append([value, x.goal, total, x.message])
        out.append(table(["setting", "goal", "total", "why"], rows, right={2}, width=width, below=3))
    return "\n".join(out).rstrip() + "\n"
