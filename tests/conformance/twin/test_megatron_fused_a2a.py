"""Megatron-LM's DeepEP flex dispatcher (megatron-core 0.16.1, ``fused_a2a.fused_dispatch`` /
``fused_combine``, forward and backward, unmodified) runs on epbuf.twin.deep_ep installed as
``deep_ep`` on 2 gloo ranks; a small MoE layer's output and gradients equal the dense
single-process reference (within BF16 rounding: the tokens travel in BF16 as on the GPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("megatron.core")
sys.path.insert(0, str(Path(__file__).parent))  # the spawned ranks import _megatron_ranks from here

from epbuf.runtime.testing import run_gloo  # noqa: E402


@pytest.mark.parametrize("async_finish", [False, True])
def test_fused_dispatch_and_combine_equal_the_dense_layer(async_finish):
    import _megatron_ranks

    results = run_gloo(_megatron_ranks.megatron_layer, 2, 24, async_finish, timeout=300, collective_timeout=60)
    for r in results:
        assert r["dtype"] == "torch.bfloat16" and r["received"] > 0
        assert r["max |out - ref|"] < 2e-2 and r["max |dx - ref|"] < 2e-2
