#!/usr/bin/env bash
# megatron-core 0.16.1 (the newest the registry serves) for tests/conformance/megatron, in the activated venv
# that already holds torch==2.13.0 (CPU) and epbuf. deep_ep is stood in for by
# epbuf.engines.installed._sglang_standins (its Buffer records the call).
set -euo pipefail
pip install -q --no-deps megatron-core==0.16.1
pip install -q numpy==2.4.6 packaging==26.0
