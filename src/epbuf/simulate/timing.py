"""The time model: every link a rank uses, ``bytes / bandwidth + latency``; a phase lasts as
long as its slowest link on its slowest rank.

Links per rank: scale-up send and receive (NVLink / HCCS / UB, ``LinkSpec.scaleup_gbps``
each direction), scale-out send and receive (the NIC, ``scaleout_gbps``), and, for a
full-mesh scale-up without a switch (Ascend A2 HCCS), every peer-to-peer link
(``scaleup_peer_gbps``). The scale-out and scale-up hops of the forwarding kernels (DeepEP
V2 hybrid, V1 internode) run concurrently, pipelined over channels, so their times are
not added. Local copies cost nothing here. No efficiency factor is applied: links run at
the preset's bandwidth, so ``published / modelled`` in ``docs/simulate.md`` is the share of
it upstream's kernels reach.

>>> round(seconds_on(1_000_000_000, 50.0, 5.0) * 1e6, 3)  # 1 GB at 50 GB/s + 5 us, in us
20005.0
"""

from __future__ import annotations

from ..errors import InvalidArgumentError, Problem
from .records import LinkSpec, PhaseTime, PhaseTraffic

__all__ = ["seconds_on", "phase_time"]


def seconds_on(num_bytes: int, gbps: float, latency_us: float) -> float:
    """``num_bytes / (gbps * 1e9) + latency_us * 1e-6``; 0 for no bytes."""
    if num_bytes <= 0:
        return 0.0
    return num_bytes / (gbps * 1e9) + latency_us * 1e-6


def phase_time(traffic: PhaseTraffic, links: LinkSpec) -> PhaseTime:
    """The estimate for one phase, naming the rank and link that bound it."""
    candidates = []  # (seconds, rank, link, direction, peer, bytes, gbps, latency)
    per_link: dict[str, float] = {}
    kinds = [("scale-up", "send", traffic.scaleup_send, links.scaleup_gbps, links.scaleup_latency_us),
             ("scale-up", "recv", traffic.scaleup_recv, links.scaleup_gbps, links.scaleup_latency_us)]
    if traffic.scaleout_bytes:
        if links.scaleout_gbps is None:
            raise InvalidArgumentError([Problem("rdma_gbps", None, f"{links.title} has no public scale-out bandwidth "
                                                "and this plan sends bytes between nodes; give --rdma-gbps")])
        kinds += [("scale-out", "send", traffic.scaleout_send, links.scaleout_gbps, links.scaleout_latency_us),
                  ("scale-out", "recv", traffic.scaleout_recv, links.scaleout_gbps, links.scaleout_latency_us)]
    for link, direction, per_rank, gbps, latency in kinds:
        worst = max(range(len(per_rank)), key=per_rank.__getitem__)
        t = seconds_on(per_rank[worst], gbps, latency)
        per_link[f"{link} {direction}"] = t
        candidates.append((t, worst, link, direction, -1, per_rank[worst], gbps, latency))
    if links.scaleup_peer_gbps is not None:
        g = traffic.num_ranks_per_node
        best = (0, -1, -1)
        for s, row in enumerate(traffic.pair_messages):
            for d, m in enumerate(row):
                if m > best[0] and s // g == d // g:
                    best = (m, s, d)
        m, s, d = best
        t = seconds_on(m * traffic.message_bytes, links.scaleup_peer_gbps, links.scaleup_latency_us)
        per_link["scale-up peer"] = t
        candidates.append((t, s, "scale-up peer", "send", d, m * traffic.message_bytes, links.scaleup_peer_gbps,
                           links.scaleup_latency_us))
    t, rank, link, direction, peer, num_bytes, gbps, latency = max(candidates, key=lambda c: c[0])
    if t == 0:
        rank = -1
    return PhaseTime(phase=traffic.phase, seconds=t, rank=rank, link=link, direction=direction, peer=peer,
                     num_bytes=num_bytes, gbps=gbps, latency_us=latency, link_seconds=per_link)
