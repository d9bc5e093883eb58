"""MkDocs hook: the command-line reference, generated at build time from ``epbuf.cli``'s own
argparse parsers, so the page cannot drift from the tool.

A page that contains the marker ``<!-- epbuf:cli-reference -->`` gets it replaced by one section
per command of :data:`epbuf.cli.COMMANDS` (and one per engine of ``epbuf engine``): the one-line
help, the description, the usage line and every option, group by group, with its help and
default. ``tests/test_docs_site.py`` imports :func:`cli_reference` and checks that every option
string of every parser appears in it.
"""

from __future__ import annotations

import argparse
import html

MARKER = "<!-- epbuf:cli-reference -->"


def _escape(text: str) -> str:
    """Plain help text as Markdown table-cell text (no emphasis, no HTML, no cell breaks)."""
    text = html.escape(" ".join(text.split()), quote=False)
    for mark in ("\\", "`", "*", "_", "|", "[", "]"):
        text = text.replace(mark, "\\" + mark)
    return text


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _invocation(formatter: argparse.HelpFormatter, action: argparse.Action) -> str:
    if not action.option_strings:
        return formatter._metavar_formatter(action, action.dest)(1)[0]
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    args = formatter._format_args(action, action.dest.upper())
    return ", ".join(f"{opt} {args}" for opt in action.option_strings)


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, "", [], ()):
        return ""
    return f"`{action.default}`"


def _options(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    lines: list[str] = []
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if a.help != argparse.SUPPRESS and not isinstance(a, argparse._SubParsersAction)]
        if not actions:
            continue
        lines += ["", f"**{_escape(group.title or 'options')}**", ""]
        if group.description:
            lines += [_escape(group.description), ""]
        lines += ["| option | meaning | default |", "|---|---|---|"]
        for action in actions:
            help_text = formatter._expand_help(action) if action.help else ""
            if action.choices and not isinstance(action.choices, dict) and action.option_strings:
                help_text += f" (one of: {', '.join(map(str, action.choices))})" if "{" not in _invocation(
                    formatter, action) else ""
            lines.append(f"| `{_invocation(formatter, action).replace('|', '&#124;')}` | {_escape(help_text)} | "
                         f"{_default(action)} |")
    return lines


def _usage(parser: argparse.ArgumentParser) -> list[str]:
    usage = parser.format_usage().strip()
    return ["", "```text", usage, "```"]


def _section(level: int, title: str, help_text: str, parser: argparse.ArgumentParser) -> list[str]:
    lines = ["", f"{'#' * level} `{title}`", ""]
    if help_text:
        lines.append(_escape(help_text[:1].upper() + help_text[1:]) + ".")
    if parser.description:
        lines += ["", _escape(parser.description)]
    lines += _usage(parser)
    lines += _options(parser)
    return lines


def _full_parser(command: str, name: str, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The parser a sub-command really runs with: ``epbuf engine NAME`` registers a stub that takes
    the rest of the line, and builds the engine's own parser (its flags and variables) on use."""
    if command == "engine":
        from epbuf.cli.engine import build_engine_parser

        return build_engine_parser(name)
    return parser


def cli_reference() -> str:
    """Every command and option of ``epbuf``, as Markdown, from the parsers themselves."""
    import os

    from epbuf.cli import COMMANDS, PROG, build_parser

    os.environ.setdefault("COLUMNS", "100")  # usage lines wrap at a width that reads on the page
    parser = build_parser()
    commands = _subparsers(parser)
    lines = ["## Commands", "", "| command | answers |", "|---|---|"]
    lines += [f"| [`{PROG} {name}`](#{PROG}-{name}) | {_escape(help_text)} |" for name, (_, help_text) in COMMANDS.items()]
    lines += _section(2, PROG, "", parser)
    for name, (_, help_text) in COMMANDS.items():
        sub = commands[name]
        lines += _section(2, f"{PROG} {name}", help_text, sub)
        for engine, engine_parser in _subparsers(sub).items():
            lines += _section(3, f"{PROG} {name} {engine}", "", _full_parser(name, engine, engine_parser))
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (MkDocs' hook signature)
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    return markdown
