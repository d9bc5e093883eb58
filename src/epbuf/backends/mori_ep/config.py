"""``EpDispatchCombineConfig``: the inputs of MORI-EP's ``EpDispatchCombineHandle``, and the
token counts its buffers are sized from.

Fields and methods follow the upstream struct (``HDR:129-210``, ``HDR`` =
``include/mori/ops/dispatch_combine/dispatch_combine.hpp @624002c``) and the Python
dataclass that fills it (``python/mori/ops/dispatch_combine.py:215-273``), in the
Python field order, without the launch-only fields (``rank``, ``warp_num_per_block``,
``block_num``, ``rdma_block_num``, ``use_external_inp_buf``) that no allocation reads.

>>> c = EpDispatchCombineConfig(world_size=8, hidden_dim=7168, scale_dim=56, scale_type_size=4,
...     max_token_type_size=2, max_num_inp_token_per_rank=4096, num_experts_per_rank=32,
...     num_experts_per_token=8)
>>> c.max_num_tokens_to_send(), c.max_num_tokens_to_recv(), c.max_xfer_bytes_per_token()
(32768, 32768, 14628)
>>> handle_config(c.replace(max_total_recv_tokens=10000)).max_num_tokens_to_recv()
10000
"""

from __future__ import annotations

from ..._record import Record
from ...errors import Checker
from ...units import INT32_MAX, ceil_div
from .versions import CPP, HDR, PY, src

__all__ = [
    "KERNEL_TYPES", "QUANT_TYPES", "BLOCKWISE_QUANT_TYPES", "INTRANODE_KERNELS", "V1_KERNELS",
    "INDEX_BYTES", "WEIGHT_BYTES", "SRC_TOKEN_ID_BYTES", "MAX_GPUS_PER_NODE", "WARP_SIZE",
    "DEFAULT_BLOCKWISE_SCALE_DIM", "BLOCKWISE_SCALE_TYPE_SIZE",
    "EpDispatchCombineConfig", "handle_config", "kernel_type_name", "quant_type_name",
]

#: ``enum KernelType`` in value order (``HDR:56-63``).
KERNEL_TYPES = ("IntraNode", "InterNode", "InterNodeV1", "InterNodeV1LL", "AsyncLL", "IntraNodeLL")
#: ``quant_type`` strings of the Python config (``PY:142-149``), in ``enum class QuantType`` order (``HDR:64``).
QUANT_TYPES = ("none", "fp8_direct_cast", "fp8_blockwise", "fp4_blockwise")
BLOCKWISE_QUANT_TYPES = ("fp8_blockwise", "fp4_blockwise")  # IsBlockwiseCombineQuant (HDR:69-71)
INTRANODE_KERNELS = ("IntraNode", "IntraNodeLL")  # ShmemBufsIntraNode (HDR:216-221)
V1_KERNELS = ("InterNodeV1", "InterNodeV1LL")  # ShmemBufsInterNodeV1 (HDR:223-232)

INDEX_BYTES = 4  # sizeof(index_t), index_t = int32_t (HDR:107)
WEIGHT_BYTES = 4  # sizeof(float) (HDR:191-193)
SRC_TOKEN_ID_BYTES = 4  # SrcTokenIdBytes() = sizeof(index_t) (HDR:194)
MAX_GPUS_PER_NODE = 8  # #define MAX_GPUS_PER_NODE 8 (intranode.hpp:40, internode.hpp:31); kMaxGpusPerNode (intranode_ll.hpp:44)
WARP_SIZE = 64  # wavefront of gfx942 (MI300X, MI325X) and gfx950 (MI355X); gfx1250 is wave32 (PY:34-41)
DEFAULT_BLOCKWISE_SCALE_DIM = 56  # kDefaultFp8BlockwiseScaleDim (CPP:48), override MORI_FP8_COMBINE_SCALE_DIM (CPP:49)
BLOCKWISE_SCALE_TYPE_SIZE = 4  # fp8BlockwiseCombineScaleTypeSize = sizeof(float) (CPP:130)


def kernel_type_name(name: object) -> str | None:
    """The upstream spelling of a kernel type name (case-insensitive), or ``None`` when unknown."""
    if isinstance(name, str):
        for k in KERNEL_TYPES:
            if k.lower() == name.lower():
                return k
    return None


def quant_type_name(name: object) -> str | None:
    """The upstream ``quant_type`` string, normalized as ``_normalize_quant_type`` does
    (``strip().lower()``, ``PY:173-182``), or ``None`` when unknown."""
    if isinstance(name, str) and name.strip().lower() in QUANT_TYPES:
        return name.strip().lower()
    return None


class EpDispatchCombineConfig(Record):
    """The size-relevant fields of ``EpDispatchCombineConfig`` (``HDR:129-152``).

    Attributes:
        world_size: ranks in the EP group (``worldSize``).
        hidden_dim: elements per token (``hiddenDim``).
        scale_dim: dispatch scale factors per token (``scaleDim``).
        scale_type_size: bytes per scale factor (``scaleTypeSize``).
        max_token_type_size: bytes of the widest token element the buffers hold (``maxTokenTypeSize``).
        max_num_inp_token_per_rank: tokens one rank dispatches per call (``maxNumInpTokenPerRank``).
        num_experts_per_rank: local experts (``numExpertPerRank``).
        num_experts_per_token: top-k (``numExpertPerToken``).
        max_total_recv_tokens: receive cap, 0 = none (``maxTotalRecvTokens``).
        kernel_type: one of :data:`KERNEL_TYPES`.
        gpu_per_node: ranks per node (``gpuPerNode``).
        num_qp_per_pe: queue pairs per peer (``numQpPerPe``; the handle lowers it to the shmem
            context's count, ``CPP:118-125``).
        quant_type: one of :data:`QUANT_TYPES`.

    Raises:
        InvalidArgumentError: a value the C++ ``int`` fields cannot hold, an unknown kernel or
            quant type, or ``world_size x max_num_inp_token_per_rank`` beyond int32
            (``MaxNumTokensToSend()`` is an ``int`` product, ``HDR:156-158``).
    """

    world_size: int
    hidden_dim: int
    scale_dim: int
    scale_type_size: int
    max_token_type_size: int
    max_num_inp_token_per_rank: int
    num_experts_per_rank: int
    num_experts_per_token: int
    max_total_recv_tokens: int = 0
    kernel_type: str = "IntraNode"
    gpu_per_node: int = 8
    num_qp_per_pe: int = 1
    quant_type: str = "none"

    def __post_init__(self) -> None:
        ints = (self.world_size, self.hidden_dim, self.scale_dim, self.scale_type_size, self.max_token_type_size,
                self.max_num_inp_token_per_rank, self.num_experts_per_rank, self.num_experts_per_token,
                self.max_total_recv_tokens, self.gpu_per_node, self.num_qp_per_pe)
        if (all(type(x) is int and 0 <= x <= INT32_MAX for x in ints) and 0 not in (
                self.world_size, self.hidden_dim, self.max_token_type_size, self.max_num_inp_token_per_rank,
                self.num_experts_per_rank, self.num_experts_per_token, self.gpu_per_node, self.num_qp_per_pe)
                and self.world_size * self.max_num_inp_token_per_rank + self.world_size <= INT32_MAX
                and self.kernel_type in KERNEL_TYPES and self.quant_type in QUANT_TYPES):
            return  # the common case, checked in one pass; the checks below name every problem
        c = Checker()
        ok = all((
            c.int_range("num_ranks", self.world_size, 1, INT32_MAX, "world_size is an int"),
            c.int_range("num_max_tokens_per_rank", self.max_num_inp_token_per_rank, 1, INT32_MAX,
                        "max_num_inp_token_per_rank is an int"),
        ))
        c.int_range("hidden", self.hidden_dim, 1, INT32_MAX, "hidden_dim is an int")
        c.int_range("scale_dim", self.scale_dim, 0, INT32_MAX)
        c.int_range("scale_type_size", self.scale_type_size, 0, INT32_MAX)
        c.int_range("max_token_type_size", self.max_token_type_size, 1, INT32_MAX)
        c.int_range("num_experts_per_rank", self.num_experts_per_rank, 1, INT32_MAX)
        c.int_range("num_topk", self.num_experts_per_token, 1, INT32_MAX,
                    f"MORI-EP needs num_experts_per_token >= 1: a 0-byte symmetric buffer is refused "
                    f"(ShmemExtMallocWithFlags(0) returns nullptr, {src(CPP, '198-201')})")
        c.int_range("max_total_recv_tokens", self.max_total_recv_tokens, 0, INT32_MAX, "0 means no cap")
        c.int_range("num_ranks_per_node", self.gpu_per_node, 1, INT32_MAX, "gpu_per_node is an int")
        c.int_range("num_qp_per_pe", self.num_qp_per_pe, 1, INT32_MAX)
        if self.kernel_type not in KERNEL_TYPES:
            c.add("kernel_type", self.kernel_type, f"a MORI-EP KernelType: {', '.join(KERNEL_TYPES)} ({src(HDR, '56-63')})")
        if self.quant_type not in QUANT_TYPES:
            c.add("quant_type", self.quant_type, f"one of {', '.join(QUANT_TYPES)} ({src(PY, '142-149')})")
        if ok:
            send = self.world_size * self.max_num_inp_token_per_rank
            if send > INT32_MAX:
                c.add("num_max_tokens_per_rank", self.max_num_inp_token_per_rank,
                      f"world_size x max_num_inp_token_per_rank = {send:,} overflows int32 "
                      f"(MaxNumTokensToSend() is an int product, {src(HDR, '156-158')}); allowed up to "
                      f"{INT32_MAX // self.world_size:,} for {self.world_size} ranks")
            elif 0 < min(self.max_total_recv_tokens, send) and min(self.max_total_recv_tokens, send) + self.world_size - 1 > INT32_MAX:
                c.add("max_total_recv_tokens", self.max_total_recv_tokens,
                      f"(max_total_recv_tokens + world_size - 1) overflows int32 ({src(HDR, '160-166')})")
        c.raise_if_any()

    # --- token counts (HDR:154-170) -------------------------------------------------------
    def max_num_tokens_to_send_per_rank(self) -> int:
        """``MaxNumTokensToSendPerRank()`` = ``maxNumInpTokenPerRank`` (``HDR:154``)."""
        return self.max_num_inp_token_per_rank

    def max_num_tokens_to_send(self) -> int:
        """``MaxNumTokensToSend()`` = ``worldSize x MaxNumTokensToSendPerRank()`` (``HDR:156-158``)."""
        return self.world_size * self.max_num_inp_token_per_rank

    def max_num_tokens_to_recv_per_rank(self) -> int:
        """``MaxNumTokensToRecvPerRank()``: ``min(ceil(maxTotalRecvTokens / worldSize),
        maxNumInpTokenPerRank)`` with a cap, else ``maxNumInpTokenPerRank`` (``HDR:160-166``)."""
        if self.max_total_recv_tokens > 0:
            return min(ceil_div(self.max_total_recv_tokens, self.world_size), self.max_num_inp_token_per_rank)
        return self.max_num_inp_token_per_rank

    def max_num_tokens_to_recv(self) -> int:
        """``MaxNumTokensToRecv()`` = ``worldSize x MaxNumTokensToRecvPerRank()`` (``HDR:168-170``)."""
        return self.world_size * self.max_num_tokens_to_recv_per_rank()

    # --- bytes per token (HDR:174-209) ----------------------------------------------------
    def hidden_bytes(self, token_type_size: int) -> int:
        """``HiddenBytes(tokenTypeSize)`` = ``tokenTypeSize x hiddenDim`` (``HDR:174-176``)."""
        return token_type_size * self.hidden_dim

    def max_hidden_bytes(self) -> int:
        """``MaxHiddenBytes()`` = ``HiddenBytes(maxTokenTypeSize)`` (``HDR:177``)."""
        return self.hidden_bytes(self.max_token_type_size)

    def combine_token_region_bytes(self) -> int:
        """``CombineTokenRegionBytes()``: ``(hiddenDim + 1) / 2`` for FP4 blockwise (two E2M1
        values per byte), else ``MaxHiddenBytes()`` (``HDR:183-186``)."""
        if self.quant_type == "fp4_blockwise":
            return (self.hidden_dim + 1) // 2
        return self.max_hidden_bytes()

    def index_bytes(self) -> int:
        """``IndexBytes()`` = ``numExpertPerToken x sizeof(index_t)`` (``HDR:188-190``)."""
        return self.num_experts_per_token * INDEX_BYTES

    def weight_bytes(self) -> int:
        """``WeightBytes()`` = ``numExpertPerToken x sizeof(float)`` (``HDR:191-193``)."""
        return self.num_experts_per_token * WEIGHT_BYTES

    def scale_bytes(self) -> int:
        """``ScaleBytes()`` = ``scaleDim x scaleTypeSize`` (``HDR:195-197``)."""
        return self.scale_dim * self.scale_type_size

    def xfer_bytes_per_token(self, token_type_size: int) -> int:
        """``XferBytesPerToken(tokenTypeSize)``: hidden + indices + weights + source token id +
        scales (``HDR:203-206``)."""
        return (self.hidden_bytes(token_type_size) + self.index_bytes() + self.weight_bytes()
                + SRC_TOKEN_ID_BYTES + self.scale_bytes())

    def max_xfer_bytes_per_token(self) -> int:
        """``MaxXferBytesPerToken()`` = ``XferBytesPerToken(maxTokenTypeSize)`` (``HDR:207-209``)."""
        return self.xfer_bytes_per_token(self.max_token_type_size)

    @property
    def num_nodes(self) -> int:
        """``worldSize / gpuPerNode`` (C++ integer division, ``CPP:329``)."""
        return self.world_size // self.gpu_per_node


def handle_config(config: EpDispatchCombineConfig) -> EpDispatchCombineConfig:
    """The config as the ``EpDispatchCombineHandle`` constructor leaves it: a
    ``maxTotalRecvTokens`` above the worst case ``worldSize x maxNumInpTokenPerRank`` is
    clamped to it (``CPP:153-165``). (``numQpPerPe`` is also lowered to the shmem context's
    queue-pair count, ``CPP:118-125``, a runtime value; epbuf keeps the configured one.)"""
    worst = config.world_size * config.max_num_inp_token_per_rank
    if config.max_total_recv_tokens > worst:
        return config.replace(max_total_recv_tokens=worst)
    return config
