"""The conformance tier (``.ci/conformance``): each suite folder runs an engine's own code on a corpus
of launch lines and compares the library calls it captures with ``epbuf engine NAME --json``.

Shared here: :class:`Tally`, which a suite fills line by line (``tally.compare(line, name, engine,
epbuf)``) and which, at the end of the session, is written to ``.conformance/results/<suite>.json`` as
``{"lines": N, "arguments": M, "differ": K, "exceptions": [...]}``. A difference listed in the suite's
exception table (``EXCEPTIONS``: ``(line id, argument) -> reason``) is counted in ``exceptions``, not
in ``differ``. The tier only runs with ``EPBUF_CONFORMANCE=1`` (``tests/conftest.py`` skips the folder
otherwise).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / ".conformance" / "results"
# Each suite's helper modules (``vllm_corpus.py`` ...) import by name; names start with the suite's.
for _suite in sorted(p for p in Path(__file__).parent.iterdir() if p.is_dir() and not p.name.startswith("_")):
    sys.path.insert(0, str(_suite))


class Tally:
    def __init__(self, suite: str, exceptions: dict) -> None:
        self.suite = suite
        self.table = exceptions
        self.lines: set[str] = set()
        self.arguments = 0
        self.differ: list[dict] = []
        self.excepted: list[dict] = []

    def compare(self, line: str, name: str, engine: object, epbuf: object) -> bool:
        """Count one argument of ``line``; ``True`` when it agrees or is a listed exception."""
        self.lines.add(line)
        self.arguments += 1
        if engine == epbuf:
            return True
        entry = {"line": line, "argument": name, "engine": engine, "epbuf": epbuf}
        reason = self.table.get((line, name))
        if reason is not None:
            self.excepted.append({**entry, "reason": reason})
            return True
        self.differ.append(entry)
        return False

    def stale(self) -> list[str]:
        """The exception entries of lines compared here that no longer differ: each must go."""
        used = {(e["line"], e["argument"]) for e in self.excepted}
        return [f"{line}: {argument}: listed in EXCEPTIONS but agrees now; remove the entry"
                for line, argument in self.table if line in self.lines and (line, argument) not in used]

    def write(self) -> None:
        RESULTS.mkdir(parents=True, exist_ok=True)
        data = {"lines": len(self.lines), "arguments": self.arguments, "differ": len(self.differ),
                "exceptions": self.excepted, "differences": self.differ}
        path = RESULTS / f"{self.suite}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, default=str))
        os.replace(tmp, path)


_TALLIES: list[Tally] = []


@pytest.fixture(scope="session")
def tally_for():
    def make(suite: str, exceptions: dict) -> Tally:
        tally = Tally(suite, exceptions)
        _TALLIES.append(tally)
        return tally

    return make


def pytest_sessionfinish(session, exitstatus):
    for tally in _TALLIES:
        tally.write()


def pytest_configure(config):
    # The engines' own imports warn (deprecations in torch, transformers, pydantic); epbuf's tests keep
    # filterwarnings=error, the tier does not judge the engines' warnings.
    for category in ("DeprecationWarning", "FutureWarning", "UserWarning", "PendingDeprecationWarning"):
        config.addinivalue_line("filterwarnings", f"ignore::{category}")
