"""The engine releases the conformance tier runs (SGLang 0.5.23, megatron-core 0.16.1), as the recipes
follow them; checked here without the engines (the tier checks them against the engines' own code)."""

from __future__ import annotations

import pytest

from epbuf.engines import report
from epbuf.errors import InvalidArgumentError

DSV3 = dict(model="deepseek-v3")


def sglang(version="0.5.23", ranks=8, env=None, device=None, **flags):
    return report("sglang", **DSV3, num_ranks=ranks, env=env, version=version, device=device,
                  flags={"--tp-size": ranks, **flags})


def codes(rep):
    return {f.code for f in rep.findings}


def test_sglang_0_5_23_deepep_param_bytes_2():
    """0.5.23 sizes the normal buffers with params_bytes = 2 (deepep.py:402): what ``main`` gives with BF16
    dispatch output, above its FP8 default."""
    ours = sglang(ranks=16, **{"--moe-a2a-backend": "deepep"})
    bf16 = sglang("main", ranks=16, **{"--moe-a2a-backend": "deepep", "--deepep-dispatcher-output-dtype": "bf16"})
    fp8 = sglang("main", ranks=16, **{"--moe-a2a-backend": "deepep"})
    assert ours.report.inputs["param_bytes"] == 2 and ours.num_bytes == bf16.num_bytes > fp8.num_bytes
    with pytest.raises(InvalidArgumentError, match="sglang versions: main, 0.5.23, param-bytes-2"):
        sglang("0.5.22", **{"--moe-a2a-backend": "deepep"})


def test_sglang_mori_two_batch_overlap_builds_two_handles():
    flags = {"--moe-a2a-backend": "mori", "--chunked-prefill-size": 4096}
    one = sglang(device="mi300x", **flags)
    two = sglang(device="mi300x", **flags, **{"--enable-two-batch-overlap": True})
    assert one.report.inputs["num_handles"] == 1 and two.report.inputs["num_handles"] == 2
    sym1, local1 = one.report.buffers
    sym2, local2 = two.report.buffers
    assert local2.num_bytes == 2 * local1.num_bytes
    (second,) = [r for r in sym2.regions if r.name.startswith("handle 1")]
    assert sym2.num_bytes_needed == 2 * sym1.num_bytes_needed - 1024  # the 1 KiB sync buffer once
    assert second.num_bytes == sym1.num_bytes_needed - 1024


def test_sglang_mori_refused_on_mi300x_by_default():
    """16384 tokens of chunked prefill (>= 160 GiB) above the 4096 of the MoRI op: an error and 0 B; the
    flag, a decode instance or an unknown GPU do not refuse."""
    rep = sglang(device="mi300x", **{"--moe-a2a-backend": "mori"})
    assert rep.num_bytes == 0 and "sglang.mori-refused" in {f.code for f in rep.errors()}
    for extra, device in (({"--chunked-prefill-size": 4096}, "mi300x"), ({"--disaggregation-mode": "decode"}, "mi300x"),
                          ({}, None)):
        assert sglang(device=device, **{"--moe-a2a-backend": "mori"}, **extra).num_bytes > 0


def test_sglang_mori_dtype_follows_the_weights():
    """FP8 checkpoint: FP8 dispatch; a method that never calls set_quant_config (w8a8_int8): BF16, and the
    dtype variables are not read."""
    base = {"--moe-a2a-backend": "mori", "--chunked-prefill-size": 4096}
    assert sglang(**base).report.inputs["use_fp8_dispatch"] is True  # DeepSeek-V3's block-FP8 weights
    int8 = sglang(env={"SGLANG_MORI_DISPATCH_DTYPE": "fp8"}, **base, **{"--quantization": "w8a8_int8"})
    assert int8.report.inputs["use_fp8_dispatch"] is False and int8.report.inputs["scale_dim"] == 0
    assert sglang(**base, **{"--moe-weight-dtype": "bf16"}).report.inputs["use_fp8_dispatch"] is False


def test_sglang_deepep_v2_refusals_0_5_23():
    tokens = "SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK"
    v2 = {"--moe-a2a-backend": "deepep_v2"}
    refused = sglang(device="h100", **v2)  # prefill: ceil(8192 / 8) = 1024 > 128
    assert refused.num_bytes == 0 and "sglang.deepep-v2-refused" in {f.code for f in refused.errors()}
    ok = sglang(device="h100", env={tokens: "1024"}, **v2)
    assert ok.num_bytes > 0 and ok.report.inputs["use_fp8_dispatch"] is True
    graph = sglang(device="h100", env={tokens: "256"}, **v2, **{"--chunked-prefill-size": 2048})  # graph 512 > 256
    assert graph.num_bytes == 0
    assert sglang(device="h100", env={tokens: "256"}, **v2, **{"--chunked-prefill-size": 2048,
                                                                "--disable-cuda-graph": True}).num_bytes > 0
    assert sglang(device="h100", env={tokens: "1024"}, **v2, **{"--quantization": "w8a8_int8"}).num_bytes == 0
    assert sglang(device="h100", env={tokens: "1024"}, **v2,
                  **{"--deepep-dispatcher-output-dtype": "bf16"}).num_bytes == 0


def megatron(version="0.16.1", **flags):
    return report("megatron", **DSV3, version=version,
                  flags={"--expert-model-parallel-size": 16, "--moe-token-dispatcher-type": "flex", **flags})


def test_megatron_0_16_1_num_sms_and_dispatchers():
    """0.16.1 sizes DeepEP with --moe-deepep-num-sms only; main routes --moe-hybridep-num-sms to it;
    allgather and alltoall build nothing."""
    assert megatron(**{"--moe-hybridep-num-sms": 32}).report.inputs["num_sms"] == 20
    assert megatron("main", **{"--moe-hybridep-num-sms": 32}).report.inputs["num_sms"] == 32
    assert megatron(**{"--moe-deepep-num-sms": 24}).report.inputs["num_sms"] == 24
    with pytest.raises(InvalidArgumentError, match="not a setting of megatron-core 0.16.1"):
        megatron(**{"--moe-flex-dispatcher-num-sms": 24})
    for kind in ("alltoall", "allgather"):
        rep = megatron(**{"--moe-token-dispatcher-type": kind})
        assert rep.num_bytes == 0 and "megatron.no-deepep" in codes(rep.report)
