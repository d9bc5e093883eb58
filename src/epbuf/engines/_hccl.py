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
* ``.../moe_distribute_dispatch_v2_tiling.cpp:1209-1252`` ``CheckWinSize`` (low latency;
  combine v2 checks the same): ``(maxBs * a512(a32(h * dtype) + 44) * ep * localExperts +
  maxBs * a512(2h) * (k + sharedExperts)) * 2``.
"""

from __future__ import annotations

from ..report import Buffer, Finding, Region
from ..units import MiB, align
from ._common import EngineContext, budget_findings, mib_ceil
from ._knobs import Knob

__all__ = ["tiling_window_mib", "ll_token_bytes", "ll_window_need", "hccl_window", "hccl_knob", "npu_budget_findings"]

SKN = "sgl-project/sgl-kernel-npu @f425bdf1"
MC2_UTILS = "csrc/deepep/ops/op_host/mc2_tiling_utils.h:22-41 GetMaxWindowSize"
LL_TILING = "csrc/deepep/ops/op_host/moe_distribute_dispatch_v2_tiling.cpp"

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


def ll_window_need(max_bs: int, hidden: int, ep_world_size: int, num_experts: int, num_topk: int, *,
                   dispatch_dtype_bytes: int = 2, shared_expert_num: int = 0, shared_expert_rank_num: int = 0,
                   comm_alg: str = "fullmesh_v1") -> int:
    """The window bytes ``CheckWinSize`` requires (low-latency dispatch/combine v2, A3):
    ``(maxBs * dispatch * ep * localExperts + maxBs * combine * (k + shared)) * 2`` with
    ``localExperts = E / (ep - sharedExpertRankNum)``.

    >>> ll_window_need(512, 7168, 16, 256, 8)
    4009754624
    """
    local = num_experts // (ep_world_size - shared_expert_rank_num)
    dispatch, combine = ll_token_bytes(hidden, dispatch_dtype_bytes, comm_alg)
    return (max_bs * dispatch * ep_world_size * local + max_bs * combine * (num_topk + shared_expert_num)) \
        * DOUBLE_DATA_BUFFER


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
