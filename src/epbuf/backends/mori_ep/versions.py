"""The MORI-EP source epbuf follows: one commit, its files, and citation helpers.

Every formula in this package cites ``path:line`` in ``ROCm/mori`` at :data:`COMMIT`
(``git show 624002c:<path>``). Older trees differ: 42e8954 (2026-06-05) added the
InterNodeV1 ``dispatchStaging`` buffer, 7f62115 (2026-04-01) added
``max_total_recv_tokens``, 1ac65f4 / 6f07277 (2026-05 / 2026-07) the blockwise FP8 / FP4
combine staging; epbuf reproduces 624002c only.
"""

from __future__ import annotations

from .._single_commit import citation, version_check, version_table

__all__ = ["UPSTREAM", "COMMIT", "SHORT", "VERSIONS", "DEFAULT_VERSION", "ALIASES", "check_version", "src"]

COMMIT = "624002c897a30928ec04c14fc167bf2b8a93f6ce"
SHORT = "624002c"
UPSTREAM = "ROCm/mori @624002c (2026-08-21): src/ops/dispatch_combine/, src/shmem/"

#: ``version`` id -> what it stands for; the full commit, its first 8 characters and "latest" as aliases.
VERSIONS, ALIASES = version_table(
    SHORT, COMMIT,
    "ROCm/mori @624002c (2026-08-21): EpDispatchCombineHandle buffers for IntraNode, IntraNodeLL, "
    "InterNode, InterNodeV1, InterNodeV1LL, AsyncLL; max_total_recv_tokens cap; blockwise FP8/FP4 combine; "
    "MORI-shmem static heap, isolation mode and the CCO arena")
DEFAULT_VERSION = SHORT

# Upstream files (paths in ROCm/mori).
HDR = "include/mori/ops/dispatch_combine/dispatch_combine.hpp"
CPP = "src/ops/dispatch_combine/dispatch_combine.cpp"
COMMON = "src/ops/dispatch_combine/common.hpp"
INTRA = "src/ops/dispatch_combine/intranode.hpp"
INTRA_LL = "src/ops/dispatch_combine/intranode_ll.hpp"
INTER = "src/ops/dispatch_combine/internode.hpp"
INTER_V1 = "src/ops/dispatch_combine/internode_v1.cpp"
ASYNC_LL = "src/ops/dispatch_combine/low_latency_async.cpp"
LAUNCH = "src/ops/dispatch_combine/launch.cpp"
PY = "python/mori/ops/dispatch_combine.py"
SHMEM_H = "include/mori/shmem/internal.hpp"
SHMEM_INIT = "src/shmem/init.cpp"
SHMEM_MEM = "src/shmem/memory.cpp"
VA = "src/application/memory/va_manager.cpp"
SYMM = "src/application/memory/symmetric_memory.cpp"
DEVTYPES = "include/mori/application/application_device_types.hpp"
ENV = "include/mori/utils/env_utils.hpp"
CMAKE = "CMakeLists.txt"

check_version = version_check("MORI-EP", VERSIONS, ALIASES, DEFAULT_VERSION)
src = citation(SHORT)
