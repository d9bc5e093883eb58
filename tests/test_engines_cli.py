"""``epbuf engine`` as people use it: the engine parts of issue 12 (paste what you run, pasteable
recommendations, the EP size credited as typed) and of issue 9 (every value read from an engine's
JSON flags or ``--env`` validated like a command-line integer; one line and exit 2, never a
traceback). Each test runs the exact command from the issue.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epbuf.cli import main
from epbuf.cli._engine_launch import parse_launch_line
from epbuf.engines import report
from epbuf.errors import EpbufError, InvalidArgumentError

from _cli_run import run_cli, run_cli_whole  # tests/_cli_run.py (conftest puts tests/ on the path)


def findings(data: dict, code: str) -> list[dict]:
    return [f for f in data["report"]["findings"] if f["code"] == code]


# ==============================================================================================
# Issue 12: paste what you run
# ==============================================================================================
def test_issue_12_flags_epbuf_does_not_model_are_ignored_in_one_note(capsys):
    code, out, err = run_cli(capsys, "engine", "vllm", "--model", "deepseek-v3", "-dp", "16", "--enable-expert-parallel",
                             "--trust-remote-code", "--gpu-memory-utilization", "0.9", "--max-model-len", "32768",
                             "--quantization", "fp8", "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    (note,) = findings(data, "engine.ignored")
    assert note["data"]["ignored"] == ["--trust-remote-code", "--gpu-memory-utilization 0.9", "--max-model-len 32768"]
    settings_ = {s["name"]: s for s in data["settings"]}
    assert settings_["EP size"]["value"] == 16
    assert settings_["--fp8-dispatch"]["value"] is True  # --quantization fp8 on DeepSeek-V3's 128 x 128 blocks
    assert settings_["--fp8-dispatch"]["source"] == "derived"


def test_issue_12_a_misspelled_option_is_still_one_line(capsys):
    code, out, err = run_cli(capsys, "engine", "vllm", "--budegt", "8GiB")
    assert code == 2 and out == "" and err.count("\n") == 1 and "did you mean --budget?" in err
    code, _, err = run_cli_whole(capsys, "engine", "vllm", "deepseek-ai/DeepSeek-V3")
    assert code == 2 and "paste the engine's whole launch line after --" in err


VLLM_LINE = ["vllm", "serve", "deepseek-ai/DeepSeek-V3", "--data-parallel-size", "16", "--enable-expert-parallel",
             "--all2all-backend", "deepep_low_latency", "--max-num-batched-tokens", "2048", "--trust-remote-code",
             "--gpu-memory-utilization", "0.9", "--max-model-len", "32768", "--quantization", "fp8"]


def test_issue_12_vllm_serve_launch_line(capsys):
    code, out, err = run_cli(capsys, "engine", "vllm", "--json", "--", *VLLM_LINE)
    assert code == 0 and err == ""
    data = json.loads(out)
    plain = report("vllm", model="deepseek-v3", flags={"--data-parallel-size": 16, "--enable-expert-parallel": True,
                                                       "--all2all-backend": "deepep_low_latency",
                                                       "--max-num-batched-tokens": 2048, "--fp8-dispatch": True})
    # + the Buffer constructor's workspace and NVL metadata
    assert data["num_bytes"] == plain.num_bytes == 1024 * 1024 * 1024 + 30_534_535_296 + 33_554_432 + 160
    (note,) = findings(data, "engine.ignored")
    assert note["data"]["ignored"] == ["--trust-remote-code", "--gpu-memory-utilization 0.9", "--max-model-len 32768"]
    assert not findings(data, "engine.epbuf-default")  # the line names its all2all backend


def test_launch_line_without_backend_runs_vllms_default(capsys):
    """Issue 18: a launch line without --all2all-backend runs vLLM's allgather_reducescatter (no EP-library
    buffer, 0 B), as vLLM 0.33.0's own code resolves it; the note says which flag sizes one."""
    code, out, _ = run_cli(capsys, "engine", "vllm", "--json", "--", "vllm", "serve", "deepseek-ai/DeepSeek-V3", "-dp",
                           "16", "--enable-expert-parallel")
    data = json.loads(out)
    assert code == 0 and data["num_bytes"] == 0 and not findings(data, "engine.epbuf-default")
    assert "--all2all-backend deepep_low_latency" in findings(data, "vllm.no-deepep")[0]["message"]


def test_issue_12_sglang_launch_server_line(capsys):
    code, out, err = run_cli(capsys, "engine", "sglang", "--json", "--", "python", "-m", "sglang.launch_server",
                             "--model-path", "deepseek-ai/DeepSeek-V3", "--tp", "16", "--moe-a2a-backend", "deepep",
                             "--deepep-mode", "normal", "--moe-runner-backend", "cutlass", "--trust-remote-code",
                             "--mem-fraction-static", "0.8")
    assert code == 0 and err == ""
    data = json.loads(out)
    q = data["report"]["quantities"]
    assert (q["num_nvl_bytes"], q["num_rdma_bytes"]) == (377_673_984, 91_887_744)  # issue 14 #8: cutlass -> BF16
    assert findings(data, "engine.ignored")[0]["data"]["ignored"] == ["--trust-remote-code", "--mem-fraction-static 0.8"]


def test_issue_12_torchrun_pretrain_gpt_line(capsys):
    code, out, err = run_cli(capsys, "engine", "megatron", "--json", "--", "torchrun", "--nproc-per-node", "8",
                             "--nnodes", "2", "pretrain_gpt.py", "--tensor-model-parallel-size", "1",
                             "--expert-model-parallel-size", "16", "--num-experts", "256", "--hidden-size", "7168",
                             "--moe-router-topk", "8", "--num-layers", "61", "--moe-token-dispatcher-type", "flex",
                             "--moe-flex-dispatcher-backend", "deepep")
    assert code == 0 and err == ""
    data = json.loads(out)
    assert data["num_bytes"] == 377_673_984 + 91_887_744 + 33_554_432 + 160  # engines.md §3.4 row 2 + workspace, metadata
    assert findings(data, "engine.ignored")[0]["data"]["ignored"] == ["--nproc-per-node 8", "--nnodes 2",
                                                                      "--num-layers 61"]


def test_issue_12_mindspeed_torchrun_line_gives_the_data_parallel_size(capsys):
    """Megatron derives DP from the world size; torchrun's --nnodes x --nproc-per-node give it."""
    code, out, err = run_cli(capsys, "engine", "mindspeed", "--json", "--", "torchrun", "--nnodes", "2",
                             "--nproc-per-node", "8", "pretrain_gpt.py", "--tensor-model-parallel-size", "2",
                             "--expert-model-parallel-size", "8", "--hccl-group-buffer-adaptive", "--seq-length", "4096",
                             "--num-layers", "61")
    assert code == 0 and err == ""
    data = json.loads(out)
    assert {s["name"]: s["value"] for s in data["settings"]}["--data-parallel-size"] == 8  # 16 / TP 2
    assert findings(data, "engine.ignored")[0]["data"]["ignored"] == ["--num-layers 61"]


def test_issue_12_launch_line_variables_and_env_from_shell(capsys, monkeypatch):
    line = ["VLLM_DEEPEP_BUFFER_SIZE_MB=512", "FOO=1", *VLLM_LINE]
    code, out, _ = run_cli(capsys, "engine", "vllm", "--json", "--", *line)
    data = json.loads(out)
    assert {s["name"]: s["value"] for s in data["settings"]}["VLLM_DEEPEP_BUFFER_SIZE_MB"] == 512
    assert "FOO=1" in findings(data, "engine.ignored")[0]["data"]["ignored"]
    monkeypatch.setenv("NVSHMEM_QP_DEPTH", "4098")
    monkeypatch.setenv("UNRELATED_VARIABLE", "x")
    code, out, _ = run_cli(capsys, "engine", "vllm", "--env-from-shell", "--json", "--", *VLLM_LINE)
    assert code == 0
    by_name = {s["name"]: s for s in json.loads(out)["settings"]}
    assert by_name["NVSHMEM_QP_DEPTH"]["value"] == 4098 and by_name["NVSHMEM_QP_DEPTH"]["source"] == "env"
    code, out, _ = run_cli(capsys, "engine", "vllm", "--env-from-shell", "--env", "NVSHMEM_QP_DEPTH=8192", "--json")
    assert {s["name"]: s["value"] for s in json.loads(out)["settings"]}["NVSHMEM_QP_DEPTH"] == 8192  # --env wins
    code, out, _ = run_cli(capsys, "engine", "vllm", "--json")
    assert {s["name"]: s["source"] for s in json.loads(out)["settings"]}["NVSHMEM_QP_DEPTH"] == "default"


def test_issue_12_launch_line_with_a_local_checkpoint(capsys, tmp_path):
    folder = tmp_path / "DeepSeek-V3-local"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "deepseek_v3", "hidden_size": 7168,
                                                    "n_routed_experts": 256, "num_experts_per_tok": 8}))
    code, out, err = run_cli(capsys, "engine", "vllm", "--json", "--", "vllm", "serve", str(folder), "-dp", "16")
    assert code == 0 and err == ""
    by_name = {s["name"]: s for s in json.loads(out)["settings"]}
    assert by_name["hidden"]["value"] == 7168 and by_name["hidden"]["note"] == "DeepSeek-V3-local"


@pytest.mark.parametrize("engine, line, message", [
    ("vllm", ["python", "-m", "sglang.launch_server", "--tp", "8"], "a sglang launch line"),
    ("sglang", ["vllm", "serve", "x"], "a vllm launch line"),
    ("vllm", [], "allowed the engine's launch line after --"),
    ("vllm", ["vllm", "serve", "deepseek-ai/DeepSeek-V3", "--json"], "--json = 'vllm serve deepseek-ai/DeepSeek-V3 ...': "
                                                                     "epbuf's option in the launch line; put it before --"),
])
def test_issue_12_launch_line_errors_are_one_line(capsys, engine, line, message):
    code, out, err = run_cli_whole(capsys, "engine", engine, "--", *line)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err


def test_launch_line_parser_keeps_what_the_recipe_reads():
    line = parse_launch_line(["env", "VLLM_ALL2ALL_BACKEND=deepep_v2", "vllm", "serve", "Qwen/Qwen3-30B-A3B",
                              "-tp=2", "--speculative-config", '{"num_speculative_tokens": 1}', "--seed", "0",
                              "--enforce-eager"], "vllm-ascend")
    assert line.argv == ("--model", "Qwen/Qwen3-30B-A3B", "-tp", "2", "--speculative-config",
                         '{"num_speculative_tokens": 1}', "--enforce-eager")
    assert line.env == {} and line.ignored == ("VLLM_ALL2ALL_BACKEND=deepep_v2", "--seed 0")
    assert line.program == "vllm"


# --- pasteable recommendations, identical to the finding that names them ------------------------------------------
def test_issue_12_recommendations_are_pasteable_and_match_their_findings(capsys):
    code, out, _ = run_cli(capsys, "engine", "vllm", "--model", "deepseek-v3", "-dp", "16", "--max-num-batched-tokens",
                           "8192")
    assert code == 0
    what_to_set = out.split("What to set")[1]
    # one consistent set (issue 21): the QP depth for the token count recommended, not for the 8,192 set
    assert "--max-num-batched-tokens=2304" in what_to_set and "NVSHMEM_QP_DEPTH=4610" in what_to_set
    assert not re.search(r"=\d{1,3},\d{3}", what_to_set)  # no thousands separators in values to type
    assert "set --max-num-batched-tokens=2304" in out and "set NVSHMEM_QP_DEPTH=16386" in out  # the findings say the same
    code, out, _ = run_cli(capsys, "engine", "sgl-kernel-npu", "--ranks", "16", "--deepep-mode", "low_latency",
                           "--env", "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK=512")
    assert "set HCCL_BUFFSIZE=3824" in out and "HCCL_BUFFSIZE=3824 " in out.split("What to set")[1]


def test_issue_12_settings_credit_the_flag_that_was_typed(capsys):
    code, out, _ = run_cli(capsys, "engine", "vllm", "--ranks", "16", "--json")
    by_name = {s["name"]: s for s in json.loads(out)["settings"]}
    assert by_name["EP size"]["note"] == "--ranks"
    code, out, _ = run_cli(capsys, "engine", "vllm", "--ep-size", "16", "--json")
    assert {s["name"]: s for s in json.loads(out)["settings"]}["EP size"]["note"] == "--ep-size"
    code, out, _ = run_cli(capsys, "engine", "sglang", "--ranks", "16", "--json")
    assert {s["name"]: s for s in json.loads(out)["settings"]}["EP size"]["note"] == "--ranks"


# ==============================================================================================
# Issue 9: hostile engine input — one line, exit 2, no traceback
# ==============================================================================================
DEEP = '{"a":' * 10000 + "1" + "}" * 10000


@pytest.mark.parametrize("argv, needle", [
    (["vllm-ascend", "--enable-expert-parallel", "-dp", "16", "--speculative-config",
      '{"num_speculative_tokens": -100}', "--json"], "num_speculative_tokens = -100: allowed an integer >= 0"),
    (["vllm-ascend", "--enable-expert-parallel", "-dp", "16", "--additional-config",
      '{"eplb_config":{"dynamic_eplb":true, "num_redundant_experts":-300}}'],
     "eplb_config.num_redundant_experts = -300: allowed an integer >= 0"),
    (["vllm-ascend", "--enable-expert-parallel", "-dp", "16", "--speculative-config",
      '{"num_speculative_tokens": 1.9}'], "num_speculative_tokens = 1.9"),
    (["vllm-ascend", "--enable-expert-parallel", "-dp", "16", "--speculative-config",
      '{"num_speculative_tokens": "2"}'], "num_speculative_tokens = '2'"),
    (["vllm-ascend", "--additional-config", '{"eplb_config":"x"}'], "eplb_config = 'x': allowed a JSON object"),
    (["vllm-ascend", "--additional-config", '{"enable_prefill_mc2": "yes"}'], "enable_prefill_mc2 = 'yes'"),
    (["vllm", "--eplb-config", '{"num_redundant_experts": 1.9}', "--enable-eplb"], "num_redundant_experts"),
    (["sglang", "--deepep-config", DEEP], "nested at most 64 deep"),
    (["vllm-ascend", "--additional-config", DEEP], "nested at most 64 deep"),
    (["vllm-ascend", "--additional-config", '{"eplb_config": {"num_redundant_experts": ' + "9" * 5000 + "}}"],
     "Exceeds the limit (4300 digits)"),
    (["vllm", "--max-num-batched-tokens", "²"], "--max-num-batched-tokens = '²'"),
    (["vllm", "--env", "VLLM_MOE_DP_CHUNK_SIZE=²"], "--env VLLM_MOE_DP_CHUNK_SIZE = '²'"),
    (["vllm", "--max-num-batched-tokens", "1" * 4301], "(4,301 characters)"),
    (["vllm", "--env", "VLLM_MOE_DP_CHUNK_SIZE=" + "7" * 5000], "(5,000 characters)"),
    (["mindspeed", "--hccl-ep-group-buffer-adaptive-factor", "inf"], "allowed a finite number"),
    (["mindspeed", "--hccl-ep-group-buffer-adaptive-factor", "nan"], "allowed a finite number"),
    (["mindspeed", "--hccl-group-buffer-adaptive", "--hccl-ep-group-buffer-adaptive-factor", "1e308",
      "--moe-token-dispatcher-type", "allgather"], "beyond float range"),
    (["mindspeed", "--hccl-group-buffer-adaptive", "--hccl-ep-group-buffer-adaptive-factor", "1e300",
      "--moe-token-dispatcher-type", "allgather"], "above the uint32 MB"),
    (["vllm", "--data-parallel-size", "1" + "0" * 400], "(401 characters)"),
    (["vllm-ascend", "--data-parallel-size", "1" + "0" * 400], "(401 characters)"),
    (["sgl-kernel-npu", "--env", "HCCL_BUFFSIZE=" + "1" + "0" * 400], "--env HCCL_BUFFSIZE"),
    (["vllm", "--env", "VLLM_DEEPEP_BUFFER_SIZE_MB=9223372036854775807"], "allowed an integer in 0..8796093022207"),
    (["mindspeed", "--hccl-group-buffer", "tp:" + "9" * 30], "is not a valid positive integer"),
    (["mindspeed", "--hccl-group-buffer", "tp:²"], "is not a valid positive integer"),
    (["mindspeed", "--hccl-group-buffer", "tp:5000000000"], "beyond the uint32 MB"),
    (["vllm", "--deepep-config-does-not-exist", DEEP], ""),  # ignored flags are listed, never parsed
])
def test_issue_9_hostile_engine_values_are_one_line(capsys, argv, needle):
    code, out, err = run_cli_whole(capsys, "engine", *argv)
    if not needle:
        assert code == 0 and "Traceback" not in err
        return
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and needle in err, err


def test_issue_9_device_tuple_with_nan_is_an_epbuf_error():
    for device in (("x", float("nan")), ("x", 1.5), ("", 8), ("x",), 5, ""):
        with pytest.raises(InvalidArgumentError, match="device"):
            report("vllm", device=device)
    assert report("vllm", device=("my GPU", 80 * 2**30)).device_num_bytes == 80 * 2**30


_WORDS = st.sampled_from([
    "--ranks", "--hidden", "--topk", "--experts", "--budget", "--max-tokens-under-load", "--env", "--json", "--strict",
    "-dp", "-tp", "--max-num-batched-tokens", "--speculative-config", "--additional-config", "--deepep-config",
    "--tp-size", "--expert-model-parallel-size", "--hccl-ep-group-buffer-adaptive-factor", "--deepep-mode", "--",
    "vllm", "serve", "16", "0", "-1", "1e400", "²", "nan", "inf", "8GiB", '{"num_speculative_tokens": 1.5}',
    '{"eplb_config": 3}', "HCCL_BUFFSIZE=x", "NVSHMEM_QP_DEPTH=99", "low_latency", "deepseek-v3", "x" * 50,
])


@settings(max_examples=150, deadline=None)
@given(engine=st.sampled_from(["vllm", "sglang", "megatron", "sgl-kernel-npu", "mindspeed", "vllm-ascend"]),
       words=st.lists(_WORDS, max_size=8))
def test_random_engine_argv_never_tracebacks(engine, words):
    """Random argv through ``epbuf engine``: exit 0, 1 or 2 and nothing else (an exception here is a traceback)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["engine", engine, *words])
        except SystemExit as exit_:
            code = exit_.code
    assert code in (0, 1, 2), (words, err.getvalue())
    assert "Traceback" not in err.getvalue()


def test_api_json_values_raise_epbuf_errors():
    for extra in ({"eplb_config": []}, {"mix_placement": 2}, {"eplb_config": {"expert_map_path": 5}},
                  {"enable_fused_mc2": True, "eplb_config": {"dynamic_eplb": "true"}}):
        with pytest.raises(EpbufError):
            report("vllm-ascend", flags={"--additional-config": extra, "--enable-expert-parallel": True,
                                         "--data-parallel-size": 16})
