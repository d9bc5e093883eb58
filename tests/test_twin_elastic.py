"""epbuf.twin.deep_ep.ElasticBuffer (DeepEP V2): DeepEP's tests/elastic/test_ep.py @dd758ca
reference assertions (expert counts, scale-up psums, bitwise dispatched data, cached dispatch,
bitwise combine with bias and top-k weights) on 2 gloo ranks, BF16 and FP8; hostile arguments
raise one exception, word for word the same, on every rank. Rank code: tests/_twin_elastic_cases.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent))

from epbuf.backends.deepep_v2.hint import calculate_buffer_size  # noqa: E402
from epbuf.runtime.testing import run_gloo  # noqa: E402


def test_two_ranks_pass_test_eps_assertions_and_refuse_on_every_rank():
    import _twin_elastic_cases as cases

    results = run_gloo(cases.everything, 2, timeout=240, collective_timeout=30)
    for result in results:
        for kind, fp8 in (("bf16", False), ("bf16 aligned", False), ("fp8", True)):
            assert result[kind]["received"] > 0
            hint = calculate_buffer_size(2, 2, cases.NMAX, cases.HIDDEN, cases.TOPK, fp8, True, True)
            assert result[kind]["hint"] == result[kind]["num_bytes"] == hint
    refusals = [result["refusals"] for result in results]
    assert refusals[0] == refusals[1]  # the same exception on every rank
    r = refusals[0]
    assert "no refusal" not in r.values(), r
    assert r["too many tokens"].startswith("rank 1 of 2: num_tokens <= num_max_tokens_per_rank failed")
    assert "17 tokens" in r["too many tokens"]
    assert "num_experts % num_ranks == 0 failed" in r["num_experts"] and "num_experts = 9" in r["num_experts"]
    assert "the buffer holds the dispatch" in r["small buffer"] and "1048576 B" in r["small buffer"]
    assert "-1 <= topk_idx < num_experts" in r["expert out of range"]
    assert "BF16" in r["float x"] and "expanding layout" in r["expand"]
    assert "disagree" in r["hidden differs"]
    assert "assert topk_idx is None" in r["cached with topk_idx"]
    assert "EPHandle" in r["combine handle"] and "num_recv_tokens" in r["combine rows"]
    assert "calculate_elastic_buffer_size" in r["hint"]
    assert "Allocated QPs are not enough" in r["qps"] and "1000 > 65" in r["qps"]

