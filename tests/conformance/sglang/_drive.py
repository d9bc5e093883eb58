"""Run in a subprocess of the conformance venv: resolve each launch line of a JSON list read from stdin
(``[{"argv": [...], "env": {...}}, ...]``) through the installed SGLang on one device (argv[1]) and
print the results as one JSON list (one process per device: SGLang caches the platform it found)."""

import json
import sys

from epbuf.engines.installed import resolve

if __name__ == "__main__":
    lines = json.load(sys.stdin)
    out = [resolve("sglang", line["argv"], line["env"], device=sys.argv[1]) for line in lines]
    print("@@RESULT@@" + json.dumps(out, default=str))
