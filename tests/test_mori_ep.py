"""MORI-EP (``ROCm/mori`` @624002c): golden tables from the upstream code, properties, findings, limits.

Every golden number is derived in ``docs/derivations/mori_ep.md`` (section in each comment),
from ``src/ops/dispatch_combine/dispatch_combine.cpp`` (CPP), ``include/mori/ops/dispatch_combine/
dispatch_combine.hpp`` (HDR) and the MORI-shmem sources at that commit.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epbuf.backends import mori_ep
from epbuf.backends.mori_ep.config import EpDispatchCombineConfig, handle_config
from epbuf.backends.mori_ep.env import parse_size_string
from epbuf.backends.mori_ep.sizes import SYMM_MEM_OBJ_NUM_BYTES, handle_allocations, static_heap_usage
from epbuf.errors import InvalidArgumentError
from epbuf.plan import Plan, report, summarize
from epbuf.report import report_from_dict, report_to_dict, summary_of
from epbuf.units import GiB

from _cli_run import run_cli as run_main, run_cli_whole  # tests/_cli_run.py (conftest puts tests/ on the path)

DSV3 = dict(hidden=7168, num_topk=8, num_experts=256)


def plan(**changes) -> Plan:
    values = dict(DSV3, num_ranks=8, num_max_tokens_per_rank=4096)
    values.update(changes)
    return Plan(**values)


def sizes(rep, buffer: int = 0) -> dict[str, int]:
    return {r.name: r.num_bytes for r in rep.buffers[buffer].regions}


def config(**changes) -> EpDispatchCombineConfig:
    values = dict(world_size=8, hidden_dim=7168, scale_dim=56, scale_type_size=4, max_token_type_size=2,
                  max_num_inp_token_per_rank=4096, num_experts_per_rank=32, num_experts_per_token=8)
    values.update(changes)
    return EpDispatchCombineConfig(**values)


# --- §1 token counts --------------------------------------------------------------------------
@pytest.mark.parametrize(("ranks", "tokens", "cap", "per_rank", "recv"), [
    (8, 4096, 0, 4096, 32768),  # no cap: T (HDR:160-166)
    (8, 4096, 10000, 1250, 10000),  # ceil(10000 / 8) = 1250
    (8, 4096, 10001, 1251, 10008),  # rounding up: the buffers hold 7 tokens more than the cap
    (8, 32768, 8, 1, 8),
    (16, 256, 1, 1, 16),
    (8, 4096, 40000, 4096, 32768),  # the cap above the worst case is clamped (CPP:153-159)
])
def test_recv_token_counts(ranks, tokens, cap, per_rank, recv):
    c = handle_config(config(world_size=ranks, max_num_inp_token_per_rank=tokens, max_total_recv_tokens=cap))
    assert (c.max_num_tokens_to_recv_per_rank(), c.max_num_tokens_to_recv()) == (per_rank, recv)
    assert c.max_num_tokens_to_send() == ranks * tokens


@pytest.mark.parametrize(("hidden", "tts", "topk", "scale_bytes", "xfer"), [
    (7168, 2, 8, 224, 14628),  # §4: 14,336 + 32 + 32 + 4 + 224
    (7168, 1, 8, 224, 7460),  # FP8 stride of the records
    (4096, 2, 8, 0, 8260),
    (2880, 2, 4, 92, 5888),
])
def test_xfer_bytes_per_token(hidden, tts, topk, scale_bytes, xfer):
    c = config(hidden_dim=hidden, max_token_type_size=2, num_experts_per_token=topk, scale_dim=scale_bytes,
               scale_type_size=1)
    assert c.xfer_bytes_per_token(tts) == xfer


# --- §4 example A: IntraNode ------------------------------------------------------------------
def test_example_a_intranode_every_buffer():
    rep = report(plan(), "mori-ep")
    sym = sizes(rep)
    assert rep.inputs["kernel_type"] == "IntraNode"
    assert [(k, sym[k]) for k in ("shmem internal sync (shmem init)", "combineInp", "dispatchOut", "combineOut")] == [
        ("shmem internal sync (shmem init)", 1024), ("combineInp", 479330304), ("dispatchOut", 469762048),
        ("combineOut", 58720256)]
    for name in ("shmemInpWeightsMemObj", "shmemDispatchOutWeightsMemObj", "shmemCombineOutWeightsMemObj",
                 "shmemInpIndicesMemObj", "shmemOutIndicesMemObj"):
        assert sym[name] == 1048576
    assert sym["shmemInpScalesMemObj"] == sym["shmemOutScalesMemObj"] == 7340032
    assert [sym[k] for k in ("recvTokenNumMemObj", "sendTokenNumMemObj", "sendAtomicSignalMemObj",
                             "nodeRecvTokenNumMemObj", "dispTokOffsetMemObj")] == [256] * 5  # carved in 256 B units
    assert (sym["dispTokIdToSrcTokIdMemObj"], sym["crossDeviceBarrierMemObj"], sym["interNodeChunkFlagMemObj"]) == (
        4194304, 512, 32768)
    heap = rep.buffers[0]
    assert (heap.num_bytes, heap.num_bytes_needed) == (4 * GiB, 1031965440)  # reserved whole; carved
    assert sym["static heap not used by the handle"] == 4 * GiB - 1031965440 == 3263001856
    local = sizes(rep, 1)
    assert local["symmetric-buffer metadata (hipMalloc)"] == 18 * (136 + 20 * 8) == 5328
    assert local["local_expert_count (torch)"] == 128
    assert rep.buffers[1].num_bytes == 21157364
    assert (rep.num_bytes, rep.num_bytes_needed) == (4 * GiB + 21157364, 1053122804)
    assert rep.quantity("max_xfer_bytes_per_token") == 14628
    assert rep.records == ()  # intranode kernels write separate arrays, no per-token record
    assert not rep.failed_limits()


def test_sizes_module_equals_report():
    rows = handle_allocations(config(), 56)
    assert static_heap_usage([n for _, sym, n, _, _ in rows if sym]) == 1031965440
    assert [name for name, sym, *_ in rows if sym][:3] == ["combineInp", "dispatchOut", "combineOut"]
    assert SYMM_MEM_OBJ_NUM_BYTES == 136


# --- §5 example B: InterNodeV1 ----------------------------------------------------------------
def test_example_b_internode_v1():
    rep = report(plan(num_ranks=16, num_max_tokens_per_rank=256), "mori-ep")
    sym = sizes(rep)
    assert rep.inputs["kernel_type"] == "InterNodeV1" and rep.inputs["gpu_per_node"] == 8
    assert [sym[k] for k in ("dispatchInp", "combineInp", "staging", "dispatchOut", "combineOut", "dispatchStaging")] == [
        7489536, 59916288, 14979072, 58720256, 3670016, 3744768]
    assert rep.buffers[0].num_bytes_needed == 151280128
    assert sizes(rep, 1)["symmetric-buffer metadata (hipMalloc)"] == 21 * (136 + 20 * 16) == 9576
    assert rep.buffers[1].num_bytes == 1343188
    assert (rep.num_bytes, rep.num_bytes_needed) == (4 * GiB + 1343188, 152623316)
    (record,) = rep.records
    assert record.num_bytes == 7460
    assert [(f.name, f.offset, f.num_bytes) for f in record.data_fields()] == [
        ("hidden", 0, 7168), ("topk_idx", 7168, 32), ("topk_weights", 7200, 32), ("scales", 7232, 224),
        ("src_token_id", 7456, 4)]
    staging = rep.buffers[0].regions[[r.name for r in rep.buffers[0].regions].index("dispatchStaging")]
    assert (staging.shape, staging.record) == ((1, 256), "dispatch transfer token")


@pytest.mark.parametrize("kernel", ["InterNode", "AsyncLL"])
def test_internode_and_async_ll_allocate_the_worst_case(kernel):
    """InterNode and AsyncLL: dispatchInp, combineInp and staging are W x T x X each (CPP:342-354)."""
    rep = report(plan(num_ranks=16, num_max_tokens_per_rank=128, kernel_type=kernel), "mori-ep")
    sym = sizes(rep)
    assert sym["dispatchInp"] == sym["combineInp"] == sym["staging"] == 16 * 128 * 14628 == 29958144
    (record,) = rep.records
    names = [f.name for f in record.data_fields()]
    if kernel == "InterNode":  # internode.hpp:76-79: weights before indices, no source id
        assert names == ["hidden", "topk_weights", "topk_idx", "scales"] and record.num_bytes == 7456
    else:
        assert names == ["hidden", "topk_idx", "topk_weights", "scales", "src_token_id"] and record.num_bytes == 7460


# --- §6 example C: the receive cap and the arena ------------------------------------------------
def test_example_c_cap_findings_with_numbers():
    rep = report(plan(num_max_tokens_per_rank=32768, max_total_recv_tokens=8), "mori-ep")
    assert rep.quantity("max_num_tokens_to_recv") == 8
    assert rep.buffers[0].num_bytes_needed == 503818240  # the static heap holds it
    codes = {f.code: f for f in rep.findings}
    assert codes["mori-ep.recv-cap"].severity == "warning"
    disagreement = codes["mori-ep.arena-sizing-disagreement"]
    assert disagreement.severity == "warning"
    assert disagreement.data["arena"] == 269123584 and disagreement.data["need"] == 503817216
    assert disagreement.data["uncapped"] == {  # raw sizes; carved: 503,580,416 B
        "combineOut": 469762048, "recvTokenNumMemObj": 64, "sendTokenNumMemObj": 64, "sendAtomicSignalMemObj": 256,
        "nodeRecvTokenNumMemObj": 8, "dispTokOffsetMemObj": 4, "dispTokIdToSrcTokIdMemObj": 33554432,
        "crossDeviceBarrierMemObj": 512, "interNodeChunkFlagMemObj": 262144}
    assert "503,580,416 B in all" in disagreement.message
    assert "234,693,632 B more than it has" in disagreement.message
    assert not rep.failed_limits()


def test_example_c_with_cco_is_an_error():
    rep = report(plan(num_max_tokens_per_rank=32768, max_total_recv_tokens=8, env=(("MORI_EP_COMM", "cco"),)),
                 "mori-ep")
    (error,) = [f for f in rep.findings if f.severity == "error"]
    assert error.code == "mori-ep.cco-arena-exhausted"
    assert error.data == {"usage": 503817216, "arena": 269123584, "failing_buffer": "combineOut"}
    assert [lim.name for lim in rep.failed_limits()] == ["CCO arena usage (bytes)"]
    assert rep.buffers[0].name == "CCO arena (symmetric buffers)"
    assert rep.buffers[0].num_bytes == rep.buffers[0].num_bytes_needed == 503817216  # nothing left of the arena
    assert "shmem internal sync (shmem init)" not in sizes(rep)
    assert sizes(rep, 1)["symmetric-buffer metadata (hipMalloc)"] == 18 * (8 * 8 + 136)


def test_cco_arena_fits_without_cap():
    rep = report(plan(env=(("MORI_EP_COMM", " CCO "),)), "mori-ep")
    assert rep.inputs["comm"] == "cco"
    assert rep.quantity("cco_arena_num_bytes") == 6 * 32768 * 7168 * 2 + (256 << 20)
    assert {f.code for f in rep.findings} >= {"mori-ep.cco-arena"}
    assert not rep.failed_limits()


def test_cap_above_worst_case_is_clamped():
    rep = report(plan(max_total_recv_tokens=10**9), "mori-ep")
    assert rep.inputs["max_total_recv_tokens"] == 32768
    assert "mori-ep.recv-cap-clamped" in {f.code for f in rep.findings}
    assert rep.num_bytes == report(plan(), "mori-ep").num_bytes


# --- §7 example D: blockwise FP4 ----------------------------------------------------------------
def test_example_d_fp4_blockwise():
    rep = report(plan(num_max_tokens_per_rank=128, quant_type="FP4_Blockwise",
                      env=(("MORI_FP8_COMBINE_SCALE_DIM", "112"),)), "mori-ep")
    sym = sizes(rep)
    assert sym["combineInp"] == 1024 * (3584 + 32 + 32 + 4 + 448) == 4198400
    assert (sym["shmemInpScalesMemObj"], sym["shmemOutScalesMemObj"]) == (458752, 229376)
    assert rep.quantity("fp8_blockwise_combine_scale_dim") == 112


def test_blockwise_on_a_kernel_that_refuses_it():
    rep = report(plan(num_max_tokens_per_rank=128, quant_type="fp8_blockwise", kernel_type="InterNodeV1"), "mori-ep")
    (lim,) = rep.failed_limits()
    assert lim.relation == "in" and lim.enforced == "host"
    assert any(f.code == "mori-ep.limit" and "InterNodeV1 is not one of them" in f.message for f in rep.findings)
    ok = report(plan(num_max_tokens_per_rank=128, quant_type="fp8_blockwise", kernel_type="AsyncLL"), "mori-ep")
    assert not ok.failed_limits()


# --- §3 the static heap -------------------------------------------------------------------------
def test_heap_default_and_error_text_finding():
    rep = report(plan(), "mori-ep")
    assert rep.quantity("static_heap_num_bytes") == 4 * GiB
    (text,) = [f for f in rep.findings if f.code == "mori-ep.heap-error-text"]
    assert "default: 2GB" in text.message and "4 GiB" in text.message
    assert text.data == {"message_default": "2GB", "default_num_bytes": 4 * GiB}


def test_heap_limit_binds_at_17047_tokens():
    """§4: 17,047 tokens use 4,294,892,288 B of the 4 GiB heap; 17,048 need 4,295,144,192."""
    fits = report(plan(num_max_tokens_per_rank=17047), "mori-ep")
    assert fits.buffers[0].num_bytes_needed == 4294892288 and not fits.failed_limits()
    assert fits.buffers[0].num_bytes == 4 * GiB
    over = report(plan(num_max_tokens_per_rank=17048), "mori-ep")
    assert over.buffers[0].num_bytes == over.buffers[0].num_bytes_needed == 4295144192
    assert [lim.name for lim in over.failed_limits()] == ["symmetric heap usage (bytes, MORI_SHMEM_HEAP_SIZE)"]
    (error,) = [f for f in over.findings if f.severity == "error"]
    # 176,896 B too many: the allocation that crosses the end is InitializeOrderMapBuf's
    # dispTokIdToSrcTokIdMemObj (17,457,152 B); the two after it total only 136,896 B
    assert error.code == "mori-ep.heap-exhausted" and error.data["failing_buffer"] == "dispTokIdToSrcTokIdMemObj"
    assert "MORI_SHMEM_HEAP_SIZE=4097M" in error.message
    bigger = report(plan(num_max_tokens_per_rank=17048, env=(("MORI_SHMEM_HEAP_SIZE", "4097M"),)), "mori-ep")
    assert not bigger.failed_limits()


def test_isolation_mode_has_no_heap_limit():
    rep = report(plan(num_max_tokens_per_rank=17048, env=(("MORI_SHMEM_MODE", "isolation"),)), "mori-ep")
    assert not rep.failed_limits()
    sym = sizes(rep)
    assert sym["recvTokenNumMemObj"] == 64  # one allocation each: no 256-byte carving
    assert rep.buffers[0].name.startswith("symmetric buffers (MORI-shmem isolation")


@pytest.mark.parametrize(("text", "value", "tail"), [
    ("8GB", 8 * GiB, ""), ("8GiB", 8 * GiB, ""), ("8gib", 8 * GiB, ""), ("8G", 8 * GiB, ""), ("8g", 8 * GiB, ""),
    ("512MB", 512 << 20, ""), ("512m", 512 << 20, ""), ("64KiB", 64 << 10, ""), ("4096", 4096, ""),
    ("4.5G", 4 * GiB, ".5"), (" +2G", 2 * GiB, ""), ("2gB", 2, "gB"),  # "gB" is no suffix: stoull stops at it
])
def test_parse_size_string(text, value, tail):
    """ParseSizeString (SHMEM_INIT:96-150): every suffix is a power of 1024; stoull keeps the leading integer."""
    assert parse_size_string(text) == (value, tail)


@pytest.mark.parametrize("text", ["abc", "G", "", "-1G"])
def test_parse_size_string_rejects(text):
    with pytest.raises(InvalidArgumentError, match="MORI_SHMEM_HEAP_SIZE"):
        parse_size_string(text)


@pytest.mark.parametrize(("value", "used"), [("0", 56), ("-4", 56), ("12x", 56), ("", 56), ("2147483648", 56),
                                             ("28", 28), (" +28", 28)])
def test_blockwise_scale_dim_env(value, used):
    """GetPositiveIntOr: anything but a whole int in 1..INT_MAX keeps the default 56 (env_utils.hpp:81-90,118-123)."""
    rep = report(plan(num_max_tokens_per_rank=128, quant_type="fp8_blockwise",
                      env=(("MORI_FP8_COMBINE_SCALE_DIM", value),)), "mori-ep")
    assert rep.quantity("fp8_blockwise_combine_scale_dim") == used
    assert ("mori-ep.env-ignored" in {f.code for f in rep.findings}) == (used == 56)


def test_shmem_mode_spellings():
    """Exact spellings only; others fall back to the static heap (SHMEM_INIT:615-638)."""
    assert report(plan(env=(("MORI_SHMEM_MODE", "ISOLATION"),)), "mori-ep").inputs["shmem_mode"] == "isolation"
    odd = report(plan(env=(("MORI_SHMEM_MODE", "Isolation"),)), "mori-ep")
    assert odd.inputs["shmem_mode"] == "static_heap" and "mori-ep.env-ignored" in {f.code for f in odd.findings}
    with pytest.raises(InvalidArgumentError, match="vmm_heap.*not modeled"):
        report(plan(env=(("MORI_SHMEM_MODE", "vmm_heap"),)), "mori-ep")


# --- §8 limits ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("changes", "broken"), [
    (dict(num_ranks=12, num_ranks_per_node=6, num_experts=252, num_max_tokens_per_rank=64),
     ["gpu_per_node power of two (gpu_per_node & (gpu_per_node - 1))"]),
    (dict(num_ranks=16, num_max_tokens_per_rank=64, kernel_type="IntraNode"),
     ["world_size (IntraNode kernels: MAX_GPUS_PER_NODE)", "world_size <= gpu_per_node (IntraNode: one node)"]),
    (dict(num_ranks=16, num_ranks_per_node=4, num_max_tokens_per_rank=64, kernel_type="internode"),
     ["gpu_per_node (InterNode kernel divides ranks by MAX_GPUS_PER_NODE)"]),
    (dict(num_topk=64, num_max_tokens_per_rank=64), ["num_experts_per_token < warpSize"]),
])
def test_limits_are_error_findings_with_sizes(changes, broken):
    """The rule: sizes plus an error finding (and the limit with ok=False) when a later step refuses."""
    rep = report(plan(**changes), "mori-ep")
    assert rep.num_bytes > 0
    assert [lim.name for lim in rep.failed_limits()] == broken
    assert sum(f.code == "mori-ep.limit" for f in rep.findings) == len(broken)
    assert summarize(plan(**changes), "mori-ep").broken == tuple(broken)


@pytest.mark.parametrize(("changes", "match"), [
    (dict(num_topk=0), r"--topk \(num_topk\) = 0"),
    (dict(num_experts=250), r"--experts \(num_experts\) = 250: .*divisible by num_ranks = 8"),
    (dict(kernel_type="IntraNodeHT"), r"--kernel-type .*IntraNodeHT"),
    (dict(quant_type="int8"), r"--quant-type .*'int8'"),
    (dict(num_max_tokens_per_rank=(1 << 31) // 8), r"overflows int32"),
    (dict(version="dd758ca"), r"unknown MORI-EP version"),
    (dict(env=(("MORI_SHMEM_HEAP_SIZE", "lots"),)), r"MORI_SHMEM_HEAP_SIZE=lots"),
    (dict(env=(("MORI_SHMEM_HEAP_SIZE", "0G"),)), r"0-byte static heap"),
])
def test_invalid_plans_raise_one_line(changes, match):
    with pytest.raises(InvalidArgumentError, match=match) as info:
        report(plan(**changes), "mori-ep")
    assert "\n" not in str(info.value)


def test_version_ids():
    assert mori_ep.DEFAULT_VERSION == "624002c" and list(mori_ep.VERSIONS) == ["624002c"]
    for version in ("624002c", "624002c8", "latest", "624002c897a30928ec04c14fc167bf2b8a93f6ce"):
        assert report(plan(version=version), "mori-ep").num_bytes_needed == 1053122804


def test_report_round_trips_through_json():
    rep = report(plan(num_ranks=16, num_max_tokens_per_rank=64), "mori-ep")
    assert report_from_dict(report_to_dict(rep)) == rep


# --- properties -------------------------------------------------------------------------------------
kernels = st.sampled_from(mori_ep.KERNEL_TYPES)
plans = st.builds(
    lambda ranks_per_node, nodes, tokens, hidden, topk, experts_per_rank, fp8, kernel, cap, quant, tts, comm: Plan(
        hidden=hidden, num_topk=topk, num_experts=experts_per_rank * ranks_per_node * nodes,
        num_ranks=ranks_per_node * nodes, num_ranks_per_node=ranks_per_node, num_max_tokens_per_rank=tokens,
        use_fp8_dispatch=fp8, kernel_type=kernel, max_total_recv_tokens=cap, quant_type=quant,
        max_token_type_size=tts, env=(("MORI_EP_COMM", comm),)),
    st.sampled_from([1, 2, 4, 8]), st.integers(1, 4), st.integers(1, 5000), st.integers(1, 1 << 14),
    st.integers(1, 70), st.integers(1, 300), st.booleans(), kernels, st.integers(0, 40000),
    st.sampled_from(mori_ep.QUANT_TYPES), st.sampled_from([1, 2, 4]), st.sampled_from(["shmem", "cco"]))


@settings(max_examples=150, deadline=None)
@given(p=plans)
def test_summarize_equals_the_report(p):
    """summarize(plan) == summary_of(report(plan)): the sweep path and the report agree."""
    assert mori_ep.summarize(p) == summary_of(mori_ep.report(p))


@settings(max_examples=100, deadline=None)
@given(p=plans, more=st.integers(1, 4096))
def test_monotone_in_tokens(p, more):
    """Every allocation is non-decreasing in num_max_tokens_per_rank, so fit's binary search is exact."""
    small, big = mori_ep.report(p), mori_ep.report(p.replace(num_max_tokens_per_rank=p.num_max_tokens_per_rank + more))
    assert big.num_bytes >= small.num_bytes and big.num_bytes_needed >= small.num_bytes_needed
    assert small.num_bytes >= small.num_bytes_needed
    for a, b in zip(small.buffers[0].regions, big.buffers[0].regions):
        if "not used by the handle" not in a.name:  # what the buffers leave of the heap shrinks
            assert (a.name, b.num_bytes >= a.num_bytes) == (b.name, True)


@settings(max_examples=100, deadline=None)
@given(p=plans)
def test_heap_regions_are_carved_in_256_byte_units(p):
    """With MORI-shmem every symmetric region is a multiple of 256 (SHMEM_MEM:37-41); the heap usage
    is 1,024 + their sum, and the limit compares exactly that."""
    rep = mori_ep.report(p.replace(env=()))
    regions = rep.buffers[0].regions
    assert all(r.num_bytes % 256 == 0 for r in regions)
    (heap,) = [lim for lim in rep.limits if lim.name.startswith("symmetric heap usage")]
    assert heap.value == rep.buffers[0].num_bytes_needed == sum(r.num_bytes_used for r in regions)
    assert heap.ok == (heap.value <= 4 * GiB)
    assert rep.buffers[0].num_bytes == max(4 * GiB, heap.value)


# --- the command line ---------------------------------------------------------------------------
def test_cli_hint(capsys):
    code, out, err = run_main(capsys, "hint", "--backend", "mori-ep", "--topk", "8")
    assert code == 0 and err == ""
    for text in ("MORI-EP EpDispatchCombineHandle (IntraNode)", "479,330,304", "real need:         1,031,965,440 B",
                 "real need 1,053,122,804 B", "[mori-ep.heap-error-text]", "[mori-ep.static-heap]",
                 "MORI_SHMEM_HEAP_SIZE=985M is the smallest heap"):
        assert text in out


def test_cli_hint_json_and_strict(capsys):
    import json

    code, out, _ = run_main(capsys, "hint", "--backend", "mori-ep", "--topk", "8", "--tokens", "17048", "--json",
                            "--strict", "--device", "mi300x")
    assert code == 1  # the heap limit is an error finding
    data = json.loads(out)
    assert data["schema"] == "epbuf.report/1" and data["backend"] == "mori-ep"
    assert data["buffers"][0]["num_bytes_needed"] == 4295144192
    assert data["device"]["name"] == "AMD Instinct MI300X"
    code, _, _ = run_main(capsys, "hint", "--backend", "mori-ep", "--topk", "8", "--tokens", "17048", "--strict",
                          "--env", "MORI_SHMEM_HEAP_SIZE=8G")
    assert code == 0


def test_cli_options_reach_the_plan(capsys):
    import json

    code, out, _ = run_main(capsys, "hint", "--backend", "mori-ep", "--topk", "8", "--ranks", "16", "--tokens", "256",
                            "--kernel-type", "asyncll", "--max-total-recv-tokens", "1000", "--quant-type",
                            "fp8_blockwise", "--max-token-type-size", "4", "--num-scale-bytes", "64", "--env",
                            "MORI_EP_COMM=cco", "--json")
    assert code == 0
    inputs = json.loads(out)["inputs"]
    assert (inputs["kernel_type"], inputs["max_total_recv_tokens"], inputs["quant_type"], inputs["max_token_type_size"],
            inputs["scale_dim"], inputs["scale_type_size"], inputs["comm"]) == (
        "AsyncLL", 1000, "fp8_blockwise", 4, 64, 1, "cco")


def test_cli_compare_fit_sweep_layout(capsys, tmp_path):
    import json

    code, out, _ = run_main(capsys, "compare", "--topk", "8", "--ranks", "16", "--tokens", "256", "--json")
    backends = json.loads(out)["backends"]
    assert code == 0 and backends["mori-ep"]["num_bytes_needed"] == 152623316 and "deepep-ll" in backends
    code, out, _ = run_main(capsys, "compare", "--topk", "8", "--ranks", "16", "--tokens", "256", "--backends",
                            "mori-ep,deepep-ll", "--device", "mi355x")
    assert code == 0 and "mori-ep" in out and "of AMD Instinct MI355X" in out
    code, out, _ = run_main(capsys, "fit", "--topk", "8", "--budget", "1TiB", "--backends", "mori-ep", "--json")
    result = json.loads(out)["results"]["mori-ep"]
    assert code == 0 and result["value"] == 17047
    assert result["binding"] == "symmetric heap usage (bytes, MORI_SHMEM_HEAP_SIZE)"
    code, out, _ = run_main(capsys, "sweep", "--topk", "8", "--tokens", "4096,17048", "--backends", "mori-ep", "--json")
    rows = json.loads(out)["rows"]
    assert code == 0 and [r[8] for r in rows] == [1053122804,
                                                   report(plan(num_max_tokens_per_rank=17048), "mori-ep").num_bytes]
    assert rows[1][10] == "symmetric heap usage (bytes, MORI_SHMEM_HEAP_SIZE)"
    svg = tmp_path / "mori.svg"
    code, out, _ = run_main(capsys, "layout", "--backend", "mori-ep", "--topk", "8", "--ranks", "16", "--tokens", "256",
                            "--svg", str(svg))
    assert code == 0 and "dispatch transfer token: 7,460 B per record" in out and svg.read_text().startswith("<svg")


@pytest.mark.parametrize(("argv", "text"), [
    (("--kernel-type", "Foo"), "--kernel-type (kernel_type) = 'Foo'"),
    (("--env", "NOEQUALS"), "--env (env) = 'NOEQUALS': use NAME=VALUE"),
    (("--env", "MORI_SHMEM_HEAP_SIZE=abc"), "MORI_SHMEM_HEAP_SIZE=abc"),
    (("--max-total-recv-tokens", "-3"), "--max-total-recv-tokens"),
    (("--quant-type", "int4"), "--quant-type (quant_type) = 'int4'"),
    (("--backend-version", "nope"), "unknown MORI-EP version"),
    (("--topk", "0"), "--topk (num_topk) = 0"),
])
def test_cli_bad_input_is_one_line_exit_2(capsys, argv, text):
    code, out, err = run_cli_whole(capsys, "hint", "--backend", "mori-ep", *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and text in err


def test_cli_versions_and_devices(capsys):
    import json

    code, out, _ = run_main(capsys, "versions", "--json")
    entry = json.loads(out)["backends"]["mori-ep"]
    assert code == 0 and entry["default"] == "624002c" and "@624002c (2026-08-21)" in entry["versions"]["624002c"]
    code, out, _ = run_main(capsys, "devices")
    assert code == 0 and "mi325x" in out and "mi355x" in out


def _config() -> EpDispatchCombineConfig:
    return EpDispatchCombineConfig(world_size=8, hidden_dim=7168, scale_dim=56, scale_type_size=4,
                                   max_token_type_size=2, max_num_inp_token_per_rank=4096, num_experts_per_rank=32,
                                   num_experts_per_token=8)


@pytest.mark.parametrize("bad", [-7, 7.0, float("nan"), "7", True, None])
def test_public_size_functions_reject_hostile_arguments(bad):
    """The handle's plain arguments are checked like every upstream-named function's (issue 9)."""
    with pytest.raises(InvalidArgumentError) as info:
        handle_allocations(_config(), bad)
    assert [p.argument for p in info.value.problems] == ["fp8_blockwise_combine_scale_dim"]
    with pytest.raises(InvalidArgumentError) as info:
        mori_ep.metadata_num_bytes(bad, "shmem")
    assert [p.argument for p in info.value.problems] == ["world_size"]
    for fn in (mori_ep.initialize_token_num_signal_buf, mori_ep.initialize_order_map_buf,
               mori_ep.initialize_barrier, mori_ep.cco_arena_num_bytes):
        with pytest.raises(InvalidArgumentError, match="must be an EpDispatchCombineConfig"):
            fn(bad)


def test_metadata_num_bytes_from_the_source():
    """SymmMemObj + (8 + 8 + 4) B per rank with MORI-shmem (SYMM:454-466); 8 B per rank + SymmMemObj
    with CCO (CPP:242-255); anything else is not a MORI_EP_COMM value."""
    assert mori_ep.metadata_num_bytes(8, "shmem") == SYMM_MEM_OBJ_NUM_BYTES + 8 * 20
    assert mori_ep.metadata_num_bytes(8, "cco") == SYMM_MEM_OBJ_NUM_BYTES + 8 * 8
    with pytest.raises(InvalidArgumentError, match="'shmem' or 'cco'"):
        mori_ep.metadata_num_bytes(8, "nccl")
    # the CCO arena: 6 x MaxNumTokensToRecv (8 x 4096) x 7168 x 2 + 256 MiB (CPP:211-213)
    assert mori_ep.cco_arena_num_bytes(_config()) == 6 * 8 * 4096 * 7168 * 2 + (256 << 20)
