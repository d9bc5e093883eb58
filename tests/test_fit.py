"""``epbuf fit``: exact largest token count / EP size within a budget."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from epbuf import Plan
from epbuf.backends import ascend
from epbuf.cli import main
from epbuf.fit import fit_ranks, fit_tokens
from epbuf.units import GiB, MiB


def ascend_total(ranks: int, tokens: int, hidden: int, topk: int, fp8: bool) -> int:
    """Total device allocation on Ascend: the hint plus the 2 MiB EPSignals workspace."""
    return ascend.calculate_buffer_size(ranks, tokens, hidden, topk, fp8) + 2 * MiB


def test_fit_tokens_fills_one_gib_exactly():
    plan = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=1)
    r = fit_tokens(plan, "ascend", GiB)
    assert (r.value, r.binding) == (8648, "budget")
    assert ascend_total(16, 8648, 7168, 8, True) == GiB
    assert ascend_total(16, 8649, 7168, 8, True) > GiB
    assert r.next_num_bytes == ascend_total(16, 8649, 7168, 8, True)


def test_fit_tokens_limit_binds_before_budget():
    """24-bit reduction value: tokens x ranks <= 2^24 - 1 binds before a huge budget."""
    plan = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=1)
    r = fit_tokens(plan, "ascend", 1 << 50)
    assert r.value == (2**24 - 1) // 16
    assert r.binding == "tokens x ranks (24-bit reduction value)"


def test_nothing_fits():
    plan = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=1)
    r = fit_tokens(plan, "ascend", MiB)
    assert r.value is None and "nothing fits" in r.reason


def test_fit_ranks_skips_invalid_rank_counts():
    plan = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=8, num_max_tokens_per_rank=4096)
    r = fit_ranks(plan, "ascend", 4 * GiB)
    assert r.value == 128 and r.binding == "budget"
    assert ascend_total(128, 4096, 7168, 8, True) <= 4 * GiB < ascend_total(256, 4096, 7168, 8, True)


@settings(max_examples=40, deadline=None)
@given(hidden=st.sampled_from([2048, 4096, 5120, 7168]), topk=st.integers(1, 32), ranks=st.sampled_from([1, 2, 4, 8, 16, 64]),
       fp8=st.booleans(), budget=st.integers(4 * MiB, 64 * GiB))
def test_fit_tokens_is_exact(hidden, topk, ranks, fp8, budget):
    """value fits, value + 1 does not (or a limit binds) — checked against calculate_buffer_size directly."""
    plan = Plan(hidden=hidden, num_topk=topk, num_experts=256, num_ranks=ranks, num_max_tokens_per_rank=1,
                use_fp8_dispatch=fp8)
    r = fit_tokens(plan, "ascend", budget)
    if r.value is None:
        assert ascend_total(ranks, 1, hidden, topk, fp8) > budget
        return
    assert ascend_total(ranks, r.value, hidden, topk, fp8) <= budget
    if r.binding == "budget":
        assert ascend_total(ranks, r.value + 1, hidden, topk, fp8) > budget
    else:
        assert (r.value + 1) * ranks > 2**24 - 1


def test_cli_fit_json_and_table(capsys):
    assert main(["fit", "--budget", "1GiB", "--ranks", "16", "--topk", "8", "--backends", "ascend", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["results"]["ascend"]["value"] == 8648
    assert main(["fit", "--budget", "4GiB", "--tokens", "4096", "--topk", "8", "--backends", "ascend"]) == 0
    out = capsys.readouterr().out
    assert "Largest EP ranks" in out and "128" in out


def test_cli_fit_bad_budget(capsys):
    for bad in ("4XB", "-1GiB", "1.5B", ""):
        try:
            code = main(["fit", "--budget", bad])
        except SystemExit as e:
            code = e.code
        err = capsys.readouterr().err
        assert code == 2 and "--budget" in err and err.count("\n") == 1, (bad, err)
