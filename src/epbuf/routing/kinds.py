"""The routing generators: uniform, Zipf, hot experts, group- and node-limited, adversarial."""

from __future__ import annotations

import math

from ._base import SCORE_CHUNK_TOKENS, _check_shape, _finish, _problem, _rng, _tokens_per_rank, numpy
from ._sampling import _uniform_subsets, _weighted_subsets


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
    np = numpy()
    # log(1 / (p + 1)^s) = -s log(p + 1), kept in float32's range: a large exponent gives weights
    # that underflow (and numpy warnings on stderr); in logs only the order matters there.
    with np.errstate(over="ignore"):
        log_weights = -float(exponent) * np.log(popularity + 1.0)
    np.maximum(log_weights, -1e38, out=log_weights)
    rows = _weighted_subsets(rng, num_ranks * max(counts, default=0), None, num_topk, progress,
                             log_weights=log_weights)
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
