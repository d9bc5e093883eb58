"""Every allocation of pplx-kernels' ``AllToAll``: internode (NVSHMEM) and intranode (CUDA IPC).

Arguments follow ``AllToAll.internode`` / ``AllToAll.intranode`` (``PY:88-164``, ``PY`` =
``src/pplx_kernels/all_to_all.py @12cecfd``) in their order, without ``rank`` and
``group_name``, which no size reads. The functions return rows ``(name, kind, num_bytes,
used, formula, source)``: ``kind`` is ``"nvshmem"`` (``nvshmem_malloc``, symmetric),
``"peer"`` (one of the ``cudaMalloc`` buffers the intranode kernels share through CUDA
IPC) or ``"local"`` (``cudaMalloc``); ``used`` is what a BF16 combine touches (the combine
buffers are sized for float32, "to accommodate all possible data types", ``INTER:63-64``);
``formula`` is a zero-argument callable.

>>> rows = internode_allocations(128, 256, 8, 16, 1, 7168, 7168, 224)
>>> [(name, n) for name, _, n, _, _, _ in rows if name.startswith("x")]
[('xDispatchIn', 948224), ('xDispatchOut', 242745344), ('xCombineIn', 939524096), ('xCombineOut', 939524096)]
"""

from __future__ import annotations

from ...errors import InvalidArgumentError, Problem, check_int
from ...units import INT64_MAX, align, ceil_div, format_int
from .versions import INTER, INTRA, src

__all__ = ["per_token_bytes", "num_local_experts", "num_dp_groups", "internode_max_batch_tokens",
           "intranode_max_batch_tokens", "internode_allocations", "intranode_allocations",
           "intranode_buffer_sizes", "TOKEN_ALIGNMENT", "META_BYTES"]

TOKEN_ALIGNMENT = 16  # round_up(..., 16): "Pad to a 16-byte alignment to allow loads via int4" (INTRA:35-36)
META_BYTES = 4  # sizeof(uint32_t): the source token index after hidden and scales (BASE:34-35)
COMBINE_ELEMENT_BYTES = 4  # sizeof(float): combine buffers fit the widest expert output (INTER:63-68, INTRA:52)
BF16_BYTES = 2
#: The binding passes every argument as ``int64_t`` (``csrc/bindings/all_to_all_ops.cpp:54-63, 79-88``);
#: the constructor keeps ``worldSize`` and ``dpSize`` as ``unsigned`` and divides by both (``BASE:21-22``).
UINT32_MAX = (1 << 32) - 1
_WHY = "int64_t in the binding, csrc/bindings/all_to_all_ops.cpp:54-63 @12cecfd"


def _n(x: int) -> str:
    return format_int(x)


def _count(argument: str, value: object) -> int:
    """``value`` if it is an ``int`` in ``0..INT64_MAX``, else :class:`~epbuf.errors.InvalidArgumentError`."""
    return check_int(argument, value, 0, INT64_MAX, _WHY)


def _divisor(argument: str, value: object) -> int:
    """``world_size`` / ``dp_size``: ``1..UINT32_MAX`` (``unsigned``, and ``ceil_div`` divides by it)."""
    return check_int(argument, value, 1, UINT32_MAX,
                     "unsigned, a divisor (csrc/all_to_all/all_to_all.cpp:21-22 @12cecfd)")


def per_token_bytes(hidden_dim_bytes: int, hidden_dim_scale_bytes: int) -> int:
    """``perTokenBytes = round_up(hiddenDimBytes + hiddenDimScaleBytes + sizeof(uint32_t), 16)``
    (``BASE:34-35``, ``INTER:56-57``, ``INTRA:41-43``).

    >>> per_token_bytes(7168, 224)
    7408
    """
    _count("hidden_dim_bytes", hidden_dim_bytes)
    _count("hidden_dim_scale_bytes", hidden_dim_scale_bytes)
    return align(hidden_dim_bytes + hidden_dim_scale_bytes + META_BYTES, TOKEN_ALIGNMENT)


def num_local_experts(num_experts: int, world_size: int) -> int:
    """``numLocalExperts = ceil_div<uint32_t>(numExperts, worldSize)`` (``BASE:21``); the
    kernels divide without rounding (``numExperts / worldSize``). Zero (``num_experts`` 0, or a
    multiple of 2^32, which the ``uint32_t`` conversion wraps to 0) is refused: the constructor
    traps on ``PPLX_ASSERT(numLocalExperts != 0, "numLocalExperts is 0")`` (``BASE:37``)."""
    _count("num_experts", num_experts)
    _divisor("world_size", world_size)
    if num_experts % (1 << 32) == 0:
        raise InvalidArgumentError([Problem(
            "num_experts", num_experts, "numLocalExperts = ceil_div<uint32_t>(num_experts, world_size) is 0, where "
            "upstream traps (csrc/all_to_all/all_to_all.cpp:37 @12cecfd, \"numLocalExperts is 0\"); allowed >= 1")])
    return ceil_div(num_experts, world_size)


def num_dp_groups(world_size: int, dp_size: int) -> int:
    """``numDPGroups = ceil_div<uint32_t>(worldSize, dpSize)`` (``BASE:22``)."""
    _divisor("world_size", world_size)
    _divisor("dp_size", dp_size)
    return ceil_div(world_size, dp_size)


def internode_max_batch_tokens(max_num_tokens: int, num_experts: int, world_size: int, dp_size: int) -> int:
    """``maxBatchTokens = numLocalExperts x numDPGroups x maxNumTokens`` (``INTER:34``)."""
    _count("max_num_tokens", max_num_tokens)
    return num_local_experts(num_experts, world_size) * num_dp_groups(world_size, dp_size) * max_num_tokens


def intranode_max_batch_tokens(max_num_tokens: int, num_experts: int, world_size: int) -> int:
    """``maxBatchTokens = numLocalExperts x maxNumTokens x worldSize`` (``INTRA:129``)."""
    _count("max_num_tokens", max_num_tokens)
    return num_local_experts(num_experts, world_size) * max_num_tokens * world_size


def _arguments(max_num_tokens, num_experts, experts_per_token, world_size, dp_size, hidden_dim,
               hidden_dim_bytes, hidden_dim_scale_bytes) -> None:
    """The checks of ``AllToAll.internode`` / ``intranode``'s arguments, in their order: a plain
    ``int`` each, as the binding's ``int64_t`` takes it; ``world_size`` and ``dp_size`` at least 1."""
    _count("max_num_tokens", max_num_tokens)
    _count("num_experts", num_experts)
    _count("experts_per_token", experts_per_token)
    _divisor("world_size", world_size)
    _divisor("dp_size", dp_size)
    _count("hidden_dim", hidden_dim)
    _count("hidden_dim_bytes", hidden_dim_bytes)
    _count("hidden_dim_scale_bytes", hidden_dim_scale_bytes)


def internode_allocations(max_num_tokens: int, num_experts: int, experts_per_token: int, world_size: int,
                          dp_size: int, hidden_dim: int, hidden_dim_bytes: int, hidden_dim_scale_bytes: int) -> list[tuple]:
    """``AllToAllInterNode::AllToAllInterNode`` (``INTER:12-77``): every buffer, in order.
    ``experts_per_token`` sizes nothing (it only picks the launch grid)."""
    _arguments(max_num_tokens, num_experts, experts_per_token, world_size, dp_size, hidden_dim, hidden_dim_bytes,
               hidden_dim_scale_bytes)
    tokens, experts, hidden = max_num_tokens, num_experts, hidden_dim
    local = num_local_experts(experts, world_size)
    groups = num_dp_groups(world_size, dp_size)
    batch = local * groups * tokens
    ptb = per_token_bytes(hidden_dim_bytes, hidden_dim_scale_bytes)
    counts = local * groups
    # the texts are built only when a report asks (sweeps read the integers alone)
    def batch_text() -> str:
        return f"maxBatchTokens {_n(batch)} (local experts {local} x DP groups {groups} x max_num_tokens {_n(tokens)})"

    def ptb_text() -> str:
        return f"perTokenBytes {_n(ptb)} (round_up({_n(hidden_dim_bytes)} + {hidden_dim_scale_bytes} + 4, 16))"
    return [
        ("numTokensPerDP", "local", counts * 4, counts * 4, lambda: f"local experts {local} x DP groups {groups} x 4",
         src(INTER, "36")),
        ("numTokensBuffer", "nvshmem", counts * 8, counts * 8, lambda: f"8 x local experts {local} x DP groups {groups}",
         src(INTER, "38-40")),
        ("numDispatchRecvBuffer", "nvshmem", counts * 8, counts * 8,
         lambda: f"8 x local experts {local} x DP groups {groups}", src(INTER, "42-45")),
        ("combineSignalBuffer", "nvshmem", tokens * 8, tokens * 8, lambda: f"8 x max_num_tokens {_n(tokens)}",
         src(INTER, "47-49")),
        ("combineSyncBuffer", "nvshmem", world_size * 8, world_size * 8, lambda: f"8 x world_size {world_size}",
         src(INTER, "51-53")),
        ("xDispatchIn", "nvshmem", tokens * ptb, tokens * ptb, lambda: f"max_num_tokens {_n(tokens)} x {ptb_text()}",
         src(INTER, "56-59")),
        ("xDispatchOut", "nvshmem", batch * ptb, batch * ptb, lambda: f"{batch_text()} x {ptb_text()}", src(INTER, "60-61")),
        ("xCombineIn", "nvshmem", batch * hidden * COMBINE_ELEMENT_BYTES, batch * hidden * BF16_BYTES,
         lambda: f"{batch_text()} x hidden {_n(hidden)} x 4 (float; a BF16 combine uses x 2)", src(INTER, "63-66")),
        ("xCombineOut", "nvshmem", tokens * experts * hidden * COMBINE_ELEMENT_BYTES, tokens * experts * hidden * BF16_BYTES,
         lambda: f"max_num_tokens {_n(tokens)} x num_experts {experts} x hidden {_n(hidden)} x 4 (float; BF16 uses x 2)",
         src(INTER, "67-68")),
    ] + [
        (name, "local", batch * 4, batch * 4, lambda: f"{batch_text()} x 4 (uint32)", src(INTER, line))
        for name, line in (("sourceIndex", "71"), ("sourceExpert", "72"), ("sourceOffset", "73"),
                           ("sourceGroup", "74"), ("sourceToken", "75"))
    ] + [("tokenIndex", "local", 4, 4, lambda: "1 x 4 (uint32)", src(INTER, "76"))]


def intranode_buffer_sizes(max_num_tokens: int, num_experts: int, world_size: int, hidden_dim: int,
                           hidden_dim_bytes: int, hidden_dim_scale_bytes: int,
                           combine_element_bytes: int = COMBINE_ELEMENT_BYTES) -> tuple[int, int]:
    """``(dispatchBufferSize, combineBufferSize)`` of one intranode peer buffer (``INTRA:37-56``):
    16 bytes of sync flags, the per-expert counters rounded up to 16, then
    ``maxNumTokens x numLocalExperts`` token slots. ``bufferSize`` is their max (``INTRA:59``).

    >>> intranode_buffer_sizes(128, 256, 8, 7168, 7168, 224)
    (30343312, 117440656)
    """
    _count("max_num_tokens", max_num_tokens)
    _count("num_experts", num_experts)
    _divisor("world_size", world_size)
    _count("hidden_dim", hidden_dim)
    _count("hidden_dim_bytes", hidden_dim_bytes)
    _count("hidden_dim_scale_bytes", hidden_dim_scale_bytes)
    check_int("combine_element_bytes", combine_element_bytes, 1)
    local = num_local_experts(num_experts, world_size)
    head = 16 + align(local * 4, 16)
    dispatch = head + max_num_tokens * local * per_token_bytes(hidden_dim_bytes, hidden_dim_scale_bytes)
    combine = head + max_num_tokens * local * align(hidden_dim * combine_element_bytes, TOKEN_ALIGNMENT)
    return dispatch, combine


def intranode_allocations(max_num_tokens: int, num_experts: int, experts_per_token: int, world_size: int,
                          dp_size: int, hidden_dim: int, hidden_dim_bytes: int, hidden_dim_scale_bytes: int) -> list[tuple]:
    """``AllToAllIntraNode::AllToAllIntraNode`` (``INTRA:11-137``): the ``worldSize`` peer buffers
    (two rows, their dispatch and combine layouts: the buffer is the larger) then the local ones.
    ``experts_per_token`` and ``dp_size`` size nothing here."""
    _arguments(max_num_tokens, num_experts, experts_per_token, world_size, dp_size, hidden_dim, hidden_dim_bytes,
               hidden_dim_scale_bytes)
    tokens, experts, hidden, ranks = max_num_tokens, num_experts, hidden_dim, world_size
    local = num_local_experts(experts, ranks)
    dispatch, combine = intranode_buffer_sizes(tokens, experts, ranks, hidden, hidden_dim_bytes, hidden_dim_scale_bytes)
    _, combine_bf16 = intranode_buffer_sizes(tokens, experts, ranks, hidden, hidden_dim_bytes, hidden_dim_scale_bytes,
                                             BF16_BYTES)
    ptb = per_token_bytes(hidden_dim_bytes, hidden_dim_scale_bytes)
    batch = local * tokens * ranks
    head = f"16 + round_up(local experts {local} x 4, 16)"
    return [
        ("sendBuffers (dispatch layout)", "peer", ranks * dispatch, ranks * dispatch,
         lambda: f"world_size {ranks} x ({head} + max_num_tokens {_n(tokens)} x local experts {local} x perTokenBytes {_n(ptb)})",
         src(INTRA, "39-48,70-76")),
        ("sendBuffers (combine layout)", "peer", ranks * combine, ranks * combine_bf16,
         lambda: (f"world_size {ranks} x ({head} + max_num_tokens {_n(tokens)} x local experts {local} x "
                  f"round_up(hidden {_n(hidden)} x 4, 16)) (float; a BF16 combine uses x 2)"),
         src(INTRA, "50-56,70-76")),
        ("sendBuffersPtr", "local", ranks * 8, ranks * 8, lambda: f"world_size {ranks} x 8", src(INTRA, "63")),
        ("recvBuffersPtr", "local", ranks * 8, ranks * 8, lambda: f"world_size {ranks} x 8", src(INTRA, "64")),
        ("localRecvCountPtr", "local", tokens * 4, tokens * 4, lambda: f"max_num_tokens {_n(tokens)} x 4",
         src(INTRA, "100-101")),
        ("countBuffersPtr", "local", ranks * 8, ranks * 8, lambda: f"world_size {ranks} x 8", src(INTRA, "102")),
        ("tokenCount", "local", experts * 4, experts * 4, lambda: f"num_experts {experts} x 4", src(INTRA, "125")),
        ("numTokensPerRank", "local", local * ranks * 4, local * ranks * 4,
         lambda: f"local experts {local} x world_size {ranks} x 4", src(INTRA, "126")),
    ] + [
        (name, "local", batch * 4, batch * 4,
         lambda: f"maxBatchTokens {_n(batch)} (local experts {local} x max_num_tokens {_n(tokens)} x world_size {ranks}) x 4",
         src(INTRA, line))
        for name, line in (("sourceIndex", "130"), ("sourceExpert", "131"), ("sourceOffset", "132"),
                           ("sourceRank", "133"), ("sourceToken", "134"), ("sourceRoute", "135"))
    ] + [("tokenIndex", "local", 4, 4, lambda: "1 x 4 (uint32)", src(INTRA, "136"))]


