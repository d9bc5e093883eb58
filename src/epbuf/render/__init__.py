"""Text rendering of reports for people. No arithmetic beyond formatting lives here.

This module holds the building blocks every renderer uses (wrapped lines, tables that fit a
width, byte cells, findings, the device line); each command's renderer is a module of its own,
loaded on first use of its name (a command renders one kind of output):

* :mod:`.report` — ``epbuf hint`` (:func:`render_report`) and ``epbuf layout`` (:func:`render_layout`)
* :mod:`.compare` — ``epbuf compare`` and ``epbuf fit``: backends side by side
* :mod:`.sweep` — ``epbuf sweep``
* :mod:`.engine` — ``epbuf engine`` (:func:`render_engine_report`)
"""

from __future__ import annotations

from .._lazy import exports
from ..units import format_bytes, format_int

__all__ = ["table", "bytes_cell", "render_report", "render_layout", "render_inputs", "render_compare",
           "render_fit", "render_sweep", "render_engine_report"]


def wrap(text: str, width: int | None, indent: str = "", first: str | None = None) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` characters, the first prefixed
    by ``first`` (default ``indent``), the others by ``indent``; a word longer than a line is cut
    (after a ``/`` or ``,`` where it has one). ``width`` None: one line."""
    first = indent if first is None else first
    if width is None or len(first) + len(text) <= width:
        return [first + text]
    room = max(8, width - len(indent))
    words: list[str] = []
    for word in text.split():
        while len(word) > room:
            cut = max(word.rfind("/", 0, room), word.rfind(",", 0, room)) + 1 or room
            words.append(word[:cut])
            word = word[cut:]
        words.append(word)
    lines: list[str] = []
    line, prefix = "", first
    for word in words:
        if line and len(prefix) + len(line) + 1 + len(word) > width:
            lines.append(prefix + line)
            line, prefix = word, indent
        else:
            line = f"{line} {word}" if line else word
    lines.append(prefix + line)
    return lines


def table(headers: list[str], rows: list[list[str]], right: set[int] | None = None, indent: str = "  ",
          width: int | None = None, wrap_columns: tuple[int, ...] = (-1,), below: int | tuple = (),
          always_below: bool = False) -> str:
    """A plain-text table; columns in ``right`` are right-aligned (numbers).

    When a line would be longer than ``width``, the widest of ``wrap_columns`` (default the
    last) are narrowed, down to 12 characters (or their header), and their cells wrapped onto
    continuation lines. When that cannot fit the width, the columns ``below`` (a long sentence
    such as a formula or a reason), one after another until the rest fits, move under their row,
    wrapped to the full width (``always_below``: whatever the width)."""
    right = right or set()
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    ncols = len(headers)
    wrapping = sorted({c % ncols for c in wrap_columns})

    # The narrowest a wrapped column goes: its longest word (a variable name is not cut) while
    # the table still fits the width that way, else 12 characters (or its header).
    words = [max((len(w) for r in rows if c < len(r) for w in r[c].split()), default=0) for c in range(ncols)]
    whole_words = [True]

    def floor(c: int) -> int:
        least = max(12, len(headers[c]), words[c] if whole_words[0] else 0)
        return min(widths[c], least)

    def total(cols: list[int], narrowed: list[int]) -> int:
        return len(indent) + sum(floor(c) if c in narrowed else widths[c] for c in cols) + 2 * (len(cols) - 1)

    under: list[list[str]] = [[] for _ in rows]
    moving = [c % ncols for c in ((below,) if isinstance(below, int) else below)]
    if width is not None and total([c for c in range(ncols) if c not in moving], wrapping) > width:
        whole_words[0] = False  # even with every movable column moved, whole words do not fit
    if (width is not None or always_below) and moving:
        cols = list(range(ncols))
        moved = []
        for c in moving:
            if not always_below and total(cols, wrapping) <= width:
                break
            cols.remove(c)
            moved.append(c)
        for k, r in enumerate(rows):
            under[k] = [f"{headers[c]}: {r[c]}" for c in sorted(moved) if c < len(r) and r[c]]
        right = {cols.index(i) for i in right if i in cols}
        wrapping = [cols.index(c) for c in wrapping if c in cols]
        headers = [headers[i] for i in cols]
        rows = [[r[i] for i in cols if i < len(r)] for r in rows]
        widths = [widths[i] for i in cols]
        words = [words[i] for i in cols]
    if width is not None and wrapping:
        over = len(indent) + sum(widths) + 2 * (len(widths) - 1) - width
        if whole_words[0] and over > sum(widths[c] - floor(c) for c in wrapping):
            whole_words[0] = False
        while over > 0:
            col = max(wrapping, key=lambda c: widths[c] - floor(c))
            if widths[col] <= floor(col):
                break
            widths[col] -= 1
            over -= 1

    def line(cells: list[str]) -> list[str]:
        pieces = {c: (wrap(cells[c], widths[c]) if c < len(cells) and len(cells[c]) > widths[c] else None)
                  for c in wrapping}
        depth = max([len(p) for p in pieces.values() if p] or [1])
        out = []
        for k in range(depth):
            row = list(cells) if k == 0 else [""] * len(cells)
            for c, p in pieces.items():
                if p is not None:
                    row[c] = p[k] if k < len(p) else ""
            parts = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(row)]
            out.append((indent + "  ".join(parts)).rstrip())
        return out

    out = line(headers) + [indent + "  ".join("-" * w for w in widths)]
    for k, r in enumerate(rows):
        out.extend(line(r))
        for text in under[k]:
            out.extend(wrap(text, width, indent + "    "))
    return "\n".join(out)


def bytes_cell(num_bytes: int) -> str:
    """``354,418,688 B (338.00 MiB)``; small values without the IEC part."""
    if num_bytes < 1024:
        return f"{format_int(num_bytes)} B"
    return f"{format_int(num_bytes)} B ({format_bytes(num_bytes)})"


# Input keys JSON keeps under two names for schema stability (the older name stays), shown once in
# text when both say the same: key -> the name it repeats.
_REPEATED_INPUTS = {"deepep_version": "version", "scaleup_is_nvlink": "is_scaleup_nvlink"}


def render_inputs(inputs: dict) -> str:
    """``name=value, ...`` of a report's inputs, without ``None`` values and repeated names."""
    def repeated(k, v):
        twin = _REPEATED_INPUTS.get(k)
        return twin is not None and twin in inputs and inputs[twin] == v
    return ", ".join(f"{k}={value_text(v)}" for k, v in inputs.items() if v is not None and not repeated(k, v))


def value_text(v: object) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return format_int(v)
    return str(v)


_SEVERITY_ORDER = {"error": 0, "warning": 1}


def finding_lines(findings, width: int | None) -> list[str]:
    """The findings as wrapped lines, errors first, then warnings, then notes (each kind in the
    report's order, as the web page shows them; JSON keeps the report's order)."""
    out = []
    for f in sorted(findings, key=lambda f: _SEVERITY_ORDER.get(f.severity, 2)):
        out += wrap(f"{f.severity}: {f.message}  [{f.code}]", width, "    ", "  ")
    return out


def header_lines(label: str, text: str, width: int | None) -> list[str]:
    """``  label   text``, wrapped under the text."""
    return wrap(text, width, " " * len(label), label)


def device_line(device: tuple[str, int]) -> str:
    from ..placement import capacity_label

    return f"of device: shares of {capacity_label(*device)}"


__getattr__, __dir__ = exports(__name__, {"render_report": "report", "render_layout": "report",
                                          "render_compare": "compare", "render_fit": "compare",
                                          "render_sweep": "sweep", "render_engine_report": "engine"})
