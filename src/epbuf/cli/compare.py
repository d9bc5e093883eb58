"""``epbuf compare``: the same model, topology and tokens across every backend, side by side
(``--json``: schema ``epbuf.compare/1``)."""

from __future__ import annotations

import argparse
import sys

from ._options import BACKENDS_ARG, add_plan_options, add_wide_option, output_width, print_json


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
    if args.json:
        from ..api._plan import compare_document

        print_json(compare_document(args))
        return 0
    from ..api._plan import compare_document, compare_parts
    from ..render.compare import render_compare
    from ..verdict import verdict_text

    parts = compare_parts(args)
    data = compare_document(args, parts)
    width = output_width(args)
    sys.stdout.write(verdict_text(data["summary"], width) + render_compare(
        parts["results"], device=parts["capacity"], runs_on=parts["on_device"], width=width, plan=data["plan"],
        verbose=args.verbose))
    return 0
