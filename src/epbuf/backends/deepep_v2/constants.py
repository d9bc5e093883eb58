"""DeepEP V2's compile-time constants, shared by every generation.

Each value cites where upstream defines it (``@dd758ca`` = ``ElasticBuffer`` generations,
``@def8651`` = the refactored ``EPBuffer`` tree); values that differ between generations
live on :class:`~epbuf.backends.deepep_v2.versions.Generation` instead.
"""

from __future__ import annotations

from ...units import MiB

__all__ = [
    "NUM_TMA_ALIGNMENT_BYTES",
    "NUM_RDMA_ALIGNMENT_BYTES",
    "NUM_ALLOCATION_ALIGNMENT_BYTES",
    "SF_PACK_BYTES",
    "MBARRIER_BYTES",
    "TOPK_IDX_BYTES",
    "TOPK_WEIGHT_BYTES",
    "SRC_IDX_BYTES",
    "LINKED_LIST_IDX_BYTES",
    "NUM_MAX_CHANNELS_PER_SM",
    "NUM_MAX_SMS",
    "NUM_MAX_CHANNELS",
    "NUM_MAX_RANKS",
    "NUM_MAX_EXPERTS",
    "NUM_MAX_EXPERTS_PER_RANK_ELASTIC",
    "NUM_MAX_EXPERTS_PER_RANK_EP",
    "NUM_MAX_TOPK",
    "NUM_DEFAULT_TOPK",
    "HINT_SF_GRANULARITY",
    "FP8_BLOCK_SIZE",
    "UE8M0_PER_PACK",
    "COMBINE_ELEMENT_SIZE",
    "NUM_MAX_SCALEOUT_RANKS_KERNEL",
    "NUM_MAX_SCALEUP_RANKS_KERNEL",
    "NUM_NOTIFY_WARPS",
    "COMBINE_HIDDEN_GRANULARITY",
    "WORKSPACE_NUM_MAX_CHANNELS_A",
    "NUM_MAX_INFLIGHT_AGRS",
    "NUM_BARRIER_SIGNAL_BYTES",
    "WORKSPACE_NUM_MAX_CHANNELS_B",
    "DTYPE_BYTES",
]

# ptx::kNumTMAAlignBytes (ptx.cuh:15-16 @dd758ca) = kNumTMAAlignmentBytes (compiled.cuh:67 @def8651):
# "More than TMA, `longlong4` requires 32 bytes aligned".
NUM_TMA_ALIGNMENT_BYTES = 32
# kNumRDMAAlignmentBytes (compiled.cuh:68 @def8651); records are rounded to it only in "refactor".
NUM_RDMA_ALIGNMENT_BYTES = 64
# symmetric::kNumAlignmentBytes = 2097152 (symmetric.hpp:16 @dd758ca) = kNumAllocationAlignmentBytes
# (compiled.cuh:69 @def8651).
NUM_ALLOCATION_ALIGNMENT_BYTES = 2 * MiB
# union sf_pack_t { float fp32; int ue8m0x4; } (compiled.cuh:74-77 @dd758ca, :59-62 @def8651).
SF_PACK_BYTES = 4
# sizeof(ptx::mbarrier): the host placeholder is `struct alignas(8) mbarrier { uint64_t }` (ptx.cuh:10-12
# @dd758ca). Only the shared-memory staging record (`get_num_bytes<true>`) holds one, in a 32-byte slot.
MBARRIER_BYTES = 8
TOPK_IDX_BYTES = 4  # "the top-k index is always 32-bit" inside records (layout.cuh:181 @dd758ca)
TOPK_WEIGHT_BYTES = 4  # sizeof(float)
SRC_IDX_BYTES = 4  # sizeof(int): rank_idx * kNumMaxTokensPerRank + token_idx
LINKED_LIST_IDX_BYTES = 4  # sizeof(int), one per top-k slot (hybrid dispatch)
# ElasticBuffer / EPBuffer::kNumMaxChannels = kNumMaxChannelsPerSM (8) * kNumMaxSMs (160)
# (buffer.hpp:57-59 @dd758ca, ep.hpp:41-43 @def8651): the hint's scale-out slack per rank.
NUM_MAX_CHANNELS_PER_SM = 8
NUM_MAX_SMS = 160
NUM_MAX_CHANNELS = NUM_MAX_CHANNELS_PER_SM * NUM_MAX_SMS
NUM_MAX_RANKS = 1024  # WorkspaceLayout::kNumMaxRanks (layout.cuh:19 @dd758ca), kNumMaxRanks (compiled.cuh:74 @def8651)
NUM_MAX_EXPERTS = 2048  # WorkspaceLayout::kNumMaxExperts (layout.cuh:20), EPSignals::kNumMaxExperts (workspace.cuh:10)
NUM_MAX_EXPERTS_PER_RANK_ELASTIC = 256  # WorkspaceLayout::kNumMaxExpertsPerRank (layout.cuh:21 @b306af0, @dd758ca)
NUM_MAX_EXPERTS_PER_RANK_EP = 512  # EPSignals::kNumMaxExpertsPerRank (workspace.cuh:11 @def8651)
# "there are lots of `kNumTopk <= 32` restrictions, so we use 32 to calculate token size"
# (buffer.hpp:662-663 @dd758ca); the kernels statically assert kNumTopk <= 32 (one warp lane each).
NUM_MAX_TOPK = 32
NUM_DEFAULT_TOPK = NUM_MAX_TOPK
HINT_SF_GRANULARITY = 32  # hint: ceil_div(hidden, 32) SF packs, "An approximation" (buffer.hpp:672 @dd758ca)
FP8_BLOCK_SIZE = 128  # per_token_cast_to_fp8: one fp32 scale per 128 elements (deep_ep/utils/math.py:31-39 @dd758ca)
UE8M0_PER_PACK = 4  # int ue8m0x4: four UE8M0 scales in one pack
COMBINE_ELEMENT_SIZE = 2  # sizeof(nv_bfloat16): combine records are BF16 (buffer.hpp:621 @dd758ca)
NUM_MAX_SCALEOUT_RANKS_KERNEL = 32  # hybrid kernels: EP_STATIC_ASSERT(kNumScaleoutRanks <= 32)
NUM_MAX_SCALEUP_RANKS_KERNEL = 64  # hybrid kernels: EP_STATIC_ASSERT(kNumScaleupRanks <= 64) (64-bit lane masks)
NUM_NOTIFY_WARPS = 4  # kNumNotifyWarps (csrc/kernels/elastic/dispatch.hpp:130 @dd758ca)
COMBINE_HIDDEN_GRANULARITY = 32 * 16 // 2  # kHidden % (32 * sizeof(int4) / sizeof(nv_bfloat16)) == 0 -> 256
# Workspace maxima of generation A (WorkspaceLayout, layout.cuh:19-24 @dd758ca and compiled.cuh:83).
WORKSPACE_NUM_MAX_CHANNELS_A = 1024  # deep_ep::kNumMaxChannels: NOT the 1280 of ElasticBuffer
NUM_MAX_INFLIGHT_AGRS = 32
NUM_BARRIER_SIGNAL_BYTES = 16
# EPSignals (workspace.cuh:9-22 @def8651): alignas(kNumRDMAAlignmentBytes), kNumMaxChannels = 1280.
WORKSPACE_NUM_MAX_CHANNELS_B = 1280

DTYPE_BYTES = {"float8_e4m3fn": 1, "bfloat16": 2, "uint8": 1}
