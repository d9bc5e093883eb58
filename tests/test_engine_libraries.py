"""``epbuf engine`` with the non-DeepEP libraries: vLLM's ``pplx`` and MORI all2all backends, SGLang's
MORI backend, and UCCL-EP's DeepEP drop-in (``--uccl-ep``) under vLLM and SGLang.

Golden numbers are the worked examples of ``docs/derivations/engines.md`` §8 (written out there from
the upstream code); recommendations are checked against the backends' own functions at the value and
one past it.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _cli_run import run_cli

from epbuf.backends import mori_ep, pplx, uccl_ep
from epbuf.engines import report
from epbuf.engines._mori import HEAP_LIMIT
from epbuf.engines._vllm_pplx import hidden_dim_scale_bytes
from epbuf.errors import InvalidArgumentError
from epbuf.plan import Plan
from epbuf.units import GiB, MiB

from _cli_run import run_cli, run_cli_whole  # tests/_cli_run.py (conftest puts tests/ on the path)

DSV3 = dict(model="deepseek-v3")


def codes(rep) -> set[str]:
    return {f.code for f in rep.findings}


def vllm(ranks: int, backend: str, version: str = "main", env=None, **flags):
    return report("vllm", **DSV3, num_ranks=ranks, version=version, env=env,
                  flags={"--all2all-backend": backend, **flags})


# ====================================================================================
# vLLM pplx (engines.md §8.2)
# ====================================================================================
@pytest.mark.parametrize("hidden, fp8, expected", [
    (7168, True, (7168, 224)),   # 56 float32 scales
    (2880, True, (2880, 96)),    # cdiv(2880, 128) = 23 scales = 92 B, rounded up to 96
    (2048, True, (2048, 64)),
    (4096, False, (8192, 0)),    # BF16, no scales
    (7000, False, (14000, 0)),
])
def test_pplx_hidden_dim_scale_bytes(hidden, fp8, expected):
    assert hidden_dim_scale_bytes(hidden, fp8) == expected


def test_vllm_pplx_internode_example():
    """§8.2 ex. 1: DeepSeek-V3, EP 16 over two nodes, TP 1, T = VLLM_MOE_DP_CHUNK_SIZE = 256, block FP8."""
    rep = vllm(16, "pplx", "dp-chunk", **{"--fp8-dispatch": True})
    sym = rep.report.buffer("NVSHMEM symmetric buffers (nvshmem_malloc)")
    regions = {r.name: r.num_bytes for r in sym.regions}
    assert regions["xDispatchIn"] == 256 * 7408 == 1_896_448
    assert regions["xDispatchOut"] == 16 * 16 * 256 * 7408 == 485_490_688
    assert regions["xCombineIn"] == regions["xCombineOut"] == 1_879_048_192
    assert sym.num_bytes == 4_245_489_792
    assert rep.report.buffer("local buffers (cudaMalloc)").num_bytes == 1_311_748
    assert rep.num_bytes == 4_246_801_540
    assert rep.report.quantity("dp_size") == 1 and rep.report.inputs["hidden_dim_scale_bytes"] == 224
    assert rep.recommendation("NVSHMEM_SYMMETRIC_SIZE", "fix").value == "4g"
    assert {"pplx.combine-out-blowup", "pplx.nvshmem-heap", "vllm.pplx-args"} <= codes(rep) and not rep.errors()


def test_vllm_pplx_dp_size_is_the_tp_size():
    """§8.2 ex. 2: ``dp_size = tp_group.world_size``: TP 2 x DP 8 halves the DP groups (16 -> 8)."""
    rep = vllm(16, "pplx", "dp-chunk", **{"--fp8-dispatch": True, "-tp": 2, "-dp": 8})
    assert rep.report.quantity("dp_size") == 2 and rep.report.quantity("num_dp_groups") == 8
    assert rep.report.buffer("NVSHMEM symmetric buffers (nvshmem_malloc)").num_bytes == 3_063_218_304
    assert rep.recommendation("NVSHMEM_SYMMETRIC_SIZE", "fix").value == "3g"
    # TP = the EP size leaves DP = 1: use_all2all_kernels is false, vLLM builds no all2all manager at all
    rep = vllm(16, "pplx", "dp-chunk", **{"--fp8-dispatch": True, "-tp": 16})
    assert rep.num_bytes == 0 and "vllm.no-all2all" in codes(rep) and not rep.errors()


def test_vllm_pplx_intranode_example():
    """§8.2 ex. 3: one node of 8: ``AllToAll.intranode``, one peer buffer of max(dispatch, combine) per rank."""
    rep = vllm(8, "pplx", "dp-chunk", **{"--fp8-dispatch": True})
    peer = rep.report.buffer("peer buffers (cudaMalloc, shared by CUDA IPC)")
    assert peer.num_bytes == 8 * (16 + 128 + 256 * 32 * 28672) == 1_879_049_344
    assert rep.report.inputs["kernel_type"] == "intranode"


def test_vllm_pplx_removed_on_main_and_budget_exact():
    rep = vllm(16, "pplx")
    assert rep.num_bytes == 0 and "vllm.pplx-removed" in codes(rep) and rep.recommendations == ()
    budget = 2 * GiB
    rep = report("vllm", **DSV3, num_ranks=16, version="dp-chunk", budget=budget, max_tokens_under_load=100,
                 flags={"--all2all-backend": "pplx", "--fp8-dispatch": True})
    rec = rep.recommendation("VLLM_MOE_DP_CHUNK_SIZE", "budget")
    plan = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_ranks_per_node=8,
                num_max_tokens_per_rank=rec.value, kernel_type="internode", num_scale_bytes=224)
    assert pplx.summarize(plan).num_bytes == rec.num_bytes <= budget
    assert pplx.summarize(plan.replace(num_max_tokens_per_rank=rec.value + 1)).num_bytes > budget
    assert rep.recommendation("VLLM_MOE_DP_CHUNK_SIZE", "load").value == 100


# ====================================================================================
# vLLM MORI (engines.md §8.3)
# ====================================================================================
def test_vllm_mori_intranode_example():
    """§8.3 ex. 1: EP 8, T = 4096, block FP8: IntraNode, 1,031,965,440 B of the 4 GiB heap; the largest
    T the default heap holds is 17,047 (README: DeepSeek-V3 on 8 ranks)."""
    rep = vllm(8, "mori_high_throughput", **{"--fp8-dispatch": True, "--max-num-batched-tokens": 4096})
    heap = rep.report.buffer("MORI-shmem static heap (symmetric buffers)")
    assert (heap.num_bytes, heap.num_bytes_needed) == (4 * GiB, 1_031_965_440)
    assert rep.report.buffer("local buffers (hipMalloc)").num_bytes == 21_157_364
    assert rep.report.inputs["kernel_type"] == "IntraNode" and rep.report.inputs["scale_dim"] == 224
    assert rep.recommendation("--max-num-batched-tokens", "limit").value == 17_047
    assert not rep.errors()


@pytest.mark.parametrize("backend, version, kernel", [
    ("mori_high_throughput", "main", "InterNodeV1"), ("mori_low_latency", "main", "InterNodeV1LL"),
    ("mori", "dp-chunk", "InterNodeV1"),
])
def test_vllm_mori_internode_kernels(backend, version, kernel):
    rep = vllm(16, backend, version, **{"--fp8-dispatch": True, "--max-num-batched-tokens": 1024})
    assert rep.report.inputs["kernel_type"] == kernel and rep.report.inputs["gpu_per_node"] == 8
    heap = rep.report.buffer("MORI-shmem static heap (symmetric buffers)")
    if version == "main":  # InterNodeV1 and InterNodeV1LL allocate alike (both ShmemBufsInterNodeV1)
        assert heap.num_bytes_needed == 605_109_760 and rep.report.inputs["num_max_tokens_per_rank"] == 1024
    else:  # before PR #39107 T is VLLM_MOE_DP_CHUNK_SIZE (256), not --max-num-batched-tokens
        assert rep.report.inputs["num_max_tokens_per_rank"] == 256 and "vllm.setting-unused" in codes(rep)


def test_vllm_bare_mori_is_refused_as_vllm_0_33_refuses_it(capsys):
    """vLLM 0.33.0's All2AllBackend literal has no bare ``mori``: its parser refuses the line at start-up."""
    code, out, err = run_cli(capsys, "engine", "vllm", "--", "vllm", "serve", "Qwen/Qwen3-30B-A3B", "-dp", "16",
                             "--enable-expert-parallel", "--all2all-backend", "mori")
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "mori_high_throughput" in err


def test_vllm_mori_heap_exhausted_fix_is_exact():
    """§8.3 ex. 2: EP 16 at T = 8192 needs more than the default 4 GiB heap: an error finding, the limit
    7,268, and the fix MORI_SHMEM_HEAP_SIZE=4617M."""
    rep = vllm(16, "mori_high_throughput", **{"--fp8-dispatch": True, "--max-num-batched-tokens": 8192})
    assert "mori-ep.heap-exhausted" in {f.code for f in rep.errors()}
    fix = rep.recommendation("MORI_SHMEM_HEAP_SIZE", "fix")
    usage = rep.report.quantity("symmetric_usage_num_bytes")
    assert fix.value == "4617M" and 4616 * MiB < usage <= 4617 * MiB
    assert rep.recommendation("--max-num-batched-tokens", "limit").value == 7268
    fixed = vllm(16, "mori_high_throughput", env={"MORI_SHMEM_HEAP_SIZE": "4617M"},
                 **{"--fp8-dispatch": True, "--max-num-batched-tokens": 8192})
    assert not fixed.errors() and fixed.report.inputs["MORI_SHMEM_HEAP_SIZE"] == "4617M"


def test_vllm_mori_passes_min_8_as_gpu_per_node():
    rep = report("vllm", **DSV3, num_ranks=16, num_ranks_per_node=4,
                 flags={"--all2all-backend": "mori_high_throughput", "--max-num-batched-tokens": 256})
    assert rep.report.inputs["gpu_per_node"] == 8 and "vllm.mori-gpu-per-node" in codes(rep)


# ====================================================================================
# SGLang MORI (engines.md §8.4)
# ====================================================================================
def sglang_mori(ranks: int = 8, env=None, **flags):
    return report("sglang", **DSV3, num_ranks=ranks, env=env, flags={"--moe-a2a-backend": "mori", **flags})


def test_sglang_mori_low_latency_is_async_ll():
    """§8.4 ex. 1: ``--deepep-mode low_latency`` makes ``init_mori_op`` pick AsyncLL, whose send-side
    buffers are sized for the worst case: 1,990,626,048 B of the heap at T = 4096 (on 8 ranks
    ``num_qp_per_pe = 2`` adds nothing: the two signal buffers stay within their 256-byte units).
    ``auto`` resolves to normal for MoRI (0.5.23 ``arg_groups/moe_hook.py:545``): IntraNode."""
    assert sglang_mori(**{"--moe-weight-dtype": "fp8"}).report.inputs["kernel_type"] == "IntraNode"
    rep = sglang_mori(**{"--moe-weight-dtype": "fp8", "--deepep-mode": "low_latency"})
    assert rep.report.inputs["kernel_type"] == "AsyncLL"
    assert rep.report.buffer("MORI-shmem static heap (symmetric buffers)").num_bytes_needed == 1_990_626_048
    lim = rep.recommendation("SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "limit").value
    assert lim == 8837
    plan = rep.report.inputs
    base = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=8, num_max_tokens_per_rank=lim,
                kernel_type="AsyncLL", num_scale_bytes=224)
    assert HEAP_LIMIT not in mori_ep.summarize(base).broken
    assert HEAP_LIMIT in mori_ep.summarize(base.replace(num_max_tokens_per_rank=lim + 1)).broken
    assert plan["num_experts_per_rank"] == 32


def test_sglang_mori_normal_kernels():
    rep = sglang_mori(**{"--deepep-mode": "normal", "--moe-weight-dtype": "fp8"})
    assert rep.report.inputs["kernel_type"] == "IntraNode"
    assert rep.report.buffer("MORI-shmem static heap (symmetric buffers)").num_bytes_needed == 1_031_965_440
    for tokens, kernel in ((256, "InterNodeV1LL"), (257, "InterNodeV1")):
        rep = sglang_mori(16, env={"SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK": str(tokens)},
                          **{"--deepep-mode": "normal", "--tp-size": 16})
        assert rep.report.inputs["kernel_type"] == kernel
    rep = sglang_mori(16, env={"SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "257",
                               "SGLANG_MORI_DISPATCH_INTER_KERNEL_SWITCH_THRESHOLD": "512"},
                      **{"--deepep-mode": "normal", "--tp-size": 16})
    assert rep.report.inputs["kernel_type"] == "InterNodeV1LL"
    rep = sglang_mori(env={"MORI_ENABLE_SDMA": "1"}, **{"--deepep-mode": "normal"})
    assert rep.report.inputs["kernel_type"] == "AsyncLL"


@pytest.mark.parametrize("weights, env, scale_bytes, quant", [
    ("bf16", {}, 0, "none"),
    ("fp8", {}, 224, "none"),
    ("fp4", {}, 224, "fp8_blockwise"),            # hidden // 32 one-byte scales; FP8 blockwise combine
    ("fp8", {"SGLANG_MORI_DISPATCH_DTYPE": "BF16"}, 0, "none"),
    ("bf16", {"SGLANG_MORI_DISPATCH_DTYPE": "mxfp8"}, 224, "none"),
    ("bf16", {"SGLANG_MORI_FP8_DISP": "1"}, 224, "none"),
    ("bf16", {"SGLANG_MORI_COMBINE_DTYPE": "fp8_direct_cast"}, 0, "fp8_direct_cast"),
    ("bf16", {"SGLANG_MORI_FP8_COMB": "1"}, 0, "fp8_blockwise"),
])
def test_sglang_mori_dtypes(weights, env, scale_bytes, quant):
    rep = sglang_mori(env=env, **{"--moe-weight-dtype": weights, "--deepep-mode": "normal"})
    assert rep.report.inputs["scale_dim"] * rep.report.inputs["scale_type_size"] == scale_bytes
    assert rep.report.inputs["quant_type"] == quant


def test_sglang_mori_refusals_and_notes():
    rep = sglang_mori(env={"SGLANG_MORI_COMBINE_DTYPE": "fp4"}, **{"--deepep-mode": "low_latency"})  # AsyncLL: no FP4 combine
    assert "mori-ep.limit" in {f.code for f in rep.errors()}
    rep = sglang_mori(env={"SGLANG_MORI_DISPATCH_DTYPE": "int4"})
    assert "sglang.mori-env-ignored" in codes(rep)
    rep = sglang_mori(env={"SGLANG_MORI_PREALLOC_MAX_RECV_TOKENS": "8192"}, **{"--deepep-mode": "normal"})
    assert rep.report.inputs["max_total_recv_tokens"] == 8192 and "mori-ep.recv-cap" in codes(rep)
    # num_qp_per_pe = 2: the two signal buffers of 32 ranks take 2 x 256 B more of the heap (256-byte units)
    rep = sglang_mori(32, **{"--tp-size": 32, "--deepep-mode": "normal"})
    one = mori_ep.report(Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=32, num_ranks_per_node=8,
                              num_max_tokens_per_rank=4096, kernel_type="InterNodeV1", num_scale_bytes=224))
    (qp,) = [r for r in rep.report.buffers[0].regions if r.name.startswith("num_qp_per_pe 2")]
    assert qp.num_bytes == 512 and rep.report.inputs["num_qp_per_pe"] == 2
    assert rep.report.buffers[0].num_bytes_needed == one.quantity("symmetric_usage_num_bytes") + 512


def test_sglang_mori_budget_sizes_the_heap():
    budget = 3 * GiB
    rep = report("sglang", **DSV3, num_ranks=8, budget=budget, max_tokens_under_load=2048,
                 flags={"--moe-a2a-backend": "mori", "--moe-weight-dtype": "fp8", "--deepep-mode": "low_latency"})
    rec = rep.recommendation("SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "budget")

    def sized(t: int) -> int:
        r = mori_ep.report(Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=8, num_max_tokens_per_rank=t,
                                kernel_type="AsyncLL", num_scale_bytes=224))
        usage = r.quantity("symmetric_usage_num_bytes")
        return -(-usage // MiB) * MiB + r.quantity("local_num_bytes")

    assert rec.value == 6556 and sized(6556) == rec.num_bytes <= budget < sized(6557)
    assert rep.recommendation("MORI_SHMEM_HEAP_SIZE", "budget").value == "1899M"
    assert rep.recommendation("SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "load").value == 2048


def test_heap_limit_name_is_the_backends():
    rows = mori_ep.limit_rows(mori_ep.handle_config(mori_ep.EpDispatchCombineConfig(
        world_size=8, hidden_dim=7168, scale_dim=0, scale_type_size=0, max_token_type_size=2,
        max_num_inp_token_per_rank=1, num_experts_per_rank=32, num_experts_per_token=8)), "shmem", "static_heap", 1, 2)
    assert HEAP_LIMIT in [row[0] for row in rows]


# ====================================================================================
# UCCL-EP drop-in (engines.md §8.5)
# ====================================================================================
def test_vllm_uccl_low_latency_example():
    """§8.5 ex. 1: vLLM LL with UCCL-EP's drop-in, EP 16, T = 256, PER_EXPERT_BATCHING build."""
    rep = vllm(16, "deepep_low_latency", **{"--max-num-batched-tokens": 256, "--uccl-ep": True})
    b = {x.name: x.num_bytes for x in rep.report.buffers}
    assert b == {"NVL buffer": 1_073_741_984, "RDMA buffer": 3_769_641_088, "workspace": 33_554_432,
                 "UCCL proxies and runtime": 84_072}
    assert rep.num_bytes == 4_877_021_576
    assert uccl_ep.get_low_latency_rdma_size_hint(256, 7168, 16, 256, per_expert_batching=True) == 3_769_641_088
    # vLLM main passes enable_shrink=False: UCCL-EP main takes it since PR #1043, v0.1.1 raises TypeError
    assert not rep.errors()
    release = report("vllm", num_ranks=16, backend_version="v0.1.1", flags={
        "--all2all-backend": "deepep_low_latency", "--max-num-batched-tokens": 256, "--uccl-ep": True})
    assert any("enable_shrink" in f.message for f in release.errors())
    old = vllm(16, "deepep_low_latency", "dp-chunk", **{"--uccl-ep": True})
    assert not old.errors() and old.report.buffer("RDMA buffer").num_bytes == 3_769_641_088
    default_build = vllm(16, "deepep_low_latency", "dp-chunk", **{"--uccl-ep": True,
                                                                  "--uccl-per-expert-batching": False})
    assert default_build.report.buffer("RDMA buffer").num_bytes == 3_760_195_712
    assert not any(lim.name.startswith("NVSHMEM_QP_DEPTH") for lim in rep.limits)


def test_vllm_uccl_has_no_32gib_ceiling():
    """vLLM issue #57894's shape: DeepEP refuses T = 2048 (35.55 GiB); UCCL-EP's Buffer drops the check."""
    flags = {"--all2all-backend": "deepep_low_latency", "--enable-eplb": True, "--eplb-config": {"num_redundant_experts": 64},
             "--uccl-ep": True, "--uccl-per-expert-batching": False}
    rep = report("vllm", hidden=5120, num_topk=8, num_experts=384, num_ranks=16, version="dp-chunk", flags=flags,
                 env={"VLLM_MOE_DP_CHUNK_SIZE": "2048"})
    assert not rep.errors() and rep.report.buffer("RDMA buffer").num_bytes > 32 * GiB
    assert "uccl-ll.dropped-checks" in codes(rep)


def test_vllm_uccl_host_memory_and_efa():
    rep = vllm(16, "deepep_low_latency", "dp-chunk", **{"--uccl-ep": True, "--uccl-nic": "efa"})
    assert rep.report.host_num_bytes == 2_183_476  # README: EFA pins the atomic buffer too
    assert rep.report.buffer("UCCL proxies and runtime").num_bytes == 84_072 - 81_960


def test_vllm_uccl_high_throughput_example():
    """§8.5 ex. 2: HT on EFA, EP 16: the fixed 1 GiB NVL and RDMA buffers against UCCL-EP's hints."""
    rep = vllm(16, "deepep_high_throughput", **{"--uccl-ep": True, "--uccl-nic": "efa"})
    nvl, rdma = rep.report.buffer("NVL buffer"), rep.report.buffer("RDMA buffer")
    assert (nvl.num_bytes, nvl.num_bytes_needed) == (1024 * MiB + 160, 377_673_984 + 160)
    assert (rdma.num_bytes, rdma.num_bytes_needed) == (1024 * MiB, 341_289_344)
    assert rep.recommendation("VLLM_DEEPEP_BUFFER_SIZE_MB", "load").value == 361
    assert rep.recommendation("VLLM_DEEPEP_BUFFER_SIZE_MB", "limit").value == 2047
    one_node = vllm(8, "deepep_high_throughput", **{"--uccl-ep": True})
    assert one_node.report.buffer("RDMA buffer").num_bytes == 1  # max(num_rdma_bytes, 1)
    assert [r.goal for r in one_node.recommendations] == ["load"]


@pytest.mark.parametrize("budget_gib", [3, 5, 8])
def test_vllm_uccl_ll_budget_is_exact(budget_gib):
    budget = budget_gib * GiB
    rep = report("vllm", **DSV3, num_ranks=16, budget=budget,
                 flags={"--all2all-backend": "deepep_low_latency", "--uccl-ep": True, "--max-num-batched-tokens": 64})
    rec = rep.recommendation("--max-num-batched-tokens", "budget")

    def total(t: int) -> int:
        return vllm(16, "deepep_low_latency", **{"--uccl-ep": True, "--max-num-batched-tokens": t}).num_bytes

    assert total(rec.value) == rec.num_bytes <= budget < total(rec.value + 1)


def test_sglang_uccl_example():
    """§8.5 ex. 3: SGLang ``deepep`` auto, EP 16, T = 128 on UCCL-EP: the RDMA buffer is UCCL-EP's
    low-latency hint with per-expert batching, the NVL buffer the max of its normal-mode hints."""
    rep = report("sglang", **DSV3, num_ranks=16, flags={"--moe-a2a-backend": "deepep", "--tp-size": 16,
                                                         "--uccl-ep": True})
    assert rep.report.buffer("RDMA buffer").num_bytes == 1_884_821_632
    cfgs = [uccl_ep.get_dispatch_config(16), uccl_ep.get_combine_config(16)]
    nvl = max(uccl_ep.nvl_buffer(c, 7168, 16).num_bytes for c in cfgs)  # param_bytes 1 (FP8 output, main)
    assert rep.report.buffer("NVL buffer").num_bytes == nvl + 160
    assert "sglang.param-bytes-1" in codes(rep)
    assert rep.recommendation("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "limit").value == 1024
    normal = report("sglang", **DSV3, num_ranks=16, flags={"--moe-a2a-backend": "deepep", "--tp-size": 16,
                                                            "--uccl-ep": True, "--deepep-mode": "normal",
                                                            "--deepep-config": CONFIG})
    want = max(uccl_ep.rdma_buffer(uccl_ep.Config(24, 16, 512, 16, 512), 7168, 16).num_bytes, 0)
    assert normal.report.buffer("RDMA buffer").num_bytes == want


#: ``ep/bench/sglang/common_deepep_config.sh`` @da914a2: the config UCCL's SGLang scripts pass.
CONFIG = json.dumps({k: {"num_sms": 24, "num_max_nvl_chunked_send_tokens": 16, "num_max_nvl_chunked_recv_tokens": 512,
                         "num_max_rdma_chunked_send_tokens": 16, "num_max_rdma_chunked_recv_tokens": 512}
                     for k in ("normal_dispatch", "normal_combine")})


# ====================================================================================
# CLI: strict, JSON, errors, help
# ====================================================================================
@pytest.mark.parametrize("argv, status", [
    (["vllm", "--all2all-backend", "pplx", "--engine-version", "dp-chunk", "--ranks", "16", "--fp8-dispatch"], 0),
    (["vllm", "--all2all-backend", "mori_low_latency", "--ranks", "16", "--max-num-batched-tokens", "2048"], 0),
    (["vllm", "--all2all-backend", "mori_low_latency", "--ranks", "16", "--device", "mi300x"], 1),  # 8192: heap
    (["vllm", "--all2all-backend", "deepep_low_latency", "--uccl-ep", "--backend-version", "v0.1.1"], 1),  # shrink
    (["vllm", "--all2all-backend", "deepep_low_latency", "--uccl-ep", "--max-num-batched-tokens", "256"], 0),
    (["vllm", "--all2all-backend", "deepep_low_latency", "--uccl-ep", "--engine-version", "dp-chunk"], 0),
    (["sglang", "--moe-a2a-backend", "mori", "--deepep-mode", "low_latency", "--env", "SGLANG_MORI_COMBINE_DTYPE=fp4"], 1),
    (["sglang", "--moe-a2a-backend", "mori", "--env", "MORI_SHMEM_HEAP_SIZE=512M"], 1),
    (["sglang", "--moe-a2a-backend", "deepep", "--uccl-ep", "--uccl-nic", "host-memory", "--tp-size", "16"], 0),
])
def test_cli_strict_and_json(capsys, argv, status):
    code, out, err = run_cli(capsys, "engine", *argv, "--strict", "--json")
    assert code == status, err
    data = json.loads(out)
    assert data["num_bytes"] == sum(b["num_bytes"] for b in data["report"]["buffers"])
    assert bool(data["errors"]) is (status == 1)
    if "--uccl-ep" in argv:
        assert data["report"]["host_num_bytes"] > 0
    code, out, _ = run_cli(capsys, "engine", *argv)
    assert code == 0 and "Allocations per device" in out


@pytest.mark.parametrize("argv, needle", [
    (["sglang", "--moe-a2a-backend", "pplx"], "pplx-garden's EfaAllToAll"),
    (["vllm", "--all2all-backend", "mori_high_throughput", "--engine-version", "dp-chunk"],
     "--all2all-backend = 'mori_high_throughput': dp-chunk's vLLM names it mori"),
    (["vllm", "--all2all-backend", "deepep_v2", "--uccl-ep"], "not DeepEP V2's ElasticBuffer"),
    (["vllm", "--all2all-backend", "mori_high_throughput", "--uccl-ep"], "does not use deep_ep"),
    (["sglang", "--moe-a2a-backend", "mori", "--uccl-ep"], "does not use deep_ep"),
    (["vllm", "--all2all-backend", "mori_high_throughput", "--backend-version", "dd758ca"], "unknown MORI-EP version"),
    (["vllm", "--all2all-backend", "deepep_low_latency", "--uccl-ep", "--backend-version", "v9"],
     "unknown UCCL-EP version"),
    (["vllm", "--all2all-backend", "pplx", "--engine-version", "dp-chunk", "--hidden", "7001"],
     "vLLM rounds hidden_dim_bytes up to 14016"),
    (["vllm", "--all2all-backend", "mori_high_throughput", "--env", "MORI_SHMEM_HEAP_SIZE=lots"], "MORI_SHMEM_HEAP_SIZE"),
    (["vllm", "--uccl-nic", "myrinet", "--uccl-ep"], "--uccl-nic = 'myrinet': allowed one of ib, efa"),
])
def test_cli_errors_are_one_line(capsys, argv, needle):
    code, out, err = run_cli_whole(capsys, "engine", *argv)
    assert code == 2 and out == "", out
    assert needle in err and err.count("\n") == 1, err


def test_help_lists_the_library_settings(capsys):
    code, out, _ = run_cli(capsys, "engine", "vllm", "--help")
    assert code == 0
    for text in ("--uccl-ep", "--uccl-per-expert-batching", "MORI_SHMEM_HEAP_SIZE", "NVSHMEM_SYMMETRIC_SIZE",
                 "mori_low_latency"):
        assert text in out
    code, out, _ = run_cli(capsys, "engine", "sglang", "--help")
    for text in ("SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK", "--moe-weight-dtype", "MORI_ENABLE_SDMA"):
        assert text in out


def test_text_shows_pinned_host_memory(capsys):
    code, out, _ = run_cli(capsys, "engine", "vllm", "--all2all-backend", "deepep_low_latency", "--uccl-ep",
                           "--engine-version", "dp-chunk", "--uccl-nic", "efa", "--ranks", "16")
    assert code == 0 and "2.08 MiB of pinned host memory per device, not in the total" in out


# ====================================================================================
# Properties: the engine's allocation is the backend's for the arguments the engine passes
# ====================================================================================
@settings(max_examples=25, deadline=None)
@given(ranks=st.sampled_from([8, 16, 32]), tokens=st.integers(1, 4096), fp8=st.booleans(),
       backend=st.sampled_from(["mori_high_throughput", "mori_low_latency"]))
def test_vllm_mori_equals_the_backend(ranks, tokens, fp8, backend):
    rep = vllm(ranks, backend, **{"--max-num-batched-tokens": tokens, "--fp8-dispatch": fp8})
    kernel = "IntraNode" if ranks <= 8 else {"mori_high_throughput": "InterNodeV1"}.get(backend, "InterNodeV1LL")
    plan = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=ranks, num_ranks_per_node=8,
                num_max_tokens_per_rank=tokens, use_fp8_dispatch=fp8, kernel_type=kernel,
                num_scale_bytes=224 if fp8 else 0)
    assert rep.num_bytes == mori_ep.report(plan).num_bytes == mori_ep.summarize(plan).num_bytes


@settings(max_examples=25, deadline=None)
@given(ranks=st.sampled_from([4, 8, 16, 32]), tokens=st.integers(1, 1024), tp=st.sampled_from([1, 2]))
def test_vllm_pplx_equals_the_backend(ranks, tokens, tp):
    rep = report("vllm", **DSV3, num_ranks=ranks, version="dp-chunk", env={"VLLM_MOE_DP_CHUNK_SIZE": str(tokens)},
                 flags={"--all2all-backend": "pplx", "--fp8-dispatch": True, "-tp": tp, "-dp": ranks // tp})
    plan = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=ranks, num_max_tokens_per_rank=tokens,
                dp_group_size=tp, num_scale_bytes=224)
    assert rep.num_bytes == pplx.report(plan).num_bytes == pplx.summarize(plan).num_bytes


@settings(max_examples=20, deadline=None)
@given(tokens=st.integers(1, 1024), batching=st.booleans(), nic=st.sampled_from(["ib", "efa", "intel", "host-memory"]))
def test_vllm_uccl_ll_is_nvl_plus_the_backend(tokens, batching, nic):
    rep = vllm(16, "deepep_low_latency", "dp-chunk", env={"VLLM_MOE_DP_CHUNK_SIZE": str(tokens)},
               **{"--uccl-ep": True, "--uccl-per-expert-batching": batching, "--uccl-nic": nic})
    plan = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=tokens,
                per_expert_batching=batching, nic=nic)
    backend = uccl_ep.report_low_latency(plan)
    assert rep.num_bytes == 1024 * MiB + 160 + backend.num_bytes
    assert rep.report.host_num_bytes == backend.host_num_bytes


def test_errors_raise_in_the_python_api():
    with pytest.raises(InvalidArgumentError, match="pplx-garden"):
        report("sglang", flags={"--moe-a2a-backend": "pplx"})


def test_sglang_mori_dtype_variables_and_their_older_switches():
    """SGLANG_MORI_{DISPATCH,COMBINE}_DTYPE win over the older SGLANG_MORI_FP8_*/FP4_* switches
    whenever given (auto and unknown values keep the weights' dtype; unknown ones say so)."""
    def dtypes(env):
        rep = report("sglang", **DSV3, num_ranks=8, flags={"--moe-a2a-backend": "mori"}, env=env)
        notes = [f.message for f in rep.report.findings if "is none of" in f.message]
        inputs = rep.report.inputs
        return (inputs["use_fp8_dispatch"], inputs["scale_dim"]), inputs["quant_type"], notes

    assert dtypes({"SGLANG_MORI_DISPATCH_DTYPE": "Weird", "SGLANG_MORI_FP8_DISP": "1"})[2] == [
        "SGLANG_MORI_DISPATCH_DTYPE='Weird' is none of auto, bf16, fp8, fp4, mxfp8: SGLang keeps fp8"]  # FP8 weights
    assert dtypes({"SGLANG_MORI_COMBINE_DTYPE": "nope"})[2] == [
        "SGLANG_MORI_COMBINE_DTYPE='nope' is none of auto, bf16, fp8, fp8_direct_cast, fp4: SGLang keeps bf16"]
    assert dtypes({"SGLANG_MORI_DISPATCH_DTYPE": "auto", "SGLANG_MORI_FP8_DISP": "1"})[:2] == \
        dtypes({})[:2]  # given (auto): the older switch is not read
    assert dtypes({"SGLANG_MORI_FP4_DISP": "1"})[0] != dtypes({})[0]
