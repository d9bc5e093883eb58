"""pplx-kernels (``ppl-ai/pplx-kernels`` @12cecfd): golden tables from the upstream code, properties,
findings, limits.

Every golden number is derived in ``docs/derivations/pplx_kernels.md`` (section in each comment),
from ``csrc/all_to_all/internode.cpp`` (INTER), ``intranode.cpp`` (INTRA), ``all_to_all.cpp``
(BASE) and ``src/pplx_kernels/all_to_all.py`` (PY) at that commit.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epbuf.backends import pplx
from epbuf.errors import InvalidArgumentError
from epbuf.plan import Plan, report, summarize
from epbuf.report import report_from_dict, report_to_dict, summary_of

from _cli_run import run_cli as run_main  # tests/_cli_run.py (conftest puts tests/ on the path)

DSV3 = dict(hidden=7168, num_topk=8, num_experts=256)


def plan(**changes) -> Plan:
    values = dict(DSV3, num_ranks=16, num_max_tokens_per_rank=128)
    values.update(changes)
    return Plan(**values)


def regions(rep, buffer: int = 0) -> dict[str, tuple[int, int]]:
    return {r.name: (r.num_bytes, r.num_bytes_used) for r in rep.buffers[buffer].regions}


@pytest.mark.parametrize(("hidden_bytes", "scale_bytes", "per_token"), [
    (7168, 224, 7408),  # round_up(7168 + 224 + 4, 16) (BASE:34-35)
    (14336, 0, 14352),
    (7168, 0, 7184),
    (2880, 92, 2976),
    (2880, 96, 2992),
    (16, 16, 48),
])
def test_per_token_bytes(hidden_bytes, scale_bytes, per_token):
    assert pplx.per_token_bytes(hidden_bytes, scale_bytes) == per_token


@pytest.mark.parametrize(("experts", "ranks", "dp", "local", "groups"), [
    (256, 16, 1, 16, 16), (256, 16, 4, 16, 4), (250, 16, 1, 16, 16), (256, 12, 8, 22, 2)])
def test_derived_counts(experts, ranks, dp, local, groups):
    """ceil_div for both (BASE:21-22)."""
    assert (pplx.num_local_experts(experts, ranks), pplx.num_dp_groups(ranks, dp)) == (local, groups)



# The public upstream-named functions, their valid arguments (AllToAll.internode / intranode's order,
# without rank and group_name) and a value derived by hand from the source; each argument replaced by
# a hostile value raises InvalidArgumentError naming it (README "Python API"; issue 9's rule).
# int64_t in the binding (csrc/bindings/all_to_all_ops.cpp:54-63, 79-88); world_size and dp_size are
# unsigned divisors (BASE:21-22), so at least 1.
_ALLOC_ARGS = ("max_num_tokens", "num_experts", "experts_per_token", "world_size", "dp_size", "hidden_dim",
               "hidden_dim_bytes", "hidden_dim_scale_bytes")
PUBLIC = {
    # round_up(7168 + 224 + 4, 16) (BASE:34-35)
    "per_token_bytes": (pplx.per_token_bytes, (7168, 224), ("hidden_dim_bytes", "hidden_dim_scale_bytes"), 7408),
    "num_local_experts": (pplx.num_local_experts, (256, 16), ("num_experts", "world_size"), 16),
    "num_dp_groups": (pplx.num_dp_groups, (16, 4), ("world_size", "dp_size"), 4),
    # 16 local experts x 16 DP groups x 1024 tokens (INTER:34)
    "internode_max_batch_tokens": (pplx.internode_max_batch_tokens, (1024, 256, 16, 1),
                                   ("max_num_tokens", "num_experts", "world_size", "dp_size"), 262144),
    "intranode_max_batch_tokens": (pplx.intranode_max_batch_tokens, (128, 256, 8),
                                   ("max_num_tokens", "num_experts", "world_size"), 32 * 128 * 8),
    "intranode_buffer_sizes": (pplx.intranode_buffer_sizes, (128, 256, 8, 7168, 7168, 224),
                               ("max_num_tokens", "num_experts", "world_size", "hidden_dim", "hidden_dim_bytes",
                                "hidden_dim_scale_bytes"), (30343312, 117440656)),
    # xCombineOut = 1024 tokens x 256 experts x 7168 x sizeof(float) (INTER:67-68): 7.00 GiB
    "internode_allocations": (pplx.internode_allocations, (1024, 256, 8, 16, 1, 7168, 7168, 224), _ALLOC_ARGS,
                              7516192768),
    "intranode_allocations": (pplx.intranode_allocations, (128, 256, 8, 8, 1, 7168, 7168, 224), _ALLOC_ARGS,
                              8 * 117440656),
}
HOSTILE = [-7, 7.0, float("nan"), "7", True, None, 1 << 64]


def _value(name, result):
    if name == "internode_allocations":
        return dict((row[0], row[2]) for row in result)["xCombineOut"]
    if name == "intranode_allocations":
        return dict((row[0], row[2]) for row in result)["sendBuffers (combine layout)"]
    return result


@pytest.mark.parametrize("name", list(PUBLIC))
def test_public_functions_reject_hostile_arguments(name):
    fn, args, names, expected = PUBLIC[name]
    assert _value(name, fn(*args)) == expected
    for i, argument in enumerate(names):
        for bad in HOSTILE:
            hostile = list(args)
            hostile[i] = bad
            with pytest.raises(InvalidArgumentError) as info:
                fn(*hostile)
            assert [p.argument for p in info.value.problems] == [argument], (name, argument, bad)
            assert "\n" not in str(info.value)


@pytest.mark.parametrize("divisor", ["world_size", "dp_size"])
def test_zero_world_or_dp_size_is_invalid_not_a_division_by_zero(divisor):
    args = dict(zip(_ALLOC_ARGS, (128, 256, 8, 16, 1, 7168, 7168, 224)))
    args[divisor] = 0
    with pytest.raises(InvalidArgumentError, match=rf"\({divisor}\) = 0: allowed 1\.\."):
        pplx.internode_allocations(**args)

# --- §5 example A: internode -----------------------------------------------------------------------
def test_example_a_internode_every_buffer():
    rep = report(plan(), "pplx")
    assert rep.inputs["kernel_type"] == "internode"
    sym = regions(rep)
    assert sym == {
        "numTokensBuffer": (2048, 2048), "numDispatchRecvBuffer": (2048, 2048), "combineSignalBuffer": (1024, 1024),
        "combineSyncBuffer": (128, 128), "xDispatchIn": (948224, 948224), "xDispatchOut": (242745344, 242745344),
        "xCombineIn": (939524096, 469762048), "xCombineOut": (939524096, 469762048)}
    assert rep.buffers[0].num_bytes == 2122747008
    local = regions(rep, 1)
    assert local["numTokensPerDP"] == (1024, 1024) and local["tokenIndex"] == (4, 4)
    assert [local[k][0] for k in ("sourceIndex", "sourceExpert", "sourceOffset", "sourceGroup", "sourceToken")] == [
        131072] * 5
    assert rep.buffers[1].num_bytes == 656388
    assert (rep.num_bytes, rep.num_bytes_needed) == (2123403396, 1183879300)
    codes = {f.code: f for f in rep.findings}
    assert codes["pplx.nvshmem-heap"].data == {"nvshmem_num_bytes": 2122747008, "symmetric_size": 1 << 30}
    assert codes["pplx.combine-out-blowup"].data["xCombineOut"] == 939524096
    assert codes["pplx.float-combine-reserve"].data["num_bytes_over_reserved"] == 939524096
    assert not rep.failed_limits()


def test_example_a_records():
    dispatch, combine = report(plan(), "pplx").records
    assert dispatch.num_bytes == 7408
    assert [(f.name, f.offset, f.num_bytes) for f in dispatch.fields] == [
        ("hidden", 0, 7168), ("scales", 7168, 224), ("src_token_index", 7392, 4), ("padding", 7396, 12)]
    assert (combine.name, combine.num_bytes) == ("combine token (BF16)", 14336)
    shapes = {r.name: (r.shape, r.record) for r in report(plan(), "pplx").buffers[0].regions if r.shape}
    assert shapes == {"xDispatchIn": ((1, 128), "dispatch token"), "xDispatchOut": ((256, 128), "dispatch token"),
                      "xCombineOut": ((256, 128), "combine token (BF16)")}


def test_combine_out_blowup_at_deepseek_scale():
    """§5: xCombineOut = 1,024 x 256 x 7,168 x 4 = 7,516,192,768 B on every rank, whatever the EP size."""
    for ranks in (16, 32, 64):
        rep = report(plan(num_ranks=ranks, num_max_tokens_per_rank=1024), "pplx")
        assert regions(rep)["xCombineOut"] == (7516192768, 3758096384)
        (finding,) = [f for f in rep.findings if f.code == "pplx.combine-out-blowup"]
        assert finding.severity == "warning"


def test_nvshmem_symmetric_size_env():
    """2,122,747,008 B of nvshmem_malloc: more than 1.9g (2,040,109,466 B), less than 2g."""
    rep = report(plan(env=(("NVSHMEM_SYMMETRIC_SIZE", "1.9g"),)), "pplx")
    assert rep.inputs["NVSHMEM_SYMMETRIC_SIZE"] == "1.9g"
    assert [f.data for f in rep.findings if f.code == "pplx.nvshmem-heap"] == [
        {"nvshmem_num_bytes": 2122747008, "symmetric_size": 2040109466}]
    rep = report(plan(env=(("NVSHMEM_SYMMETRIC_SIZE", "2g"),)), "pplx")
    assert "pplx.nvshmem-heap" not in {f.code for f in rep.findings}


@pytest.mark.parametrize(("text", "value"), [("20m", 20971520), ("3.1M", 3250586), (".5m", 524288), ("1073741824", 1 << 30),
                                             ("20kk", 20480), ("2g", 2 << 30), ("0.5T", 1 << 39)])
def test_parse_nvshmem_size(text, value):
    """NVSHMEM_SYMMETRIC_SIZE: k/m/g/t are powers of 1024, fractions round up, text after the suffix is ignored."""
    assert pplx.parse_nvshmem_size(text) == value


# --- §6 example B: intranode -----------------------------------------------------------------------
def test_example_b_intranode():
    rep = report(plan(num_ranks=8), "pplx")
    assert rep.inputs["kernel_type"] == "intranode"
    assert pplx.intranode_buffer_sizes(128, 256, 8, 7168, 7168, 224) == (30343312, 117440656)
    peer = regions(rep)
    assert peer == {"sendBuffers (dispatch layout)": (8 * 30343312, 8 * 30343312),
                    "sendBuffers (combine layout)": (939525248, 469763200)}
    assert (rep.buffers[0].rule, rep.buffers[0].num_bytes, rep.buffers[0].num_bytes_needed) == ("max", 939525248,
                                                                                                469763200)
    local = regions(rep, 1)
    assert [local[k][0] for k in ("sendBuffersPtr", "recvBuffersPtr", "localRecvCountPtr", "countBuffersPtr",
                                  "tokenCount", "numTokensPerRank", "tokenIndex")] == [64, 64, 512, 64, 1024, 1024, 4]
    assert [local[k][0] for k in ("sourceIndex", "sourceExpert", "sourceOffset", "sourceRank", "sourceToken",
                                  "sourceRoute")] == [131072] * 6
    assert rep.buffers[1].num_bytes == 789188
    assert rep.num_bytes == 940314436
    assert rep.records[1].num_bytes == 14336  # round_up(7168 x 2, 16)
    assert not rep.failed_limits()


def test_bf16_dispatch_has_no_scales():
    rep = report(plan(use_fp8_dispatch=False), "pplx")
    assert (rep.inputs["hidden_dim_bytes"], rep.inputs["hidden_dim_scale_bytes"]) == (14336, 0)
    assert rep.records[0].num_bytes == 14352
    assert [f.name for f in rep.records[0].data_fields()] == ["hidden", "src_token_index"]


# --- §7 limits ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("changes", "broken"), [
    (dict(hidden=7000, num_scale_bytes=224), ["hidden_dim_bytes % 16"]),
    (dict(hidden=2880), ["hidden_dim_scale_bytes % 16"]),  # 23 x 4 = 92
    (dict(hidden=2880, num_scale_bytes=96), []),  # what vLLM passes
    (dict(num_scale_bytes=8000), ["hidden_dim_scale_bytes <= hidden_dim_bytes"]),
    (dict(num_scale_bytes=8008), ["hidden_dim_scale_bytes % 16", "hidden_dim_scale_bytes <= hidden_dim_bytes"]),
    (dict(dp_group_size=16), ["DP groups (world_size / dp_size)"]),
    (dict(dp_group_size=3), ["world_size % dp_size"]),
    (dict(num_experts=250), ["num_experts % world_size"]),
    # hidden % 8 breaks only with hidden_dim_bytes % 16 here: H x 1 or H x 2 is a multiple of 16 only if H is of 8
    (dict(hidden=7172, num_scale_bytes=224), ["hidden_dim_bytes % 16", "hidden_dim % 8 (combine VEC_SIZE)"]),
    (dict(num_experts=16 * 800), ["dispatch dynamic shared memory (bytes)"]),
    (dict(num_max_tokens_per_rank=(1 << 25) - 1, dp_group_size=2),  # 128 T fits uint32, 256 T does not
     ["num_experts x max_num_tokens (uint32 combine slot index)"]),
    (dict(num_max_tokens_per_rank=1 << 24),
     ["maxBatchTokens (uint32 slot index)", "num_experts x max_num_tokens (uint32 combine slot index)"]),
    (dict(num_ranks=8, kernel_type="intranode", hidden=24576, use_fp8_dispatch=False),  # 49,168 > 49,152
     ["dispatch dynamic shared memory (bytes)"]),
    (dict(num_ranks=16, kernel_type="intranode"), ["world_size <= ranks per node (CUDA IPC)"]),
])
def test_limits_are_error_findings_with_sizes(changes, broken):
    rep = report(plan(**changes), "pplx")
    assert rep.num_bytes > 0
    assert [lim.name for lim in rep.failed_limits()] == broken
    assert sum(f.code == "pplx.limit" for f in rep.findings) == len(broken)
    assert summarize(plan(**changes), "pplx").broken == tuple(broken)


def test_sixteen_byte_finding_names_the_vllm_rounding():
    rep = report(plan(hidden=2880), "pplx")
    (finding,) = [f for f in rep.findings if f.code == "pplx.limit"]
    assert "92" in finding.message and "vLLM rounds" in finding.message


def test_one_rank_is_one_dp_group():
    rep = report(plan(num_ranks=1, num_experts=256), "pplx")
    assert [lim.name for lim in rep.failed_limits()] == ["DP groups (world_size / dp_size)"]


@pytest.mark.parametrize(("changes", "match"), [
    (dict(kernel_type="InterNodeV1"), r"--kernel-type \(kernel_type\) = 'InterNodeV1': pplx-kernels has"),
    (dict(version="624002c"), r"unknown pplx-kernels version"),
    (dict(env=(("NVSHMEM_SYMMETRIC_SIZE", "big"),)), r"NVSHMEM_SYMMETRIC_SIZE=big"),
    (dict(num_max_tokens_per_rank=(1 << 31) - 1, num_experts=(1 << 31) - 1, hidden=(1 << 31) - 1),
     r"beyond size_t"),
])
def test_invalid_plans_raise_one_line(changes, match):
    with pytest.raises(InvalidArgumentError, match=match) as info:
        report(plan(**changes), "pplx")
    assert "\n" not in str(info.value)


def test_topk_is_not_a_size():
    """experts_per_token only picks the launch grid: sizes do not depend on it (0 included)."""
    assert report(plan(num_topk=0), "pplx").num_bytes == report(plan(num_topk=8), "pplx").num_bytes


def test_report_round_trips_through_json():
    for ranks in (8, 16):
        rep = report(plan(num_ranks=ranks), "pplx")
        assert report_from_dict(report_to_dict(rep)) == rep


# --- properties -----------------------------------------------------------------------------------------
plans = st.builds(
    lambda ranks, tokens, hidden, experts, fp8, kernel, dp, scale: Plan(
        hidden=hidden, num_topk=8, num_experts=experts, num_ranks=ranks, num_max_tokens_per_rank=tokens,
        use_fp8_dispatch=fp8, kernel_type=kernel, dp_group_size=dp, num_scale_bytes=scale),
    st.integers(1, 64), st.integers(1, 4096), st.integers(1, 1 << 14), st.integers(1, 1024), st.booleans(),
    st.sampled_from([None, "intranode", "internode"]), st.integers(1, 8), st.none() | st.integers(0, 1024))


@settings(max_examples=150, deadline=None)
@given(p=plans)
def test_summarize_equals_the_report(p):
    """summarize(plan) == summary_of(report(plan)): the sweep path and the report agree."""
    assert pplx.summarize(p) == summary_of(pplx.report(p))


@settings(max_examples=100, deadline=None)
@given(p=plans, more=st.integers(1, 4096))
def test_monotone_in_tokens_and_reserve_at_least_the_need(p, more):
    """Allocations are non-decreasing in max_num_tokens, and never below what a BF16 combine touches."""
    small, big = pplx.report(p), pplx.report(p.replace(num_max_tokens_per_rank=p.num_max_tokens_per_rank + more))
    assert big.num_bytes >= small.num_bytes and big.num_bytes_needed >= small.num_bytes_needed
    assert small.num_bytes >= small.num_bytes_needed


@settings(max_examples=100, deadline=None)
@given(p=plans)
def test_records_are_16_byte_aligned(p):
    """Dispatch slots are round_up(hidden + scales + 4, 16) (BASE:34-35): the source index fits inside."""
    dispatch = pplx.report(p).records[0]
    assert dispatch.num_bytes % 16 == 0 and dispatch.overrun_bytes() == 0
    assert dispatch.field("src_token_index").end <= dispatch.num_bytes < dispatch.field("src_token_index").end + 16


# --- the command line ---------------------------------------------------------------------------
def test_cli_hint_and_layout(capsys, tmp_path):
    code, out, err = run_main(capsys, "hint", "--backend", "pplx", "--topk", "8", "--ranks", "16", "--tokens", "128")
    assert code == 0 and err == ""
    for text in ("pplx-kernels AllToAll.internode (NVSHMEM)", "939,524,096", "469,762,048",
                 "Total device allocation: 2,123,403,396 B", "[pplx.combine-out-blowup]", "[pplx.nvshmem-heap]"):
        assert text in out
    svg = tmp_path / "pplx.svg"
    code, out, _ = run_main(capsys, "layout", "--backend", "pplx", "--topk", "8", "--ranks", "16", "--tokens", "128",
                            "--svg", str(svg))
    assert code == 0 and "dispatch token: 7,408 B per record" in out and "xCombineOut" in svg.read_text()


def test_cli_dp_group_size_and_strict(capsys):
    import json

    code, out, _ = run_main(capsys, "hint", "--backend", "pplx", "--ranks", "16", "--dp-group-size", "16", "--json",
                            "--strict")
    assert code == 1
    data = json.loads(out)
    assert data["inputs"]["dp_size"] == 16
    assert [lim["name"] for lim in data["limits"] if not lim["ok"]] == ["DP groups (world_size / dp_size)"]


def test_cli_compare_fit_sweep(capsys):
    import json

    code, out, _ = run_main(capsys, "compare", "--topk", "8", "--ranks", "16", "--tokens", "128", "--backends",
                            "pplx,deepep-ll,mori-ep", "--json")
    backends = json.loads(out)["backends"]
    assert code == 0 and backends["pplx"]["num_bytes"] == 2123403396
    code, out, _ = run_main(capsys, "fit", "--topk", "8", "--ranks", "16", "--budget", "8GiB", "--backends", "pplx",
                            "--json")
    result = json.loads(out)["results"]["pplx"]
    assert code == 0 and result["binding"] == "budget"
    assert report(plan(num_max_tokens_per_rank=result["value"]), "pplx").num_bytes <= 8 << 30
    assert report(plan(num_max_tokens_per_rank=result["value"] + 1), "pplx").num_bytes > 8 << 30
    code, out, _ = run_main(capsys, "sweep", "--topk", "8", "--ranks", "8,16", "--tokens", "128", "--backends", "pplx",
                            "--json")
    assert code == 0 and [r[7] for r in json.loads(out)["rows"]] == [940314436, 2123403396]


@pytest.mark.parametrize(("argv", "text"), [
    (("--kernel-type", "InterNodeV1"), "pplx-kernels has intranode and internode"),
    (("--dp-group-size", "0"), "--dp-group-size"),
    (("--env", "NVSHMEM_SYMMETRIC_SIZE=lots"), "NVSHMEM_SYMMETRIC_SIZE=lots"),
])
def test_cli_bad_input_is_one_line_exit_2(capsys, argv, text):
    code, out, err = run_main(capsys, "hint", "--backend", "pplx", "--ranks", "16", *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and text in err


@pytest.mark.parametrize("fn", ["internode_allocations", "intranode_allocations"])
def test_zero_experts_is_upstreams_trap_not_a_size(fn):
    """Issue 21: upstream traps on ``numLocalExperts != 0`` (all_to_all.cpp:37); epbuf refuses
    the same arguments, and the limit table lists the broken limit."""
    from epbuf.backends.pplx import limits, sizes
    with pytest.raises(InvalidArgumentError, match=r"numLocalExperts .* is 0.*all_to_all.cpp:37"):
        getattr(sizes, fn)(128, 0, 8, 8, 1, 7168, 7168, 0)
    with pytest.raises(InvalidArgumentError, match="all_to_all.cpp:37"):
        sizes.num_local_experts(1 << 32, 8)
    rows = {row[0]: row for row in limits.limit_rows("internode", 128, 0, 16, 1, 7168, 7168, 0, 8)}
    assert rows["numLocalExperts (ceil(num_experts / world_size))"][4] is False
