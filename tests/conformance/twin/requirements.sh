#!/usr/bin/env bash
# What the twin's conformance suite needs besides torch==2.13.0 and epbuf (run inside the
# suite's venv, .conformance/twin): the engines from the registry, unmodified, without their
# GPU dependencies (--no-deps), plus the pure-Python packages their imported modules need.
set -euo pipefail
python -m pip install -q "numpy>=1.24" "pytest>=7" "hypothesis>=6.80"
# Megatron-LM's core (the flex dispatcher's fused_a2a): pure Python.
python -m pip install -q --no-deps "megatron-core==0.16.1"
