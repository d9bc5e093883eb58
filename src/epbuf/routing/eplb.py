"""EPLB: logical routings mapped onto redundant physical experts; masking entries to -1."""

from __future__ import annotations

from ._base import _problem, _rng, numpy


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
