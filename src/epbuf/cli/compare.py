"""``epbuf compare``: the same model, topology and tokens across every backend, side by side
(``--json``: schema ``epbuf.compare/1``)."""

from __future__ import annotations

import argparse
import sys

from ._options import (
    BACKENDS_ARG, add_plan_options, add_wide_option, check_backend_options, chosen_backends, device_from_args,
    device_spec_from_args, output_width, plan_from_args, print_json,
)


def configure(p: argparse.ArgumentParser, command: str) -> None:
    p.description = ("One table: allocation, real need, over-reservation and the tightest upstream limit of each "
                     "backend, then every backend's regions. With --device, which backends run on it.")
    add_plan_options(p, backend=False)
    p.add_argument("--backends", type=BACKENDS_ARG, help="comma-separated subset (default: all)")
    p.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.compare/1)")
    p.add_argument("--verbose", action="store_true", help="every region of every backend (default: the buffers)")
    add_wide_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..placement import placement_findings, runs_on
    from ..plan import compare
    from ..report import Report

    names = chosen_backends(args.backends)
    check_backend_options(args, names)
    plan = plan_from_args(args)
    device, capacity = device_spec_from_args(args), device_from_args(args)
    results = compare(plan, names)
    for name, rep in results.items():
        if isinstance(rep, Report):
            found = placement_findings(rep, device=device, capacity=capacity)
            if found:
                results[name] = rep.replace(findings=found + rep.findings)
    on_device = {n: runs_on(n, device.vendor) for n in names} if device is not None else None
    from ..report.json_form import report_to_dict
    from ..verdict import summary, verdict_text

    data = {
        "schema": "epbuf.compare/1",
        "plan": {k: v for k, v in plan.as_dict().items() if k != "deepep_config"},
        "backends": {n: report_to_dict(r) if isinstance(r, Report) else {"error": str(r)} for n, r in results.items()},
    }
    if capacity is not None:
        data["device"] = {"name": capacity[0], "num_bytes": capacity[1],
                          "vendor": device.vendor if device is not None else None, "runs_on": on_device}
    data["summary"] = summary("compare", data)
    if args.json:
        print_json(data)
        return 0
    from ..render.compare import render_compare

    width = output_width(args)
    sys.stdout.write(verdict_text(data["summary"], width) + render_compare(
        results, device=capacity, runs_on=on_device, width=width, plan=data["plan"], verbose=args.verbose))
    return 0
