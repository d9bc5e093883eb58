"""``epbuf`` command line: argparse front end. No formulas live here.

Each subcommand is a pair: ``_add_<name>(subparsers)`` builds its parser and
``_run_<name>(args) -> int`` computes through the library and renders. Invalid input
becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys

from .errors import EpbufError

# The defaults of the book example the project started from (docs/derivations/ascend.md §3):
# DeepSeek-V3-like shapes on 8 ranks.
DEFAULT_HIDDEN = 7168
DEFAULT_TOPK = 6
DEFAULT_EXPERTS = 256
DEFAULT_RANKS = 8
DEFAULT_TOKENS = 4096

PROG = "epbuf"


def _terminal_columns() -> int:
    """What ``shutil.get_terminal_size`` gives, without importing shutil (and with it bz2,
    lzma, zlib): argparse's formatter asks on every ``add_argument``, which costs the cold
    start ~10 %."""
    import os

    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         width if width is not None else max(40, _terminal_columns() - 2))


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit status 2 (no usage dump)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _int_arg(allowed: str, lo: int = 1):
    """An argparse type for integers, with the allowed range in the error line."""

    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", ""), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer; allowed {allowed}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"{value} is out of range; allowed {allowed}")
        return value

    parse.__name__ = "integer"
    return parse


def _bytes_arg(text: str) -> int:
    from .units import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _positive_bytes_arg(text: str) -> int:
    num_bytes = _bytes_arg(text)
    if num_bytes <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive byte size; allowed > 0, e.g. 8GiB")
    return num_bytes


def _add_model_options(p, title: str = "model (explicit --hidden/--topk/--experts override it)") -> None:
    """``--model NAME`` | ``--model-config PATH`` (read by :func:`_model_from_args`)."""
    source = p.add_argument_group(title).add_mutually_exclusive_group()
    source.add_argument("--model", metavar="NAME", help="a model preset (epbuf models lists them), e.g. deepseek-v3")
    source.add_argument("--model-config", dest="model_config", metavar="PATH",
                        help="a Hugging Face config.json, or the folder holding it")


def _add_device_options(group) -> None:
    """``--device NAME`` | ``--hbm SIZE`` in ``group`` (read by :func:`_device_from_args`)."""
    device = group.add_mutually_exclusive_group()
    device.add_argument("--device", metavar="NAME", help="a device preset (epbuf devices lists them), e.g. h200")
    device.add_argument("--hbm", metavar="SIZE", help="device memory, e.g. 96GiB, 80GB, 3e10")


def _add_plan_options(p: argparse.ArgumentParser, backend: bool = True) -> None:
    from .plan import backend_names

    _add_model_options(p)
    _add_device_options(p.add_argument_group("device memory (for the share of memory a buffer takes)"))
    g = p.add_argument_group("shape and topology")
    if backend:
        g.add_argument("--backend", choices=backend_names(), default="ascend",
                       help="upstream library whose buffer to size (default: ascend)")
    g.add_argument("--hidden", type=_int_arg(">= 1"), help=f"hidden size (default {DEFAULT_HIDDEN})")
    g.add_argument("--topk", type=_int_arg(">= 0; 0 means unspecified (32)", lo=0),
                   help=f"experts per token; 0 = unspecified (default {DEFAULT_TOPK})")
    g.add_argument("--experts", type=_int_arg(">= 1"), help=f"routed experts (default {DEFAULT_EXPERTS})")
    g.add_argument("--ranks", type=_int_arg(">= 1"), help=f"expert-parallel size (default {DEFAULT_RANKS})")
    g.add_argument("--tokens", type=_int_arg(">= 1"), help=f"num_max_tokens_per_rank (default {DEFAULT_TOKENS})")
    dtype = g.add_mutually_exclusive_group()
    dtype.add_argument("--fp8", dest="fp8", action="store_true", default=True,
                       help="FP8 dispatch with scale factors (default)")
    dtype.add_argument("--bf16", dest="fp8", action="store_false", help="BF16 dispatch")
    g.add_argument("--gpus-per-node", dest="gpus_per_node", type=_int_arg(">= 1"),
                   help="scale-up domain size: GPUs/NPUs per node or NVLink domain (default min(ranks, 8))")
    g.add_argument("--nodes", type=_int_arg(">= 1"),
                   help="nodes (scale-out size); ranks = nodes x gpus-per-node (default gpus-per-node 8)")
    g.add_argument("--redundant-experts", dest="redundant_experts", type=_int_arg(">= 0", lo=0), default=0,
                   help="EPLB redundant experts added to --experts (default 0)")
    g.add_argument("--sf-packs", dest="sf_packs", type=_int_arg(">= 0", lo=0),
                   help="Ascend: SF packs a real FP8 dispatch sends (default ceil(hidden/128)*2)")
    u = p.add_argument_group("DeepEP options")
    u.add_argument("--backend-version", "--deepep-version", dest="version", metavar="ID",
                   help="upstream formula generation or commit id (default: the newest); deepep-v2: 2026-04, 2026-07, refactor; "
                        "deepep-v1 / deepep-ll: see `epbuf versions`")
    u.add_argument("--no-hybrid", dest="allow_hybrid_mode", action="store_false",
                   help="deepep-v2: allow_hybrid_mode=False (one logical scale-out domain)")
    u.add_argument("--single-reduction", dest="allow_multiple_reduction", action="store_false",
                   help="deepep-v2: allow_multiple_reduction=False (combine sends top-k records)")
    u.add_argument("--no-nvlink", dest="scaleup_is_nvlink", action="store_false",
                   help="deepep-v2: the scale-up domain is not NVLink")
    u.add_argument("--num-sms", dest="num_sms", type=_int_arg(">= 2", lo=2),
                   help="deepep-v1: Buffer.num_sms for the default configs (default 20)")


def _model_from_args(args: argparse.Namespace):
    """The ModelSpec named by --model / --model-config, or None."""
    if getattr(args, "model", None):
        from .models import get_model

        return get_model(args.model)
    if getattr(args, "model_config", None):
        from .models import read_model_config

        return read_model_config(args.model_config)
    return None


def _device_from_args(args: argparse.Namespace) -> tuple[str, int] | None:
    """``(name, capacity bytes)`` from --device / --hbm, or None."""
    if getattr(args, "device", None):
        from .devices import get_device

        spec = get_device(args.device)
        return spec.title, spec.num_bytes
    if getattr(args, "hbm", None):
        from .devices import parse_capacity
        from .units import format_bytes

        num_bytes = parse_capacity(args.hbm)
        return f"--hbm {format_bytes(num_bytes)}", num_bytes
    return None


def _shape_from_args(args: argparse.Namespace) -> dict:
    """hidden / num_topk / num_experts: explicit options, else the model, else the seed's defaults."""
    model = _model_from_args(args)
    pick = lambda explicit, from_model, default: (  # noqa: E731
        explicit if explicit is not None else from_model if model is not None else default)
    return {
        "hidden": pick(args.hidden, model and model.hidden, DEFAULT_HIDDEN),
        "num_topk": pick(args.topk, model and model.num_topk, DEFAULT_TOPK),
        "num_experts": pick(args.experts, model and model.num_experts, DEFAULT_EXPERTS),
        "model": (model.title or model.name) if model is not None else "",
    }


def _topology_from_args(args: argparse.Namespace) -> tuple[int, int | None]:
    """``(num_ranks, num_ranks_per_node)`` from --ranks, --nodes and --gpus-per-node."""
    ranks, per_node, nodes = args.ranks, args.gpus_per_node, getattr(args, "nodes", None)
    if nodes is None:
        return (ranks if ranks is not None else DEFAULT_RANKS), per_node
    per_node = per_node if per_node is not None else 8
    if ranks is not None and ranks != nodes * per_node:
        from .errors import InvalidArgumentError, Problem

        raise InvalidArgumentError([Problem("num_nodes", nodes, f"--nodes {nodes} x --gpus-per-node {per_node} = "
                                                                f"{nodes * per_node} ranks, but --ranks is {ranks}; "
                                                                "give two of the three, or consistent values")])
    return nodes * per_node, per_node


def _plan_from_args(args: argparse.Namespace):
    from .plan import Plan

    shape = _shape_from_args(args)
    num_ranks, num_ranks_per_node = _topology_from_args(args)
    return Plan(
        hidden=shape["hidden"],
        num_topk=shape["num_topk"],
        num_experts=shape["num_experts"],
        model=shape["model"],
        num_ranks=num_ranks,
        num_max_tokens_per_rank=args.tokens if args.tokens is not None else DEFAULT_TOKENS,
        use_fp8_dispatch=args.fp8,
        num_ranks_per_node=num_ranks_per_node,
        num_redundant_experts=args.redundant_experts,
        num_sf_packs=args.sf_packs,
        version=args.version,
        allow_hybrid_mode=args.allow_hybrid_mode,
        allow_multiple_reduction=args.allow_multiple_reduction,
        scaleup_is_nvlink=args.scaleup_is_nvlink,
        num_sms=args.num_sms,
    )


def _print_json(data: object) -> None:
    import json

    sys.stdout.write(json.dumps(data, indent=2) + "\n")


# --- hint -----------------------------------------------------------------------------
def _add_hint(sub) -> None:
    p = sub.add_parser("hint", help="buffer size hint, real need, findings and limits",
                       description="Size the buffer(s) a backend allocates, explain every region, "
                                   "compare the hint with what a real run needs.")
    _add_plan_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.report/1)")
    p.add_argument("--verbose", action="store_true", help="list every upstream limit, not only broken ones")
    p.add_argument("--strict", action="store_true",
                   help="exit with status 1 when the plan breaks an upstream limit (an error finding)")
    p.set_defaults(run=_run_hint)


def _run_hint(args: argparse.Namespace) -> int:
    from .plan import report
    from .report import report_to_dict

    rep = report(_plan_from_args(args), args.backend)
    device = _device_from_args(args)
    status = 1 if args.strict and any(f.severity == "error" for f in rep.findings) else 0
    if args.json:
        data = report_to_dict(rep)
        if device is not None:
            data["device"] = {"name": device[0], "num_bytes": device[1], "share": rep.num_bytes / device[1]}
        _print_json(data)
        return status
    from .render import render_report

    sys.stdout.write(render_report(rep, device=device, verbose=args.verbose))
    return status


# --- layout ---------------------------------------------------------------------------
def _add_layout(sub) -> None:
    p = sub.add_parser("layout", help="byte map of the dispatch and combine token records",
                       description="Print every field of each token record with its offset and size.")
    _add_plan_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable output (the report's records)")
    p.add_argument("--svg", metavar="FILE", help="also write the byte-map diagram (records to scale, slot grids) as SVG")
    p.set_defaults(run=_run_layout)


def _run_layout(args: argparse.Namespace) -> int:
    from .plan import report
    from .report import report_to_dict

    rep = report(_plan_from_args(args), args.backend)
    if args.svg:
        from .io import write_text_atomic
        from .svg import render_svg

        write_text_atomic(args.svg, render_svg(rep), option="--svg")
    if args.json:
        data = report_to_dict(rep)
        _print_json({k: data[k] for k in ("schema", "backend", "upstream", "inputs", "records", "findings")})
        return 0
    from .render import render_layout

    sys.stdout.write(render_layout(rep))
    return 0


# --- compare --------------------------------------------------------------------------
def _add_compare(sub) -> None:
    p = sub.add_parser("compare", help="the same model/topology/tokens across every backend, side by side",
                       description="One table: allocation, real need, over-reservation and the tightest "
                                   "upstream limit of each backend, then every backend's regions.")
    _add_plan_options(p, backend=False)
    p.add_argument("--backends", help="comma-separated subset (default: all)")
    p.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.compare/1)")
    p.set_defaults(run=_run_compare)


def _run_compare(args: argparse.Namespace) -> int:
    from .plan import compare

    names = _chosen_backends(args.backends)
    plan = _plan_from_args(args)
    results = compare(plan, names)
    if args.json:
        from .report import Report, report_to_dict

        _print_json({
            "schema": "epbuf.compare/1",
            "plan": {k: v for k, v in plan.as_dict().items() if k != "deepep_config"},
            "backends": {n: report_to_dict(r) if isinstance(r, Report) else {"error": str(r)} for n, r in results.items()},
        })
        return 0
    from .render import render_compare

    sys.stdout.write(render_compare(results, device=_device_from_args(args)))
    return 0


# --- fit ------------------------------------------------------------------------------
def _add_fit(sub) -> None:
    p = sub.add_parser("fit", help="the largest tokens per rank (or EP size) whose allocation fits a budget",
                       description="Solve exactly for the largest num_max_tokens_per_rank whose total device "
                                   "allocation fits --budget, per backend. With --tokens given and --ranks not, "
                                   "solve for the largest EP size instead.")
    _add_plan_options(p, backend=False)
    p.add_argument("--budget", type=_positive_bytes_arg, required=True,
                   help="memory granted per device, e.g. 8GiB, 512MiB, 3e9")
    p.add_argument("--backends", help="comma-separated subset (default: all)")
    p.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.fit/1)")
    p.set_defaults(run=_run_fit)


def _chosen_backends(text: str | None) -> tuple[str, ...]:
    from .plan import backend_names

    names = backend_names()
    if not text:
        return names
    chosen = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in chosen if n not in names]
    if unknown or not chosen:
        from .errors import UnknownNameError

        raise UnknownNameError(f"--backends = {text!r}: unknown {', '.join(unknown) or '(empty)'}; "
                               f"choose from {', '.join(names)}")
    return tuple(chosen)


def _run_fit(args: argparse.Namespace) -> int:
    from .errors import EpbufError
    from .fit import fit_ranks, fit_tokens

    plan = _plan_from_args(args)
    by_ranks = args.tokens is not None and args.ranks is None and args.nodes is None
    results = {}
    for name in _chosen_backends(args.backends):
        try:
            results[name] = (fit_ranks if by_ranks else fit_tokens)(plan, name, args.budget)
        except EpbufError as error:
            results[name] = error
    if args.json:
        from .report import report_to_dict

        def as_json(r):
            if isinstance(r, Exception):
                return {"error": str(r)}
            d = r.as_dict()
            d["report"] = report_to_dict(r.report) if r.report is not None else None
            d["constant_failures"] = list(r.constant_failures)
            return d

        _print_json({"schema": "epbuf.fit/1", "variable": "num_ranks" if by_ranks else "num_max_tokens_per_rank",
                     "budget": args.budget, "results": {n: as_json(r) for n, r in results.items()}})
        return 0
    from .render import render_fit

    sys.stdout.write(render_fit(results, args.budget, "num_ranks" if by_ranks else "num_max_tokens_per_rank"))
    return 0


# --- sweep ----------------------------------------------------------------------------
def _add_sweep(sub) -> None:
    p = sub.add_parser("sweep", help="many configurations across backends: table, CSV, JSON, plot",
                       description="Every combination of the listed values, for every backend. Lists are "
                                   "8,16,32; ranges 1:64 (inclusive), 128:4096:128 (step) or 128:8192:*2 (geometric).")
    _add_model_options(p, "model (explicit lists override it)")
    g = p.add_argument_group("axes")
    g.add_argument("--backends", help="comma-separated backends (default: all)")
    g.add_argument("--hidden", metavar="LIST", help=f"hidden sizes (default {DEFAULT_HIDDEN})")
    g.add_argument("--topk", metavar="LIST", help=f"top-k values (default {DEFAULT_TOPK})")
    g.add_argument("--experts", metavar="LIST", help=f"expert counts (default {DEFAULT_EXPERTS})")
    g.add_argument("--ranks", metavar="LIST", help=f"EP sizes (default {DEFAULT_RANKS})")
    g.add_argument("--tokens", metavar="LIST", help=f"num_max_tokens_per_rank values (default {DEFAULT_TOKENS})")
    g.add_argument("--dtype", metavar="LIST", default="fp8", help="fp8, bf16 or fp8,bf16 (default fp8)")
    g.add_argument("--gpus-per-node", dest="gpus_per_node", type=_int_arg(">= 1"),
                   help="scale-up domain size (default min(ranks, 8))")
    g.add_argument("--redundant-experts", dest="redundant_experts", type=_int_arg(">= 0", lo=0), default=0,
                   help="EPLB redundant experts added to the expert count (default 0)")
    d = p.add_argument_group("output (--device / --hbm draw the capacity on the plot)")
    _add_device_options(d)
    d.add_argument("--csv", metavar="FILE", help="write every row as CSV")
    d.add_argument("--plot", metavar="FILE", help="write a PNG (or .svg) plot; needs epbuf[plot] (matplotlib)")
    d.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.sweep/1)")
    d.add_argument("--quiet", action="store_true", help="no table on stdout (with --csv / --plot)")
    p.set_defaults(run=_run_sweep)


def _sweep_axes(args: argparse.Namespace) -> dict:
    from .sweep import parse_values

    shape = _shape_from_args(argparse.Namespace(**{**vars(args), "hidden": None, "topk": None, "experts": None}))
    axes = {
        "hidden": parse_values(args.hidden, "--hidden") if args.hidden else [shape["hidden"]],
        "num_topk": parse_values(args.topk, "--topk") if args.topk else [shape["num_topk"]],
        "num_experts": parse_values(args.experts, "--experts") if args.experts else [shape["num_experts"]],
        "num_ranks": parse_values(args.ranks, "--ranks") if args.ranks else [DEFAULT_RANKS],
        "num_max_tokens_per_rank": parse_values(args.tokens, "--tokens") if args.tokens else [DEFAULT_TOKENS],
    }
    dtypes = [t.strip().lower() for t in args.dtype.split(",") if t.strip()]
    if not dtypes or any(t not in ("fp8", "bf16") for t in dtypes):
        from .errors import InvalidArgumentError, Problem

        raise InvalidArgumentError([Problem("dtype", args.dtype, "use fp8, bf16 or fp8,bf16")])
    axes["use_fp8_dispatch"] = list(dict.fromkeys(t == "fp8" for t in dtypes))
    return axes, shape["model"]


def _run_sweep(args: argparse.Namespace) -> int:
    from .plan import Plan
    from .sweep import sweep

    axes, model = _sweep_axes(args)
    base = Plan(hidden=axes["hidden"][0], num_topk=axes["num_topk"][0], num_experts=axes["num_experts"][0],
                num_ranks=axes["num_ranks"][0], num_max_tokens_per_rank=axes["num_max_tokens_per_rank"][0],
                use_fp8_dispatch=axes["use_fp8_dispatch"][0], num_ranks_per_node=args.gpus_per_node,
                num_redundant_experts=args.redundant_experts, model=model)
    result = sweep(base, axes, _chosen_backends(args.backends))
    device = _device_from_args(args)
    if args.csv:
        import csv
        import io as _io

        from .io import write_text_atomic

        buffer = _io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows(["" if v is None else v for v in row] for row in result.rows)
        write_text_atomic(args.csv, buffer.getvalue(), option="--csv")
    if args.plot:
        from .plot import plot_sweep

        plot_sweep(result, args.plot, capacity=device, title=f"{model or 'custom shape'}: total device allocation")
    if args.json:
        _print_json({"schema": "epbuf.sweep/1", "columns": list(result.columns), "varying": list(result.varying),
                     "rows": [list(row) for row in result.rows]})
        return 0
    if args.quiet:
        return 0
    from .render import render_sweep

    sys.stdout.write(render_sweep(result, device))
    for path, what in ((args.csv, "CSV"), (args.plot, "plot")):
        if path:
            sys.stdout.write(f"wrote {what}: {path}\n")
    return 0


# --- models / devices --------------------------------------------------------------------
def _add_models(sub) -> None:
    p = sub.add_parser("models", help="the model presets, with their sources",
                       description="MoE model presets usable with --model.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=_run_models)


def _run_models(args: argparse.Namespace) -> int:
    from .models import MODELS

    if args.json:
        _print_json({"schema": "epbuf.models/1", "models": [m.as_dict() for m in MODELS.values()]})
        return 0
    from .render import table
    from .units import format_int

    rows = [[m.name, format_int(m.hidden), format_int(m.num_experts), format_int(m.num_topk),
             format_int(m.num_shared_experts), m.source] for m in MODELS.values()]
    sys.stdout.write(table(["model", "hidden", "experts", "top-k", "shared", "source (config.json)"], rows,
                           right={1, 2, 3, 4}, indent="") + "\n")
    return 0


def _add_devices(sub) -> None:
    p = sub.add_parser("devices", help="the device memory presets, with their sources",
                       description="Accelerator presets usable with --device.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=_run_devices)


def _run_devices(args: argparse.Namespace) -> int:
    from .devices import DEVICES

    if args.json:
        _print_json({"schema": "epbuf.devices/1", "devices": [d.as_dict() for d in DEVICES.values()]})
        return 0
    from .render import table
    from .units import format_bytes, format_int

    rows = [[d.name, d.title, format_int(d.num_bytes), format_bytes(d.num_bytes), d.label, str(d.ranks_per_node),
             d.source] for d in DEVICES.values()]
    sys.stdout.write(table(["device", "title", "bytes", "", "label", "per node", "source"], rows,
                           right={2, 3, 5}, indent="") + "\n")
    return 0


# --- versions -----------------------------------------------------------------------------
def _add_versions(sub) -> None:
    p = sub.add_parser("versions", help="the upstream formula generations each backend supports (--backend-version)",
                       description="Upstream commits whose arithmetic epbuf reproduces, per backend.")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=_run_versions)


def _run_versions(args: argparse.Namespace) -> int:
    from .plan import backend_names, backend_versions

    data = {}
    for name in backend_names():
        default, versions = backend_versions(name)
        data[name] = {"default": default, "versions": versions}
    if args.json:
        _print_json({"schema": "epbuf.versions/1", "backends": data})
        return 0
    for name, entry in data.items():
        sys.stdout.write(f"{name}\n")
        for vid, text in entry["versions"].items():
            mark = " (default)" if vid == entry["default"] else ""
            sys.stdout.write(f"  {vid or '-'}{mark}: {text.removeprefix(vid + ': ')}\n")
    return 0


class _Absorb:
    """Stands in for the parser of a subcommand that is not being run: it accepts and
    ignores option definitions, so ``epbuf hint`` does not pay for building the options of
    every other command (argparse validates each option as it is added)."""

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self


# --- replay ---------------------------------------------------------------------------
def _add_replay(sub) -> None:
    p = sub.add_parser("replay", help="DeepEP-Ascend's dispatch writer against its receive epilogue, on real bytes",
                       description="Write a sample token as the Ascend dispatch kernel does, read it back as the receive "
                                   "epilogue does, and print each field as written and as read (exit status 0: a "
                                   "demonstration).")
    _add_plan_options(p, backend=False)
    p.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.replay/1)")
    p.set_defaults(run=_run_replay)


def _run_replay(args: argparse.Namespace) -> int:
    from .codec.replay import render_replay, replay, replay_to_dict

    result = replay(_plan_from_args(args))
    if args.json:
        _print_json(replay_to_dict(result))
    else:
        sys.stdout.write(render_replay(result))
    return 0


class _Subcommands:
    """``add_subparsers()`` result that builds options only for the selected command."""

    def __init__(self, sub, selected: str | None) -> None:
        self.sub = sub
        self.selected = selected

    def add_parser(self, name: str, **kwargs):
        parser = self.sub.add_parser(name, **kwargs)
        if self.selected is None or name == self.selected:
            return parser
        return _Absorb()


COMMANDS = ("hint", "layout", "compare", "fit", "sweep", "models", "devices", "versions", "engine", "replay")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The full parser, or — when ``argv`` starts with a command — one whose other
    commands are listed but not populated."""
    selected = argv[0] if argv and argv[0] in COMMANDS else None
    parser = _Parser(
        prog=PROG,
        description="Plan, inspect and explain the communication buffers of expert-parallel MoE "
                    "dispatch/combine libraries (DeepEP-Ascend, DeepEP V2, DeepEP V1), offline.",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"epbuf {__version__}")
    sub = _Subcommands(parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser), selected)
    _add_hint(sub)
    _add_layout(sub)
    _add_compare(sub)
    _add_fit(sub)
    _add_sweep(sub)
    _add_models(sub)
    _add_devices(sub)
    _add_versions(sub)
    _add_replay(sub)
    from .engines.cli import add_parser as _add_engine

    _add_engine(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``epbuf`` console script; returns the exit status."""
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        return args.run(args)
    except EpbufError as error:
        sys.stderr.write(f"{PROG} {args.command}: error: {error}\n")
        return 2
    except BrokenPipeError:  # `epbuf hint | head` is fine
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
