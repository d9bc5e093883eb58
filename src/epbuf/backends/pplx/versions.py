"""The pplx-kernels source epbuf follows: one commit, its files, and the citation helper.

Every formula in this package cites ``path:line`` in ``ppl-ai/pplx-kernels`` at
:data:`COMMIT` (``git show 12cecfd:<path>``).
"""

from __future__ import annotations

from .._single_commit import citation, version_check, version_table

__all__ = ["UPSTREAM", "COMMIT", "SHORT", "VERSIONS", "DEFAULT_VERSION", "ALIASES", "check_version", "src"]

COMMIT = "12cecfda252e4e646417ac263d96e994d476ee5d"
SHORT = "12cecfd"
UPSTREAM = "ppl-ai/pplx-kernels @12cecfd (2025-08-06): csrc/all_to_all/, src/pplx_kernels/all_to_all.py"

#: ``version`` id -> what it stands for; the full commit, its first 8 characters and "latest" as aliases.
VERSIONS, ALIASES = version_table(
    SHORT, COMMIT,
    "ppl-ai/pplx-kernels @12cecfd (2025-08-06): AllToAll.internode (NVSHMEM symmetric buffers) and "
    "AllToAll.intranode (cudaMalloc buffers shared by CUDA IPC)")
DEFAULT_VERSION = SHORT

PY = "src/pplx_kernels/all_to_all.py"
BASE = "csrc/all_to_all/all_to_all.cpp"
INTER = "csrc/all_to_all/internode.cpp"
INTRA = "csrc/all_to_all/intranode.cpp"
INTRA_CUH = "csrc/all_to_all/intranode.cuh"
INTER_DISPATCH = "csrc/all_to_all/internode_dispatch.cu"
INTER_COMBINE = "csrc/all_to_all/internode_combine.cu"
INTRA_DISPATCH = "csrc/all_to_all/intranode_dispatch.cu"
INTRA_COMBINE = "csrc/all_to_all/intranode_combine.cu"
CUDA_UTILS = "csrc/core/cuda_utils.h"
UTILS = "csrc/core/utils.h"

check_version = version_check("pplx-kernels", VERSIONS, ALIASES, DEFAULT_VERSION)
src = citation(SHORT)
