"""``import epbuf`` and the planning CLI use the standard library only."""

from __future__ import annotations

import subprocess
import sys

PROBE = r"""
import sys, io, contextlib
import epbuf
from epbuf.cli import main
for argv in (["hint"], ["hint", "--json"], ["layout"]):
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0, argv
third_party = sorted(
    name for name in sys.modules
    if name.split(".")[0] not in sys.stdlib_module_names and name.split(".")[0] not in ("epbuf", "__main__")
)
print(",".join(third_party))
"""


def test_core_imports_only_the_standard_library():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.strip()
    # site-packages hooks (e.g. a sitecustomize) may preload modules; only ours are under test
    offenders = [m for m in out.split(",") if m and m.split(".")[0] in ("numpy", "matplotlib", "torch", "hypothesis")]
    assert offenders == [], offenders
    assert "torch" not in out and "numpy" not in out
