"""``epbuf engine``: engine recipes pinned to the numbers their sources imply, exact
recommendations, every flag / environment-variable error path, and the JSON schema.

Rows cite where the expected number comes from: the worked examples of
``docs/derivations/engines.md`` (§ numbers), an upstream issue, or the upstream assertion itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import epbuf
from epbuf.backends import deepep_v1
from epbuf.cli import main
from epbuf.engines import ENGINES, engine_names, get_engine, report
from epbuf._search import largest_true
from epbuf.engines._knobs import Knob, parse_knob
from epbuf.engines._report import SCHEMA, engine_report_to_dict
from epbuf.engines._hccl import ll_dispatch_need, ll_window_need, tiling_window_mib
from epbuf.engines.mindspeed import mindspeed_adaptive
from epbuf.engines.sgl_kernel_npu import normal_combine_need, normal_dispatch_need, readme_layered, readme_nonlayered
from epbuf.errors import InvalidArgumentError, UnknownNameError
from epbuf.report import report_from_dict
from epbuf.units import GiB, INT32_MAX, MiB

from _cli_run import run_cli, run_cli_whole  # tests/_cli_run.py (conftest puts tests/ on the path)


# The vLLM issue #57894 shape: DeepSeek-V4.1-Flash, hidden 5120, 384 routed + 64 redundant experts, EP16.
ISSUE = dict(hidden=5120, num_topk=8, num_experts=384, num_ranks=16)
ISSUE_FLAGS = {"--all2all-backend": "deepep_low_latency", "--enable-eplb": True, "--eplb-config": {"num_redundant_experts": 64}}


def vllm_ll(tokens: int, version: str = "dp-chunk", **kw):
    env = {"VLLM_MOE_DP_CHUNK_SIZE": str(tokens)} if version == "dp-chunk" else {}
    flags = dict(ISSUE_FLAGS)
    if version == "main":
        flags["--max-num-batched-tokens"] = tokens
    return report("vllm", **ISSUE, flags=flags, env=env, version=version, **kw)


def codes(rep) -> set[str]:
    return {f.code for f in rep.findings}


# --- CLI harness: `epbuf engine ...` as the console script runs it ------------------------------------
# ====================================================================================
# vLLM
# ====================================================================================
@pytest.mark.parametrize("tokens, gib, over", [
    (2048, 35.55, True),   # issue #57894 table: fails
    (1856, 32.21, True),   # issue #57894 table: fails
    (1840, 31.94, False),  # issue #57894 table: ok
    (1536, 26.66, False),  # issue #57894 table
])
def test_vllm_issue_57894_table(tokens, gib, over):
    rep = vllm_ll(tokens)
    rdma = rep.report.buffer("LL RDMA buffer")
    assert round(rdma.num_bytes / GiB, 2) == gib
    assert ("vllm.ll-32gib-ceiling" in codes(rep)) is over
    ceiling = [lim for lim in rep.limits if lim.name.startswith("num_rdma_bytes / sizeof(int4)")]
    assert len(ceiling) == 1 and ceiling[0].ok is (not over)
    assert rep.report.buffer("NVL buffer").num_bytes == 1024 * MiB  # VLLM_DEEPEP_BUFFER_SIZE_MB default


@pytest.mark.parametrize("version", ["dp-chunk", "main"])
def test_vllm_exact_ceiling_1843_from_the_assertion(version):
    """The largest T is computed from DeepEP's ``num_rdma_bytes / 16 < INT_MAX`` (buffer.hpp:112), not
    quoted from the issue: 1843 passes, 1844 does not."""
    rep = vllm_ll(2048, version)
    knob = "VLLM_MOE_DP_CHUNK_SIZE" if version == "dp-chunk" else "--max-num-batched-tokens"
    rec = rep.recommendation(knob, "limit")
    assert rec.value == 1843
    hint = deepep_v1.get_low_latency_rdma_size_hint
    assert hint(1843, 5120, 16, 448) // 16 < INT32_MAX <= hint(1844, 5120, 16, 448) // 16
    assert rec.num_bytes == 1024 * MiB + hint(1843, 5120, 16, 448) + 33_554_432 + 160  # + workspace, NVL metadata
    assert "vllm.ll-32gib-ceiling" not in codes(vllm_ll(1843, version))
    assert "vllm.ll-32gib-ceiling" in codes(vllm_ll(1844, version))


@pytest.mark.parametrize("hidden, experts, redundant, ceiling", [
    (5120, 384, 0, 2150),   # docs/derivations/engines.md §1.7 ex. 2: the 2048 guidance matches 384 experts
    (7168, 256, 32, 2048),  # docs/derivations/engines.md §1.7 ex. 2: H=7168, E=288
    (7168, 256, 0, 2304),   # docs/derivations/engines.md §1.7 ex. 2: H=7168, E=256
])
def test_vllm_ll_ceilings(hidden, experts, redundant, ceiling):
    flags = {"--all2all-backend": "deepep_low_latency", "--max-num-batched-tokens": 256}
    if redundant:
        flags |= {"--enable-eplb": True, "--eplb-config": {"num_redundant_experts": redundant}}
    rep = report("vllm", hidden=hidden, num_topk=8, num_experts=experts, num_ranks=16, flags=flags)
    assert rep.recommendation("--max-num-batched-tokens", "limit").value == ceiling


@pytest.mark.parametrize("tokens, experts, expected", [
    (256, 256, 3_816_818_816),  # docs/derivations/engines.md §1.7 ex. 1: get_low_latency_rdma_size_hint(256, 7168, 16, 256)
])
def test_vllm_ll_example_bytes(tokens, experts, expected):
    rep = report("vllm", model="deepseek-v3", num_ranks=16,
                 flags={"--all2all-backend": "deepep_low_latency", "--max-num-batched-tokens": tokens})
    assert rep.report.buffer("LL RDMA buffer").num_bytes == expected
    assert rep.report.quantity("num_qps_per_rank") == 16
    assert rep.num_bytes == expected + 1024 * MiB + 33_554_432 + 160  # + the Buffer's workspace and NVL metadata


@pytest.mark.parametrize("tokens, redundant, gib", [
    (256, 32, 3.999),     # docs/derivations/engines.md §1.7 ex. 1 with 32 EPLB redundant experts (E = 288)
    (1024, 0, 14.22),     # docs/derivations/engines.md §1.7 ex. 2, T = max_num_batched_tokens
    (2048, 0, 28.44),     # docs/derivations/engines.md §1.7 ex. 2
    (2560, 0, 35.55),     # docs/derivations/engines.md §1.7 ex. 2 (> 32 GiB)
    (8192, 0, 113.75),    # docs/derivations/engines.md §1.7 ex. 2 (a common server default)
])
def test_vllm_ll_main_examples(tokens, redundant, gib):
    flags = {"--all2all-backend": "deepep_low_latency", "--max-num-batched-tokens": tokens}
    if redundant:
        flags |= {"--enable-eplb": True, "--eplb-config": {"num_redundant_experts": redundant}}
    rep = report("vllm", model="deepseek-v3", num_ranks=16, flags=flags)
    digits = 3 if gib == 3.999 else 2
    assert round(rep.report.buffer("LL RDMA buffer").num_bytes / GiB, digits) == gib
    assert ("vllm.ll-32gib-ceiling" in codes(rep)) is (tokens > 2304)


def test_vllm_default_batched_tokens_follow_the_device():
    """EngineArgs.get_batch_defaults: 8192 on a >= 70 GiB GPU that is not an A100, else 2048."""
    base = dict(model="deepseek-v3", num_ranks=16, flags={"--all2all-backend": "deepep_low_latency"})
    assert report("vllm", device="h200", **base).setting("--max-num-batched-tokens").value == 8192
    assert report("vllm", device=("NVIDIA A100 80GB", 80 * GiB), **base).setting("--max-num-batched-tokens").value == 2048
    assert report("vllm", device=("L40S", 48 * GiB), **base).setting("--max-num-batched-tokens").value == 2048


def test_vllm_qp_depth_check_and_fix():
    """DeepEP (from d981409) asserts NVSHMEM_QP_DEPTH >= (T + 1) * 2; the default 1024 covers T <= 511."""
    ok = vllm_ll(511)
    assert all(lim.ok for lim in ok.limits if lim.name.startswith("NVSHMEM_QP_DEPTH"))
    bad = vllm_ll(512)
    assert not [lim for lim in bad.limits if lim.name.startswith("NVSHMEM_QP_DEPTH")][0].ok
    assert bad.recommendation("NVSHMEM_QP_DEPTH", "fix").value == 1026
    fixed = report("vllm", **ISSUE, flags=ISSUE_FLAGS, version="dp-chunk",
                   env={"VLLM_MOE_DP_CHUNK_SIZE": "512", "NVSHMEM_QP_DEPTH": "1026"})
    assert not fixed.errors()
    older = report("vllm", **ISSUE, flags=ISSUE_FLAGS, version="dp-chunk", backend_version="v1.2.1",
                   env={"VLLM_MOE_DP_CHUNK_SIZE": "1024"})
    assert not [lim for lim in older.limits if lim.name.startswith("NVSHMEM_QP_DEPTH")]


def test_vllm_version_picks_the_token_setting():
    """--engine-version main reads --max-num-batched-tokens; dp-chunk reads VLLM_MOE_DP_CHUNK_SIZE; the other one
    is reported as unused."""
    env = {"VLLM_MOE_DP_CHUNK_SIZE": "256"}
    flags = {"--all2all-backend": "deepep_low_latency", "--max-num-batched-tokens": 1024}
    main = report("vllm", model="deepseek-v3", num_ranks=16, flags=flags, env=env)
    old = report("vllm", model="deepseek-v3", num_ranks=16, flags=flags, env=env, version="dp-chunk")
    assert main.report.inputs["num_max_dispatch_tokens_per_rank"] == 1024
    assert old.report.inputs["num_max_dispatch_tokens_per_rank"] == 256
    assert "vllm.setting-unused" in codes(main) and "vllm.setting-unused" in codes(old)
    assert main.setting("num_max_tokens_per_rank (T)").note.startswith("--max-num-batched-tokens")


def test_vllm_ll_hidden_rounded_up():
    rep = report("vllm", hidden=2880, num_topk=4, num_experts=128, num_ranks=8,
                 flags={"--all2all-backend": "deepep_low_latency", "--max-num-batched-tokens": 128})
    assert rep.report.inputs["hidden"] == 3072 and "vllm.ll-hidden-rounded" in codes(rep)


@pytest.mark.parametrize("ranks, nodes, nvl_hint_mib, rdma, qps", [
    # docs/derivations/engines.md §1.7 ex. 3: internode, NVL = RDMA = 1 GiB, hint NVL 360.2 MiB
    (16, 2, 360.18, 1024 * MiB, 10),
    (8, 1, 320.16, 0, 1),             # docs/derivations/engines.md §1.7 ex. 3: intranode 8 ranks, RDMA 0, QPs 1, hint 320.2 MiB
])
def test_vllm_high_throughput(ranks, nodes, nvl_hint_mib, rdma, qps):
    rep = report("vllm", model="deepseek-v3", num_ranks=ranks, num_nodes=nodes,
                 flags={"--all2all-backend": "deepep_high_throughput"})
    assert rep.report.buffer("NVL buffer").num_bytes == 1024 * MiB
    assert rep.report.quantity("num_rdma_bytes") == rdma
    assert rep.report.quantity("num_qps_per_rank") == qps
    assert round(rep.report.quantity("deepep_nvl_hint") / MiB, 2) == nvl_hint_mib
    if rdma:
        assert round(rep.report.quantity("deepep_rdma_hint") / MiB, 2) == 87.63  # docs/derivations/engines.md §1.7 ex. 3
    assert rep.recommendation("VLLM_DEEPEP_BUFFER_SIZE_MB", "load").value == -(-int(
        max(rep.report.quantity("deepep_nvl_hint"), rep.report.quantity("deepep_rdma_hint") if rdma else 0)) // MiB)


def test_vllm_ht_force_intra_node_and_int_max():
    rep = report("vllm", model="deepseek-v3", num_ranks=16, flags={"--all2all-backend": "deepep_high_throughput"},
                 env={"VLLM_DEEPEP_HIGH_THROUGHPUT_FORCE_INTRA_NODE": "1"})
    assert rep.report.quantity("num_rdma_bytes") == 0 and "vllm.ht-force-intra-node" in codes(rep)
    big = report("vllm", model="deepseek-v3", num_ranks=16, flags={"--all2all-backend": "deepep_high_throughput"},
                 env={"VLLM_DEEPEP_BUFFER_SIZE_MB": "2048"})
    broken = {lim.name for lim in big.report.failed_limits()}
    assert "num_nvl_bytes <= INT_MAX (num_rdma_bytes > 0)" in broken
    assert big.recommendation("VLLM_DEEPEP_BUFFER_SIZE_MB", "limit").value == 2047
    # two nodes of four GPUs: "internode" with 8 ranks trips num_rdma_bytes > 0 => num_ranks > 8
    small = report("vllm", model="deepseek-v3", num_ranks=8, num_nodes=2,
                   flags={"--all2all-backend": "deepep_high_throughput"})
    assert "num_ranks > 8 (num_rdma_bytes > 0, normal mode)" in {lim.name for lim in small.report.failed_limits()}


def test_vllm_v2_is_deepep_v2_report():
    from epbuf.backends import deepep_v2
    from epbuf.plan import Plan

    rep = report("vllm", model="deepseek-v3", num_ranks=16, flags={"--all2all-backend": "deepep_v2",
                                                                   "--max-num-batched-tokens": 4096})
    plan = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_ranks_per_node=8,
                num_max_tokens_per_rank=4096, use_fp8_dispatch=False, allow_hybrid_mode=True,
                allow_multiple_reduction=False)
    assert rep.num_bytes == deepep_v2.report(plan).num_bytes


def test_vllm_no_deepep_backend():
    rep = report("vllm", model="deepseek-v3", flags={"--all2all-backend": "allgather_reducescatter"})
    assert rep.num_bytes == 0 and "vllm.no-deepep" in codes(rep)


# ====================================================================================
# SGLang
# ====================================================================================
@pytest.mark.parametrize("version, dtype, nvl, rdma", [
    ("param-bytes-2", "auto", 377_673_984, 91_887_744),  # docs/derivations/engines.md §2.5 ex. 1: 360.18 MiB / 87.63 MiB
    ("main", "bf16", 377_673_984, 91_887_744),           # BF16 output: param_bytes 2
    # docs/derivations/engines.md §2.5 ex. 1: param_bytes 1 -> 202.68 / 49.35 MiB
    ("main", "auto", 212_523_264, 51_746_944),
])
def test_sglang_normal_example(version, dtype, nvl, rdma):
    rep = report("sglang", model="deepseek-v3", version=version,
                 flags={"--tp-size": 16, "--deepep-mode": "normal", "--deepep-dispatcher-output-dtype": dtype})
    assert rep.report.buffer("NVL buffer").num_bytes == nvl
    assert rep.report.buffer("RDMA buffer").num_bytes == rdma
    assert rep.report.quantity("num_qps_per_rank") == 20
    assert ("sglang.param-bytes-1" in codes(rep)) is (nvl < 377_673_984)


def _config(num_sms: int) -> dict:
    # the default EP16 configs (DeepEP tables) with another num_sms, as --deepep-config JSON
    return {"normal_dispatch": {"num_sms": num_sms, "num_max_nvl_chunked_send_tokens": 36,
                                "num_max_nvl_chunked_recv_tokens": 288, "num_max_rdma_chunked_send_tokens": 20,
                                "num_max_rdma_chunked_recv_tokens": 128},
            "normal_combine": {"num_sms": num_sms, "num_max_nvl_chunked_send_tokens": 4,
                               "num_max_nvl_chunked_recv_tokens": 288, "num_max_rdma_chunked_send_tokens": 12,
                               "num_max_rdma_chunked_recv_tokens": 128}}


@pytest.mark.parametrize("num_sms, nvl, rdma, nvl_mib, rdma_mib", [
    (24, 453_208_704, 110_265_216, 432.2, 105.2),  # docs/derivations/engines.md §2.5 ex. 1 (MiB to one decimal there)
    (32, 604_278_272, 147_020_288, 576.3, 140.2),  # docs/derivations/engines.md §2.5 ex. 1
])
def test_sglang_deepep_config(tmp_path, num_sms, nvl, rdma, nvl_mib, rdma_mib):
    path = tmp_path / "deepep.json"
    path.write_text(json.dumps(_config(num_sms)))
    for value in (json.dumps(_config(num_sms)), str(path)):
        rep = report("sglang", model="deepseek-v3", version="param-bytes-2",
                     flags={"--tp-size": 16, "--deepep-mode": "normal", "--deepep-config": value})
        assert rep.report.buffer("NVL buffer").num_bytes == nvl and round(nvl / MiB, 1) == nvl_mib
        assert rep.report.buffer("RDMA buffer").num_bytes == rdma and round(rdma / MiB, 1) == rdma_mib
        assert rep.report.quantity("num_qps_per_rank") == num_sms


def test_sglang_auto_example():
    """docs/derivations/engines.md §2.5 ex. 2: auto, R=16, DeepSeek-V3 + 32 redundant (E=288), T=128."""
    rep = report("sglang", model="deepseek-v3", version="param-bytes-2",
                 flags={"--tp-size": 16, "--deepep-mode": "auto", "--ep-num-redundant-experts": 32})
    assert rep.report.buffer("NVL buffer").num_bytes == 377_673_984
    assert rep.report.buffer("RDMA buffer").num_bytes == 2_146_961_792
    assert rep.report.quantity("num_qps_per_rank") == 20
    assert rep.report.inputs["low_latency_mode"] is True


@pytest.mark.parametrize("tokens, rdma", [
    (128, 1_908_410_496),   # docs/derivations/engines.md §2.5 ex. 3
    (1024, None),           # docs/derivations/engines.md §2.5 ex. 3: 14.22 GiB at the maximum T
])
def test_sglang_low_latency_example(tokens, rdma):
    rep = report("sglang", model="deepseek-v3", flags={"--tp-size": 16, "--deepep-mode": "low_latency"},
                 env={"SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK": str(tokens)})
    buf = rep.report.buffer("RDMA buffer (low-latency)")
    if rdma is not None:
        assert buf.num_bytes == rdma
    else:
        assert round(buf.num_bytes / GiB, 2) == 14.22
    # num_nvl_bytes = 0: no NVL buffer and no NVL metadata; the constructor's workspace always
    assert [b.name for b in rep.report.buffers] == ["RDMA buffer (low-latency)", "workspace"]
    assert rep.num_bytes == buf.num_bytes + 33_554_432
    assert rep.report.quantity("num_qps_per_rank") == 16


def test_sglang_intranode_normal():
    """docs/derivations/engines.md §2.5 ex. 4: R=8, BF16: NVL 320.16 MiB, no RDMA buffer."""
    rep = report("sglang", model="deepseek-v3", version="param-bytes-2", flags={"--tp-size": 8, "--deepep-mode": "normal"})
    assert round((rep.num_bytes - 33_554_432 - 160) / MiB, 2) == 320.16  # minus the workspace and NVL metadata
    assert [b.name for b in rep.report.buffers] == ["NVL buffer", "NVL metadata", "workspace"]


def test_sglang_1024_cap_and_load():
    rep = report("sglang", model="deepseek-v3", flags={"--tp-size": 16, "--deepep-mode": "low_latency"},
                 env={"SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "1025"})
    assert "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK <= 1024" in {lim.name for lim in rep.report.failed_limits()}
    limit_rec = rep.recommendation("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "limit")
    assert limit_rec.value == 1024  # SGLang's cap binds before the 2304-token 32 GiB ceiling
    loaded = report("sglang", model="deepseek-v3", flags={"--tp-size": 16, "--deepep-mode": "low_latency"},
                    max_tokens_under_load=300)
    assert "sglang.tokens-above-capacity" in codes(loaded)
    assert loaded.recommendation("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "load").value == 300
    over = report("sglang", model="deepseek-v3", flags={"--tp-size": 16, "--deepep-mode": "low_latency"},
                  max_tokens_under_load=2000)
    assert over.recommendation("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "load").value is None


def test_sglang_ep_size_follows_tp_size():
    rep = report("sglang", model="deepseek-v3", flags={"--tp-size": 16, "--ep-size": 8, "--deepep-mode": "normal"})
    assert rep.setting("EP size").value == 16 and "sglang.ep-size-overridden" in codes(rep)


def test_sglang_v2():
    rep = report("sglang", model="deepseek-v3", flags={"--tp-size": 8, "--moe-a2a-backend": "deepep_v2"},
                 max_tokens_under_load=200)
    assert [b.name for b in rep.report.buffers] == ["EP buffer", "workspace"]
    assert "sglang.tokens-above-capacity" in codes(rep)


# ====================================================================================
# Megatron-LM
# ====================================================================================
@pytest.mark.parametrize("ranks, hidden, num_sms, nvl, rdma", [
    (8, 7168, None, "335709824", 0),          # docs/derivations/engines.md §3.4 row 1: 320.16 MiB, RDMA 0
    (16, 7168, None, "377673984", "91887744"),  # docs/derivations/engines.md §3.4 row 2
    (32, 7168, None, 360.18, 160.24),         # docs/derivations/engines.md §3.4 row 3
    (64, 7168, None, 360.18, 320.48),         # docs/derivations/engines.md §3.4 row 4
    (64, 7168, 24, 432.22, 384.58),           # docs/derivations/engines.md §3.4 row 5
    (16, 2048, None, 135.18, 32.94),          # docs/derivations/engines.md §3.4 row 6 (Qwen3-30B-A3B width)
])
def test_megatron_table(ranks, hidden, num_sms, nvl, rdma):
    flags = {"--expert-model-parallel-size": ranks}
    if num_sms:
        flags["--moe-flex-dispatcher-num-sms"] = num_sms
    rep = report("megatron", hidden=hidden, num_topk=8, num_experts=256, flags=flags)

    def check(name, expected):
        got = rep.report.quantity(name)
        if isinstance(expected, str):
            assert got == int(expected)
        else:
            assert round(got / MiB, 2) == expected

    check("num_nvl_bytes", nvl)
    check("num_rdma_bytes", rdma)


def test_megatron_fp8_same_as_bf16_and_group():
    rep = report("megatron", model="deepseek-v3",
                 flags={"--expert-model-parallel-size": 8, "--tensor-model-parallel-size": 2})
    assert rep.setting("DeepEP group size (tp_ep)").value == 16  # expert TP defaults to TP
    assert rep.setting("hidden_bytes").value == 7168 * 2
    with pytest.raises(InvalidArgumentError, match="TPxEP > 1"):
        report("megatron", model="deepseek-v3", flags={"--expert-model-parallel-size": 1})
    # issue 14 #7 (transformer_config.py:1792-1811 @d98e8a64): an explicit flex value wins over the deprecated knobs
    rep = report("megatron", model="deepseek-v3", flags={"--moe-flex-dispatcher-num-sms": 20, "--moe-deepep-num-sms": 24})
    assert rep.setting("num_sms").value == 20 and "megatron.deprecated-num-sms" in codes(rep)
    with pytest.raises(InvalidArgumentError, match="conflicts"):  # only the two deprecated knobs can disagree
        report("megatron", model="deepseek-v3", flags={"--moe-hybridep-num-sms": 20, "--moe-deepep-num-sms": 24})


# ====================================================================================
# sgl-kernel-npu
# ====================================================================================
@pytest.mark.parametrize("value, expected", [
    (readme_nonlayered(512, 16, 256, 8, 7168), 1_883_242_496),        # docs/derivations/engines.md §4.5: README non-layered
    (readme_layered(512, 256, 8, 7168), 2_738_880_512),               # docs/derivations/engines.md §4.5: README layered
    (ll_window_need(512, 7168, 16, 256, 8), 4_009_754_624),           # docs/derivations/engines.md §4.5: A3 LL BF16 (3824 MiB)
    (ll_dispatch_need(512, 7168, 16, 256, 8, dispatch_dtype_bytes=1), 2_130_706_432),  # int8 dispatch check (2032 MiB)
    (ll_window_need(128, 7168, 16, 256, 8), 1_002_438_656),           # T = 128 BF16 (956 MiB)
    (ll_dispatch_need(128, 7168, 16, 256, 8, dispatch_dtype_bytes=1), 532_676_608),  # T = 128 int8 dispatch (508 MiB)
    (normal_dispatch_need(512, 7168, 8), 461_373_440),                # normal dispatch 512 (440 MiB)
    (normal_combine_need(512, 7168, 8), 339_738_624),                 # normal combine 512 (324 MiB)
    (normal_dispatch_need(4096, 7168, 8), 2_134_900_736),             # 2036 MiB
    (normal_dispatch_need(8192, 7168, 8), 4_047_503_360),             # 3860 MiB
])
def test_sgl_kernel_npu_minimums(value, expected):
    assert value == expected


def test_sgl_kernel_npu_recipe_ll():
    base = dict(hidden=7168, num_topk=8, num_experts=256,
                flags={"--ep-size": 16, "--deepep-mode": "low_latency"})
    rep = report("sgl-kernel-npu", **base, env={"SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "512"})
    assert rep.num_bytes == 2 * 200 * MiB  # one EP communicator, 2 x HCCL_BUFFSIZE default
    assert rep.recommendation("HCCL_BUFFSIZE", "load").value == 3824
    assert "sgl-kernel-npu.limit" in codes(rep)
    fixed = report("sgl-kernel-npu", **base,
                   env={"SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "512", "HCCL_BUFFSIZE": "3824"})
    assert not fixed.errors() and fixed.num_bytes == 2 * 3824 * MiB
    tight = report("sgl-kernel-npu", **base,
                   env={"SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "512", "HCCL_BUFFSIZE": "3823"})
    assert tight.errors()
    # the largest T the default 200 MiB window passes, exactly
    t = report("sgl-kernel-npu", **base).recommendation("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "limit").value
    assert ll_window_need(t, 7168, 16, 256, 8) <= 200 * MiB < ll_window_need(t + 1, 7168, 16, 256, 8)


def test_sgl_kernel_npu_window_wraps_and_deepep_variable():
    """GetMaxWindowSize stores the value in a uint16_t."""
    assert tiling_window_mib(65536 + 3824) == 3824
    rep = report("sgl-kernel-npu", model="deepseek-v3", flags={"--ep-size": 16}, env={"HCCL_BUFFSIZE": str(65536 + 200)})
    assert "ascend.window-wraps" in codes(rep)
    rep = report("sgl-kernel-npu", model="deepseek-v3", flags={"--ep-size": 16, "--deepep-mode": "low_latency"},
                 env={"HCCL_BUFFSIZE": "200", "DEEPEP_HCCL_BUFFSIZE": "4000"})
    assert "ascend.deepep-buffsize-above-window" in codes(rep)
    assert rep.setting("window the ops read (MiB)").value == 4000


def test_sgl_kernel_npu_normal_uses_load_and_rounds():
    rep = report("sgl-kernel-npu", model="deepseek-v3", flags={"--ep-size": 16, "--deepep-mode": "normal"},
                 max_tokens_under_load=512, env={"HCCL_BUFFSIZE": "440"})
    assert not rep.errors()  # dispatch needs 440 MiB, combine 324 MiB
    rep = report("sgl-kernel-npu", model="deepseek-v3", flags={"--ep-size": 16, "--deepep-mode": "normal"},
                 env={"DEEPEP_NORMAL_LONG_SEQ_ROUND": "2", "DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS": "4096"})
    assert rep.setting("normal-mode tokens per rank").value == 4096
    assert rep.recommendation("HCCL_BUFFSIZE", "load").value == -(-normal_dispatch_need(4096, 7168, 8, 2) // MiB)


def test_sgl_kernel_npu_a2_readme():
    rep = report("sgl-kernel-npu", model="deepseek-v3", flags={"--ep-size": 16, "--deepep-mode": "low_latency",
                                                               "--soc": "a2"},
                 env={"SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "512", "HCCL_INTRA_PCIE_ENABLE": "1",
                      "HCCL_INTRA_ROCE_ENABLE": "0"})
    assert rep.recommendation("HCCL_BUFFSIZE", "load").value == -(-2_738_880_512 // MiB)  # layered


# ====================================================================================
# MindSpeed
# ====================================================================================
MS_BASE = dict(context_parallel_algo=None, moe_tp_extend_ep=False)


@pytest.mark.parametrize("kw, expected", [
    # docs/derivations/engines.md §5.3 ex. 1 (f = 1.0) and the default f = -1
    (dict(seq_length=4096, micro_batch_size=1, hidden_size=7168, context_parallel_size=1, tensor_model_parallel_size=1,
          expert_model_parallel_size=16, moe_router_topk=8, moe_token_dispatcher_type="alltoall", factor=1.0,
          sequence_parallel=True), dict(tp=56, pp=56, pp_new_stream=56, exp=448, cp=56, mp=10, mp_exp=10, tp_cp=10)),
    (dict(seq_length=4096, micro_batch_size=1, hidden_size=7168, context_parallel_size=1, tensor_model_parallel_size=1,
          expert_model_parallel_size=16, moe_router_topk=8, moe_token_dispatcher_type="alltoall", factor=-1.0,
          sequence_parallel=True), dict(exp=200)),
    # docs/derivations/engines.md §5.3 ex. 2: alltoall_seq + moe-tp-extend-ep, SP, f = 1.5 (exp ignores f)
    (dict(seq_length=32768, micro_batch_size=1, hidden_size=5120, context_parallel_size=2, tensor_model_parallel_size=4,
          expert_model_parallel_size=8, moe_router_topk=8, moe_token_dispatcher_type="alltoall_seq", factor=1.5,
          sequence_parallel=True, moe_tp_extend_ep=True), dict(tp=480, pp=40, exp=320, tp_exp=480, cp=40)),
    # docs/derivations/engines.md §5.3 ex. 3: allgather, no SP, f = 2.0
    (dict(seq_length=8192, micro_batch_size=2, hidden_size=4096, context_parallel_size=1, tensor_model_parallel_size=2,
          expert_model_parallel_size=8, moe_router_topk=2, moe_token_dispatcher_type="allgather", factor=2.0,
          sequence_parallel=False), dict(tp=256, pp=128, exp=128, tp_exp=2048, cp=64)),
])
def test_mindspeed_adaptive(kw, expected):
    groups = mindspeed_adaptive(**{**MS_BASE, **kw})
    assert {k: groups[k] for k in expected} == expected


MS_FLAGS = {"--hccl-group-buffer-adaptive": True, "--hccl-ep-group-buffer-adaptive-factor": 1.0, "--seq-length": 4096,
            "--expert-model-parallel-size": 16, "--sequence-parallel": True, "--moe-token-dispatcher-type": "alltoall"}


def test_mindspeed_recipe_groups():
    """A Megatron that names its expert groups exp / tp_exp / mp_exp (core_r0.8.0): the adaptive keys match."""
    rep = report("mindspeed", hidden=7168, num_topk=8, num_experts=256,
                 flags={**MS_FLAGS, "--megatron-version": "core_r0.8.0"})
    by_name = {b.name.split(":")[1].split("(")[0].strip(): b.num_bytes for b in rep.report.buffers}
    assert by_name["exp group"] == 2 * 448 * MiB  # each communicator takes 2 x hccl_buffer_size
    assert by_name["tp_exp group"] == 2 * 200 * MiB  # alltoall: tp_exp unset -> HCCL_BUFFSIZE
    assert by_name["mp_exp group"] == 2 * 10 * MiB
    assert rep.report.quantity("group_buffer_mb.exp") == 448


def test_mindspeed_manual_values_by_version():
    flags = {"--expert-model-parallel-size": 16, "--hccl-group-buffer": "exp:300;tp_exp:50",
             "--megatron-version": "core_r0.8.0"}
    main = report("mindspeed", model="deepseek-v3", flags=flags)
    assert "mindspeed.manual-not-applied" in codes(main)
    assert all(b.num_bytes == 400 * MiB for b in main.report.buffers)  # nothing applied: HCCL_BUFFSIZE everywhere
    legacy = report("mindspeed", model="deepseek-v3", flags=flags, version="legacy")
    exp = [b for b in legacy.report.buffers if "exp group" in b.name and "tp_exp" not in b.name and "mp_exp" not in b.name]
    assert exp[0].num_bytes == 600 * MiB
    comma = report("mindspeed", model="deepseek-v3",
                   flags={**flags, "--hccl-group-buffer": "exp:300,tp_exp:50", "--hccl-group-buffer-adaptive": True})
    semicolon = report("mindspeed", model="deepseek-v3", flags={**flags, "--hccl-group-buffer-adaptive": True})
    assert comma.num_bytes == semicolon.num_bytes  # ',' separates too in the feature-manager parser (verl)
    with pytest.raises(InvalidArgumentError, match="splits on ';' only"):  # issue 14 #5: parallel_state.py:86
        report("mindspeed", model="deepseek-v3", version="legacy",
               flags={**flags, "--hccl-group-buffer": "exp:300,tp_exp:50"})


def test_mindspeed_factor_budget_is_exact():
    flags = {**MS_FLAGS, "--moe-token-dispatcher-type": "allgather", "--megatron-version": "core_r0.8.0"}
    budget = 3 * GiB
    rep = report("mindspeed", model="deepseek-v3", flags=flags, budget=budget)
    rec = rep.recommendation("--hccl-ep-group-buffer-adaptive-factor", "budget")
    assert rec.num_bytes <= budget
    nxt = report("mindspeed", model="deepseek-v3",
                 flags={**flags, "--hccl-ep-group-buffer-adaptive-factor": round(rec.value + 0.01, 2)})
    assert nxt.num_bytes > budget


# ====================================================================================
# vllm-ascend
# ====================================================================================
def test_vllm_ascend_groups_example():
    """docs/derivations/engines.md §6.4 ex. 1: DP=32, TP=1, EP=32, HCCL_BUFFSIZE unset."""
    rep = report("vllm-ascend", model="deepseek-v3",
                 flags={"--data-parallel-size": 32, "--enable-expert-parallel": True,
                        "--additional-config": {"eplb_config": {"dynamic_eplb": True}}})
    mb = {b.name.split(":")[1].split("(")[0].strip(): b.num_bytes // (2 * MiB) for b in rep.report.buffers}
    assert mb == {"world group": 200, "dp group": 50, "ep group": 200, "mc2 group": 200, "dynamic_eplb group": 100}


@pytest.mark.parametrize("experts_extra, capture, mib", [
    (0, 256, 1912),   # docs/derivations/engines.md §6.4 ex. 2
    (16, 256, 2028),  # docs/derivations/engines.md §6.4 ex. 2: 16 EPLB redundant experts (17 local)
    (0, 1024, 3824),  # docs/derivations/engines.md §6.4 ex. 2: at the 512-token cap
])
def test_vllm_ascend_mc2_need(experts_extra, capture, mib):
    extra = {"eplb_config": {"dynamic_eplb": True, "num_redundant_experts": experts_extra}} if experts_extra else {}
    rep = report("vllm-ascend", hidden=7168, num_topk=8, num_experts=256,
                 flags={"--data-parallel-size": 16, "--enable-expert-parallel": True,
                        "--max-cudagraph-capture-size": capture, "--max-num-batched-tokens": 8192,
                        "--additional-config": extra})
    assert rep.report.quantity("mc2_need_bytes") == mib * MiB
    assert rep.recommendation("HCCL_BUFFSIZE", "load").value == mib
    assert ("vllm-ascend.mc2-capped" in codes(rep)) is (capture > 512)


def test_vllm_ascend_capacity_default_and_limit_rec():
    rep = report("vllm-ascend", model="deepseek-v3", device="910b3",
                 flags={"--data-parallel-size": 16, "--enable-expert-parallel": True})
    # issue 14 #6: capture size default min(max_num_seqs 256 x 1, 512) = 256 on a < 70 GiB device
    # (vllm-ascend platform.py:1275-1309 drops vLLM's x 2)
    assert rep.setting("MC2 tokens per rank").value == 256
    tokens = rep.recommendation("--max-cudagraph-capture-size", "limit").value
    assert ll_window_need(tokens, 7168, 16, 256, 8) <= 200 * MiB < ll_window_need(tokens + 1, 7168, 16, 256, 8)


# ====================================================================================
# Recommendations are exact: the value fits, the next one does not
# ====================================================================================
@settings(max_examples=15, deadline=None)
@given(budget_mib=st.integers(min_value=1100, max_value=40000))
def test_vllm_ll_budget_recommendation_is_exact(budget_mib):
    """Invariant: total(value) <= budget < total(value + 4) (T steps by 4 keep 16 * T % 4 == 0 trivially, so +1)."""
    budget = budget_mib * MiB
    rep = vllm_ll(256, budget=budget)
    rec = rep.recommendation("VLLM_MOE_DP_CHUNK_SIZE", "budget")
    hint = lambda t: deepep_v1.get_low_latency_rdma_size_hint(t, 5120, 16, 448)  # noqa: E731
    fixed = 1024 * MiB + 33_554_432 + 160  # NVL buffer + the constructor's workspace and NVL metadata
    if rec.value is None:
        assert fixed + hint(1) > budget
        return
    assert rec.num_bytes == fixed + hint(rec.value) <= budget
    assert rec.value == 1843 or fixed + hint(rec.value + 1) > budget


@settings(max_examples=10, deadline=None)
@given(budget_mib=st.integers(min_value=2000, max_value=20000))
def test_sglang_budget_recommendation_is_exact(budget_mib):
    """Invariant: NVL + max(normal RDMA, LL hint(T)) fits for T = value and not for value + 1 (below SGLang's cap)."""
    budget = budget_mib * MiB
    rep = report("sglang", model="deepseek-v3", version="param-bytes-2", budget=budget,
                 flags={"--tp-size": 16, "--deepep-mode": "auto"})
    rec = rep.recommendation("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "budget")
    nvl, normal_rdma = 377_673_984 + 33_554_432 + 160, 91_887_744  # NVL buffer + workspace + NVL metadata
    total = lambda t: nvl + max(normal_rdma, deepep_v1.get_low_latency_rdma_size_hint(t, 7168, 16, 256))  # noqa: E731
    assert total(rec.value) == rec.num_bytes <= budget
    assert rec.value == 1024 or total(rec.value + 1) > budget


@settings(max_examples=10, deadline=None)
@given(budget_mib=st.integers(min_value=64, max_value=40000))
def test_v2_budget_recommendation_is_exact(budget_mib):
    budget = budget_mib * MiB
    flags = {"--all2all-backend": "deepep_v2", "--max-num-batched-tokens": 1024}
    rec = report("vllm", model="deepseek-v3", num_ranks=8, flags=flags, budget=budget).recommendation(
        "--max-num-batched-tokens", "budget")
    if rec.value is None:
        return
    at = lambda t: report("vllm", model="deepseek-v3", num_ranks=8,  # noqa: E731
                          flags={**flags, "--max-num-batched-tokens": t}).num_bytes
    assert at(rec.value) == rec.num_bytes <= budget < at(rec.value + 1)


@pytest.mark.parametrize("budget_gib", [1, 2.5, 4, 64])
def test_ht_and_hccl_budget_recommendations_are_exact(budget_gib):
    budget = int(budget_gib * GiB)
    ht = report("vllm", model="deepseek-v3", num_ranks=16, flags={"--all2all-backend": "deepep_high_throughput"},
                budget=budget).recommendation("VLLM_DEEPEP_BUFFER_SIZE_MB", "budget")
    ctor = 33_554_432 + 160  # the constructor's workspace and NVL metadata
    assert ht.num_bytes == ht.value * MiB * 2 + ctor <= budget
    assert ht.value == 2047 or (ht.value + 1) * MiB * 2 + ctor > budget
    npu = report("sgl-kernel-npu", model="deepseek-v3", flags={"--ep-size": 16},
                 budget=budget).recommendation("HCCL_BUFFSIZE", "budget")
    assert 2 * npu.value * MiB <= budget < 2 * (npu.value + 1) * MiB


@pytest.mark.parametrize("budget_mib", [300, 600, 1024, 4096])
def test_megatron_num_sms_budget_is_exact(budget_mib):
    budget = budget_mib * MiB
    rec = report("megatron", model="deepseek-v3", flags={"--expert-model-parallel-size": 16},
                 budget=budget).recommendation("--moe-flex-dispatcher-num-sms", "budget")
    at = lambda sms: report("megatron", model="deepseek-v3", flags={  # noqa: E731
        "--expert-model-parallel-size": 16, "--moe-flex-dispatcher-num-sms": sms}).num_bytes
    assert at(rec.value) <= budget < at(rec.value + 2)


def test_largest_true_matches_linear_scan():
    for bound in range(0, 60):
        assert largest_true(0, 100, lambda x: x * x <= bound) == max(x for x in range(101) if x * x <= bound)


# ====================================================================================
# Errors: every flag / variable path is one line naming it, the value and what is allowed
# ====================================================================================
@pytest.mark.parametrize("argv, needle", [
    (["engine", "vllm", "--env", "FOO=1"], "--env FOO = '1': "),
    (["engine", "vllm", "--env", "VLLM_DEEPEP_BUFFER_SIZE_MB=abc"],
     "--env VLLM_DEEPEP_BUFFER_SIZE_MB = 'abc': allowed an integer in 0..8796093022207"),
    (["engine", "vllm", "--env", "VLLM_DEEPEP_BUFFER_SIZE_MB=-1"], "allowed an integer in 0..8796093022207"),
    (["engine", "vllm", "--env", "VLLM_MOE_DP_CHUNK_SIZE=0"], "--env VLLM_MOE_DP_CHUNK_SIZE = '0': allowed an integer >= 1"),
    (["engine", "vllm", "--env", "VLLM_MOE_DP_CHUNK_SIZE=1_000"], "VLLM_MOE_DP_CHUNK_SIZE = '1_000'"),
    (["engine", "vllm", "--env", "VLLM_DEEPEP_HIGH_THROUGHPUT_FORCE_INTRA_NODE=yes"], "allowed 0 or 1"),
    (["engine", "vllm", "--env", "VLLM_ALL2ALL_BACKEND=nosuch"], "--env VLLM_ALL2ALL_BACKEND = 'nosuch': allowed one of"),
    (["engine", "vllm", "--env", "NVSHMEM_QP_DEPTH=0"], "--env NVSHMEM_QP_DEPTH = '0'"),
    (["engine", "vllm", "--env", "NOEQUALS"], "--env = 'NOEQUALS': expected NAME=VALUE"),
    (["engine", "vllm", "--max-num-batched-tokens", "x"], "--max-num-batched-tokens = 'x': allowed an integer >= 1"),
    (["engine", "vllm", "-tp", "0"], "--tensor-parallel-size = '0'"),
    (["engine", "vllm", "--all2all-backend", "nosuch"], "--all2all-backend = 'nosuch': allowed one of deepep_low_latency"),
    (["engine", "vllm", "--eplb-config", "{bad"], "--eplb-config = '{bad': allowed a JSON object"),
    (["engine", "vllm", "--eplb-config", "[1]"], "a JSON object, not list"),
    (["engine", "vllm", "--eplb-config", '{"num_redundant_experts": -1}', "--enable-eplb"], "num_redundant_experts"),
    (["engine", "vllm", "--ranks", "16", "-tp", "4"], "--ranks = 16: vLLM's EP size"),  # issue 12: as typed
    (["engine", "vllm", "--ep-size", "16", "-tp", "4"], "--ep-size = 16: vLLM's EP size"),
    (["engine", "vllm", "--hidden", "9000"], "--hidden = 9000"),
    (["engine", "vllm", "--ranks", "16", "--gpus-per-node", "3"], "--gpus-per-node = 3: must divide the EP size 16"),
    (["engine", "vllm", "--ranks", "16", "--nodes", "4", "--gpus-per-node", "8"], "must equal the EP size"),
    (["engine", "vllm", "--deepep-version", "nope"], "--backend-version (version) = 'nope'"),
    (["engine", "vllm", "--engine-version", "v9"], "'v9' is none of"),
    (["engine", "vllm", "--max-num-batch", "5"], "did you mean --max-num-batched-tokens?"),
    (["engine", "vllm", "--budget", "lots"], "allowed e.g. 8GiB, 80GB, 3e9 or 10%"),
    (["engine", "vllm", "--model", "nosuch"], "--model (model) = 'nosuch'"),
    (["engine", "sglang", "--env", "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK=many"],
     "--env SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK = 'many': allowed an integer >= 1"),
    (["engine", "sglang", "--deepep-mode", "fast"], "--deepep-mode = 'fast': allowed one of normal, low_latency, auto"),
    (["engine", "sglang", "--deepep-config", '{"normal_dispatch": {}}'], "'normal_combine'"),
    (["engine", "sglang", "--deepep-config", '{"normal_dispatch": {"foo": 1}, "normal_combine": {}}'], "normal_dispatch"),
    (["engine", "sglang", "--deepep-config", "/no/such/file.json"], "No such file"),
    (["engine", "sglang", "--moe-a2a-backend", "deepep_v2", "--deepep-dispatcher-output-dtype", "nvfp4"], "bf16/fp8"),
    (["engine", "megatron", "--moe-flex-dispatcher-num-sms", "21"], "must be even"),
    (["engine", "megatron", "--moe-flex-dispatcher-backend", "hybridep"], "epbuf models the deepep backend of flex"),
    (["engine", "megatron", "--expert-model-parallel-size", "8", "--ranks", "16"], "--ranks = 16"),
    (["engine", "sgl-kernel-npu", "--env", "HCCL_BUFFSIZE=0"], "--env HCCL_BUFFSIZE = '0': allowed an integer >= 1"),
    (["engine", "sgl-kernel-npu", "--env", "HCCL_BUFFSIZE=200MB"], "--env HCCL_BUFFSIZE = '200MB'"),
    (["engine", "sgl-kernel-npu", "--deepep-version", "main"], "--deepep-version = 'main': not an option"),
    (["engine", "sgl-kernel-npu", "--ep-size", "16", "--env", "MOE_SHARED_EXPERT_RANK_NUM=16"],
     "--env MOE_SHARED_EXPERT_RANK_NUM = 16: must be below the EP size 16"),
    (["engine", "sgl-kernel-npu", "--env", "DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS=0"], "allowed an integer >= 1"),
    (["engine", "sglang", "--deepep-mode", "normal", "--tp-size", "12"], "Unsupported number of EP ranks"),
    (["engine", "mindspeed", "--hccl-group-buffer", "tp:0"], "value 0 for key 'tp' must be greater than 0"),
    (["engine", "mindspeed", "--hccl-group-buffer", "foo:1"], "key 'foo' is not allowed"),
    (["engine", "mindspeed", "--hccl-group-buffer", "tp=5"], "expected 'key:value' pairs"),
    (["engine", "mindspeed", "--hccl-ep-group-buffer-adaptive-factor", "x"], "allowed a finite number"),
    (["engine", "vllm-ascend", "--env", "HCCL_BUFFSIZE=x"], "--env HCCL_BUFFSIZE = 'x'"),
    (["engine", "vllm-ascend", "--additional-config", "nope"], "--additional-config = 'nope'"),
    (["engine", "nosuch"], "invalid choice: 'nosuch'"),
])
def test_error_paths_are_one_line(capsys, argv, needle):
    code, out, err = run_cli_whole(capsys, *argv)
    assert code == 2, (out, err)
    assert needle in err
    assert err.count("\n") == 1 and out == ""


def test_python_api_errors():
    with pytest.raises(UnknownNameError):
        report("tensorrt-llm")
    with pytest.raises(InvalidArgumentError, match="--engine-version = 'x'"):
        report("vllm", version="x")
    with pytest.raises(InvalidArgumentError, match="--max-num-batched-tokns"):
        report("vllm", flags={"--max-num-batched-tokns": 5})
    with pytest.raises(InvalidArgumentError, match="does not use DeepEP"):
        report("mindspeed", backend_version="main")
    with pytest.raises(InvalidArgumentError) as info:  # every problem of one call together
        report("vllm", env={"VLLM_MOE_DP_CHUNK_SIZE": "0", "VLLM_DEEPEP_BUFFER_SIZE_MB": "x"})
    assert len(info.value.problems) == 2


def test_parse_knob_accepts_what_engines_parse():
    k = Knob(name="X", kind="bool")
    assert parse_knob(k, "1") is True and parse_knob(k, "0") is False and parse_knob(k, "2") is True
    assert parse_knob(Knob(name="N", kind="int", lo=1), "+7") == 7
    assert parse_knob(Knob(name="F", kind="float"), "1.5") == 1.5


# ====================================================================================
# CLI output and JSON schema
# ====================================================================================
def test_cli_table_answers_the_question(capsys):
    code, out, err = run_cli(
        capsys, "engine", "vllm", "--env", "VLLM_DEEPEP_BUFFER_SIZE_MB=1024", "--env", "VLLM_MOE_DP_CHUNK_SIZE=2048",
        "--all2all-backend", "deepep_low_latency", "--enable-eplb", "--eplb-config", '{"num_redundant_experts": 64}',
        "--hidden", "5120",
        "--experts", "384", "--topk", "8", "--ep-size", "16", "--engine-version", "dp-chunk", "--device", "h200",
        "--budget", "30GiB", "--max-tokens-under-load", "1024")
    assert code == 0 and err == ""
    for text in ("LL RDMA buffer", "38,168,170,112", "35.55 GiB", "VLLM_MOE_DP_CHUNK_SIZE=1843", "share of",
                 "over by", "[vllm.ll-32gib-ceiling]", "What to set"):
        assert text in out


@pytest.mark.parametrize("name", list(ENGINES))
def test_every_engine_runs_with_defaults_and_json(capsys, name):
    code, out, err = run_cli(capsys, "engine", name, "--json", "--budget", "8GiB", "--device", "h200")
    assert code == 0, err
    data = json.loads(out)
    assert data["schema"] == SCHEMA == "epbuf.engine/1"
    assert set(data) >= {"engine", "version", "version_note", "title", "settings", "num_bytes", "num_bytes_needed",
                         "device", "budget", "fits_budget", "errors", "recommendations", "report"}
    assert data["engine"] == name and data["version"] in get_engine(name).versions
    for s in data["settings"]:
        assert set(s) == {"name", "value", "source", "note"} and s["source"] in ("flag", "env", "default", "model",
                                                                                   "derived")
    for r in data["recommendations"]:
        assert set(r) == {"setting", "value", "goal", "num_bytes", "message"}
        assert r["goal"] in ("load", "budget", "limit", "fix")
    assert data["report"]["schema"] == "epbuf.report/1"
    assert data["num_bytes"] == data["report"]["num_bytes"] == sum(b["num_bytes"] for b in data["report"]["buffers"])
    assert data["device"]["share"] == data["num_bytes"] / data["device"]["num_bytes"]
    assert data["fits_budget"] == (data["num_bytes"] <= 8 * GiB)
    assert report_from_dict(data["report"]).num_bytes == data["num_bytes"]
    code, out, _ = run_cli(capsys, "engine", name, "--verbose")
    assert code == 0 and "Allocations per device" in out


def test_engine_help_lists_flags_and_variables(capsys):
    code, out, _ = run_cli(capsys, "engine", "vllm", "--help")
    assert code == 0
    for text in ("--max-num-batched-tokens", "VLLM_DEEPEP_BUFFER_SIZE_MB (default 1024", "--env NAME=VALUE", "-tp"):
        assert text in out
    code, out, _ = run_cli(capsys, "engine", "--help")
    assert code == 0 and all(name in out for name in engine_names())
    code, _, err = run_cli(capsys, "engine")
    assert code == 2 and "engines: vllm" in err


def test_json_roundtrip_through_python_api():
    rep = vllm_ll(2048, budget=20 * GiB)
    data = engine_report_to_dict(rep)
    assert json.loads(json.dumps(data)) == data
    assert data["errors"] and "vllm.ll-32gib-ceiling" in data["errors"]
    assert {r["goal"] for r in data["recommendations"]} >= {"limit", "budget"}


def test_registered_in_main_cli(capsys):
    from epbuf.cli import build_parser

    sub = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)][0]
    assert "engine" in sub.choices
    code = main(["engine", "megatron", "--expert-model-parallel-size", "16", "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["num_bytes"] == 377_673_984 + 91_887_744 + 33_554_432 + 160
    assert main(["engine", "vllm", "--env", "FOO=1"]) == 2


def test_registering_the_command_imports_no_engine():
    probe = (
        "import sys\n"
        "from epbuf.cli import build_parser\n"
        "build_parser(['engine'])\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('epbuf.engines.') or m.startswith('epbuf.backends'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", out


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_engine_strict_exits_1_on_an_error_finding(capsys, extra):
    """``epbuf engine NAME --strict``: status 1 when the report has an error finding, as ``hint --strict``."""
    def argv(tokens: int) -> list[str]:  # issue #57894: T = 2048 is 35.55 GiB, above the 32 GiB ceiling; 1843 is not
        return ["engine", "vllm", "--all2all-backend", "deepep_low_latency", "--enable-eplb", "--eplb-config",
                '{"num_redundant_experts": 64}', "--hidden", "5120", "--experts", "384", "--topk", "8", "--ep-size", "16",
                "--env",
                "NVSHMEM_QP_DEPTH=4098", "--max-num-batched-tokens", str(tokens), *extra]

    code, out, _ = run_cli(capsys, *argv(2048))
    assert code == 0 and "vllm.ll-32gib-ceiling" in out
    code, out, _ = run_cli(capsys, *argv(2048), "--strict")
    assert code == 1 and "vllm.ll-32gib-ceiling" in out
    code, out, _ = run_cli(capsys, *argv(1843), "--strict")
    assert code == 0 and "vllm.ll-32gib-ceiling" not in out


# ====================================================================================
# Plans the engine (or DeepEP) refuses although their sizes can be computed: numbers plus an
# error finding naming the check (README, "Plans upstream would refuse: one rule")
# ====================================================================================
VLLM_HT = ["engine", "vllm", "--all2all-backend", "deepep_high_throughput"]
ROUND_ENV = "DEEPEP_NORMAL_LONG_SEQ_ROUND"
PER_ROUND_ENV = "DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS"


@pytest.mark.parametrize("argv, limit_name, source, num_bytes", [
    # vLLM FusedMoE.__init__: no redundant experts without EPLB; the HT buffers are VLLM_DEEPEP_BUFFER_SIZE_MB
    (VLLM_HT + ["--eplb-config", '{"num_redundant_experts": 5}'], "redundant experts == 0 without --enable-eplb",
     "assert num_redundant_experts == 0", 1024 * MiB + 33_554_432 + 160),
    # ... and with EPLB 256 + 5 experts over 16 ranks; 16 ranks span two nodes: NVL + RDMA, 1 GiB each
    (VLLM_HT + ["--enable-eplb", "--eplb-config", '{"num_redundant_experts": 5}', "--ranks", "16"],
     "experts (routed + redundant) % EP size == 0 (--enable-eplb)", "assert self.global_num_experts % self.ep_size",
     2 * 1024 * MiB + 33_554_432 + 160),
    # DeepEP's Buffer constructor: 12 ranks (buffer.hpp:114); vLLM sizes HT buffers without DeepEP's configs
    (VLLM_HT + ["--ranks", "12"], "num_ranks < 8 or num_ranks % 8 == 0", "csrc/legacy/buffer.hpp:114",
     1024 * MiB + 33_554_432 + 160),
    # sgl-kernel-npu deep_ep.Buffer's constructor (deep_ep.cpp:70-86); the window is HCCL_BUFFSIZE, 2 x 200 MiB
    (["engine", "sgl-kernel-npu", "--env", f"{ROUND_ENV}=2"],
     "DEEPEP_NORMAL_LONG_SEQ_ROUND set iff _PER_ROUND_TOKENS set (1: only one is)", "deep_ep.cpp:70", 400 * MiB),
    (["engine", "sgl-kernel-npu", "--env", f"{ROUND_ENV}=300", "--env", f"{PER_ROUND_ENV}=512"],
     "DEEPEP_NORMAL_LONG_SEQ_ROUND <= 256", "deep_ep.cpp:80", 400 * MiB),
    (["engine", "sgl-kernel-npu", "--env", f"{ROUND_ENV}=2", "--env", f"{PER_ROUND_ENV}=16"],
     "DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS >= 32", "deep_ep.cpp:82", 400 * MiB),
    (["engine", "sgl-kernel-npu", "--env", f"{ROUND_ENV}=32", "--env", f"{PER_ROUND_ENV}=8192"],
     "DEEPEP_NORMAL_LONG_SEQ_ROUND x _PER_ROUND_TOKENS <= 131072", "deep_ep.cpp:84", 400 * MiB),
])
def test_refused_but_sizable_is_an_error_finding(capsys, argv, limit_name, source, num_bytes):
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    assert data["num_bytes"] == num_bytes
    (lim,) = [x for x in data["report"]["limits"] if x["name"] == limit_name]
    assert lim["ok"] is False and source in lim["source"]
    errors = [f for f in data["report"]["findings"] if f["severity"] == "error" and f["data"].get("limit") == limit_name]
    assert len(errors) == 1 and source in errors[0]["message"]
    assert run_cli(capsys, *argv, "--strict")[0] == 1


def test_sgl_kernel_npu_rounds_still_size_the_checks():
    """With ``DEEPEP_NORMAL_LONG_SEQ_ROUND=2`` alone the constructor refuses, and the normal-mode
    checks are sized as upstream would with two rounds of the default 8192 tokens; the combine runs one
    round of 8192 unless DEEPEP_NORMAL_COMBINE_ENABLE_LONG_SEQ=1 (issue 14 #3, deep_ep.cpp:601-605)."""
    rep = report("sgl-kernel-npu", env={ROUND_ENV: "2"})
    assert rep.report.quantity("normal dispatch (CamMoeDispatchNormal)") == normal_dispatch_need(8192, 7168, 8, 2)
    assert rep.report.quantity("normal combine (CamMoeCombineNormal)") == normal_combine_need(8192, 7168, 8, 1)
    rep = report("sgl-kernel-npu", env={ROUND_ENV: "2", "DEEPEP_NORMAL_COMBINE_ENABLE_LONG_SEQ": "1"})
    assert rep.report.quantity("normal combine (CamMoeCombineNormal)") == normal_combine_need(8192, 7168, 8, 2)
    assert "sgl-kernel-npu.limit" in codes(rep)


def test_sglang_deepep_config_num_sms_mismatch_keeps_both_configs():
    """SGLang asserts equal ``num_sms`` in ``--deepep-config``; epbuf sizes each config as given."""
    config = {"normal_dispatch": {"num_sms": 24}, "normal_combine": {"num_sms": 20}}
    rep = report("sglang", model="deepseek-v3", flags={"--deepep-config": config, "--deepep-mode": "normal"})
    (lim,) = [x for x in rep.limits if x.name.startswith("--deepep-config")]
    assert (lim.value, lim.bound, lim.ok) == (20, 24, False)
    hidden_bytes = 7168  # param_bytes 1: FP8 dispatch output, the GPU default (version main)
    nvl = [deepep_v1.Config(num_sms=n).get_nvl_buffer_size_hint(hidden_bytes, 8) for n in (24, 20)]
    assert [r.num_bytes for r in rep.report.buffer("NVL buffer").regions] == nvl
    assert rep.report.buffer("NVL buffer").num_bytes == max(nvl)


def _deepep_ll_answers(num_experts: int, num_ranks: int) -> bool:
    """Whether the deepep-ll backend sizes experts that do not divide over the ranks (its part of the
    one rule; until it does, it rejects them with one line, exit 2)."""
    plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=num_experts, num_ranks=num_ranks,
                      num_max_tokens_per_rank=128)
    try:
        epbuf.report(plan, "deepep-ll")
    except InvalidArgumentError:
        return False
    return True


@pytest.mark.parametrize("argv, code, limit_name", [
    (["engine", "sglang", "--deepep-mode", "low_latency", "--ep-num-redundant-experts", "3", "--tp-size", "16"],
     "sglang.limit", "num_experts % group.size() == 0 (low-latency)"),
    (["engine", "vllm", "--enable-eplb", "--eplb-config", '{"num_redundant_experts": 5}', "--ranks", "16"],
     "vllm.limit", "experts (routed + redundant) % EP size == 0 (--enable-eplb)"),
])
def test_engine_expert_checks_with_low_latency_buffers(capsys, argv, code, limit_name):
    """SGLang's and vLLM's own expert checks are findings on low-latency buffers too; the deepep-ll
    report they embed adds DeepEP's own (buffer.hpp:1483)."""
    if not _deepep_ll_answers(256 + 3, 16):
        pytest.skip("the deepep-ll backend still rejects experts not divisible by the ranks (issue 8, backends)")
    status, out, _ = run_cli(capsys, *argv, "--json", "--strict")
    data = json.loads(out)
    assert status == 1 and code in data["errors"] and data["num_bytes"] > 0
    assert any(x["name"] == limit_name and not x["ok"] for x in data["report"]["limits"])


def test_ll_budget_search_before_the_ceiling_version_stays_within_the_int_product():
    """Before 4623c67 no 32 GiB ceiling caps the search; it stops where LowLatencyLayout's
    C++ int product num_experts x T would overflow, instead of failing with exit 2."""
    rep = report("vllm", model="deepseek-v3", num_ranks=16, flags={"--all2all-backend": "deepep_low_latency"},
                 budget=40 << 30, backend_version="v1.2.1")
    budget = [r for r in rep.recommendations if r.goal == "budget"]
    # 2806, not 2808: the total counts the constructor's 32 MiB workspace and NVL metadata (v1.2.1 has the
    # barrier signals, 160 B), and 1 GiB + hint(2808) + 33,554,592 B exceeds the 40 GiB budget
    assert [(r.value, r.num_bytes <= 40 << 30) for r in budget] == [(2806, True)]
    assert budget[0].num_bytes == 1024 * MiB + deepep_v1.get_low_latency_rdma_size_hint(
        2806, 7168, 16, 256, version="v1.2.1") + 33_554_432 + 160


def test_hccl_communicators_are_bounded(capsys):
    """Fuzzing found ``--hccl-communicators 2147483647`` building one window record each until
    memory ran out: the count is capped with one line."""
    from epbuf.cli import main

    assert main(["engine", "sgl-kernel-npu", "--hccl-communicators", "2147483647"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "allowed an integer in 1..1024" in err


# --- vLLM reads the checkpoint's quantization without --quantization --------------------------
def _v2_fp8(**kw) -> tuple[bool, int]:
    rep = report("vllm", num_ranks=16, flags={"--all2all-backend": "deepep_v2", **kw.pop("flags", {})}, **kw)
    setting = {s.name: s for s in rep.settings}.get("--fp8-dispatch")
    return (setting is not None and setting.value is True), rep.num_bytes


def test_vllm_dispatches_fp8_for_a_block_fp8_checkpoint_without_the_flag():
    """ModelConfig._verify_quantization adopts the checkpoint's quant_method when --quantization is
    unset, so DeepSeek-V3 (block-FP8 128 x 128) dispatches FP8 with or without --quantization fp8,
    and the ElasticBuffer is the FP8 one; a BF16 checkpoint stays BF16; an explicit --fp8-dispatch
    (either way) wins."""
    fp8, num_bytes = _v2_fp8(model="deepseek-v3")
    assert fp8 and num_bytes == _v2_fp8(model="deepseek-v3", flags={"--quantization": "fp8"})[1]
    assert num_bytes == _v2_fp8(model="qwen3-235b-a22b", hidden=7168, num_topk=8, num_experts=256,
                                flags={"--fp8-dispatch": True})[1]
    assert _v2_fp8(model="deepseek-v3", flags={"--fp8-dispatch": False})[0] is False
    assert _v2_fp8(model="qwen3-235b-a22b")[0] is False
    # MORI's buffers carry the FP8 scales: the derived setting reaches the sizes.
    mori = {"--all2all-backend": "mori_high_throughput"}
    fp8_mori = report("vllm", model="deepseek-v3", num_ranks=8, flags=mori).num_bytes
    bf16_mori = report("vllm", model="deepseek-v3", num_ranks=8, flags={**mori, "--fp8-dispatch": False}).num_bytes
    assert fp8_mori != bf16_mori
    assert fp8_mori == report("vllm", model="deepseek-v3", num_ranks=8,
                              flags={**mori, "--fp8-dispatch": True}).num_bytes


def test_a_config_json_says_whether_the_weights_are_block_fp8(tmp_path):
    from epbuf.models import read_model_config

    base = {"hidden_size": 7168, "n_routed_experts": 256, "num_experts_per_tok": 8}
    cases = [({"quant_method": "fp8", "weight_block_size": [128, 128]}, True),
             ({"quant_method": "FP8", "weight_block_size": [128, 128]}, True),
             ({"quant_method": "fp8", "weight_block_size": [64, 64]}, False),
             ({"quant_method": "awq"}, False), (None, False), ("fp8", False)]
    for i, (quant, expected) in enumerate(cases):
        config = dict(base) if quant is None else {**base, "quantization_config": quant}
        path = tmp_path / f"c{i}" / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps(config))
        spec = read_model_config(str(path))
        assert spec.block_fp8 is expected, quant
        assert ("weights fp8, block 128x128 (quantization_config)" in spec.notes) is expected
        per_tensor = isinstance(quant, dict) and quant.get("quant_method").lower() == "fp8" \
            and "weight_block_size" not in quant
        assert spec.fp8_per_tensor is per_tensor, quant


def _per_tensor_fp8_qwen3(tmp_path) -> str:
    config = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
              "num_experts": 128, "num_experts_per_tok": 8,
              "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic"}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    return str(tmp_path)


def test_a_per_tensor_fp8_checkpoint_is_quantization_fp8_for_the_engines(tmp_path):
    """vLLM and SGLang adopt the checkpoint's quant_method as --quantization (ModelConfig._verify_quantization)
    and load it per tensor: the recipes size it as --quantization fp8 on BF16 weights, not as BF16."""
    from epbuf.models import read_model_config

    folder = _per_tensor_fp8_qwen3(tmp_path)
    spec = read_model_config(folder + "/config.json")
    assert spec.fp8_per_tensor and not spec.block_fp8 and "per tensor" in spec.notes
    bf16 = read_model_config(folder + "/config.json").replace(fp8_per_tensor=False)
    mori = {"--all2all-backend": "mori_high_throughput", "-dp": 8, "--enable-expert-parallel": True,
            "--max-num-batched-tokens": 1024}
    scale = {}
    for label, model, flags in (("checkpoint", spec, {}), ("flag", bf16, {"--quantization": "fp8"}), ("bf16", bf16, {})):
        rep = report("vllm", model=model, flags={**mori, **flags})
        scale[label] = (next(f for f in rep.report.findings if f.code == "vllm.mori-args").data["scale_dim"],
                        rep.num_bytes)
        quant = {s.name: s for s in rep.settings}.get("--quantization")
        if label == "checkpoint":
            assert quant.value == "fp8" and quant.source == "model"
    assert scale["checkpoint"] == scale["flag"] != scale["bf16"] and scale["checkpoint"][0] == 1
    # an explicit --quantization wins over the checkpoint's
    rep = report("vllm", model=spec, flags={**mori, "--quantization": "fp8_per_block"})
    assert next(f for f in rep.report.findings if f.code == "vllm.mori-args").data["scale_dim"] != 1
    # SGLang 0.5.23: DeepEP V2 refuses per-tensor FP8 experts (0 B); MoRI dispatches FP8
    v2 = report("sglang", model=spec, version="0.5.23", num_ranks=8, flags={"--moe-a2a-backend": "deepep_v2"},
                env={"SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "1024"})
    refused = [f.message for f in v2.report.findings if f.code == "sglang.deepep-v2-refused"]
    assert v2.num_bytes == 0 and len(refused) == 1 and "a per-tensor FP8 checkpoint" in refused[0]
    sg = {"--moe-a2a-backend": "mori", "--chunked-prefill-size": 4096}
    fp8 = report("sglang", model=spec, version="0.5.23", num_ranks=8, flags=sg, device="mi300x")
    plain = report("sglang", model=bf16, version="0.5.23", num_ranks=8, flags=sg, device="mi300x")
    assert fp8.report.inputs["use_fp8_dispatch"] and not plain.report.inputs["use_fp8_dispatch"]


def test_sglang_deepep_config_num_sms_breaks_the_shared_memory_limit(tmp_path):
    """SGLang's --deepep-config sets num_sms; at 64 cached_notify's launch needs 8 KiB x 32 warps =
    262,144 B of shared memory, over sm_90's 232,448 B (launch.cuh:46): an error finding, the sizes
    kept; at 56 it fits. Low-latency mode launches no normal kernels, so no such row."""
    def config(num_sms):
        one = {"num_sms": num_sms, "num_max_nvl_chunked_send_tokens": 6, "num_max_nvl_chunked_recv_tokens": 256,
               "num_max_rdma_chunked_send_tokens": 6, "num_max_rdma_chunked_recv_tokens": 256}
        path = tmp_path / f"c{num_sms}.json"
        path.write_text(json.dumps({"normal_dispatch": one, "normal_combine": one}))
        return str(path)

    def smem(mode, num_sms):
        rep = report("sglang", model="deepseek-v3", num_ranks=16,
                     flags={"--deepep-mode": mode, "--deepep-config": config(num_sms)})
        return rep, [lim for lim in rep.report.limits if lim.name.startswith("cached_notify")]

    rep, rows = smem("normal", 64)
    assert [(lim.value, lim.bound, lim.ok) for lim in rows] == [(262_144, 232_448, False)]
    assert any(f.severity == "error" and "cached_notify" in f.message for f in rep.report.findings)
    assert rep.num_bytes > 0 and rep.report.buffers  # the sizes are still there (the one rule)
    assert [lim.ok for lim in smem("normal", 56)[1]] == [True]
    assert smem("low_latency", 64)[1] == []
    # The engine's --device sets the bound: H200's is sm_90's; an A100 build has no TMA launches.
    on_h200 = report("sglang", model="deepseek-v3", num_ranks=16, device="h200",
                     flags={"--deepep-mode": "normal", "--deepep-config": config(64)}).report.limits
    assert [lim.name for lim in on_h200 if lim.name.startswith("cached_notify")] == [
        "cached_notify (num_sms = 64) dynamic shared memory (max opt-in per block: h200, sm_90)"]
    on_a100 = report("sglang", model="deepseek-v3", num_ranks=16, device="a100-80gb",
                     flags={"--deepep-mode": "normal", "--deepep-config": config(64)}).report.limits
    assert not [lim for lim in on_a100 if "shared memory" in lim.name]
    vllm_rows = [lim for lim in report("vllm", model="deepseek-v3", num_ranks=16,
                                       flags={"--all2all-backend": "deepep_high_throughput"}).report.limits
                 if lim.name.startswith("cached_notify")]
    assert [(lim.value, lim.ok) for lim in vllm_rows] == [(8192 * 10, True)]  # 20 SMs: 10 channels, 10 warps


def test_no_qp_depth_advice_where_no_deepep_low_latency_buffer_reads_it():
    """A MORI line lists NVSHMEM_QP_DEPTH among vLLM's settings, but nothing of MORI reads it:
    composing the recommendations must not add DeepEP's depth fix for the recommended tokens."""
    from epbuf import api

    mori = api.engine("vllm", model="deepseek-v3", ranks=16, all2all_backend="mori_high_throughput",
                      fp8_dispatch=True, device="mi300x")
    assert not [r for r in mori["to_set"] if r["setting"] == "NVSHMEM_QP_DEPTH"]
    ll = api.engine("vllm", device="h200", launch="vllm serve deepseek-ai/DeepSeek-V3 -dp 16 --enable-expert-parallel "
                                                  "--all2all-backend deepep_low_latency --max-num-batched-tokens 2048")
    assert [r["value"] for r in ll["to_set"] if r["setting"] == "NVSHMEM_QP_DEPTH"] == [4098]
