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


    #: A ``{a,b,c}`` list of choices longer than this shows as the option's last word in capitals,
    #: the choices going into the help text (usage and option lines stay within the width).
    MAX_CHOICES_METAVAR = 32

    def _metavar_formatter(self, action, default_metavar):
        listed = action.metavar if isinstance(action.metavar, str) and action.metavar.startswith("{") else None
        if action.metavar is None and action.choices is not None:
            listed = "{" + ",".join(map(str, action.choices)) + "}"
        if listed is not None:  # (an engine's flag spells its choices in the metavar; its help lists them)
            if len(listed) > self.MAX_CHOICES_METAVAR:
                name = (action.option_strings[0].lstrip("-").split("-")[-1] if action.option_strings
                        else default_metavar).upper()
                return lambda size: (name,) * size if isinstance(size, int) else (name,)
        return super()._metavar_formatter(action, default_metavar)

    def _get_help_string(self, action):
        text = super()._get_help_string(action) or ""
        if action.metavar is None and action.choices is not None and action.option_strings:
            listed = ",".join(map(str, action.choices))
            if len(listed) + 2 > self.MAX_CHOICES_METAVAR:
                text += f" (one of {', '.join(map(str, action.choices))})"
        return text

    def start_section(self, heading):
        """Group titles wrapped to the width, as argparse does not."""
        if heading and len(heading) + 1 > self._width:
            import textwrap

            heading = "\n".join(textwrap.wrap(heading, self._width - 1))
        super().start_section(heading)


class RawDescriptionFormatter(argparse.RawDescriptionHelpFormatter, Formatter):
    """:class:`Formatter` that keeps the description's and epilog's line breaks, each line wrapped
    to the width (a continuation indented as the line is, plus two)."""

    def _fill_text(self, text, width, indent):
        import textwrap

        out = []
        for line in text.splitlines():
            lead = line[:len(line) - len(line.lstrip())]
            out += textwrap.wrap(line, width, initial_indent=indent, subsequent_indent=indent + lead + "  ",
                                 break_long_words=False, break_on_hyphens=False) or [indent]
        return "\n".join(out)


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

    def exit(self, status: int = 0, message: str | None = None):  # noqa: A003 (argparse's name)
        # A terminal gets the line cut to 100 columns; epbuf.api replaces exit and keeps it whole.
        if message:
            message = fit_line(message.rstrip("\n")) + "\n"
        super().exit(status, message)

    def _check_value(self, action, value) -> None:
        """argparse's refusal of an unknown choice (a command, ``--backend``, an engine), with the
        nearest choice first: ``invalid choice: 'hnit'; did you mean hint? (one of ...)``."""
        if action.choices is not None and value not in action.choices:
            close = _closest(value, list(action.choices))  # the nearest name, else what there is
            raise argparse.ArgumentError(action, f"invalid choice: {shown(value)}"
                                         + (close or f" (one of {names_text(list(action.choices))})"))


#: The most columns an error line takes (one line, piped or not).
ERROR_COLUMNS = 100


def fit_line(line: str, width: int = ERROR_COLUMNS) -> str:
    """``line`` within ``width`` columns: the last guard of the one-line error rule (messages are
    written to fit; ``str()`` of the library's error keeps the whole text). In turn, until it fits:
    quoted values of 32 characters or more keep their first 24 (and the ``(N characters)`` they end
    with), numbers of 16 digits or more their first 8, paths their last name; citations in
    parentheses (a source line, a commit, an assertion) go, last first; the trailing hints after
    ``; `` go (``; …``), then again without the Python name after the option; last, the words that
    do not fit (``…``)."""
    if len(line) <= width:
        return line
    import re

    def quoted(m: re.Match) -> str:
        q, body = m.group(1), m.group(2).rstrip("…")
        size = re.search(r" \([\d,]+ characters\)$", body)
        if size:
            body = body[:size.start()].rstrip("…")
        return f"{q}{body[:12 if size else 24]}…{size.group(0) if size else ''}{m.group(3).strip('…')}"

    def hints(text: str) -> str | None:
        # after a question (``did you mean X?``) the cut keeps it: the answer is worth more than a list
        cut = max(text[:width - 3].rfind("; "), text[:width - 3].rfind("? "))
        if cut <= width - 40:
            return None
        return text[:cut + 1] + " …" if text[cut] == "?" else text[:cut] + "; …"

    steps = (
        lambda t: re.sub(r"""(?<=[=:] )(['"])((?:(?!\1).){32,}?)(\1|…(?=:))""", quoted, t),
        lambda t: re.sub(r"(?<![\d…])\d{16,}(?![\d…])", lambda m: m.group(0)[:8] + "…", t),
        lambda t: re.sub(r"(?<![\w.])/[^\s:']*/([^\s:'/]+)", lambda m: "…/" + m.group(1)[-24:], t),
    )
    for step in steps:
        line = step(line)
        if len(line) <= width:
            return line
    while len(line) > width:  # the citations: a source line, a commit, an assertion
        asides = [m for m in re.finditer(r" \((?:[^()]|\([^()]*\)){5,}\)(?! = )", line)
                  if re.search(r"[/@]|::|\w\(|:\d|[A-Z]+_[A-Z]", m.group(0))]
        if not asides:
            break
        line = line[:asides[-1].start()] + line[asides[-1].end():]
    if len(line) <= width:
        return line
    named = line
    for shorter in (lambda t: t, lambda t: re.sub(r"(: error: [^ ]+) \(\w+\)(?= = )", r"\1", t, count=1)):
        line = shorter(named)
        if len(line) <= width:
            return line
        cut = hints(line)
        if cut is not None:
            return cut
    line = named
    head = line[:width - 2]
    cut = head.rfind(" ")
    return head[:cut] + " …" if cut > width // 2 else line[:width - 1] + "…"


def names_text(names: list[str], room: int = 48) -> str:
    """``a, b, c`` of ``names``, as many as fit ``room`` characters, then ``… (N more)``."""
    out, used = [], 0
    for k, name in enumerate(map(str, names)):
        if out and used + len(name) + 2 > room:
            return ", ".join(out) + f", … ({len(names) - k} more)"
        out.append(name)
        used += len(name) + 2
    return ", ".join(out)


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
        return f"; use {option} {value}={first}"
    if first.lower() in _UNITS:
        return f"; one argument: {option} {value}{first} or {option} '{value} {first}'"
    if first.replace(".", "", 1).isdigit() and value.replace(".", "", 1).isdigit():
        values = [value] + [w for w in words if w.replace(".", "", 1).isdigit()]
        return f"; comma-separate the values: {option} {','.join(values)}"
    return ""


def _closest(typed: object, names: list[str]) -> str:
    """``"; did you mean NAME?"`` for the name nearest to ``typed`` (a typo), else ``""``."""
    from .._names import closest

    if not isinstance(typed, str):
        return ""
    bare = {name.lstrip("-").lower(): name for name in names}  # "--dtype" is not "--quant-type"; vLLM is vllm
    close = closest(typed.lstrip("-").lower(), bare)
    return f"; did you mean {bare[close]}?" if close else ""


def shown(text: str, limit: int = 40) -> str:
    """``repr(text)``, cut to ``limit`` characters with ``…`` (a 5,000-digit value stays one short line)."""
    from ..errors import shown_value

    return shown_value(text, limit)


def int_arg(allowed: str, lo: int = 1):
    """An argparse type for integers, with the allowed range in the error line. Digits only
    (ASCII, ``_`` separators allowed), at most 30 of them: no count or size here needs more,
    and ``int()`` of 4,301+ digits raises."""

    def parse(text: str) -> int:
        digits = text.strip().replace("_", "")
        body = digits[1:] if digits[:1] in "+-" else digits
        if not (body.isascii() and body.isdigit()) or len(body) > 30:
            raise argparse.ArgumentTypeError(f"{shown(text, 24)} is not an integer; allowed {allowed}")
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
