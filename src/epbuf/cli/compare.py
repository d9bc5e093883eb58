"""``epbuf compare``: the same model, topology and tokens across every backend, side by side
(``--json``: schema ``epbuf.compare/1``)."""

from __future__ import annotations

import argparse
import sys

from ._options import add_plan_options, chosen_backends, device_from_args, plan_from_args, print_json


def configure(p: argparse.ArgumentParser, command: str) -> None:
    p.description = ("One table: allocation, real need, over-reservation and the tightest upstream limit of each "
                     "backend, then every backend's regions.")
    add_plan_options(p, backend=False)
    p.add_argument("--backends", help="comma-separated subset (default: all)")
    p.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.compare/1)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..plan import compare

    names = chosen_backends(args.backends)
    plan = plan_from_args(args)
    results = compare(plan, names)
    if args.json:
        from ..report import Report, report_to_dict

        print_json({
            "schema": "epbuf.compare/1",
            "plan": {k: v for k, v in plan.as_dict().items() if k != "deepep_config"},
            "backends": {n: report_to_dict(r) if isinstance(r, Report) else {"error": str(r)} for n, r in results.items()},
        })
        return 0
    from ..render import render_compare

    sys.stdout.write(render_compare(results, device=device_from_args(args)))
    return 0
