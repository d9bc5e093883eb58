"""Test-wide settings.

Hypothesis' per-example deadline measures wall time, which on a shared two-core machine
says more about the neighbours than about epbuf (no timing assertions in tests: speed is
measured in benchmarks/). The examples themselves stay as many as each test asks for.
"""

import os
import sys
from pathlib import Path

from hypothesis import settings

# The tests' shared helpers (_cli_run.py, _moe_reference.py) import by name from this folder.
sys.path.insert(0, str(Path(__file__).parent))

settings.register_profile("epbuf", deadline=None)
settings.load_profile("epbuf")

# tests/conformance/ runs real engines (installed by each suite's requirements.sh into its own
# venv, by .ci/conformance); the main suite skips it unless EPBUF_CONFORMANCE=1.
collect_ignore_glob = [] if os.environ.get("EPBUF_CONFORMANCE") == "1" else ["conformance/*"]
