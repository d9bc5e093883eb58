"""Every allocation one UCCL-EP ``Buffer`` makes per GPU besides the hinted buffers' contents,
and where it lives (device or pinned host memory).

A Python ``deep_ep.Buffer`` of UCCL-EP (``ep/bench/buffer.py:76-222``) allocates, per GPU:

* the **RDMA buffer**, ``max(num_rdma_bytes, 1)`` bytes (``uccl.ep.get_rdma_buffer``,
  ``ep/src/uccl_ep.cc:278-315``): device memory, except on a verbs NIC that fails UCCL's
  registration probe, where it is pinned host memory (``uccl_ep.cc:294-304``);
* ``ep.get_num_proxy_threads()`` = ``kNumProxyThs`` = 4 **proxies** (``ep/bench/utils.py:627-645``,
  ``ep/include/common.hpp:69``), each with ``kChannelPerProxy`` = 8 **FIFOs** of ``kQueueSize``
  = 2,048 32-byte triggers (``ep/src/uccl_proxy.cpp:32-45``): the triggers and the tail in
  pinned host memory, the head and the tail cache on the device (``ep/src/fifo.cpp:13-26``);
* the proxy of thread 0 allocates the **atomic buffer**, ``kAtomicBufferSize`` = 81,960 B
  (``uccl_proxy.cpp:67-100``): device memory on ROCm and on verbs NICs with native atomics,
  pinned host memory on EFA, on Intel RDMA NICs and when the probe fails;
* the C++ ``Buffer`` (``uccl_ep.cc:350-548``): the **NVL buffer** ``num_nvl_bytes`` plus barrier
  signals and two pointer tables of ``max_nvl_peers`` entries (``max_nvl_peers`` =
  ``LOCAL_WORLD_SIZE``, the GPUs per node); the 32 MiB **workspace**; the D2H handle arrays in
  managed memory prefetched to the device; a device table of ``max_nvl_peers`` IPC pointers;
  and three pinned, mapped host counters for the receive counts.

Host memory counted here is page-locked memory allocated through CUDA/HIP (``cudaHostAlloc``,
``cudaMallocHost``); pageable host memory of the proxy threads (verbs queues, the 8 KiB
``atomic_old_values_buf`` per proxy, ``std::vector`` state) is not. Sizes are what upstream
requests; the driver rounds each allocation up to its own granularity.
"""

from __future__ import annotations

from ...report import Buffer, Region
from ...units import MiB, align, format_int
from .._cstruct import struct_size
from . import _deepep
from .low_latency import K_ATOMIC_BUFFER_SIZE, NUM_BUFFER_ALIGNMENT_BYTES
from .versions import cite

__all__ = ["K_NUM_PROXY_THS", "K_CHANNEL_PER_PROXY", "K_QUEUE_SIZE", "PROXY_TRIGGER_BYTES", "D2H_HANDLE_BYTES",
           "NUM_WORKSPACE_BYTES", "NUM_MAX_LOCAL_EXPERTS", "num_d2h_channels", "placement", "nvl_allocation",
           "rdma_allocation", "workspace_allocation", "device_runtime_allocation", "host_allocation"]

K_NUM_PROXY_THS = 4  # kNumProxyThs (ep/include/common.hpp:69); ep.get_num_proxy_threads() (uccl_ep.cc:2394)
K_CHANNEL_PER_PROXY = 8  # kChannelPerProxy (common.hpp:68): FIFOs per proxy
K_QUEUE_SIZE = 2048  # kQueueSize (common.hpp:62): triggers per FIFO


def _bitfield_words(widths: list[int], unit_bits: int = 64) -> int:
    """Storage units a run of ``uint64_t`` bit-fields takes, as GCC/Clang lay them out (Itanium
    ABI): a field goes into the current unit when it fits, else starts the next one; an unnamed
    zero-width field closes the current unit, so the next field starts a new one."""
    words, used = 1, 0
    for width in widths:
        if width == 0:
            if used:
                words, used = words + 1, 0
            continue
        if used + width > unit_bits:
            words, used = words + 1, 0
        used += width
    return words if used else words - 1


#: ``union alignas(16) ProxyTrigger`` (``ep/include/fifo_device.hpp:27-49`` @ da914a2): the
#: ``{fst, snd}`` view is 16 B, but the ``fields`` view's second word holds dstOffset 32 +
#: 2 x memory id 9 + type 3 + semaphoreId 10 = 63 bits, so the padding field
#: ``64 - 32 - 9 - 9 - 3 - 10 - 1`` is zero-width and pushes ``reserved : 1`` into a third word:
#: 24 B, which ``alignas(16)`` rounds to 32 (a C++ compiler says ``sizeof(ProxyTrigger) == 32``).
PROXY_TRIGGER_FIELD_BITS = [32, 32, 64 - 32 - 32, 32, 9, 9, 3, 10, 64 - 32 - 9 - 9 - 3 - 10 - 1, 1]
PROXY_TRIGGER_BYTES = align(max(2 * 8, 8 * _bitfield_words(PROXY_TRIGGER_FIELD_BITS)), 16)
NUM_WORKSPACE_BYTES = 32 * MiB  # NUM_WORKSPACE_BYTES (ep/include/ep_configs.cuh:7)
NUM_MAX_LOCAL_EXPERTS = 1024  # NUM_MAX_LOCAL_EXPERTS (ep_configs.cuh:8; uccl_ep.cc:48)
UINT64_BYTES = 8
POINTER_BYTES = 8
INT_BYTES = 4

#: ``sizeof(d2hq::D2HHandle)`` = ``sizeof(mscclpp::FifoDeviceHandle)``: four pointers and an int
#: (``ep/include/d2h_queue_device.cuh:47-52``, ``fifo_device.hpp:183-192``).
D2H_HANDLE_BYTES = struct_size([("triggers", 8, 8), ("head", 8, 8), ("tail", 8, 8), ("tailCache", 8, 8),
                                ("size", 4, 4)])


def num_d2h_channels() -> int:
    """FIFOs (D2H channels) of one ``Buffer``'s proxies: ``kNumProxyThs x kChannelPerProxy`` = 32
    (``uccl_ep.cc:384-386`` collects them from every proxy registered for the device and mode)."""
    return K_NUM_PROXY_THS * K_CHANNEL_PER_PROXY


def placement(platform: str, nic: str) -> tuple[bool, bool, str, str]:
    """``(rdma_buffer_in_host, atomic_buffer_in_host, rdma_why, atomic_why)`` for a build."""
    if platform == "rocm":
        return (False, False, f"hipExtMallocWithFlags(hipDeviceMallocUncached), {cite('src/uccl_ep.cc', '287-289')}",
                f"hipExtMallocWithFlags, {cite('src/uccl_proxy.cpp', '76-79')}")
    if nic == "efa":
        return (False, True, f"EFA: cudaMalloc, {cite('src/uccl_ep.cc', '290-292')}",
                f"EFA: cudaHostAlloc(Mapped | WriteCombined), {cite('src/uccl_proxy.cpp', '80-84')}")
    if nic == "intel":
        return (False, True, f"USE_DMABUF: cudaMalloc, {cite('src/uccl_ep.cc', '290-292')}",
                f"ATOMICS_USE_HOST_MEMORY (INTEL_RDMA_NIC, ep/include/common.hpp:38-48): cudaHostAlloc, "
                f"{cite('src/uccl_proxy.cpp', '86-96')}")
    if nic == "host-memory":
        return (True, True, f"registration probe fails: cudaMallocHost, {cite('src/uccl_ep.cc', '294-304')}",
                f"probe fails: cudaHostAlloc(Mapped), {cite('src/uccl_proxy.cpp', '86-96')}")
    return (False, False, f"cudaMalloc (GPU memory registers with the NIC), {cite('src/uccl_ep.cc', '294-299')}",
            f"cudaMalloc (native atomics on GPU memory), {cite('src/uccl_proxy.cpp', '86-91')}")


def nvl_allocation(hint: Buffer, ranks_per_node: int) -> Buffer:
    """The NVL ``cudaMalloc``: ``num_nvl_bytes`` (the hint's regions) + barrier signals
    (``max_nvl_peers`` ints) + buffer pointers + barrier signal pointers (``max_nvl_peers``
    pointers each), ``uccl_ep.cc:447-449, 483-498``: DeepEP V1's constructor arithmetic
    (:mod:`epbuf.backends.deepep_v1.memory`) with ``max_nvl_peers`` = ``LOCAL_WORLD_SIZE``
    (``buffer.py:153``, ``uccl_ep.cc:358-359``) in place of DeepEP's 8. The constructor
    requires ``num_nvl_bytes % 128 == 0`` (``uccl_ep.cc:459``), so a run needs the rounding too."""
    extra = _deepep.nvl_metadata_regions(ranks_per_node, cite("src/uccl_ep.cc", "447-449, 483-487"))
    return _deepep.nvl_buffer_with(hint, extra, cite("src/uccl_ep.cc", "483-498"))


def rdma_allocation(regions: list[Region], num_rdma_bytes: int, in_host: bool, why: str) -> Buffer:
    """The RDMA buffer: ``max(num_rdma_bytes, 1)`` bytes (``uccl_ep.cc:281``), so a zero hint
    (intranode normal mode) still allocates one byte."""
    if num_rdma_bytes == 0:
        regions = [Region(name="placeholder", num_bytes=1, num_bytes_used=1,
                          formula="max(num_rdma_bytes = 0, 1): a valid pointer even without RDMA",
                          source=cite("src/uccl_ep.cc", "281"))]
    name = "RDMA buffer (pinned host)" if in_host else "RDMA buffer"
    # A run needs num_rdma_bytes % 128 == 0 (uccl_ep.cc:462): the real need is the used bytes aligned to 128.
    alignment = NUM_BUFFER_ALIGNMENT_BYTES if num_rdma_bytes else 1
    return Buffer.combine(name, regions, "sum", alignment, source=f"{cite('src/uccl_ep.cc', '278-315')}: {why}")


def workspace_allocation() -> Buffer:
    """``cudaMalloc(&workspace, NUM_WORKSPACE_BYTES)`` (``uccl_ep.cc:517-522``): 32 MiB, as
    DeepEP V1 allocates too (the same buffer, :func:`epbuf.backends.deepep_v1.memory.workspace_buffer`)."""
    return _deepep.workspace_buffer(cite("src/uccl_ep.cc", "517-522"))


def device_runtime_allocation(ranks_per_node: int, atomic_in_host: bool, atomic_why: str) -> Buffer:
    """UCCL-only device memory: the atomic buffer (when on the device), the FIFO heads and
    tail caches, the D2H handle arrays (managed memory, prefetched to the device) and the
    IPC RDMA base-pointer table."""
    fifos = num_d2h_channels()
    fifo_src = cite("src/fifo.cpp", "21-24")
    regions = []
    if not atomic_in_host:
        regions.append(Region(name="atomic buffer", num_bytes=K_ATOMIC_BUFFER_SIZE, num_bytes_used=K_ATOMIC_BUFFER_SIZE,
                              formula=f"kAtomicBufferSize = {format_int(K_ATOMIC_BUFFER_SIZE)} B, proxy thread 0: "
                                      + atomic_why, source=cite("src/uccl_proxy.cpp", "67-100")))
    regions += [
        Region(name="FIFO heads", num_bytes=fifos * UINT64_BYTES, num_bytes_used=fifos * UINT64_BYTES,
               formula=f"{K_NUM_PROXY_THS} proxies x {K_CHANNEL_PER_PROXY} FIFOs x 8 B (gpuCalloc)", source=fifo_src),
        Region(name="FIFO tail caches", num_bytes=fifos * UINT64_BYTES, num_bytes_used=fifos * UINT64_BYTES,
               formula=f"{K_NUM_PROXY_THS} proxies x {K_CHANNEL_PER_PROXY} FIFOs x 8 B (gpuCalloc)", source=fifo_src),
        Region(name="D2H handles (managed)", num_bytes=fifos * D2H_HANDLE_BYTES,
               num_bytes_used=fifos * D2H_HANDLE_BYTES,
               formula=f"{fifos} channels x sizeof(D2HHandle) {D2H_HANDLE_BYTES} B (cudaMallocManaged, prefetched)",
               source=cite("src/uccl_ep.cc", "387-389")),
        Region(name="D2H handle table (managed)", num_bytes=fifos * POINTER_BYTES, num_bytes_used=fifos * POINTER_BYTES,
               formula=f"{fifos} channels x 8 B (cudaMallocManaged, prefetched)",
               source=cite("src/uccl_ep.cc", "391-392")),
        Region(name="IPC RDMA base pointers", num_bytes=ranks_per_node * POINTER_BYTES,
               num_bytes_used=ranks_per_node * POINTER_BYTES,
               formula=f"max_nvl_peers {ranks_per_node} x 8 B", source=cite("src/uccl_ep.cc", "440-443")),
    ]
    return Buffer.combine("UCCL proxies and runtime", regions, "sum", 1,
                          source=f"{cite('src/uccl_proxy.cpp', '14-100')}; {cite('src/uccl_ep.cc', '384-443')}")


def host_allocation(atomic_in_host: bool, atomic_why: str) -> Buffer:
    """Pinned host memory per GPU: the FIFO triggers and tails, the atomic buffer (when on the
    host) and the mapped receive counters (``uccl_ep.cc:524-547``)."""
    fifos = num_d2h_channels()
    fifo_src = cite("src/fifo.cpp", "21-24")
    counters = UINT64_BYTES + NUM_MAX_LOCAL_EXPERTS * INT_BYTES + INT_BYTES
    regions = [
        Region(name="FIFO triggers", num_bytes=fifos * K_QUEUE_SIZE * PROXY_TRIGGER_BYTES,
               num_bytes_used=fifos * K_QUEUE_SIZE * PROXY_TRIGGER_BYTES,
               formula=f"{K_NUM_PROXY_THS} proxies x {K_CHANNEL_PER_PROXY} FIFOs x kQueueSize {K_QUEUE_SIZE} x "
                       f"{PROXY_TRIGGER_BYTES} B (cudaHostAlloc, mapped)", source=fifo_src),
        Region(name="FIFO tails", num_bytes=fifos * UINT64_BYTES, num_bytes_used=fifos * UINT64_BYTES,
               formula=f"{fifos} FIFOs x 8 B (cudaHostAlloc, mapped)", source=fifo_src),
    ]
    if atomic_in_host:
        regions.append(Region(name="atomic buffer", num_bytes=K_ATOMIC_BUFFER_SIZE, num_bytes_used=K_ATOMIC_BUFFER_SIZE,
                              formula=f"kAtomicBufferSize = {format_int(K_ATOMIC_BUFFER_SIZE)} B, proxy thread 0: "
                                      + atomic_why, source=cite("src/uccl_proxy.cpp", "67-100")))
    regions.append(Region(name="receive counters", num_bytes=counters, num_bytes_used=counters,
                          formula=f"8 B (int64) + NUM_MAX_LOCAL_EXPERTS {NUM_MAX_LOCAL_EXPERTS} x 4 B + 4 B "
                                  "(cudaMallocHost, mapped)", source=cite("src/uccl_ep.cc", "524-547")))
    return Buffer.combine("pinned host memory", regions, "sum", 1,
                          source="page-locked host allocations per GPU (cudaHostAlloc / cudaMallocHost)")
