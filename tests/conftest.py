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

# The conformance tier (tests/conformance) runs engines' own code in its own environment; `.ci/conformance`
# runs it with EPBUF_CONFORMANCE=1.
collect_ignore_glob = [] if os.environ.get("EPBUF_CONFORMANCE") == "1" else ["conformance/*"]

settings.register_profile("epbuf", deadline=None)
settings.load_profile("epbuf")


import pytest  # noqa: E402 - the fixture below needs it; the settings above do not

from _devices import make_device_nodes  # noqa: E402 - tests/ is on the path from here on


@pytest.fixture
def device_nodes(tmp_path):
    """``{"null": path, "full": path, ...}`` of :func:`make_device_nodes` in ``tmp_path/dev``;
    skips the test where this process cannot make and open device nodes."""
    nodes = make_device_nodes(tmp_path / "dev")
    if not {"null", "full"} <= set(nodes):
        pytest.skip("cannot make device nodes here (needs CAP_MKNOD and a mount without nodev)")
    return nodes
