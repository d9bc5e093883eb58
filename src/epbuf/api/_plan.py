"""The documents of the planning commands: ``hint`` (``epbuf.report/1`` with ``device`` and
``budget``), ``layout`` (its records), ``compare`` (``epbuf.compare/1``), ``fit``
(``epbuf.fit/1``) and ``sweep`` (``epbuf.sweep/1``).

Each ``*_document(args)`` computes from parsed options (the ``argparse.Namespace`` of the
command's own parser) and builds the command's JSON document in one place: ``--json``
prints it (:mod:`epbuf.cli`), :mod:`epbuf.api` returns it, ``epbuf serve`` sends it. The
``*_parts(args)`` functions are the computation the text renderers read too.
"""

from __future__ import annotations

import argparse

__all__ = ["hint_document", "layout_document", "compare_parts", "compare_document", "fit_parts", "fit_document",
           "sweep_axes", "sweep_run", "sweep_document"]


def hint_document(args: argparse.Namespace, parts: tuple | None = None, *, full: bool = True) -> dict:
    """``epbuf hint --json``: the report, with ``device`` and ``budget`` (share, fits) when given,
    and its ``summary``. ``parts``: ``report_from_args(args)`` when the caller has it; ``full=False``
    (the text path) keeps of the report only what the summary reads, so ``epbuf hint`` does not
    load the JSON form (``benchmarks/cold_start.py``)."""
    from ..cli._options import report_from_args
    from ..verdict import summary

    rep, device, budget = parts if parts is not None else report_from_args(args)
    if full:
        from ..report.json_form import report_to_dict

        data = report_to_dict(rep)
    else:
        data = {"title": rep.title, "num_bytes": rep.num_bytes,
                "findings": [{"severity": f.severity, "code": f.code, "message": f.message} for f in rep.findings]}
    if device is not None:
        data["device"] = {"name": device[0], "num_bytes": device[1], "share": rep.num_bytes / device[1],
                          "fits": rep.num_bytes <= device[1]}
    if budget is not None:
        data["budget"] = {"num_bytes": budget, "share": rep.num_bytes / budget, "fits": rep.num_bytes <= budget}
    data["summary"] = summary("hint", data)
    return data


def layout_document(args: argparse.Namespace, rep=None) -> dict:
    """``epbuf layout --json``: the report's schema, backend, upstream, inputs, records and
    findings, and its ``summary``; ``rep``: the report when the caller has it."""
    from ..cli._options import report_from_args
    from ..report.json_form import report_to_dict
    from ..verdict import summary

    full = report_to_dict(rep if rep is not None else report_from_args(args)[0])
    data = {k: full[k] for k in ("schema", "backend", "upstream", "inputs", "records", "findings")}
    data["summary"] = summary("layout", data)
    return data


def compare_parts(args: argparse.Namespace) -> dict:
    """What ``compare`` shows: ``plan``, ``results`` (backend -> Report or error), ``capacity``,
    ``device`` (DeviceSpec or None), ``on_device`` (backend -> runs on it, or None)."""
    from ..cli._options import check_backend_options, chosen_backends, device_from_args, device_spec_from_args, \
        plan_from_args
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
    return {"plan": plan, "results": results, "capacity": capacity, "device": device, "on_device": on_device}


def compare_document(args: argparse.Namespace, parts: dict | None = None) -> dict:
    """``epbuf compare --json`` (schema ``epbuf.compare/1``) with its ``summary``; ``parts``:
    :func:`compare_parts` when the caller has them."""
    from ..report import Report
    from ..report.json_form import report_to_dict
    from ..verdict import summary

    parts = parts if parts is not None else compare_parts(args)
    capacity, device = parts["capacity"], parts["device"]
    data = {
        "schema": "epbuf.compare/1",
        "plan": {k: v for k, v in parts["plan"].as_dict().items() if k != "deepep_config"},
        "backends": {n: report_to_dict(r) if isinstance(r, Report) else {"error": str(r)}
                     for n, r in parts["results"].items()},
    }
    if capacity is not None:
        data["device"] = {"name": capacity[0], "num_bytes": capacity[1],
                          "vendor": device.vendor if device is not None else None, "runs_on": parts["on_device"]}
    data["summary"] = summary("compare", data)
    return data


def _fit_budget(args: argparse.Namespace, capacity: tuple[str, int] | None) -> tuple[int, str]:
    """``(budget bytes, note)``: --budget, else DEFAULT_BUDGET_PERCENT of the device memory."""
    from ..cli._options import budget_from_args
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


def fit_parts(args: argparse.Namespace) -> dict:
    """What ``fit`` shows: ``results`` (backend -> FitResult or EpbufError), ``budget``, ``note``,
    ``variable``, ``capacity``, ``device``, ``on_device``."""
    from ..cli._options import check_backend_options, chosen_backends, device_from_args, device_spec_from_args, \
        plan_from_args
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
    budget, note = _fit_budget(args, capacity)
    plan = plan_from_args(args)
    results = {}
    for name in names:
        try:
            results[name] = (fit_ranks if by_ranks else fit_tokens)(plan, name, budget)
        except EpbufError as error:
            results[name] = error
    return {"results": results, "budget": budget, "note": note,
            "variable": "num_ranks" if by_ranks else "num_max_tokens_per_rank", "capacity": capacity,
            "device": device, "on_device": {n: runs_on(n, device.vendor) for n in names} if device is not None else None}


def fit_document(args: argparse.Namespace, parts: dict | None = None) -> dict:
    """``epbuf fit --json`` (schema ``epbuf.fit/1``) with its ``summary``; ``parts``:
    :func:`fit_parts` when the caller has them."""
    from ..report.json_form import report_to_dict
    from ..verdict import summary

    parts = parts if parts is not None else fit_parts(args)

    def as_json(r):
        if isinstance(r, Exception):
            return {"error": str(r)}
        d = r.as_dict()
        d["report"] = report_to_dict(r.report) if r.report is not None else None
        d["constant_failures"] = list(r.constant_failures)
        return d

    capacity, device = parts["capacity"], parts["device"]
    data = {"schema": "epbuf.fit/1", "variable": parts["variable"], "budget": parts["budget"],
            "budget_note": parts["note"], "results": {n: as_json(r) for n, r in parts["results"].items()}}
    if capacity is not None:
        data["device"] = {"name": capacity[0], "num_bytes": capacity[1],
                          "vendor": device.vendor if device is not None else None, "runs_on": parts["on_device"]}
    data["summary"] = summary("fit", data)
    return data


def sweep_axes(args: argparse.Namespace) -> tuple[dict, str]:
    """``(axes, model title)`` of ``sweep``'s lists (a model fills the shape lists not given)."""
    from ..cli._options import DEFAULT_RANKS, DEFAULT_TOKENS, shape_from_args
    from ..sweep import parse_values

    shape = shape_from_args(argparse.Namespace(**{**vars(args), "hidden": None, "topk": None, "experts": None}))
    axes = {
        "hidden": parse_values(args.hidden, "--hidden") if args.hidden else [shape["hidden"]],
        "num_topk": parse_values(args.topk, "--topk") if args.topk else [shape["num_topk"]],
        "num_experts": parse_values(args.experts, "--experts") if args.experts else [shape["num_experts"]],
        "num_ranks": parse_values(args.ranks, "--ranks") if args.ranks else [DEFAULT_RANKS],
        "num_max_tokens_per_rank": parse_values(args.tokens, "--tokens") if args.tokens else [DEFAULT_TOKENS],
    }
    dtypes = [t.strip().lower() for t in args.dtype.split(",") if t.strip()]
    if not dtypes or any(t not in ("fp8", "bf16") for t in dtypes):
        from ..errors import InvalidArgumentError, Problem

        raise InvalidArgumentError([Problem("dtype", args.dtype, "use fp8, bf16 or fp8,bf16")])
    axes["use_fp8_dispatch"] = list(dict.fromkeys(t == "fp8" for t in dtypes))
    return axes, shape["model"]


def sweep_run(args: argparse.Namespace, progress=None):
    """``(SweepResult, model title)`` of ``sweep``'s options; ``progress(done, total)`` as
    :func:`epbuf.sweep.sweep` calls it (it may raise to stop the sweep)."""
    from ..cli._options import chosen_backends
    from ..plan import Plan
    from ..sweep import sweep

    axes, model = sweep_axes(args)
    base = Plan(hidden=axes["hidden"][0], num_topk=axes["num_topk"][0], num_experts=axes["num_experts"][0],
                num_ranks=axes["num_ranks"][0], num_max_tokens_per_rank=axes["num_max_tokens_per_rank"][0],
                use_fp8_dispatch=axes["use_fp8_dispatch"][0], num_ranks_per_node=args.gpus_per_node,
                num_redundant_experts=args.redundant_experts, model=model)
    return sweep(base, axes, chosen_backends(args.backends), progress=progress), model


def sweep_document(result, args: argparse.Namespace) -> dict:
    """``epbuf sweep --json`` (schema ``epbuf.sweep/1``) of a :class:`~epbuf.sweep.SweepResult`,
    with ``device`` (name and bytes of --device / --hbm, when given) and the ``summary``."""
    from ..cli._options import device_from_args
    from ..verdict import summary

    device = device_from_args(args)
    data = {"schema": "epbuf.sweep/1", "columns": list(result.columns), "varying": list(result.varying),
            "rows": [list(row) for row in result.rows]}
    if device is not None:
        data["device"] = {"name": device[0], "num_bytes": device[1]}
    data["summary"] = summary("sweep", data)
    return data
