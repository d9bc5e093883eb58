"""Seeded, reproducible MoE routings for ``epbuf simulate`` (numpy, the extra ``epbuf[sim]``).

A routing is what every rank passes to ``dispatch`` as ``topk_idx``: an integer array of
shape ``[num_ranks, num_tokens, num_topk]`` whose entries are expert indices, distinct
within a token, or ``-1`` for "no expert in this slot" (DeepEP and DeepEP-Ascend skip
``-1`` entries). Rank ``r`` owns experts ``[r * E / N, (r + 1) * E / N)``.

Routings come from a spec string (``--routing``), all seeded by ``seed`` and reproducible
(numpy ``PCG64``):

``uniform``
    A uniformly random set of ``num_topk`` distinct experts per token, in random order:
    the distribution DeepEP's tests draw (``scores = randn(...).abs() + 1``,
    ``topk(scores, num_topk)``: i.i.d. scores make the top-k a uniform subset;
    ``tests/legacy/test_intranode.py:32-33 @dd758ca``), built in O(tokens x top-k) memory
    by Floyd's sampling instead of a ``[tokens, experts]`` score matrix.
``zipf:S``
    Expert popularity ``1 / rank^S`` over a seeded random permutation of the experts;
    each token draws its ``num_topk`` distinct experts in proportion to popularity
    (successive sampling without replacement, via Gumbel top-k on score chunks).
``hot:SHARE[:NUM_HOT]``
    ``NUM_HOT`` experts (default 1, spread over the ranks) carry ``SHARE`` of the
    per-draw probability, the rest share the remainder evenly. A token picks an expert at
    most once, so one hot expert receives at most one selection per token.
``group[:N_GROUP:TOPK_GROUP]``
    DeepSeek-V3's group-limited gate (``inference/model.py:584-593 @9b4e978``): experts
    split into ``N_GROUP`` contiguous groups, each token keeps the ``TOPK_GROUP`` groups
    with the highest group score (sum of the two best scores in the group; the maximum for
    DeepSeek-V2, whose gate has no bias) and takes its top-k inside them. Without numbers
    the model preset's values are used (:data:`GROUP_PRESETS`: 8/4 for DeepSeek-V3).
``node:M``
    Node-limited routing as DeepEP's internode test draws it: groups are the nodes, each
    token keeps the ``M`` nodes with the highest maximum score
    (``tests/legacy/test_internode.py:42-46 @dd758ca``).
``all-to-one[:RANK]``
    Every token of every rank selects experts of rank ``RANK`` (default 0), as many as
    the rank holds, then the next ranks' experts: the worst case of every per-destination
    region.
``spread-ranks`` / ``spread-nodes``
    Every token's top-k on distinct ranks (nodes) where there are enough of them: the
    worst case of the per-token combine regions.

EPLB (``num_redundant_experts > 0``) maps the logical routing onto ``E + R`` physical
experts with DeepSeek's EPLB global policy (``replicate_experts`` then
``balanced_packing``, deepseek-ai/EPLB ``eplb.py:7-73 @d52c72d``), weighted by the
routing's own expert loads, each selection going to one replica drawn uniformly.
:func:`load` reads a recorded routing from ``.npy`` (or ``.pt`` with torch installed).

>>> r = generate("uniform", num_ranks=2, num_tokens=3, num_experts=8, num_topk=2, seed=0)
>>> r.topk_idx.shape, r.num_selections
((2, 3, 2), 12)
>>> generate("all-to-one", num_ranks=2, num_tokens=2, num_experts=8, num_topk=2).topk_idx[1].tolist()
[[0, 1], [0, 1]]
"""

from __future__ import annotations

import math
import os

from .errors import EpbufError, InvalidArgumentError, Problem, UnknownNameError

__all__ = [
    "Routing",
    "RoutingFileError",
    "GROUP_PRESETS",
    "KINDS",
    "numpy",
    "generate",
    "uniform",
    "zipf",
    "hot",
    "group_limited",
    "node_limited",
    "all_to_one",
    "spread_ranks",
    "spread_nodes",
    "eplb",
    "mask",
    "load",
    "save",
    "validate",
]

#: Tokens scored at once by the score-based generators: the ``[chunk, experts]`` float32
#: scores are the only temporary larger than the output (32 MiB at 256 experts).
SCORE_CHUNK_TOKENS = 32768

#: ``(n_group, topk_group, group score)`` of model presets with group-limited gates, from
#: the models' configs. "top2": sum of the two best scores of a group (gate with a bias,
#: DeepSeek-V3 ``inference/model.py:586-589 @9b4e978``); "max": the best score (no bias).
GROUP_PRESETS: dict[str, tuple[int, int, str]] = {
    # deepseek-ai/DeepSeek-V3@9b4e978 inference/configs/config_671B.json: n_expert_groups 8,
    # n_limited_groups 4; aiconfigurator@095f58a5 model_configs DeepSeek-V3/R1/V3.2: n_group 8, topk_group 4
    "deepseek-v3": (8, 4, "top2"),
    "deepseek-r1": (8, 4, "top2"),
    "deepseek-v3.2": (8, 4, "top2"),
    # config_236B.json: n_expert_groups 8, n_limited_groups 3; softmax gate without bias
    "deepseek-v2": (8, 3, "max"),
    # aiconfigurator@095f58a5 Kimi-K2-Instruct / Kimi-K2.5: n_group 1, topk_group 1 (no group limit)
    "kimi-k2": (1, 1, "top2"),
    "kimi-k2-thinking": (1, 1, "top2"),
    "kimi-k2.5": (1, 1, "top2"),
}

#: Routing kinds of :func:`generate` and their parameters, for help texts and errors.
KINDS = {
    "uniform": "uniform",
    "zipf": "zipf:S (S > 0)",
    "hot": "hot:SHARE[:NUM_HOT] (0 < SHARE < 1)",
    "group": "group[:N_GROUP:TOPK_GROUP]",
    "node": "node:M (at most M nodes per token)",
    "all-to-one": "all-to-one[:RANK]",
    "spread-ranks": "spread-ranks",
    "spread-nodes": "spread-nodes",
}


class RoutingFileError(EpbufError):
    """A routing file that cannot be read or holds no valid ``topk_idx``."""


def numpy():
    """The numpy module, or a one-line error naming the extra that installs it."""
    try:
        import numpy as np
    except ImportError:
        from .plot import MissingExtraError

        raise MissingExtraError("epbuf simulate needs numpy: pip install 'epbuf[sim]'") from None
    return np


class Routing:
    """One routing of every rank's tokens.

    Attributes:
        topk_idx: integer array ``[num_ranks, num_max_tokens, num_topk]``; ``-1`` = none.
        num_experts: experts the indices range over (physical ones with EPLB).
        num_tokens: tokens each rank routes (tuple of ``num_ranks`` ints); rows at and
            beyond a rank's count are all ``-1``.
        name: the spec it was made from (``"zipf:1.2"``) or the file it was read from.
        seed: the seed (``None`` for files and deterministic routings).
        description: one line for people.
        physical_to_logical: with EPLB, the logical expert of each physical one (tuple).
    """

    __slots__ = ("topk_idx", "num_experts", "num_tokens", "name", "seed", "description", "physical_to_logical")

    def __init__(self, topk_idx, num_experts: int, num_tokens=None, name: str = "", seed: int | None = None,
                 description: str = "", physical_to_logical: tuple | None = None) -> None:
        self.topk_idx = topk_idx
        self.num_experts = int(num_experts)
        ranks, tokens = topk_idx.shape[0], topk_idx.shape[1]
        self.num_tokens = tuple(int(t) for t in num_tokens) if num_tokens is not None else (tokens,) * ranks
        self.name = name
        self.seed = seed
        self.description = description
        self.physical_to_logical = physical_to_logical

    @property
    def num_ranks(self) -> int:
        return int(self.topk_idx.shape[0])

    @property
    def num_max_tokens(self) -> int:
        return int(self.topk_idx.shape[1])

    @property
    def num_topk(self) -> int:
        return int(self.topk_idx.shape[2])

    @property
    def num_selections(self) -> int:
        """Entries that name an expert (not ``-1``)."""
        return int((self.topk_idx >= 0).sum())

    @property
    def num_masked(self) -> int:
        """``-1`` entries inside the ranks' token counts (padding rows not counted)."""
        np = numpy()
        counts = np.asarray(self.num_tokens)
        inside = np.arange(self.num_max_tokens)[None, :] < counts[:, None]
        return int(((self.topk_idx < 0) & inside[:, :, None]).sum())

    def __repr__(self) -> str:
        return (f"Routing({self.name!r}, ranks={self.num_ranks}, tokens={self.num_max_tokens}, "
                f"topk={self.num_topk}, experts={self.num_experts}, seed={self.seed})")


# ------------------------------------------------------------------------------ checks
def _problem(argument: str, value: object, allowed: str) -> InvalidArgumentError:
    return InvalidArgumentError([Problem(argument, value, allowed)])


def _tokens_per_rank(num_ranks: int, num_tokens) -> tuple[int, ...]:
    if isinstance(num_tokens, int) and not isinstance(num_tokens, bool):
        if num_tokens < 0:
            raise _problem("num_tokens", num_tokens, "allowed >= 0 tokens per rank")
        return (num_tokens,) * num_ranks
    counts = tuple(num_tokens)
    if len(counts) != num_ranks or any(isinstance(t, bool) or not isinstance(t, int) or t < 0 for t in counts):
        raise _problem("num_tokens", num_tokens, f"one integer >= 0 per rank ({num_ranks} ranks), or one integer")
    return counts


def _check_shape(num_ranks: int, num_experts: int, num_topk: int, per_rank: bool = True) -> None:
    problems = []
    if isinstance(num_ranks, bool) or not isinstance(num_ranks, int) or num_ranks < 1:
        problems.append(Problem("num_ranks", num_ranks, "allowed >= 1"))
    if isinstance(num_experts, bool) or not isinstance(num_experts, int) or num_experts < 1:
        problems.append(Problem("num_experts", num_experts, "allowed >= 1"))
    elif per_rank and isinstance(num_ranks, int) and num_ranks >= 1 and num_experts % num_ranks:
        problems.append(Problem("num_experts", num_experts,
                                f"must be a multiple of num_ranks = {num_ranks} (each rank holds E / N experts)"))
    if isinstance(num_topk, bool) or not isinstance(num_topk, int) or num_topk < 1:
        problems.append(Problem("num_topk", num_topk, "allowed >= 1 (a routing needs a real top-k; 0 means unspecified only for sizes)"))
    elif isinstance(num_experts, int) and num_topk > num_experts:
        problems.append(Problem("num_topk", num_topk, f"allowed 1..{num_experts} (distinct experts per token)"))
    if problems:
        raise InvalidArgumentError(problems)


def _rng(seed):
    np = numpy()
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise _problem("seed", seed, "allowed an integer >= 0")
    return np.random.Generator(np.random.PCG64(seed))


def _finish(rows, num_ranks: int, counts: tuple[int, ...], num_topk: int):
    """``[num_ranks * T, k]`` rows -> ``[num_ranks, T, k]`` with rows past each rank's count set to -1."""
    np = numpy()
    t_max = max(counts) if counts else 0
    out = rows.reshape(num_ranks, t_max, num_topk)
    if any(c != t_max for c in counts):
        pad = np.arange(t_max)[None, :] >= np.asarray(counts)[:, None]
        out[pad] = -1
    return out


# ---------------------------------------------------------------- sampling primitives
def _uniform_subsets(rng, num_rows: int, num_items: int, k: int):
    """``[num_rows, k]`` int32: a uniformly random k-subset of ``range(num_items)`` per row,
    in uniformly random order. Floyd's algorithm, vectorized over rows: O(rows x k^2)
    time, O(rows x k) memory."""
    np = numpy()
    out = np.empty((num_rows, k), dtype=np.int32)
    for i, j in enumerate(range(num_items - k, num_items)):
        pick = rng.integers(0, j + 1, size=num_rows, dtype=np.int32)
        if i:
            taken = (out[:, :i] == pick[:, None]).any(axis=1)
            pick[taken] = j
        out[:, i] = pick
    if 1 < k <= _PERMUTATION_TABLE_MAX_K:
        order = _permutations(k)[rng.integers(0, math.factorial(k), size=num_rows)]
        out = np.take_along_axis(out, order, axis=1)
    elif k > 1:
        order = np.argsort(rng.random((num_rows, k), dtype=np.float32), axis=1)
        out = np.take_along_axis(out, order, axis=1)
    return out


#: Up to this top-k a uniformly random lane order is drawn from a table of all k!
#: permutations (8! = 40,320 rows) instead of sorting random keys per token.
_PERMUTATION_TABLE_MAX_K = 8
_PERMUTATION_TABLES: dict = {}


def _permutations(k: int):
    """All permutations of ``range(k)`` as a ``[k!, k]`` int8 array (cached)."""
    table = _PERMUTATION_TABLES.get(k)
    if table is None:
        import itertools

        np = numpy()
        table = np.array(list(itertools.permutations(range(k))), dtype=np.int8)
        _PERMUTATION_TABLES[k] = table
    return table


def _topk_of_scores(rng, num_rows: int, num_items: int, k: int, score_chunk, progress=None):
    """Top-k columns of ``score_chunk(rng, n) -> [n, num_items]`` float32 scores, chunk by
    chunk, ordered by descending score (``torch.topk(..., sorted=True)``)."""
    np = numpy()
    out = np.empty((num_rows, k), dtype=np.int32)
    for start in range(0, num_rows, SCORE_CHUNK_TOKENS):
        n = min(SCORE_CHUNK_TOKENS, num_rows - start)
        scores = score_chunk(rng, n)
        top = np.argpartition(scores, num_items - k, axis=1)[:, num_items - k:]
        values = np.take_along_axis(scores, top, axis=1)
        order = np.argsort(-values, axis=1, kind="stable")
        out[start:start + n] = np.take_along_axis(top, order, axis=1)
        if progress is not None:
            progress(start + n, num_rows)
    return out


def _weighted_subsets(rng, num_rows: int, weights, k: int, progress=None):
    """Successive sampling without replacement in proportion to ``weights`` (Plackett-Luce):
    the top-k of ``log(w) + Gumbel`` noise."""
    np = numpy()
    log_w = np.log(np.asarray(weights, dtype=np.float64)).astype(np.float32)

    def scores(rng, n):
        u = rng.random((n, log_w.size), dtype=np.float32)
        np.clip(u, np.float32(1e-30), None, out=u)
        return log_w - np.log(-np.log(u))

    return _topk_of_scores(rng, num_rows, log_w.size, k, scores, progress)


# --------------------------------------------------------------------------- kinds
def uniform(num_ranks: int, num_tokens, num_experts: int, num_topk: int, *, seed: int | None = 0, progress=None):
    """``[R, T, k]`` int32: uniformly random distinct experts per token (see the module doc)."""
    _check_shape(num_ranks, num_experts, num_topk, per_rank=False)
    counts = _tokens_per_rank(num_ranks, num_tokens)
    rows = _uniform_subsets(_rng(seed), num_ranks * max(counts, default=0), num_experts, num_topk)
    return _finish(rows, num_ranks, counts, num_topk)


def zipf(num_ranks: int, num_tokens, num_experts: int, num_topk: int, *, exponent: float = 1.0,
         seed: int | None = 0, progress=None):
    """``[R, T, k]``: experts drawn in proportion to ``1 / popularity_rank^exponent``."""
    _check_shape(num_ranks, num_experts, num_topk, per_rank=False)
    if not isinstance(exponent, (int, float)) or isinstance(exponent, bool) or not exponent > 0 \
            or not math.isfinite(exponent):
        raise _problem("routing", f"zipf:{exponent}", "the Zipf exponent must be a number > 0, e.g. zipf:1.2")
    counts = _tokens_per_rank(num_ranks, num_tokens)
    rng = _rng(seed)
    popularity = rng.permutation(num_experts)  # expert -> popularity rank (0 = most popular)
    weights = 1.0 / (popularity + 1.0) ** float(exponent)
    rows = _weighted_subsets(rng, num_ranks * max(counts, default=0), weights, num_topk, progress)
    return _finish(rows, num_ranks, counts, num_topk)


def hot(num_ranks: int, num_tokens, num_experts: int, num_topk: int, *, share: float = 0.5, num_hot: int = 1,
        seed: int | None = 0, progress=None):
    """``[R, T, k]``: ``num_hot`` experts (spread over the ranks) hold ``share`` of the draw probability."""
    _check_shape(num_ranks, num_experts, num_topk, per_rank=False)
    if not isinstance(share, (int, float)) or isinstance(share, bool) or not 0 < share < 1:
        raise _problem("routing", f"hot:{share}", "the hot share must be a number in (0, 1), e.g. hot:0.3")
    if isinstance(num_hot, bool) or not isinstance(num_hot, int) or not 1 <= num_hot < num_experts:
        raise _problem("routing", f"hot:{share}:{num_hot}", f"the number of hot experts must be 1..{num_experts - 1}")
    np = numpy()
    counts = _tokens_per_rank(num_ranks, num_tokens)
    rng = _rng(seed)
    # hot experts at evenly spaced indices, so several hot experts land on different ranks
    hot_idx = (np.arange(num_hot) * num_experts) // num_hot
    weights = np.full(num_experts, (1.0 - share) / (num_experts - num_hot))
    weights[hot_idx] = share / num_hot
    rows = _weighted_subsets(rng, num_ranks * max(counts, default=0), weights, num_topk, progress)
    return _finish(rows, num_ranks, counts, num_topk)


def group_limited(num_ranks: int, num_tokens, num_experts: int, num_topk: int, *, n_group: int, topk_group: int,
                  group_score: str = "top2", seed: int | None = 0, progress=None):
    """``[R, T, k]``: DeepSeek-V3's group-limited gate on i.i.d. uniform scores.

    Experts form ``n_group`` contiguous groups; per token the ``topk_group`` groups with
    the best group score survive (``"top2"``: sum of the group's two best scores;
    ``"max"``: its best), the others are masked, and the top-k of the rest is taken
    (deepseek-ai/DeepSeek-V3 ``inference/model.py:584-593 @9b4e978``).
    """
    _check_shape(num_ranks, num_experts, num_topk, per_rank=False)
    spec = f"group:{n_group}:{topk_group}"
    if isinstance(n_group, bool) or not isinstance(n_group, int) or n_group < 1 or num_experts % n_group:
        raise _problem("routing", spec, f"n_group must be >= 1 and divide the {num_experts} experts")
    if isinstance(topk_group, bool) or not isinstance(topk_group, int) or not 1 <= topk_group <= n_group:
        raise _problem("routing", spec, f"topk_group must be 1..n_group = {n_group}")
    per_group = num_experts // n_group
    if num_topk > topk_group * per_group:
        raise _problem("routing", spec, f"top-k {num_topk} needs at least {math.ceil(num_topk / per_group)} "
                                        f"groups of {per_group} experts; topk_group is {topk_group}")
    if group_score not in ("top2", "max"):
        raise _problem("routing", group_score, "group score must be 'top2' or 'max'")
    counts = _tokens_per_rank(num_ranks, num_tokens)
    rows = _grouped_topk(_rng(seed), num_ranks * max(counts, default=0), num_experts, num_topk, n_group,
                         topk_group, group_score, progress)
    return _finish(rows, num_ranks, counts, num_topk)


def _grouped_topk(rng, num_rows: int, num_items: int, k: int, n_group: int, topk_group: int, group_score: str,
                  progress=None):
    """Top-k of i.i.d. uniform scores restricted to each row's ``topk_group`` best groups
    (DeepSeek-V3 ``inference/model.py:584-593 @9b4e978``), ordered by descending score.
    Only the kept groups' scores enter the final top-k, which is what masking the others
    to ``-inf`` does."""
    np = numpy()
    per_group = num_items // n_group
    out = np.empty((num_rows, k), dtype=np.int32)
    rows_per_chunk = max(1, SCORE_CHUNK_TOKENS * 256 // max(num_items, 1))
    for start in range(0, num_rows, rows_per_chunk):
        n = min(rows_per_chunk, num_rows - start)
        s = rng.random((n, n_group, per_group), dtype=np.float32)
        if topk_group < n_group:
            if group_score == "top2" and per_group >= 2:
                best = s.argmax(axis=2)[:, :, None]
                first = np.take_along_axis(s, best, axis=2)
                np.put_along_axis(s, best, np.float32(-1.0), axis=2)
                g = first[:, :, 0] + s.max(axis=2)
                np.put_along_axis(s, best, first, axis=2)
            else:
                g = s.max(axis=2)
            kept = np.argpartition(g, n_group - topk_group, axis=1)[:, n_group - topk_group:]
            s = np.take_along_axis(s, kept[:, :, None], axis=1)
        else:
            kept = np.broadcast_to(np.arange(n_group), (n, n_group))
        flat = s.reshape(n, -1)
        top = np.argpartition(flat, flat.shape[1] - k, axis=1)[:, flat.shape[1] - k:]
        order = np.argsort(-np.take_along_axis(flat, top, axis=1), axis=1, kind="stable")
        top = np.take_along_axis(top, order, axis=1)
        group = np.take_along_axis(kept, top // per_group, axis=1)
        out[start:start + n] = group * per_group + top % per_group
        if progress is not None:
            progress(start + n, num_rows)
    return out


def node_limited(num_ranks: int, num_tokens, num_experts: int, num_topk: int, *, num_nodes: int, max_nodes: int,
                 seed: int | None = 0, progress=None):
    """``[R, T, k]``: at most ``max_nodes`` nodes per token, chosen by their best score
    (``tests/legacy/test_internode.py:42-46 @dd758ca``: group scores ``amax`` over each
    node's experts, ``topk(num_topk_groups)``, masked scores, top-k)."""
    _check_shape(num_ranks, num_experts, num_topk)
    spec = f"node:{max_nodes}"
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1 or num_ranks % num_nodes:
        raise _problem("num_nodes", num_nodes, f"must divide num_ranks = {num_ranks}")
    if isinstance(max_nodes, bool) or not isinstance(max_nodes, int) or not 1 <= max_nodes:
        raise _problem("routing", spec, "M must be an integer >= 1, e.g. node:4")
    max_nodes = min(max_nodes, num_nodes)
    per_node = num_experts // num_nodes
    if num_topk > max_nodes * per_node:
        raise _problem("routing", spec, f"top-k {num_topk} does not fit in {max_nodes} node(s) of {per_node} experts")
    counts = _tokens_per_rank(num_ranks, num_tokens)
    rows = _grouped_topk(_rng(seed), num_ranks * max(counts, default=0), num_experts, num_topk, num_nodes,
                         max_nodes, "max", progress)
    return _finish(rows, num_ranks, counts, num_topk)


def all_to_one(num_ranks: int, num_tokens, num_experts: int, num_topk: int, *, rank: int = 0):
    """``[R, T, k]``: every token selects rank ``rank``'s experts ``0..k-1`` (then the next
    ranks' when ``k`` exceeds the experts per rank): every per-destination region of that
    rank receives every token of every rank."""
    _check_shape(num_ranks, num_experts, num_topk)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < num_ranks:
        raise _problem("routing", f"all-to-one:{rank}", f"the rank must be 0..{num_ranks - 1}")
    np = numpy()
    counts = _tokens_per_rank(num_ranks, num_tokens)
    first = rank * (num_experts // num_ranks)
    lanes = (first + np.arange(num_topk, dtype=np.int32)) % num_experts
    rows = np.broadcast_to(lanes, (num_ranks * max(counts, default=0), num_topk)).copy()
    return _finish(rows, num_ranks, counts, num_topk)


def _spread(rng, num_rows: int, num_experts: int, num_topk: int, num_groups: int):
    """Lane ``j`` on group ``(g0 + j) % num_groups``: distinct groups while ``j < num_groups``.
    The ``w``-th lane that wraps onto a group takes expert ``(offset + w * step) % per_group``
    of it, ``step = per_group // wraps``, so no expert repeats and wrapped lanes of a node
    land on different ranks where the node has them. ``g0`` and ``offset`` are random per token."""
    np = numpy()
    per_group = num_experts // num_groups
    wraps = -(-num_topk // num_groups)
    step = per_group // wraps
    lane = np.arange(num_topk, dtype=np.int64)
    g0 = rng.integers(0, num_groups, size=(num_rows, 1))
    offset = rng.integers(0, per_group, size=(num_rows, 1))
    group = (g0 + lane) % num_groups
    return (group * per_group + (offset + (lane // num_groups) * step) % per_group).astype(np.int32)


def spread_ranks(num_ranks: int, num_tokens, num_experts: int, num_topk: int, *, seed: int | None = 0):
    """``[R, T, k]``: each token's lanes on ``min(k, R)`` distinct ranks (random start rank and
    expert per token); with ``k > R`` the extra lanes take other experts of the same ranks."""
    _check_shape(num_ranks, num_experts, num_topk)
    counts = _tokens_per_rank(num_ranks, num_tokens)
    rows = _spread(_rng(seed), num_ranks * max(counts, default=0), num_experts, num_topk, num_ranks)
    return _finish(rows, num_ranks, counts, num_topk)


def spread_nodes(num_ranks: int, num_tokens, num_experts: int, num_topk: int, *, num_nodes: int,
                 seed: int | None = 0):
    """``[R, T, k]``: each token's lanes on ``min(k, nodes)`` distinct nodes."""
    _check_shape(num_ranks, num_experts, num_topk)
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1 or num_ranks % num_nodes:
        raise _problem("num_nodes", num_nodes, f"must divide num_ranks = {num_ranks}")
    counts = _tokens_per_rank(num_ranks, num_tokens)
    rows = _spread(_rng(seed), num_ranks * max(counts, default=0), num_experts, num_topk, num_nodes)
    return _finish(rows, num_ranks, counts, num_topk)


# ---------------------------------------------------------------------------- EPLB
def eplb(topk_idx, num_experts: int, num_redundant_experts: int, num_ranks: int, *, seed: int | None = 0):
    """Map a logical routing (experts ``0..num_experts-1``) onto ``num_experts +
    num_redundant_experts`` physical experts, returning ``(physical topk_idx,
    physical_to_logical)``.

    DeepSeek's EPLB global policy (deepseek-ai/EPLB ``eplb.py @d52c72d``), weighted by the
    routing's own expert loads: ``replicate_experts`` (lines 45-73) gives each redundant
    slot to the logical expert with the highest load per replica; ``balanced_packing``
    (lines 7-42) places the replicas, heaviest first, on the rank with the least load
    that still has a free slot; physical expert ``rank * per_rank + position``. Each
    selection then goes to one replica of its expert, drawn uniformly (seeded).
    """
    np = numpy()
    num_physical = num_experts + num_redundant_experts
    if num_physical % num_ranks:
        raise _problem("num_redundant_experts", num_redundant_experts,
                       f"experts + redundant experts = {num_physical} must be a multiple of num_ranks = {num_ranks}")
    valid = topk_idx >= 0
    load = np.bincount(topk_idx[valid].astype(np.int64), minlength=num_experts).astype(np.float64)
    logcnt = np.ones(num_experts, dtype=np.int64)
    phy2log = list(range(num_experts))
    for _ in range(num_redundant_experts):
        j = int(np.argmax(load / logcnt))
        phy2log.append(j)
        logcnt[j] += 1
    phy2log = np.asarray(phy2log, dtype=np.int64)
    per_rank = num_physical // num_ranks
    if per_rank == 1:
        slot = np.arange(num_physical)
    else:
        weight = load[phy2log] / logcnt[phy2log]
        pack_weight = np.zeros(num_ranks)
        pack_items = np.zeros(num_ranks, dtype=np.int64)
        slot = np.empty(num_physical, dtype=np.int64)
        for item in np.argsort(-weight, kind="stable"):
            pack = int(np.argmin(np.where(pack_items < per_rank, pack_weight, np.inf)))
            slot[item] = pack * per_rank + pack_items[pack]
            pack_weight[pack] += weight[item]
            pack_items[pack] += 1
    physical_to_logical = np.empty(num_physical, dtype=np.int64)
    physical_to_logical[slot] = phy2log
    # logical -> its replicas' physical ids, padded with -1
    table = np.full((num_experts, int(logcnt.max())), -1, dtype=np.int64)
    order = np.argsort(physical_to_logical, kind="stable")
    starts = np.concatenate(([0], np.cumsum(logcnt)[:-1]))
    replica = np.arange(num_physical) - np.repeat(starts, logcnt)
    table[physical_to_logical[order], replica] = order
    logical = np.where(valid, topk_idx, 0).astype(np.int64)
    pick = (_rng(seed).random(topk_idx.shape) * logcnt[logical]).astype(np.int64)
    physical = np.where(valid, table[logical, pick], -1).astype(np.int32)
    return physical, tuple(int(e) for e in physical_to_logical)


def mask(topk_idx, masked_ratio: float, *, seed: int | None = 0):
    """A copy with each entry replaced by ``-1`` with probability ``masked_ratio``
    (DeepEP ``tests/elastic/test_ep.py:78-80 @dd758ca`` ``--masked-ratio``)."""
    if isinstance(masked_ratio, bool) or not isinstance(masked_ratio, (int, float)) or not 0 <= masked_ratio < 1:
        raise _problem("masked_ratio", masked_ratio, "allowed 0 <= ratio < 1")
    out = topk_idx.copy()
    if masked_ratio > 0:
        out[_rng(seed).random(out.shape) < masked_ratio] = -1
    return out


# ------------------------------------------------------------------------ validation
def validate(topk_idx, *, num_experts: int, num_ranks: int, num_max_tokens_per_rank: int | None = None,
             what: str = "routing"):
    """``topk_idx`` as a ``[num_ranks, tokens, top-k]`` integer array, or a one-line
    :class:`RoutingFileError` naming ``what``, the offending value and what is allowed.

    A 2-D ``[num_ranks * tokens, top-k]`` array is split evenly over the ranks. Entries
    must be ``-1`` or ``0..num_experts-1`` and distinct within a token (except ``-1``).
    """
    np = numpy()
    if not isinstance(topk_idx, np.ndarray):
        raise RoutingFileError(f"{what}: holds {type(topk_idx).__name__}, expected an integer array [ranks, tokens, top-k]")
    if topk_idx.dtype == np.bool_ or not np.issubdtype(topk_idx.dtype, np.integer):
        raise RoutingFileError(f"{what}: dtype {topk_idx.dtype}, expected an integer dtype (int64, int32 ...)")
    if topk_idx.ndim == 2 and topk_idx.shape[0] % num_ranks == 0:
        topk_idx = topk_idx.reshape(num_ranks, topk_idx.shape[0] // num_ranks, topk_idx.shape[1])
    if topk_idx.ndim != 3:
        raise RoutingFileError(f"{what}: shape {list(topk_idx.shape)}, expected [ranks, tokens, top-k] "
                               f"(or [ranks x tokens, top-k] with a multiple of {num_ranks} rows)")
    ranks, tokens, k = topk_idx.shape
    if ranks != num_ranks:
        raise RoutingFileError(f"{what}: shape {list(topk_idx.shape)} routes {ranks} ranks, but --ranks is {num_ranks}")
    if k < 1:
        raise RoutingFileError(f"{what}: shape {list(topk_idx.shape)} has top-k 0; expected >= 1")
    if num_max_tokens_per_rank is not None and tokens > num_max_tokens_per_rank:
        raise RoutingFileError(f"{what}: {tokens} tokens per rank, more than --tokens (num_max_tokens_per_rank) = "
                               f"{num_max_tokens_per_rank}; raise --tokens or route fewer tokens")
    if topk_idx.size:
        lo, hi = int(topk_idx.min()), int(topk_idx.max())
        if lo < -1 or hi >= num_experts:
            bad = lo if lo < -1 else hi
            where = tuple(int(i) for i in np.argwhere(topk_idx == bad)[0])
            raise RoutingFileError(f"{what}: expert index {bad} at [rank, token, slot] = {list(where)}; "
                                   f"allowed -1 (none) or 0..{num_experts - 1}")
    if k > 1 and topk_idx.size:
        ordered = np.sort(topk_idx, axis=2)
        repeated = (ordered[:, :, 1:] == ordered[:, :, :-1]) & (ordered[:, :, 1:] >= 0)
        if repeated.any():
            rank, token = (int(i) for i in np.argwhere(repeated.any(axis=2))[0])
            count = int(repeated.any(axis=2).sum())
            raise RoutingFileError(f"{what}: {count:,} token(s) name an expert twice, first at rank {rank} token "
                                   f"{token} ({topk_idx[rank, token].tolist()}); a token's experts must be distinct")
    return topk_idx.astype(np.int32, copy=False) if num_experts <= 2**31 - 1 else topk_idx


def load(path: str | os.PathLike, *, num_ranks: int, num_experts: int, num_max_tokens_per_rank: int | None = None):
    """A recorded routing from ``.npy`` (numpy) or ``.pt`` / ``.pth`` (torch, a tensor or a
    dict with ``topk_idx``), validated by :func:`validate`."""
    np = numpy()
    name = os.fspath(path)
    suffix = os.path.splitext(name)[1].lower()
    if not os.path.isfile(name):
        raise RoutingFileError(f"--routing-file: {name}: no such file")
    if suffix == ".npy":
        try:
            data = np.load(name, allow_pickle=False)
        except (ValueError, OSError, EOFError) as error:
            raise RoutingFileError(f"--routing-file: {name}: not a .npy array ({str(error).splitlines()[0]})") from None
    elif suffix in (".pt", ".pth"):
        try:
            import torch
        except ImportError:
            from .plot import MissingExtraError

            raise MissingExtraError("--routing-file .pt needs torch: pip install 'epbuf[torch]' "
                                    "(or save the routing with numpy.save as .npy)") from None
        try:
            data = torch.load(name, map_location="cpu", weights_only=True)
        except Exception as error:  # torch raises many types for a bad file
            raise RoutingFileError(f"--routing-file: {name}: not a torch file ({str(error).splitlines()[0]})") from None
        if isinstance(data, dict):
            data = data.get("topk_idx")
        if not isinstance(data, torch.Tensor):
            raise RoutingFileError(f"--routing-file: {name}: holds no tensor; save topk_idx or {{'topk_idx': tensor}}")
        data = data.detach().cpu().numpy()
    else:
        raise RoutingFileError(f"--routing-file: {name}: unknown file type {suffix or '(none)'!r}; use .npy or .pt")
    topk_idx = validate(data, num_experts=num_experts, num_ranks=num_ranks,
                        num_max_tokens_per_rank=num_max_tokens_per_rank, what=f"--routing-file {name}")
    return Routing(topk_idx, num_experts, name=os.path.basename(name), seed=None,
                   description=f"recorded routing {os.path.basename(name)}")


def save(path: str | os.PathLike, routing: Routing, *, option: str = "--save-routing") -> None:
    """Write ``routing.topk_idx`` as ``.npy`` (whole or not at all)."""
    np = numpy()
    from .io import write_atomic

    write_atomic(path, lambda f: np.save(f, routing.topk_idx, allow_pickle=False), binary=True, option=option)


# ------------------------------------------------------------------------------ specs
def _number(spec: str, text: str, kind: type, what: str):
    try:
        return kind(text)
    except ValueError:
        raise _problem("routing", spec, f"{what} {text!r} is not {'an integer' if kind is int else 'a number'}; "
                                        f"forms: {', '.join(KINDS.values())}") from None


def parse_spec(spec: str) -> tuple[str, tuple[str, ...]]:
    """``"group:8:4" -> ("group", ("8", "4"))``, the kind checked against :data:`KINDS`."""
    if not isinstance(spec, str) or not spec.strip():
        raise _problem("routing", spec, f"a routing spec: {', '.join(KINDS.values())}")
    kind, *params = spec.strip().lower().split(":")
    if kind not in KINDS:
        raise UnknownNameError(f"--routing (routing) = {spec!r}: unknown kind {kind!r}; "
                               f"choose one of {', '.join(KINDS.values())}")
    return kind, tuple(params)


def _group_preset(model: str):
    """:data:`GROUP_PRESETS` entry of ``model`` (a preset name, title or alias), or None."""
    if not model:
        return None
    if model in GROUP_PRESETS:
        return GROUP_PRESETS[model]
    try:
        from .models import get_model

        return GROUP_PRESETS.get(get_model(model).name)
    except EpbufError:
        return None


def generate(spec: str, *, num_ranks: int, num_tokens, num_experts: int, num_topk: int, seed: int | None = 0,
             num_ranks_per_node: int | None = None, model: str = "", num_redundant_experts: int = 0,
             masked_ratio: float = 0.0, progress=None) -> Routing:
    """The routing ``spec`` names (module doc), for ``num_ranks`` ranks routing
    ``num_tokens`` tokens each (an int, or one per rank), ``num_experts`` routed experts
    and top-k ``num_topk``.

    ``num_ranks_per_node`` (default ``min(num_ranks, 8)``) defines the nodes of ``node:M``
    and ``spread-nodes``. With ``num_redundant_experts`` the score-based routings are
    drawn over the logical experts and mapped by :func:`eplb`; the adversarial and
    node-limited ones are drawn directly over the ``num_experts +
    num_redundant_experts`` physical experts (they are defined by placement).
    ``masked_ratio`` then sets entries to ``-1`` (:func:`mask`).
    """
    kind, params = parse_spec(spec)
    per_node = num_ranks_per_node if num_ranks_per_node is not None else min(num_ranks, 8)
    if isinstance(per_node, bool) or not isinstance(per_node, int) or per_node < 1 or num_ranks % per_node:
        raise _problem("num_ranks_per_node", per_node, f"must divide num_ranks = {num_ranks}")
    num_nodes = num_ranks // per_node
    physical = num_experts + num_redundant_experts
    counts = _tokens_per_rank(num_ranks, num_tokens)
    arity = {"uniform": (0, 0), "zipf": (1, 1), "hot": (1, 2), "group": (0, 2), "node": (1, 1),
             "all-to-one": (0, 1), "spread-ranks": (0, 0), "spread-nodes": (0, 0)}[kind]
    if not arity[0] <= len(params) <= arity[1] or (kind == "group" and len(params) == 1):
        raise _problem("routing", spec, f"expected {KINDS[kind]}")
    logical = kind in ("uniform", "zipf", "hot", "group")
    experts = num_experts if logical else physical
    common = dict(num_ranks=num_ranks, num_tokens=counts, num_experts=experts, num_topk=num_topk)
    description = ""
    if kind == "uniform":
        idx = uniform(**common, seed=seed)
        description = "uniformly random distinct experts per token (DeepEP's tests)"
    elif kind == "zipf":
        s = _number(spec, params[0], float, "Zipf exponent")
        idx = zipf(**common, exponent=s, seed=seed, progress=progress)
        description = f"Zipf-skewed expert popularity, exponent {s:g}"
    elif kind == "hot":
        share = _number(spec, params[0], float, "hot share")
        n_hot = _number(spec, params[1], int, "number of hot experts") if len(params) > 1 else 1
        idx = hot(**common, share=share, num_hot=n_hot, seed=seed, progress=progress)
        description = f"{n_hot} hot expert(s) with {share:.0%} of the draw probability"
    elif kind == "group":
        preset = _group_preset(model)
        if params:
            n_group, topk_group = (_number(spec, p, int, "group count") for p in params)
            score = preset[2] if preset else "top2"
        elif preset:
            n_group, topk_group, score = preset
        else:
            known = ", ".join(f"{m} {g}/{t}" for m, (g, t, _) in GROUP_PRESETS.items())
            raise _problem("routing", spec, f"model {model or '(none)'!r} has no group preset; give "
                                            f"group:N_GROUP:TOPK_GROUP (presets: {known})")
        idx = group_limited(**common, n_group=n_group, topk_group=topk_group, group_score=score, seed=seed,
                            progress=progress)
        description = f"group-limited gate: {n_group} groups, {topk_group} per token (group score {score})"
    elif kind == "node":
        m = _number(spec, params[0], int, "node count")
        idx = node_limited(**common, num_nodes=num_nodes, max_nodes=m, seed=seed, progress=progress)
        description = f"node-limited: at most {min(m, num_nodes)} of {num_nodes} nodes per token (DeepEP's internode test)"
    elif kind == "all-to-one":
        rank = _number(spec, params[0], int, "rank") if params else 0
        idx = all_to_one(**common, rank=rank)
        description = f"adversarial: every token of every rank to rank {rank}"
        seed = None
    elif kind == "spread-ranks":
        idx = spread_ranks(**common, seed=seed)
        description = f"adversarial: each token on min(top-k, ranks) = {min(num_topk, num_ranks)} distinct ranks"
    else:
        idx = spread_nodes(**common, num_nodes=num_nodes, seed=seed)
        description = f"adversarial: each token on min(top-k, nodes) = {min(num_topk, num_nodes)} distinct nodes"
    p2l = None
    if logical and num_redundant_experts:
        idx, p2l = eplb(idx, num_experts, num_redundant_experts, num_ranks, seed=seed)
        description += f"; EPLB over {physical} physical experts ({num_redundant_experts} redundant)"
    if masked_ratio:
        idx = mask(idx, masked_ratio, seed=None if seed is None else seed + 1)
        description += f"; {masked_ratio:.0%} of entries masked to -1"
    return Routing(idx, physical, counts, name=spec, seed=seed, description=description, physical_to_logical=p2l)
