"""Options for :mod:`epbuf.api`: keyword arguments, or ``--key=value`` words, read by the
command's own argparse parser, so a value is checked exactly as on the command line; a
refusal raises :class:`ApiArgumentError` (an :class:`~epbuf.errors.EpbufError`) with the
command line's one-line message instead of printing and exiting."""

from __future__ import annotations

import argparse

from ..errors import EpbufError

__all__ = ["ApiArgumentError", "OUTPUT_OPTIONS", "parse", "parser_of", "engine_parse", "words"]

#: Options that shape only the command line's output (or write files): no document reads them.
OUTPUT_OPTIONS = frozenset({"help", "json", "wide", "csv", "plot", "svg", "quiet", "save-routing", "verbose"})


class ApiArgumentError(EpbufError):
    """An option the command's parser refuses (the command line's message, without its prefix);
    ``prog``: the parser's name (``epbuf engine vllm``), or ``""``."""

    def __init__(self, message: str, prog: str = "") -> None:
        super().__init__(message)
        self.prog = prog


def _raising(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` (and its subparsers) raising :class:`ApiArgumentError` where it would exit."""
    prefix = f"{parser.prog}: error: "

    def exit(status: int = 0, message: str | None = None) -> None:  # noqa: A001 (argparse's name)
        text = (message or "").strip()
        raise ApiArgumentError(text[len(prefix):] if text.startswith(prefix) else text or f"exit status {status}",
                               parser.prog)

    parser.exit = exit  # type: ignore[method-assign]
    return parser


def words(options: dict, parser: argparse.ArgumentParser, where: str) -> list[str]:
    """``--key=value`` words for keyword ``options`` (``backend_version="ll3"``, ``bf16=True``,
    ``env=["A=1", "B=2"]``); ``None`` and ``False`` leave an option out. Names are the command
    line's options with ``_`` for ``-``."""
    from .._names import closest

    known = {o[2:]: a for a in parser._actions for o in a.option_strings if o.startswith("--")}
    out: list[str] = []
    for key, value in options.items():
        name = key.replace("_", "-")
        action = known.get(name)
        if action is None or name in OUTPUT_OPTIONS:
            allowed = sorted(set(known) - OUTPUT_OPTIONS)
            close = closest(name, allowed)
            what = "is an output option of the command line" if action is not None else "is not an option"
            raise ApiArgumentError(f"{where}: {key} {what}" + (f"; did you mean {close}?" if close else "")
                                   + f"; allowed: {', '.join(allowed)}")
        if value is None:
            continue
        if action.nargs == 0:  # a switch: True or False
            if not isinstance(value, bool):
                raise ApiArgumentError(f"{where}: {key} = {value!r}: a switch; give True or False")
            if value:
                out.append(f"--{name}")
            continue
        values = value if isinstance(value, (list, tuple)) and isinstance(action, argparse._AppendAction) else [value]
        for item in values:
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                raise ApiArgumentError(f"{where}: {key} = {item!r}: give a {'number' if action.type else 'text'}"
                                       " (as on the command line)")
            out.append(f"--{name}={item}")
    return out


_parsers = None


def parser_of(command: str) -> argparse.ArgumentParser:
    """``epbuf COMMAND``'s parser, raising :class:`ApiArgumentError`; built once per thread (a
    server answering many requests builds each command's parser once per worker)."""
    global _parsers
    if _parsers is None:
        import threading  # (not at import: the command line's cold start does not need it)

        _parsers = threading.local()
    cache = getattr(_parsers, "by_command", None)
    if cache is None:
        cache = _parsers.by_command = {}
    found = cache.get(command)
    if found is None:
        from ..cli import command_parser

        found = cache[command] = _raising(command_parser(command))
    return found


def parse(command: str, argv: list[str]) -> argparse.Namespace:
    """The options of ``epbuf COMMAND ARGV`` as the command parses them."""
    return parser_of(command).parse_args(argv)


def engine_parse(name: str, argv: list[str], launch: str | list | None = None):
    """``(options, ranks spelling, LaunchLine or None, ignored)`` of ``epbuf engine NAME ARGV
    [-- LAUNCH]``; ``launch`` is the engine's own command line (text, split as a shell does, or
    words). An option epbuf does not know is refused here (the command line lists it as ignored
    only after ``--``)."""
    import shlex

    from ..cli._engine_launch import parse_launch_line
    from ..cli.engine import _ranks_spelling, build_engine_parser

    parser = _raising(build_engine_parser(name))
    line = None
    if launch is not None:
        try:
            tokens = shlex.split(launch) if isinstance(launch, str) else [str(t) for t in launch]
        except ValueError as error:
            raise ApiArgumentError(f"launch line: {error} (quote it as a shell would)") from None
        line = parse_launch_line(tokens, name)
    full = (list(line.argv) if line is not None else []) + list(argv)
    opts = parser.parse_args(full)
    return opts, _ranks_spelling(full, parser), line, (line.ignored if line is not None else ())
