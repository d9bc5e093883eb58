"""DeepEP V1's compile-time constants, element sizes and kernel facts.

``path:line`` is at main ``dd758ca`` (see :mod:`.versions` for the file names). The five
``LEGACY_*`` constants of ``csrc/kernels/legacy/compiled.cuh:5-9`` never changed; before
2.0.0 they had no ``LEGACY_`` prefix (``csrc/kernels/configs.cuh``).
"""

from __future__ import annotations

from ...units import INT32_MAX, MiB

__all__ = ["NUM_MAX_NVL_PEERS", "NUM_MAX_RDMA_PEERS", "NUM_WORKSPACE_BYTES", "NUM_MAX_LOCAL_EXPERTS",
           "NUM_BUFFER_ALIGNMENT_BYTES", "HINT_NUM_MAX_TOPK", "HINT_NUM_MAX_SCALES", "INT4_BYTES",
           "INT_BYTES", "FLOAT_BYTES", "BF16_BYTES", "BF162_BYTES", "UINT64_BYTES", "SOURCE_META_BYTES",
           "DEFAULT_TOPK_IDX_BITS", "NUM_CHANNELS_PER_SM", "NORMAL_NUM_MAX_TOPK", "FP8_SCALE_BLOCK",
           "DEFAULT_NUM_SMS", "BINDING_DEFAULT_CONFIG", "NORMAL_NUM_MAX_RANKS", "RDMA_CLEAN_META_INTS",
           "MAX_NUM_BYTES_INT4_CHECK", "UINT64_MAX"]

NUM_MAX_NVL_PEERS = 8  # LEGACY_NUM_MAX_NVL_PEERS (CPL:5): GPUs per NVLink node, hard-coded
NUM_MAX_RDMA_PEERS = 20  # LEGACY_NUM_MAX_RDMA_PEERS (CPL:6): nodes in normal mode
NUM_WORKSPACE_BYTES = 32 * MiB  # LEGACY_NUM_WORKSPACE_BYTES (CPL:7): Buffer's cudaMalloc'd workspace
NUM_MAX_LOCAL_EXPERTS = 1024  # LEGACY_NUM_MAX_LOCAL_EXPERTS (CPL:8)
NUM_BUFFER_ALIGNMENT_BYTES = 128  # LEGACY_NUM_BUFFER_ALIGNMENT_BYTES (CPL:9)

# What the normal-mode hints assume (CFG:56-57, 82-83): local `constexpr`s of the hints,
# *not* kernel limits. The hint reserves 128 top-k entries and 128 fp32 scales per token
# slot whatever the model uses.
HINT_NUM_MAX_TOPK = 128  # kNumMaxTopK in get_{nvl,rdma}_buffer_size_hint
HINT_NUM_MAX_SCALES = 128  # kNumMaxScales in get_{nvl,rdma}_buffer_size_hint

# Element sizes.
INT4_BYTES = 16  # sizeof(int4)
INT_BYTES = 4  # sizeof(int)
FLOAT_BYTES = 4  # sizeof(float)
BF16_BYTES = 2  # sizeof(nv_bfloat16)
BF162_BYTES = 4  # sizeof(nv_bfloat162): one LogFMT min/max pair per 128 channels
UINT64_BYTES = 8
SOURCE_META_BYTES = 8  # sizeof(internode::SourceMeta): two ints (INK:22-45)
DEFAULT_TOPK_IDX_BITS = 64  # topk_idx_t = int64_t unless built with 32-bit indices (da6ca24 on)

# Kernel facts.
NUM_CHANNELS_PER_SM = 2  # a channel is decoupled into 2 SMs: num_channels = num_sms / 2 (CFG:62)
NORMAL_NUM_MAX_TOPK = 32  # EP_DEVICE_ASSERT(num_topk <= 32) in the normal kernels (INK:519, 1754)
FP8_SCALE_BLOCK = 128  # num_scales = hidden / 128 (CFG:132): one fp32 scale per 128 channels
DEFAULT_NUM_SMS = 20  # Buffer.num_sms (PY:31), unchanged in every version
BINDING_DEFAULT_CONFIG = (20, 6, 256, 6, 256)  # the Python binding's defaults of Config (BUF:1752-1760)
# Normal mode allows NUM_MAX_NVL_PEERS x NUM_MAX_RDMA_PEERS ranks (Buffer constructor, BUF:113).
NORMAL_NUM_MAX_RANKS = NUM_MAX_NVL_PEERS * NUM_MAX_RDMA_PEERS
# The RDMA clean meta counts (NUM_MAX_NVL_PEERS * 2 + 4) ints per RDMA rank and channel, twice (INK:63).
RDMA_CLEAN_META_INTS = NUM_MAX_NVL_PEERS * 2 + 4

# Buffer(...) checks `num_*_bytes / sizeof(int4) < INT_MAX` from 4623c67 (2025-10-15, "Fix OOB"
# #454; BUF:111-112). With the `% 128` rule the largest legal size is 2^35 - 128:
# floor(n / 16) < 2^31 - 1  <=>  n <= 2^35 - 17, rounded down to 128.
MAX_NUM_BYTES_INT4_CHECK = (INT32_MAX * INT4_BYTES - 1) // NUM_BUFFER_ALIGNMENT_BYTES * NUM_BUFFER_ALIGNMENT_BYTES
UINT64_MAX = (1 << 64) - 1  # size_t: what the size hints return
