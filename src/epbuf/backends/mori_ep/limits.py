"""MORI-EP's limits, each one row ``(name, value, relation, bound, ok, source, enforced)``.

Defined once here; :func:`epbuf.backends.mori_ep.report.report` turns the rows into
``LimitCheck`` records and error findings, :func:`~epbuf.backends.mori_ep.summary.summarize`
reads the names of the broken ones. ``enforced``: ``host`` (a check that raises or fails
on the host), ``kernel`` (a device assertion: the JIT kernels are built with ``-O2`` and
no ``-DNDEBUG``, ``python/mori/jit/core.py:114-118``), ``assumed`` (nothing checks it; the
host ``assert`` in the handle constructor is compiled out of the Release build CMake
defaults to, ``CMakeLists.txt:11-16``).
"""

from __future__ import annotations

from .config import (BLOCKWISE_QUANT_TYPES, INTRANODE_KERNELS, KERNEL_TYPES, MAX_GPUS_PER_NODE, WARP_SIZE,
                     EpDispatchCombineConfig)
from .versions import ASYNC_LL, CMAKE, COMMON, CPP, INTER, INTRA, INTRA_LL, LAUNCH, PY, SHMEM_MEM, src

__all__ = ["limit_rows", "BLOCKWISE_KERNELS"]

#: Kernel types the Python launch path accepts for each blockwise combine (``PY:1485-1506``).
BLOCKWISE_KERNELS = {
    "fp8_blockwise": ("IntraNode", "IntraNodeLL", "AsyncLL"),
    "fp4_blockwise": ("IntraNode", "IntraNodeLL"),
}

_SRC_POW2 = (f"{src(CPP, '117')} assert(IsPowerOf2(gpuPerNode) && worldSize % gpuPerNode == 0), compiled out "
             f"of the default Release build ({CMAKE}:11-16)")
_SRC_INTRA = (f"{src(INTRA, '40,110-113')} __shared__ s_N/s_base/s_run[MAX_GPUS_PER_NODE = 8]; "
              f"{INTRA_LL}:44 kMaxGpusPerNode = 8")
_SRC_P2P = f"{src(INTRA, '110-113')}: intranode kernels address every peer directly (XGMI P2P), so all ranks share a node"
_SRC_INTER = f"{src(INTER, '31,67,140')} myNode = myPe / MAX_GPUS_PER_NODE (8), not gpuPerNode"
_SRC_TOPK = (f"{src(COMMON, '105')} assert(numExpertPerToken < warpSize); also {INTER}:74, {INTRA}:506, {ASYNC_LL}:76 "
             f"(warpSize 64 on gfx942/gfx950, 32 on gfx1250)")
_SRC_BLOCKWISE = (f"{src(PY, '1485-1506')} raises ValueError('... combine currently only supports ...'); "
                  f"the C++ launch path accepts IntraNode only ({LAUNCH}:547-550)")
_SRC_HEAP = (f"{src(SHMEM_MEM, '35-49')} AllocateStaticHeap returns nullptr when the VA manager has no block "
             f"left; MallocSymm's hipMemset then fails ({CPP}:198-199)")
_SRC_ARENA = f"{src(CPP, '228-233')} throw 'MallocSymm: cco arena exhausted'"


def limit_rows(config: EpDispatchCombineConfig, comm: str, shmem_mode: str, usage: int, capacity: int) -> tuple:
    """Every limit of ``config`` as rows. ``usage`` / ``capacity``: the symmetric bytes the
    handle takes from the static heap or CCO arena and that heap's or arena's size (unused
    in isolation mode, where every buffer is its own allocation)."""
    c = config
    ranks, per_node, topk, kernel = c.world_size, c.gpu_per_node, c.num_experts_per_token, c.kernel_type
    rows = [
        ("gpu_per_node power of two (gpu_per_node & (gpu_per_node - 1))", per_node & (per_node - 1), "==", 0,
         per_node & (per_node - 1) == 0, _SRC_POW2, "assumed"),
        ("world_size % gpu_per_node", ranks % per_node, "==", 0, ranks % per_node == 0, _SRC_POW2, "assumed"),
    ]
    if kernel in INTRANODE_KERNELS:
        rows.append((f"world_size ({kernel} kernels: MAX_GPUS_PER_NODE)", ranks, "<=", MAX_GPUS_PER_NODE,
                     ranks <= MAX_GPUS_PER_NODE, _SRC_INTRA, "assumed"))
        rows.append((f"world_size <= gpu_per_node ({kernel}: one node)", ranks, "<=", per_node, ranks <= per_node,
                     _SRC_P2P, "assumed"))
    if kernel == "InterNode":
        rows.append(("gpu_per_node (InterNode kernel divides ranks by MAX_GPUS_PER_NODE)", per_node, "==",
                     MAX_GPUS_PER_NODE, per_node == MAX_GPUS_PER_NODE, _SRC_INTER, "assumed"))
    rows.append(("num_experts_per_token < warpSize", topk, "<", WARP_SIZE, topk < WARP_SIZE, _SRC_TOPK, "kernel"))
    if c.quant_type in BLOCKWISE_QUANT_TYPES:
        allowed = BLOCKWISE_KERNELS[c.quant_type]
        index = KERNEL_TYPES.index(kernel)
        rows.append((f"kernel_type in {{{', '.join(allowed)}}} ({c.quant_type} combine)", index, "in",
                     max(KERNEL_TYPES.index(k) for k in allowed), kernel in allowed, _SRC_BLOCKWISE, "host"))
    if comm == "cco":
        rows.append(("CCO arena usage (bytes)", usage, "<=", capacity, usage <= capacity, _SRC_ARENA, "host"))
    elif shmem_mode == "static_heap":
        rows.append(("symmetric heap usage (bytes, MORI_SHMEM_HEAP_SIZE)", usage, "<=", capacity, usage <= capacity,
                     _SRC_HEAP, "host"))
    return tuple(rows)
