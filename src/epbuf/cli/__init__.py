"""``epbuf`` command line: argparse front end. No formulas live here.

Each command is a module of this package with two functions::

    def configure(parser, command): ...   # description, options, parser.set_defaults(run=run)
    def run(args) -> int: ...             # compute through the library, render, return the exit status

and one line in :data:`COMMANDS`; adding a command is one module and one line. Options shared
by several commands (model, device, plan) and the parser class live in
:mod:`epbuf.cli._options`. Only the selected command's module is imported and only its options
are built, so ``epbuf hint`` pays for nothing else (``benchmarks/cold_start.py``). Invalid input
becomes one line on stderr and exit status 2.
"""

from __future__ import annotations

import sys

from ..errors import EpbufError

__all__ = ["COMMANDS", "PROG", "build_parser", "command_parser", "main"]

PROG = "epbuf"

# command -> (module of this package, one-line help). The module's configure() adds the options.
COMMANDS: dict[str, tuple[str, str]] = {
    "hint": ("hint", "buffer size hint, real need, findings and limits"),
    "layout": ("layout", "byte map of the dispatch and combine token records"),
    "compare": ("compare", "the same model/topology/tokens across every backend, side by side"),
    "fit": ("fit", "the largest tokens per rank (or EP size) whose allocation fits a budget"),
    "sweep": ("sweep", "many configurations across backends: table, CSV, JSON, plot"),
    "simulate": ("simulate", "route tokens through a backend: occupancy, traffic per link, time"),
    "models": ("presets", "the model presets, with their sources"),
    "devices": ("presets", "the device memory presets, with their sources"),
    "versions": ("presets", "the upstream formula generations each backend supports (--backend-version)"),
    "engine": ("engine", "what a serving/training engine allocates with its flags; fit and fixes"),
    "replay": ("replay", "DeepEP-Ascend's dispatch writer against its receive epilogue, on real bytes"),
    "serve": ("serve", "the calculator as a web page and JSON API (this machine only by default)"),
}


def build_parser(argv: list[str] | None = None):
    """The parser of ``epbuf``. When ``argv`` starts with a command, only that command is
    registered and configured (nothing else is imported); otherwise every command is."""
    from .. import __version__
    from ._options import Parser

    selected = argv[0] if argv and argv[0] in COMMANDS else None
    parser = Parser(
        prog=PROG,
        description="Plan, inspect and explain the communication buffers of expert-parallel MoE "
                    "dispatch/combine libraries (DeepEP-Ascend, DeepEP V2, DeepEP V1, UCCL-EP, MORI-EP, pplx-kernels), offline.",
    )
    parser.add_argument("--version", action="version", version=f"epbuf {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, (_, help_text) in COMMANDS.items():
        if selected is None or name == selected:
            _configure(sub.add_parser(name, help=help_text), name)
    return parser


def command_parser(name: str):
    """The parser of ``epbuf NAME`` alone (what :func:`main` parses a command line with)."""
    from ._options import Parser

    parser = Parser(prog=f"{PROG} {name}")
    _configure(parser, name)
    parser.set_defaults(command=name)
    return parser


def _configure(parser, name: str) -> None:
    import importlib

    importlib.import_module(f"{__name__}.{COMMANDS[name][0]}").configure(parser, name)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``epbuf`` console script; returns the exit status."""
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] in COMMANDS:
        parser = command_parser(argv[0])
        args = parser.parse_args(argv[1:])
    else:
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
