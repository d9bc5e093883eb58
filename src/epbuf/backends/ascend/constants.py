"""DeepEP-Ascend's constants and the upstream files they are cited from.

Citations are ``path:line`` in the text read on 2026-11-30; the short names (``CPL``, ``TOK``,
``EPB`` ...) stand for the files below.
"""

from __future__ import annotations

__all__ = [
    "UPSTREAM",
    "CPL",
    "TOK",
    "EPB",
    "KDISPATCH",
    "KCOMBINE",
    "IDISPATCH",
    "IEPILOGUE",
    "RED",
    "WSP",
    "SIG",
    "SF_PACK_BYTES",
    "NUM_MAX_RANKS",
    "NUM_MAX_EXPERTS",
    "NUM_UB_ALIGNMENT_BYTES",
    "NUM_VECTOR_REGISTER_BYTES",
    "NUM_ALLOCATION_ALIGNMENT_BYTES",
    "TOPK_IDX_BYTES",
    "TOPK_WEIGHT_BYTES",
    "SRC_IDX_BYTES",
    "NUM_MAX_TOPK",
    "NUM_DEFAULT_TOPK",
    "HINT_SF_GRANULARITY",
    "FP8_BLOCK_SIZE",
    "SF_PACKS_PER_SCALE",
    "DISPATCH_NUM_THREADS",
    "NUM_MAX_EXPERTS_PER_RANK",
    "REDUCTION_MAX_HIGH_COUNT",
    "REDUCTION_MAX_LOW_COUNT",
    "NUM_MAX_VEC_CORES",
    "NUM_SECTOR_INTS",
    "DTYPE_BYTES",
]

UPSTREAM = "DeepEP-Ascend (deep_ep + csrc/buffers/ep.hpp, public text read 2026-11-30)"

CPL = "deep_ep/include/deep_ep/common/compiled.hpp"
TOK = "deep_ep/include/deep_ep/layout/ep/token.hpp"
EPB = "csrc/buffers/ep.hpp"
KDISPATCH = "csrc/kernels/ep/dispatch.hpp"
KCOMBINE = "csrc/kernels/ep/combine.hpp"
IDISPATCH = "deep_ep/include/deep_ep/impls/ep/dispatch.hpp"
IEPILOGUE = "deep_ep/include/deep_ep/impls/ep/dispatch_copy_epilogue.hpp"
RED = "deep_ep/include/deep_ep/common/reduction.hpp"
WSP = "deep_ep/include/deep_ep/layout/ep/workspace.hpp"
SIG = "deep_ep/include/deep_ep/layout/common/signals.hpp"

# --- constants (compiled.hpp) -------------------------------------------------------
SF_PACK_BYTES = 2  # sizeof(sf_pack_t), sf_pack_t = int16_t (CPL:33)
NUM_MAX_RANKS = 256  # kNumMaxRanks (CPL:35)
NUM_MAX_EXPERTS = 2048  # kNumMaxExperts (CPL:36)
NUM_UB_ALIGNMENT_BYTES = 32  # kNumUbAlignmentBytes (CPL:38)
NUM_VECTOR_REGISTER_BYTES = 256  # kNumVectorRegisterBytes (CPL:39)
NUM_ALLOCATION_ALIGNMENT_BYTES = 2 * 1024 * 1024  # kNumAllocationAlignmentBytes = 2097152 (CPL:48)

# --- element sizes of the record's fields (token.hpp) --------------------------------
TOPK_IDX_BYTES = 8  # sizeof(int64_t): Ascend routes with int64 expert indices (TOK:25)
TOPK_WEIGHT_BYTES = 4  # sizeof(float) (TOK:24)
SRC_IDX_BYTES = 4  # sizeof(int), the source token's global index (TOK:25)

# --- kernel facts -------------------------------------------------------------------
NUM_MAX_TOPK = 32  # "dispatch requires kNumTopk <= 32" (EPB:589); kNumTopk <= warpSize (IDISPATCH:112)
NUM_DEFAULT_TOPK = NUM_MAX_TOPK  # calculate_buffer_size: top-k 0 reserves the maximum (EPB:590)
HINT_SF_GRANULARITY = 32  # hint: ceil_div(hidden, 32) SF packs (EPB:594)
FP8_BLOCK_SIZE = 128  # a real FP8 dispatch: one fp32 scale per 128 elements ...
SF_PACKS_PER_SCALE = 2  # ... viewed as two int16 packs (sf.element_size() == 2 is asserted, EPB:151)
DISPATCH_NUM_THREADS = 512  # SIMT worker threads (IDISPATCH:661); kNumExperts <= kNumThreads (IDISPATCH:109)
NUM_MAX_EXPERTS_PER_RANK = 512  # kNumExpertsPerRank <= 512 (IEPILOGUE:246)
# Arrival counts and token counts share one int: 8 high bits count arrivals, 24 low bits
# carry the value (RED:12-17), so ranks <= 255 and tokens x ranks <= 2^24 - 1.
REDUCTION_MAX_HIGH_COUNT = (1 << 8) - 1  # kReductionMaxHighCount (RED:16)
REDUCTION_MAX_LOW_COUNT = (1 << 24) - 1  # kReductionMaxLowCount (RED:17)
NUM_MAX_VEC_CORES = 64  # kNumMaxVecCores (CPL:37)
NUM_SECTOR_INTS = 512 // 4  # kNumSectorInts = kNumSectorBytes / sizeof(int) (CPL:40-41)


DTYPE_BYTES = {"float8_e4m3fn": 1, "bfloat16": 2, "uint8": 1}
