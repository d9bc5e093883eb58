"""epbuf.twin.deep_ep as ``deep_ep``: DeepEP's own test assertions (tests/legacy/test_low_latency.py
and test_intranode.py @dd758ca: shapes, dtypes, counts, dequantized values, combine results within
their tolerances) on 2 and 4 gloo ranks, BF16 and FP8 (round_scale, UE8M0), sync, async and hook
modes; the capacity boundaries at upstream's asserts, to the byte; hostile arguments and a dead
peer raising one clear exception on every rank. The rank code is tests/_twin_cases.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent))  # the spawned ranks import _twin_cases from here

from epbuf.runtime.testing import run_gloo  # noqa: E402

LL_CHECKS = {"dispatch": 16, "combine": 32, "hook empty before": 8}


def _import_cases():
    import _twin_cases

    return _twin_cases


def test_two_ranks_pass_deepeps_assertions_and_refuse_on_every_rank():
    cases = _import_cases()
    rank0, rank1 = run_gloo(cases.everything, 2, (16, 512, 8, 3), (48, 256, 8, 3), True, timeout=240,
                            collective_timeout=30, may_exit=(1,))
    assert rank1 is None  # it ran every case, then exited on purpose
    assert rank0["low_latency"] == LL_CHECKS
    assert rank0["intranode"] == {"checked": 24}
    r = rank0["refusals"]
    assert r["smallest"] == r["hint - 128"] == r["nvl smallest"] == "accepted"
    expected = {
        "smallest - 128": "EP_HOST_ASSERT(layout.total_bytes <= num_rdma_bytes) failed (csrc/legacy/buffer.hpp:1503",
        "unaligned": "EP_HOST_ASSERT(num_rdma_bytes % NUM_BUFFER_ALIGNMENT_BYTES == 0",
        "tokens > T": "EP_HOST_ASSERT(x.size(0) == topk_idx.size(0) and x.size(0) <= num_max_dispatch_tokens_per_rank)",
        "float32 x": "EP_HOST_ASSERT(x.dim() == 2 and x.is_contiguous() and x.scalar_type() == torch::kBFloat16)",
        "int32 topk": "EP_HOST_ASSERT(topk_idx.scalar_type() == topk_idx_t)",
        "expert id out of range": "topk_idx in [-1, num_experts) failed",
        "ue8m0 without round_scale": "EP_HOST_ASSERT(round_scale) failed (csrc/legacy/buffer.hpp:1535",
        "nvl smallest - 128": "(hidden + index + top-k + scales) <= num_nvl_bytes) failed (csrc/legacy/buffer.hpp:627",
        "odd num_sms": "EP_HOST_ASSERT(config.num_sms % 2 == 0) failed",
        "rdma bytes without low latency": "EP_HOST_ASSERT(num_ranks > NUM_MAX_NVL_PEERS or low_latency_mode)",
        "num_tokens_per_rank disagrees": "rank 1 of 2: num_tokens_per_rank == is_token_in_rank.sum(0) failed",
    }
    for name, text in expected.items():
        assert r[name].startswith("UpstreamAssertion: rank ") and text in r[name], (name, r[name])
    # a hostile argument on rank 1 only: rank 0 raises rank 1's refusal, word for word
    assert r["tokens > T"].startswith("UpstreamAssertion: rank 1 of 2: ")
    assert "total_bytes = 266,496 B > num_rdma_bytes = 266,368 B" in r["smallest - 128"]
    assert f"{r['nvl need']:,} B > {r['nvl need'] // 128 * 128:,} B" in r["nvl smallest - 128"]
    dead = rank0["dead peer"]
    assert dead["dispatch"].startswith("PeerError: low_latency_dispatch: the agreement did not complete on rank 0")
    assert dead["after"].startswith("PeerError: this twin buffer is unusable")


def test_four_ranks_pass_deepeps_assertions():
    cases = _import_cases()
    results = run_gloo(cases.everything, 4, (8, 512, 16, 2), (16, 128, 16, 2), False, timeout=300,
                       collective_timeout=60)
    for result in results:
        assert result["low_latency"] == LL_CHECKS and result["intranode"] == {"checked": 24}
        assert result["refusals"]["smallest"] == "accepted"
        assert "rank 1 of 4: EP_HOST_ASSERT(x.size(0)" in result["refusals"]["tokens > T"]


def test_the_twin_is_deep_ep_by_name_and_import_epbuf_stays_torch_free():
    code = ("import sys, epbuf, epbuf.twin; assert 'torch' not in sys.modules; "
            "import epbuf.twin.deep_ep as d; d.install(); import deep_ep; from deep_ep import Buffer, Config, "
            "EventOverlap; assert deep_ep.Buffer is d.Buffer and deep_ep.topk_idx_t is __import__('torch').int64; "
            "print(Buffer.get_low_latency_rdma_size_hint(128, 7168, 16, 288), Buffer.get_dispatch_config(8))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[0] == "2146961792"  # LowLatencyLayout(128, 7168, 16, 288).total_bytes + 128
    assert "Config(num_sms=20, num_max_nvl_chunked_send_tokens=6, num_max_nvl_chunked_recv_tokens=256" in out
