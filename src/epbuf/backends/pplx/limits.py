"""pplx-kernels' limits, each one row ``(name, value, relation, bound, ok, source, enforced)``.

Defined once here; :func:`epbuf.backends.pplx.report.report` turns the rows into
``LimitCheck`` records and error findings, ``summarize`` reads the names of the broken
ones. ``enforced``: ``host`` (a Python ``assert`` in ``AllToAll.internode/intranode`` or a
``PPLX_ASSERT`` in the constructor, which traps), ``kernel`` (the launch or a device
index), ``assumed`` (nothing checks it).
"""

from __future__ import annotations

from .versions import (BASE, INTER_COMBINE, INTER_DISPATCH, INTRA, INTRA_COMBINE, INTRA_DISPATCH, PY, src)

__all__ = ["limit_rows", "MAX_DEFAULT_DYNAMIC_SHARED_MEMORY", "UINT32_MAX"]

MAX_DEFAULT_DYNAMIC_SHARED_MEMORY = 48 * 1024  # a launch may ask for 48 KiB of dynamic shared memory without
# cudaFuncSetAttribute(MaxDynamicSharedMemorySize) opt-in, which pplx-kernels never calls
UINT32_MAX = (1 << 32) - 1

_SRC_DP_DIV = f"{src(PY, '102,141')} assert world_size % dp_size == 0"
_SRC_DP_GROUPS = f"{src(PY, '103,142')} assert world_size // dp_size > 1; {BASE}:38 PPLX_ASSERT(numDPGroups > 1)"
_SRC_HIDDEN16 = f"{src(BASE, '32')} PPLX_ASSERT(hiddenDimBytes % 16 == 0); also {INTER_COMBINE}:167, {INTRA_COMBINE}:208"
_SRC_SCALE16 = f"{src(BASE, '33')} PPLX_ASSERT(hiddenDimScaleBytes % 16 == 0)"
_SRC_SCALE_LE = f"{src(BASE, '39')} PPLX_ASSERT(hiddenDimScaleBytes <= hiddenDimBytes)"
_SRC_EXPERTS = (f"{src(BASE, '21')} numLocalExperts = ceil_div(numExperts, worldSize), but the kernels use "
                f"numExperts / worldSize ({INTER_DISPATCH}:56, {INTRA_DISPATCH}:58, {INTER_COMBINE}:43, {INTRA_COMBINE}:48)")
_SRC_LOCAL = (f"{src(BASE, '21,37')} numLocalExperts = ceil_div<uint32_t>(numExperts, worldSize); "
              f"PPLX_ASSERT(numLocalExperts != 0, \"numLocalExperts is 0\")")
_SRC_VEC8 = (f"{src(INTER_COMBINE, '110-133')} / {INTRA_COMBINE}:142-167: each thread reduces 8 consecutive "
             f"elements (VEC_SIZE = 8) up to j < hiddenDim, so a hidden size that is not a multiple of 8 reads and "
             f"writes past the token")
_SRC_SMEM_INTER = f"{src(INTER_DISPATCH, '277,324-351')} sharedMemorySend = sizeof(uint32_t) x numExperts, no opt-in"
_SRC_SMEM_INTRA = f"{src(INTRA_DISPATCH, '311-312')} sharedMemorySend = round_up(token bytes + 4, 16), no opt-in"
_SRC_LOC = f"{src(INTER_DISPATCH, '153-156')} const unsigned loc = group * maxNumTokens + index"
_SRC_COMBINE_INDEX = f"{src(INTER_COMBINE, '80-87')} const unsigned index = dstExpert * maxNumTokens + source"
_SRC_ONE_NODE = f"{src(INTRA, '70-88')} cudaIpcOpenMemHandle: every peer buffer is mapped over CUDA IPC, one node"


def limit_rows(kernel: str, max_num_tokens: int, num_experts: int, world_size: int, dp_size: int, hidden_dim: int,
               hidden_dim_bytes: int, hidden_dim_scale_bytes: int, ranks_per_node: int) -> tuple:
    """Every limit of an ``AllToAll.<kernel>`` with these arguments, as rows.

    Raises:
        InvalidArgumentError: a count that is not an ``int`` >= 0, or ``world_size`` /
            ``dp_size`` below 1 (upstream divides by both).
    """
    counts = (max_num_tokens, num_experts, hidden_dim, hidden_dim_bytes, hidden_dim_scale_bytes, ranks_per_node)
    if not (all(type(x) is int and x >= 0 for x in counts) and type(world_size) is int and type(dp_size) is int
            and world_size > 0 and dp_size > 0):  # sweeps call this per row: one pass on the good path
        from .sizes import _count, _divisor

        for name, value in zip(("max_num_tokens", "num_experts", "hidden_dim", "hidden_dim_bytes",
                                "hidden_dim_scale_bytes", "ranks_per_node"), counts):
            _count(name, value)
        _divisor("world_size", world_size)
        _divisor("dp_size", dp_size)
    groups = -(-world_size // dp_size)
    local = -(-(num_experts % (1 << 32)) // world_size)  # ceil_div<uint32_t>: numExperts taken mod 2^32
    rows = [
        ("numLocalExperts (ceil(num_experts / world_size))", local, ">=", 1, local >= 1, _SRC_LOCAL, "host"),
        ("world_size % dp_size", world_size % dp_size, "==", 0, world_size % dp_size == 0, _SRC_DP_DIV, "host"),
        ("DP groups (world_size / dp_size)", groups, ">=", 2, groups >= 2, _SRC_DP_GROUPS, "host"),
        ("hidden_dim_bytes % 16", hidden_dim_bytes % 16, "==", 0, hidden_dim_bytes % 16 == 0, _SRC_HIDDEN16, "host"),
        ("hidden_dim_scale_bytes % 16", hidden_dim_scale_bytes % 16, "==", 0, hidden_dim_scale_bytes % 16 == 0,
         _SRC_SCALE16, "host"),
        ("hidden_dim_scale_bytes <= hidden_dim_bytes", hidden_dim_scale_bytes, "<=", hidden_dim_bytes,
         hidden_dim_scale_bytes <= hidden_dim_bytes, _SRC_SCALE_LE, "host"),
        ("num_experts % world_size", num_experts % world_size, "==", 0, num_experts % world_size == 0, _SRC_EXPERTS,
         "assumed"),
        ("hidden_dim % 8 (combine VEC_SIZE)", hidden_dim % 8, "==", 0, hidden_dim % 8 == 0, _SRC_VEC8, "assumed"),
    ]
    if kernel == "internode":
        smem = 4 * num_experts
        rows += [
            ("dispatch dynamic shared memory (bytes)", smem, "<=", MAX_DEFAULT_DYNAMIC_SHARED_MEMORY,
             smem <= MAX_DEFAULT_DYNAMIC_SHARED_MEMORY, _SRC_SMEM_INTER, "kernel"),
            ("maxBatchTokens (uint32 slot index)", local * groups * max_num_tokens, "<=", UINT32_MAX,
             local * groups * max_num_tokens <= UINT32_MAX, _SRC_LOC, "kernel"),
            ("num_experts x max_num_tokens (uint32 combine slot index)", num_experts * max_num_tokens, "<=", UINT32_MAX,
             num_experts * max_num_tokens <= UINT32_MAX, _SRC_COMBINE_INDEX, "kernel"),
        ]
    else:
        smem = -(-(hidden_dim_bytes + hidden_dim_scale_bytes + 4) // 16) * 16
        rows += [
            ("dispatch dynamic shared memory (bytes)", smem, "<=", MAX_DEFAULT_DYNAMIC_SHARED_MEMORY,
             smem <= MAX_DEFAULT_DYNAMIC_SHARED_MEMORY, _SRC_SMEM_INTRA, "kernel"),
            ("world_size <= ranks per node (CUDA IPC)", world_size, "<=", ranks_per_node, world_size <= ranks_per_node,
             _SRC_ONE_NODE, "assumed"),
        ]
    return tuple(rows)


