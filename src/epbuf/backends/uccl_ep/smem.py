"""The dynamic shared memory UCCL-EP's TMA kernel launches request, and the device bound.

UCCL-EP's ``SET_SHARED_MEMORY_FOR_TMA`` (``ep/include/ep_launch.cuh:33-43 @da914a2``) is DeepEP's:
without ``DISABLE_SM90_FEATURES`` it runs ``EP_HOST_ASSERT(cudaFuncSetAttribute(kernel,
cudaFuncAttributeMaxDynamicSharedMemorySize, smem_size) == cudaSuccess)`` (line 36) before each
launch below, so a ``smem_size`` above the device's opt-in maximum per block is a host assert at
the first call; with it the macro is ``void()`` and the launch gets 0 bytes. Every ROCm build
defines ``DISABLE_SM90_FEATURES`` (``ep/setup.py:347-349``; v0.1.1 too; the internode TMA code is
also under ``__NVCC__``): no rows on ROCm. On CUDA the TMA code needs sm_90; ``DISABLE_SM90_FEATURES=1`` is the sm_80
build (``setup.py:294-299``): no rows on a device below compute capability 9.0, as for DeepEP
(:func:`epbuf.backends.deepep_v1.smem.has_tma_smem`). The bound is ``Plan.device``'s
``max_smem_per_block_optin``, or sm_90's 232,448 B without a device.

The launches that set shared memory (the only ``SET_SHARED_MEMORY_FOR_TMA`` calls in ``ep/src``),
lines at ``da914a2``; ``v0.1.1`` has other line numbers (its assert is ``ep_launch.cuh:47``) and
differs in value only in ``kNumTMABytesPerWarp`` (:attr:`~.versions.Version.internode_tma_bytes_per_warp`):

* intranode ``dispatch``: ``8192 * (768 / 32)`` = 196,608 B (``intranode.cu:609-615, 627``) and
  ``combine``: ``4096 * (768 / 32)`` = 98,304 B (``intranode.cu:1119-1126, 1135``) — DeepEP's;
* internode ``dispatch``: ``kNumTMABytesPerWarp * NUM_MAX_NVL_PEERS`` = 20,480 x 8 = 163,840 B
  (``internode.cu:66, 1685, 1713``; 131,072 B at ``v0.1.1``);
* internode ``cached_notify`` (before every internode combine, and a cached dispatch):
  ``8192 * max(128, 32 * num_channels) / 32``, ``num_channels = num_sms / 2``
  (``internode.cu:1998-2003, 2038``; ``uccl_ep.cc:1090, 1201``) — DeepEP's, and the only size
  that grows with ``num_sms``;
* internode ``combine``: ``max(kNumTMABytesPerWarp * NUM_MAX_NVL_PEERS, 9248 * 16)`` (16 forwarder
  warps where DeepEP has 24) = 163,840 B (``internode.cu:3058-3065, 3080``; 147,968 B at ``v0.1.1``);
* low-latency ``combine``: ``12 * (512 + 16)`` = 6,336 B per warp (DeepEP's ``ll4``) for
  ``num_warps = g * (32 / g)`` warps, ``g = ceil(num_experts / device SMs)``
  (``internode_ll.cu:1237-1243, 1254-1282, 1295``), but where that exceeds the device's opt-in
  maximum the launcher asks the device and shrinks the block to a multiple of ``g`` warps that
  fits, when at least ``2 g`` do (:func:`low_latency_combine_launch`). epbuf, which does not
  know the SM count, takes ``g = 1`` (32 warps): 202,752 B, within every sm_90 / sm_100 bound,
  where the shrinking never starts.

>>> from epbuf.backends.uccl_ep.versions import get_version
>>> rows = normal_rows(get_version("main"), "cuda", None, True, {"config": 58})
>>> [(row[1], row[4]) for row in rows]
[(163840, True), (237568, False), (163840, True)]
>>> rows[1][0]
'cached_notify (num_sms = 58) dynamic shared memory (max opt-in per block: sm_90 default, no device given)'
>>> low_latency_combine_launch(7168, 232448), low_latency_combine_launch(7168, 100000)
((32, 202752), (15, 95040))
"""

from __future__ import annotations

from . import _deepep
from .versions import Version, cite

__all__ = ["COMBINE_FORWARDER_TMA_BYTES_PER_WARP", "internode_dispatch_smem_bytes", "internode_combine_smem_bytes",
           "low_latency_combine_launch", "normal_launches", "normal_rows", "low_latency_rows", "device_spec"]

_NUM_MAX_NVL_PEERS = 8  # ep/include/ep_configs.cuh:3-5 (as limits.NUM_MAX_NVL_PEERS, which imports this module)
_COMBINE_FORWARDER_WARPS = 16  # kNumCombineForwarderWarps, internode.cu:3058 (as limits.COMBINE_FORWARDER_WARPS)
COMBINE_FORWARDER_TMA_BYTES_PER_WARP = 9248  # kNumTMABytesPerForwarderWarp, internode.cu:3060
_LL_MAX_WARP_GROUPS = 32  # kNumMaxWarpGroups on CUDA, internode_ll.cu:16-20
_LL_VARIANT = 4  # the low-latency combine's smem is DeepEP's ll4: 12 * (512 + 16) B per warp (internode_ll.cu:1254)


def internode_dispatch_smem_bytes(v: Version) -> int:
    """Internode ``dispatch``: ``kNumTMABytesPerWarp * NUM_MAX_NVL_PEERS`` (``internode.cu:66, 1685``)."""
    return v.internode_tma_bytes_per_warp * _NUM_MAX_NVL_PEERS


def internode_combine_smem_bytes(v: Version) -> int:
    """Internode ``combine``: the larger of the senders' and the 16 forwarders' staging
    (``internode.cu:3058-3065``)."""
    return max(v.internode_tma_bytes_per_warp * _NUM_MAX_NVL_PEERS,
               COMBINE_FORWARDER_TMA_BYTES_PER_WARP * _COMBINE_FORWARDER_WARPS)


def low_latency_combine_launch(hidden: int, bound: int, num_warp_groups: int = 1) -> tuple[int, int]:
    """``(num_warps_launch, smem_size)`` of the low-latency ``combine`` launcher on a device whose
    opt-in maximum is ``bound`` (``internode_ll.cu:1238-1282``): ``num_warps = g * (32 / g)``; if
    their shared memory exceeds ``bound``, ``bound / 6336`` warps rounded down to a multiple of
    ``g``, kept only when that is at least ``2 g`` (otherwise the full block, which then fails
    the attribute call)."""
    per_warp = _deepep.smem.low_latency_combine_smem_bytes(hidden, _LL_VARIANT, 1)
    g = num_warp_groups
    launch = num_warps = g * (_LL_MAX_WARP_GROUPS // g)
    if per_warp * num_warps > bound:
        fitting = max(bound // per_warp // g * g, g)
        if fitting >= 2 * g:
            launch = fitting
    return launch, _deepep.smem.low_latency_combine_smem_bytes(hidden, _LL_VARIANT, launch)


def normal_launches(v: Version, internode: bool, num_sms_by_config: dict) -> list:
    """The normal-mode TMA launches, ``(kernel, smem bytes, file, lines)`` each: intranode dispatch
    and combine, or internode dispatch, ``cached_notify`` (one per distinct ``num_sms`` of the
    configs; ``num_sms_by_config``: config kind -> num_sms) and combine."""
    s = _deepep.smem
    if not internode:
        return [("intranode dispatch", s.INTRANODE_DISPATCH_SMEM_BYTES, "src/intranode.cu", "609-615, 627"),
                ("intranode combine", s.INTRANODE_COMBINE_SMEM_BYTES, "src/intranode.cu", "1119-1126, 1135")]
    launches = [("internode dispatch", internode_dispatch_smem_bytes(v), "src/internode.cu", "66, 1685, 1713")]
    several = len(set(num_sms_by_config.values())) > 1
    seen = set()
    for kind, num_sms in num_sms_by_config.items():
        if num_sms not in seen:
            seen.add(num_sms)
            name = f"cached_notify ({kind} config, num_sms = {num_sms})" if several else \
                f"cached_notify (num_sms = {num_sms})"
            launches.append((name, s.cached_notify_smem_bytes(num_sms), "src/internode.cu", "1998-2003, 2038"))
    launches.append(("internode combine", internode_combine_smem_bytes(v), "src/internode.cu", "3058-3065, 3080"))
    return launches


def _rows(platform: str, device, launches) -> list:
    """Limit rows ``(name, value, relation, bound, ok, source, enforced)`` of ``launches`` (a
    function of the bound); none on ROCm or on a device without the SM90 features
    (``SET_SHARED_MEMORY_FOR_TMA`` is ``void()``)."""
    s = _deepep.smem
    if platform == "rocm" or not s.has_tma_smem(device):
        return []
    bound, label = s.smem_bound(device)
    assert_line = cite("include/ep_launch.cuh", "36") + " (SET_SHARED_MEMORY_FOR_TMA: cudaFuncSetAttribute)"
    return [(f"{kernel} dynamic shared memory (max opt-in per block: {label})", num_bytes, "<=", bound,
             num_bytes <= bound, f"{cite(path, lines)}, {assert_line}", "host")
            for kernel, num_bytes, path, lines in launches(bound)]


def normal_rows(v: Version, platform: str, device, internode: bool, num_sms_by_config: dict) -> list:
    """The rows of :func:`normal_launches` (``device``: a :class:`~epbuf.devices.DeviceSpec` or ``None``)."""
    return _rows(platform, device, lambda bound: normal_launches(v, internode, num_sms_by_config))


def low_latency_rows(platform: str, device, hidden: int) -> list:
    """The low-latency combine's row, at the warps its launcher picks for the bound with one warp
    group (32 warps unless they do not fit)."""
    def launches(bound):
        num_warps, num_bytes = low_latency_combine_launch(hidden, bound)
        return [(f"low-latency combine (hidden = {hidden}, {num_warps} warps)", num_bytes, "src/internode_ll.cu",
                 "1237-1243, 1254-1282, 1295")]
    return _rows(platform, device, launches)


def device_spec(name: str | None):
    """The :class:`~epbuf.devices.DeviceSpec` of a ``Plan.device`` name, or ``None``."""
    return _deepep.smem.device_spec(name)
