"""Vectorised sampling primitives: uniform k-subsets (Floyd), top-k of scores, weighted subsets."""

from __future__ import annotations

import math

from ._base import SCORE_CHUNK_TOKENS, numpy


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


def _weighted_subsets(rng, num_rows: int, weights, k: int, progress=None, log_weights=None):
    """Successive sampling without replacement in proportion to ``weights`` (Plackett-Luce):
    the top-k of ``log(w) + Gumbel`` noise. ``log_weights`` gives ``log(w)`` directly instead."""
    np = numpy()
    if log_weights is None:
        log_weights = np.log(np.asarray(weights, dtype=np.float64))
    log_w = np.asarray(log_weights, dtype=np.float64).astype(np.float32)

    def scores(rng, n):
        u = rng.random((n, log_w.size), dtype=np.float32)
        np.clip(u, np.float32(1e-30), None, out=u)
        return log_w - np.log(-np.log(u))

    return _topk_of_scores(rng, num_rows, log_w.size, k, scores, progress)
