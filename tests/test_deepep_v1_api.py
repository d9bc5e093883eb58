"""DeepEP V1's upstream-named API: argument order, versions by commit, hostile input, the
internode record and clean-meta functions, 32-bit top-k index builds, the package's exports.

Golden numbers are written out in ``docs/derivations/deepep_v1.md`` (§ numbers below);
upstream citations are ``path:line`` at DeepEP main ``dd758ca``.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epbuf import EpbufError, InvalidArgumentError, Plan, report
from epbuf.backends import deepep_v1
from epbuf.backends.deepep_v1 import commits, tables
from epbuf.report import summary_of


def plan(hidden=7168, topk=8, experts=256, ranks=16, tokens=128, fp8=True, **kw) -> Plan:
    return Plan(hidden=hidden, num_topk=topk, num_experts=experts, num_ranks=ranks,
                num_max_tokens_per_rank=tokens, use_fp8_dispatch=fp8, **kw)


# ======================================================================================
# Upstream's argument order
# ======================================================================================
def test_config_positional_in_upstream_order():
    """Config(num_sms, nvl_send, nvl_recv, rdma_send, rdma_recv) (config.hpp:31-35); §2: 453,380,736."""
    positional = deepep_v1.Config(24, 8, 512, 16, 128)
    assert positional.get_nvl_buffer_size_hint(7168, 16) == 453_380_736
    assert positional == deepep_v1.Config(num_sms=24, num_max_nvl_chunked_send_tokens=8,
                                          num_max_nvl_chunked_recv_tokens=512, num_max_rdma_chunked_send_tokens=16,
                                          num_max_rdma_chunked_recv_tokens=128)
    assert deepep_v1.Config(24, 8, 512, num_max_rdma_chunked_send_tokens=16).as_tuple() == (24, 8, 512, 16, 256)
    assert positional.replace(num_sms=20).as_tuple() == (20, 8, 512, 16, 128)
    assert deepep_v1.Config().as_tuple() == (20, 6, 256, 6, 258)  # §1.1
    with pytest.raises(TypeError):
        deepep_v1.Config(1, 2, 3, 4, 5, 6)


def test_low_latency_layout_positional_and_by_version():
    """LowLatencyLayout(rdma_buffer, T, H, R, E) without the pointer (config.hpp:131); §5.5."""
    layout = deepep_v1.LowLatencyLayout(128, 7168, 16, 256, version="ll3")
    assert (layout.variant, layout.total_bytes) == (3, 1_880_098_816)
    assert layout == deepep_v1.LowLatencyLayout(num_max_dispatch_tokens_per_rank=128, hidden=7168, num_ranks=16,
                                                 num_experts=256, version="ll3")
    assert deepep_v1.LowLatencyLayout(128, 7168, 16, 256, version="4249486").total_bytes == 1_880_098_816
    with pytest.raises(InvalidArgumentError, match=r"--backend-version \(version\) = 3: unknown"):
        deepep_v1.LowLatencyLayout(128, 7168, 16, 256, version=3)
    assert (deepep_v1.num_bytes_per_dispatch_msg(7168, version="ll1"),
            deepep_v1.num_bytes_per_combine_msg(7168, version="ll2")) == (7_408, 14_352)  # §5.2 table


# ======================================================================================
# Versions by id or commit
# ======================================================================================
@pytest.mark.parametrize("version", [v.id for v in deepep_v1.list_versions()])
def test_every_version_by_its_commit(version):
    v = deepep_v1.get_version(version)
    assert deepep_v1.get_version(v.commit) is v
    assert deepep_v1.get_version(v.commit[:7]) is v
    assert deepep_v1.get_version(v.commit[:12].upper()) is v


def test_report_by_commit():
    """The issue's examples: dd758ca and the full 40-hex id are main."""
    by_id = report(plan(version="main"), "deepep-ll")
    for commit in ("dd758ca", "dd758caf451848bd150e1046af3d0a73e5fff38d"):
        r = report(plan(version=commit), "deepep-ll")
        assert r.buffers == by_id.buffers and r.inputs["version"] == "main"
        assert summary_of(r) == deepep_v1.summarize_low_latency(plan(version=commit))


@pytest.mark.parametrize(("commit", "version"), [
    ("84d3d6f", "ll0"),  # the second commit: formulas and limits as at ebfe47e
    ("2be0d4f", "main"),  # pre-EPv2 file layout, same formulas and limits as main (after 73b6ea4)
])
def test_commits_map_to_the_version_whose_formulas_hold(commit, version):
    assert deepep_v1.get_version(commit).id == version


def test_side_branch_commit():
    """e995aa2, on a branch merged into main: LL1 layout with 1553fc4's tables, a state no
    named version has, so it answers under its own id."""
    v = deepep_v1.get_version("e995aa2")
    assert (v.id, v.low_latency, v.tables) == ("e995aa2", 1, "1553fc4")
    hint = deepep_v1.get_low_latency_rdma_size_hint(128, 7168, 16, 256, version="e995aa2")
    assert hint == deepep_v1.get_low_latency_rdma_size_hint(128, 7168, 16, 256, version="ll1") == 1_881_147_520


# commit -> (layout variant, tables, LL top-k, int4 check, NVL clean meta, 32-bit builds, a figure of that state).
BETWEEN = [
    ("e6d61fc", (3, "e6d61fc", 9, False, 1, False)),  # dispatch 16 -> (36, 288, 20, 128); a2fa3b7's clean meta
    ("a2fa3b7", (3, "c8dceba", 9, False, 1, False)),
    ("c939644", (5, "c939644", 11, False, 2, False)),  # EP48/96 before EP24
    ("da6ca24", (5, "c939644", 11, False, 2, True)),  # 32-bit top-k indices from here
    ("4623c67", (5, "e02e4d2", 11, True, 2, True)),  # the 32 GiB ceiling, before hidden 3072
]


@pytest.mark.parametrize(("commit", "state"), BETWEEN, ids=[c for c, _ in BETWEEN])
def test_commits_between_named_versions(commit, state):
    v = deepep_v1.get_version(commit)
    assert (v.low_latency, v.tables, v.ll_num_max_topk, v.int4_count_check, v.nvl_clean_meta,
            v.topk_idx_configurable) == state
    assert v.id == commit and v.commit.startswith(commit) and commit in v.description


def test_versions_between_named_ones_change_numbers():
    """§3.2: dispatch 16 is (36, 288, 20, 128) from e6d61fc; 24 ranks are (8, 288, 32, 128) until e02e4d2;
    4623c67 has the ceiling but not hidden 3072 (73b6ea4)."""
    assert deepep_v1.get_dispatch_config(16, version="e6d61fc").as_tuple() == (20, 36, 288, 20, 140)
    assert deepep_v1.get_dispatch_config(16, version="a2fa3b7").as_tuple() == (20, 16, 288, 20, 140)
    assert deepep_v1.get_dispatch_config(24, version="da6ca24").as_tuple() == (20, 8, 288, 32, 128)
    assert 48 in deepep_v1.supported_num_ranks("c939644") and 48 not in deepep_v1.supported_num_ranks("v1.2.1")
    r = report(plan(hidden=3072, version="4623c67"), "deepep-ll")
    assert "hidden (SWITCH_HIDDEN)" in {x.name.split(" in ")[0] for x in r.failed_limits()}
    assert r.quantity("max_num_max_dispatch_tokens_per_rank") > 0
    assert not report(plan(hidden=3072), "deepep-ll").failed_limits()


def test_commit_table_is_consistent():
    """Every named version's state is a state of the table at its commit, each distinct; every
    era of tables a commit names exists; 252 commits, oldest first ending with main and PR #434."""
    rows = commits.commit_states()
    assert len(rows) == 252 and rows[0][0].startswith("ebfe47e")
    assert [r[0][:7] for r in rows[-2:]] == ["dd758ca", "74cfcc2"]
    by_commit = {c: row for c, _, row in rows}
    states = [v.state() for v in deepep_v1.list_versions()]
    assert len(set(states)) == len(states)
    for v in deepep_v1.list_versions():
        assert by_commit[v.commit][:-1] == v.state(), v.id
        assert by_commit[v.commit][-1] == v.legacy_paths
    assert {row[1] for _, _, row in rows} <= set(tables.TABLES)
    for commit, _, _ in rows:
        assert deepep_v1.get_version(commit).commit in (commit, *(v.commit for v in deepep_v1.list_versions()))


@pytest.mark.parametrize("bad", ["ll9", "abcdef0", "dd758c", "dd758cag", "dd758caf451848bd150e1046af3d0a73e5fff38d0"])
def test_unknown_commit_is_one_line_listing_the_ids(bad):
    with pytest.raises(InvalidArgumentError) as info:
        report(plan(version=bad), "deepep-ll")
    message = str(info.value)
    assert "\n" not in message and f"= {bad!r}: unknown DeepEP V1 version" in message
    assert "ll0, ll1, ll2, ll3, v1.1.0, ll4, ll5, v1.2.1, pr434, main" in message and "commit" in message


# ======================================================================================
# Hostile input: every public function, every integer argument
# ======================================================================================
def test_issue_9_negative_hidden():
    """issue 9: deepep_v1.get_hidden_bytes(-7168, True) computed -14,336."""
    with pytest.raises(EpbufError, match=r"--hidden \(hidden\) = -7168: allowed 1\.\."):
        deepep_v1.get_hidden_bytes(-7168, True)


_CFG = deepep_v1.Config(24, 8, 512, 16, 128)
# (name, function, valid arguments, index of the argument to spoil, its meaning: "count" or "bool")
PUBLIC = [
    ("get_hidden_bytes", deepep_v1.get_hidden_bytes, (7168, True), 0, "count"),
    ("get_hidden_bytes", deepep_v1.get_hidden_bytes, (7168, True), 1, "bool"),
    ("Config.get_nvl_buffer_size_hint", _CFG.get_nvl_buffer_size_hint, (7168, 16), 0, "count"),
    ("Config.get_nvl_buffer_size_hint", _CFG.get_nvl_buffer_size_hint, (7168, 16), 1, "count"),
    ("Config.get_rdma_buffer_size_hint", _CFG.get_rdma_buffer_size_hint, (7168, 16), 0, "count"),
    ("Config.get_rdma_buffer_size_hint", _CFG.get_rdma_buffer_size_hint, (7168, 16), 1, "count"),
    ("Config.nvl_buffer", _CFG.nvl_buffer, (7168, 16), 0, "count"),
    ("Config.rdma_buffer", _CFG.rdma_buffer, (7168, 16), 1, "count"),
    *[("Config", deepep_v1.Config, (24, 8, 512, 16, 128), i, "count") for i in range(5)],
    ("get_dispatch_config", deepep_v1.get_dispatch_config, (16, 20), 0, "count"),
    ("get_dispatch_config", deepep_v1.get_dispatch_config, (16, 20), 1, "count"),
    ("get_combine_config", deepep_v1.get_combine_config, (16, 20), 0, "count"),
    ("get_combine_config", deepep_v1.get_combine_config, (16, 20), 1, "count"),
    *[("get_num_bytes_per_token", deepep_v1.get_num_bytes_per_token, (448, 56, 8, 8), i, "count") for i in range(4)],
    *[("get_rdma_clean_meta", deepep_v1.get_rdma_clean_meta, (448, 56, 8, 8, 2, 132, 10), i, "count")
      for i in range(7)],
    *[("get_nvl_clean_meta", deepep_v1.get_nvl_clean_meta, (448, 56, 8, 8, 2, 8, 288, 10, True), i, "count")
      for i in range(8)],
    ("get_nvl_clean_meta", deepep_v1.get_nvl_clean_meta, (448, 56, 8, 8, 2, 8, 288, 10, True), 8, "bool"),
    *[("get_low_latency_rdma_size_hint", deepep_v1.get_low_latency_rdma_size_hint, (128, 7168, 16, 256), i, "count")
      for i in range(4)],
    *[("low_latency_buffer", deepep_v1.low_latency_buffer, (128, 7168, 16, 256), i, "count") for i in range(4)],
    *[("LowLatencyLayout", deepep_v1.LowLatencyLayout, (128, 7168, 16, 256), i, "count") for i in range(4)],
    *[("max_low_latency_tokens", deepep_v1.max_low_latency_tokens, (7168, 16, 256), i, "count") for i in range(3)],
    ("num_bytes_per_dispatch_msg", deepep_v1.num_bytes_per_dispatch_msg, (7168,), 0, "count"),
    ("num_bytes_per_combine_msg", deepep_v1.num_bytes_per_combine_msg, (7168,), 0, "count"),
    ("get_version", deepep_v1.get_version, ("main",), 0, "name"),
    ("supported_num_ranks", deepep_v1.supported_num_ranks, ("main",), 0, "name"),
    ("report_normal", deepep_v1.report_normal, (plan(),), 0, "plan"),
    ("summarize_normal", deepep_v1.summarize_normal, (plan(),), 0, "plan"),
    ("report_low_latency", deepep_v1.report_low_latency, (plan(),), 0, "plan"),
    ("summarize_low_latency", deepep_v1.summarize_low_latency, (plan(),), 0, "plan"),
]
BAD = [-7168, -1, 1.5, 7168.0, math.nan, math.inf, "7168", True, None, [7168]]


@pytest.mark.parametrize(("name", "fn", "args", "index", "kind"), PUBLIC,
                         ids=[f"{n}-arg{i}" for n, _, _, i, _ in PUBLIC])
def test_public_functions_reject_non_values(name, fn, args, index, kind):
    """Every public function answers a negative, float, NaN, string, bool, None or list in any
    argument with an EpbufError naming it, never a number or another exception."""
    fn(*args)  # the valid call works
    bad_values = {"count": BAD, "bool": [1, 0, "yes", None, math.nan], "name": [5, 1.5, None, True, ["main"]],
                  "plan": [7168, "plan", None, {"hidden": 7168}]}[kind]
    for bad in bad_values:
        if kind == "name" and bad is None:  # None means the default version
            continue
        spoiled = args[:index] + (bad,) + args[index + 1:]
        with pytest.raises(EpbufError):
            fn(*spoiled)


def test_version_and_bits_keywords_are_checked():
    for fn, args in ((_CFG.get_nvl_buffer_size_hint, (7168, 16)), (deepep_v1.get_low_latency_rdma_size_hint,
                                                                   (128, 7168, 16, 256))):
        for bad in (5, "v9", 1.0, True):
            with pytest.raises(EpbufError):
                fn(*args, version=bad)
    for bad in (16, 32.0, True, "64", -64):
        with pytest.raises(EpbufError, match="num_topk_idx_bits"):
            _CFG.get_nvl_buffer_size_hint(7168, 16, num_topk_idx_bits=bad)
    for bad in (-1, 1.5, "1GiB"):
        with pytest.raises(EpbufError, match="budget"):
            deepep_v1.max_low_latency_tokens(5120, 16, 448, budget=bad)


def test_overflow_beyond_upstream_integer_types_is_invalid():
    """The rule: a size upstream's types cannot hold is an invalid plan, not a number."""
    with pytest.raises(InvalidArgumentError, match=r"num_max_nvl_chunked_recv_tokens\) = 2147483646: .* overflows "
                                                   r"the C\+\+ int the hint multiplies in"):
        deepep_v1.Config(2, 1, 2**31 - 2, 1, 2).get_nvl_buffer_size_hint(14336, 8)
    with pytest.raises(InvalidArgumentError, match="overflow size_t"):
        deepep_v1.Config(24, 8, 512, 16, 128).get_nvl_buffer_size_hint(2**63, 8)
    with pytest.raises(InvalidArgumentError, match="hidden_bytes"):
        deepep_v1.Config(24, 8, 512, 16, 128).get_rdma_buffer_size_hint(2**63, 16)
    with pytest.raises(InvalidArgumentError, match="does not fit the int upstream returns"):
        deepep_v1.get_num_bytes_per_token(2**31 // 16, 0, 0, 0)
    with pytest.raises(InvalidArgumentError, match="overflows the C\\+\\+ int"):
        deepep_v1.get_low_latency_rdma_size_hint(2**23, 7168, 16, 256)
    # normal mode: a num_sms the tables multiply into the hints' int products
    with pytest.raises(InvalidArgumentError, match="overflows the C\\+\\+ int"):
        report(plan(num_sms=2**24), "deepep-v1")


# ======================================================================================
# get_num_bytes_per_token and the clean-meta limits (docs/derivations/deepep_v1.md §10)
# ======================================================================================
@pytest.mark.parametrize(("args", "expected"), [
    ((448, 56, 8, 8), 7_472),  # dispatch, FP8 hidden 7168, top-k 8: align16(7168 + 8 + 224 + 32 + 32)
    ((896, 0, 8, 8), 14_416),  # dispatch, BF16
    ((896, 0, 0, 8), 14_384),  # combine: (hidden_int4, 0, 0, num_topk)
    ((0, 0, 0, 0), 16),  # SourceMeta alone, aligned
])
def test_get_num_bytes_per_token(args, expected):
    """internode.cu:47-51; the report's internode records have the same strides."""
    assert deepep_v1.get_num_bytes_per_token(*args) == expected


def test_records_use_get_num_bytes_per_token():
    r = report(plan(), "deepep-v1")
    assert r.record("internode dispatch token").num_bytes == deepep_v1.get_num_bytes_per_token(448, 56, 8, 8)
    assert r.record("internode combine token").num_bytes == deepep_v1.get_num_bytes_per_token(896, 0, 0, 8)
    assert (r.quantity("dispatch_record_num_bytes"), r.quantity("combine_record_num_bytes")) == (7_472, 14_384)


# (function, arguments, version) -> (first, second). §10.2 worked example (16 ranks, num_sms 20, FP8 7168, top-k 8).
CLEAN_META = [
    (("rdma", (448, 56, 8, 8, 2, 140, 10), "main"), (10_460_800, 800)),
    (("nvl", (448, 56, 8, 8, 2, 8, 288, 10, True), "main"), (43_038_720, 480)),
    (("rdma", (896, 0, 0, 8, 2, 132, 10), "main"), (18_986_880, 800)),
    (("nvl", (896, 0, 0, 8, 2, 8, 288, 10, False), "main"), (82_851_840, 480)),
    (("nvl", (896, 0, 0, 8, 2, 8, 288, 10, False), "a2fa3b7"), (82_805_760, 480)),  # combine unaligned until 06f417d
    (("nvl", (448, 56, 8, 8, 2, 8, 288, 10, True), "a2fa3b7"), (43_038_720, 480)),
    (("nvl", (448, 56, 8, 8, 2, 8, 288, 10, True), "ll0"), (42_992_640, 480)),  # unaligned 7,464 B
]


@pytest.mark.parametrize(("case", "expected"), CLEAN_META, ids=[str(c) for c, _ in CLEAN_META])
def test_clean_meta(case, expected):
    kind, args, version = case
    if kind == "rdma":
        assert deepep_v1.get_rdma_clean_meta(*args) == expected
    else:
        assert deepep_v1.get_nvl_clean_meta(*args, version=version) == expected


def test_clean_meta_limits_in_the_report():
    """§10.2: (first + second) x 4 against the config's RDMA hint for the activations' bytes
    (buffer.hpp:1080, 1348) and against the Buffer's NVL size (internode.cu:430-431, 1515-1516)."""
    r = report(plan(), "deepep-v1")
    rows = {x.name.split(" (")[0]: (x.value, x.bound, x.ok) for x in r.limits if "clean meta" in x.name}
    assert rows == {
        "dispatch RDMA clean meta x 4 B": (41_846_400, 51_746_944, True),
        "dispatch NVL clean meta x 4 B": (172_156_800, 377_673_984, True),
        "combine RDMA clean meta x 4 B": (75_950_720, 86_637_184, True),
        "combine NVL clean meta x 4 B": (331_409_280, 377_673_984, True),
        "clean meta int products": (331_407_360, 2**31 - 1, True),
    }
    assert not any("clean meta" in x.name for x in report(plan(ranks=8), "deepep-v1").limits)  # intranode


def test_clean_meta_breaks_for_scales_beyond_the_hint():
    """§10.3: FP8 hidden 65,536 has 512 scales per token; the hint reserves 128 (kNumMaxScales),
    so notify_dispatch's RDMA clean range (379,996,800 B) passes the dispatch config's RDMA hint
    (378,607,744 B) and upstream asserts."""
    p = plan(hidden=65536, topk=32)
    r = report(p, "deepep-v1")
    broken = {x.name.split(" (")[0]: (x.value, x.bound) for x in r.failed_limits()}
    assert broken["dispatch RDMA clean meta x 4 B"] == (379_996_800, 378_607_744)
    assert deepep_v1.summarize_normal(p).broken == summary_of(r).broken
    assert any("internode.cu:430" in f.message for f in r.findings if f.severity == "error")


def test_combine_config_limits():
    """buffer.hpp:1326-1327: the combine config's NVL chunks split evenly over the RDMA ranks."""
    def broken(config):
        return [x.name for x in report(plan(ranks=64, deepep_config=config), "deepep-v1").failed_limits()]

    # 8 nodes: 500 % 8 = 4 breaks the split; send 8 <= 500 / 8 = 62 holds; send 100 > 512 / 8 = 64 does not
    assert broken(deepep_v1.Config(24, 8, 500, 16, 128)) == [
        "combine config: num_max_nvl_chunked_recv_tokens % num_rdma_ranks"]
    assert broken(deepep_v1.Config(24, 100, 512, 16, 128)) == ["combine config: num_max_nvl_chunked_send_tokens"]
    assert broken(deepep_v1.Config(24, 8, 512, 16, 128)) == []


# ======================================================================================
# 32-bit top-k index builds in the reports (§8.5)
# ======================================================================================
def test_topk_idx_bits_in_the_normal_report():
    r = report(plan(ranks=16, num_sms=24, num_topk_idx_bits=32), "deepep-v1")
    assert (r.quantity("num_nvl_bytes"), r.quantity("num_rdma_bytes")) == (439_052_928, 106_824_576)
    assert r.record("NVL hint slot").field("topk_idx").dtype == "int32"
    assert r.inputs["num_topk_idx_bits"] == 32 and r.quantity("num_topk_idx_bits") == 32
    assert r.record("internode dispatch token").num_bytes == 7_472  # the record stores int whatever topk_idx_t is
    default = report(plan(ranks=16, num_sms=24), "deepep-v1")
    assert default.inputs["num_topk_idx_bits"] == 64 and default.quantity("num_nvl_bytes") == 453_208_704
    assert deepep_v1.summarize_normal(plan(ranks=16, num_sms=24, num_topk_idx_bits=32)) == summary_of(r)


@pytest.mark.parametrize("backend", ["deepep-v1", "deepep-ll"])
def test_topk_idx_bits_32_needs_the_build_option(backend):
    with pytest.raises(InvalidArgumentError, match=r"--topk-idx-bits \(num_topk_idx_bits\) = 32: allowed 64 at "
                                                   r"v1.2.1 .*da6ca24"):
        report(plan(num_topk_idx_bits=32, version="v1.2.1"), backend)
    assert report(plan(num_topk_idx_bits=32, version="da6ca24"), backend).num_bytes > 0


# ======================================================================================
# Shared quantity names (README, JSON schemas)
# ======================================================================================
@pytest.mark.parametrize(("backend", "expected"), [
    ("deepep-v1", {"num_topk": 8, "element_size": 1, "hidden_bytes": 14_336, "dispatch_record_num_bytes": 7_472,
                   "hint_dispatch_record_num_bytes": 16_392, "combine_record_num_bytes": 14_384,
                   "num_scaleup_ranks": 8, "num_scaleout_ranks": 2, "workspace_num_bytes": 33_554_432}),
    ("deepep-ll", {"num_topk": 8, "element_size": 1, "hidden_bytes": 7_168, "dispatch_record_num_bytes": 7_408,
                   "hint_dispatch_record_num_bytes": 14_352, "combine_record_num_bytes": 14_560,
                   "workspace_num_bytes": 33_554_432}),
])
def test_shared_quantity_names(backend, expected):
    r = report(plan(), backend)
    assert {k: r.quantity(k) for k in expected} == expected
    assert json.loads(json.dumps({q.name: q.value for q in r.quantities}))


# ======================================================================================
# The package: exports, lazy imports
# ======================================================================================
def test_exports_match_the_modules():
    import importlib

    for module, names in deepep_v1._EXPORTS.items():
        assert tuple(importlib.import_module(f"epbuf.backends.deepep_v1.{module}").__all__) == names, module
    assert set(dir(deepep_v1)) >= set(deepep_v1.__all__)
    for name in deepep_v1.__all__:
        assert getattr(deepep_v1, name) is not None
    with pytest.raises(AttributeError):
        deepep_v1.no_such_name  # noqa: B018


def test_low_latency_does_not_import_normal_mode():
    code = ("import sys; from epbuf import Plan, report; "
            "report(Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=128), "
            "'deepep-ll'); print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('epbuf.backends.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(eval(out))  # noqa: S307 - our own printed list
    assert {"ll_report", "low_latency", "versions"} <= loaded
    assert not loaded & {"normal", "config", "tables", "internode", "commits", "ascend", "deepep_v2"}


@given(hidden_int4=st.integers(0, 4096), scales=st.integers(0, 512), idx=st.integers(0, 64), w=st.integers(0, 64))
def test_num_bytes_per_token_bounds(hidden_int4, scales, idx, w):
    """align16(fields): a multiple of 16, at most 15 bytes over the fields."""
    n = deepep_v1.get_num_bytes_per_token(hidden_int4, scales, idx, w)
    fields = hidden_int4 * 16 + 8 + scales * 4 + idx * 4 + w * 4
    assert n % 16 == 0 and fields <= n < fields + 16


def test_no_import_cycle():
    """The package's modules import each other as a DAG, deferred imports included."""
    import ast
    import pathlib

    package = pathlib.Path(deepep_v1.__file__).parent
    graph = {}
    for path in package.glob("*.py"):
        tree = ast.parse(path.read_text())
        graph[path.stem] = {node.module for node in ast.walk(tree)
                            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}
    assert graph["normal"] >= {"config", "tables", "normal_limits"} and "normal" not in graph["ll_report"]
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join(path + (module,))
        if module in done:
            return
        for dep in graph.get(module, ()):
            visit(dep, path + (module,))
        done.add(module)

    for module in graph:
        visit(module, ())
