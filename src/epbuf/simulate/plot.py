"""``epbuf simulate --plot FILE``: the rank x rank dispatch traffic heatmap beside the
per-region occupancy bars (matplotlib, the extra ``epbuf[plot]``; PNG, SVG or PDF by the suffix)."""

from __future__ import annotations

from ..units import format_bytes
from .records import Simulation

__all__ = ["plot_simulation"]


def _si_unit(num_bytes: float) -> tuple[float, str]:
    """``(scale, unit)`` of decimal byte units for ``num_bytes`` (the traffic tables' units)."""
    for scale, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if num_bytes >= scale:
            return scale, unit
    return 1.0, "B"


def _si(num_bytes: float) -> str:
    """``"1.23 MB"``, ``"512 B"``: never ``"0.00 GB"`` for kilobytes of traffic."""
    scale, unit = _si_unit(num_bytes)
    return f"{num_bytes:,.0f} B" if unit == "B" else f"{num_bytes / scale:.2f} {unit}"


def plot_simulation(sim: Simulation, path: str) -> None:
    """Draw ``sim`` and write ``path`` atomically."""
    from ..io import write_atomic
    from ..plot import _pyplot, plot_format
    from ..routing import numpy

    fmt = plot_format(path)  # .png, .svg or .pdf; refused before anything is drawn
    np = numpy()
    plt = _pyplot()
    dispatch = sim.phase_traffic("dispatch")
    n = len(dispatch.pair_messages)
    pairs = np.asarray(dispatch.pair_messages, dtype=np.float64) * dispatch.message_bytes
    pairs[np.arange(n), np.arange(n)] = np.nan  # local copies cross no link: drawn grey
    regions = list(sim.regions)

    fig = plt.figure(figsize=(16, max(6.5, 2.6 + 0.6 * len(regions))), dpi=110)
    grid = fig.add_gridspec(1, 2, width_ratios=[1.0, 1.0], wspace=0.62)
    ax = fig.add_subplot(grid[0])
    top = np.nanmax(pairs) if np.isfinite(pairs).any() else 0.0
    scale, unit = _si_unit(top)
    cmap = plt.get_cmap("viridis").with_extremes(bad="#bdbdbd")
    image = ax.imshow(pairs / scale, cmap=cmap, interpolation="nearest", aspect="equal", vmin=0)
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    bar.set_label(f"bytes sent over a link ({unit})")
    g = sim.num_ranks_per_node
    if 1 < g < n:
        for edge in range(g, n, g):
            ax.axhline(edge - 0.5, color="white", linewidth=0.8, alpha=0.8)
            ax.axvline(edge - 0.5, color="white", linewidth=0.8, alpha=0.8)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # ranks are whole numbers
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("destination rank")
    ax.set_ylabel("source rank")
    lines = [f"scale-up {_si(dispatch.scaleup_bytes)}, scale-out {_si(dispatch.scaleout_bytes)}"]
    if sim.times:
        t = sim.phase_time("dispatch")
        lines.append(f"~{t.seconds * 1e6:,.0f} us, bound by rank {t.rank} {t.link} {t.direction}")
    ax.set_title("Dispatch traffic, source rank to destination rank\n(grey: local copy"
                 + ("; white lines: scale-up domains)" if 1 < g < n else ")") + "\n" + "; ".join(lines), fontsize=10)

    ax = fig.add_subplot(grid[1])
    labels = [f"{u.phase}: {u.region}" for u in regions]
    y = np.arange(len(regions))[::-1]
    peak = [100 * u.peak_used_slots / u.reserved_slots if u.reserved_slots else 0 for u in regions]
    mean = [100 * u.mean_used_slots / u.reserved_slots if u.reserved_slots else 0 for u in regions]
    row = [100 * u.peak_row_slots / u.slots if u.slots else 0 for u in regions]
    ax.barh(y, [100] * len(regions), height=0.8, color="#e8e8e8", edgecolor="#b0b0b0", label="reserved (100 %)")
    ax.barh(y + 0.18, peak, height=0.34, color="#1f77b4", label="peak rank: slots used")
    ax.barh(y - 0.18, mean, height=0.34, color="#9ecae1", label="mean over ranks")
    ax.scatter(row, y, marker="|", s=260, color="#d62728", zorder=5, linewidths=2.2, label="fullest row")
    for yi, u, p in zip(y, regions, peak):
        text = f"{p:.0f} % of {format_bytes(u.num_bytes)}"
        if u.is_ring and u.slots:
            text += f"\nbusiest ring streams {u.peak_streamed_row / u.slots:.1f}x its slots"
        ax.text(101.5, yi, text, va="center", fontsize=8.5)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=9)
    ax.set_xlim(0, 150 if any(u.is_ring for u in regions) else 135)
    ax.set_xticks([0, 25, 50, 75, 100])
    ax.set_xlabel("share of the reserved slots (%)")
    ax.axvline(100, color="#555555", linewidth=1.0, linestyle="--")
    ax.set_title(f"Occupancy per region ({sim.backend})", fontsize=10)
    ax.legend(fontsize=8.5, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=4, frameon=False)

    r = sim.routing
    fig.suptitle(f"{sim.title}: {r.num_ranks} ranks x {max(r.num_tokens):,} tokens, top-{r.num_topk}/"
                 f"{r.num_experts}, routing {r.name}" + (f" (seed {r.seed})" if r.seed is not None else ""),
                 fontsize=12)
    fig.subplots_adjust(left=0.05, right=0.98, top=0.85, bottom=0.16)
    try:
        write_atomic(path, lambda f: fig.savefig(f, format=fmt), binary=True, option="--plot")
    finally:
        plt.close(fig)
