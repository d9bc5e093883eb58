"""epbuf.twin.pplx_kernels as ``pplx_kernels``: pplx-kernels' own test assertions
(tests/test_all_to_all.py @12cecfd: per-expert counts, the sets of dispatched tokens and scales,
the combine's weighted sum by ``assert_close``) on 2 and 4 gloo ranks, internode and intranode,
BF16, FP16 and FP8 with scales, DP groups of 1 and 2 ranks, the split send/receive halves; the
constructor's asserts and hostile call arguments raising one clear exception on every rank. The
rank code is tests/_twin_pplx_cases.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent))  # the spawned ranks import _twin_pplx_cases from here

from epbuf.runtime.testing import run_gloo  # noqa: E402

SMALL_MOE = (8, 3, 512, 10)  # pplx's small_moe: num_experts, experts_per_token, hidden_dim, max_num_tokens
KINDS = [f"{kernel} {a} -> {b}" for kernel in ("internode", "intranode")
         for a, b in (("torch.bfloat16", "torch.bfloat16"), ("torch.float8_e4m3fn", "torch.float16"),
                      ("torch.float16", "torch.bfloat16"))]


def _cases():
    import _twin_pplx_cases

    return _twin_pplx_cases


def _expected_checked(num_ranks: int, dp_size: int, key: str) -> list[int]:
    """The tokens each rank's experts receive in pplx's test data for case ``key`` (the same draws
    as the ranks make: FP8 data draws differently, so its routing differs)."""
    import torch

    dtype = torch.float8_e4m3fn if "float8" in key or "split" in key else torch.bfloat16

    cases = _cases()
    num_experts, experts_per_token, hidden, max_tokens = SMALL_MOE
    rng = torch.Generator()
    rng.manual_seed(123)
    data = [cases.RankTestData(num_experts, experts_per_token, hidden, max_tokens, dtype, rng, False)
            for _ in range(num_ranks // dp_size)]
    per_expert = torch.bincount(torch.cat([d.indices.reshape(-1).long() for d in data]), minlength=num_experts)
    return per_expert.view(num_ranks, -1).sum(1).tolist()


def test_two_ranks_pass_pplxs_assertions_and_refuse_on_every_rank():
    results = run_gloo(_cases().everything, 2, (1,), SMALL_MOE, True, timeout=240, collective_timeout=30)
    for rank, result in enumerate(results):
        checked = result["checked"]
        assert sorted(checked) == sorted([f"dp1 {k}" for k in KINDS] + ["dp1 split"])
        for key, value in checked.items():
            assert value == _expected_checked(2, 1, key)[rank] > 0, key
    r = results[0]["refusals"]
    untimed = [{k: v.rsplit(" [", 1)[0] for k, v in result["refusals"].items()} for result in results]
    assert untimed[0] == untimed[1]  # the same exception, word for word, on every rank
    assert r["accepted"] == r["combine accepted"] == r["per-token scales"] == "accepted"
    expected = {
        "dp_size does not divide": "rank 0 of 2: assert world_size % dp_size == 0 failed "
                                   "(src/pplx_kernels/all_to_all.py",
        "one DP group": "assert world_size // dp_size > 1 failed",
        "hidden bytes % 16": 'PPLX_ASSERT(hiddenDimBytes % 16 == 0, "invalid hidden dim bytes") failed '
                             "(csrc/all_to_all/all_to_all.cpp:32 @12cecfd)",
        "scale bytes % 16": "PPLX_ASSERT(hiddenDimScaleBytes % 16 == 0",
        "no local experts": 'PPLX_ASSERT(numLocalExperts != 0, "numLocalExperts is 0") failed '
                            "(csrc/all_to_all/all_to_all.cpp:37 @12cecfd)",
        "scale bytes > hidden bytes": "PPLX_ASSERT(hiddenDimScaleBytes <= hiddenDimBytes",
        "wrong rank": "rank and world_size are the group's failed",
        "ranks disagree": "the ranks disagree on max_num_tokens",
        "tokens > max_num_tokens": "rank 1 of 2: PPLX_DEVICE_ASSERT(numSendTokens <= maxNumTokens) failed "
                                   "(csrc/all_to_all/intranode_dispatch.cu:65 @12cecfd",
        "int64 indices": 'rank 1 of 2: TORCH_CHECK(indices.scalar_type() == at::kUInt32, "indices must be of type '
                         'UInt32") failed (csrc/bindings/all_to_all_ops.cpp:148',
        "expert id out of range": "rank 1 of 2: indices < num_experts",
        "expert twice": "rank 1 of 2: each token's experts are distinct failed",
        "scales without scale bytes": "assert out_expert_x_scale is None; assert dp_x_scale is None",
        "out_expert_x too short": "rank 1 of 2: out_expert_x.size(1) >= the tokens a local expert receives failed",
        "float32 bound_m": "rank 1 of 2: TORCH_CHECK(boundM->scalar_type() == at::kUInt32",
        "invalid split mode": 'TORCH_CHECK(false, "Invalid split mode") failed',
        "combine float32 out": 'rank 1 of 2: TORCH_CHECK(false, "Unsupported dtype for outTokens")',
        "combine bound_m differs": "AllToAll.combine: indices or bound_m differ from the dispatch's",
        "after destroy": "assert self._ptr is not None failed",
        "num_experts % world_size": "num_experts % world_size == 0 failed (csrc/all_to_all/all_to_all.cpp:21 @12cecfd",
        "intranode shared memory": "dispatch dynamic shared memory (bytes) <= 49152 failed "
                                   "(csrc/all_to_all/intranode_dispatch.cu:311-312 @12cecfd",
    }
    for name, text in expected.items():
        assert r[name].startswith("UpstreamAssertion: ") and text in r[name], (name, r[name])
    assert "numLocalExperts (ceil(num_experts / world_size)): 0 >= 1 is false" in r["no local experts"]
    assert "9 tokens (bound_m or indices.size(0)) > max_num_tokens 8" in r["tokens > max_num_tokens"]


def test_four_ranks_with_dp_groups_pass_pplxs_assertions():
    """pplx's test_all_to_all_4_gpu: 4 ranks, DP groups of 2 (and of 1)."""
    results = run_gloo(_cases().everything, 4, (2, 1), SMALL_MOE, False, timeout=300, collective_timeout=60)
    assert len(results[0]["checked"]) == 2 * (len(KINDS) + 1)
    for key in results[0]["checked"]:
        expected = _expected_checked(4, int(key[2]), key)
        assert [result["checked"][key] for result in results] == expected, key


def test_the_twin_is_pplx_kernels_by_name_and_import_epbuf_stays_torch_free():
    code = ("import sys, epbuf, epbuf.twin; assert 'torch' not in sys.modules; "
            "import epbuf.twin.pplx_kernels as p; p.install(); import pplx_kernels; "
            "from pplx_kernels import AllToAll; from pplx_kernels.all_to_all import AllToAll as A; "
            "from pplx_kernels.nvshmem import nvshmem_init, nvshmem_alloc_empty_unique_id; "
            "assert AllToAll is A is p.AllToAll; "
            "print(AllToAll.internode.__name__, nvshmem_alloc_empty_unique_id().shape)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["internode", "torch.Size([128])"]
