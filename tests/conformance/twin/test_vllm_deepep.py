"""vLLM 0.33.0's DeepEP prepare/finalize (deepep_ll.py: BF16 and FP8 dispatch, sync and async with
the receive hook; deepep_ht.py: sync and async; both unmodified) run on epbuf.twin.deep_ep
installed as ``deep_ep`` on 2 gloo ranks, with a small MoE layer's experts between prepare and
finalize; the layer's output equals the dense single-process reference (BF16 within BF16
rounding; FP8 dispatch within DeepEP's own combine tolerance). vLLM's compiled ``moe_sum`` is
stood in by _vllm_standins.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")
sys.path.insert(0, str(Path(__file__).parent))  # the spawned ranks import _vllm_ranks from here

from epbuf.runtime.testing import run_gloo  # noqa: E402


def test_deepep_ll_and_ht_prepare_finalize_equal_the_dense_layer():
    import _vllm_ranks

    results = run_gloo(_vllm_ranks.both, 2, timeout=500, collective_timeout=120)
    for r in results:
        assert set(r["ll"]) == {"bf16", "fp8", "bf16 async", "fp8 async"} and set(r["ht"]) == {"sync", "async"}
        assert r["ll"]["bf16"] < 1e-5 and r["ll"]["fp8"] < 2e-3 and r["ht"]["sync"] < 1e-5
