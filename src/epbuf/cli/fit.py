"""``epbuf fit``: the largest tokens per rank (or EP size) whose allocation fits a budget, per
backend, exactly (``--json``: schema ``epbuf.fit/1``)."""

from __future__ import annotations

import argparse
import sys

from ._options import add_plan_options, chosen_backends, plan_from_args, positive_bytes_arg, print_json


def configure(p: argparse.ArgumentParser, command: str) -> None:
    p.description = ("Solve exactly for the largest num_max_tokens_per_rank whose total device allocation fits "
                     "--budget, per backend. With --tokens given and --ranks not, solve for the largest EP size "
                     "instead.")
    add_plan_options(p, backend=False)
    p.add_argument("--budget", type=positive_bytes_arg, required=True,
                   help="memory granted per device, e.g. 8GiB, 512MiB, 3e9")
    p.add_argument("--backends", help="comma-separated subset (default: all)")
    p.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.fit/1)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import EpbufError
    from ..fit import fit_ranks, fit_tokens

    plan = plan_from_args(args)
    by_ranks = args.tokens is not None and args.ranks is None and args.nodes is None
    results = {}
    for name in chosen_backends(args.backends):
        try:
            results[name] = (fit_ranks if by_ranks else fit_tokens)(plan, name, args.budget)
        except EpbufError as error:
            results[name] = error
    variable = "num_ranks" if by_ranks else "num_max_tokens_per_rank"
    if args.json:
        from ..report import report_to_dict

        def as_json(r):
            if isinstance(r, Exception):
                return {"error": str(r)}
            d = r.as_dict()
            d["report"] = report_to_dict(r.report) if r.report is not None else None
            d["constant_failures"] = list(r.constant_failures)
            return d

        print_json({"schema": "epbuf.fit/1", "variable": variable, "budget": args.budget,
                    "results": {n: as_json(r) for n, r in results.items()}})
        return 0
    from ..render import render_fit

    sys.stdout.write(render_fit(results, args.budget, variable))
    return 0
