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
    "completion": ("completion", "a bash or zsh completion script, generated from the parser"),
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
    from .._lazy import module

    module(f"{__name__}.{COMMANDS[name][0]}").configure(parser, name)


class _ClosedStdout:
    """Standard output when the process started without one (``epbuf hint >&-``): every write
    fails as writing to a closed descriptor does, so the command ends with one line."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        import errno

        raise OSError(errno.EBADF, "standard output is closed")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    @property
    def buffer(self):
        return self


class _WatchedStdout:
    """Standard output during :func:`main`, remembering a failed write: argparse swallows the
    OSError of ``--help > /dev/full``, and the command must still end with one line."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.failed: OSError | None = None

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as error:
            self.failed = error
            raise

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            self.failed = error
            raise

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _drop_stdout() -> None:
    """After a failed write, point file descriptor 1 at /dev/null so that the interpreter's
    flush at exit has somewhere to put what is still buffered (no second error)."""
    import os

    try:
        fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (AttributeError, ValueError, OSError):
        pass


def _error(command: str, message: str, kind: str = "error: ") -> None:
    if sys.stderr is not None:
        try:
            from ._types import fit_line

            sys.stderr.write(fit_line(f"{PROG}{' ' + command if command else ''}: {kind}{message}") + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


def _flush_stdout() -> None:
    if sys.stdout is not None:
        sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``epbuf`` console script; returns the exit status.

    Exit status: 0 done; 1 ``--strict`` found an error finding (or ``simulate`` a region the
    routing overflows); 2 invalid input, an unknown name, a file that cannot be read or written,
    or standard output that cannot be written (closed, a full device), each one line on
    stderr; 130 interrupted (Ctrl-C). Writing into a closed pipe (``epbuf hint | head``) is not
    an error.
    """
    as_program = argv is None  # the console script and python -m epbuf: the process ends next
    if argv is None:
        argv = sys.argv[1:]
    original = sys.stdout
    sys.stdout = watched = _WatchedStdout(original if original is not None else _ClosedStdout())
    command = argv[0] if argv and argv[0] in COMMANDS else ""
    untranslated = _untranslated_argparse()
    try:
        return _main(argv, command, watched)
    finally:
        sys.stdout = original
        untranslated()
        if as_program:
            # The interpreter's last garbage collection at exit would walk every object the
            # command made, for nothing: frozen, they are left to the exit (3 ms of a 28 ms
            # `epbuf hint`, benchmarks/cold_start.py). Not for in-process callers (tests, serve).
            import gc

            gc.freeze()


def _untranslated_argparse():
    """Let argparse's messages be its English text while :func:`main` runs, without gettext
    looking for catalogs: every ``ArgumentParser`` asks gettext for each string, and the first
    ask imports ``locale`` and stats the catalog folders (about 1 ms of a 25 ms command;
    ``benchmarks/cold_start.py``). CPython ships no catalog for the ``argparse`` domain, so the
    text is what gettext would return. Returns the function that puts gettext back."""
    import argparse

    saved = argparse._, argparse.ngettext
    argparse._ = str
    argparse.ngettext = lambda singular, plural, n: singular if n == 1 else plural

    def restore() -> None:
        argparse._, argparse.ngettext = saved

    return restore


def _main(argv: list[str], command: str, watched: _WatchedStdout) -> int:
    try:
        try:
            if command:
                parser = command_parser(argv[0])
                args = parser.parse_args(argv[1:])
            else:
                parser = build_parser(argv)
                args = parser.parse_args(argv)
        except SystemExit:  # --help, --version and usage errors: argparse has written its text
            _flush_stdout()
            if watched.failed is not None:
                raise watched.failed from None
            raise
        if not getattr(args, "run", None):
            parser.print_help()
            _flush_stdout()
            return 2
        try:
            status = args.run(args)
        except EpbufError as error:
            _error(args.command, str(error))
            status = 2
        _flush_stdout()
        return status
    except KeyboardInterrupt:
        _error(command, "interrupted", kind="")
        return 130
    except BrokenPipeError:  # `epbuf hint | head` is fine
        _drop_stdout()
        return 0
    except SystemExit:
        raise
    except OSError as error:
        _drop_stdout()
        where = f"{error.filename}: " if error.filename else "cannot write to standard output: "
        _error(command, f"{where}{error.strerror or error}")
        return 2
