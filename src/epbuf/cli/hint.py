"""``epbuf hint``: the buffers one backend allocates, every region, the hint against the real
need, findings and limits (``--json``: schema ``epbuf.report/1``)."""

from __future__ import annotations

import argparse
import sys

from ._options import add_plan_options, device_from_args, has_error_finding, plan_from_args, print_json


def configure(p: argparse.ArgumentParser, command: str) -> None:
    p.description = ("Size the buffer(s) a backend allocates, explain every region, compare the hint with what a "
                     "real run needs.")
    add_plan_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.report/1)")
    p.add_argument("--verbose", action="store_true", help="list every upstream limit, not only broken ones")
    p.add_argument("--strict", action="store_true",
                   help="exit with status 1 when the plan breaks an upstream limit (an error finding)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..plan import report

    rep = report(plan_from_args(args), args.backend)
    device = device_from_args(args)
    status = 1 if args.strict and has_error_finding(rep.findings) else 0
    if args.json:
        from ..report import report_to_dict

        data = report_to_dict(rep)
        if device is not None:
            data["device"] = {"name": device[0], "num_bytes": device[1], "share": rep.num_bytes / device[1]}
        print_json(data)
        return status
    from ..render import render_report

    sys.stdout.write(render_report(rep, device=device, verbose=args.verbose))
    return status
