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


def test_round_trip_bit_exact():
    case = _case(tokens=(6, 8))
    results = run_gloo(_cases().round_trips, 2, case, (1, 4), timeout=60)
    hint = calculate_buffer_size(2, 8, 128, 4, False)
    for rank, alignment, got in ((r, a, got) for r, per_rank in enumerate(results) for a, got in zip((1, 4), per_rank)):
        assert got["problems"] == [], (rank, alignment, got["problems"])
        assert got["num_bytes"] == hint
        assert all(n % alignment == 0 for n in got["per_expert"])
        assert got["expanded"] == sum(got["per_expert"]) > 0


def test_hostile_arguments_and_capacity_boundary():
    """Refusals on both ranks; the hint is epbuf.backends.ascend.calculate_buffer_size; dispatch refuses
    the largest 2 MiB multiple below get_dispatch_buffer_size and runs at the smallest one at or above it."""
    assert calculate_buffer_size(8, 4096, 7168, 8, False) >= get_dispatch_buffer_size(4096, 7168, 0, 8, 2, 8)
    both = run_gloo(_cases().hostile_and_boundary, 2, _case(), _case(hidden=2048, max_tokens=256), timeout=60)
    results = [b[0] for b in both]
    for limit in (b[1] for b in both):
        assert limit["below"].startswith("UpstreamAssertion") and "get_dispatch_buffer_size" in limit["below"]
        assert limit["at"] == "ok", limit["at"]
        assert limit["hint"] == limit["hint_backend"]
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

