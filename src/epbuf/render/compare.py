"""Several backends side by side: ``epbuf compare`` (one plan, every backend) and ``epbuf fit``
(the largest value each backend fits in a budget)."""

from __future__ import annotations

from ..report import Report, tightest_limit
from ..units import format_bytes, format_int
from . import bytes_cell, device_line, finding_lines, table, wrap

__all__ = ["render_compare", "render_fit"]


def _runs_cell(name: str, runs_on: dict | None) -> list[str]:
    """The "on device" cell of ``name`` when ``runs_on`` ({backend: bool}) is given."""
    if runs_on is None:
        return []
    return ["yes" if runs_on.get(name, True) else "no"]


def _runs_note(runs_on: dict | None, device_name: str, width: int | None) -> list[str]:
    """One line naming where the backends that do not run on the device run."""
    if not runs_on or all(runs_on.values()):
        return []
    from ..placement import vendors_text

    off = [n for n, ok in runs_on.items() if not ok]
    return [""] + wrap("not on " + device_name + ": " + "; ".join(f"{n} runs on {vendors_text(n)}" for n in off),
                       width, "  ", "")


def _inputs_line(plan: dict | None, width: int | None) -> list[str]:
    """``inputs: DeepSeek-V3 (hidden 7,168, top-k 8, experts 256); 16 ranks ...``: what was compared."""
    if not plan:
        return []
    shape = (f"hidden {format_int(plan['hidden'])}, top-k {format_int(plan['num_topk'])}, experts "
             f"{format_int(plan['num_experts'])}"
             + (f" + {format_int(plan['num_redundant_experts'])} redundant" if plan.get("num_redundant_experts") else ""))
    per_node = plan.get("num_ranks_per_node")
    ranks = f"{format_int(plan['num_ranks'])} ranks" + (f" ({format_int(per_node)} per node)" if per_node else "")
    text = (f"{plan['model']} ({shape})" if plan.get("model") else shape) + (
        f"; {ranks}; {format_int(plan['num_max_tokens_per_rank'])} tokens per rank; "
        f"dtype {'FP8' if plan['use_fp8_dispatch'] else 'BF16'}")
    return wrap(text, width, "          ", "inputs:   ")


def _buffer_key(b) -> tuple:
    return (b.name, b.num_bytes, b.num_bytes_needed, tuple((r.name, r.num_bytes, r.num_bytes_used) for r in b.regions))


def _buffer_rows(results: dict) -> list[list[str]]:
    """One row per buffer of every backend; a buffer identical to one an earlier backend listed
    (name, bytes, regions) says so instead of its regions."""
    seen: dict = {}
    rows = []
    for name, rep in results.items():
        if not isinstance(rep, Report):
            continue
        first = True
        for b, host in [(b, False) for b in rep.buffers] + [(b, True) for b in rep.host_buffers]:
            key = _buffer_key(b) + (host,)
            if key in seen:
                regions = f"= {seen[key]}"
            else:
                seen[key] = name
                regions = format_int(len(b.regions))
            needed = format_int(b.num_bytes_needed) if b.num_bytes_needed != b.num_bytes else "same"
            rows.append([name if first else "", b.name + (" (host)" if host else ""), regions,
                         format_int(b.num_bytes), format_bytes(b.num_bytes), needed])
            first = False
    return rows


def _region_tables(results: dict, width: int | None) -> list[str]:
    """Every region of every backend (``--verbose``)."""
    out = []
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
        out += finding_lines(shown, width)
        out.append("")
    return out


def render_compare(results: dict, device: tuple[str, int] | None = None, runs_on: dict | None = None,
                   width: int | None = None, plan: dict | None = None, verbose: bool = False) -> str:
    """One table: the same plan across backends (``results``: name -> Report or error), then each
    backend's buffers (identical ones said once; ``verbose``: every region). ``plan`` (the Plan's
    fields) heads it; ``runs_on`` ({backend: bool}, with ``--device``) adds a column saying which
    run on the device."""
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
    out = _inputs_line(plan, width)
    if device:
        out.append(device_line(device))
    if verbose:
        out.append(table(headers, rows, right={1, 2, 3, 4}, width=width, wrap_columns=(5 + shift,),
                         below=(6 + shift, 5 + shift)))
        out += _runs_note(runs_on, device[0] if device else "", width) + [""]
        return "\n".join(out + _region_tables(results, width)).rstrip() + "\n"
    # the buffers are the next table: here each backend's tightest limit, under its row
    out.append(table(headers[:-2] + headers[-1:], [r[:-2] + r[-1:] for r in rows], right={1, 2, 3, 4}, width=width,
                     below=5 + shift, always_below=True))
    out += _runs_note(runs_on, device[0] if device else "", width) + [""]
    out += wrap("Buffers per device (regions: how many, or = the backend with the same buffer; --verbose)", width)
    buffers = table(["backend", "buffer", "regions", "bytes", "", "real need"], _buffer_rows(results),
                    right={2, 3, 4, 5}, width=width, wrap_columns=(1,))
    if width is not None and max(map(len, buffers.splitlines())) > width:  # without the exact bytes
        buffers = table(["backend", "buffer", "regions", "size", "real need"],
                        [r[:3] + r[4:] for r in _buffer_rows(results)], right={2, 3, 4}, width=width,
                        wrap_columns=(1,))
    out.append(buffers)
    found = [(name, f) for name, rep in results.items() if isinstance(rep, Report)
             for f in rep.findings if f.severity in ("error", "warning") and f.code != "device.backend-mismatch"]
    if found:
        out += ["", "Findings (errors and warnings; epbuf hint --backend NAME has every note)"]
        for name, f in sorted(found, key=lambda x: x[1].severity != "error"):
            out += wrap(f"{f.severity}: {name}: {f.message}  [{f.code}]", width, "    ", "  ")
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
