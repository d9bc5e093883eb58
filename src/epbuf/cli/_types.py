"""The parser class and argument types every ``epbuf`` command shares: errors are one line
with exit status 2, integers and byte sizes are checked with the allowed range in the message.
(The option builders live in :mod:`epbuf.cli._options`; both import from here.)"""

from __future__ import annotations

import argparse
import sys

_columns_cache: dict = {}


def _terminal_columns() -> int:
    """What ``shutil.get_terminal_size`` gives, without importing shutil (and with it bz2,
    lzma, zlib): argparse's formatter asks on every ``add_argument``, which costs the cold
    start ~10 %. The terminal is asked once per process (per ``COLUMNS`` value)."""
    import os

    env = os.environ.get("COLUMNS")
    cached = _columns_cache.get(env)
    if cached is not None:
        return cached
    try:
        columns = int(env)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 80
    _columns_cache[env] = columns
    return columns


class Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         width if width is not None else max(40, _terminal_columns() - 2))


class RawDescriptionFormatter(argparse.RawDescriptionHelpFormatter, Formatter):
    """:class:`Formatter` that keeps the description's and epilog's line breaks."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit status 2 (no usage dump)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        # No abbreviations: `replay --backend deepep-v2` must not be read as --backend-version.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._argv: list[str] = []

    def parse_known_args(self, args=None, namespace=None):
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> None:  # type: ignore[override]
        prefix = "unrecognized arguments: "
        words = message[len(prefix):].split() if message.startswith(prefix) else []
        if words:  # the first one (a blank argument leaves none)
            message += (_stray_value_hint(self._argv, words)
                        or _closest(words[0].split("=", 1)[0], [o for a in self._actions for o in a.option_strings]))
        self.exit(2, f"{self.prog}: error: {message}\n")

    def _check_value(self, action, value) -> None:
        """argparse's refusal of an unknown choice (a command, ``--backend``, an engine), with the
        nearest choice first: ``invalid choice: 'hnit'; did you mean hint? (choose from ...)``."""
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(repr, action.choices))
            raise argparse.ArgumentError(action, f"invalid choice: {shown(value)}"
                                         f"{_closest(value, list(action.choices))} (choose from {choices})")


_UNITS = {"b", "kb", "mb", "gb", "tb", "kib", "mib", "gib", "tib", "k", "m", "g", "t", "%"}


def _stray_value_hint(argv: list[str], words: list[str]) -> str:
    """Why a value was left over, for the three ways people split one: ``--budget 8 GiB`` (a
    size and its unit), ``--ranks 8 16 32`` (several values), ``--env NAME VALUE`` (a space
    for the ``=``). ``""`` when it is none of them."""
    first = words[0]
    at = next((i for i in range(len(argv)) if argv[i] == first and i >= 2), None)
    if at is None:
        return ""
    option, value = argv[at - 2], argv[at - 1]
    if not option.startswith("-") or value.startswith("-"):
        return ""
    if option == "--env" and "=" not in value:
        return f"; use {option} {value}={first} (NAME=VALUE, one argument)"
    if first.lower() in _UNITS:
        return f"; a size is one argument: {option} {value}{first}, or quote it: {option} '{value} {first}'"
    if first.replace(".", "", 1).isdigit() and value.replace(".", "", 1).isdigit():
        values = [value] + [w for w in words if w.replace(".", "", 1).isdigit()]
        return f"; {option} takes one value: give several comma-separated ({option} {','.join(values)})"
    return ""


def _closest(typed: object, names: list[str]) -> str:
    """``"; did you mean NAME?"`` for the name nearest to ``typed`` (a typo), else ``""``."""
    from .._names import closest

    if not isinstance(typed, str):
        return ""
    bare = {name.lstrip("-").lower(): name for name in names}  # "--dtype" is not "--quant-type"; vLLM is vllm
    close = closest(typed.lstrip("-").lower(), bare)
    return f"; did you mean {bare[close]}?" if close else ""


def shown(text: str, limit: int = 60) -> str:
    """``repr(text)``, cut to ``limit`` characters (a 5,000-digit value stays one short line)."""
    r = repr(text)
    return r if len(r) <= limit else r[:limit - 3] + "..."


def int_arg(allowed: str, lo: int = 1):
    """An argparse type for integers, with the allowed range in the error line. Digits only
    (ASCII, ``_`` separators allowed), at most 30 of them: no count or size here needs more,
    and ``int()`` of 4,301+ digits raises."""

    def parse(text: str) -> int:
        digits = text.strip().replace("_", "")
        body = digits[1:] if digits[:1] in "+-" else digits
        if not (body.isascii() and body.isdigit()) or len(body) > 30:
            raise argparse.ArgumentTypeError(f"{shown(text)} is not an integer; allowed {allowed}")
        value = int(digits, 10)
        if value < lo:
            raise argparse.ArgumentTypeError(f"{value} is out of range; allowed {allowed}")
        return value

    parse.__name__ = "integer"
    return parse


def nonempty_arg(what: str):
    """An argparse type for names and paths: the text as given, but not empty or blank."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{text!r} is empty; give {what}")
        if "\x00" in text:
            raise argparse.ArgumentTypeError(f"{shown(text)} holds a NUL character; give {what}")
        return text

    parse.__name__ = "value"
    return parse


def bytes_arg(text: str) -> int:
    """An argparse type for byte sizes with units (``8GiB``, ``80GB``, ``3e9``)."""
    from ..units import parse_bytes

    try:
        return parse_bytes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def positive_bytes_arg(text: str) -> int:
    num_bytes = bytes_arg(text)
    if num_bytes <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive byte size; allowed > 0, e.g. 8GiB")
    return num_bytes
