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


def _verdict_fields(rep) -> dict:
    """What :func:`epbuf.verdict.summary` reads of an ``epbuf.report/1`` document, for the text
    path (which does not load the JSON form: ``benchmarks/cold_start.py``)."""
    return {"title": rep.title, "num_bytes": rep.num_bytes,
            "findings": [{"severity": f.severity, "code": f.code, "message": f.message} for f in rep.findings]}


def run(args: argparse.Namespace) -> int:
    from ..verdict import summary, verdict_text

    rep, device, budget = report_from_args(args)
    status = 1 if args.strict and has_error_finding(rep.findings) else 0
    if args.json:
        from ..report.json_form import report_to_dict

        data = report_to_dict(rep)
    else:
        data = _verdict_fields(rep)
    if device is not None:
        data["device"] = {"name": device[0], "num_bytes": device[1], "share": rep.num_bytes / device[1],
                          "fits": rep.num_bytes <= device[1]}
    if budget is not None:
        data["budget"] = {"num_bytes": budget, "share": rep.num_bytes / budget, "fits": rep.num_bytes <= budget}
    data["summary"] = summary("hint", data)
    if args.json:
        print_json(data)
        return status
    from ..render.report import render_report

    width = output_width(args)
    sys.stdout.write(verdict_text(data["summary"], width)
                     + render_report(rep, device=device, verbose=args.verbose, budget=budget, width=width))
    return status
