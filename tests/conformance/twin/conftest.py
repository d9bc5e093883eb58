"""The twin's conformance suite: the helpers (``_*.py``) are what the spawned ranks import by
name from this folder, not tests (nor doctests)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

collect_ignore_glob = ["_*.py"]
