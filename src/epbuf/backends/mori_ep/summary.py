"""MORI-EP's fast path for sweeps: :func:`summarize` gives the report's totals, binding allocation
and broken limits in one pass over the allocations, each an affine function of the token count
and the receive count solved once per shape from the same size functions the report calls."""

from __future__ import annotations

import operator
from functools import lru_cache

from ...errors import InvalidArgumentError
from ...report import Summary
from .config import EpDispatchCombineConfig
from .env import shmem_settings
from .handle import free_name, plan_config
from .limits import limit_rows
from .sizes import (HEAP_ALIGNMENT, INTERNAL_SYNC_NUM_BYTES, cco_arena_num_bytes, handle_allocations,
                    metadata_num_bytes)

__all__ = ["summarize"]


# The config fields besides the token count and the cap (world_size first).
_SHAPE_FIELDS = ("world_size", "hidden_dim", "scale_dim", "scale_type_size", "max_token_type_size",
                 "num_experts_per_rank", "num_experts_per_token", "kernel_type", "gpu_per_node", "num_qp_per_pe",
                 "quant_type")


_shape_key = operator.attrgetter(*_SHAPE_FIELDS)


@lru_cache(maxsize=4096)
def _affine_rows(key: tuple, scale_dim: int):
    """Every allocation as ``(name, symmetric, a, b, d)`` with ``bytes = a x T + b x Recv + d``
    (``T`` = tokens per rank, ``Recv`` = ``MaxNumTokensToRecv()``), for the config fields in
    ``key`` (:data:`_SHAPE_FIELDS`: all but the token count and the cap), or ``None``.

    Every size in :mod:`.sizes` is such a product (CPP:302-557); the coefficients are solved from
    three evaluations of :func:`handle_allocations` and checked against a fourth, so the sweep path
    reads the same functions as the report (a shape where they cannot be evaluated falls back)."""
    ranks = key[0]
    try:
        points = [handle_allocations(EpDispatchCombineConfig(**dict(zip(_SHAPE_FIELDS, key)), max_num_inp_token_per_rank=t,
                                                             max_total_recv_tokens=cap), scale_dim)
                  for t, cap in ((1, 0), (2, 0), (2, 1), (5, 2 * ranks))]
    except InvalidArgumentError:
        return None
    rows = []
    for (name, sym, s1, _, _), (_, _, s2, _, _), (_, _, s3, _, _), (_, _, s4, _, _) in zip(*points):
        a = s3 - s1  # T: 1 -> 2 at Recv = W
        b, rest = divmod(s2 - s3, ranks)  # Recv: W -> 2W at T = 2
        d = s1 - a - b * ranks
        if rest or s4 != 5 * a + 2 * ranks * b + d:
            return None
        rows.append((name, sym, a, b, d))
    return tuple(rows)


def summarize(plan) -> Summary:
    """:func:`report`'s totals, binding allocation and broken limits, without byte maps or findings,
    in one pass over the allocations (what sweeps call once per configuration)."""
    config, _ = plan_config(plan)
    settings = shmem_settings(plan)
    scale_dim = settings.blockwise_scale_dim
    affine = _affine_rows(_shape_key(config), scale_dim)
    if affine is None:  # bytes = 0 x T + 0 x Recv + the evaluated size
        affine = [(name, sym, 0, 0, n) for name, sym, n, _, _ in handle_allocations(config, scale_dim)]
    tokens, recv = config.max_num_inp_token_per_rank, config.max_num_tokens_to_recv()
    shmem = settings.comm == "shmem"
    alignment = HEAP_ALIGNMENT if (not shmem or settings.shmem_mode == "static_heap") else 1
    # the first largest region of each buffer, in report order, as Buffer.binding_region finds it
    best_sym, best_sym_n = ("shmem internal sync (shmem init)", INTERNAL_SYNC_NUM_BYTES) if shmem else ("", -1)
    best_local, best_local_n = "", -1
    usage = INTERNAL_SYNC_NUM_BYTES if shmem else 0
    local = count = 0
    for name, sym, a, b, d in affine:
        n = a * tokens + b * recv + d
        if sym:
            n = (n + alignment - 1) & -alignment
            usage += n
            count += 1
            if n > best_sym_n:
                best_sym, best_sym_n = name, n
        else:
            local += n
            if n > best_local_n:
                best_local, best_local_n = name, n
    metadata = count * metadata_num_bytes(config.world_size, settings.comm)
    local += metadata
    if metadata > best_local_n:
        best_local = "symmetric-buffer metadata (hipMalloc)"
    if not shmem:
        capacity = cco_arena_num_bytes(config)
    else:
        capacity = settings.heap_num_bytes if settings.shmem_mode == "static_heap" else 0
    if capacity and capacity - usage > best_sym_n:
        best_sym = free_name(settings)
    reserved = max(usage, capacity)  # the heap or arena is allocated whole
    broken = tuple(row[0] for row in limit_rows(config, settings.comm, settings.shmem_mode, usage, capacity)
                   if not row[4])
    return Summary(num_bytes=reserved + local, num_bytes_needed=usage + local,
                   binding=best_sym if reserved >= local else best_local, broken=broken)
