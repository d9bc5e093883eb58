"""``epbuf fit``: the largest tokens per rank (or EP size) whose allocation fits a budget, per
backend, exactly (``--json``: schema ``epbuf.fit/1``)."""

from __future__ import annotations

import argparse
import sys

from ._options import (
    BACKENDS_ARG, add_plan_options, add_wide_option, budget_from_args, check_backend_options, chosen_backends,
    device_from_args, device_spec_from_args, output_width, plan_from_args, print_json,
)


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


def _budget(args: argparse.Namespace, capacity: tuple[str, int] | None) -> tuple[int, str]:
    """``(budget bytes, note)``: --budget, else DEFAULT_BUDGET_PERCENT of the device memory."""
    from ..placement import DEFAULT_BUDGET_PERCENT, budget_from_text, capacity_label

    if args.budget is not None:
        budget = budget_from_args(args, capacity)
        note = f"{args.budget.strip()} of {capacity_label(*capacity)}" if args.budget.strip().endswith("%") else ""
        return budget, note
    if capacity is None:
        from ..errors import InvalidArgumentError, Problem

        raise InvalidArgumentError([Problem("budget", None, f"give --budget SIZE, or --device / --hbm for "
                                                            f"{DEFAULT_BUDGET_PERCENT} % of it")])
    budget = budget_from_text(f"{DEFAULT_BUDGET_PERCENT}%", capacity[1])
    return budget, (f"the default: {DEFAULT_BUDGET_PERCENT} % of {capacity_label(*capacity)}, the headroom "
                    "vLLM's default --gpu-memory-utilization 0.9 leaves; --budget to change")


def run(args: argparse.Namespace) -> int:
    from ..errors import EpbufError
    from ..fit import fit_ranks, fit_tokens
    from ..placement import runs_on

    by_ranks = args.tokens is not None and args.ranks is None and args.nodes is None
    if args.tokens is not None and not by_ranks:
        from ..errors import InvalidArgumentError, Problem

        given = "--ranks" if args.ranks is not None else "--nodes"
        raise InvalidArgumentError([Problem("num_max_tokens_per_rank", args.tokens, (
            f"fit solves for the tokens per rank, or with --tokens and no --ranks/--nodes for the EP size; "
            f"with {given} too there is nothing to solve: drop one, or size the plan with epbuf hint"))])
    names = chosen_backends(args.backends)
    capacity = device_from_args(args)
    device = device_spec_from_args(args)
    if device is not None and not args.backends:  # the default list: only what runs on the device
        names = tuple(n for n in names if runs_on(n, device.vendor))
    check_backend_options(args, names)
    budget, note = _budget(args, capacity)
    plan = plan_from_args(args)
    results = {}
    for name in names:
        try:
            results[name] = (fit_ranks if by_ranks else fit_tokens)(plan, name, budget)
        except EpbufError as error:
            results[name] = error
    variable = "num_ranks" if by_ranks else "num_max_tokens_per_rank"
    on_device = {n: runs_on(n, device.vendor) for n in names} if device is not None else None
    from ..report.json_form import report_to_dict
    from ..verdict import summary, verdict_text

    def as_json(r):
        if isinstance(r, Exception):
            return {"error": str(r)}
        d = r.as_dict()
        d["report"] = report_to_dict(r.report) if r.report is not None else None
        d["constant_failures"] = list(r.constant_failures)
        return d

    data = {"schema": "epbuf.fit/1", "variable": variable, "budget": budget, "budget_note": note,
            "results": {n: as_json(r) for n, r in results.items()}}
    if capacity is not None:
        data["device"] = {"name": capacity[0], "num_bytes": capacity[1],
                          "vendor": device.vendor if device is not None else None, "runs_on": on_device}
    data["summary"] = summary("fit", data)
    if args.json:
        print_json(data)
        return 0
    from ..render.compare import render_fit

    width = output_width(args)
    sys.stdout.write(verdict_text(data["summary"], width) + render_fit(
        results, budget, variable, budget_note=note, runs_on=on_device, width=width,
        device_name=device.title if device else ""))
    return 0
