"""Issue 21: wrong or silent answers and misleading lines of the command line, each through
the exact input the issue names."""

from __future__ import annotations

import json

import pytest

from _cli_run import run_cli  # tests/_cli_run.py (conftest puts tests/ on the path)


def one_line_error(capsys, *argv) -> str:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, (code, out, err)
    return err


def test_hint_refuses_a_misspelt_env_name_with_a_suggestion(capsys):
    err = one_line_error(capsys, "hint", "--backend", "mori-ep", "--env", "MORI_SHMEM_HEAP_SZE=8G")
    assert "--env (env) = 'MORI_SHMEM_HEAP_SZE=8G': not a variable mori-ep reads" in err
    assert "did you mean MORI_SHMEM_HEAP_SIZE?" in err


def test_hint_refuses_an_env_name_of_another_backend(capsys):
    err = one_line_error(capsys, "hint", "--backend", "pplx", "--env", "MORI_SHMEM_HEAP_SIZE=8G")
    assert "only mori-ep reads MORI_SHMEM_HEAP_SIZE" in err


def test_hint_reads_a_correct_env_name(capsys):
    code, out, _ = run_cli(capsys, "hint", "--backend", "mori-ep", "--env", "MORI_SHMEM_HEAP_SIZE=8G", "--json")
    assert code == 0 and json.loads(out)["inputs"]["MORI_SHMEM_HEAP_SIZE"] == "8G"


def test_engine_suggests_the_nearest_env_name(capsys):
    err = one_line_error(capsys, "engine", "vllm", "--env", "VLLM_DEEPEP_BUFER_SIZE_MB=1024")
    assert "did you mean VLLM_DEEPEP_BUFFER_SIZE_MB?" in err


def test_fit_on_mi355x_says_the_mori_heap_binds_and_what_to_set(capsys):
    code, out, _ = run_cli(capsys, "fit", "--device", "mi355x", "--backends", "mori-ep", "--budget", "3.2GB",
                           "--json")
    result = json.loads(out)["results"]["mori-ep"]
    assert code == 0 and result["value"] is None
    assert "static heap is reserved whole" in result["advice"] and "MORI_SHMEM_HEAP_SIZE=2990M" in result["advice"]
    assert "up to 12,466 tokens" in result["reason"]
    # the advice holds: with that heap, 12,466 tokens fit the same budget
    code, out, _ = run_cli(capsys, "fit", "--device", "mi355x", "--backends", "mori-ep", "--budget", "3.2GB",
                           "--env", "MORI_SHMEM_HEAP_SIZE=2990M", "--json")
    assert json.loads(out)["results"]["mori-ep"]["value"] == 12_466


def test_fit_on_mi355x_lists_only_the_backends_that_run_there(capsys):
    code, out, _ = run_cli(capsys, "fit", "--device", "mi355x")
    assert code == 0 and "not on AMD Instinct MI355X" not in out
    assert "mori-ep" in out and "deepep-v2" not in out and "ascend" not in out


def test_fit_with_ranks_and_tokens_does_not_drop_tokens(capsys):
    err = one_line_error(capsys, "fit", "--ranks", "16", "--tokens", "256")
    assert "--tokens (num_max_tokens_per_rank) = 256: fit solves for the tokens per rank" in err


def test_engine_reads_a_budget_share_and_over_budget_is_an_error_as_in_hint(capsys):
    code, out, _ = run_cli(capsys, "engine", "vllm", "--device", "h200", "--budget", "10%", "--json")
    assert code == 0 and json.loads(out)["budget"] == 150_754_820_096 // 10
    code, out, _ = run_cli(capsys, "engine", "vllm", "--device", "h200", "--budget", "0.1%", "--json")
    data = json.loads(out)
    over = [f for f in data["report"]["findings"] if f["code"].endswith("over-budget")]
    assert data["fits_budget"] is False and [f["severity"] for f in over] == ["error"]
    code, out, _ = run_cli(capsys, "hint", "--device", "h200", "--budget", "0.1%", "--json")
    assert [f["severity"] for f in json.loads(out)["findings"] if "budget" in f["code"]] == ["error"]
    code, _, _ = run_cli(capsys, "engine", "vllm", "--device", "h200", "--budget", "0.1%", "--strict")
    assert code == 1


def test_engine_recommendations_compose_into_one_set(capsys):
    """The token limit (2,304), the budget's value and NVSHMEM_QP_DEPTH for 8,192 tokens were
    three answers; to_set is one: the budget's value and the QP depth that value needs."""
    code, out, _ = run_cli(capsys, "engine", "vllm", "--model", "deepseek-v3", "--ranks", "16", "--device", "h200",
                           "--budget", "10%", "--json")
    data = json.loads(out)
    to_set = {r["setting"]: r for r in data["to_set"]}
    tokens = to_set["--max-num-batched-tokens"]
    assert tokens["goal"] == "budget" and tokens["num_bytes"] <= data["budget"]
    assert to_set["NVSHMEM_QP_DEPTH"]["value"] == (tokens["value"] + 1) * 2
    assert sorted(to_set) == ["--max-num-batched-tokens", "NVSHMEM_QP_DEPTH"]
    # every goal's own search is still there
    assert {r["goal"] for r in data["recommendations"]} >= {"limit", "budget", "fix"}


def test_sglang_without_a_load_is_not_advised_to_raise_its_token_count(capsys):
    code, out, _ = run_cli(capsys, "engine", "sglang", "--json")
    data = json.loads(out)
    assert code == 0 and data["to_set"] == []
    code, out, _ = run_cli(capsys, "engine", "sglang")
    assert "What to set" not in out and "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK <= 1024" in out
