"""``epbuf sweep`` as a table for people: one line per configuration."""

from __future__ import annotations

from ..units import format_bytes, format_int
from . import device_line, table, wrap

__all__ = ["render_sweep"]


_SWEEP_AXES = (("hidden", "hidden"), ("num_topk", "top-k"), ("num_experts", "experts"), ("num_ranks", "ranks"),
               ("num_max_tokens_per_rank", "tokens"), ("use_fp8_dispatch", "dtype"))


def render_sweep(result, device: tuple[str, int] | None = None, width: int | None = None,
                 exact: bool = True) -> str:
    """The sweep as a table for people: one line per configuration. Axes with one value across
    the sweep are said once above the table, not repeated in a column (``--wide``: every column).
    The exact bytes column goes when the table would not fit ``width`` with it (``exact``)."""
    cols = result.columns

    def cell(name: str, value) -> str:
        return ("FP8" if value else "BF16") if name == "use_fp8_dispatch" else format_int(value)

    shown = [(n, h) for n, h in _SWEEP_AXES if width is None or n in result.varying or not result.rows]
    fixed = [(n, h) for n, h in _SWEEP_AXES if (n, h) not in shown]
    headers = (["backend"] + [h for _, h in shown] + ["allocation"] + (["bytes"] if exact else []) + ["real need"]
               + (["of device"] if device else []) + ["binding region", "broken limits / error"])
    rows = []
    for row in result.rows:
        r = dict(zip(cols, row))
        cells = [r["backend"]] + [cell(n, r[n]) for n, _ in shown]
        if r["num_bytes"] is None:
            cells += ["rejected", ""] + ([""] if exact else []) + ([""] if device else []) + ["", r["error"]]
        else:
            cells += ([format_bytes(r["num_bytes"])] + ([format_int(r["num_bytes"])] if exact else [])
                      + [format_int(r["num_bytes_needed"])])
            if device:
                cells.append(f"{r['num_bytes'] / device[1] * 100:.1f} %")
            cells += [r["binding"], r["broken_limits"].replace(";", "; ")]
        rows.append(cells)
    first_result = 1 + len(shown)  # allocation, bytes, real need (and the share) are numbers too
    right = ({i for i, (n, _) in enumerate(shown, start=1) if n != "use_fp8_dispatch"}
             | set(range(first_result, first_result + 2 + exact + (1 if device else 0))))
    head = [device_line(device)] if device else []
    if fixed and result.rows:
        first = dict(zip(cols, result.rows[0]))
        head += wrap("every row: " + ", ".join(f"{h} {cell(n, first[n])}" for n, h in fixed), width)
    text = "\n".join(head + [table(headers, rows, right=right, indent="", width=width, wrap_columns=(-2,),
                                  below=(-1,))]) + "\n"
    if exact and width is not None and any(len(line) > width for line in text.splitlines()):
        return render_sweep(result, device, width, exact=False)
    return text
