"""``epbuf fit``: the largest tokens per rank (or EP size) whose allocation fits a budget, per
backend, exactly (``--json``: schema ``epbuf.fit/1``)."""

from __future__ import annotations

import argparse
import sys

from ._options import BACKENDS_ARG, add_plan_options, add_wide_option, output_width, print_json


def configure(p: argparse.ArgumentParser, command: str) -> None:
    from ..placement import DEFAULT_BUDGET_PERCENT

    p.description = ("Solve exactly for the largest num_max_tokens_per_rank whose total device allocation fits "
                     "--budget, per backend. With --tokens given and --ranks not, solve for the largest EP size "
                     f"instead. With --device and no --budget, the budget is {DEFAULT_BUDGET_PERCENT} %% of the "
                     "device memory.")
    add_plan_options(p, backend=False)
    p.add_argument("--budget", metavar="SIZE",
                   help="memory granted per device, e.g. 8GiB, 4G, 512MiB, 3e9, or 25%% of --device / --hbm "
                        f"(default with --device / --hbm: {DEFAULT_BUDGET_PERCENT}%%)")
    p.add_argument("--backends", type=BACKENDS_ARG,
                   help="comma-separated subset (default: all that run on --device; all without it)")
    p.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.fit/1)")
    add_wide_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.json:
        from ..api._plan import fit_document

        print_json(fit_document(args))
        return 0
    from ..api._plan import fit_document, fit_parts
    from ..render.compare import render_fit
    from ..verdict import verdict_text

    parts = fit_parts(args)
    data = fit_document(args, parts)
    device, width = parts["device"], output_width(args)
    sys.stdout.write(verdict_text(data["summary"], width) + render_fit(
        parts["results"], parts["budget"], parts["variable"], budget_note=parts["note"],
        runs_on=parts["on_device"], width=width, device_name=device.title if device else ""))
    return 0
