"""The counts of one routing that every backend's occupancy and traffic read, vectorized.

Everything a buffer or a link sees is a function of a few integer tables:

``expert_tokens[s, e]``
    selections of source rank ``s`` on expert ``e`` (LL per-expert slots, expert loads);
``rank_tokens[s, d]``
    tokens of ``s`` with at least one expert on rank ``d`` (what ``get_dispatch_layout``
    calls ``num_tokens_per_rank``: a token goes to a rank once);
``node_tokens[s, n]``
    tokens of ``s`` with at least one expert on node ``n`` (``num_tokens_per_rdma_rank``);
``rank_master_lanes[s, j]`` / ``node_master_lanes[s, j]``
    tokens of ``s`` whose top-k lane ``j`` is the *master* of its rank (node): the highest
    lane naming that rank (node). DeepEP's ``ptx::deduplicate`` keeps the highest lane of
    equal values (``get_master_lane_idx`` = ``bfind``, ``deep_ep/include/deep_ep/common/
    ptx.cuh:412-421 @dd758ca``) and DeepEP-Ascend's ``simt::deduplicate`` returns true for
    the lane with no equal lane above it; combine buffers in "top-k layout" put a token's
    partial result for a rank in the row of that lane.

All of it comes from one pass over the ``[ranks, tokens, top-k]`` array: the master flags
by comparing each lane with the lanes above it (top-k is at most 32), then one
``np.bincount`` over ``((s * E + e) * 2 + rank_master) * 2 + node_master``. Memory is a
few arrays of the routing's size, O(tokens x top-k), never O(tokens x experts).
:func:`reference_counts` computes the same tables with per-rank loops, the way DeepEP's
test scripts count (``tests/legacy/test_intranode.py:43-58 @dd758ca``); tests compare the
two and ``benchmarks/simulate_speed.py`` times them.
"""

from __future__ import annotations

from ..routing import numpy

__all__ = ["RoutingStats", "reference_counts"]


class RoutingStats:
    """Counts of a routing on ``num_ranks`` ranks of ``num_ranks_per_node`` per node.

    Attributes (numpy int64 arrays): ``expert_tokens [N, E]``, ``rank_tokens [N, N]``,
    ``node_tokens [N, nodes]``, ``rank_master_lanes [N, K]``, ``node_master_lanes [N, K]``,
    ``lane_selections [N, K]`` (valid entries per lane), ``num_tokens [N]``.
    """

    def __init__(self, topk_idx, num_experts: int, num_ranks_per_node: int, num_tokens=None) -> None:
        np = numpy()
        n, t, k = topk_idx.shape
        self.topk_idx = topk_idx
        self.num_ranks, self.num_max_tokens, self.num_topk = n, t, k
        self.num_experts = num_experts
        self.num_ranks_per_node = num_ranks_per_node
        self.num_nodes = n // num_ranks_per_node
        self.experts_per_rank = num_experts // n
        self.num_tokens = np.asarray(num_tokens if num_tokens is not None else (t,) * n, dtype=np.int64)
        self._lazy: dict = {}

        # Lane-major copies ([K, N*T], contiguous): the lane comparisons below then run
        # over long contiguous rows, ~15x faster than strided [N, T, K] slices.
        lanes = np.ascontiguousarray(topk_idx.reshape(n * t, k).T)
        valid = lanes >= 0
        small = np.int16 if n <= 2**15 - 1 else np.int32
        rank = (lanes // self.experts_per_rank).astype(small)  # -1 stays -1 (floor division)
        node = rank // num_ranks_per_node
        rank_master = self._masters(rank, valid)
        node_master = self._masters(node, valid)
        self._valid, self._rank, self._node = valid, rank, node
        self._rank_master, self._node_master = rank_master, node_master

        wide = np.int64 if 4 * n * num_experts + 1 > 2**31 - 1 else np.int32
        source_base = (np.arange(n * t, dtype=wide) // t) * num_experts
        key = lanes.astype(wide, copy=True)
        key += source_base
        key <<= 2
        key += rank_master.astype(wide) << 1
        key += node_master
        dump = 4 * n * num_experts
        key[~valid] = dump
        counts = np.bincount(key.ravel(), minlength=dump + 1)[:dump].reshape(n, num_experts, 2, 2)
        self.expert_tokens = counts.sum(axis=(2, 3))
        per_expert_rank_master = counts[:, :, 1, :].sum(axis=2)
        per_expert_node_master = counts[:, :, :, 1].sum(axis=2)
        self.rank_tokens = per_expert_rank_master.reshape(n, n, self.experts_per_rank).sum(axis=2)
        self.node_tokens = per_expert_node_master.reshape(n, self.num_nodes, -1).sum(axis=2)
        self.rank_master_lanes = rank_master.reshape(k, n, t).sum(axis=2, dtype=np.int64).T
        self.node_master_lanes = node_master.reshape(k, n, t).sum(axis=2, dtype=np.int64).T
        self.lane_selections = valid.reshape(k, n, t).sum(axis=2, dtype=np.int64).T

    @staticmethod
    def _masters(owner, valid):
        """``[K, M]`` bool: lane ``j`` is valid and no higher lane names the same owner."""
        k = owner.shape[0]
        master = valid.copy()
        for j in range(k - 1):
            same = owner[j + 1] == owner[j]
            for i in range(j + 2, k):
                same |= owner[i] == owner[j]
            master[j] &= ~same
        return master

    # ------------------------------------------------------------------ derived tables
    @property
    def rank_selections(self):
        """``[N, N]``: selections of ``s`` on experts of rank ``d`` (one LL message each)."""
        return self.expert_tokens.reshape(self.num_ranks, self.num_ranks, -1).sum(axis=2)

    @property
    def recv_tokens(self):
        """``[N]``: tokens each rank receives (deduplicated per source token)."""
        return self.rank_tokens.sum(axis=0)

    def _by_node_lane(self, flags, name: str):
        """``[N, nodes, K]``: tokens of ``s`` whose lane ``j`` has ``flags`` set and lies on node ``n``."""
        np = numpy()
        if name not in self._lazy:
            n, t, k = self.topk_idx.shape
            nodes = self.num_nodes
            source = np.arange(n * t, dtype=np.int64) // t
            key = (source * nodes + self._node) * k + np.arange(k)[:, None]
            size = n * nodes * k
            key = np.where(flags, key, size)
            self._lazy[name] = np.bincount(key.ravel(), minlength=size + 1)[:size].reshape(n, nodes, k)
        return self._lazy[name]

    @property
    def rank_master_lanes_by_node(self):
        """``[N, nodes, K]``: tokens of ``s`` whose lane ``j`` is its rank's master and on node ``n``."""
        return self._by_node_lane(self._rank_master, "rank_master_by_node")

    @property
    def lane_selections_by_node(self):
        """``[N, nodes, K]``: tokens of ``s`` whose lane ``j`` names an expert on node ``n``."""
        return self._by_node_lane(self._valid, "valid_by_node")

    def channel_of_token(self, num_channels: int):
        """``[N, T]`` int: the channel of each token slot, DeepEP V1's
        ``get_channel_task_range`` (``csrc/kernels/legacy/utils.cuh:444-448 @dd758ca``):
        ``ceil(num_tokens / num_channels)`` consecutive tokens per channel."""
        np = numpy()
        per_channel = np.maximum(1, -(-self.num_tokens // num_channels))
        return np.minimum(np.arange(self.num_max_tokens)[None, :] // per_channel[:, None], num_channels - 1)

    def channel_rank_tokens(self, num_channels: int):
        """``[N, N, C]``: ``rank_tokens`` split by the source token's channel."""
        return self._channel_counts(num_channels, self._rank_master, self._rank, self.num_ranks, "rank")

    def channel_node_tokens(self, num_channels: int):
        """``[N, nodes, C]``: ``node_tokens`` split by the source token's channel."""
        return self._channel_counts(num_channels, self._node_master, self._node, self.num_nodes, "node")

    def _channel_counts(self, num_channels: int, master, owner, num_owners: int, what: str):
        np = numpy()
        name = (what, num_channels)
        if name not in self._lazy:
            n, t = self.num_ranks, self.num_max_tokens
            channel = self.channel_of_token(num_channels).ravel()
            source = np.arange(n * t, dtype=np.int64) // t
            key = (source * num_owners + owner) * num_channels + channel
            size = n * num_owners * num_channels
            key = np.where(master, key, size)
            self._lazy[name] = np.bincount(key.ravel(), minlength=size + 1)[:size].reshape(n, num_owners, num_channels)
        return self._lazy[name]

    @property
    def local_only_tokens(self):
        """``[N]``: tokens whose experts all sit on their own node (at least one)."""
        np = numpy()
        if "local_only" not in self._lazy:
            n, t = self.num_ranks, self.num_max_tokens
            own = (np.arange(n * t) // t // self.num_ranks_per_node).astype(self._node.dtype)
            touches_own = (self._node == own).any(axis=0)
            one_node = self._node_master.sum(axis=0) == 1
            self._lazy["local_only"] = (touches_own & one_node).reshape(n, t).sum(axis=1, dtype=np.int64)
        return self._lazy["local_only"]

    def distinct_ranks_per_token(self):
        """``[N, K + 1]``: tokens of ``s`` that reach exactly ``j`` distinct ranks (``j = 0..K``)."""
        np = numpy()
        k = self.num_topk
        per_token = self._rank_master.sum(axis=0).reshape(self.num_ranks, self.num_max_tokens)
        key = np.arange(self.num_ranks)[:, None] * (k + 1) + per_token
        inside = np.arange(self.num_max_tokens)[None, :] < self.num_tokens[:, None]
        return np.bincount(key[inside], minlength=self.num_ranks * (k + 1)).reshape(self.num_ranks, k + 1)


def reference_counts(topk_idx, num_experts: int, num_ranks_per_node: int) -> dict:
    """The main tables of :class:`RoutingStats`, computed with loops over source ranks,
    destination ranks, nodes and experts the way DeepEP's test scripts count them
    (``num_tokens_per_expert[i] = (topk_idx == i).sum()``, ``num_tokens_per_rank[i] =
    (rank_idx == i).sum()`` after ``inplace_unique``: ``tests/legacy/test_intranode.py:43-58``,
    ``test_internode.py:59-80 @dd758ca``). The baseline of ``benchmarks/simulate_speed.py``
    and the cross-check of the tests."""
    np = numpy()
    n, t, k = topk_idx.shape
    per_rank = num_experts // n
    nodes = n // num_ranks_per_node
    out = {name: np.zeros(shape, dtype=np.int64) for name, shape in (
        ("expert_tokens", (n, num_experts)), ("rank_tokens", (n, n)), ("node_tokens", (n, nodes)),
        ("rank_master_lanes", (n, k)), ("node_master_lanes", (n, k)))}
    for s in range(n):
        idx = topk_idx[s]
        rank_idx = np.where(idx >= 0, idx // per_rank, -1)
        node_idx = np.where(idx >= 0, rank_idx // num_ranks_per_node, -1)
        for e in range(num_experts):
            out["expert_tokens"][s, e] = (idx == e).sum()
        for d in range(n):
            out["rank_tokens"][s, d] = (rank_idx == d).any(axis=1).sum()
        for b in range(nodes):
            out["node_tokens"][s, b] = (node_idx == b).any(axis=1).sum()
        for j in range(k):
            for owner, name in ((rank_idx, "rank_master_lanes"), (node_idx, "node_master_lanes")):
                above = (owner[:, j + 1:] == owner[:, j:j + 1]).any(axis=1)
                out[name][s, j] = ((owner[:, j] >= 0) & ~above).sum()
    return out
