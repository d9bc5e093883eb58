"""Text rendering of a :class:`~epbuf.simulate.records.Simulation` (no arithmetic beyond
formatting: shares, means and GB/s at the modelled time)."""

from __future__ import annotations

from ..render import finding_lines, table, wrap
from ..units import format_bytes, format_int
from .records import Simulation

__all__ = ["render_simulation"]


def _gb(num_bytes: float) -> str:
    """Decimal units, as link bandwidths and DeepEP's tables count."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(num_bytes) >= scale:
            return f"{num_bytes / scale:.2f} {unit}"
    return f"{num_bytes:.0f} B"


def _time(seconds: float) -> str:
    if seconds >= 1e3:  # a bandwidth given as a tiny number: no 300-digit millisecond count
        return f"{seconds:.4g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "-"


def _peak(values) -> tuple[int, int]:
    best = max(range(len(values)), key=values.__getitem__) if values else 0
    return (values[best] if values else 0), best


def render_simulation(sim: Simulation, width: int | None = None) -> str:
    """The human form of ``epbuf simulate``; lines fit ``width`` (None: each line whole, every
    column in its own place)."""
    r, n = sim.routing, sim.routing.num_ranks
    g = sim.num_ranks_per_node
    tokens = set(r.num_tokens)
    token_text = format_int(r.num_tokens[0]) if len(tokens) == 1 else \
        f"{format_int(min(tokens))}..{format_int(max(tokens))}"
    hist = r.distinct_ranks_per_token
    routed = sum(hist)
    mean_ranks = sum(j * c for j, c in enumerate(hist)) / routed if routed else 0.0
    reached = [j for j, c in enumerate(hist) if c]
    out = wrap(f"{sim.title}: simulated dispatch and combine", width, "  ", "")
    out += wrap(sim.upstream, width, "            ", "  upstream: ")
    out += wrap(f"{r.name}{f', seed {r.seed}' if r.seed is not None else ''}: {r.description}", width,
                "            ", "  routing:  ")
    out += wrap(f"{n} ranks x {token_text} tokens x top-{r.num_topk} over {r.num_experts} experts; "
                f"{format_int(r.num_selections)} selections, {format_int(r.num_masked)} masked; a token reaches "
                f"{min(reached, default=0)}..{max(reached, default=0)} ranks (mean {mean_ranks:.2f})", width,
                "            ", "            ")
    out += [f"  topology: {n // g} node(s) x {g} ranks per scale-up domain", ""]

    # --- occupancy ----------------------------------------------------------------
    out += wrap(f"Occupancy per rank (token slots; peak and mean over the {n} ranks; headroom = reserved - peak)",
                width, "  ", "")
    rows = []
    for u in sim.regions:
        mean, row = f"{u.mean_used_slots:,.0f}", f"{format_int(u.peak_row_slots)}/{format_int(u.slots)}"
        shape, peak = f"{format_int(u.rows)} x {format_int(u.slots)}", format_int(u.peak_used_slots)
        if width is None:
            rows.append([u.phase, u.region, shape, format_bytes(u.num_bytes), f"{peak} (rank {u.peak_rank})",
                         _pct(u.peak_used_slots, u.reserved_slots), format_bytes(u.headroom_bytes), mean, row,
                         format_bytes(u.peak_used_bytes)])
        else:  # the narrow form: what does not fit goes on a line under the row
            rows.append([u.phase, u.region, format_bytes(u.num_bytes), peak,
                         _pct(u.peak_used_slots, u.reserved_slots), format_bytes(u.headroom_bytes),
                         f"{shape} slots; peak at rank {u.peak_rank}, mean {mean}; fullest row {row}; peak bytes "
                         f"{format_bytes(u.peak_used_bytes)}"])
    if width is None:
        out.append(table(["phase", "region", "rows x slots", "reserved", "peak used", "fill", "headroom",
                          "mean used", "fullest row", "peak bytes"], rows, right=set(range(2, 10))))
    else:
        out.append(table(["phase", "region", "reserved", "peak used", "fill", "headroom", "more"], rows,
                         right={2, 3, 4, 5}, width=width, wrap_columns=(1,), below=(6,), always_below=True))
    rings = [u for u in sim.regions if u.is_ring]
    for u in rings:
        passes = -(-u.peak_streamed_row // u.slots) if u.slots else 0
        chunks = -(-u.peak_streamed_row // u.chunk_slots) if u.chunk_slots else 0
        out += wrap(f"{u.phase} {u.region}: up to {format_int(u.peak_streamed_row)} tokens stream through one "
                    f"{format_int(u.slots)}-slot ring ({passes} pass{'es' if passes != 1 else ''}"
                    + (f", {format_int(chunks)} chunks of <= {u.chunk_slots} tokens" if u.chunk_slots else "")
                    + f"); flow control keeps at most {format_int(u.slots)} in it", width, "    ", "  ")
    for u in sim.regions:
        if u.shared:
            out += wrap(f"{u.phase} {u.region}: shared; its {format_bytes(u.num_bytes)} are laid out for the larger "
                        f"use, this phase's {format_int(u.reserved_slots)} slots take {format_bytes(u.slot_num_bytes)} "
                        "(headroom counts those)", width, "    ", "  ")
    sizes = {u.slot_bytes - u.used_slot_bytes for u in sim.regions if u.slot_bytes != u.used_slot_bytes}
    if sizes:
        out += wrap("peak bytes count the records a real run writes; reserved slots are sized for the hint's "
                    "records (see `epbuf hint` findings)", width, "    ", "  ")
    violations = sim.violations
    if violations:
        out.append(f"  ERROR: {len(violations)} region(s) overflowed their reservation (see findings)")
    else:
        out += wrap(f"every region held the routing within its reservation (fullest row "
                    f"{max((u.peak_row_slots / u.slots for u in sim.regions if u.slots), default=0):.1%} of its "
                    "slots)", width, "    ", "  ")
    out.append("")

    # --- experts --------------------------------------------------------------------
    e = sim.experts
    rank, expert, count = e.peak_expert
    peak_exp, peak_exp_rank = _peak(e.expanded_tokens)
    peak_recv, peak_recv_rank = _peak(e.recv_tokens)
    out.append(f"Experts ({e.experts_per_rank} per rank; expert_alignment {e.expert_alignment})")
    out += wrap(f"busiest expert: rank {rank} expert {expert} with {format_int(count)} selections "
                f"(mean {e.mean_expert:,.1f}); {format_int(e.idle_experts)} expert(s) receive nothing", width,
                "    ", "  ")
    out += wrap(f"tokens received per rank: peak {format_int(peak_recv)} (rank {peak_recv_rank}), mean "
                f"{sum(e.recv_tokens) / n:,.0f}; expanded rows (aligned): peak {format_int(peak_exp)} "
                f"(rank {peak_exp_rank}), mean {sum(e.expanded_tokens) / n:,.0f}"
                + (f"; upstream's worst case {format_int(e.bound)}" if e.bound else ""), width, "    ", "  ")
    out.append("")

    # --- traffic -----------------------------------------------------------------------
    out += wrap("Traffic per call (bytes; scale-up = within a scale-up domain, scale-out = between domains)", width,
                "  ", "")
    rows = []
    for t in sim.traffic:
        up = f"{_gb(max(t.scaleup_send))} / {_gb(max(t.scaleup_recv))}"
        across = f"{_gb(max(t.scaleout_send))} / {_gb(max(t.scaleout_recv))}"
        rows.append([t.phase, format_int(t.message_bytes), format_int(t.num_messages), _gb(t.scaleup_bytes),
                     _gb(t.scaleout_bytes), _gb(t.local_bytes)]
                    + ([up, across] if width is None else [f"scale-up {up}, scale-out {across}"]))
    headers = ["phase", "message B", "messages", "scale-up", "scale-out", "local"]
    out.append(table(headers + (["busiest scale-up out / in", "busiest scale-out out / in"] if width is None
                                else ["busiest rank out / in"]), rows, right={1, 2, 3, 4, 5} | ({6, 7} if width is None else set()),
                     width=width, below=(6,), always_below=width is not None))
    for t in sim.traffic:
        out += wrap(f"{t.phase}: one message per {t.per}, record '{t.record}'; path: {t.path}", width, "    ", "  ")
    out.append("")

    # --- time ---------------------------------------------------------------------------
    if sim.links is not None and sim.times:
        lk = sim.links
        scaleout = f"{lk.scaleout} {lk.scaleout_gbps:g} GB/s + {lk.scaleout_latency_us:g} us" \
            if lk.scaleout_gbps is not None else f"{lk.scaleout} unknown"
        out += wrap(f"Time estimate ({lk.title}: {lk.scaleup} {lk.scaleup_gbps:g} GB/s + {lk.scaleup_latency_us:g} "
                    f"us, {scaleout}; per rank and direction)", width, "  ", "")
        for tm in sim.times:
            if tm.rank < 0:
                out.append(f"  {tm.phase:<9} {_time(0)}  nothing crosses a link")
                continue
            peer = f" to rank {tm.peer}" if tm.peer >= 0 else ""
            out += wrap(f"bound by rank {tm.rank} {tm.link} {tm.direction}{peer}: {_gb(tm.num_bytes)} at "
                        f"{tm.gbps:g} GB/s + {tm.latency_us:g} us", width, " " * 24,
                        f"  {tm.phase:<9} {_time(tm.seconds):>10}  ")
        out += wrap("model: bytes / bandwidth + latency per link, the slowest link sets the phase "
                    "(forwarding hops overlap); no efficiency factor (docs/simulate.md compares it with "
                    "upstream's published figures)", width, "    ", "  ")
        out.append("")

    # --- benchmark accounting -----------------------------------------------------------
    b = sim.benchmark
    if b is not None:
        out += wrap(f"Benchmark accounting ({b.script}; {b.source})", width, "  ", "")
        for phase, counts in (("dispatch", b.dispatch), ("combine", b.combine)):
            seconds = next((t.seconds for t in sim.times if t.phase == phase), 0.0)
            parts = []
            for label, per_rank in counts.items():
                text = f"{label} {_gb(per_rank[0])}"
                if seconds > 0:
                    text += f" -> {per_rank[0] / seconds / 1e9:,.1f} GB/s at the modelled time"
                parts.append(text)
            out += wrap("; ".join(parts), width, " " * 20, f"  {phase:<9} rank 0: ")
        if b.note:
            out += wrap(f"note: {b.note}", width, "    ", "  ")
        out.append("")

    if sim.findings:
        out.append("Findings")
        out += finding_lines(sim.findings, width)
        out.append("")
    return "\n".join(out).rstrip() + "\n"
