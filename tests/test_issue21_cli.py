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
    assert "--env (env) = 'MORI_SHMEM_HEAP_SZE=8G': did you mean MORI_SHMEM_HEAP_SIZE?" in err
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


# --- misleading lines (rough edges) -------------------------------------------------------------------------------
@pytest.mark.parametrize(("argv", "needle"), [
    (["engine", "vllm", "--tp", "16"], "did you mean -tp (--tensor-parallel-size)?"),
    (["engine", "vLLM"], "did you mean vllm?"),
    (["hint", "--backend", "mori-ep", "--env", "MORI_SHMEM_HEAP_SIZE", "8G"],
     "use --env MORI_SHMEM_HEAP_SIZE=8G"),
    (["fit", "--budget", "8", "GiB"], "one argument: --budget 8GiB or --budget '8 GiB'"),
    (["sweep", "--ranks", "8", "16", "32"], "comma-separate the values: --ranks 8,16,32"),
    (["engine", "vllm", "--model", "/no/such/ckpt"], "'/no/such/ckpt': no such file or folder"),
    (["hint", "--model", "./no-such-checkpoint"], "no such file or folder"),
])
def test_misleading_lines_now_say_what_to_do(capsys, argv, needle):
    err = one_line_error(capsys, *argv)
    assert needle in err
    assert "did you mean --topk" not in err and "unknown; `epbuf models`" not in err


def test_replay_does_not_read_backend_as_backend_version(capsys):
    err = one_line_error(capsys, "replay", "--backend", "deepep-v2")
    assert "--backend-version" not in err and "unrecognized arguments: --backend deepep-v2" in err


def test_help_offers_only_what_the_command_accepts(capsys):
    code, out, _ = run_cli(capsys, "simulate", "--help")
    assert code == 0 and "--hbm" not in out and "pplx" not in out and "mori-ep," not in out
    assert "ascend, deepep-v2, deepep-v1, deepep-ll" in " ".join(out.split())  # the help text's choices
    for option in ("--env", "--kernel-type", "--nic", "--dp-group-size"):
        assert option not in out
    code, out, _ = run_cli(capsys, "replay", "--help")
    for option in ("--hbm", "--device", "--backend-version", "--no-hybrid", "--num-sms", "--env", "--nic",
                   "--kernel-type", "--quant-type"):
        assert option not in out, option
    assert "--sf-packs" in out and "--hidden" in out


def test_simulate_on_an_amd_device_says_which_backends_it_models(capsys):
    pytest.importorskip("numpy")
    err = one_line_error(capsys, "simulate", "--device", "mi355x")
    assert "simulates ascend, deepep-v2, deepep-v1, deepep-ll" in err


def test_a_checkpoint_folder_is_read_as_vllm_takes_it(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 2048, "num_experts_per_tok": 8,
                                                       "n_routed_experts": 64}))
    code, out, _ = run_cli(capsys, "hint", "--model", str(tmp_path), "--json")
    assert code == 0 and json.loads(out)["inputs"]["hidden"] == 2048


def test_cold_start_shortcuts_leave_in_process_callers_alone(capsys):
    """benchmarks/cold_start.py: main() run as the program skips gettext's catalog search and
    freezes the objects before the exit; called with an argv (tests, serve) it changes neither
    argparse nor the garbage collector."""
    import argparse
    import gc

    translate, frozen = argparse._, gc.get_freeze_count()
    code, out, _ = run_cli(capsys, "hint", "--bogus")
    assert code == 2 and argparse._ is translate and gc.get_freeze_count() == frozen


def test_topk_above_experts_is_refused_by_every_command(capsys):
    err = one_line_error(capsys, "engine", "vllm", "--topk", "9", "--experts", "8")
    assert "--topk = 9: allowed 0..8" in err
    code, out, _ = run_cli(capsys, "sweep", "--topk", "9", "--experts", "8", "--backends", "ascend", "--json")
    (row,) = json.loads(out)["rows"]
    assert row[-1].startswith("--topk (num_topk) = 9: allowed 0..8")
    one_line_error(capsys, "compare", "--topk", "9", "--experts", "8")
    one_line_error(capsys, "fit", "--topk", "9", "--experts", "8", "--budget", "8GiB")
