"""``epbuf layout``: the byte map of every token record (offset, size, field, padding);
``--svg`` draws it to scale."""

from __future__ import annotations

import argparse
import sys

from ._options import FILE_ARG, add_plan_options, add_wide_option, output_width, print_json, report_from_args


def configure(p: argparse.ArgumentParser, command: str) -> None:
    p.description = ("Print every field of each token record with its offset and size. With --device and no "
                     "--backend, the device chooses the backend.")
    add_plan_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable output (the report's records)")
    p.add_argument("--svg", metavar="FILE", type=FILE_ARG,
                   help="also write the byte-map diagram (records to scale, slot grids) as SVG")
    add_wide_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.svg is not None:
        from ..svg import check_svg_path

        check_svg_path(args.svg)
    rep, _, _ = report_from_args(args)
    if args.svg is not None:
        from ..io import write_text_atomic
        from ..svg import render_svg

        write_text_atomic(args.svg, render_svg(rep), option="--svg")
    from ..api._plan import layout_document

    data = layout_document(args, rep)
    if args.json:
        print_json(data)
        return 0
    from ..render.report import render_layout
    from ..verdict import verdict_text

    width = output_width(args)
    sys.stdout.write(verdict_text(data["summary"], width) + render_layout(rep, width=width))
    return 0
