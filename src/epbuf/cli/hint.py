"""``epbuf hint``: the buffers one backend allocates, every region, the hint against the real
need, findings and limits (``--json``: schema ``epbuf.report/1``)."""

from __future__ import annotations

import argparse
import sys

from ._options import add_plan_options, add_wide_option, has_error_finding, output_width, print_json, report_from_args


def configure(p: argparse.ArgumentParser, command: str) -> None:
    p.description = ("Size the buffer(s) a backend allocates, explain every region, compare the hint with what a "
                     "real run needs. With --device and no --backend, the device chooses the backend.")
    add_plan_options(p)
    p.add_argument("--budget", metavar="SIZE",
                   help="memory the buffers may take per device, e.g. 8GiB, 4G, or 10%% (of --device / --hbm); "
                        "an allocation over it is an error finding")
    p.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.report/1)")
    p.add_argument("--verbose", action="store_true", help="list every upstream limit and every source")
    add_wide_option(p)
    p.add_argument("--strict", action="store_true",
                   help="exit with status 1 on any error finding: an upstream limit the plan breaks, an allocation "
                        "over the device memory or --budget")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.json:
        from ..api import exit_status
        from ..api._plan import hint_document

        data = hint_document(args)
        print_json(data)
        return exit_status("hint", data, strict=args.strict)
    from ..api._plan import hint_document
    from ..verdict import verdict_text

    rep, device, budget = parts = report_from_args(args)
    status = 1 if args.strict and has_error_finding(rep.findings) else 0
    data = hint_document(args, parts, full=False)
    from ..render.report import render_report

    width = output_width(args)
    sys.stdout.write(verdict_text(data["summary"], width)
                     + render_report(rep, device=device, verbose=args.verbose, budget=budget, width=width))
    return status
