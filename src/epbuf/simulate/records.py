"""The simulation's result records: integers (slots, bytes, messages) per rank and region.

Data only, rendered apart (``render.py`` text, ``to_dict`` JSON ``epbuf.simulate/1``,
``plot.py`` PNG). Per-rank values are tuples indexed by rank; matrices are tuples of rows.
"""

from __future__ import annotations

from .._record import Record, factory

__all__ = ["RegionUse", "ExpertUse", "PhaseTraffic", "BenchmarkBytes", "LinkSpec", "PhaseTime", "RoutingInfo",
           "Simulation"]


class RegionUse(Record):
    """How full one buffer region gets, per rank, under the simulated routing.

    Attributes:
        phase: ``"dispatch"`` or ``"combine"`` (the kernel that writes the region).
        buffer: the report's buffer (``"EP buffer"``, ``"NVL buffer"``, ``"RDMA buffer"``).
        region: the report's region, or upstream's sub-buffer variable
            (``scaleup_recv_buffer`` ...).
        rows: rows per rank (e.g. one per source rank).
        row: what a row is, in words (``"source rank"``, ``"top-k lane (master)"`` ...).
        slots: token slots per row the reservation holds.
        record: the report record a reserved slot is sized for.
        slot_bytes: bytes reserved per slot.
        used_slot_bytes: bytes a real run writes per slot (the real record; smaller than
            ``slot_bytes`` where upstream's hint approximates).
        num_bytes: bytes reserved per rank for this use (``rows x slots x slot_bytes``,
            or the whole region when it is shared by several uses).
        used_slots: per rank, slots holding a token at the end of the kernel (summed
            over rows); for ring buffers (DeepEP V1) the most a ring can hold at once,
            ``min(streamed, slots)``.
        peak_row_slots: the fullest row over every rank.
        peak_row: ``(rank, row)`` of that row.
        semantics: which token lands in which row and slot, in words.
        source: upstream kernel lines the semantics come from.
        streamed_slots: rings only: per rank, tokens streamed through its rings.
        peak_streamed_row: rings only: the most tokens through one ring.
        chunk_slots: rings only: tokens a sender moves per chunk (the config's
            ``num_max_*_chunked_send_tokens``).
    """

    phase: str
    buffer: str
    region: str
    rows: int
    row: str
    slots: int
    record: str
    slot_bytes: int
    used_slot_bytes: int
    num_bytes: int
    used_slots: tuple
    peak_row_slots: int
    peak_row: tuple
    semantics: str = ""
    source: str = ""
    streamed_slots: tuple = ()
    peak_streamed_row: int = 0
    chunk_slots: int = 0

    @property
    def reserved_slots(self) -> int:
        return self.rows * self.slots

    @property
    def peak_used_slots(self) -> int:
        return max(self.used_slots, default=0)

    @property
    def peak_rank(self) -> int:
        return self.used_slots.index(self.peak_used_slots) if self.used_slots else 0

    @property
    def mean_used_slots(self) -> float:
        return sum(self.used_slots) / len(self.used_slots) if self.used_slots else 0.0

    @property
    def peak_used_bytes(self) -> int:
        return self.peak_used_slots * self.used_slot_bytes

    @property
    def headroom_slots(self) -> int:
        """Reserved minus used slots on the fullest rank."""
        return self.reserved_slots - self.peak_used_slots

    @property
    def slot_num_bytes(self) -> int:
        """Bytes of this use's own slots, ``rows x slots x slot_bytes``: less than ``num_bytes``
        where the region is shared with a use of larger records (DeepEP's low-latency send buffer
        holds dispatch and combine)."""
        return self.rows * self.slots * self.slot_bytes

    @property
    def shared(self) -> bool:
        """A region laid out for another use too (rings hold send and receive halves: not shared)."""
        return self.num_bytes > self.slot_num_bytes and not self.streamed_slots

    @property
    def headroom_bytes(self) -> int:
        """This use's reserved slots' bytes minus the peak used bytes: the rest of a shared region
        is laid out for the other use, so a full phase has (next to) no headroom, as its fill says."""
        return (self.slot_num_bytes if self.shared else self.num_bytes) - self.peak_used_bytes

    @property
    def within(self) -> bool:
        """The invariant the layout promises: no row holds more tokens than its slots."""
        return self.peak_row_slots <= self.slots

    @property
    def is_ring(self) -> bool:
        return bool(self.streamed_slots)


class ExpertUse(Record):
    """Tokens each rank's local experts receive (the expanded receive layout).

    Attributes:
        expert_alignment: each expert's count is rounded up to this (``expert_alignment``
            of ``dispatch``; 1 = none).
        experts_per_rank: local experts per rank.
        recv_tokens: per rank, tokens received (one per source token, whatever the
            number of local experts it selects).
        recv_selections: per rank, selections received (sum over local experts).
        expanded_tokens: per rank, the expanded layout's rows: sum over local experts of
            the count aligned to ``expert_alignment``.
        peak_expert: ``(rank, local expert, selections)`` of the busiest expert.
        mean_expert: mean selections per expert.
        idle_experts: experts that receive nothing.
        bound: the worst case upstream checks for the expanded layout, when the backend
            reports one (DeepEP-Ascend's ``expanded tokens`` limit), else 0.
        bound_source: where ``bound`` comes from.
    """

    expert_alignment: int
    experts_per_rank: int
    recv_tokens: tuple
    recv_selections: tuple
    expanded_tokens: tuple
    peak_expert: tuple
    mean_expert: float
    idle_experts: int
    bound: int = 0
    bound_source: str = ""


class PhaseTraffic(Record):
    """Messages and bytes of one phase between every pair of ranks.

    Attributes:
        phase: ``"dispatch"`` or ``"combine"``.
        record: what one message is (a report record name, or a message the kernel
            sends, with its fields).
        message_bytes: bytes per message.
        per: what one message stands for (``"token and destination rank"`` ...).
        path: ``"direct"`` or how messages are forwarded.
        pair_messages: ``[src][dst]`` messages over a link (``src != dst``).
        local_messages: per rank, messages copied locally (no link).
        num_ranks_per_node: ranks per scale-up domain; a pair in one domain uses the
            scale-up link (NVLink/HCCS/UB), any other pair the scale-out one (RDMA).
        scaleup_send, scaleup_recv, scaleout_send, scaleout_recv: per rank, bytes it
            sends / receives over each link kind.
        source: upstream lines of the paths and message contents.
    """

    phase: str
    record: str
    message_bytes: int
    per: str
    path: str
    pair_messages: tuple
    local_messages: tuple
    num_ranks_per_node: int
    scaleup_send: tuple
    scaleup_recv: tuple
    scaleout_send: tuple
    scaleout_recv: tuple
    source: str = ""

    def pair_bytes(self) -> tuple:
        return tuple(tuple(m * self.message_bytes for m in row) for row in self.pair_messages)

    @property
    def scaleup_bytes(self) -> int:
        return sum(self.scaleup_send)

    @property
    def scaleout_bytes(self) -> int:
        return sum(self.scaleout_send)

    @property
    def local_bytes(self) -> int:
        return sum(self.local_messages) * self.message_bytes

    @property
    def num_messages(self) -> int:
        return sum(map(sum, self.pair_messages)) + sum(self.local_messages)


class BenchmarkBytes(Record):
    """The bytes DeepEP's (or sgl-kernel-npu's) benchmark script divides by the measured
    time to print GB/s, per rank, for this routing.

    Attributes:
        script: ``repository path``.
        source: the lines of the accounting, with the commit.
        dispatch: ``{label: per-rank bytes}``, labels as the script prints them
            (``"NVL"``, ``"RDMA"``, ``"SU"``, ``"SO"``, ``"RDMA bandwidth"``).
        combine: the same for combine.
        note: how the script's setting differs, when it matters.
    """

    script: str
    source: str
    dispatch: dict = factory(dict)
    combine: dict = factory(dict)
    note: str = ""


class LinkSpec(Record):
    """Per-rank link bandwidths (GB/s = 10^9 B/s, one direction) and latencies.

    Attributes:
        name: preset key (``"h800"``) or ``"custom"``.
        title: for people.
        scaleup: name of the scale-up link (``"NVLink"``, ``"HCCS"``, ``"UB"``).
        scaleup_gbps: one rank's scale-up bandwidth, each direction.
        scaleup_latency_us: latency added once per link that carries bytes.
        scaleout: name of the scale-out link (``"RDMA"``).
        scaleout_gbps: one rank's NIC bandwidth, each direction (``None``: unknown).
        scaleout_latency_us: its latency.
        scaleup_peer_gbps: full-mesh scale-up (no switch): each peer-to-peer link's
            bandwidth, each direction (``None``: switched, no per-pair limit).
        scaleup_domain: ranks one scale-up domain can hold (NVL72: 72, A3 SuperPoD: 384).
        source: where every number comes from.
    """

    name: str
    title: str
    scaleup: str
    scaleup_gbps: float
    scaleup_latency_us: float
    scaleout: str
    scaleout_gbps: float | None
    scaleout_latency_us: float
    scaleup_peer_gbps: float | None = None
    scaleup_domain: int = 8
    source: str = ""


class PhaseTime(Record):
    """The time model of one phase: the slowest link of the slowest rank.

    ``seconds = bytes / (gbps * 1e9) + latency_us * 1e-6`` of that link. Scale-out and
    scale-up hops of forwarding kernels run concurrently (pipelined over channels), so the
    phase takes as long as its slowest link, not their sum.

    Attributes:
        phase: ``"dispatch"`` / ``"combine"``.
        seconds: the estimate.
        rank: the bottleneck rank (``-1`` when nothing crosses a link).
        link: ``"scale-up"``, ``"scale-out"`` or ``"scale-up peer"``.
        direction: ``"send"`` or ``"recv"``.
        peer: the other rank of a peer link (``-1`` otherwise).
        num_bytes: bytes on that link.
        gbps: its bandwidth.
        latency_us: its latency.
        link_seconds: ``{"scale-up send": s, ...}``: the slowest rank's time per link kind.
    """

    phase: str
    seconds: float
    rank: int
    link: str
    direction: str
    peer: int
    num_bytes: int
    gbps: float
    latency_us: float
    link_seconds: dict = factory(dict)


class RoutingInfo(Record):
    """What was routed."""

    name: str
    description: str
    seed: int | None
    num_ranks: int
    num_tokens: tuple
    num_topk: int
    num_experts: int
    num_selections: int
    num_masked: int
    distinct_ranks_per_token: tuple = ()


class Simulation(Record):
    """Everything ``epbuf simulate`` computes for one plan, backend and routing.

    Attributes:
        backend, title, upstream: as in the report the reservations come from.
        plan: the Plan's fields.
        routing: :class:`RoutingInfo`.
        num_ranks_per_node: the scale-up domain the simulation classifies links by
            (the backend's node: its ``num_nvl_ranks`` / scale-up ranks).
        regions: :class:`RegionUse` per region and phase.
        experts: :class:`ExpertUse`.
        traffic: :class:`PhaseTraffic` for dispatch and combine.
        benchmark: :class:`BenchmarkBytes` (``None`` when no script applies).
        links: the :class:`LinkSpec` timed with (``None``: no estimate).
        times: :class:`PhaseTime` per phase.
        findings: ``epbuf.report.Finding`` records (invariant violations are errors).
    """

    backend: str
    title: str
    upstream: str
    plan: dict
    routing: RoutingInfo
    num_ranks_per_node: int
    regions: tuple
    experts: ExpertUse
    traffic: tuple
    benchmark: BenchmarkBytes | None = None
    links: LinkSpec | None = None
    times: tuple = ()
    findings: tuple = ()

    def phase_traffic(self, phase: str) -> PhaseTraffic:
        for t in self.traffic:
            if t.phase == phase:
                return t
        raise KeyError(phase)

    def phase_time(self, phase: str) -> PhaseTime:
        for t in self.times:
            if t.phase == phase:
                return t
        raise KeyError(phase)

    @property
    def violations(self) -> tuple:
        """Regions whose fullest row exceeded its slots (a formula that under-reserves)."""
        return tuple(r for r in self.regions if not r.within)
