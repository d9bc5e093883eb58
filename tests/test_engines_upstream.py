"""Issue 14: the engine recipes checked line by line against upstream. Each test runs the command
the issue gives (or, for the missing cases, the command the new flag takes) and pins the number the
cited upstream lines give — worked out in ``docs/derivations/engines.md`` §8.
"""

from __future__ import annotations

import json

import pytest
from _cli_run import whole_errors  # tests/_cli_run.py (conftest puts tests/ on the path)

from epbuf.backends import deepep_v1
from epbuf.cli import main
from epbuf.engines import get_engine, report
from epbuf.engines._hccl import ll_combine_need, ll_dispatch_need
from epbuf.engines.sgl_kernel_npu import normal_combine_need, normal_dispatch_need
from epbuf.units import MiB


def engine(capsys, *argv: str, code: int = 0) -> dict:
    """``epbuf engine ARGV --json`` as the console script runs it; the parsed JSON."""
    status = main(["engine", *argv, "--json"])
    out, err = capsys.readouterr()
    assert status == code and err == "", err
    return json.loads(out)


def rec(data: dict, setting: str, goal: str):
    (value,) = [r["value"] for r in data["recommendations"] if r["setting"] == setting and r["goal"] == goal]
    return value


def windows(data: dict) -> dict[str, int]:
    """HCCL window MiB per group (each communicator takes 2 x its value)."""
    return {b["name"].split(": ")[1].split(" group")[0]: b["num_bytes"] // (2 * MiB) for b in data["report"]["buffers"]}


# --- 1. sgl-kernel-npu / vllm-ascend, int8 dispatch: the combine tiling sizes dispatched tokens as BF16 -----------
def test_1_int8_dispatch_combine_check_binds(capsys):
    data = engine(capsys, "sgl-kernel-npu", "--model", "deepseek-v3", "--ranks", "16", "--deepep-mode", "low_latency",
                  "--deepep-dispatcher-output-dtype", "int8", "--env", "HCCL_BUFFSIZE=1024", "--env",
                  "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK=256")
    q = data["report"]["quantities"]
    assert q["low-latency dispatch (CheckWinSize)"] == 1_065_353_216  # what epbuf used to call enough
    assert q["low-latency combine"] == 2_004_877_312 == ll_combine_need(256, 7168, 16, 256, 8)  # 1912 MiB
    assert "sgl-kernel-npu.limit" in data["errors"]
    assert rec(data, "HCCL_BUFFSIZE", "load") == 1912
    # the same formula in vllm-ascend's --dispatch-dtype int8 path (256 tokens per rank, EP 16)
    va = engine(capsys, "vllm-ascend", "--model", "deepseek-v3", "-dp", "16", "--enable-expert-parallel",
                "--dispatch-dtype", "int8", "--max-cudagraph-capture-size", "256")
    assert va["report"]["quantities"]["mc2_need_bytes"] == 2_004_877_312
    assert rec(va, "HCCL_BUFFSIZE", "load") == 1912


# --- 2. MOE_SHARED_EXPERT_RANK_NUM > 0: shared_expert_num = 1 counts (top-k + 1) ------------------------------------
def test_2_shared_expert_rank_adds_a_combine_slot(capsys):
    data = engine(capsys, "sgl-kernel-npu", "--ranks", "17", "--deepep-mode", "low_latency", "--env",
                  "MOE_SHARED_EXPERT_RANK_NUM=1", "--env", "HCCL_BUFFSIZE=1024")
    q = data["report"]["quantities"]
    assert q["sharedExpertNum"] == 1
    assert max(q["low-latency dispatch (CheckWinSize)"], q["low-latency combine"]) == 1_066_926_080
    assert ll_dispatch_need(128, 7168, 17, 256, 8, shared_expert_rank_num=1) == 1_063_256_064  # top-k alone
    assert rec(data, "HCCL_BUFFSIZE", "load") == 1018
    assert not data["errors"]  # 1024 MiB still holds it


# --- 3. normal combine: one round of 8192 tokens unless DEEPEP_NORMAL_COMBINE_ENABLE_LONG_SEQ=1 --------------------
LONG_SEQ = ["sgl-kernel-npu", "--model", "deepseek-v3", "--ranks", "16", "--deepep-mode", "normal",
            "--max-tokens-under-load", "8192", "--env", "DEEPEP_NORMAL_LONG_SEQ_ROUND=4", "--env",
            "DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS=2048"]


def test_3_long_sequence_combine(capsys):
    data = engine(capsys, *LONG_SEQ)
    q = data["report"]["quantities"]
    assert q["normal dispatch (CamMoeDispatchNormal)"] == 1_648_361_472 == normal_dispatch_need(2048, 7168, 8, 4)
    assert q["normal combine (CamMoeCombineNormal)"] == 2_101_346_304 == normal_combine_need(8192, 7168, 8, 1)
    assert rec(data, "HCCL_BUFFSIZE", "load") == 2004  # not 1572
    on = engine(capsys, *LONG_SEQ, "--env", "DEEPEP_NORMAL_COMBINE_ENABLE_LONG_SEQ=1")
    assert on["report"]["quantities"]["normal combine (CamMoeCombineNormal)"] == 1_161_822_208
    assert rec(on, "HCCL_BUFFSIZE", "load") == 1572
    # a batch above round x per_round_tokens is refused by get_dispatch_layout (deep_ep.cpp:127-130)
    over = engine(capsys, *LONG_SEQ[:-6], "--max-tokens-under-load", "16384", *LONG_SEQ[-4:])
    (lim,) = [x for x in over["report"]["limits"] if x["name"].startswith("tokens per rank <= ")]
    assert lim["ok"] is False and "deep_ep.cpp:127-130" in lim["source"]


# --- 4. sgl-kernel-npu on A2: deep_ep is built from ops2, whose tilings check the window ---------------------------
def test_4_a2_ops2_tilings(capsys):
    data = engine(capsys, "sgl-kernel-npu", "--model", "qwen3-235b-a22b", "--ranks", "8", "--soc", "a2",
                  "--deepep-mode", "normal", "--max-tokens-under-load", "4096", "--env", "HCCL_BUFFSIZE=1024")
    assert data["report"]["quantities"]["normal dispatch (CamMoeDispatchNormal)"] == 1_979_711_488  # (8 + 404) x 2 + 8
    assert rec(data, "HCCL_BUFFSIZE", "load") == 1888
    assert "sgl-kernel-npu.limit" in data["errors"]
    ll = engine(capsys, "sgl-kernel-npu", "--model", "qwen3-235b-a22b", "--ranks", "8", "--soc", "a2",
                "--deepep-mode", "low_latency")
    assert rec(ll, "HCCL_BUFFSIZE", "load") == 288  # not the README's 132
    assert ll["errors"]  # the 200 MiB default fails
    # across servers (16 ranks, layered) the ops2 tilings check no window: the README minimum stays
    across = report("sgl-kernel-npu", model="deepseek-v3", flags={"--ep-size": 16, "--deepep-mode": "low_latency",
                                                                   "--soc": "a2"})
    assert any("README" in q.name for q in across.report.quantities)


# --- 5. MindSpeed on Megatron core_v0.12.1: the expert groups are ep / ep_tp / tp_ep_mp / tp_ep_pp / ep_dp ---------
MS = ["mindspeed", "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--data-parallel-size",
      "16", "--hccl-group-buffer-adaptive", "--hccl-ep-group-buffer-adaptive-factor", "1"]


def test_5_mindspeed_group_names(capsys):
    alltoall = windows(engine(capsys, *MS, "--model", "deepseek-v3", "--expert-model-parallel-size", "16",
                              "--moe-token-dispatcher-type", "alltoall"))
    assert {k: alltoall[k] for k in ("ep", "ep_tp", "tp_ep_mp", "tp_ep_pp")} == dict.fromkeys(
        ("ep", "ep_tp", "tp_ep_mp", "tp_ep_pp"), 200)  # 400 MiB each: HCCL_BUFFSIZE, the keys never match
    assert "exp" not in alltoall and "mp_exp" not in alltoall
    old = windows(engine(capsys, *MS, "--model", "deepseek-v3", "--expert-model-parallel-size", "16",
                         "--moe-token-dispatcher-type", "alltoall", "--megatron-version", "core_r0.8.0"))
    assert old["exp"] == 224 and old["mp_exp"] == 10  # 448 / 20 MiB where Megatron names them so
    qwen = [*MS, "--model", "qwen3-235b-a22b", "--expert-model-parallel-size", "8", "--moe-token-dispatcher-type",
            "allgather"]
    assert windows(engine(capsys, *qwen))["ep_tp"] == 200  # upstream 400 MiB
    assert windows(engine(capsys, *qwen, "--megatron-version", "core_r0.8.0"))["tp_exp"] == 256  # 512 MiB
    legacy = windows(engine(capsys, *qwen, "--megatron-version", "core_r0.8.0", "--engine-version", "legacy"))
    assert legacy["tp_exp"] == legacy["exp"] == 128  # parallel_state.py:183: the exp value, 256 MiB
    with whole_errors():
        code = main(["engine", "mindspeed", "--engine-version", "legacy", "--hccl-group-buffer", "exp:300,tp_exp:50"])
    assert code == 2 and "splits on ';' only" in capsys.readouterr().err


def test_5_mindspeed_world_must_divide(capsys):
    data = engine(capsys, "mindspeed", "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                  "--data-parallel-size", "3", "--expert-model-parallel-size", "16")
    (lim,) = [x for x in data["report"]["limits"] if x["name"] == "world size % (expert TP x EP x PP)"]
    assert lim["ok"] is False and lim["value"] == 12 % 64 and "parallel_state.py:696-702" in lim["source"]
    assert "ep_dp" not in windows(data)
    assert main(["engine", "mindspeed", "--data-parallel-size", "3", "--expert-model-parallel-size", "16",
                 "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--strict"]) == 1
    capsys.readouterr()


# --- 6. vllm-ascend default capture size: min(max_num_seqs x decode length, 512), no x 2 -------------------------
def test_6_vllm_ascend_capture_default(capsys):
    data = engine(capsys, "vllm-ascend", "--model", "deepseek-v3", "--data-parallel-size", "16",
                  "--enable-expert-parallel", "--max-num-seqs", "64", "--speculative-config",
                  '{"num_speculative_tokens":1}', "--env", "HCCL_BUFFSIZE=512")
    q = data["report"]["quantities"]
    assert q["mc2_tokens_per_rank"] == 128 and q["mc2_need_bytes"] == 1_002_438_656
    assert rec(data, "HCCL_BUFFSIZE", "load") == 956


# --- 7. Megatron: an explicit flex SM count wins over the deprecated knobs ---------------------------------------
def test_7_megatron_sm_knobs(capsys):
    data = engine(capsys, "megatron", "--expert-model-parallel-size", "16", "--moe-flex-dispatcher-num-sms", "24",
                  "--moe-deepep-num-sms", "32")
    flex = report("megatron", model="deepseek-v3", flags={"--expert-model-parallel-size": 16,
                                                          "--moe-flex-dispatcher-num-sms": 24})
    assert data["num_bytes"] == flex.num_bytes == 453_208_704 + 110_265_216 + 33_554_432 + 160  # + workspace, metadata
    assert "megatron.deprecated-num-sms" in [f["code"] for f in data["report"]["findings"]]
    hybrid = engine(capsys, "megatron", "--expert-model-parallel-size", "16", "--moe-hybridep-num-sms", "24")
    assert hybrid["num_bytes"] == flex.num_bytes  # routed to moe_flex_dispatcher_num_sms
    with whole_errors():
        assert main(["engine", "megatron", "--moe-deepep-num-sms", "24", "--moe-hybridep-num-sms", "32"]) == 2
    assert "TransformerConfig.__post_init__ raises ValueError" in capsys.readouterr().err
    # cosmetic: moe_deepep_num_sms is transformer_config.py:969
    (knob,) = [k for k in get_engine("megatron").knobs if k.name == "--moe-deepep-num-sms"]
    assert knob.source.endswith(":969")


# --- 8. SGLang auto dispatch dtype: BF16 for the cutlass / flashinfer_cutedsl / humming runners ---------------------
@pytest.mark.parametrize("runner, nvl, rdma", [
    ("cutlass", 377_673_984, 91_887_744),
    ("flashinfer_cutedsl", 377_673_984, 91_887_744),
    ("humming", 377_673_984, 91_887_744),
    ("auto", 212_523_264, 51_746_944),   # FP8: param_bytes 1
    ("deep_gemm", 212_523_264, 51_746_944),
])
def test_8_sglang_runner_backend_dtype(capsys, runner, nvl, rdma):
    data = engine(capsys, "sglang", "--model", "deepseek-v3", "--tp-size", "16", "--deepep-mode", "normal",
                  "--moe-runner-backend", runner)
    q = data["report"]["quantities"]
    assert (q["num_nvl_bytes"], q["num_rdma_bytes"]) == (nvl, rdma)


# --- missing cases ----------------------------------------------------------------------------------------------
def test_megatron_latent_moe(capsys):
    """moe_layer.py:488-490: tokens are dispatched at the latent width — the §3.4 hidden-2048 row."""
    q = engine(capsys, "megatron", "--model", "deepseek-v3", "--expert-model-parallel-size", "16",
               "--moe-latent-size", "2048")["report"]["quantities"]
    assert (q["num_nvl_bytes"], q["num_rdma_bytes"]) == (141_744_384, 34_543_744)
    assert main(["engine", "megatron", "--moe-latent-size", "0"]) == 2
    capsys.readouterr()


def test_sglang_fused_shared_experts(capsys):
    """FusedMoE.__init__: num_shared_slots = num_fused_shared_experts x moe_ep_size with DeepEP."""
    data = engine(capsys, "sglang", "--model", "deepseek-v3", "--tp-size", "16", "--fused-shared-experts", "1",
                  "--deepep-mode", "low_latency")
    settings = {s["name"]: s["value"] for s in data["settings"]}
    assert settings["experts seen by DeepEP"] == 272 and settings["top-k with fused shared experts"] == 9
    assert not data["errors"]
    # low-latency mode: num_nvl_bytes = 0, so the constructor adds only its workspace
    assert data["num_bytes"] == deepep_v1.get_low_latency_rdma_size_hint(128, 7168, 16, 272) + 33_554_432
    assert data["num_bytes"] - 33_554_432 == 2_027_686_272


def test_vllm_prefill_context_parallel_and_v2_sequence_parallel(capsys):
    data = engine(capsys, "vllm", "--model", "deepseek-v3", "-tp", "2", "-pcp", "2", "-dp", "4")
    assert {s["name"]: s["value"] for s in data["settings"]}["EP size"] == 16  # TP x PCP x DP
    assert main(["engine", "vllm", "-tp", "2", "-pcp", "2", "-dp", "4", "--ranks", "8"]) == 2
    assert "TP x PCP x DP = 2 x 2 x 4 = 16" in capsys.readouterr().err
    # deepep_v2 is not a use_sequence_parallel_moe backend (vllm/config/parallel.py @00193b82): sp_size 1
    v2 = engine(capsys, "vllm", "--all2all-backend", "deepep_v2", "-tp", "2", "-dp", "8", "--max-num-batched-tokens",
                "4096")
    settings = {s["name"]: s["value"] for s in v2["settings"]}
    assert settings["sp_size"] == 1 and v2["report"]["inputs"]["num_max_tokens_per_rank"] == 4096


def test_vllm_ascend_fused_mc2(capsys):
    base = ["vllm-ascend", "--model", "deepseek-v3", "-dp", "16", "--enable-expert-parallel"]
    dffc = engine(capsys, *base, "--additional-config", '{"enable_fused_mc2": 1}', "--max-cudagraph-capture-size", "512")
    assert dffc["report"]["inputs"]["moe_comm_method"] == "FUSED_MC2"
    assert dffc["report"]["quantities"]["mc2_need_bytes"] == 512 * 8 * 7168 * 3 + 10 * MiB == 98_566_144
    assert rec(dffc, "HCCL_BUFFSIZE", "load") == 94
    mega = engine(capsys, *base, "--env", "VLLM_ASCEND_ENABLE_FUSED_MC2=1", "--cann-ops-transformer",
                  "--additional-config", '{"enable_prefill_mc2": true}', "--max-num-batched-tokens", "8192")
    q = mega["report"]["quantities"]
    assert q["mc2_tokens_per_rank"] == 4096  # the MegaMoE cap, not 512
    assert q["mega_moe_max_recv_token_num"] == 4096 * 16 * 8
    assert "vllm-ascend.megamoe-buffer" in [f["code"] for f in mega["report"]["findings"]]
    wide = engine(capsys, "vllm-ascend", "--model", "deepseek-v3", "-dp", "64", "--enable-expert-parallel",
                  "--additional-config", '{"enable_fused_mc2": 1}')
    assert wide["report"]["inputs"]["moe_comm_method"] == "MC2"  # dispatch_ffn_combine only up to EP 32


def test_vllm_ascend_static_eplb_and_mix_placement(capsys, tmp_path):
    layer = {"device_list": [{"device_expert": list(range(17))} for _ in range(16)]}
    path = tmp_path / "map.json"
    path.write_text(json.dumps({"moe_layer_count": 2, "layer_list": [layer, layer]}))
    base = ["vllm-ascend", "--model", "deepseek-v3", "-dp", "16", "--enable-expert-parallel"]
    data = engine(capsys, *base, "--additional-config", json.dumps({"eplb_config": {"expert_map_path": str(path)}}))
    settings = {s["name"]: s["value"] for s in data["settings"]}
    assert settings["experts seen by MC2"] == 272  # the map's 16 x 17 physical experts (eplb_utils.py:86-89)
    mix = engine(capsys, *base, "--additional-config",
                 '{"mix_placement": true, "eplb_config": {"dynamic_eplb": true, "num_redundant_experts": 16}}')
    assert {s["name"]: s["value"] for s in mix["settings"]}["experts seen by MC2"] == 256 + 1 + 16 + 15  # :96-97
    with whole_errors():
        assert main(["engine", *base, "--additional-config", '{"eplb_config": {"expert_map_path": "map.txt"}}']) == 2
    assert ".json file" in capsys.readouterr().err


def test_vllm_ascend_a2_mc2_conditions(capsys):
    a2 = ["vllm-ascend", "--model", "deepseek-v3", "--enable-expert-parallel", "--soc", "a2"]
    assert engine(capsys, *a2, "-dp", "16")["report"]["inputs"]["moe_comm_method"] == "MC2"  # 16 per device, EP 16
    small = engine(capsys, *a2, "-dp", "8")  # EP 8 < 16
    assert small["report"]["inputs"]["moe_comm_method"] == "ALLGATHER"
    assert small["report"]["quantities"]["mc2_need_bytes"] == 0 and not small["errors"]
    wide = engine(capsys, "vllm-ascend", "--experts", "512", "--hidden", "7168", "--topk", "8",
                  "--enable-expert-parallel", "--soc", "a2", "-dp", "16")  # 32 experts per device > 24
    assert wide["report"]["inputs"]["moe_comm_method"] == "ALLGATHER"
