"""HCCL windows on Ascend, shared by the Ascend engines (``sgl_kernel_npu``, ``mindspeed``,
``vllm_ascend``): what a communicator allocates, how the MC2 op tiling reads ``HCCL_BUFFSIZE``,
and the low-latency MC2 dispatch/combine window check both SGLang's and vLLM's Ascend paths run.

On Ascend the expert-parallel communication memory is the HCCL window of a communicator:
"Each communicator occupies 2 x HCCL_BUFFSIZE memory, which is used for receiving and
sending" (Huawei CANN, environment variable ``HCCL_BUFFSIZE``: integer >= 1, default 200,
unit MB = 2^20 B; a communicator created with ``HcclCommConfig.hcclBufferSize`` — what
``torch_npu``'s ``ProcessGroupHCCL.Options().hccl_config["hccl_buffer_size"]`` sets — uses
that value instead). The MC2 dispatch/combine ops do not allocate: their tiling checks that
their need fits ``1 x HCCL_BUFFSIZE``.

Upstream ``sgl-project/sgl-kernel-npu @f425bdf1`` (2026-08-21):

* ``csrc/deepep/ops/op_host/mc2_tiling_utils.h:22-41`` ``Mc2TilingUtils::GetMaxWindowSize``:
  reads ``DEEPEP_HCCL_BUFFSIZE`` if set, else ``HCCL_BUFFSIZE``; ``uint16_t defaultWindowSize =
  200; defaultWindowSize = std::stoi(env)`` — the value is stored in 16 bits, so 65536 MiB
  and above wrap; times ``1024 * 1024``.
* ``.../moe_distribute_dispatch_v2_tiling.cpp:1209-1252`` ``CheckWinSize`` (low-latency
  dispatch): ``(maxBs * a512(a32(h * dtype) + 44) * ep * localExperts + maxBs * a512(2h) *
  (k + sharedExperts)) * 2``, ``dtype`` the dispatch output's bytes (1 with int8 quantization).
* ``.../moe_distribute_combine_v2_tiling.cpp:1193-1220`` (low-latency combine): the same sum,
  but every dispatched token is sized as 2-byte elements (``MAX_OUT_DTYPE_SIZE``,
  :1202-1207) whatever the dispatch dtype and communication algorithm — so with int8
  dispatch the combine check is the larger one and binds.
* ``sharedExpertNum``: ``deep_ep`` passes ``shared_expert_num = 1`` (``csrc/deepep/deep_ep.hpp:36``);
  the tilings zero it only when ``sharedExpertRankNum`` is 0
  (``moe_distribute_dispatch_v2_tiling.cpp:697-701``, ``moe_distribute_combine_v2_tiling.cpp:272-276``),
  so ``MOE_SHARED_EXPERT_RANK_NUM > 0`` adds one combine slot per token (``k + 1``).
"""

from __future__ import annotations

from ..report import Buffer, Finding, Region
from ..units import MiB, align
from ._common import EngineContext, budget_findings, mib_ceil
from ._knobs import Knob

__all__ = ["tiling_window_mib", "ll_token_bytes", "ll_dispatch_need", "ll_combine_need", "ll_window_need",
           "tiling_shared_expert_num", "hccl_window", "hccl_knob", "npu_budget_findings"]

SKN = "sgl-project/sgl-kernel-npu @f425bdf1"
MC2_UTILS = "csrc/deepep/ops/op_host/mc2_tiling_utils.h:22-41 GetMaxWindowSize"
LL_TILING = "csrc/deepep/ops/op_host/moe_distribute_dispatch_v2_tiling.cpp"
LL_COMBINE_TILING = "csrc/deepep/ops/op_host/moe_distribute_combine_v2_tiling.cpp"
#: ``int64_t shared_expert_num = 1`` passed to every low-latency op (the tilings zero it without shared ranks).
DEEP_EP_SHARED_EXPERT_NUM = 1

DEFAULT_HCCL_BUFFSIZE = 200  # CANN default; GetMaxWindowSize's uint16_t default
WINDOW_VALUE_BITS = 16  # uint16_t defaultWindowSize
WIN_ADDR_ALIGN = 512  # tokens start 512-B aligned in the window
UB_ALIGN = 32
SCALE_EXPAND_IDX_BUFFER = 44  # "scale 32B + 3*4 expandIdx"
FULL_MESH_DATA_ALIGN = 480  # fullmesh_v2 packs 480 data bytes per 512-B block
MAX_OUT_DTYPE_SIZE = 2
DOUBLE_DATA_BUFFER = 2


def tiling_window_mib(value: int) -> int:
    """What ``GetMaxWindowSize`` reads from ``HCCL_BUFFSIZE = value``: ``std::stoi`` into a
    ``uint16_t`` (``mc2_tiling_utils.h:24-31``): values wrap modulo 65536; beyond ``int`` range
    ``stoi`` throws and the default 200 stays.

    >>> tiling_window_mib(1024), tiling_window_mib(65536 + 200), tiling_window_mib(2**31)
    (1024, 200, 200)
    """
    if value > (1 << 31) - 1:
        return DEFAULT_HCCL_BUFFSIZE
    return value % (1 << WINDOW_VALUE_BITS)


def a512(x: int) -> int:
    """``x`` rounded up to the 512-byte window address alignment."""
    return align(x, WIN_ADDR_ALIGN)


def ll_token_bytes(hidden: int, dispatch_dtype_bytes: int = 2, comm_alg: str = "fullmesh_v1") -> tuple[int, int]:
    """``(tokenNeedSizeDispatch, tokenNeedSizeCombine)`` of ``CheckWinSize``
    (``moe_distribute_dispatch_v2_tiling.cpp:1219-1235``).

    >>> ll_token_bytes(7168), ll_token_bytes(7168, 1)
    ((14848, 14336), (7680, 14336))
    """
    combine = a512(hidden * MAX_OUT_DTYPE_SIZE)
    actual = align(hidden * dispatch_dtype_bytes, UB_ALIGN) + SCALE_EXPAND_IDX_BUFFER
    if comm_alg == "fullmesh_v2":
        dispatch = -(-actual // FULL_MESH_DATA_ALIGN) * WIN_ADDR_ALIGN
    else:
        dispatch = a512(actual)
    return dispatch, combine


def tiling_shared_expert_num(shared_expert_rank_num: int, passed: int = DEEP_EP_SHARED_EXPERT_NUM) -> int:
    """``sharedExpertNum`` as the tilings use it: ``passed`` (``deep_ep`` passes 1,
    ``deep_ep.hpp:36``), zeroed when it is 1 and no rank holds shared experts
    (``moe_distribute_dispatch_v2_tiling.cpp:697-701``).

    >>> tiling_shared_expert_num(0), tiling_shared_expert_num(1)
    (0, 1)
    """
    return 0 if shared_expert_rank_num == 0 and passed == 1 else passed


def _local_experts(num_experts: int, ep_world_size: int, shared_expert_rank_num: int) -> int:
    """``localMoeExpertNum = moeExpertNum / (epWorldSize - sharedExpertRankNum)`` (dispatch tiling :880,
    combine tiling :969)."""
    return num_experts // (ep_world_size - shared_expert_rank_num)


def ll_dispatch_need(max_bs: int, hidden: int, ep_world_size: int, num_experts: int, num_topk: int, *,
                     dispatch_dtype_bytes: int = 2, shared_expert_num: int = 0, shared_expert_rank_num: int = 0,
                     comm_alg: str = "fullmesh_v1") -> int:
    """The window bytes the low-latency *dispatch* tiling requires (``CheckWinSize``,
    ``moe_distribute_dispatch_v2_tiling.cpp:1209-1252``): ``(maxBs * dispatch * ep * localExperts +
    maxBs * combine * (k + shared)) * 2``, the dispatch slot sized for ``dispatch_dtype_bytes``.
    ``shared_expert_num`` is the tiling's (see :func:`tiling_shared_expert_num`).

    >>> ll_dispatch_need(512, 7168, 16, 256, 8), ll_dispatch_need(512, 7168, 16, 256, 8, dispatch_dtype_bytes=1)
    (4009754624, 2130706432)
    """
    local = _local_experts(num_experts, ep_world_size, shared_expert_rank_num)
    dispatch, combine = ll_token_bytes(hidden, dispatch_dtype_bytes, comm_alg)
    return (max_bs * dispatch * ep_world_size * local + max_bs * combine * (num_topk + shared_expert_num)) \
        * DOUBLE_DATA_BUFFER


def ll_combine_need(max_bs: int, hidden: int, ep_world_size: int, num_experts: int, num_topk: int, *,
                    shared_expert_num: int = 0, shared_expert_rank_num: int = 0) -> int:
    """The window bytes the low-latency *combine* tiling requires
    (``moe_distribute_combine_v2_tiling.cpp:1193-1220``): the dispatch formula with every dispatched
    token sized for 2-byte elements and 512-byte slots, whatever the dispatch dtype (:1202-1207).

    >>> ll_combine_need(256, 7168, 16, 256, 8)
    2004877312
    """
    local = _local_experts(num_experts, ep_world_size, shared_expert_rank_num)
    dispatch, combine = ll_token_bytes(hidden, MAX_OUT_DTYPE_SIZE)
    return (max_bs * dispatch * ep_world_size * local + max_bs * combine * (num_topk + shared_expert_num)) \
        * DOUBLE_DATA_BUFFER


def ll_window_need(max_bs: int, hidden: int, ep_world_size: int, num_experts: int, num_topk: int, *,
                   dispatch_dtype_bytes: int = 2, shared_expert_num: int = 0, shared_expert_rank_num: int = 0,
                   comm_alg: str = "fullmesh_v1") -> int:
    """What a low-latency dispatch + combine pair needs of the window: the larger of the two tiling
    checks (:func:`ll_dispatch_need`, :func:`ll_combine_need`). With int8 dispatch the combine check
    binds (issue 14: 256 tokens, 16 ranks, DeepSeek-V3 shape: 1,065,353,216 B dispatch, 2,004,877,312 B
    combine).

    >>> ll_window_need(512, 7168, 16, 256, 8), ll_window_need(256, 7168, 16, 256, 8, dispatch_dtype_bytes=1)
    (4009754624, 2004877312)
    """
    return max(ll_dispatch_need(max_bs, hidden, ep_world_size, num_experts, num_topk,
                                dispatch_dtype_bytes=dispatch_dtype_bytes, shared_expert_num=shared_expert_num,
                                shared_expert_rank_num=shared_expert_rank_num, comm_alg=comm_alg),
               ll_combine_need(max_bs, hidden, ep_world_size, num_experts, num_topk,
                               shared_expert_num=shared_expert_num, shared_expert_rank_num=shared_expert_rank_num))


def hccl_window(name: str, buffsize_mib: int, need: int | None, formula: str, source: str) -> Buffer:
    """A communicator's HCCL window: ``2 x buffsize`` MiB (send + receive halves). ``need``:
    bytes the ops check against one half (``None``: nothing checks it); the buffer's
    ``num_bytes_needed`` is twice the smallest whole-MiB half that passes."""
    half = buffsize_mib * MiB
    used = mib_ceil(need) * MiB if need is not None else half
    regions = [Region(name=f"{what} half (hccl_buffer_size)", num_bytes=half, num_bytes_used=used,
                      formula=formula, source=source) for what in ("send", "receive")]
    return Buffer(name=name, regions=tuple(regions), rule="sum", alignment=MiB, num_bytes=2 * half,
                  num_bytes_needed=2 * used, source="CANN HCCL_BUFFSIZE: each communicator takes 2 x HCCL_BUFFSIZE")


def hccl_knob(name: str, source: str, help_text: str, default: int | None = DEFAULT_HCCL_BUFFSIZE) -> Knob:
    return Knob(name=name, kind="int", lo=1, default=default, source=source, help=help_text)


def npu_budget_findings(prefix: str, ctx: EngineContext, total: int) -> list[Finding]:
    """:func:`~epbuf.engines._common.budget_findings` per NPU."""
    return budget_findings(prefix, ctx, total, per="NPU")
