"""``epbuf layout``: the byte map of every token record (offset, size, field, padding);
``--svg`` draws it to scale."""

from __future__ import annotations

import argparse
import sys

from ._options import add_plan_options, plan_from_args, print_json


def configure(p: argparse.ArgumentParser, command: str) -> None:
    p.description = "Print every field of each token record with its offset and size."
    add_plan_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable output (the report's records)")
    p.add_argument("--svg", metavar="FILE", help="also write the byte-map diagram (records to scale, slot grids) as SVG")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..plan import report

    rep = report(plan_from_args(args), args.backend)
    if args.svg:
        from ..io import write_text_atomic
        from ..svg import render_svg

        write_text_atomic(args.svg, render_svg(rep), option="--svg")
    if args.json:
        from ..report import report_to_dict

        data = report_to_dict(rep)
        print_json({k: data[k] for k in ("schema", "backend", "upstream", "inputs", "records", "findings")})
        return 0
    from ..render import render_layout

    sys.stdout.write(render_layout(rep))
    return 0
