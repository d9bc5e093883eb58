"""PNG/SVG/PDF plots of sweeps (matplotlib, the optional extra ``epbuf[plot]``).

One panel per backend, one line per series (each combination of the other varying
axes), sizes in IEC units on a log scale when they span more than a decade, and the
device capacity as a dashed reference line. matplotlib is imported here only, with the Agg
backend, so nothing else in epbuf needs it.
"""

from __future__ import annotations

from .errors import EpbufError, MissingExtraError
from .sweep import SweepResult
from .units import GiB, MiB

__all__ = ["MissingExtraError", "plot_sweep", "choose_x_axis", "plot_format", "FORMATS"]

_LABELS = {
    "num_max_tokens_per_rank": "num_max_tokens_per_rank (tokens per rank)",
    "num_ranks": "EP ranks",
    "hidden": "hidden size",
    "num_topk": "top-k",
    "num_experts": "experts",
}


def _pyplot():
    from ._lazy import optional

    matplotlib = optional("matplotlib", "--plot needs matplotlib: pip install 'epbuf[plot]'")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def choose_x_axis(result: SweepResult) -> str:
    """The numeric axis with the most distinct values (tokens before ranks on a tie)."""
    candidates = [a for a in ("num_max_tokens_per_rank", "num_ranks", "hidden", "num_topk", "num_experts")
                  if a in result.varying]
    if not candidates:
        return "num_max_tokens_per_rank"
    return max(candidates, key=lambda a: (len(set(result.column(a))), a == "num_max_tokens_per_rank"))


#: Extensions ``--plot`` writes, and matplotlib's format name for each.
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
_STYLES = ("-", "--", ":", "-.")
_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac")


def plot_format(path: str, option: str = "--plot") -> str:
    """matplotlib's format for ``path`` from its extension (``.png``, ``.svg``, ``.pdf``).

    Raises:
        EpbufError: any other extension, or none (one line naming the option and the path).
    """
    import os

    ext = os.path.splitext(str(path))[1].lower()
    if ext not in FORMATS:
        raise EpbufError(f"{option}: {path}: choose the format by the extension: {', '.join(FORMATS)} "
                         f"(got {ext or 'none'})")
    return FORMATS[ext]


def _merge_identical(series: dict[tuple, list]) -> dict[str, list]:
    """Series whose points are the same are drawn once, labelled ``a = b``."""
    merged: dict[tuple, list[str]] = {}
    for label, points in series.items():
        merged.setdefault(tuple(sorted(points)), []).append(label)
    return {" = ".join(labels): sorted(points) for points, labels in merged.items()}


def plot_sweep(result: SweepResult, path: str, capacity: tuple[str, int] | None = None, title: str = "") -> None:
    """Draw the sweep's total allocation against its main axis and write ``path`` atomically
    (PNG, SVG or PDF, chosen by the extension).

    Several backends get one panel each (shared axes), so lines of different libraries never
    tangle; within a panel each remaining varying axis has its own line colour and style (the
    first by colour, the second by dash pattern), series with identical points are drawn once
    and labelled ``a = b``, and the legend sits outside the plot so it never hides data.
    Configurations that break an upstream limit are marked with a red x.
    """
    fmt = plot_format(path)
    plt = _pyplot()
    from .io import write_atomic

    x_axis = choose_x_axis(result)
    cols = result.columns
    xi, yi, bi = cols.index(x_axis), cols.index("num_bytes"), cols.index("broken_limits")
    backends = list(dict.fromkeys(row[0] for row in result.rows if row[yi] is not None))
    series_axes = [a for a in result.varying if a not in (x_axis, "backend")]
    panels: dict[str, dict[tuple, list]] = {b: {} for b in backends}
    broken: dict[str, list] = {b: [] for b in backends}
    for row in result.rows:
        if row[yi] is None:
            continue
        key = tuple(row[cols.index(a)] for a in series_axes)
        panels[row[0]].setdefault(key, []).append((row[xi], row[yi]))
        if row[bi]:
            broken[row[0]].append((row[xi], row[yi]))
    if not backends:
        raise EpbufError("--plot: every configuration of the sweep was rejected; nothing to draw")

    all_points = [p for panel in panels.values() for points in panel.values() for p in points]
    all_y = [y for _, y in all_points]
    unit, scale = ("GiB", GiB) if max(all_y) >= GiB else ("MiB", MiB)
    keys = list(dict.fromkeys(k for panel in panels.values() for k in panel))
    first = list(dict.fromkeys(k[0] for k in keys)) if series_axes else []
    second = list(dict.fromkeys(k[1] for k in keys)) if len(series_axes) > 1 else []

    def style(key: tuple) -> dict:
        color = _COLORS[first.index(key[0]) % len(_COLORS)] if first else _COLORS[0]
        dash = _STYLES[second.index(key[1]) % len(_STYLES)] if second else "-"
        return {"color": color, "linestyle": dash}

    columns = min(len(backends), 2)
    rows = (len(backends) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(6.2 * columns + 3.2, 4.2 * rows + 0.8), dpi=120,
                             sharex=True, sharey=True, squeeze=False)
    # The legend explains the encoding once for all panels: colour = the first series axis,
    # dash pattern = the second (a grey sample line for each).
    from matplotlib.lines import Line2D

    handles: dict[str, object] = {}
    for value in first:
        handles[_series_label(series_axes[0], value)] = Line2D([], [], linewidth=1.6, marker="o", markersize=3,
                                                               **style((value,) + ((second[0],) if second else ())))
    for value in second:
        handles[_series_label(series_axes[1], value)] = Line2D([], [], color="#555", linewidth=1.6,
                                                               linestyle=_STYLES[second.index(value) % len(_STYLES)])
    if not first:
        handles["total allocation"] = Line2D([], [], color=_COLORS[0], linewidth=1.6, marker="o", markersize=3)
    log_x = min(x for x, _ in all_points) > 0 and max(x for x, _ in all_points) / min(x for x, _ in all_points) > 10
    positive = [y for y in all_y if y > 0]
    log_y = bool(positive) and max(positive) / min(positive) > 10
    for i, backend in enumerate(backends):
        ax = axes[i // columns][i % columns]
        labelled = {", ".join(_series_label(a, v) for a, v in zip(series_axes, key)) or "total allocation": key
                    for key in panels[backend]}
        merged = _merge_identical({label: panels[backend][key] for label, key in labelled.items()})
        for label, points in merged.items():
            key = labelled[label.split(" = ")[0]]
            xs, ys = [p[0] for p in points], [p[1] / scale for p in points]
            ax.plot(xs, ys, marker="o" if len(xs) <= 40 else None, markersize=3, linewidth=1.6, **style(key))
        coincide = [label for label in merged if " = " in label]
        if coincide:
            note = ("all series coincide" if len(merged) == 1 and len(labelled) > 1
                    else "; ".join(coincide) if sum(map(len, coincide)) <= 70
                    else f"{sum(label.count(' = ') + 1 for label in coincide)} series coincide in "
                         f"{len(coincide)} lines")
            ax.text(0.99, 0.02, "drawn once: " + note, transform=ax.transAxes, ha="right", va="bottom",
                    fontsize=7, color="#555")
        if broken[backend]:
            marks = ax.scatter([x for x, _ in broken[backend]], [y / scale for _, y in broken[backend]], marker="x",
                               s=46, color="#d62728", linewidths=1.6, zorder=5)
            handles.setdefault("breaks an upstream limit (see the table)", marks)
        if capacity is not None:
            name, num_bytes = capacity
            cap = ax.axhline(num_bytes / scale, color="#d62728", linestyle="--", linewidth=1.2)
            handles.setdefault(f"{name} capacity ({num_bytes / GiB:.1f} GiB)", cap)
        if log_x:
            ax.set_xscale("log", base=2)
        if log_y:
            ax.set_yscale("log")
        ax.set_title(backend if len(backends) > 1 or "backend" in result.varying else "", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        if i // columns == rows - 1 or i + columns >= len(backends):
            ax.set_xlabel(_LABELS.get(x_axis, x_axis))
        if i % columns == 0:
            ax.set_ylabel(f"total device allocation ({unit})")
    for j in range(len(backends), rows * columns):
        axes[j // columns][j % columns].set_visible(False)
    fig.suptitle(title or "Total device allocation per rank")
    fig.legend(list(handles.values()), list(handles), loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
               frameon=False)
    fig.tight_layout()
    try:
        write_atomic(path, lambda f: fig.savefig(f, format=fmt, bbox_inches="tight"), binary=True, option="--plot")
    finally:
        plt.close(fig)


def _series_label(axis: str, value: object) -> str:
    if axis == "backend":
        return str(value)
    if axis == "use_fp8_dispatch":
        return "FP8" if value else "BF16"
    short = {"num_ranks": "ranks", "num_max_tokens_per_rank": "tokens", "num_topk": "top-k",
             "num_experts": "experts", "hidden": "hidden"}
    return f"{short.get(axis, axis)} {value:,}" if isinstance(value, int) else f"{axis} {value}"
