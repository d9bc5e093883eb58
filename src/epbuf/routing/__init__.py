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

from ._base import GROUP_PRESETS, KINDS, SCORE_CHUNK_TOKENS, Routing, RoutingFileError, numpy
from .eplb import eplb, mask
from .files import load, save, validate
from .kinds import all_to_one, group_limited, hot, node_limited, spread_nodes, spread_ranks, uniform, zipf
from .spec import generate, parse_spec

__all__ = [
    "Routing",
    "SCORE_CHUNK_TOKENS",
    "parse_spec",
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
