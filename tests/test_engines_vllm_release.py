"""vLLM 0.33.0's start-up decisions in the vLLM recipe (issue 18), checked without vLLM: the numbers
below are what vLLM 0.33.0's own code resolves for these lines (the conformance tier,
tests/conformance/vllm, runs that code and compares argument by argument)."""

from __future__ import annotations

import json

import pytest
from _cli_run import run_cli

from epbuf.engines import report
from epbuf.engines._vllm_pplx import hidden_dim_scale_bytes

V3 = ["vllm", "serve", "deepseek-ai/DeepSeek-V3"]
LL = ["--enable-expert-parallel", "--all2all-backend", "deepep_low_latency"]


def engine_json(capsys, *argv):
    code, out, err = run_cli(capsys, "engine", "vllm", "--json", *argv)
    assert code == 0, err
    return json.loads(out)


def setting(rep, name):
    return next(s["value"] for s in rep["settings"] if s["name"] == name)


def test_dp16_low_latency_is_batched_dp_moe_at_256_tokens(capsys):
    """use_batched_dp_moe: T = 256; DeepEP's LL hint + the 1 GiB NVL buffer + 160 B + 32 MiB workspace."""
    rep = engine_json(capsys, "--", *V3, "-dp", "16", *LL)
    assert rep["num_bytes"] == 4_924_115_232 and rep["errors"] == []
    assert setting(rep, "--max-num-batched-tokens") == 256
    assert {b["name"]: b["num_bytes"] for b in rep["report"]["buffers"]} == {
        "NVL buffer": 1 << 30, "LL RDMA buffer": 3_816_818_816, "NVL metadata": 160, "workspace": 32 << 20}


def test_tp16_is_dp1_and_builds_no_buffer(capsys):
    rep = engine_json(capsys, "--", *V3, "-tp", "16", *LL)
    assert rep["num_bytes"] == 0 and rep["report"]["buffers"] == []
    finding = next(f for f in rep["report"]["findings"] if f["code"] == "vllm.no-all2all")
    assert "DP = 1" in finding["message"]


def test_underscore_equals_and_abbreviated_spellings_give_the_same_json(capsys):
    dash = engine_json(capsys, "--", *V3, "--tensor-parallel-size", "8", "--data-parallel-size", "2", *LL)
    for spelled in (["--tensor_parallel_size", "8", "--data_parallel_size", "2", "--enable_expert_parallel",
                     "--all2all_backend", "deepep_low_latency"],
                    ["--tensor-parallel-size=8", "--data_parallel_size=2", "--enable-expert-parallel",
                     "--all2all-backend=deepep_low_latency"],
                    ["--tensor-parallel-size", "8", "--data-parallel-size", "2", "--enable-expert", "--all2all",
                     "deepep_low_latency"]):
        assert engine_json(capsys, "--", *V3, *spelled) == dash
    assert setting(dash, "EP size") == 16 and setting(dash, "--max-num-batched-tokens") == 256


def test_ambiguous_abbreviation_is_refused_as_vllm_refuses_it(capsys):
    code, out, err = run_cli(capsys, "engine", "vllm", "--", *V3, "--data-parallel", "16", *LL)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "ambiguous" in err


@pytest.mark.parametrize("before", [["--dp", "16"], ["--data_parallel_size", "16"], ["--max-model-len", "4096"]])
def test_unknown_option_before_the_launch_line_is_refused_not_ignored(capsys, before):
    code, out, err = run_cli(capsys, "engine", "vllm", *before, "--", *V3, *LL)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and before[0] in err


def test_engine_option_before_the_launch_line_is_read(capsys):
    rep = engine_json(capsys, "-dp", "16", "--", *V3, *LL)
    assert rep["num_bytes"] == 4_924_115_232


def test_eplb_config_dotted_spelling_is_merged(capsys):
    json_form = engine_json(capsys, "--", *V3, "-dp", "16", *LL, "--enable-eplb", "--eplb-config",
                            '{"num_redundant_experts": 32}')
    dotted = engine_json(capsys, "--", *V3, "-dp", "16", *LL, "--enable-eplb", "--eplb-config.num_redundant_experts",
                         "32")
    assert dotted["num_bytes"] == json_form["num_bytes"] and setting(dotted, "experts seen by DeepEP") == 288


def test_num_redundant_experts_is_gone_in_0_33_but_read_before(capsys):
    code, out, err = run_cli(capsys, "engine", "vllm", "--", *V3, "-dp", "16", *LL, "--enable-eplb",
                             "--num-redundant-experts", "32")
    assert code == 2 and len(err.splitlines()) == 1 and "--eplb-config" in err
    code, out, err = run_cli(capsys, "engine", "vllm", "--engine-version", "dp-chunk", "--json", "--", *V3, "-dp",
                             "16", *LL, "--enable-eplb", "--num-redundant-experts", "32")
    assert code == 0, err


def test_engine_version_takes_the_release_number(capsys):
    assert engine_json(capsys, "--engine-version", "0.33.0", "--", *V3, "-dp", "16", *LL)["num_bytes"] == 4_924_115_232
    code, out, err = run_cli(capsys, "engine", "vllm", "--engine-version", "0.9.9", "--", *V3)
    assert code == 2 and len(err.splitlines()) == 1 and "0.33.0" in err and "dp-chunk" in err


@pytest.mark.parametrize("extra, tokens", [([], 512), (["--max-num-batched-tokens", "300"], 300)])
def test_throughput_mode_doubles_a_defaulted_budget_only(capsys, extra, tokens):
    rep = engine_json(capsys, "--", *V3, "-dp", "16", *LL, "--performance-mode", "throughput", *extra)
    assert setting(rep, "--max-num-batched-tokens") == tokens


@pytest.mark.parametrize("device, tokens", [("h200", 8192), ("b200", 16384), ("a100-80gb", 2048)])
def test_batch_default_tiers_by_device(capsys, device, tokens):
    rep = engine_json(capsys, "--device", device, "--", *V3, "-dp", "16", "--enable-expert-parallel",
                      "--all2all-backend", "deepep_high_throughput")
    assert setting(rep, "--max-num-batched-tokens") == tokens


def test_without_expert_parallel_a_launch_line_builds_no_buffer(capsys):
    rep = engine_json(capsys, "--", *V3, "-dp", "16", "--all2all-backend", "deepep_low_latency")
    assert rep["num_bytes"] == 0 and "--enable-expert-parallel" in rep["report"]["findings"][0]["message"]


@pytest.mark.parametrize("kind, expected", [("fp8-tensor", (4096, 16)), ("fp8-token", (4096, 16)),
                                            ("int8-token", (4096, 16)), ("fp8-block", (4096, 128)),
                                            ("bf16", (8192, 0))])
def test_pplx_hidden_dim_scale_bytes_by_activation_quant(kind, expected):
    assert hidden_dim_scale_bytes(4096, kind) == expected


def test_pplx_per_tensor_fp8_from_quantization_fp8():
    rep = report("vllm", model="qwen3-235b-a22b", version="dp-chunk", flags={
        "--all2all-backend": "pplx", "-dp": 16, "--enable-expert-parallel": True, "--quantization": "fp8"})
    assert rep.report.inputs["hidden_dim_scale_bytes"] == 16
    assert next(s for s in rep.settings if s.name == "--activation-quant").value == "fp8-tensor"


@pytest.mark.parametrize("quant, scale_dim", [("fp8", 1), ("fp8_per_channel", 1), ("fp8_per_block", 32), (None, 0)])
def test_mori_scale_dim_follows_the_activation_quant(quant, scale_dim):
    flags = {"--all2all-backend": "mori_high_throughput", "-dp": 16, "--enable-expert-parallel": True}
    if quant:
        flags["--quantization"] = quant
    rep = report("vllm", model="qwen3-235b-a22b", flags=flags)
    args = next(f for f in rep.report.findings if f.code == "vllm.mori-args")
    assert args.data["scale_dim"] == scale_dim


def test_int8_w8a8_through_activation_quant_flag():
    rep = report("vllm", model="qwen3-235b-a22b", flags={"--all2all-backend": "mori_low_latency", "-dp": 16,
                                                         "--activation-quant": "int8-token"})
    assert next(f for f in rep.report.findings if f.code == "vllm.mori-args").data["scale_dim"] == 1


def test_from_installed_without_vllm_is_one_warning_and_the_recipe_stands(capsys):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here; the conformance tier tests --from-installed with it")
    rep = engine_json(capsys, "--from-installed", "--", *V3, "-dp", "16", *LL)
    unavailable = [f for f in rep["report"]["findings"] if f["code"] == "engine.installed-unavailable"]
    assert rep["num_bytes"] == 4_924_115_232 and len(unavailable) == 1
    assert "vLLM is not installed" in unavailable[0]["message"] and "\n" not in unavailable[0]["message"]
