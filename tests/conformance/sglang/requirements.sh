#!/usr/bin/env bash
# SGLang 0.5.23 for tests/conformance/sglang, in the activated venv that already holds torch==2.13.0 (CPU)
# and epbuf: the wheel without its CUDA pins (--no-deps), then the pure-Python packages its import path
# needs, pinned. Compiled GPU packages (sgl_kernel, deep_gemm, flashinfer, aiter, ...) are stood in for
# by epbuf.engines.installed._sglang_standins. Where SGLang pins a package its own pin is used.
set -euo pipefail
pip install -q --no-deps sglang==0.5.23
pip install -q transformers==5.19.0 apache-tvm-ffi==0.1.11 compressed-tensors==0.18.0 orjson==3.13.0 \
    psutil==7.2.2 pybase64==1.5.1 requests==2.34.2 triton==3.9.0 starlette==1.10.0 msgspec==0.23.0 \
    pydantic==2.14.4 pyzmq==27.3.0 tqdm==4.70.1 ipython==9.19.1 aiohttp==3.14.5 dill==0.4.1 \
    sentencepiece==0.2.1 gguf==0.19.0 einops==0.8.2 openai==2.8.0 partial-json-parser==0.2.1.1.post7 tokenizers==0.23.2 \
    python-dateutil==2.9.0.post0
