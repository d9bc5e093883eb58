"""``epbuf simulate``: route tokens through one backend's buffers — reserved vs used slots per
region, bytes per rank pair and link, a time estimate (``--json``: schema ``epbuf.simulate/1``).
numpy (``epbuf[sim]``) is imported by the library only when this command runs."""

from __future__ import annotations

import argparse
import sys

from ._options import (
    DEFAULT_BACKEND, FILE_ARG, add_plan_options, add_wide_option, check_backend_options, int_arg, output_width,
    plan_from_args, print_json,
)


def configure(p: argparse.ArgumentParser, command: str) -> None:
    p.description = ("Route generated or recorded tokens (numpy, epbuf[sim]) through one backend's buffers: "
                     "reserved vs used slots per region, bytes per rank pair and link, a time estimate, "
                     "DeepEP's benchmark byte accounting. --device names the link preset (h800, h100, h200, "
                     "b200, b300, gb200, a100-80gb, ascend-910b, ascend-a3).")
    add_plan_options(p)
    g = p.add_argument_group("routing")
    src = g.add_mutually_exclusive_group()
    src.add_argument("--routing", default="uniform", metavar="SPEC",
                     help="uniform | zipf:S | hot:SHARE[:N] | group[:N_GROUP:TOPK_GROUP] | node:M | all-to-one[:RANK] "
                          "| spread-ranks | spread-nodes (default uniform)")
    src.add_argument("--routing-file", metavar="PATH", help="a recorded topk_idx [ranks, tokens, top-k]: .npy or .pt")
    g.add_argument("--seed", type=int_arg(">= 0", lo=0), default=0, help="routing seed (default 0)")
    g.add_argument("--num-tokens", type=int_arg(">= 0", lo=0), help="tokens each rank routes (default --tokens)")
    g.add_argument("--masked-ratio", type=float, default=0.0, help="share of top-k entries set to -1 (default 0)")
    g.add_argument("--expert-alignment", type=int_arg(">= 1"), default=1, help="expert_alignment (default 1)")
    g.add_argument("--save-routing", metavar="FILE", type=FILE_ARG, help="also write the routing as .npy")
    k = p.add_argument_group("links (time estimate; default: the preset upstream published on)")
    k.add_argument("--network", metavar="NAME", help="scale-out NIC preset replacing the device's: cx7, cx8")
    k.add_argument("--nvlink-gbps", type=float, help="scale-up GB/s per rank and direction")
    k.add_argument("--rdma-gbps", type=float, help="scale-out GB/s per rank and direction")
    k.add_argument("--latency-us", type=float, help="latency per link in microseconds")
    p.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.simulate/1)")
    p.add_argument("--plot", metavar="FILE", type=FILE_ARG,
                   help="write the traffic heatmap and occupancy bars (.png, .svg or .pdf; needs epbuf[plot])")
    add_wide_option(p)
    p.set_defaults(run=run)


def _backend(args: argparse.Namespace) -> tuple[str, str]:
    """``(backend, why)``: --backend; else the backend of --device's vendor (a device preset, or
    a link preset's vendor: ``h800`` is NVIDIA); else the default."""
    if args.backend is not None or args.device is None:
        return args.backend or DEFAULT_BACKEND, ""
    from ..devices import get_device
    from ..errors import UnknownNameError
    from ..placement import DEVICE_BACKENDS

    try:
        spec = get_device(args.device)
        return DEVICE_BACKENDS[spec.vendor], f"chosen for {spec.title}"
    except UnknownNameError:
        from ..simulate.links import get_links

        title = get_links(args.device).title  # the one-line error for a name neither knows
        vendor = title.split(" ", 1)[0]
        if vendor not in DEVICE_BACKENDS:
            return DEFAULT_BACKEND, ""
        return DEVICE_BACKENDS[vendor], f"chosen for {title}"


#: The most token selections (ranks x tokens x top-k) a generated routing may have: about 0.5 GiB
#: of int64 indices, a few seconds of simulation (benchmarks/README.md measures 8 M in 0.2-0.6 s).
MAX_SELECTIONS = 1 << 26


def _check_size(plan, num_tokens: int | None) -> None:
    """Refuse, before any array is allocated, a generated routing too large to hold."""
    tokens = num_tokens if num_tokens is not None else plan.num_max_tokens_per_rank
    selections = plan.num_ranks * tokens * max(plan.num_topk, 1)
    if selections > MAX_SELECTIONS:
        from ..errors import InvalidArgumentError, Problem

        raise InvalidArgumentError([Problem(
            "num_tokens" if num_tokens is not None else "num_max_tokens_per_rank", tokens,
            f"allowed up to {MAX_SELECTIONS:,} selections (ranks x tokens x top-k), not {selections:,}")])


def run(args: argparse.Namespace) -> int:
    from ..simulate import simulate_options, to_dict
    from .._progress import terminal_progress

    if args.hbm is not None:
        from ..errors import InvalidArgumentError, Problem

        raise InvalidArgumentError([Problem("hbm", args.hbm, "not used by simulate; --device names the link preset")])
    if args.plot:  # its format, before the simulation runs
        from ..plot import plot_format

        plot_format(args.plot)
    backend, why = _backend(args)
    check_backend_options(args, (backend,), why)
    plan = plan_from_args(args)
    if args.routing_file is None:
        _check_size(plan, args.num_tokens)
    progress = terminal_progress(sys.stderr, "epbuf simulate", delay=1.0)
    try:
        sim, routing = simulate_options(
            plan, backend, routing=args.routing, routing_file=args.routing_file,
            seed=args.seed, num_tokens=args.num_tokens, masked_ratio=args.masked_ratio,
            expert_alignment=args.expert_alignment, device=args.device, network=args.network,
            nvlink_gbps=args.nvlink_gbps, rdma_gbps=args.rdma_gbps, latency_us=args.latency_us,
            adopt_file_topk=args.topk is None and not args.model and not args.model_config, progress=progress)
    finally:
        progress.done()
    if args.save_routing:
        from ..routing import save

        save(args.save_routing, routing)
    if args.plot:
        from ..simulate.plot import plot_simulation

        plot_simulation(sim, args.plot)
    from ..verdict import summary, verdict_text

    data = to_dict(sim)
    data["summary"] = summary("simulate", data)
    if args.json:
        print_json(data)
    else:
        from ..simulate.render import render_simulation

        width = output_width(args)
        sys.stdout.write(verdict_text(data["summary"], width))
        if why:
            sys.stdout.write(f"backend {backend} {why}; --backend NAME simulates another\n")
        sys.stdout.write(render_simulation(sim, width))
        for path, what in ((args.plot, "plot"), (args.save_routing, "routing")):
            if path:
                sys.stdout.write(f"wrote {what}: {path}\n")
    return 1 if sim.violations else 0
