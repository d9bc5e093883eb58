"""``epbuf simulate``: how full the buffers really get, what crosses the links, how long it takes.

The size hint is a worst-case reservation. :func:`simulate` routes real or generated
tokens (``epbuf.routing``) through one backend's layout and reports, per rank and
region, reserved against used slots and bytes (``occupancy``), the bytes between every
pair of ranks split into scale-up and scale-out links (``traffic``), the bytes DeepEP's
own benchmark scripts count, and a time estimate from link presets (``links``,
``timing``). Everything is vectorized numpy (the extra ``epbuf[sim]``), imported only
when a simulation runs.

>>> import epbuf
>>> from epbuf.routing import generate
>>> plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=64, num_ranks=8, num_max_tokens_per_rank=128)
>>> sim = simulate(plan, "deepep-v2", generate("all-to-one", num_ranks=8, num_tokens=128, num_experts=64, num_topk=8))
>>> [(r.region, r.peak_row_slots, r.slots) for r in sim.regions]
[('recv_buffer', 128, 128), ('recv_buffer', 128, 128)]
>>> sim.violations
()

Package layout: ``counts`` (the vectorized routing tables), ``occupancy``, ``traffic``,
``links`` (presets with sources), ``timing``, ``records`` (result records), ``render``
(text), ``plot`` (PNG, matplotlib), ``published`` (upstream's published figures against
the model).
"""

from __future__ import annotations

from ..errors import InvalidArgumentError, Problem
from ..report import Finding
from .._progress import terminal_progress  # noqa: F401  (re-exported: epbuf.simulate.terminal_progress)
from .records import RoutingInfo, Simulation

__all__ = ["simulate", "simulate_options", "to_dict", "SCHEMA", "DEFAULT_LINKS", "terminal_progress"]

SCHEMA = "epbuf.simulate/1"

#: The link preset timed with when none is given: the machines upstream published on
#: (DeepEP: H800 + CX7, docs/legacy.md; DeepEP-Ascend in sgl-kernel-npu: A3 SuperPoD).
DEFAULT_LINKS = {"ascend": "ascend-a3", "deepep-v2": "h800", "deepep-v1": "h800", "deepep-ll": "h800"}


#: The largest routing tables a simulation builds: ranks x experts x 4 counters (int64, 0.5 GiB).
MAX_TABLE_ENTRIES = 1 << 26


def _check_plan(plan) -> None:
    """What the routing tables need before anything is allocated: experts spread evenly over
    the ranks, and per-(rank, expert) tables of a size memory holds."""
    problems = []
    experts = plan.num_total_experts
    if experts % plan.num_ranks:
        problems.append(Problem("num_experts", experts, f"must be a multiple of num_ranks = {plan.num_ranks} to "
                                                        "place experts / ranks on each rank (experts + redundant "
                                                        "experts)"))
    if plan.num_ranks * experts * 4 > MAX_TABLE_ENTRIES:
        problems.append(Problem("num_experts", experts, f"ranks {plan.num_ranks:,} x experts {experts:,} x 4 routing "
                                                        f"counters exceed {MAX_TABLE_ENTRIES:,}: too large to simulate"))
    if problems:
        raise InvalidArgumentError(problems)


def _check(plan, routing, report) -> None:
    _check_plan(plan)
    problems = []
    experts = plan.num_total_experts
    if routing.num_ranks != plan.num_ranks:
        problems.append(Problem("num_ranks", plan.num_ranks, f"the routing has {routing.num_ranks} ranks"))
    if routing.num_experts != experts:
        problems.append(Problem("num_experts", experts, f"the routing's experts range over {routing.num_experts} "
                                                        "(experts + redundant experts must match)"))
    if routing.num_topk != plan.num_topk or plan.num_topk == 0:
        problems.append(Problem("num_topk", plan.num_topk, f"the routing has top-k {routing.num_topk}; a simulation "
                                                           "needs the real top-k (not 0)"))
    if routing.num_max_tokens > plan.num_max_tokens_per_rank:
        problems.append(Problem("num_max_tokens_per_rank", plan.num_max_tokens_per_rank,
                                f"the routing has {routing.num_max_tokens} tokens per rank; the buffers hold at most "
                                "--tokens per rank"))
    if problems:
        raise InvalidArgumentError(problems)


def simulate(plan, backend: str, routing, *, links=None, expert_alignment: int = 1, progress=None) -> Simulation:
    """Route ``routing`` through ``backend``'s buffers for ``plan``.

    Args:
        plan: an :class:`epbuf.Plan`; its ``num_max_tokens_per_rank`` bounds the routing's
            tokens per rank, ``num_experts + num_redundant_experts`` its expert range.
        backend: ``ascend``, ``deepep-v2``, ``deepep-v1`` or ``deepep-ll``.
        routing: an :class:`epbuf.routing.Routing`.
        links: a :class:`~epbuf.simulate.records.LinkSpec` for the time estimate
            (``None``: no estimate).
        expert_alignment: ``expert_alignment`` of the expanded receive layout.
        progress: ``callable(stage: str)`` told when each stage starts.

    Raises:
        InvalidArgumentError: the plan breaks the backend's limits, or the routing does
            not fit the plan (ranks, experts, top-k, tokens).
    """
    from ..errors import check_int
    from ..plan import report as make_report
    from . import occupancy, timing, traffic
    from .counts import RoutingStats

    check_int("expert_alignment", expert_alignment, 1)
    _check_backend(backend)
    say = progress or (lambda stage: None)
    report = make_report(plan, backend)
    _check(plan, routing, report)
    per_node = occupancy.ranks_per_node(report, plan)
    say("counting the routing")
    stats = RoutingStats(routing.topk_idx, routing.num_experts, per_node, routing.num_tokens)
    say("occupancy")
    regions = occupancy.region_uses(report, plan, stats)
    experts = occupancy.expert_use(report, stats, expert_alignment)
    say("traffic")
    phases = traffic.phase_traffic(report, plan, stats, per_node)
    bench = traffic.benchmark_bytes(report, plan, stats, per_node)
    times = tuple(timing.phase_time(t, links) for t in phases) if links is not None else ()
    findings = []
    for r in regions:
        if not r.within:
            findings.append(Finding(
                severity="error", code="simulate.invariant-violated",
                message=f"{r.phase} {r.region}: row {r.peak_row[1]} of rank {r.peak_row[0]} holds "
                        f"{r.peak_row_slots:,} tokens but the layout reserves {r.slots:,} slots per row; the size "
                        "formula allowed a routing of at most --tokens tokens per rank to overflow it",
                data={"region": r.region, "phase": r.phase, "rank": r.peak_row[0], "row": r.peak_row[1],
                      "used": r.peak_row_slots, "slots": r.slots}))
    if links is not None and per_node > links.scaleup_domain:
        findings.append(Finding(
            severity="warning", code="simulate.scaleup-domain",
            message=f"{per_node} ranks per scale-up domain, but one {links.title} domain holds "
                    f"{links.scaleup_domain}; pairs inside it are timed as scale-up ({links.scaleup}) traffic",
            data={"num_ranks_per_node": per_node, "scaleup_domain": links.scaleup_domain}))
    info = RoutingInfo(name=routing.name, description=routing.description, seed=routing.seed,
                       num_ranks=routing.num_ranks, num_tokens=routing.num_tokens, num_topk=routing.num_topk,
                       num_experts=routing.num_experts, num_selections=routing.num_selections,
                       num_masked=routing.num_masked,
                       distinct_ranks_per_token=tuple(stats.distinct_ranks_per_token().sum(axis=0).tolist()))
    return Simulation(backend=backend, title=report.title, upstream=report.upstream,
                      plan={k: v for k, v in plan.as_dict().items() if k != "deepep_config"}, routing=info,
                      num_ranks_per_node=per_node, regions=regions, experts=experts, traffic=phases, benchmark=bench,
                      links=links, times=times, findings=tuple(findings))


def _check_backend(backend: object) -> None:
    """One line for a backend simulate does not model (the others size fine with ``hint``)."""
    if backend not in DEFAULT_LINKS:
        from ..errors import UnknownNameError

        raise UnknownNameError(f"--backend = {backend!r}: simulates {', '.join(DEFAULT_LINKS)}")


def simulate_options(plan, backend: str, *, routing: str = "uniform", routing_file: str | None = None,
                     seed: int | None = 0, num_tokens: int | None = None, masked_ratio: float = 0.0,
                     expert_alignment: int = 1, device: str | None = None, network: str | None = None,
                     nvlink_gbps: float | None = None, rdma_gbps: float | None = None,
                     latency_us: float | None = None, adopt_file_topk: bool = False, progress=None):
    """``(simulation, routing)`` from command-line style options: the routing ``routing``
    names (:func:`epbuf.routing.generate`, ``num_tokens`` per rank, default the plan's
    ``num_max_tokens_per_rank``) or the file ``routing_file``; links from the preset
    ``device`` (default :data:`DEFAULT_LINKS`) with ``network`` / ``nvlink_gbps`` /
    ``rdma_gbps`` / ``latency_us`` replacing its numbers. ``adopt_file_topk``: take the
    file's top-k for the plan (when the user gave none)."""
    from .. import routing as routing_module
    from .links import custom_links, get_links

    _check_backend(backend)
    _check_plan(plan)
    say = progress or (lambda stage, done=None, total=None: None)
    links = custom_links(get_links(device or DEFAULT_LINKS[backend]), network=network, nvlink_gbps=nvlink_gbps,
                         rdma_gbps=rdma_gbps, latency_us=latency_us)
    if plan.num_ranks_per_node is None and links.scaleup_domain > plan.ranks_per_node:
        # no --gpus-per-node: a device whose scale-up domain spans more than 8 ranks (NVL72, A3
        # SuperPoD) keeps as many ranks in one domain as divide the EP size
        per_node = max(d for d in range(1, min(plan.num_ranks, links.scaleup_domain) + 1) if plan.num_ranks % d == 0)
        plan = plan.replace(num_ranks_per_node=per_node)
    if routing_file is not None:
        say("reading the routing")
        r = routing_module.load(routing_file, num_ranks=plan.num_ranks, num_experts=plan.num_total_experts,
                                num_max_tokens_per_rank=plan.num_max_tokens_per_rank)
        if adopt_file_topk and r.num_topk != plan.num_topk:
            plan = plan.replace(num_topk=r.num_topk)
        if masked_ratio:
            r.topk_idx = routing_module.mask(r.topk_idx, masked_ratio, seed=seed)
    else:
        tokens = plan.num_max_tokens_per_rank if num_tokens is None else num_tokens
        if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > plan.num_max_tokens_per_rank:
            raise InvalidArgumentError([Problem("num_tokens", tokens, f"allowed 0..{plan.num_max_tokens_per_rank} "
                                                                      "(--tokens, num_max_tokens_per_rank)")])
        say("generating the routing")
        r = routing_module.generate(
            routing, num_ranks=plan.num_ranks, num_tokens=tokens, num_experts=plan.num_experts,
            num_topk=plan.num_topk, seed=seed, num_ranks_per_node=plan.ranks_per_node, model=plan.model,
            num_redundant_experts=plan.num_redundant_experts, masked_ratio=masked_ratio,
            progress=lambda done, total: say("generating the routing", done, total))
    return simulate(plan, backend, r, links=links, expert_alignment=expert_alignment,
                    progress=lambda stage: say(stage)), r


def to_dict(sim: Simulation, *, include_pairs: bool = True) -> dict:
    """The JSON form (schema ``epbuf.simulate/1``, documented in README.md)."""
    r = sim.routing
    out = {
        "schema": SCHEMA,
        "backend": sim.backend,
        "title": sim.title,
        "upstream": sim.upstream,
        "plan": dict(sim.plan),
        "routing": {"name": r.name, "description": r.description, "seed": r.seed, "num_ranks": r.num_ranks,
                    "num_tokens": list(r.num_tokens), "num_topk": r.num_topk, "num_experts": r.num_experts,
                    "num_selections": r.num_selections, "num_masked": r.num_masked,
                    "distinct_ranks_per_token": list(r.distinct_ranks_per_token)},
        "num_ranks_per_node": sim.num_ranks_per_node,
        "regions": [
            {"phase": u.phase, "buffer": u.buffer, "region": u.region, "rows": u.rows, "row": u.row,
             "slots": u.slots, "record": u.record, "slot_bytes": u.slot_bytes, "used_slot_bytes": u.used_slot_bytes,
             "num_bytes": u.num_bytes, "reserved_slots": u.reserved_slots, "used_slots": list(u.used_slots),
             "peak_used_slots": u.peak_used_slots, "peak_rank": u.peak_rank, "mean_used_slots": u.mean_used_slots,
             "peak_used_bytes": u.peak_used_bytes, "headroom_slots": u.headroom_slots,
             "headroom_bytes": u.headroom_bytes, "peak_row_slots": u.peak_row_slots, "peak_row": list(u.peak_row),
             "within": u.within, "ring": u.is_ring, "streamed_slots": list(u.streamed_slots),
             "peak_streamed_row": u.peak_streamed_row, "chunk_slots": u.chunk_slots, "semantics": u.semantics,
             "source": u.source}
            for u in sim.regions
        ],
        "experts": {k: (list(v) if isinstance(v, tuple) else v) for k, v in sim.experts.as_dict().items()},
        "traffic": {
            t.phase: {"record": t.record, "message_bytes": t.message_bytes, "per": t.per, "path": t.path,
                      "num_messages": t.num_messages, "scaleup_bytes": t.scaleup_bytes,
                      "scaleout_bytes": t.scaleout_bytes, "local_bytes": t.local_bytes,
                      "scaleup_send": list(t.scaleup_send), "scaleup_recv": list(t.scaleup_recv),
                      "scaleout_send": list(t.scaleout_send), "scaleout_recv": list(t.scaleout_recv),
                      "local_messages": list(t.local_messages), "source": t.source,
                      **({"pair_messages": [list(row) for row in t.pair_messages]} if include_pairs else {})}
            for t in sim.traffic
        },
        "benchmark": None if sim.benchmark is None else {
            "script": sim.benchmark.script, "source": sim.benchmark.source, "note": sim.benchmark.note,
            "dispatch": {k: list(v) for k, v in sim.benchmark.dispatch.items()},
            "combine": {k: list(v) for k, v in sim.benchmark.combine.items()}},
        "links": None if sim.links is None else sim.links.as_dict(),
        "time": {t.phase: {"seconds": t.seconds, "rank": t.rank, "link": t.link, "direction": t.direction,
                           "peer": t.peer, "num_bytes": t.num_bytes, "gbps": t.gbps, "latency_us": t.latency_us,
                           "link_seconds": dict(t.link_seconds)} for t in sim.times},
        "findings": [{"severity": f.severity, "code": f.code, "message": f.message, "data": f.data}
                     for f in sim.findings],
    }
    return out
