#!/usr/bin/env bash
# The vLLM suite's environment, run inside the activated fresh venv .conformance/vllm (torch 2.13.0 CPU and
# epbuf already installed): vLLM 0.33.0 itself without its CUDA dependencies, and the pure-Python packages
# (plus tokenizers, sentencepiece, pyzmq, xgrammar, llguidance wheels) its import path for
# EngineArgs.create_engine_config and the all2all managers needs.
set -euo pipefail
python -m pip install -q --no-deps 'vllm==0.33.0' 'compressed-tensors==0.17.0'
python -m pip install -q 'transformers==5.20.2' 'huggingface_hub==2.4.0' 'tokenizers==0.23.3' \
  'pydantic==2.14.4' 'cachetools==8.0.3' 'psutil==7.2.2' 'regex==2026.12.2' 'msgspec==0.23.0' \
  'pyzmq==27.3.0' 'cloudpickle==3.1.3' 'einops==0.8.2' 'blake3==1.0.11' 'py-cpuinfo==9.0.0' \
  'requests==2.34.2' 'tqdm==4.70.1' 'PyYAML==6.0.4' 'sentencepiece==0.2.3' 'openai==3.63.0' \
  'partial-json-parser==0.2.1.1.post7' 'cbor2==6.3.0' 'aiohttp==3.14.5' 'openai-harmony==0.0.8' 'pybase64==1.5.1' \
  'uvloop==0.23.0' 'prometheus_client==0.26.0' 'xgrammar==0.2.9' 'fastapi==0.165.0' 'llguidance==1.9.1' 'loguru==0.7.3' 'uvicorn==0.55.0' \
  'watchfiles==1.3.0' 'orjson==3.13.0'
