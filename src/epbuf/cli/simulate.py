"""``epbuf simulate``: route tokens through one backend's buffers — reserved vs used slots per
region, bytes per rank pair and link, a time estimate (``--json``: schema ``epbuf.simulate/1``).
numpy (``epbuf[sim]``) is imported by the library only when this command runs."""

from __future__ import annotations

import argparse
import sys

from ._options import FILE_ARG, add_plan_options, add_wide_option, int_arg, output_width, print_json


def configure(p: argparse.ArgumentParser, command: str) -> None:
    p.description = ("Route generated or recorded tokens (numpy, epbuf[sim]) through one backend's buffers: "
                     "reserved vs used slots per region, bytes per rank pair and link, a time estimate, "
                     "DeepEP's benchmark byte accounting. --device names the link preset (h800, h100, h200, "
                     "b200, b300, gb200, a100-80gb, ascend-910b, ascend-a3).")
    from ..simulate.occupancy import SIMULATED_BACKENDS

    # Only what simulate runs: its backends, and no --hbm (--device names the link preset here).
    add_plan_options(p, only=SIMULATED_BACKENDS, drop=("--hbm",))
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


def run(args: argparse.Namespace) -> int:
    from .._progress import terminal_progress
    from ..api._tools import simulate_document, simulate_run

    progress = terminal_progress(sys.stderr, "epbuf simulate", delay=1.0)
    try:
        sim, routing, backend, why = simulate_run(args, progress)
    finally:
        progress.done()
    if args.save_routing:
        from ..routing import save

        save(args.save_routing, routing)
    if args.plot:
        from ..simulate.plot import plot_simulation

        plot_simulation(sim, args.plot)
    data = simulate_document(sim)
    if args.json:
        print_json(data)
    else:
        from ..verdict import verdict_text

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
