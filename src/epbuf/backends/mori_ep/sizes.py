"""Every allocation of MORI-EP's ``EpDispatchCombineHandle``, in the order its constructor makes them.

The constructor (``CPP:112-175``, ``CPP`` = ``src/ops/dispatch_combine/dispatch_combine.cpp
@624002c``) calls ``InitializeShmemBuf``, ``InitializeTokenNumSignalBuf``,
``InitializeOrderMapBuf`` and ``InitializeBarrier``; each buffer is either *symmetric*
(``MallocSymm``: carved from the MORI-shmem heap, or from the CCO arena with
``MORI_EP_COMM=cco``) or *local* (``hipMalloc``). The Python ``EpDispatchCombineOp`` adds
one tensor. The functions here are named after those methods and return rows
``(name, symmetric, num_bytes, formula, source)`` — ``name`` is the upstream member,
``formula`` a zero-argument callable giving the arithmetic with the numbers filled in
(built only when a report asks, so sweeps pay for the integers alone).

>>> from .config import EpDispatchCombineConfig
>>> c = EpDispatchCombineConfig(world_size=8, hidden_dim=7168, scale_dim=56, scale_type_size=4,
...     max_token_type_size=2, max_num_inp_token_per_rank=4096, num_experts_per_rank=32,
...     num_experts_per_token=8)
>>> [(name, n) for name, _, n, _, _ in initialize_shmem_buf(c, 56)][:3]
[('combineInp', 479330304), ('dispatchOut', 469762048), ('combineOut', 58720256)]
>>> static_heap_usage([n for _, sym, n, _, _ in handle_allocations(c, 56) if sym])
1031965440
"""

from __future__ import annotations

from ...errors import InvalidArgumentError, Problem, check_int
from ...units import INT32_MAX, align, format_int
from .._cstruct import struct_size
from .config import (BLOCKWISE_QUANT_TYPES, BLOCKWISE_SCALE_TYPE_SIZE, INDEX_BYTES, INTRANODE_KERNELS,
                     SRC_TOKEN_ID_BYTES, V1_KERNELS, WEIGHT_BYTES, EpDispatchCombineConfig)
from .versions import CPP, PY, src

__all__ = [
    "HEAP_ALIGNMENT", "INTERNAL_SYNC_NUM_BYTES", "CCO_ALIGNMENT", "CCO_ARENA_SLACK_NUM_BYTES",
    "SYMM_MEM_OBJ_NUM_BYTES", "initialize_shmem_buf", "initialize_token_num_signal_buf",
    "initialize_order_map_buf", "initialize_barrier", "op_buffers", "handle_allocations",
    "static_heap_usage", "cco_arena_num_bytes", "cco_arena_usage", "metadata_num_bytes",
    "first_overflow",
]

HEAP_ALIGNMENT = 256  # AllocateStaticHeap: VA blocks of align(size, 256) at 256-byte addresses (SHMEM_MEM:37-41)
INTERNAL_SYNC_NUM_BYTES = 128 * 8  # MORI_INTERNAL_SYNC_SIZE = 128 x sizeof(uint64_t), carved first at shmem init (SHMEM_INIT:505-519, 604)
CCO_ALIGNMENT = 256  # kAlign of the CCO bump allocator (CPP:228-229)
CCO_ARENA_SLACK_NUM_BYTES = 256 << 20  # the arena's fixed 256 MiB on top of 6 receive buffers (CPP:212-214)

# sizeof(mori::application::SymmMemObj) (DEVTYPES:98-129): the device copy every symmetric
# buffer gets, laid out member by member (pointers, size_t: 8 B; uint32_t, int: 4 B).
SYMM_MEM_OBJ_NUM_BYTES = struct_size([
    ("localPtr", 8, 8), ("peerPtrs", 8, 8), ("p2pPeerPtrs", 8, 8), ("size", 8, 8), ("lkey", 4, 4),
    ("peerRkeys", 8, 8), ("vmmLkeyInfo", 8, 8), ("vmmRkeyInfo", 8, 8), ("vmmNumChunks", 8, 8),
    ("worldSize", 4, 4), ("ipcMemHandles", 8, 8), ("deviceHandles_d", 8, 8), ("signalPtrs", 8, 8),
    ("sdmaNumQueue", 4, 4), ("expectSignalsPtr", 8, 8), ("peerSignalPtrs", 8, 8), ("peerSignalPtrsHost", 8, 8),
])


def _n(x: int) -> str:
    return format_int(x)


def initialize_shmem_buf(config: EpDispatchCombineConfig, fp8_blockwise_combine_scale_dim: int) -> list[tuple]:
    """``InitializeShmemBuf`` (``CPP:302-394``): the token buffers of the kernel type, then
    weights, scales and indices. ``fp8_blockwise_combine_scale_dim`` is the handle's
    ``fp8BlockwiseCombineScaleDim`` (``MORI_FP8_COMBINE_SCALE_DIM``, default 56; used only
    with a blockwise ``quant_type``, ``CPP:127-136``)."""
    _check_config(config)
    check_int("fp8_blockwise_combine_scale_dim", fp8_blockwise_combine_scale_dim, 0, INT32_MAX)
    c = config
    tokens, hidden, tts, topk = c.max_num_inp_token_per_rank, c.hidden_dim, c.max_token_type_size, c.num_experts_per_token
    recv, send = c.max_num_tokens_to_recv(), c.max_num_tokens_to_send()
    xfer = c.max_xfer_bytes_per_token()
    blockwise = c.quant_type in BLOCKWISE_QUANT_TYPES
    bs_dim = fp8_blockwise_combine_scale_dim if blockwise else 0
    # the texts are built only when a report asks (sweeps read the integers alone)
    def recv_text() -> str:
        return (f"MaxNumTokensToRecv {_n(recv)}" if recv == send
                else f"MaxNumTokensToRecv {_n(recv)} (capped; uncapped {_n(send)})")

    def xfer_text() -> str:
        return (f"MaxXferBytesPerToken {_n(xfer)} (hidden {_n(hidden)} x {tts} + idx {4 * topk} + weights "
                f"{4 * topk} + src id 4 + scales {c.scale_bytes()})")

    combine_out = tokens * hidden * tts  # CPP:303-304
    dispatch_out = recv * hidden * tts  # CPP:305-306
    staging = recv * xfer  # CPP:307-308
    staging_src = src(CPP, "307-308")
    staging_text = lambda: f"{recv_text()} x {xfer_text()}"  # noqa: E731
    if c.kernel_type == "IntraNode" and blockwise:  # CPP:309-319
        block_scale_bytes = bs_dim * BLOCKWISE_SCALE_TYPE_SIZE if bs_dim > 0 else 0
        region = c.combine_token_region_bytes()
        staging = recv * (region + c.index_bytes() + c.weight_bytes() + SRC_TOKEN_ID_BYTES + block_scale_bytes)
        staging_src = src(CPP, "309-319")
        staging_text = lambda: (f"{recv_text()} x (CombineTokenRegionBytes {_n(region)} + idx {4 * topk} + weights "  # noqa: E731
                                f"{4 * topk} + src id 4 + blockwise scales {bs_dim} x 4)")
    rows = []
    out_rows = [
        ("dispatchOut", True, dispatch_out, lambda: f"{recv_text()} x hidden {_n(hidden)} x max_token_type_size {tts}",
         src(CPP, "305-306")),
        ("combineOut", True, combine_out, lambda: f"max_num_inp_token_per_rank {_n(tokens)} x hidden {_n(hidden)} "
                                                  f"x max_token_type_size {tts} (not capped)", src(CPP, "303-304")),
    ]
    if c.kernel_type in INTRANODE_KERNELS:  # CPP:321-325
        rows.append(("combineInp", True, staging, staging_text, staging_src))
        rows += out_rows
    elif c.kernel_type in V1_KERNELS:  # CPP:326-341
        nodes = c.num_nodes
        rows.append(("dispatchInp", True, nodes * tokens * xfer,
                     lambda: f"nodes {nodes} x max_num_inp_token_per_rank {_n(tokens)} x {xfer_text()} (not capped)",
                     src(CPP, "330-331,336")))
        rows.append(("combineInp", True, staging, staging_text, staging_src))
        rows.append(("staging", True, 2 * nodes * tokens * xfer,
                     lambda: f"2 x nodes {nodes} x max_num_inp_token_per_rank {_n(tokens)} x {xfer_text()} (not capped)",
                     src(CPP, "332-333,338")))
        rows += out_rows
        rows.append(("dispatchStaging", True, tokens * xfer,
                     lambda: f"max_num_inp_token_per_rank {_n(tokens)} x {xfer_text()} (not capped)",
                     src(CPP, "334-335,341")))
    else:  # InterNode, AsyncLL: "no overflow protection ... allocate to max size" (CPP:342-354)
        full = send * xfer
        for name in ("dispatchInp", "combineInp", "staging"):
            rows.append((name, True, full, lambda: f"MaxNumTokensToSend {_n(send)} x {xfer_text()} (not capped)",
                         src(CPP, "347-351")))
        rows += out_rows

    weights = recv * topk * WEIGHT_BYTES  # CPP:356-357
    for name in ("shmemInpWeightsMemObj", "shmemDispatchOutWeightsMemObj", "shmemCombineOutWeightsMemObj"):
        rows.append((name, True, weights, lambda: f"{recv_text()} x topk {topk} x 4 (float)", src(CPP, "356-360")))
    user_scale = recv * c.scale_dim * c.scale_type_size if c.scale_dim > 0 and c.scale_type_size > 0 else 0  # CPP:362-366
    block_scale = recv * bs_dim * BLOCKWISE_SCALE_TYPE_SIZE if blockwise and bs_dim > 0 else 0  # CPP:367-371
    inp_scale = max(user_scale, block_scale)  # CPP:372
    if inp_scale > 0:
        if block_scale > user_scale:
            text = lambda: (f"max(user scales {_n(user_scale)}, blockwise combine scales {recv_text()} x "  # noqa: E731
                            f"scale_dim {bs_dim} x 4)")
        else:
            text = lambda: f"{recv_text()} x scale_dim {c.scale_dim} x scale_type_size {c.scale_type_size}"  # noqa: E731
        rows.append(("shmemInpScalesMemObj", True, inp_scale, text, src(CPP, "362-375")))
    if user_scale > 0:
        rows.append(("shmemOutScalesMemObj", True, user_scale,
                     lambda: f"{recv_text()} x scale_dim {c.scale_dim} x scale_type_size {c.scale_type_size}",
                     src(CPP, "362-366,376-378")))
    indices = recv * topk * INDEX_BYTES  # CPP:380-381
    for name in ("shmemInpIndicesMemObj", "shmemOutIndicesMemObj"):
        rows.append((name, True, indices, lambda: f"{recv_text()} x topk {topk} x 4 (index_t)", src(CPP, "380-383")))
    return rows


def initialize_token_num_signal_buf(config: EpDispatchCombineConfig) -> list[tuple]:
    """``InitializeTokenNumSignalBuf`` (``CPP:432-444``)."""
    _check_config(config)
    c = config
    ranks, qp, nodes = c.world_size, c.num_qp_per_pe, c.num_nodes
    signal = ranks * INDEX_BYTES * 2 * qp  # CPP:433
    return [
        ("recvTokenNumMemObj", True, signal, lambda: f"ranks {ranks} x 4 x 2 x num_qp_per_pe {qp}", src(CPP, "433-434")),
        ("sendTokenNumMemObj", True, signal, lambda: f"ranks {ranks} x 4 x 2 x num_qp_per_pe {qp}", src(CPP, "433,435")),
        ("sendAtomicSignalMemObj", True, ranks * 2 * 8 * 2, lambda: f"(ranks {ranks} x 2) x 8 x 2", src(CPP, "436-437")),
        ("totalRecvTokenNum", False, INDEX_BYTES, lambda: "sizeof(index_t)", src(CPP, "439-440")),
        ("nodeRecvTokenNumMemObj", True, nodes * 8, lambda: f"nodes {nodes} x 8 (uint64)", src(CPP, "442-443")),
    ]


def initialize_order_map_buf(config: EpDispatchCombineConfig) -> list[tuple]:
    """``InitializeOrderMapBuf`` (``CPP:454-511``); ``ENABLE_STANDARD_MOE_ADAPT`` buffers are
    compiled out by default (``CMakeLists.txt:66``)."""
    _check_config(config)
    c = config
    ranks, nodes, tokens, topk = c.world_size, c.num_nodes, c.max_num_inp_token_per_rank, c.num_experts_per_token
    send, experts = c.max_num_tokens_to_send(), c.num_experts_per_rank
    out = send * experts  # maxNumOutToken (CPP:455-456)
    out_text = lambda: f"MaxNumTokensToSend {_n(send)} x experts per rank {experts} x 4 (index_t)"  # noqa: E731
    rows = [(name, False, out * INDEX_BYTES, out_text, src(CPP, lines)) for name, lines in (
        ("dispReceiverIdxMap", "457-458"), ("dispSenderIdxMap", "460-461"),
        ("destPeTokenIdxMap", "463-464"), ("srcPeTokenIdxMap", "466-467"))]
    rows += [
        ("destPeTokenCounter", False, ranks * INDEX_BYTES, lambda: f"ranks {ranks} x 4", src(CPP, "469-470")),
        ("destNodeTokenCounter", False, nodes * INDEX_BYTES, lambda: f"nodes {nodes} x 4", src(CPP, "472-475")),
        ("localPeTokenCounter", False, ranks * INDEX_BYTES, lambda: f"ranks {ranks} x 4", src(CPP, "477-478")),
        ("dispTokOffsetMemObj", True, INDEX_BYTES, lambda: "sizeof(index_t)", src(CPP, "480")),
        ("dispTokIdToSrcTokIdMemObj", True, out * INDEX_BYTES, out_text, src(CPP, "481")),
        ("dispDestTokIdMap", False, out * INDEX_BYTES, out_text, src(CPP, "483-484")),
        ("interNodeDispDestTokIdMap", False, nodes * tokens * topk * INDEX_BYTES,
         lambda: f"nodes {nodes} x max_num_inp_token_per_rank {_n(tokens)} x topk {topk} x 4", src(CPP, "486-490")),
        ("blockFlagCounter", False, nodes * INDEX_BYTES, lambda: f"nodes {nodes} x 4", src(CPP, "492-495")),
        ("interNodeDispSendMap", False, nodes * tokens * INDEX_BYTES,
         lambda: f"nodes {nodes} x max_num_inp_token_per_rank {_n(tokens)} x 4", src(CPP, "497-500")),
    ]
    return rows


def initialize_barrier(config: EpDispatchCombineConfig) -> list[tuple]:
    """``InitializeBarrier`` (``CPP:533-557``)."""
    _check_config(config)
    c = config
    ranks, nodes, tokens = c.world_size, c.num_nodes, c.max_num_inp_token_per_rank
    barrier = ranks * 4  # barrierSize = worldSize x sizeof(uint32_t) (CPP:534)
    chunk_flags = nodes * tokens * 8  # CPP:548-549
    return [
        ("dispatchGridBarrier", False, barrier, lambda: f"ranks {ranks} x 4 (uint32)", src(CPP, "534-536")),
        ("combineGridBarrier", False, barrier, lambda: f"ranks {ranks} x 4 (uint32)", src(CPP, "534,537-538")),
        ("crossDeviceBarrierFlag", False, 8, lambda: "sizeof(uint64_t)", src(CPP, "539")),
        ("crossDeviceBarrierMemObj", True, barrier * 2 * 8, lambda: f"ranks {ranks} x 4 x 2 x 8", src(CPP, "545-546")),
        ("interNodeChunkFlagMemObj", True, chunk_flags,
         lambda: f"nodes {nodes} x max_num_inp_token_per_rank {_n(tokens)} x 8", src(CPP, "548-550")),
        ("interNodeChunkFlagCombine", False, chunk_flags,
         lambda: f"nodes {nodes} x max_num_inp_token_per_rank {_n(tokens)} x 8", src(CPP, "552-553")),
        ("interNodeBlocksBarrier", False, 4 * INDEX_BYTES, lambda: "4 x sizeof(index_t)", src(CPP, "555-556")),
    ]


def op_buffers(config: EpDispatchCombineConfig) -> list[tuple]:
    """What the Python ``EpDispatchCombineOp`` allocates beside the handle: ``local_expert_count``,
    ``num_experts_per_rank`` int32 (``PY:514-516``; PyTorch's caching allocator serves it)."""
    experts = config.num_experts_per_rank
    return [("local_expert_count (torch)", False, experts * 4, lambda: f"experts per rank {experts} x 4 (int32)",
             src(PY, "514-516"))]


def _check_config(config: object) -> None:
    """An :class:`EpDispatchCombineConfig` (whose constructor checked every field), else one line."""
    if not isinstance(config, EpDispatchCombineConfig):
        raise InvalidArgumentError([Problem("config", config, "must be an EpDispatchCombineConfig")])


def handle_allocations(config: EpDispatchCombineConfig, fp8_blockwise_combine_scale_dim: int) -> list[tuple]:
    """Every allocation of ``EpDispatchCombineOp(config)``, in the order the constructor makes
    them (``CPP:166-169``), then the Python op's tensor."""
    return (initialize_shmem_buf(config, fp8_blockwise_combine_scale_dim) + initialize_token_num_signal_buf(config)
            + initialize_order_map_buf(config) + initialize_barrier(config) + op_buffers(config))


def static_heap_usage(symmetric_sizes: list[int]) -> int:
    """Bytes of the MORI-shmem static heap the buffers take: the 1,024-byte internal sync
    buffer carved at shmem init, then every symmetric buffer rounded up to 256 bytes and
    placed first-fit at a 256-byte boundary (``SHMEM_MEM:35-41``, ``VA:55-197``; with no
    frees in between, first-fit packs them end to end)."""
    return INTERNAL_SYNC_NUM_BYTES + sum((n + HEAP_ALIGNMENT - 1) & -HEAP_ALIGNMENT for n in symmetric_sizes)


def cco_arena_num_bytes(config: EpDispatchCombineConfig) -> int:
    """The CCO arena (``MORI_EP_COMM=cco``): ``6 x MaxNumTokensToRecv() x hiddenDim x
    maxTokenTypeSize + 256 MiB``, registered whole on the first ``MallocSymm`` (``CPP:211-226``).
    It is sized from the *capped* receive count."""
    _check_config(config)
    return (6 * config.max_num_tokens_to_recv() * config.hidden_dim * config.max_token_type_size
            + CCO_ARENA_SLACK_NUM_BYTES)


def cco_arena_usage(symmetric_sizes: list[int]) -> int:
    """Bytes the bump allocator takes from the arena: every buffer rounded up to 256 (``CPP:228-235``)."""
    return sum((n + CCO_ALIGNMENT - 1) & -CCO_ALIGNMENT for n in symmetric_sizes)


def metadata_num_bytes(world_size: int, comm: str) -> int:
    """Device bytes ``hipMalloc``'d for one symmetric buffer's bookkeeping: with MORI-shmem, the
    device ``SymmMemObj`` and its ``peerPtrs``, ``p2pPeerPtrs`` (8 B per rank) and ``peerRkeys``
    (4 B per rank) (``SYMM:454-466`` static heap, ``SYMM:213-225`` isolation); with CCO, the
    peer table (8 B per rank) and the ``SymmMemObj`` (``CPP:242-255``)."""
    check_int("world_size", world_size, 1, INT32_MAX)
    if comm not in ("shmem", "cco"):
        raise InvalidArgumentError([Problem("comm", comm, "MORI_EP_COMM is 'shmem' or 'cco'")])
    if comm == "cco":
        return world_size * 8 + SYMM_MEM_OBJ_NUM_BYTES
    return SYMM_MEM_OBJ_NUM_BYTES + world_size * (8 + 8 + 4)


def first_overflow(names_and_sizes: list[tuple[str, int]], capacity: int, used: int, alignment: int) -> str | None:
    """The first buffer, in allocation order, that no longer fits ``capacity`` when ``used``
    bytes are already taken and each buffer takes ``align(size, alignment)``."""
    for name, num_bytes in names_and_sizes:
        used += align(num_bytes, alignment)
        if used > capacity:
            return name
    return None

