"""The pplx-kernels source epbuf follows: one commit, its files, and the citation helper.

Every formula in this package cites ``path:line`` in ``ppl-ai/pplx-kernels`` at
:data:`COMMIT` (``git show 12cecfd:<path>``).
"""

from __future__ import annotations

from functools import lru_cache

from ...errors import InvalidArgumentError, Problem

__all__ = ["UPSTREAM", "COMMIT", "SHORT", "VERSIONS", "DEFAULT_VERSION", "ALIASES", "check_version", "src"]

COMMIT = "12cecfda252e4e646417ac263d96e994d476ee5d"
SHORT = "12cecfd"
UPSTREAM = "ppl-ai/pplx-kernels @12cecfd (2025-08-06): csrc/all_to_all/, src/pplx_kernels/all_to_all.py"

#: ``version`` id -> what it stands for.
VERSIONS: dict[str, str] = {
    SHORT: "ppl-ai/pplx-kernels @12cecfd (2025-08-06): AllToAll.internode (NVSHMEM symmetric buffers) and "
           "AllToAll.intranode (cudaMalloc buffers shared by CUDA IPC)",
}
ALIASES: dict[str, str] = {COMMIT: SHORT, COMMIT[:8]: SHORT, "latest": SHORT}
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


@lru_cache(maxsize=None)
def src(path: str, lines: str) -> str:
    """``path:lines @12cecfd`` (cached: sweeps build every allocation row per configuration)."""
    return f"{path}:{lines} @{SHORT}"


def check_version(version: object) -> str:
    """The version id for ``version`` (``None``: the newest).

    Raises:
        InvalidArgumentError: an id that is neither in :data:`VERSIONS` nor in :data:`ALIASES`.
    """
    if version is None:
        return DEFAULT_VERSION
    if isinstance(version, str) and (version in VERSIONS or version in ALIASES):
        return ALIASES.get(version, version)
    raise InvalidArgumentError([Problem(
        "version", version, f"unknown pplx-kernels version; choose {', '.join(VERSIONS)} (aliases: "
                            f"{', '.join(a for a in ALIASES if len(a) < 40)}, or the full commit)")])
