"""epbuf simulate: counts, occupancy against the reservations, traffic, time, benchmark accounting, CLI."""

from __future__ import annotations

import io
import json
import pathlib
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

import epbuf  # noqa: E402
from epbuf.cli import main  # noqa: E402
from epbuf.errors import InvalidArgumentError  # noqa: E402
from epbuf.routing import Routing, generate  # noqa: E402
from epbuf.simulate import simulate, simulate_options, terminal_progress, to_dict  # noqa: E402
from epbuf.simulate.counts import RoutingStats, reference_counts  # noqa: E402
from epbuf.simulate.links import LINKS, custom_links, get_links  # noqa: E402
from epbuf.simulate.published import ROWS, compare, render_markdown  # noqa: E402
from epbuf.simulate.traffic import FP8_FACTOR  # noqa: E402

# A routing small enough to check by hand: 2 ranks, 4 experts (2 per rank), top-2, 3 tokens.
HAND = np.array([
    [[0, 1], [1, 2], [3, -1]],   # rank 0: rank 0 twice; ranks 0 and 1; rank 1
    [[2, 3], [0, 3], [-1, -1]],  # rank 1: rank 1 twice; ranks 0 and 1; no expert
], dtype=np.int32)


def _plan(**kw):
    base = dict(hidden=2048, num_topk=2, num_experts=4, num_ranks=2, num_max_tokens_per_rank=3)
    base.update(kw)
    return epbuf.Plan(**base)


# ------------------------------------------------------------------------------ counts
def test_hand_counts():
    st_ = RoutingStats(HAND, 4, 1)
    assert st_.rank_tokens.tolist() == [[2, 2], [1, 2]]
    assert st_.expert_tokens.tolist() == [[1, 2, 1, 1], [1, 0, 1, 2]]
    # the master lane of a rank is the highest lane naming it (ptx::deduplicate keeps the highest lane)
    assert st_.rank_master_lanes.tolist() == [[2, 2], [1, 2]]
    assert st_.node_tokens.tolist() == st_.rank_tokens.tolist()
    assert RoutingStats(HAND, 4, 2).node_tokens.tolist() == [[3], [2]]
    assert st_.rank_selections.tolist() == [[3, 2], [1, 3]]
    assert st_.distinct_ranks_per_token().tolist() == [[0, 2, 1], [1, 1, 1]]
    assert RoutingStats(HAND, 4, 2).local_only_tokens.tolist() == [3, 2]
    assert st_.local_only_tokens.tolist() == [1, 1]


def _random_routing(seed: int, ranks: int, per_rank: int, topk: int, tokens: int, masked: float):
    rng = np.random.default_rng(seed)
    experts = ranks * per_rank
    topk = min(topk, experts)
    idx = np.argsort(rng.random((ranks, tokens, experts)), axis=2)[:, :, :topk].astype(np.int32)
    idx[rng.random(idx.shape) < masked] = -1
    return idx, experts


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), ranks=st.sampled_from([1, 2, 4, 8]), per_rank=st.sampled_from([1, 2, 3]),
       topk=st.integers(1, 6), tokens=st.integers(0, 16), masked=st.sampled_from([0.0, 0.3]),
       per_node=st.sampled_from([1, 2, 4]))
def test_vectorized_counts_equal_the_per_rank_loops(seed, ranks, per_rank, topk, tokens, masked, per_node):
    """RoutingStats (one bincount) == reference_counts (DeepEP-test-style loops), -1 entries included."""
    idx, experts = _random_routing(seed, ranks, per_rank, topk, tokens, masked)
    per_node = min(per_node, ranks)
    stats = RoutingStats(idx, experts, per_node)
    for name, table in reference_counts(idx, experts, per_node).items():
        assert np.array_equal(getattr(stats, name), table), name
    c = 3
    assert np.array_equal(stats.channel_rank_tokens(c).sum(axis=2), stats.rank_tokens)
    assert np.array_equal(stats.channel_node_tokens(c).sum(axis=2), stats.node_tokens)
    assert np.array_equal(stats.rank_master_lanes_by_node.sum(axis=1), stats.rank_master_lanes)
    assert np.array_equal(stats.lane_selections_by_node.sum(axis=1), stats.lane_selections)


def test_channels_split_tokens_like_get_channel_task_range():
    stats = RoutingStats(HAND, 4, 1, num_tokens=(3, 2))
    assert stats.channel_of_token(2).tolist() == [[0, 0, 1], [0, 1, 1]]  # ceil(3/2) = 2, ceil(2/2) = 1 per channel


# ---------------------------------------------------------------------------- occupancy
def test_hand_occupancy_ascend():
    sim = simulate(_plan(), "ascend", Routing(HAND, 4))
    dispatch, combine = sim.regions
    assert (dispatch.rows, dispatch.slots) == (2, 3)
    assert dispatch.used_slots == (3, 4)  # rank 0 receives 2 + 1 tokens, rank 1 receives 2 + 2
    assert dispatch.peak_row_slots == 2 and dispatch.peak_row == (0, 0)
    # 2 ranks == top-2: top-k layout, rows = the rank's master lane
    assert combine.row.startswith("top-k lane") and combine.used_slots == (4, 3)
    assert sim.violations == () and sim.findings == ()


def test_hand_traffic_and_benchmark_bytes():
    sim = simulate(_plan(num_ranks_per_node=1), "ascend", Routing(HAND, 4))
    d, c = sim.traffic
    assert d.pair_messages == ((0, 2), (1, 0)) and d.local_messages == (2, 2)
    assert c.pair_messages == ((0, 1), (2, 0)) and c.local_messages == (2, 2)
    rec = epbuf.report(_plan(), "ascend").record("dispatch").num_bytes
    assert d.message_bytes == rec and d.scaleout_send == (2 * rec, rec) and d.scaleup_bytes == 0
    assert sim.benchmark.dispatch["SU"] == (3.0 * (2048 + 64 + 2 * 12), 4.0 * (2048 + 64 + 2 * 12))


def _all_to_one(plan, backend, rank=0):
    r = generate("all-to-one" + (f":{rank}" if rank else ""), num_ranks=plan.num_ranks,
                 num_tokens=plan.num_max_tokens_per_rank, num_experts=plan.num_total_experts, num_topk=plan.num_topk)
    return simulate(plan, backend, r)


def _spread(plan, backend, kind="spread-ranks"):
    r = generate(kind, num_ranks=plan.num_ranks, num_tokens=plan.num_max_tokens_per_rank,
                 num_experts=plan.num_total_experts, num_topk=plan.num_topk, seed=0,
                 num_ranks_per_node=plan.ranks_per_node)
    return simulate(plan, backend, r)


def _region(sim, phase, name):
    return next(r for r in sim.regions if r.phase == phase and r.region == name)


def test_adversarial_routings_fill_ascend_exactly():
    plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=64, num_ranks=16, num_max_tokens_per_rank=64)
    report = epbuf.report(plan, "ascend")
    hint = report.buffer("EP buffer").regions[0]
    dispatch = _region(_all_to_one(plan, "ascend", rank=3), "dispatch", "dispatch receive buffer")
    # every row of rank 3 holds all 64 tokens of its source rank: the hint is tight in slots ...
    assert dispatch.peak_row_slots == dispatch.slots == 64 and dispatch.peak_used_slots == dispatch.reserved_slots
    assert dispatch.peak_rank == 3
    # ... and loose in bytes by exactly the documented SF over-reservation (ascend.hint-sf-approximation)
    assert dispatch.peak_used_bytes == hint.num_bytes_used
    assert dispatch.headroom_bytes == hint.num_bytes - hint.num_bytes_used > 0
    combine = _region(_spread(plan, "ascend"), "combine", "combine reduce buffer")
    assert combine.rows == 8 and combine.peak_used_slots == combine.reserved_slots  # every lane a master
    small = plan.replace(num_ranks=4, num_experts=16)  # ranks < top-k: rank layout, every row full
    combine = _region(_spread(small, "ascend"), "combine", "combine reduce buffer")
    assert combine.row == "expert rank" and combine.peak_used_slots == combine.reserved_slots == 4 * 64


def test_adversarial_routings_reach_deepep_v2_bounds():
    plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=32, num_max_tokens_per_rank=64,
                      num_ranks_per_node=8)
    from epbuf.backends import deepep_v2

    sim = _all_to_one(plan, "deepep-v2")
    up = _region(sim, "dispatch", "scaleup_recv_buffer")
    assert up.slots == 4 * 64 and up.peak_row_slots == up.slots  # so x T tokens forwarded by one peer: tight
    out = _region(sim, "dispatch", "scaleout_recv_buffer")
    # T tokens per source node, against T + kNumMaxChannels reserved: loose by exactly kNumMaxChannels
    assert out.peak_row_slots == 64 and out.slots - out.peak_row_slots == deepep_v2.NUM_MAX_CHANNELS
    back = _region(_spread(plan, "deepep-v2", "spread-nodes"), "combine", "scaleout_recv_buffer")
    assert back.rows == 4 and back.peak_used_slots == back.reserved_slots  # min(so, top-k) rows, all full
    direct = plan.replace(num_ranks=8, num_ranks_per_node=None)
    recv = _region(_all_to_one(direct, "deepep-v2"), "dispatch", "recv_buffer")
    assert recv.peak_used_slots == recv.reserved_slots == 8 * 64
    assert _region(_spread(direct, "deepep-v2"), "combine", "recv_buffer").peak_used_slots == 8 * 64
    assert all(r.within for r in sim.regions)


def test_adversarial_routing_fills_low_latency_expert_slots():
    plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=64, num_ranks=16, num_max_tokens_per_rank=32)
    sim = _all_to_one(plan, "deepep-ll")
    recv = _region(sim, "dispatch", "recv buffer 0")
    assert recv.rows == 64 and recv.slots == 32
    # top-8 over 4 experts per rank: ranks 0 and 1 hold the 8 experts every token selects, so each of
    # their (local expert, source rank) rows is full
    assert recv.peak_row_slots == 32 and recv.used_slots[:3] == (4 * 16 * 32, 4 * 16 * 32, 0)
    assert _region(sim, "combine", "recv buffer 0").peak_row_slots == 32


def test_deepep_v1_rings_never_hold_more_than_their_slots():
    plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=64, num_ranks=16, num_max_tokens_per_rank=4096)
    sim = _all_to_one(plan, "deepep-v1")
    nvl = _region(sim, "dispatch", "NVL channel rings")
    assert nvl.is_ring and nvl.peak_streamed_row > nvl.slots  # more tokens stream through than a ring holds
    assert nvl.peak_row_slots == nvl.slots and nvl.within  # flow control: never more than its slots
    assert nvl.streamed_slots[:3] == (16 * 4096, 16 * 4096, 0)  # every token reaches ranks 0 and 1 once
    assert nvl.chunk_slots == epbuf.report(plan, "deepep-v1").inputs["dispatch_config"][1]
    rdma = _region(sim, "dispatch", "RDMA channel rings")
    assert sum(rdma.streamed_slots) == 16 * 4096  # once per (token, node): everything to node 0


def test_eplb_plan_simulates_over_physical_experts():
    plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=256,
                      num_redundant_experts=32)
    sim, routing = simulate_options(plan, "deepep-ll", routing="zipf:1.2", seed=1)
    assert routing.num_experts == 288 and sim.experts.experts_per_rank == 18 and sim.violations == ()


def test_expert_alignment_pads_each_expert():
    sim = simulate(_plan(), "ascend", Routing(HAND, 4), expert_alignment=4)
    # rank 0 experts receive 2 and 2 selections, rank 1 experts 2 and 3: aligned to 4 each
    assert sim.experts.recv_selections == (4, 5) and sim.experts.expanded_tokens == (8, 8)
    with pytest.raises(InvalidArgumentError, match="expert_alignment"):
        simulate(_plan(), "ascend", Routing(HAND, 4), expert_alignment=0)


def test_routing_must_fit_the_plan():
    with pytest.raises(InvalidArgumentError, match="routing has 3 tokens per rank"):
        simulate(_plan(num_max_tokens_per_rank=2), "ascend", Routing(HAND, 4))
    with pytest.raises(InvalidArgumentError, match="top-k 2"):
        simulate(_plan(num_topk=4), "ascend", Routing(HAND, 4))
    with pytest.raises(InvalidArgumentError, match="routing's experts range over 4"):
        simulate(_plan(num_experts=8), "ascend", Routing(HAND, 4))


BACKENDS = ["ascend", "deepep-v2", "deepep-v1", "deepep-ll"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), ranks=st.sampled_from([2, 4, 8, 16]), per_rank=st.sampled_from([1, 2, 4]),
       topk=st.integers(1, 8), tokens=st.integers(1, 40), masked=st.sampled_from([0.0, 0.25]),
       per_node=st.sampled_from([2, 4, 8]), spec=st.sampled_from(["uniform", "all-to-one", "spread-ranks",
                                                                   "spread-nodes", "zipf:2"]))
def test_properties_for_every_backend(seed, ranks, per_rank, topk, tokens, masked, per_node, spec):
    """used <= reserved in every region; bytes sent = bytes received per link kind;
    combine mirrors dispatch (multiple reduction)."""
    experts = ranks * per_rank
    topk = min(topk, experts)
    per_node = min(per_node, ranks)
    plan = epbuf.Plan(hidden=2048, num_topk=topk, num_experts=experts, num_ranks=ranks, num_max_tokens_per_rank=tokens,
                      num_ranks_per_node=per_node)
    routing = generate(spec, num_ranks=ranks, num_tokens=tokens, num_experts=experts, num_topk=topk, seed=seed,
                       num_ranks_per_node=per_node, masked_ratio=masked)
    for backend in BACKENDS:
        try:
            sim = simulate(plan, backend, routing, links=LINKS["h100"])
        except InvalidArgumentError:
            continue  # the backend's limits reject this plan (e.g. DeepEP V1's supported rank counts)
        assert sim.violations == (), [(r.region, r.peak_row_slots, r.slots) for r in sim.violations]
        for r in sim.regions:
            assert r.peak_used_slots <= r.reserved_slots and r.headroom_bytes >= 0
        d, c = sim.traffic
        for t in (d, c):
            assert sum(t.scaleup_send) == sum(t.scaleup_recv)
            assert sum(t.scaleout_send) == sum(t.scaleout_recv)
        assert np.array_equal(np.array(c.pair_messages), np.array(d.pair_messages).T)
        assert c.local_messages == d.local_messages
        expected = sim.routing.num_selections if backend == "deepep-ll" else None
        if expected is not None:
            assert d.num_messages == expected


def test_single_reduction_combine_sends_one_record_per_selection():
    plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=64, num_ranks=8, num_max_tokens_per_rank=32,
                      allow_multiple_reduction=False)
    r = generate("uniform", num_ranks=8, num_tokens=32, num_experts=64, num_topk=8, seed=0)
    sim = simulate(plan, "deepep-v2", r)
    assert sim.phase_traffic("combine").num_messages == r.num_selections
    assert sim.phase_traffic("dispatch").num_messages < r.num_selections


def test_hybrid_traffic_goes_over_the_rail_then_scale_up():
    plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=64, num_ranks=16, num_max_tokens_per_rank=32,
                      num_ranks_per_node=8)
    r = generate("uniform", num_ranks=16, num_tokens=32, num_experts=64, num_topk=8, seed=2)
    sim = simulate(plan, "deepep-v2", r)
    stats = RoutingStats(r.topk_idx, 64, 8)
    d = sim.phase_traffic("dispatch")
    pairs = np.array(d.pair_messages)
    # scale-out: only rail pairs (a, i) -> (b, i), one message per token and remote node
    out = pairs.copy()
    out[:8, :8] = out[8:, 8:] = 0
    assert np.count_nonzero(out - np.diag(np.diag(out[:, 8:]), 8) - np.diag(np.diag(out[8:, :]), -8)) == 0
    assert out.sum() == stats.node_tokens[:8, 1].sum() + stats.node_tokens[8:, 0].sum()
    # every (token, destination rank) reaches its rank once: over a link or as a local copy
    assert pairs[:8, :8].sum() + pairs[8:, 8:].sum() + sum(d.local_messages) == \
        stats.rank_tokens.sum() + stats.node_tokens.sum() - out.sum()


# --------------------------------------------------------------- benchmark accounting
def test_deepep_benchmark_bytes_for_the_published_settings():
    """The accounting of DeepEP's scripts at hidden 7168, top-8, FP8 dispatch."""
    kw = dict(hidden=7168, num_topk=8, num_experts=256)
    r8 = generate("uniform", num_ranks=8, num_tokens=64, num_experts=256, num_topk=8, seed=0)
    stats = RoutingStats(r8.topk_idx, 256, 8)
    recv = stats.recv_tokens
    v1 = simulate(epbuf.Plan(num_ranks=8, num_max_tokens_per_rank=64, **kw), "deepep-v1", r8).benchmark
    # test_intranode.py: recv_x.numel() * 2 * (1 + 4 / 128) / 2 = 7,392 B per received token
    assert FP8_FACTOR == 0.515625 and v1.dispatch["NVL"] == tuple(float(x * 7392) for x in recv)
    assert v1.combine["NVL"] == tuple(float(x * 14336) for x in recv)
    ll = simulate(epbuf.Plan(num_ranks=8, num_max_tokens_per_rank=64, **kw), "deepep-ll", r8).benchmark
    # test_low_latency.py: (hidden + hidden / 128 * 4 + 16) = 7,408 B per selection, hidden * 2 back
    assert ll.dispatch["RDMA bandwidth"] == (64 * 8 * 7408.0,) * 8
    assert ll.combine["RDMA bandwidth"] == (64 * 8 * 14336.0,) * 8
    v2 = simulate(epbuf.Plan(num_ranks=8, num_max_tokens_per_rank=64, **kw), "deepep-v2", r8).benchmark
    # test_ep.py: x 7168 + FP32 scales 224 + int64 top-k 64 + FP32 weights 32 = 7,488 B; combine 14,336 + 32
    assert v2.dispatch["SU"] == tuple(float(x * 7488) for x in recv) and v2.dispatch["SO"] == (0.0,) * 8
    assert v2.combine["SU"] == tuple(float(x * 14368) for x in recv)
    r16 = generate("node:2", num_ranks=16, num_tokens=64, num_experts=256, num_topk=8, seed=0)
    s16 = RoutingStats(r16.topk_idx, 256, 8)
    v1i = simulate(epbuf.Plan(num_ranks=16, num_max_tokens_per_rank=64, **kw), "deepep-v1", r16).benchmark
    # test_internode.py: num_rdma_token_sent (own node included) * hidden * 2 * fp8_factor
    assert v1i.dispatch["RDMA"] == tuple(float(x * 7392) for x in s16.node_tokens.sum(axis=1))
    v2h = simulate(epbuf.Plan(num_ranks=16, num_max_tokens_per_rank=64, num_ranks_per_node=8, **kw),
                   "deepep-v2", r16).benchmark
    assert v2h.dispatch["SO"] == tuple(float(x * 7488) for x in s16.node_tokens.sum(axis=1))


# ------------------------------------------------------------------------------ time
def test_time_is_bytes_over_bandwidth_plus_latency_on_the_slowest_link():
    sim = simulate(_plan(num_ranks_per_node=1), "ascend", Routing(HAND, 4), links=get_links("h800"))
    d = sim.phase_time("dispatch")
    rec = sim.phase_traffic("dispatch").message_bytes
    assert (d.rank, d.link) == (0, "scale-out") and d.num_bytes == 2 * rec
    assert d.seconds == pytest.approx(2 * rec / 50e9 + 5e-6)
    assert set(d.link_seconds) == {"scale-up send", "scale-up recv", "scale-out send", "scale-out recv"}
    local = simulate(_plan(), "ascend", Routing(np.array([[[0, 1]], [[2, 3]]], dtype=np.int32), 4),
                     links=get_links("h800"))
    assert local.phase_time("dispatch").rank == -1 and local.phase_time("dispatch").seconds == 0


def test_full_mesh_peer_links_and_missing_scale_out_bandwidth():
    plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=64, num_ranks=8, num_max_tokens_per_rank=64)
    r = generate("all-to-one", num_ranks=8, num_tokens=64, num_experts=64, num_topk=8)
    sim = simulate(plan, "ascend", r, links=get_links("a2"))
    assert "scale-up peer" in sim.phase_time("dispatch").link_seconds
    two_nodes = plan.replace(num_ranks=16, num_experts=128)
    r16 = generate("uniform", num_ranks=16, num_tokens=8, num_experts=128, num_topk=8, seed=0)
    with pytest.raises(InvalidArgumentError, match="give --rdma-gbps"):
        simulate(two_nodes, "ascend", r16, links=get_links("ascend-910b"))
    ok = simulate(two_nodes, "ascend", r16, links=custom_links(get_links("ascend-910b"), rdma_gbps=25))
    assert ok.phase_time("dispatch").seconds > 0


def test_link_presets_have_sources_and_overrides():
    for spec in LINKS.values():
        assert spec.source and spec.scaleup_gbps > 0
    assert get_links("H200-SXM").name == "h200" and get_links("910c").name == "ascend-a3"
    fast = custom_links(get_links("h800"), network="cx8", nvlink_gbps=400, latency_us=1)
    assert (fast.scaleup_gbps, fast.scaleout_gbps, fast.scaleup_latency_us) == (400.0, 100.0, 1.0)
    with pytest.raises(InvalidArgumentError, match="--rdma-gbps"):
        custom_links(get_links("h800"), rdma_gbps=0)
    with pytest.raises(InvalidArgumentError, match="--network"):
        custom_links(get_links("h800"), network="bogus")


def test_published_rows_cover_every_table_and_model_one_exactly():
    sources = {row.source for row in ROWS}
    assert any("legacy.md" in s and "normal" in s for s in sources)
    assert any("low latency" in s and "DeepEP" in s for s in sources)
    assert any("(V2)" in s for s in sources) and any("sgl-kernel-npu" in s for s in sources)
    rows = [row for row in ROWS if row.backend == "deepep-ll" and row.num_ranks == 8 and "DeepEP" in row.source]
    comparisons = compare(rows)
    table = render_markdown(comparisons)
    assert len(comparisons) == 4 and all(c.modelled > 0 for c in comparisons)
    docs = (pathlib.Path(__file__).parents[1] / "docs" / "simulate.md").read_text(encoding="utf-8")
    for line in table.splitlines()[2:]:
        assert line in docs, line  # the documented side-by-side is what the code computes


# ------------------------------------------------------------------------------- CLI
def _run(argv, capsys):
    from _cli_run import run_cli_whole  # error lines as the library wrote them

    return run_cli_whole(capsys, *argv)


def test_cli_json_schema(capsys):
    status, out, _ = _run(["simulate", "--backend", "deepep-v2", "--ranks", "16", "--gpus-per-node", "8",
                           "--tokens", "64", "--topk", "8", "--routing", "group:8:4", "--json"], capsys)
    data = json.loads(out)
    assert status == 0 and data["schema"] == "epbuf.simulate/1"
    assert set(data) >= {"backend", "plan", "routing", "regions", "experts", "traffic", "benchmark", "links", "time",
                         "findings", "num_ranks_per_node"}
    region = data["regions"][0]
    assert set(region) >= {"phase", "region", "rows", "slots", "reserved_slots", "used_slots", "peak_used_slots",
                           "mean_used_slots", "headroom_bytes", "within", "source"}
    assert len(data["traffic"]["dispatch"]["pair_messages"]) == 16
    assert data["time"]["dispatch"]["seconds"] > 0 and data["links"]["name"] == "h800"


def test_cli_text_plot_and_saved_routing(tmp_path, capsys):
    png, saved = tmp_path / "sim.png", tmp_path / "routing.npy"
    status, out, _ = _run(["simulate", "--model", "deepseek-v3", "--ranks", "16", "--tokens", "32", "--routing",
                           "group", "--device", "h100", "--plot", str(png), "--save-routing", str(saved)], capsys)
    assert status == 0 and "Occupancy per rank" in out and "Time estimate" in out and "wrote plot" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    status, out2, _ = _run(["simulate", "--routing-file", str(saved), "--ranks", "16", "--tokens", "32",
                            "--experts", "256", "--hidden", "7168", "--device", "h100"], capsys)
    assert status == 0 and "routing.npy" in out2  # top-k 8 taken from the file


@pytest.mark.parametrize("argv, text", [
    (["--routing", "bogus"], "unknown kind 'bogus'"),
    (["--routing", "zipf:x"], "Zipf exponent 'x'"),
    (["--device", "tpu"], "no link preset"),
    (["--num-tokens", "9000"], "--num-tokens (num_tokens) = 9000: allowed 0..4096"),
    (["--routing-file", "/nonexistent/r.npy"], "no such file"),
    (["--masked-ratio", "1.5"], "masked_ratio"),
    (["--network", "bogus"], "--network"),
    (["--ranks", "16", "--device", "ascend-910b"], "give --rdma-gbps"),
    (["--hbm", "80GB"], "unrecognized arguments: --hbm 80GB"),  # not offered (issue 21)
    # an audit found these accepted: inf times, "Infinity" in the JSON, a PNG written to x.txt
    (["--latency-us", "inf"], "--latency-us (latency_us) = inf: allowed a finite number >= 0"),
    (["--nvlink-gbps", "inf"], "--nvlink-gbps (nvlink_gbps) = inf: allowed a finite number >= 1e-06"),
    (["--rdma-gbps", "1e-320"], "--rdma-gbps (rdma_gbps) = 1e-320: allowed a finite number >= 1e-06"),
    (["--plot", "traffic.txt"], "--plot: traffic.txt: choose the format by the extension: .png, .svg, .pdf"),
])
def test_cli_errors_are_one_line(argv, text, capsys):
    status, out, err = _run(["simulate", "--topk", "8", "--tokens", "4096", "--num-tokens", "16", *argv], capsys)
    assert status == 2 and text in err and err.count("\n") == 1 and out == ""


def test_cli_exits_1_when_a_region_overflows(monkeypatch, capsys):
    from epbuf.simulate import occupancy

    real = occupancy._BACKENDS["ascend"]
    monkeypatch.setitem(occupancy._BACKENDS, "ascend",
                        lambda report, plan, stats: [u.replace(slots=1) for u in real(report, plan, stats)])
    status, out, _ = _run(["simulate", "--ranks", "8", "--topk", "8", "--tokens", "16"], capsys)
    assert status == 1 and "ERROR" in out and "simulate.invariant-violated" in out


def test_missing_numpy_is_a_one_line_error():
    probe = ("import sys; sys.modules['numpy'] = None\n"
             "from epbuf.cli import main\nraise SystemExit(main(['simulate']))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 2 and "pip install 'epbuf[sim]'" in done.stderr and done.stderr.count("\n") == 1
    assert "(in a checkout: '.[sim]')" in done.stderr  # issue 21: the form a checkout needs


def test_progress_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty, pipe = Tty(), io.StringIO()
    for stream in (tty, pipe):
        progress = terminal_progress(stream)
        progress("generating the routing", 1, 4)
        progress.done()
    assert "generating the routing  25 %" in tty.getvalue() and pipe.getvalue() == ""


def test_to_dict_without_pairs_is_smaller():
    sim = simulate(_plan(), "ascend", Routing(HAND, 4))
    assert "pair_messages" not in to_dict(sim, include_pairs=False)["traffic"]["dispatch"]


def test_a_scale_up_domain_larger_than_the_device_is_a_warning():
    plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=64, num_ranks=16, num_max_tokens_per_rank=8,
                      num_ranks_per_node=16)
    r = generate("uniform", num_ranks=16, num_tokens=8, num_experts=64, num_topk=8, seed=0)
    codes = [f.code for f in simulate(plan, "ascend", r, links=get_links("h800")).findings]
    assert codes == ["simulate.scaleup-domain"]
    assert simulate(plan, "ascend", r, links=get_links("ascend-a3")).findings == ()


def test_large_scale_up_devices_keep_the_ep_group_in_one_domain():
    plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=64, num_ranks=32, num_max_tokens_per_rank=8)
    sim, _ = simulate_options(plan, "ascend", device="ascend-a3")
    assert sim.num_ranks_per_node == 32 and sim.phase_traffic("dispatch").scaleout_bytes == 0
    sim, _ = simulate_options(plan, "ascend", device="h800")
    assert sim.num_ranks_per_node == 8 and sim.phase_traffic("dispatch").scaleout_bytes > 0
    sim, _ = simulate_options(plan.replace(num_ranks_per_node=8), "ascend", device="ascend-a3")
    assert sim.num_ranks_per_node == 8  # an explicit --gpus-per-node wins


@pytest.mark.parametrize("k", [4, 3])
def test_hybrid_occupancy_matches_a_token_by_token_walk(k):
    """DeepEP V2 hybrid, walked token by token as the kernels route them: (a, i) sends a token
    once per node b to forwarder (b, i) (scaleout_recv_buffer row a), which forwards it once per
    destination rank (b, l) (scaleup_recv_buffer row i there); combine returns one result per
    (token, rank) to the forwarder — row l when top-k >= scale-up ranks (rank layout), else the
    row of the highest lane naming that rank — and one per (token, node) to (a, i)."""
    so, su, t, per_rank = 2, 4, 20, 2
    n = so * su
    r = generate("uniform", num_ranks=n, num_tokens=t, num_experts=n * per_rank, num_topk=k, seed=5, masked_ratio=0.2)
    plan = epbuf.Plan(hidden=7168, num_topk=k, num_experts=n * per_rank, num_ranks=n, num_max_tokens_per_rank=t,
                      num_ranks_per_node=su)
    sim = simulate(plan, "deepep-v2", r)
    scaleup = np.zeros((n, su), int)       # at (b, l), row i
    scaleout = np.zeros((n, so), int)      # at (b, i), row a
    c_scaleup = np.zeros((n, max(su, k)), int)  # combine at forwarder (b, i), row l or master lane
    c_scaleout = np.zeros((n, so), int)    # combine at source (a, i), row b
    c_send = np.zeros(n, int)              # combine at forwarder (b, i): results for other nodes
    for src in range(n):
        a, i = divmod(src, su)
        for token in r.topk_idx[src]:
            ranks = {int(e) // per_rank for e in token if e >= 0}
            for b in {d // su for d in ranks}:
                scaleout[b * su + i, a] += 1
                c_scaleout[src, b] += 1
                if b != a:
                    c_send[b * su + i] += 1
            for d in ranks:
                b, l = divmod(d, su)
                scaleup[d, i] += 1
                master = max(j for j, e in enumerate(token) if e >= 0 and int(e) // per_rank == d)
                c_scaleup[b * su + i, l if k >= su else master] += 1
    c_scaleup = c_scaleup[:, :min(su, k)]
    expect = {("dispatch", "scaleup_recv_buffer"): scaleup, ("dispatch", "scaleout_recv_buffer"): scaleout,
              ("combine", "scaleup_recv_buffer"): c_scaleup, ("combine", "scaleout_recv_buffer"): c_scaleout,
              ("combine", "scaleout_send_buffer"): c_send[:, None]}
    for (phase, name), table in expect.items():
        u = _region(sim, phase, name)
        assert u.used_slots == tuple(table.sum(axis=1)), name
        assert u.peak_row_slots == table.max(), name


def test_deepep_v1_internode_streams_match_a_token_by_token_walk():
    n, t, k, per_rank, nvl = 16, 30, 4, 2, 8
    r = generate("uniform", num_ranks=n, num_tokens=t, num_experts=n * per_rank, num_topk=k, seed=1)
    plan = epbuf.Plan(hidden=7168, num_topk=k, num_experts=n * per_rank, num_ranks=n, num_max_tokens_per_rank=t)
    sim = simulate(plan, "deepep-v1", r)
    rdma, nvl_streams = np.zeros(n, int), np.zeros(n, int)
    for src in range(n):
        a, i = divmod(src, nvl)
        for token in r.topk_idx[src]:
            ranks = {int(e) // per_rank for e in token if e >= 0}
            for b in {d // nvl for d in ranks}:
                rdma[b * nvl + i] += 1        # RDMA ring at forwarder (b, i)
            for d in ranks:
                nvl_streams[d] += 1           # NVL ring at the destination
    assert _region(sim, "dispatch", "RDMA channel rings").streamed_slots == tuple(rdma)
    assert _region(sim, "dispatch", "NVL channel rings").streamed_slots == tuple(nvl_streams)


def test_console_script_simulate():
    """Once through the installed entry point (or python -m epbuf), as a user runs it."""
    import os
    import shutil

    script = shutil.which("epbuf", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    command = [script] if script else [sys.executable, "-m", "epbuf"]
    done = subprocess.run(command + ["simulate", "--ranks", "8", "--topk", "8", "--tokens", "32", "--json"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["schema"] == "epbuf.simulate/1"


@pytest.mark.parametrize("n,k,seed", [(4, 3, 0), (2, 4, 1), (8, 8, 2)])
def test_ascend_and_low_latency_match_a_token_by_token_walk(n, k, seed):
    """simulate()'s used slots, fullest rows and messages for DeepEP-Ascend (combine in the
    top-k-lane layout when ranks >= top-k, the rank layout otherwise) and the low-latency
    per-expert slots equal a plain Python walk over every token, independent of RoutingStats."""
    t, per_rank = 12, 2
    e = n * per_rank
    r = generate("uniform", num_ranks=n, num_tokens=t, num_experts=e, num_topk=k, seed=seed, masked_ratio=0.25)
    plan = epbuf.Plan(hidden=2048, num_topk=k, num_experts=e, num_ranks=n, num_max_tokens_per_rank=t,
                      num_ranks_per_node=n)
    d_recv = np.zeros((n, n), int)        # at destination d, row = source rank
    c_reduce = np.zeros((n, min(k, n)), int)  # at source s, row = expert rank (n < k) or master lane
    pairs, local = np.zeros((n, n), int), np.zeros(n, int)
    ll_recv = np.zeros((n, per_rank * n), int)  # at d, row = (local expert, source rank)
    ll_combine = np.zeros((n, e), int)    # at s, row = global expert
    for s in range(n):
        for token in r.topk_idx[s].tolist():
            last = {}
            for j, x in enumerate(token):
                if x >= 0:
                    last[x // per_rank] = j
                    ll_recv[x // per_rank, (x % per_rank) * n + s] += 1
                    ll_combine[s, x] += 1
            for d, j in last.items():
                d_recv[d, s] += 1
                c_reduce[s, d if n < k else j] += 1
                if d == s:
                    local[s] += 1
                else:
                    pairs[s, d] += 1
    sim = simulate(plan, "ascend", r)
    for u, table in zip(sim.regions, (d_recv, c_reduce)):
        assert u.used_slots == tuple(table.sum(axis=1)) and u.peak_row_slots == table.max(), u.region
    d, c = sim.traffic
    assert np.array_equal(np.array(d.pair_messages), pairs) and d.local_messages == tuple(local)
    assert np.array_equal(np.array(c.pair_messages), pairs.T)
    ll = simulate(plan, "deepep-ll", r)
    recv = [u for u in ll.regions if u.region.startswith("recv buffer")]
    for u, table in zip(recv, (ll_recv, ll_combine)):
        assert u.used_slots == tuple(table.sum(axis=1)) and u.peak_row_slots == table.max(), (u.phase, u.region)


def test_link_numbers_must_be_finite_and_long_times_print_in_seconds():
    with pytest.raises(InvalidArgumentError, match=r"latency_us\) = 10+…: allowed a finite number >= 0"):
        custom_links(get_links("h800"), latency_us=10 ** 309)  # an int beyond any float
    with pytest.raises(InvalidArgumentError, match=r"nvlink_gbps\) = nan: allowed a finite number"):
        custom_links(get_links("h800"), nvlink_gbps=float("nan"))
    from epbuf.simulate.render import render_simulation

    sim = simulate(_plan(), "ascend", Routing(HAND, 4), links=custom_links(get_links("h800"), latency_us=1e12))
    assert "  dispatch     1e+06 s  bound by rank 0" in render_simulation(sim)  # not 1,000,000,000.000 ms
