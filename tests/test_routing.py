"""epbuf.routing: seeded routings, EPLB, masking, files; every routing valid by construction."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from hypothesis import given, settings, strategies as st  # noqa: E402

from epbuf import routing as R  # noqa: E402
from epbuf.errors import InvalidArgumentError, UnknownNameError  # noqa: E402

KINDS = ["uniform", "zipf:1.2", "hot:0.4:2", "group:8:4", "node:2", "all-to-one:1", "spread-ranks", "spread-nodes"]


def _distinct(idx) -> bool:
    ordered = np.sort(idx, axis=-1)
    return not ((ordered[..., 1:] == ordered[..., :-1]) & (ordered[..., 1:] >= 0)).any()


def _owners(idx, per_owner):
    return [len(set((row[row >= 0] // per_owner).tolist())) for row in idx.reshape(-1, idx.shape[-1])]


@pytest.mark.parametrize("spec", KINDS)
def test_every_kind_is_valid_seeded_and_reproducible(spec):
    make = lambda seed: R.generate(spec, num_ranks=16, num_tokens=64, num_experts=256, num_topk=8, seed=seed,  # noqa: E731
                                   num_ranks_per_node=8)
    a, b = make(3), make(3)
    assert a.topk_idx.shape == (16, 64, 8) and a.topk_idx.dtype == np.int32
    assert np.array_equal(a.topk_idx, b.topk_idx)
    assert _distinct(a.topk_idx) and a.topk_idx.min() >= 0 and a.topk_idx.max() < 256
    assert R.validate(a.topk_idx, num_experts=256, num_ranks=16, num_max_tokens_per_rank=64) is not None
    if a.seed is not None:
        assert not np.array_equal(a.topk_idx, make(4).topk_idx)


def test_structural_guarantees_of_the_kinds():
    kw = dict(num_ranks=16, num_tokens=200, num_experts=256, num_topk=8, seed=0, num_ranks_per_node=8)
    groups = _owners(R.generate("group:8:4", **kw).topk_idx, 32)
    assert max(groups) <= 4
    nodes = _owners(R.generate("node:1", **kw).topk_idx, 128)
    assert set(nodes) == {1}
    one = R.generate("all-to-one:5", **kw).topk_idx
    assert set((one // 16).ravel().tolist()) == {5}
    assert set(_owners(R.generate("spread-ranks", **kw).topk_idx, 16)) == {8}
    assert set(_owners(R.generate("spread-nodes", **kw).topk_idx, 128)) == {2}
    # fewer ranks than top-k: every rank reached, no expert repeated
    few = R.generate("spread-ranks", num_ranks=4, num_tokens=50, num_experts=64, num_topk=8, seed=1)
    assert set(_owners(few.topk_idx, 16)) == {4} and _distinct(few.topk_idx)
    # top-k above the experts of one rank: all-to-one spills to the next rank
    spill = R.generate("all-to-one", num_ranks=8, num_tokens=3, num_experts=32, num_topk=6).topk_idx
    assert spill[0, 0].tolist() == [0, 1, 2, 3, 4, 5]


def test_uniform_spreads_selections_evenly_and_skewed_kinds_do_not():
    kw = dict(num_ranks=8, num_tokens=2048, num_experts=64, num_topk=4, seed=7)
    load = np.bincount(R.generate("uniform", **kw).topk_idx.ravel(), minlength=64)
    assert load.min() > 0.8 * load.mean() and load.max() < 1.2 * load.mean()
    hot = np.bincount(R.generate("hot:0.5", **kw).topk_idx.ravel(), minlength=64)
    assert hot[0] > 5 * np.median(hot)  # the hot expert sits at index 0
    zipf = np.sort(np.bincount(R.generate("zipf:1.5", **kw).topk_idx.ravel(), minlength=64))
    assert zipf[-1] > 5 * zipf[len(zipf) // 2]


def test_per_rank_token_counts_pad_with_minus_one():
    r = R.generate("uniform", num_ranks=3, num_tokens=[4, 2, 0], num_experts=12, num_topk=2, seed=0)
    assert r.topk_idx.shape == (3, 4, 2) and r.num_tokens == (4, 2, 0)
    assert (r.topk_idx[1, 2:] == -1).all() and (r.topk_idx[2] == -1).all() and (r.topk_idx[0] >= 0).all()
    assert r.num_selections == 12 and r.num_masked == 0


def test_mask_sets_entries_to_minus_one_at_the_ratio():
    r = R.generate("uniform", num_ranks=4, num_tokens=1000, num_experts=64, num_topk=8, seed=0, masked_ratio=0.25)
    share = (r.topk_idx == -1).mean()
    assert 0.22 < share < 0.28 and r.num_masked == int((r.topk_idx == -1).sum())
    with pytest.raises(InvalidArgumentError, match="masked_ratio"):
        R.mask(r.topk_idx, 1.0)


def test_eplb_maps_every_selection_to_a_replica_of_its_expert():
    logical = R.zipf(8, 500, 64, 4, exponent=1.0, seed=2)
    physical, p2l = R.eplb(logical, 64, 16, 8, seed=0)
    p2l = np.asarray(p2l)
    assert physical.max() < 80 and len(p2l) == 80 and _distinct(physical)
    assert np.array_equal(p2l[physical], logical)  # each selection went to a replica of its own expert
    replicas = np.bincount(p2l, minlength=64)
    load = np.bincount(logical.ravel(), minlength=64)
    assert replicas.min() == 1 and replicas.sum() == 80
    assert replicas[int(np.argmax(load))] >= 2  # replicate_experts: the heaviest expert is replicated first
    per_replica = np.bincount(physical.ravel(), minlength=80)
    assert per_replica.max() < load.max()  # its load is split between replicas
    with pytest.raises(InvalidArgumentError, match="multiple of num_ranks"):
        R.eplb(logical, 64, 3, 8)


def test_generate_with_redundant_experts_ranges_over_physical_experts():
    r = R.generate("zipf:1.0", num_ranks=8, num_tokens=100, num_experts=64, num_topk=6, seed=0,
                   num_redundant_experts=8)
    assert r.num_experts == 72 and r.topk_idx.max() < 72 and _distinct(r.topk_idx)
    assert "EPLB" in r.description and len(r.physical_to_logical) == 72


def test_group_uses_the_model_preset():
    r = R.generate("group", num_ranks=8, num_tokens=50, num_experts=256, num_topk=8, model="DeepSeek-V3")
    assert max(_owners(r.topk_idx, 32)) <= 4
    with pytest.raises(InvalidArgumentError, match="has no group preset"):
        R.generate("group", num_ranks=8, num_tokens=5, num_experts=256, num_topk=8, model="qwen3-235b-a22b")


@pytest.mark.parametrize("spec, error, text", [
    ("bogus", UnknownNameError, "unknown kind 'bogus'"),
    ("zipf", InvalidArgumentError, "expected zipf:S"),
    ("zipf:x", InvalidArgumentError, "Zipf exponent 'x' is not a number"),
    ("zipf:-1", InvalidArgumentError, "exponent must be a number > 0"),
    ("hot:1.5", InvalidArgumentError, r"in \(0, 1\)"),
    ("group:7:2", InvalidArgumentError, "divide the 256 experts"),
    ("group:8:9", InvalidArgumentError, "topk_group must be 1..n_group = 8"),
    ("group:8", InvalidArgumentError, "expected group"),
    ("node:0", InvalidArgumentError, "M must be an integer >= 1"),
    ("all-to-one:99", InvalidArgumentError, "the rank must be 0..15"),
])
def test_bad_specs_are_one_line_errors(spec, error, text):
    with pytest.raises(error, match=text) as info:
        R.generate(spec, num_ranks=16, num_tokens=4, num_experts=256, num_topk=8)
    assert "\n" not in str(info.value) and "--routing" in str(info.value)


def test_bad_shapes_are_one_line_errors():
    with pytest.raises(InvalidArgumentError, match="num_topk.*allowed 1..4"):
        R.uniform(2, 3, 4, 5)
    with pytest.raises(InvalidArgumentError, match="multiple of num_ranks"):
        R.all_to_one(3, 2, 8, 2)


# ------------------------------------------------------------------------------ files
@pytest.mark.parametrize("data, text", [
    (np.zeros((2, 3, 2), dtype=np.float32), "dtype float32, expected an integer dtype"),
    (np.zeros((2, 3, 2), dtype=bool), "dtype bool"),
    (np.zeros((3, 2), dtype=np.int64), r"shape \[3, 2\], expected \[ranks, tokens, top-k\]"),
    (np.zeros((4, 3, 2), dtype=np.int64), "routes 4 ranks, but --ranks is 2"),
    (np.zeros((2, 9, 2), dtype=np.int64), "9 tokens per rank > --tokens"),
    (np.full((2, 3, 2), 8, dtype=np.int64), r"expert index 8 at \[rank, token, slot\] = \[0, 0, 0\]"),
    (np.full((2, 3, 2), -2, dtype=np.int64), "expert index -2"),
    (np.array([[[1, 2], [3, 3], [4, 4]], [[0, 1], [2, -1], [-1, -1]]]), r"2 token\(s\) name an expert twice, first at rank 0 token 1"),
])
def test_validate_names_the_problem(data, text):
    with pytest.raises(R.RoutingFileError, match=text) as info:
        R.validate(data, num_experts=8, num_ranks=2, num_max_tokens_per_rank=8, what="f.npy")
    assert "\n" not in str(info.value)


def test_validate_accepts_two_dimensional_global_routings():
    flat = np.array([[0, 1], [2, 3], [4, 5], [6, 7]])
    assert R.validate(flat, num_experts=8, num_ranks=2).shape == (2, 2, 2)


def test_save_and_load_round_trip(tmp_path):
    r = R.generate("uniform", num_ranks=4, num_tokens=16, num_experts=32, num_topk=4, seed=1, masked_ratio=0.1)
    path = tmp_path / "routing.npy"
    R.save(path, r)
    back = R.load(path, num_ranks=4, num_experts=32, num_max_tokens_per_rank=16)
    assert np.array_equal(back.topk_idx, r.topk_idx) and back.name == "routing.npy" and back.seed is None


def test_load_errors(tmp_path):
    with pytest.raises(R.RoutingFileError, match="no such file"):
        R.load(tmp_path / "missing.npy", num_ranks=2, num_experts=8)
    bad = tmp_path / "bad.npy"
    bad.write_text("not numpy")
    with pytest.raises(R.RoutingFileError, match="not a .npy array"):
        R.load(bad, num_ranks=2, num_experts=8)
    other = tmp_path / "r.csv"
    other.write_text("1,2")
    with pytest.raises(R.RoutingFileError, match="unknown file type '.csv'"):
        R.load(other, num_ranks=2, num_experts=8)


def test_load_torch_file(tmp_path):
    torch = pytest.importorskip("torch")
    idx = torch.tensor([[[0, 1], [2, -1]], [[3, 4], [5, 6]]])
    torch.save({"topk_idx": idx}, tmp_path / "r.pt")
    r = R.load(tmp_path / "r.pt", num_ranks=2, num_experts=8)
    assert r.topk_idx.tolist() == idx.tolist()


@settings(max_examples=30, deadline=None)
@given(spec=st.sampled_from(KINDS), ranks_log=st.integers(1, 4), per_rank=st.sampled_from([1, 2, 4, 8]),
       topk=st.integers(1, 8), tokens=st.integers(0, 12), seed=st.integers(0, 2**16))
def test_generated_routings_always_validate(spec, ranks_log, per_rank, topk, tokens, seed):
    """Every generated routing is a valid ``topk_idx``: shape, range, distinct experts per token."""
    ranks = 2 ** ranks_log
    experts = ranks * per_rank
    per_node = min(ranks, 4)
    kind = spec.split(":")[0]
    spec = {"group": f"group:{min(8, experts)}:{min(4, experts)}", "all-to-one": "all-to-one"}.get(kind, spec)
    if kind == "group" and experts % 8:
        spec = "group:1:1"
    topk = min(topk, experts)
    try:
        r = R.generate(spec, num_ranks=ranks, num_tokens=tokens, num_experts=experts, num_topk=topk, seed=seed,
                       num_ranks_per_node=per_node)
    except InvalidArgumentError as error:  # e.g. top-k larger than M nodes can hold
        assert "--routing" in str(error)
        return
    R.validate(r.topk_idx, num_experts=experts, num_ranks=ranks, num_max_tokens_per_rank=max(tokens, 1))
    assert r.topk_idx.shape == (ranks, tokens, topk)
