"""MkDocs hook: the reStructuredText habits of epbuf's docstrings read well when mkdocstrings renders
them as Markdown in the API reference.

* interactive Python sessions (``>>>`` lines and the output after them, up to a blank line) become
  fenced ``pycon`` code blocks, instead of text (where ``[1843]`` reads as a link);
* simple tables (a rule of ``=`` runs, rows, a closing rule) become fenced ``text`` blocks, as
  they are laid out;
* Sphinx roles (``:func:`x```, ``:class:`~a.b.C```) become code spans.

Pages written in Markdown fence their code themselves; fenced blocks are left alone."""

from __future__ import annotations

import re

from markdown import Extension
from markdown.preprocessors import Preprocessor

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
TABLE_RULE = re.compile(r"^\s*=+( +=+)+\s*$")
ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|exc|obj|const|py:\w+):`~?")


class _DoctestFences(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        fence = None
        i = 0
        while i < len(lines):
            line = lines[i]
            m = FENCE.match(line)
            if fence is None and m:
                fence = m.group(1)
            elif fence is not None and line.strip().startswith(fence):
                fence = None
            if fence is None and TABLE_RULE.match(line):
                indent = line[:len(line) - len(line.lstrip())]
                end = i + 1  # the closing rule is the first one followed by a blank line
                while end < len(lines) and not (TABLE_RULE.match(lines[end]) and
                                                (end + 1 == len(lines) or not lines[end + 1].strip())):
                    end += 1
                end = min(end + 1, len(lines))
                out += ["", indent + "```text", *lines[i:end], indent + "```", ""]
                i = end
                continue
            if fence is None:
                line = ROLE.sub("`", line)
            if fence is None and line.lstrip().startswith(">>> "):
                indent = line[:len(line) - len(line.lstrip())]
                block = []
                while i < len(lines) and lines[i].strip():
                    block.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
                    i += 1
                out += ["", indent + "```pycon", *(indent + b for b in block), indent + "```", ""]
                continue
            out.append(line)
            i += 1
        return out


class DoctestFences(Extension):
    def extendMarkdown(self, md):  # noqa: N802 (Markdown's API)
        md.preprocessors.register(_DoctestFences(md), "epbuf_doctest_fences", 40)


def on_config(config):
    config.markdown_extensions.append(DoctestFences())
    return config
