"""``epbuf sweep``: every combination of the listed values for every backend — table, ``--csv``,
``--json`` (schema ``epbuf.sweep/1``), ``--plot``."""

from __future__ import annotations

import argparse
import sys

from ._options import (
    BACKENDS_ARG, DEFAULT_EXPERTS, DEFAULT_HIDDEN, DEFAULT_RANKS, DEFAULT_TOKENS, DEFAULT_TOPK, FILE_ARG,
    add_device_options, add_model_options, add_wide_option, device_from_args, int_arg, nonempty_arg, output_width,
    print_json,
)


#: A sweep axis: given, it lists at least one value (empty would silently mean the default).
_LIST = nonempty_arg("a list 8,16,32 or a range 1:64")


def configure(p: argparse.ArgumentParser, command: str) -> None:
    p.description = ("Every combination of the listed values, for every backend. Lists are 8,16,32; ranges 1:64 "
                     "(inclusive), 128:4096:128 (step) or 128:8192:*2 (geometric).")
    add_model_options(p, "model (explicit lists override it)")
    g = p.add_argument_group("axes")
    g.add_argument("--backends", type=BACKENDS_ARG, help="comma-separated backends (default: all)")
    g.add_argument("--hidden", metavar="LIST", type=_LIST, help=f"hidden sizes (default {DEFAULT_HIDDEN})")
    g.add_argument("--topk", metavar="LIST", type=_LIST, help=f"top-k values (default {DEFAULT_TOPK})")
    g.add_argument("--experts", metavar="LIST", type=_LIST, help=f"expert counts (default {DEFAULT_EXPERTS})")
    g.add_argument("--ranks", metavar="LIST", type=_LIST, help=f"EP sizes (default {DEFAULT_RANKS})")
    g.add_argument("--tokens", metavar="LIST", type=_LIST,
                   help=f"num_max_tokens_per_rank values (default {DEFAULT_TOKENS})")
    g.add_argument("--dtype", metavar="LIST", default="fp8", help="fp8, bf16 or fp8,bf16 (default fp8)")
    g.add_argument("--gpus-per-node", dest="gpus_per_node", type=int_arg(">= 1"),
                   help="scale-up domain size (default min(ranks, 8))")
    g.add_argument("--redundant-experts", dest="redundant_experts", type=int_arg(">= 0", lo=0), default=0,
                   help="EPLB redundant experts added to the expert count (default 0)")
    d = p.add_argument_group("output (--device / --hbm draw the capacity on the plot)")
    add_device_options(d)
    d.add_argument("--csv", metavar="FILE", type=FILE_ARG, help="write every row as CSV")
    d.add_argument("--plot", metavar="FILE", type=FILE_ARG,
                   help="write a plot, format by the extension: .png, .svg, .pdf; needs epbuf[plot] (matplotlib)")
    d.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.sweep/1)")
    d.add_argument("--quiet", action="store_true", help="no table on stdout (needs --csv or --plot)")
    add_wide_option(d)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .._progress import terminal_progress
    from ..api._plan import sweep_document, sweep_run

    if args.quiet and args.csv is None and args.plot is None:
        from ..errors import InvalidArgumentError, Problem

        raise InvalidArgumentError([Problem("quiet", True, "nothing to show: add --csv FILE or --plot FILE")])
    if args.plot is not None:
        from ..plot import plot_format

        plot_format(args.plot)  # a bad extension fails before the sweep runs
    progress = terminal_progress(sys.stderr, "epbuf sweep", delay=1.0)
    try:
        result, model = sweep_run(args, lambda done, total: progress(f"{done:,} of {total:,} configurations",
                                                                     done, total))
    finally:
        progress.done()
    device = device_from_args(args)
    if args.csv:
        import csv
        import io as _io

        from ..io import write_text_atomic

        buffer = _io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows(["" if v is None else v for v in row] for row in result.rows)
        write_text_atomic(args.csv, buffer.getvalue(), option="--csv")
    if args.plot:
        from ..plot import plot_sweep

        plot_sweep(result, args.plot, capacity=device, title=f"{model or 'custom shape'}: total device allocation")
    data = sweep_document(result, args)
    if args.json:
        print_json(data)
        return 0
    if args.quiet:
        return 0
    from ..render.sweep import render_sweep
    from ..verdict import verdict_text

    width = output_width(args)
    sys.stdout.write(verdict_text(data["summary"], width) + render_sweep(result, device, width=width))
    for path, what in ((args.csv, "CSV"), (args.plot, "plot")):
        if path:
            sys.stdout.write(f"wrote {what}: {path}\n")
    return 0
