"""UCCL-EP backends (``uccl-ep`` normal mode, ``uccl-ll`` low-latency mode).

Golden numbers are literals from ``docs/derivations/uccl_ep.md`` (§ numbers below), where
UCCL-EP's arithmetic is written out independently of epbuf's code. Upstream citations are
``ep/path:line @da914a2`` (uccl-project/uccl main, 2026-08-19) unless a row says otherwise.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epbuf import InvalidArgumentError, Plan, report
from epbuf.backends import deepep_v1
from epbuf.backends import uccl_ep as u
from epbuf.backends.uccl_ep import memory
from epbuf.plan import backend_versions, summarize
from epbuf.report import report_from_dict, report_to_dict, summary_of
from epbuf.sweep import sweep

from _cli_run import run_cli as run  # tests/_cli_run.py (conftest puts tests/ on the path)


def plan(hidden=7168, topk=8, experts=256, ranks=16, tokens=128, fp8=True, **kw) -> Plan:
    return Plan(hidden=hidden, num_topk=topk, num_experts=experts, num_ranks=ranks, num_max_tokens_per_rank=tokens,
                use_fp8_dispatch=fp8, **kw)


def broken(rep) -> dict:
    return {lim.name: (lim.value, lim.bound) for lim in rep.failed_limits()}


# ======================================================================================
# §0 versions and constants
# ======================================================================================
def test_versions_and_aliases():
    """§0: two supported commits; a commit prefix of >= 7 hex digits names one."""
    assert list(u.VERSIONS) == ["v0.1.1", "main"] and u.DEFAULT_VERSION == "main"
    assert u.get_version("da914a2").id == "main" and u.get_version("73ee4f12ba71").id == "v0.1.1"
    assert (u.get_version("v0.1.1").ll_num_max_topk, u.get_version().ll_num_max_topk) == (9, 16)
    assert (u.get_version("v0.1.1").internode_tma_bytes_per_warp, u.get_version().internode_tma_bytes_per_warp) == (
        16384, 20480)
    assert backend_versions("uccl-ll") == ("main", u.VERSIONS)
    with pytest.raises(InvalidArgumentError, match="unknown UCCL-EP version; choose one of v0.1.1"):
        u.get_version("ll4")


def test_proxy_trigger_is_32_bytes():
    """Issue 21: ``union alignas(16) ProxyTrigger`` (fifo_device.hpp:27-49 @ da914a2). The second
    word's named fields sum to 63 bits, so the padding field is zero-width and ``reserved : 1``
    starts a third word: 24 B of fields, rounded to 32 by alignas(16). Without the zero-width rule
    the same fields would pack in two words (16 B)."""
    assert memory._bitfield_words(memory.PROXY_TRIGGER_FIELD_BITS) == 3
    assert memory._bitfield_words([32, 32, 0, 32, 9, 9, 3, 10, 1]) == 2
    assert memory._bitfield_words([64, 0, 0, 64]) == 2
    rep = report(plan(ranks=16), "uccl-ep")
    host = {r.name: r.num_bytes for b in rep.host_buffers for r in b.regions}
    assert host["FIFO triggers"] == 32 * 2048 * 32 == 2 * 1024 * 1024


def test_constants():
    """§0 and §4.1: common.hpp:61-69, d2h_queue_device.cuh:47-52."""
    assert (memory.K_NUM_PROXY_THS, memory.K_CHANNEL_PER_PROXY, memory.K_QUEUE_SIZE) == (4, 8, 2048)
    assert memory.D2H_HANDLE_BYTES == 40 and memory.PROXY_TRIGGER_BYTES == 32
    assert u.num_d2h_channels() == 32
    assert u.low_latency.K_ATOMIC_BUFFER_SIZE == 81_960


# ======================================================================================
# §1 tables
# ======================================================================================
@pytest.mark.parametrize("ranks", u.supported_num_ranks())
def test_tables_equal_deepep_v121_without_efa(ranks):
    """§1: without EFA, UCCL-EP's tables are DeepEP's at bdd119f (DeepEP v1.2.1)."""
    assert u.get_dispatch_config(ranks).as_tuple() == deepep_v1.get_dispatch_config(ranks, version="v1.2.1").as_tuple()
    assert u.get_combine_config(ranks).as_tuple() == deepep_v1.get_combine_config(ranks, version="v1.2.1").as_tuple()


@pytest.mark.parametrize(("ranks", "dispatch", "combine"), [
    (16, (20, 36, 288, 20, 520), (20, 4, 288, 12, 516)),  # §1: 512 rounded up to the send chunk
    (32, (20, 32, 288, 32, 512), (20, 1, 288, 8, 512)),
    (64, (20, 20, 288, 28, 140), (20, 1, 288, 20, 140)),  # no EFA row: as without EFA
])
def test_efa_rows(ranks, dispatch, combine):
    """buffer.py:757, 759, 785, 787: `512 if Buffer._is_efa() else 128`."""
    assert u.get_dispatch_config(ranks, efa=True).as_tuple() == dispatch
    assert u.get_combine_config(ranks, efa=True).as_tuple() == combine


def test_unsupported_rank_count():
    with pytest.raises(InvalidArgumentError, match="Unsupported number of EP ranks"):
        u.get_dispatch_config(48)


# ======================================================================================
# §2 normal mode
# ======================================================================================
# (plan overrides) -> (num_nvl_bytes, num_rdma_bytes, device total, host total). Source: §2.1-2.3.
NORMAL_GOLDEN = [
    ({"ranks": 16}, (377_673_984, 91_887_744, 503_200_392, 2_101_516)),
    ({"ranks": 32, "nic": "efa"}, (377_675_264, 672_077_440, 377_675_424 + 672_077_440 + 33_554_432 + 2_112,
                                   2_183_476)),
    ({"ranks": 32}, (377_675_264, 168_023_680, 377_675_424 + 168_023_680 + 33_554_432 + 84_072, 2_101_516)),
    ({"ranks": 8}, (335_709_824, 0, 369_348_489, 2_101_516)),
]


@pytest.mark.parametrize(("changes", "expected"), NORMAL_GOLDEN, ids=[str(c) for c, _ in NORMAL_GOLDEN])
def test_normal_golden(changes, expected):
    rep = report(plan(**changes), "uccl-ep")
    got = (rep.quantity("num_nvl_bytes"), rep.quantity("num_rdma_bytes"), rep.num_bytes, rep.host_num_bytes)
    assert got == expected


def test_normal_allocations_16_ranks():
    """§2.1: NVL cudaMalloc = hint + max_nvl_peers x 20 B; each buffer as listed."""
    rep = report(plan(), "uccl-ep")
    sizes = {b.name: b.num_bytes for b in rep.buffers}
    assert sizes == {"NVL buffer": 377_674_144, "RDMA buffer": 91_887_744, "workspace": 33_554_432,
                     "UCCL proxies and runtime": 84_072}
    assert [b.name for b in rep.host_buffers] == ["pinned host memory"]
    assert {r.name: r.num_bytes for r in rep.host_buffers[0].regions} == {
        "FIFO triggers": 2_097_152, "FIFO tails": 256, "receive counters": 4_108}
    assert rep.num_bytes == rep.num_bytes_needed
    assert all("@da914a2" in r.source for b in rep.buffers for r in b.regions)


def test_normal_hints_reuse_deepep():
    """§0: UCCL-EP's hints are DeepEP's released formula; the config rows of 2.1."""
    cfg = u.get_dispatch_config(16)
    assert u.nvl_buffer(cfg, 14336, 16).num_bytes == cfg.get_nvl_buffer_size_hint(14336, 16) == 377_673_984
    assert u.rdma_buffer(cfg, 14336, 16).num_bytes == cfg.get_rdma_buffer_size_hint(14336, 16) == 91_887_744
    assert u.rdma_buffer(u.get_combine_config(16), 14336, 16).num_bytes == 86_637_184


def test_intranode_rdma_placeholder():
    """§2.3: a zero RDMA hint still allocates max(0, 1) = 1 byte on the device, even when the NIC
    forces host memory (the host path needs num_rdma_bytes > 0, uccl_ep.cc:294-296)."""
    for nic in ("ib", "host-memory"):
        rep = report(plan(ranks=8, nic=nic), "uccl-ep")
        assert rep.buffer("RDMA buffer").num_bytes == 1
        assert any(f.code == "uccl-ep.intranode" for f in rep.findings)


def test_internode_records():
    """§2.4."""
    rep = report(plan(), "uccl-ep")
    assert rep.record("internode dispatch token").num_bytes == 7_472
    assert rep.record("internode combine token").num_bytes == 14_384
    assert rep.record("NVL hint slot").num_bytes == 16_392 and rep.record("RDMA hint slot").num_bytes == 16_408


# ======================================================================================
# §3 low-latency mode
# ======================================================================================
# (T, H, R, E, per_expert_batching) -> hint. Source: §3.1-3.4.
LL_GOLDEN = [
    ((128, 7168, 16, 256, False), 1_880_098_944),
    ((128, 7168, 16, 256, True), 1_884_821_632),
    ((128, 7168, 64, 256, True), 1_884_852_352),
    ((2048, 5120, 16, 448, False), 37_610_327_680),
]


@pytest.mark.parametrize(("args", "expected"), LL_GOLDEN, ids=[str(a) for a, _ in LL_GOLDEN])
def test_low_latency_golden(args, expected):
    *shape, batching = args
    assert u.get_low_latency_rdma_size_hint(*shape, per_expert_batching=batching) == expected


def test_low_latency_layout_3_1():
    """§3.1: slots, offsets and total."""
    layout = u.LowLatencyLayout(num_max_dispatch_tokens_per_rank=128, hidden=7168, num_ranks=16, num_experts=256)
    assert (layout.num_bytes_per_dispatch_msg, layout.num_bytes_per_combine_msg) == (14_352, 14_336)
    assert [s.offset for s in layout.spans()] == [0, 1_024, 2_048, 469_764_096, 939_526_144, 1_409_812_480]
    assert layout.total_bytes == 1_880_098_816
    assert layout.atomic_buffer_bytes_used == 4_096


def test_default_build_is_deepep_ll4_and_not_main():
    """§0, §3.1: the default build is DeepEP V1's layout at ll4; DeepEP main (ll5) sizes 28,311,552 B more."""
    assert deepep_v1.get_low_latency_rdma_size_hint(128, 7168, 16, 256, version="ll4") == 1_880_098_944
    assert deepep_v1.get_low_latency_rdma_size_hint(128, 7168, 16, 256) == 1_908_410_496
    rep = report(plan(), "uccl-ll")
    finding = next(f for f in rep.findings if f.code == "uccl-ll.deepep-layout")
    assert finding.data["deepep_newest_num_bytes"] - finding.data["uccl_default_num_bytes"] == 28_311_552


@settings(max_examples=150, deadline=None)
@given(tokens=st.integers(0, 5000), hidden=st.sampled_from([2048, 2560, 4096, 5120, 6144, 7168, 8192, 7000, 1000]),
       ranks=st.integers(1, 300), experts=st.integers(1, 2000))
def test_default_build_equals_deepep_ll4(tokens, hidden, ranks, experts):
    """Property: the default build's hint is DeepEP V1's get_low_latency_rdma_size_hint at ll4,
    and the layout's own rounding (used with batching) gives the same number."""
    layout = u.LowLatencyLayout(num_max_dispatch_tokens_per_rank=tokens, hidden=hidden, num_ranks=ranks,
                                num_experts=experts)
    hint = u.get_low_latency_rdma_size_hint(tokens, hidden, ranks, experts)
    assert hint == deepep_v1.get_low_latency_rdma_size_hint(tokens, hidden, ranks, experts, version="ll4")
    assert hint == u.low_latency.hint_round_up(layout.total_bytes)


@settings(max_examples=150, deadline=None)
@given(tokens=st.integers(0, 3000), hidden=st.sampled_from([2048, 4096, 7168, 8192]), ranks=st.integers(1, 200),
       experts=st.integers(1, 1000), batching=st.booleans())
def test_low_latency_layout_properties(tokens, hidden, ranks, experts, batching):
    """Properties: the six spans tile [0, total) in order signaling, send, recv; the hint is the
    next multiple of 128 strictly above total; batching never shrinks a buffer; the signaling
    buffers are 128-aligned."""
    layout = u.LowLatencyLayout(num_max_dispatch_tokens_per_rank=tokens, hidden=hidden, num_ranks=ranks,
                                num_experts=experts, per_expert_batching=batching)
    spans = layout.spans()
    assert spans[0].offset == 0 and all(a.end == b.offset for a, b in zip(spans, spans[1:]))
    assert spans[-1].end == layout.total_bytes
    hint = u.get_low_latency_rdma_size_hint(tokens, hidden, ranks, experts, per_expert_batching=batching)
    assert hint % 128 == 0 and 0 < hint - layout.total_bytes <= 128
    assert layout.signaling_buffer_bytes_aligned % 128 == 0
    default = u.get_low_latency_rdma_size_hint(tokens, hidden, ranks, experts)
    assert hint >= default
    if batching and tokens > 0:
        assert hint > default  # the per-expert batches always add E x T x dispatch slot
    if not batching:
        assert hint == u.get_low_latency_rdma_size_hint(tokens, hidden, ranks + 1, experts)  # num_ranks unused


@settings(max_examples=100, deadline=None)
@given(tokens=st.integers(1, 4000), hidden=st.sampled_from([2048, 5120, 7168]), ranks=st.integers(1, 100),
       experts=st.integers(1, 600), batching=st.booleans())
def test_low_latency_hint_monotone_in_tokens(tokens, hidden, ranks, experts, batching):
    """Property: the hint never decreases when the token count grows."""
    a = u.get_low_latency_rdma_size_hint(tokens, hidden, ranks, experts, per_expert_batching=batching)
    b = u.get_low_latency_rdma_size_hint(tokens + 1, hidden, ranks, experts, per_expert_batching=batching)
    assert a <= b


def test_atomic_buffer_limit():
    """§3.3: 2 x align(8E, 128) <= 81,960 holds for E = 5,120, not 5,121; with batching R = 72 breaks it."""
    name = "internode signaling buffers (atomic buffer)"
    assert name not in broken(report(plan(experts=5120, ranks=16), "uccl-ll"))
    assert broken(report(plan(experts=5121 * 1, ranks=1, tokens=4), "uccl-ll"))[name] == (82_176, 81_960)
    assert name not in broken(report(plan(experts=71 * 4, ranks=71, tokens=4, per_expert_batching=True), "uccl-ll"))
    assert broken(report(plan(experts=72 * 4, ranks=72, tokens=4, per_expert_batching=True), "uccl-ll"))[name] == (
        82_944, 81_960)


def test_no_32gib_ceiling():
    """§3.4: DeepEP rejects the vLLM #57894 shape; UCCL-EP sizes it and reports no broken limit."""
    rep = report(plan(hidden=5120, experts=448, tokens=2048), "uccl-ll")
    assert rep.buffer("RDMA buffer").num_bytes == 37_610_327_680
    assert not rep.failed_limits()
    finding = next(f for f in rep.findings if f.code == "uccl-ll.dropped-checks")
    assert "DeepEP V1 main would reject it" in finding.message
    ll = report(plan(hidden=5120, experts=448, tokens=2048), "deepep-ll")
    assert ll.failed_limits()


def test_low_latency_records():
    rep = report(plan(), "uccl-ll")
    dispatch, combine = rep.records
    assert dispatch.num_bytes == 16 + 7168 + 56 * 4 and dispatch.field("hidden").offset == 16
    assert combine.num_bytes == 14_336 and [f.name for f in combine.fields] == ["hidden"]


# ======================================================================================
# §4 placement: device and pinned host memory
# ======================================================================================
@pytest.mark.parametrize(("platform", "nic", "rdma_in_host", "atomic_in_host"), [
    ("cuda", "ib", False, False), ("cuda", "efa", False, True), ("cuda", "intel", False, True),
    ("cuda", "host-memory", True, True), ("rocm", "efa", False, False), ("rocm", "host-memory", False, False),
])
def test_placement(platform, nic, rdma_in_host, atomic_in_host):
    """§4.2: where the RDMA buffer and the atomic buffer live; the device total excludes host memory."""
    rep = report(plan(platform=platform, nic=nic), "uccl-ll")
    host_regions = {r.name for b in rep.host_buffers for r in b.regions}
    device_names = {b.name for b in rep.buffers}
    assert ("RDMA buffer (pinned host)" in {b.name for b in rep.host_buffers}) == rdma_in_host
    assert ("RDMA buffer" in device_names) == (not rdma_in_host)
    assert ("atomic buffer" in host_regions) == atomic_in_host
    hint = 1_880_098_944
    assert rep.num_bytes == (0 if rdma_in_host else hint) + 33_554_432 + (2_112 if atomic_in_host else 84_072)
    assert rep.host_num_bytes == (hint if rdma_in_host else 0) + 2_101_516 + (81_960 if atomic_in_host else 0)


# ======================================================================================
# §5 limits: values the size functions accept give sizes plus error findings
# ======================================================================================
def test_tma_staging_by_version():
    """§5.2: BF16 hidden 8192 internode: 16,472 / 16,440 B exceed v0.1.1's 16,384 B, not main's 20,480 B."""
    old = broken(report(plan(hidden=8192, fp8=False, version="v0.1.1"), "uccl-ep"))
    assert old["internode dispatch token + 8 B mbarrier (TMA staging)"] == (16_472, 16_384)
    assert old["internode combine token + 8 B mbarrier (TMA staging)"] == (16_440, 16_384)
    assert not broken(report(plan(hidden=8192, fp8=False), "uccl-ep"))
    assert not broken(report(plan(hidden=8192, fp8=False, platform="rocm", version="v0.1.1"), "uccl-ep"))  # no TMA


def test_intranode_tma_bf16_8192():
    """§5.2: intranode BF16 hidden 8192 stages 8,200 B in 8,192; FP8 fits."""
    assert broken(report(plan(hidden=8192, fp8=False, ranks=8), "uccl-ep")) == {
        "hidden bytes / 2 + 8 (intranode TMA staging)": (8_200, 8_192)}
    assert not broken(report(plan(hidden=8192, ranks=8), "uccl-ep"))


@pytest.mark.parametrize(("changes", "limit"), [
    ({"topk": 10, "version": "v0.1.1"}, "num_topk (kNumMaxTopK)"),
    ({"topk": 17}, "num_topk (kNumMaxTopK)"),
    ({"experts": 250}, "num_experts % num_ranks"),
    ({"hidden": 7000}, "hidden % 128"),
    ({"hidden": 3072}, "hidden (SWITCH_HIDDEN) in {2048, 2560, 4096, 5120, 6144, 7168, 8192}"),
    ({"hidden": 7040}, "hidden % 512 (FP8 dispatch)"),
    ({"ranks": 2, "experts": 256, "tokens": 1}, "num_ranks x num_max_dispatch_tokens_per_rank % 4 (TMA)"),
    ({"ranks": 12, "experts": 252}, "num_ranks % max_nvl_peers (LOCAL_WORLD_SIZE) when num_ranks >= it"),
    ({"platform": "rocm"}, "kNumMaxWarpGroups (most warps of a dispatch) >= kNumMaxTopK + 1"),
])
def test_low_latency_limits(changes, limit):
    """§5.3: each plan is sized (no exception) and breaks the named launch limit (an error finding)."""
    rep = report(plan(**changes), "uccl-ll")
    assert rep.buffer("RDMA buffer").num_bytes > 0
    assert limit in broken(rep)
    assert any(f.severity == "error" for f in rep.findings)


def test_rocm_low_latency_dispatch_warps():
    """§5.3: on ROCm kNumMaxWarpGroups = 16 < kNumMaxTopK + 1 = 17 at main; v0.1.1 (9 + 1) passes."""
    rep = report(plan(platform="rocm"), "uccl-ll")
    codes = [f.code for f in rep.findings if f.severity == "error"]
    assert codes == ["uccl-ll.rocm-dispatch-warps"]
    assert not broken(report(plan(platform="rocm", version="v0.1.1"), "uccl-ll"))
    assert not broken(report(plan(), "uccl-ll"))


@pytest.mark.parametrize(("changes", "limit"), [
    ({"ranks": 128, "experts": 256, "num_ranks_per_node": 4}, "num_ranks (normal mode)"),
    ({"topk": 33}, "num_topk (WARP_SIZE)"),
    ({"ranks": 8, "experts": 250}, "num_experts % num_ranks"),
    ({"ranks": 8, "experts": 8 * 129}, "num_local_experts (intranode notify_dispatch threads)"),
    ({"ranks": 144, "experts": 288}, "num_rdma_ranks (SWITCH_RDMA_RANKS) in {2, 3, 4, 8, 16}"),
    ({"ranks": 16, "num_ranks_per_node": 4}, "num_ranks_per_node (NUM_MAX_NVL_PEERS)"),
    ({"hidden": 7000}, "hidden x element size % 16"),
])
def test_normal_limits(changes, limit):
    """§5.1-5.2."""
    rep = report(plan(**changes), "uccl-ep")
    assert limit in broken(rep)


def test_rocm_int64_constructor_limits():
    """§5.1: a 2.6 GB NVL buffer with RDMA bytes breaks INT_MAX on CUDA; ROCm checks int64."""
    config = u.Config(num_sms=24, num_max_nvl_chunked_send_tokens=8, num_max_nvl_chunked_recv_tokens=2048,
                      num_max_rdma_chunked_send_tokens=16, num_max_rdma_chunked_recv_tokens=128)
    cuda = report(plan(deepep_config=config), "uccl-ep")
    assert cuda.quantity("num_nvl_bytes") > 2**31
    assert "num_nvl_bytes (when num_rdma_bytes > 0) <= INT_MAX" in broken(cuda)
    rocm = report(plan(deepep_config=config, platform="rocm"), "uccl-ep")
    assert not any("num_nvl_bytes" in name for name in broken(rocm))


@pytest.mark.parametrize(("backend", "changes", "needle"), [
    ("uccl-ep", {"ranks": 12}, "must be below 8 or a multiple of 8"),
    ("uccl-ep", {"ranks": 48}, "Unsupported number of EP ranks"),
    ("uccl-ep", {"num_sms": 21}, "Buffer.set_num_sms"),
    ("uccl-ep", {"deepep_config": (24, 8, 512, 16, 128)}, "must be an epbuf.backends.deepep_v1.Config"),
    ("uccl-ll", {"hidden": 7001, "experts": 1, "ranks": 1, "tokens": 1}, "ep/include/ep_config.hpp:226, 239"),
    ("uccl-ll", {"version": "ll4"}, "unknown UCCL-EP version"),
    ("uccl-ll", {"tokens": 2**31 - 1, "experts": 2**31 - 1}, "the same int product, ep/include/ep_config.hpp:221"),
])
def test_invalid_plans_raise(backend, changes, needle):
    """The rule: only what no size function can evaluate raises (one line)."""
    with pytest.raises(InvalidArgumentError, match=None) as info:
        report(plan(**changes), backend)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_size_function_argument_checks():
    for args in ((-1, 7168, 16, 256), (128, 0, 16, 256), (128, 7168, 16, 1.5)):
        with pytest.raises(InvalidArgumentError):
            u.get_low_latency_rdma_size_hint(*args)
    with pytest.raises(InvalidArgumentError, match="must be True or False"):
        u.get_low_latency_rdma_size_hint(128, 7168, 16, 256, per_expert_batching=1)
    with pytest.raises(InvalidArgumentError):
        Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=8, num_max_tokens_per_rank=1, nic="roce")


# ======================================================================================
# Summaries, JSON, sweeps
# ======================================================================================
@settings(max_examples=200, deadline=None)
@given(backend=st.sampled_from(["uccl-ep", "uccl-ll"]), ranks=st.sampled_from([1, 2, 8, 12, 16, 24, 32, 64, 144]),
       tokens=st.integers(1, 3000), experts=st.sampled_from([1, 64, 256, 288, 5121]),
       hidden=st.sampled_from([2048, 4096, 7000, 7168, 8192]), fp8=st.booleans(), topk=st.integers(0, 20),
       nic=st.sampled_from(["ib", "efa", "host-memory"]), platform=st.sampled_from(["cuda", "rocm"]),
       batching=st.booleans(), version=st.sampled_from([None, "v0.1.1"]))
def test_summary_matches_report(backend, ranks, tokens, experts, hidden, fp8, topk, nic, platform, batching, version):
    """Property: the fast summary equals the summary of the full report (or both reject), and the
    allocation is never below what a run needs."""
    p = plan(hidden=hidden, topk=topk, experts=experts, ranks=ranks, tokens=tokens, fp8=fp8, nic=nic,
             platform=platform, per_expert_batching=batching, version=version)
    try:
        expected = summary_of(report(p, backend))
    except InvalidArgumentError as error:
        with pytest.raises(InvalidArgumentError) as info:
            summarize(p, backend)
        assert str(info.value) == str(error)
        return
    assert summarize(p, backend) == expected
    assert expected.num_bytes >= expected.num_bytes_needed


def test_json_round_trip_with_host_buffers():
    for backend in ("uccl-ep", "uccl-ll"):
        rep = report(plan(nic="efa"), backend)
        data = json.loads(json.dumps(report_to_dict(rep)))
        assert data["host_num_bytes"] == rep.host_num_bytes == 2_183_476
        assert report_from_dict(data) == rep


def test_sweep_rows():
    result = sweep(plan(tokens=1), {"num_max_tokens_per_rank": [128, 256], "num_ranks": [8, 16]},
                   ["uccl-ep", "uccl-ll"])
    by = {(r[0], r[4], r[5]): r[result.columns.index("num_bytes")] for r in result.rows}
    assert by[("uccl-ep", 8, 128)] == by[("uccl-ep", 8, 256)] == 369_348_489
    assert by[("uccl-ll", 16, 128)] == 1_880_098_944 + 33_554_432 + 84_072


# ======================================================================================
# CLI
# ======================================================================================
def test_cli_hint_and_strict(capsys):
    code, out, err = run(capsys, "hint", "--backend", "uccl-ll", "--ranks", "16", "--tokens", "128", "--topk", "8")
    assert code == 0 and err == ""
    for text in ("1,880,098,944", "pinned host memory", "Total host allocation:   2,101,516 B",
                 "uccl-ll.deepep-layout"):
        assert text in out
    code, _, _ = run(capsys, "hint", "--backend", "uccl-ll", "--device", "mi300x", "--strict")
    assert code == 1  # --device mi300x implies --platform rocm: the warp-group assert breaks
    code, out, _ = run(capsys, "hint", "--backend", "uccl-ep", "--nic", "efa", "--ranks", "32", "--json")
    data = json.loads(out)
    assert data["inputs"]["nic"] == "efa" and data["buffers"][1]["num_bytes"] == 672_077_440
    code, out, _ = run(capsys, "hint", "--backend", "uccl-ll", "--per-expert-batching", "--ranks", "16",
                       "--tokens", "128", "--json")
    assert json.loads(out)["buffers"][0]["num_bytes"] == 1_884_821_632


def test_cli_compare_fit_sweep_layout(capsys):
    code, out, _ = run(capsys, "compare", "--model", "deepseek-v3", "--ranks", "16", "--tokens", "128",
                       "--backends", "deepep-ll,uccl-ll,deepep-v1,uccl-ep")
    assert code == 0 and "uccl-ll" in out and "UCCL proxies and runtime" in out and "pinned host memory (host)" in out
    code, out, _ = run(capsys, "fit", "--model", "deepseek-v3", "--ranks", "16", "--budget", "40GiB", "--json",
                       "--backends", "deepep-ll,uccl-ll")
    results = json.loads(out)["results"]
    assert results["deepep-ll"]["value"] == 2304  # the 32 GiB ceiling binds DeepEP
    assert results["uccl-ll"]["binding"] == "budget" and results["uccl-ll"]["value"] > 2304
    code, out, _ = run(capsys, "sweep", "--backends", "uccl-ep,uccl-ll", "--ranks", "8,16", "--tokens", "128,256",
                       "--json")
    assert code == 0 and len(json.loads(out)["rows"]) == 8
    code, out, _ = run(capsys, "layout", "--backend", "uccl-ll", "--ranks", "16", "--tokens", "128")
    assert code == 0 and "low-latency dispatch message" in out and "send buffer 0" in out


@pytest.mark.parametrize(("argv", "needle"), [
    (["hint", "--backend", "uccl-ep", "--ranks", "12"], "--ranks (num_ranks) = 12"),
    (["hint", "--backend", "uccl-ll", "--backend-version", "zzz"], "--backend-version (version) = 'zzz'"),
    (["hint", "--backend", "uccl-ll", "--nic", "roce"], "invalid choice: 'roce'"),
    (["hint", "--backend", "uccl-ll", "--platform", "metal"], "invalid choice: 'metal'"),
])
def test_cli_bad_input_one_line_exit_2(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and needle in err and err.count("\n") == 1


# internode::get_num_bytes_per_token (ep/src/internode.cu:73-80 @da914a2) is DeepEP V1's formula:
# align16(hidden_int4 x 16 + sizeof(SourceMeta) 8 + 4 x scales + 4 x idx + 4 x weights), reused with its checks.
@pytest.mark.parametrize(("args", "num_bytes"), [
    ((448, 56, 8, 8), 7472),  # FP8 hidden 7168, top-k 8: 7168 + 8 + 224 + 32 + 32
    ((896, 0, 0, 8), 14384),  # BF16 combine, top-k 8: 14336 + 8 + 32 = 14376 -> 14384
    ((256, 0, 0, 0), 4112),  # 4096 + 8 -> 4112
])
def test_get_num_bytes_per_token_is_deepep_v1s(args, num_bytes):
    assert u.get_num_bytes_per_token(*args) == deepep_v1.get_num_bytes_per_token(*args) == num_bytes


@pytest.mark.parametrize("position", range(4))
@pytest.mark.parametrize("bad", [-7, 7.0, float("nan"), "7", True, None])
def test_get_num_bytes_per_token_rejects_hostile_arguments(position, bad):
    args = [448, 56, 8, 8]
    args[position] = bad
    with pytest.raises(InvalidArgumentError) as info:
        u.get_num_bytes_per_token(*args)
    assert [p.argument for p in info.value.problems] == [
        ("hidden_int4", "num_scales", "num_topk_idx", "num_topk_weights")[position]]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_uccl_options_without_uccl_ep_are_refused_and_unlisted(capsys, engine):
    """UCCL-EP's own engine options size nothing without --uccl-ep: given, they are refused in
    one line (exit 2), as hint refuses another backend's options; left at their defaults they
    are not listed among the settings."""
    code, out, err = run(capsys, "engine", engine, "--model", "deepseek-v3", "--ranks", "16", "--uccl-nic", "efa")
    assert (code, out) == (2, "")
    assert err == ("epbuf engine: error: --uccl-nic = 'efa': only read with --uccl-ep: "
                   "add --uccl-ep or remove it\n")
    code, out, _ = run(capsys, "engine", engine, "--model", "deepseek-v3", "--ranks", "16", "--json")
    names = {s["name"] for s in json.loads(out)["settings"]}
    assert code == 0 and not names & {"--uccl-nic", "--uccl-per-expert-batching", "--uccl-platform"}
    code, out, _ = run(capsys, "engine", engine, "--model", "deepseek-v3", "--ranks", "16", "--uccl-ep", "--json")
    names = {s["name"] for s in json.loads(out)["settings"]}
    assert code == 0 and {"--uccl-nic", "--uccl-per-expert-batching", "--uccl-platform"} <= names
