"""epbuf.twin.deep_ep internode normal mode (more than 8 ranks): DeepEP's
tests/legacy/test_internode.py @dd758ca assertions on 16 gloo ranks, the smallest internode
group upstream allows (``num_ranks > NUM_MAX_NVL_PEERS`` and a multiple of 8, buffer.hpp:114,
116; 2 nodes x 8), with the handle's internode fields and refusals on every rank. The rank code
is tests/_twin_internode_cases.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent))  # the spawned ranks import the cases from here

from epbuf.runtime.testing import run_gloo  # noqa: E402


def test_sixteen_ranks_two_nodes_pass_deepeps_internode_assertions():
    import _twin_internode_cases as cases

    results = run_gloo(cases.internode, 16, 16, 128, 32, 4, timeout=300, collective_timeout=120)
    for rank, result in enumerate(results):
        assert result["checked"] == 16
        r = result["refusals"]
        assert r["worst tokens"].startswith("AssertionError: Internode dispatch does not support `num_worst_tokens")
        assert r["rdma counts shape"].startswith("UpstreamAssertion: rank 1 of 16: EP_HOST_ASSERT("
                                                 "num_tokens_per_rdma_rank->size(0) == num_rdma_ranks)"), r
        assert r["nvl need"] == "accepted"
        assert "EP_HOST_ASSERT((nvl_clean_meta.first + nvl_clean_meta.second) * sizeof(int) <= num_nvl_bytes)" \
            in r["nvl need - 128"] and r["nvl need - 128"].startswith("UpstreamAssertion: rank "), r
        assert "EP_HOST_ASSERT(config.num_sms % 2 == 0)" in r["odd num_sms"]
