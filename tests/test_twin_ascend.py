"""epbuf.twin.deep_ep_ascend as ``deep_ep`` (DeepEP-Ascend's ``EPBuffer``): the expanded dispatch and the
combine bit for bit against the dense refs.py-style reference (tests/_moe_reference.py) on 2 gloo ranks,
with and without ``expert_alignment`` padding; the size hint against epbuf.backends.ascend; the capacity
boundary (2 MiB steps around ``get_dispatch_buffer_size``); upstream's asserts and hostile arguments raising
on every rank. The rank code is tests/_twin_ascend_cases.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent))  # the spawned ranks import _twin_ascend_cases from here

from epbuf.backends.ascend import calculate_buffer_size, get_dispatch_buffer_size  # noqa: E402
from epbuf.runtime.testing import run_gloo  # noqa: E402


def _case(name="bf16", hidden=128, num_topk=4, num_experts=8, tokens=(5, 7), max_tokens=8):
    from _moe_reference import Case

    return Case(name, hidden, num_topk, num_experts, tokens, max_tokens, fp8=False)


def _cases():
    import _twin_ascend_cases

    return _twin_ascend_cases


@pytest.mark.parametrize("alignment", [1, 4])
def test_round_trip_bit_exact(alignment):
    case = _case(tokens=(6, 8))
    results = run_gloo(_cases().round_trip, 2, case, alignment, timeout=60)
    hint = calculate_buffer_size(2, 8, 128, 4, False)
    for rank, got in enumerate(results):
        assert got["problems"] == [], (rank, got["problems"])
        assert got["num_bytes"] == hint
        assert all(n % alignment == 0 for n in got["per_expert"])
        assert got["expanded"] == sum(got["per_expert"]) > 0


def test_hostile_arguments_refuse_on_every_rank():
    case = _case()
    results = run_gloo(_cases().hostile, 2, case, timeout=60)
    for rank, got in enumerate(results):
        assert "allow_multiple_reduction" in got["multiple_reduction"] and "AssertionError" not in got["qps"]
        assert got["multiple_reduction"].startswith("UpstreamAssertion")
        assert got["misaligned"].startswith("UpstreamAssertion") and "2,097,152" in got["misaligned"]
        assert got["qps"].startswith("NotImplementedError")
        assert got["timeout"].startswith("UpstreamAssertion")
        assert "do_expand=True" in got["no_expand"]
        assert "num_experts % context->num_ranks" in got["experts"]
        assert "kInt64" in got["int32_idx"]
        assert "kBFloat16" in got["fp16"]
        assert "num_tokens <= num_max_tokens_per_rank" in got["too_many_tokens"] and "9 > 8" in got["too_many_tokens"]
        need = get_dispatch_buffer_size(8, 128, 0, 4, 2, 2)
        assert "get_dispatch_buffer_size" in got["small_buffer"] and f"{need:,} > 0" in got["small_buffer"]
        assert got["peer"] != "no error", rank  # rank 0's bad expert id: both ranks raise
        assert got["ok_after"] == 128
        assert "destroyed" in got["destroyed"]
        assert got["hidden_64"].startswith("UpstreamAssertion") and "hidden % 128" in got["hidden_64"]
    assert "topk_idx" in results[0]["peer"] and "PeerError" in results[1]["peer"]


def test_capacity_boundary_and_hint():
    """The hint is epbuf.backends.ascend.calculate_buffer_size; dispatch refuses the largest 2 MiB
    multiple below get_dispatch_buffer_size and runs at the smallest one at or above it."""
    assert calculate_buffer_size(8, 4096, 7168, 8, False) >= get_dispatch_buffer_size(4096, 7168, 0, 8, 2, 8)
    results = run_gloo(_cases().boundary, 2, _case(hidden=2048, max_tokens=256), timeout=60)
    for got in results:
        assert got["below"].startswith("UpstreamAssertion") and "get_dispatch_buffer_size" in got["below"]
        assert got["at"] == "ok", got["at"]
        assert got["hint"] == got["hint_backend"]
