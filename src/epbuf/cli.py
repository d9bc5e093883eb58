"""``epbuf`` command line: argparse front end. No formulas live here.

Each subcommand is a pair: ``_add_<name>(subparsers)`` builds its parser and
``_run_<name>(args) -> int`` computes through the library and renders. Invalid input
becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys

from .errors import EpbufError

# The seed's defaults (shared/seeds/buffer_size.py): DeepSeek-V3-like shapes on 8 ranks.
DEFAULT_HIDDEN = 7168
DEFAULT_TOPK = 6
DEFAULT_EXPERTS = 256
DEFAULT_RANKS = 8
DEFAULT_TOKENS = 4096

PROG = "epbuf"


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit status 2 (no usage dump)."""

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


def _add_plan_options(p: argparse.ArgumentParser, backend: bool = True) -> None:
    from .plan import backend_names

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
                   help="scale-up domain size (default min(ranks, 8))")
    g.add_argument("--redundant-experts", dest="redundant_experts", type=_int_arg(">= 0", lo=0), default=0,
                   help="EPLB redundant experts added to --experts (default 0)")
    g.add_argument("--sf-packs", dest="sf_packs", type=_int_arg(">= 0", lo=0),
                   help="Ascend: SF packs a real FP8 dispatch sends (default ceil(hidden/128)*2)")


def _plan_from_args(args: argparse.Namespace):
    from .plan import Plan

    return Plan(
        hidden=args.hidden if args.hidden is not None else DEFAULT_HIDDEN,
        num_topk=args.topk if args.topk is not None else DEFAULT_TOPK,
        num_experts=args.experts if args.experts is not None else DEFAULT_EXPERTS,
        num_ranks=args.ranks if args.ranks is not None else DEFAULT_RANKS,
        num_max_tokens_per_rank=args.tokens if args.tokens is not None else DEFAULT_TOKENS,
        use_fp8_dispatch=args.fp8,
        num_ranks_per_node=args.gpus_per_node,
        num_redundant_experts=args.redundant_experts,
        num_sf_packs=args.sf_packs,
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
    p.set_defaults(run=_run_hint)


def _run_hint(args: argparse.Namespace) -> int:
    from .plan import report
    from .report import report_to_dict

    rep = report(_plan_from_args(args), args.backend)
    if args.json:
        _print_json(report_to_dict(rep))
        return 0
    from .render import render_report

    sys.stdout.write(render_report(rep, verbose=args.verbose))
    return 0


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

    sys.stdout.write(render_compare(results))
    return 0


# --- fit ------------------------------------------------------------------------------
def _add_fit(sub) -> None:
    p = sub.add_parser("fit", help="the largest tokens per rank (or EP size) whose allocation fits a budget",
                       description="Solve exactly for the largest num_max_tokens_per_rank whose total device "
                                   "allocation fits --budget, per backend. With --tokens given and --ranks not, "
                                   "solve for the largest EP size instead.")
    _add_plan_options(p, backend=False)
    p.add_argument("--budget", type=_bytes_arg, required=True, help="memory granted per device, e.g. 8GiB, 512MiB, 3e9")
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
    by_ranks = args.tokens is not None and args.ranks is None
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Plan, inspect and explain the communication buffers of expert-parallel MoE "
                    "dispatch/combine libraries (DeepEP-Ascend, DeepEP V2, DeepEP V1), offline.",
    )
    from . import __version__

    parser.add_argument("--version", action="version", version=f"epbuf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_hint(sub)
    _add_layout(sub)
    _add_compare(sub)
    _add_fit(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``epbuf`` console script; returns the exit status."""
    parser = build_parser()
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
