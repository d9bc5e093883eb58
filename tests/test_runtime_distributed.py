"""epbuf.runtime.Buffer on real gloo process groups (2 and 4 ranks on loopback, spawned here)
against a dense single-process reference written like DeepEP's refs.py; a refusing, a dead
and an absent peer give clear errors, never a hang.

Each spawn costs a torch import per process, so one spawn runs many cases.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("numpy")

sys.path.insert(0, str(Path(__file__).parent))  # the spawned ranks import _runtime_cases from here

from _moe_reference import Case  # noqa: E402
from _moe_reference import refuse_then_die, run_cases, time_out  # noqa: E402

from epbuf.runtime.testing import run_gloo  # noqa: E402

T = 24  # num_max_tokens_per_rank
# A rank's records to itself: written in place (threshold 0) and sent through the exchange (never
# in place); the default threshold picks one of the two by size.
BYPASS = (0, 1 << 62)

CASES_2 = [
    Case("2r bf16 h7168 top8, ranks with 17 and 0 tokens", 7168, 8, 16, [17, 0], T, fp8=False, seed=1),
    Case("2r fp8 h7168 top8, full rank", 7168, 8, 16, [T, 5], T, fp8=True, seed=2),
    Case("2r bf16 h2880 top1, no weights", 2880, 1, 8, [3, 20], T, fp8=False, weights=False, seed=3),
    Case("2r fp8 h2880 top1, 2-D y", 2880, 1, 8, [0, 11], T, fp8=True, y_2d=True, seed=4),
    Case("2r fp8 h2880 top8, half the slots -1", 2880, 8, 32, [9, 14], T, fp8=True, minus_one=0.5, seed=5),
    Case("2r bf16 h7168 top8, 2-D y", 7168, 8, 16, [12, 7], T, fp8=False, y_2d=True, seed=6),
]
CASES_4 = [
    Case("4r fp8 h7168 top8, a rank with 0 tokens", 7168, 8, 32, [5, 0, T, 13], T, fp8=True, seed=11),
    Case("4r bf16 h2880 top1", 2880, 1, 16, [T, 3, 0, 8], T, fp8=False, seed=12),
    Case("4r bf16 h7168 top8, 2-D y, no weights", 7168, 8, 32, [7, 9, 2, 0], T, fp8=False, weights=False,
         y_2d=True, seed=13),
]


def test_two_ranks_equal_the_dense_reference():
    """Every output of dispatch (tokens, SF, local top-k ids, weights, source indices,
    counts) and combine (BF16 sums, weights) is bit-identical to the reference, whether a
    rank's records to itself travel through the exchange or are written in place."""
    problems = run_gloo(run_cases, 2, CASES_2, BYPASS, timeout=120, collective_timeout=60)
    assert problems == [[], []]


def test_four_ranks_equal_the_dense_reference():
    problems = run_gloo(run_cases, 4, CASES_4, BYPASS, timeout=150, collective_timeout=60)
    assert problems == [[], [], [], []]


def test_refusing_and_dead_peers_raise_clear_errors():
    case = Case("refuse", 256, 2, 4, [3, 3], 4, fp8=False)
    rank0, rank1 = run_gloo(refuse_then_die, 2, case, timeout=90, collective_timeout=30, may_exit=(1,))
    assert rank1 is None  # it exited on purpose
    assert rank0["refusal"].startswith("PeerError: dispatch: rank(s) [1] refused their input")
    # issue 21: a peer that died at once is named as such, not as a timeout
    assert rank0["dead peer"].startswith("PeerError: dispatch: the count exchange failed on rank 0 after")
    assert "before the 20 s timeout: a peer died or left the group" in rank0["dead peer"]
    assert "did not complete within" not in rank0["dead peer"]
    assert rank0["dead peer seconds"] < 15


def test_a_hung_peer_does_not_keep_the_survivor_alive(tmp_path):
    """Issue 21: after the PeerError the survivor's process exited only when the process group's
    timeout (here 30 s) had passed; now its collectives run on a group with the Buffer's timeout."""
    import multiprocessing
    import time

    from _moe_reference import hang_survivor

    case = Case("hang", 256, 2, 4, [3, 3], 4, fp8=False)
    store, report = str(tmp_path / "store"), str(tmp_path / "report")
    context = multiprocessing.get_context("spawn")
    ranks = [context.Process(target=hang_survivor, args=(r, store, case, report), daemon=True) for r in range(2)]
    for p in ranks:
        p.start()
    try:
        ranks[0].join(timeout=90)
        exited = time.time()
        assert ranks[0].exitcode == 0
        with open(report) as f:
            error_time, message = f.read().split("\n", 1)
        assert message.startswith("PeerError: dispatch: the count exchange did not complete within 1.5 s")
        assert exited - float(error_time) < 12  # not the process group's 30 s
    finally:
        for p in ranks:
            if p.is_alive():
                p.kill()
            p.join(timeout=10)


def test_an_absent_peer_times_out(tmp_path):
    case = Case("timeout", 256, 2, 4, [3, 3], 4, fp8=False)
    rank0, _ = run_gloo(time_out, 2, case, str(tmp_path / "done"), timeout=90, collective_timeout=30)
    assert rank0["timeout"].startswith("PeerError: dispatch: the count exchange did not complete within 1.5 s")
    assert 1.4 < rank0["seconds"] < 30  # the timeout, not the process group's 30 s
    assert rank0["after"].startswith("PeerError: this Buffer is unusable")
