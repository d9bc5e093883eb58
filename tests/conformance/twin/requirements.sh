#!/usr/bin/env bash
# What the twin's conformance suite needs besides torch==2.13.0 and epbuf (run inside the
# suite's venv, .conformance/twin): the engines from the registry, unmodified, without their
# GPU dependencies (--no-deps), plus the pure-Python packages the imported modules need
# (found by importing deepep_ll.py / deepep_ht.py / fused_a2a.py until nothing was missing).
# torch stays pinned: every install runs under the constraint torch==2.13.0.
set -euo pipefail
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
echo "torch==2.13.0" > "$constraints"
pip() { python -m pip install -q -c "$constraints" "$@"; }
pip "numpy>=1.24" "pytest>=7" "hypothesis>=6.80"
# Megatron-LM's core (the flex dispatcher's fused_a2a): pure Python.
pip --no-deps "megatron-core==0.16.1"
# vLLM: the wheel without its CUDA stack; the modules its fused-MoE prepare/finalize import.
pip --no-deps "vllm==0.33.0"
pip psutil pyzmq urllib3 regex pydantic cbor2 "transformers>=5.16.1,<5.21.0" aiohttp requests openai \
    openai-harmony pillow pybase64 cachetools msgspec cloudpickle uvloop py-cpuinfo prometheus_client \
    "xgrammar==0.2.8" fastapi partial-json-parser llguidance einops
