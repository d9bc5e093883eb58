"""Every shell example in README.md and docs/**/*.md runs, and prints what the page shows.

The convention (``/work/notes/COMMON.md``, written out in ``docs/background/contributing-docs.md``): a
fenced block whose info string is ``console``; a line starting ``$ `` is a command (a trailing ``\\``
continues it on the next line), the lines after it, up to the next ``$ `` or the fence, are its
exact output (standard output, then standard error); a line that is just ``...`` stands for any
number of lines. ``$ echo $?`` prints the exit status of the command before it; a command that exits
with another status than 0 must be followed by one (an example does not fail unseen). Only ``epbuf``
commands run, in-process (``tests/_cli_run.py``), in a fresh temporary directory per block (files
a command writes land there), with ``COLUMNS=100`` (the width text wraps at when standard output is
not a terminal; it also fixes ``--help``'s width, which argparse takes from the terminal) and an
empty Hugging Face cache.

``EPBUF_UPDATE_DOCS=1 python -m pytest tests/test_docs_examples.py`` rewrites the shown outputs in
place with the real ones, keeping each ``...`` elision where it was (the lines around it are
re-anchored on the new output), then passes; review the diff.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from _cli_run import run_cli

ROOT = Path(__file__).resolve().parents[1]
UPDATE = os.environ.get("EPBUF_UPDATE_DOCS") == "1"
ELLIPSIS = "..."
FENCE = re.compile(r"^(?P<indent>[ ]{0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


@dataclass
class Command:
    argv: list[str]
    line: int                              # 0-based line of the "$ " line in the file
    expected: list[str] = field(default_factory=list)
    first_output: int = 0                  # 0-based line of the first expected line


@dataclass
class Block:
    path: Path
    line: int                              # 0-based line of the opening fence
    commands: list[Command]

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line + 1}"


def doc_files() -> list[Path]:
    return [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))


def parse_blocks(path: Path) -> list[Block]:
    """The ``console`` blocks of a Markdown file, with their commands and expected lines."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group("fence"), m.group("info").strip(), i
        i += 1
        body_start = i
        while i < len(lines) and not lines[i].strip().startswith(fence):
            i += 1
        body = lines[body_start:i]
        i += 1
        if info.split()[:1] != ["console"]:
            continue
        commands: list[Command] = []
        j = 0
        while j < len(body):
            text = body[j]
            if text.startswith("$ "):
                line_no = body_start + j
                command = text[2:]
                while command.endswith("\\") and j + 1 < len(body):
                    j += 1
                    command = command[:-1] + " " + body[j].strip()
                commands.append(Command(shlex.split(command), line_no, first_output=body_start + j + 1))
            elif commands:
                commands[-1].expected.append(text)
            else:
                raise AssertionError(f"{path}:{body_start + j + 1}: a console block must start with a '$ ' line")
            j += 1
        blocks.append(Block(path, start, commands))
    return blocks


BLOCKS = [block for path in doc_files() for block in parse_blocks(path)]


def _strip(lines: list[str]) -> list[str]:
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _segments(expected: list[str]) -> list[list[str]]:
    """The runs of shown lines between ``...`` lines (empty runs where ``...`` starts or ends)."""
    segments: list[list[str]] = [[]]
    for line in expected:
        if line.strip() == ELLIPSIS:
            segments.append([])
        else:
            segments[-1].append(line)
    return segments


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected`` with each ``...`` line standing for any number of lines."""
    expected, actual = _strip(expected), _strip(actual)
    segments = _segments(expected)
    if len(segments) == 1:
        return expected == actual
    first, *middle, last = segments
    if actual[:len(first)] != first:
        return False
    pos = len(first)
    end = len(actual) - len(last)
    if end < pos or (last and actual[end:] != last):
        return False
    for segment in middle:  # the earliest match of each run leaves the most room for the rest
        found = next((p for p in range(pos, end - len(segment) + 1) if actual[p:p + len(segment)] == segment), None)
        if found is None:
            return False
        pos = found + len(segment)
    return True


def _locate(segment: list[str], actual: list[str], lo: int, hi: int) -> tuple[int, int]:
    """Where the lines of ``segment`` went in ``actual[lo:hi]``: the span from its first to its last
    line that still matches a shown line (lines only changed count too), as ``(start, end)``."""
    window = actual[lo:hi]
    matcher = difflib.SequenceMatcher(None, segment, window, autojunk=False)
    pairs = [(b.a + k, b.b + k) for b in matcher.get_matching_blocks() for k in range(b.size)]
    if not pairs:  # nothing equal: the window position whose lines look most alike
        scores = [(sum(difflib.SequenceMatcher(None, s, w).quick_ratio() for s, w in zip(segment, window[p:])), -p)
                  for p in range(max(1, len(window) - len(segment) + 1))]
        best = -max(scores)[1]
        return lo + best, lo + min(len(window), best + len(segment))
    (a0, b0), (a1, b1) = pairs[0], pairs[-1]
    start = max(0, b0 - a0)
    end = min(len(window), b1 + (len(segment) - a1))
    return lo + start, lo + end


def rewrite(expected: list[str], actual: list[str]) -> list[str]:
    """``actual`` shown the way ``expected`` shows its output: the same ``...`` elisions, each shown
    run replaced by the real lines it now corresponds to."""
    actual = _strip(actual)
    segments = _segments(_strip(expected))
    if len(segments) == 1:
        return actual
    first, *middle, last = segments
    out: list[str] = []
    pos = 0
    if first:
        start, end = _locate(first, actual, 0, len(actual))
        out += actual[:end]
        pos = end
    tail_start = len(actual)
    if last:
        start, _ = _locate(last, actual, pos, len(actual))
        tail_start = start
    for segment in middle:
        out.append(ELLIPSIS)
        if segment:
            start, end = _locate(segment, actual, pos, tail_start)
            out += actual[start:end]
            pos = end
    out.append(ELLIPSIS)
    out += actual[tail_start:] if last else []
    return out


def run_block(block: Block, capsys) -> list[list[str]]:
    """Each command's output lines (stdout then stderr)."""
    outputs = []
    status = 0
    for i, command in enumerate(block.commands):
        argv = command.argv
        if argv == ["echo", "$?"]:
            outputs.append([str(status)])
            continue
        assert argv[:1] == ["epbuf"], f"{block.id}: only epbuf commands run in console blocks, not {argv[0]!r}"
        status, out, err = run_cli(capsys, *argv[1:])
        shown = i + 1 < len(block.commands) and block.commands[i + 1].argv == ["echo", "$?"]
        assert status == 0 or shown, (f"{block.path.relative_to(ROOT)}:{command.line + 1}: exit status {status} "
                                      f"(show it with '$ echo $?' after the command)\n{out}{err}")
        outputs.append((out + err).splitlines())
    return outputs


@pytest.fixture
def docs_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")
    for name in ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.setenv(name, str(tmp_path / "hf"))
    return tmp_path


#: path -> [(line as parsed, lines added there)]: the blocks were parsed before any rewrite, so a
#: later block of the same file moves by what the earlier rewrites added.
_SHIFTS: dict = {}


def _update(block: Block, outputs: list[list[str]]) -> None:
    """Rewrite the block's shown outputs in its file (later commands first, so line numbers hold)."""
    lines = block.path.read_text(encoding="utf-8").splitlines(keepends=True)
    shifts = _SHIFTS.setdefault(block.path, [])
    moved = sum(delta for line, delta in shifts if line < block.line)
    for command, output in reversed(list(zip(block.commands, outputs))):
        if matches(command.expected, output):
            continue
        new = rewrite(command.expected, output)
        start = command.first_output + moved
        lines[start:start + len(command.expected)] = [line + "\n" for line in new]
        shifts.append((command.first_output, len(new) - len(command.expected)))
    block.path.write_text("".join(lines), encoding="utf-8")


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_the_example_prints_what_the_page_shows(block, capsys, docs_env):
    outputs = run_block(block, capsys)
    if UPDATE:
        _update(block, outputs)
        return
    for command, output in zip(block.commands, outputs):
        if not matches(command.expected, output):
            # The change EPBUF_UPDATE_DOCS=1 would make: the shown lines against the printed ones
            # they correspond to, elisions kept (a diff against the whole output would bury it).
            diff = "\n".join(difflib.unified_diff(_strip(command.expected), rewrite(command.expected, output),
                                                  "shown", "printed", lineterm=""))
            pytest.fail(f"{block.path.relative_to(ROOT)}:{command.line + 1}: $ {shlex.join(command.argv)}\n{diff}")


def test_the_docs_have_examples_and_the_readme_runs_its_own():
    """The examples are found (a parser that finds nothing would pass everything)."""
    readme = [b for b in BLOCKS if b.path.name == "README.md" and b.path.parent == ROOT]
    assert len(readme) >= 4 and len(BLOCKS) >= 20
    assert all(block.commands for block in BLOCKS)


# --- the matcher itself ---------------------------------------------------------------
@pytest.mark.parametrize("expected, actual, ok", [
    (["a", "b"], ["a", "b"], True),
    (["a", "b"], ["a", "b", ""], True),
    (["a", "b"], ["a", "c"], False),
    (["a", "b"], ["a", "b", "c"], False),
    (["...", "c"], ["a", "b", "c"], True),
    (["a", "..."], ["a", "b", "c"], True),
    (["a", "...", "c"], ["a", "c"], True),
    (["a", "...", "c"], ["a", "b", "b", "c"], True),
    (["a", "...", "c", "...", "e"], ["a", "b", "c", "d", "e"], True),
    (["a", "...", "d", "...", "c"], ["a", "b", "c", "d", "e"], False),
    (["...", "x", "..."], ["a", "b"], False),
    (["a", "...", "a"], ["a"], False),
])
def test_elisions_match_any_number_of_lines(expected, actual, ok):
    assert matches(expected, actual) is ok


def test_update_keeps_the_elisions_and_takes_the_new_lines():
    shown = ["head", "...", "Share: 10 %", "...", "tail"]
    printed = ["head2", "x", "y", "Share: 11 %", "z", "tail"]
    new = rewrite(shown, printed)
    assert new.count("...") == 2 and matches(new, printed)
    assert new[:1] == ["head2"] and "Share: 11 %" in new and new[-1] == "tail"
    assert rewrite(["a", "b"], ["c"]) == ["c"]


def test_parse_joins_continued_lines_and_collects_outputs(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```console\n$ epbuf hint \\\n      --ranks 16\nline 1\n...\n$ echo $?\n0\n```\n\n"
                    "```\n$ epbuf not run\n```\n", encoding="utf-8")
    (block,) = parse_blocks(page)
    first, second = block.commands
    assert first.argv == ["epbuf", "hint", "--ranks", "16"] and first.expected == ["line 1", "..."]
    assert first.first_output == 5 and second.argv == ["echo", "$?"] and second.expected == ["0"]
