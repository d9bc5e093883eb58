"""PNG/SVG plots of sweeps (matplotlib, the optional extra ``epbuf[plot]``).

One line per series (each combination of the varying axes other than the x axis),
sizes in IEC units on a log scale when they span more than a decade, and the device
capacity as a dashed reference line. matplotlib is imported here only, with the Agg
backend, so nothing else in epbuf needs it.
"""

from __future__ import annotations

from .errors import EpbufError, MissingExtraError
from .sweep import SweepResult
from .units import GiB, MiB

__all__ = ["MissingExtraError", "plot_sweep", "choose_x_axis"]

_LABELS = {
    "num_max_tokens_per_rank": "num_max_tokens_per_rank (tokens per rank)",
    "num_ranks": "EP ranks",
    "hidden": "hidden size",
    "num_topk": "top-k",
    "num_experts": "experts",
}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise MissingExtraError("--plot needs matplotlib: pip install 'epbuf[plot]'") from None
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


def plot_sweep(result: SweepResult, path: str, capacity: tuple[str, int] | None = None, title: str = "") -> None:
    """Draw the sweep's total allocation against its main axis and write ``path`` (PNG or SVG) atomically."""
    plt = _pyplot()
    from .io import write_atomic

    x_axis = choose_x_axis(result)
    cols = result.columns
    xi, yi = cols.index(x_axis), cols.index("num_bytes")
    series_axes = [a for a in result.varying if a != x_axis]
    bi = cols.index("broken_limits")
    series: dict[tuple, list[tuple[int, int]]] = {}
    broken: list[tuple[int, int]] = []
    for row in result.rows:
        if row[yi] is None:
            continue
        key = tuple(row[cols.index(a)] for a in series_axes)
        series.setdefault(key, []).append((row[xi], row[yi]))
        if row[bi]:
            broken.append((row[xi], row[yi]))
    if not series:
        raise EpbufError("--plot: every configuration of the sweep was rejected; nothing to draw")

    all_y = [y for points in series.values() for _, y in points]
    unit, scale = ("GiB", GiB) if max(all_y) >= GiB else ("MiB", MiB)
    fig, ax = plt.subplots(figsize=(10, 6), dpi=120)
    for key, points in series.items():
        points.sort()
        label = ", ".join(_series_label(a, v) for a, v in zip(series_axes, key)) or "total allocation"
        xs = [p[0] for p in points]
        ys = [p[1] / scale for p in points]
        ax.plot(xs, ys, marker="o" if len(xs) <= 40 else None, markersize=3, linewidth=1.6, label=label)
    if broken:
        ax.scatter([x for x, _ in broken], [y / scale for _, y in broken], marker="x", s=46, color="#d62728",
                   linewidths=1.6, zorder=5, label="breaks an upstream limit (see the table)")
    if capacity is not None:
        name, num_bytes = capacity
        ax.axhline(num_bytes / scale, color="#d62728", linestyle="--", linewidth=1.4,
                   label=f"{name} capacity ({num_bytes / GiB:.1f} GiB)")
    xs_all = [x for points in series.values() for x, _ in points]
    if min(xs_all) > 0 and max(xs_all) / min(xs_all) > 10:
        ax.set_xscale("log", base=2)
    positive = [y for y in all_y if y > 0]
    if positive and max(positive) / min(positive) > 10:
        ax.set_yscale("log")
    ax.set_xlabel(_LABELS.get(x_axis, x_axis))
    ax.set_ylabel(f"total device allocation ({unit})")
    ax.set_title(title or "Total device allocation per rank")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fmt = "svg" if str(path).lower().endswith(".svg") else "png"
    try:
        write_atomic(path, lambda f: fig.savefig(f, format=fmt), binary=True, option="--plot")
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
