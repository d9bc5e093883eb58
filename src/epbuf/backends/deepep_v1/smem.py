"""The dynamic shared memory DeepEP V1's TMA kernel launches request, and the device bound.

Where upstream compiles the SM90 features (the default build; ``setup.py:130-143 @ dd758ca``),
``SET_SHARED_MEMORY_FOR_TMA`` (``csrc/kernels/legacy/launch.cuh:43-50 @ dd758ca``) runs
``EP_HOST_ASSERT(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
smem_size) == cudaSuccess)`` (line 46) before each launch below: a ``smem_size`` above the
device's opt-in maximum per block (:attr:`epbuf.devices.DeviceSpec.max_smem_per_block_optin`,
227 KiB = 232,448 B on compute capability 9.0 and 10.x) is a host assert at the first call.
With ``DISABLE_SM90_FEATURES`` (the only build for compute capability 8.x, which lacks TMA) the
macro is ``void()`` and every launch gets 0 bytes of dynamic shared memory; at ``dd758ca``
``setup.py:130-139`` refuses that build outright (``assert False, 'Not implemented'``).

The launches and their ``smem_size`` (line numbers at ``dd758ca``; the same formulas hold at
every commit from ``42253d0``, DeepEP's ``ll4``, on — earlier commits launched some of these
kernels with TMA under other constants, not modelled):

* intranode ``dispatch``: ``8192 * (768 / 32)`` = 196,608 B (``intranode.cu:576-580, 588``);
* intranode ``combine``: ``4096 * (768 / 32)`` = 98,304 B (``intranode.cu:1071-1074, 1079``);
* internode ``dispatch``: ``16384 * NUM_MAX_NVL_PEERS`` = 131,072 B (``internode.cu:1253-1255, 1267``);
* internode ``cached_notify`` (before every internode combine, and a cached dispatch):
  ``8192 * max(128, 32 * num_channels) / 32`` with ``num_channels = num_sms / 2``
  (``internode.cu:1497-1501, 1524``; ``buffer.hpp:1264, 1330``) — the only normal-mode size
  that grows with ``num_sms``;
* internode ``combine``: ``max(16384 * NUM_MAX_NVL_PEERS, 9248 * 24)`` = 221,952 B
  (``internode.cu:2312-2316, 2332``);
* low-latency ``combine``: ``max(send, recv)`` with ``send = num_warps * (3 * (32 * 16 * 4 + 16)
  + hidden / 128 * 4)`` and ``recv = 2 * (3 * (16 + 2 hidden) + 2 hidden + 3 * (hidden / 128 * 4)
  * 3)`` (``internode_ll.cu:1166-1198, 1204``; from ``c5facf5``, ``ll5``); in ``ll4``
  (``42253d0``) ``12 * (512 + 16) * num_warps`` (``csrc/kernels/internode_ll.cu:692-693, 699
  @ 42253d0``). ``num_warps = g * (32 / g)`` with ``g = ceil(num_experts / device SMs)``
  (``internode_ll.cu:1167-1172``) is at most 32; epbuf, which does not know the SM count,
  takes 32 — exact for ``g`` in 1, 2, 4, 8, 16, 32 and an upper bound otherwise.

>>> cached_notify_smem_bytes(20), max_cached_notify_num_sms(232448), max_cached_notify_num_sms(166912)
(81920, 57, 41)
>>> low_latency_combine_smem_bytes(7168, 5)
205312
"""

from __future__ import annotations

from .constants import NUM_MAX_NVL_PEERS

__all__ = ["SM90_MAX_SMEM_PER_BLOCK_OPTIN", "LL_MAX_NUM_WARPS", "INTRANODE_DISPATCH_SMEM_BYTES",
           "INTRANODE_COMBINE_SMEM_BYTES", "INTERNODE_DISPATCH_SMEM_BYTES", "INTERNODE_COMBINE_SMEM_BYTES",
           "cached_notify_smem_bytes", "max_cached_notify_num_sms", "low_latency_combine_smem_bytes",
           "has_tma_smem", "smem_bound", "device_spec", "smem_rows", "normal_launches", "low_latency_launches"]

#: The opt-in maximum of compute capability 9.0 (227 KiB): the bound without a device.
SM90_MAX_SMEM_PER_BLOCK_OPTIN = 227 * 1024
#: The most warps a low-latency combine block has (``num_warp_groups * (32 / num_warp_groups)``).
LL_MAX_NUM_WARPS = 32

_TMA_BYTES_PER_WARP_NOTIFY = 8192  # cached_notify kNumTMABytesPerWarp, internode.cu:1500
_NORMAL_NUM_THREADS = 768  # intranode kNumThreads, intranode.cu:576, 1071

INTRANODE_DISPATCH_SMEM_BYTES = 8192 * (_NORMAL_NUM_THREADS // 32)  # intranode.cu:577-579
INTRANODE_COMBINE_SMEM_BYTES = 4096 * (_NORMAL_NUM_THREADS // 32)  # intranode.cu:1072-1074
INTERNODE_DISPATCH_SMEM_BYTES = 16384 * NUM_MAX_NVL_PEERS  # internode.cu:1254-1255
INTERNODE_COMBINE_SMEM_BYTES = max(16384 * NUM_MAX_NVL_PEERS, 9248 * 24)  # internode.cu:2312-2316


def cached_notify_smem_bytes(num_sms: int) -> int:
    """``cached_notify``'s ``smem_size`` for a config of ``num_sms`` SMs: ``8192`` bytes for each of
    ``max(128, 32 * num_channels) / 32`` warps, ``num_channels = num_sms / 2``
    (``internode.cu:1497-1501 @ dd758ca``; ``buffer.hpp:1264``)."""
    num_threads = max(128, 32 * (num_sms // 2))
    return _TMA_BYTES_PER_WARP_NOTIFY * (num_threads // 32)


def max_cached_notify_num_sms(bound: int) -> int:
    """The largest ``num_sms`` whose ``cached_notify`` fits ``bound`` bytes (an odd count passes this
    launch; the internode configs also require an even one, ``config.hpp:59``)."""
    return 2 * (bound // _TMA_BYTES_PER_WARP_NOTIFY) + 1


def low_latency_combine_smem_bytes(hidden: int, low_latency: int, num_warps: int = LL_MAX_NUM_WARPS) -> int:
    """The low-latency ``combine`` launch's ``smem_size`` for layout variant ``low_latency`` (4 or 5;
    0 for earlier variants, which launch without dynamic shared memory), at ``num_warps`` warps."""
    if low_latency >= 5:  # internode_ll.cu:1184-1198 @ dd758ca (kNumStages 3, kNumMaxUnrolls 4, kMaxNumGroups 2)
        num_meta_bytes = hidden // 128 * 4
        send = num_warps * (3 * (32 * 16 * 4 + 16) + num_meta_bytes)
        recv = 2 * (3 * (16 + hidden * 2) + hidden * 2 + 3 * num_meta_bytes * 3)
        return max(send, recv)
    if low_latency == 4:  # internode_ll.cu:692-693 @ 42253d0
        return 12 * (512 + 16) * num_warps
    return 0


def has_tma_smem(device) -> bool:
    """Whether DeepEP builds for ``device`` (a :class:`~epbuf.devices.DeviceSpec`, or ``None``: the
    default sm_90 build) with the SM90 features, so the launches set dynamic shared memory."""
    if device is None:
        return True
    cc = device.compute_capability
    return bool(cc) and int(cc.split(".")[0]) >= 9 and device.max_smem_per_block_optin is not None


def smem_bound(device) -> tuple[int, str]:
    """``(bytes, label)``: the device's opt-in maximum per block, or sm_90's without a device."""
    if device is None:
        return SM90_MAX_SMEM_PER_BLOCK_OPTIN, "sm_90 default, no device given"
    return device.max_smem_per_block_optin, f"{device.name}, sm_{device.compute_capability.replace('.', '')}"


def device_spec(name: str | None):
    """The :class:`~epbuf.devices.DeviceSpec` of a ``Plan.device`` name (checked by ``Plan``), or ``None``."""
    if name is None:
        return None
    from ...devices import get_device  # only with --device: cold start

    return get_device(name)


def smem_rows(v, device, launches) -> list:
    """Limit rows (:mod:`.limits`) of the TMA launches ``launches``: ``(kernel, smem bytes, file key,
    lines)`` each. None where the build has no TMA shared memory: before ``ll4`` (not modelled) or
    on a device without the SM90 features (``SET_SHARED_MEMORY_FOR_TMA`` is ``void()``)."""
    if v.low_latency < 4 or not has_tma_smem(device):
        return []
    bound, label = smem_bound(device)
    assert_line = v.cite("LAUNCH", "46", "SET_SHARED_MEMORY_FOR_TMA: cudaFuncSetAttribute")
    return [(f"{kernel} dynamic shared memory (max opt-in per block: {label})", num_bytes, "<=", bound,
             num_bytes <= bound, v.cite(key, lines, kernel) + ", " + assert_line, "host")
            for kernel, num_bytes, key, lines in launches]


def normal_launches(internode: bool, num_sms_by_config: dict) -> list:
    """The normal-mode TMA launches of a plan: intranode dispatch and combine, or internode
    dispatch, ``cached_notify`` (one per distinct ``num_sms`` of the configs; ``num_sms_by_config``:
    config kind -> num_sms) and combine."""
    if not internode:
        return [("intranode dispatch", INTRANODE_DISPATCH_SMEM_BYTES, "INTRA", "576-580, 588"),
                ("intranode combine", INTRANODE_COMBINE_SMEM_BYTES, "INTRA", "1071-1074, 1079")]
    launches = [("internode dispatch", INTERNODE_DISPATCH_SMEM_BYTES, "INK", "1253-1255, 1267")]
    seen = set()
    for kind, num_sms in num_sms_by_config.items():
        if num_sms in seen:
            continue
        seen.add(num_sms)
        name = "cached_notify" + (f" ({kind} config, num_sms = {num_sms})" if len(set(num_sms_by_config.values())) > 1
                                  else f" (num_sms = {num_sms})")
        launches.append((name, cached_notify_smem_bytes(num_sms), "INK", "1497-1501, 1524"))
    launches.append(("internode combine", INTERNODE_COMBINE_SMEM_BYTES, "INK", "2312-2316, 2332"))
    return launches


def low_latency_launches(v, hidden: int) -> list:
    """The low-latency TMA launch: combine, at the most warps a block has (32)."""
    lines = "1166-1198, 1204" if v.low_latency >= 5 else "692-693, 699"
    return [(f"low-latency combine (hidden = {hidden}, {LL_MAX_NUM_WARPS} warps at most)",
             low_latency_combine_smem_bytes(hidden, v.low_latency), "LLK", lines)]
