"""``epbuf replay``: DeepEP-Ascend's dispatch writer against its receive epilogue on real bytes —
each field of a sample token as written and as read (``--json``: schema ``epbuf.replay/1``).
Standard library only; exit status 0, as it is a demonstration."""

from __future__ import annotations

import argparse
import sys

from ._options import add_plan_options, add_wide_option, output_width, print_json


def configure(p: argparse.ArgumentParser, command: str) -> None:
    p.description = ("Write a sample token as the Ascend dispatch kernel does, read it back as the receive epilogue "
                     "does, and print each field as written and as read (exit status 0: a demonstration).")
    # Only what replay reads: DeepEP-Ascend's shape options (the record replayed does not depend on
    # a device; options of other backends would be ignored).
    add_plan_options(p, backend=False, only=("ascend",), drop=("--device", "--hbm"))
    p.add_argument("--json", action="store_true", help="machine-readable output (schema epbuf.replay/1)")
    add_wide_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..api._tools import replay_document, replay_run

    result = replay_run(args)
    data = replay_document(result)
    if args.json:
        print_json(data)
    else:
        from ..codec.replay import render_replay
        from ..verdict import verdict_text

        width = output_width(args)
        sys.stdout.write(verdict_text(data["summary"], width) + render_replay(result, width))
    return 0
