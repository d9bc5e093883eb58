"""What DeepEP V1's legacy ``Buffer`` constructor allocates on the device besides the hinted bytes.

``Buffer::Buffer`` (``BUF:89-168`` at main ``dd758ca``, ``csrc/legacy/buffer.hpp``) makes two
device allocations:

* when ``num_nvl_bytes > 0`` (``BUF:132``), one NVL allocation of ``num_nvl_bytes`` plus three
  metadata tables placed after it (``BUF:133-135``): barrier signals (``NUM_MAX_NVL_PEERS``
  ints), the peers' buffer pointers and the peers' barrier signal pointers
  (``NUM_MAX_NVL_PEERS`` pointers each; sizes ``BUF:101-103``): 32 + 64 + 64 = 160 B. Before
  ``8da2d7b`` ("Fully remove barrier FIFO designs", #200, 2025-06-10) the first table was the
  task FIFO, ``NUM_MAX_FIFO_SLOTS`` = 32,768 ints (``csrc/deep_ep.cpp:22-24, 45`` and
  ``csrc/kernels/configs.cuh:5`` @ ``ebfe47e``): 131,072 + 64 + 64 = 131,200 B
  (:attr:`.versions.Version.nvl_barrier_signals`);
* always, the 32 MiB workspace, ``cudaMalloc(&workspace, LEGACY_NUM_WORKSPACE_BYTES)``
  (``BUF:148-150``; ``CPL:7``), unchanged since the initial commit.

It also pins three mapped host counters (``BUF:152-167``; host memory, not modelled here).
UCCL-EP's ``Buffer`` repeats the NVL metadata with its own ``max_nvl_peers`` and the same
workspace (:mod:`epbuf.backends.uccl_ep.memory` builds its rows with these functions).
"""

from __future__ import annotations

from ...errors import check_int
from ...report import Buffer, Region
from ...units import INT32_MAX, format_int
from .constants import INT_BYTES, NUM_MAX_NVL_PEERS, NUM_WORKSPACE_BYTES
from .versions import Version

__all__ = ["NUM_MAX_FIFO_SLOTS", "nvl_metadata_regions", "nvl_metadata_num_bytes", "nvl_metadata",
           "nvl_buffer_with", "nvl_allocation", "workspace_buffer", "workspace_allocation"]

POINTER_BYTES = 8  # sizeof(void*), sizeof(int*)
NUM_MAX_FIFO_SLOTS = 32768  # NUM_MAX_FIFO_SLOTS (csrc/kernels/configs.cuh:5 @ ebfe47e), removed by 8da2d7b


def nvl_metadata_regions(max_nvl_peers: int, source: str, num_fifo_slots: int = 0) -> list[Region]:
    """The three tables the constructor appends to the NVL allocation: barrier signals
    (``max_nvl_peers`` ints; ``num_fifo_slots`` ints of the task FIFO instead when non-zero),
    buffer pointers and barrier signal (task FIFO) pointers (``max_nvl_peers`` pointers each).
    DeepEP: ``max_nvl_peers`` = ``NUM_MAX_NVL_PEERS`` = 8 (``BUF:101-103``); UCCL-EP: its own.

    Raises:
        InvalidArgumentError: a count that is not an ``int`` >= 0 (``max_nvl_peers`` >= 1).
    """
    check_int("max_nvl_peers", max_nvl_peers, 1, INT32_MAX)
    check_int("num_fifo_slots", num_fifo_slots, 0, INT32_MAX)
    if num_fifo_slots:
        first = Region(name="task FIFO", num_bytes=num_fifo_slots * INT_BYTES, num_bytes_used=num_fifo_slots * INT_BYTES,
                       formula=f"NUM_MAX_FIFO_SLOTS {format_int(num_fifo_slots)} x 4 B (int)", source=source)
        last = "task FIFO pointers"
    else:
        first = Region(name="barrier signals", num_bytes=max_nvl_peers * INT_BYTES,
                       num_bytes_used=max_nvl_peers * INT_BYTES,
                       formula=f"max_nvl_peers {max_nvl_peers} x 4 B (int)", source=source)
        last = "barrier signal pointers"
    return [
        first,
        Region(name="buffer pointers", num_bytes=max_nvl_peers * POINTER_BYTES,
               num_bytes_used=max_nvl_peers * POINTER_BYTES,
               formula=f"max_nvl_peers {max_nvl_peers} x 8 B (void*)", source=source),
        Region(name=last, num_bytes=max_nvl_peers * POINTER_BYTES, num_bytes_used=max_nvl_peers * POINTER_BYTES,
               formula=f"max_nvl_peers {max_nvl_peers} x 8 B (int*)", source=source),
    ]


def _fifo_slots(v: Version) -> int:
    return 0 if v.nvl_barrier_signals else NUM_MAX_FIFO_SLOTS


def nvl_metadata_num_bytes(v: Version) -> int:
    """Bytes DeepEP V1 ``v`` adds to a non-zero NVL allocation: 160 (8da2d7b on), 131,200 before."""
    return sum(r.num_bytes for r in nvl_metadata_regions(NUM_MAX_NVL_PEERS, "", _fifo_slots(v)))


def nvl_buffer_with(hint: Buffer, metadata: list[Region], source: str) -> Buffer:
    """One NVL allocation: the hint's regions (``num_nvl_bytes``) followed by ``metadata``; the
    hint itself when ``num_nvl_bytes`` is 0, which allocates nothing (DeepEP ``BUF:132``, UCCL-EP
    ``uccl_ep.cc:483``). The constructor requires ``num_nvl_bytes % 128 == 0`` (``BUF:107``), so a
    run needs the hint's rounding too: its padding counts as used here."""
    if hint.num_bytes == 0:
        return hint
    regions = [r.replace(num_bytes_used=r.num_bytes) if r.name == "alignment padding" else r for r in hint.regions]
    return Buffer.combine(hint.name, regions + metadata, "sum", 1, source=f"{hint.source}; {source}")


def nvl_metadata(v: Version) -> list[Region]:
    """The metadata tables DeepEP V1 ``v`` appends to a non-zero NVL allocation
    (``BUF:101-103, 133-135``): :func:`nvl_metadata_regions` with ``NUM_MAX_NVL_PEERS`` and the
    version's first table (barrier signals, or the task FIFO before ``8da2d7b``)."""
    src = v.cite("BUF", "101-103, 132-135", "barrier signals" if v.nvl_barrier_signals else "task FIFO")
    return nvl_metadata_regions(NUM_MAX_NVL_PEERS, src, _fifo_slots(v))


def nvl_allocation(v: Version, hint: Buffer) -> Buffer:
    """The NVL allocation of DeepEP V1 ``v``: ``num_nvl_bytes`` (the hint, unchanged) + the
    metadata tables (``BUF:101-103, 133-135``), :func:`nvl_buffer_with`."""
    return nvl_buffer_with(hint, nvl_metadata(v), v.cite("BUF", "132-135", "Buffer constructor"))


def workspace_buffer(source: str) -> Buffer:
    """The ``workspace`` buffer: ``NUM_WORKSPACE_BYTES`` = 32 MiB, whatever the plan (DeepEP V1
    ``CPL:7``; UCCL-EP ``ep/include/ep_configs.cuh:7``), allocated at ``source``."""
    return Buffer.combine("workspace", [Region(name="workspace", num_bytes=NUM_WORKSPACE_BYTES,
                                               num_bytes_used=NUM_WORKSPACE_BYTES,
                                               formula="NUM_WORKSPACE_BYTES = 32 MiB", source=source)],
                          "sum", 1, source=source)


def workspace_allocation(v: Version) -> Buffer:
    """``cudaMalloc(&workspace, LEGACY_NUM_WORKSPACE_BYTES)`` of DeepEP V1 ``v`` (``BUF:148-150``)."""
    return workspace_buffer(v.cite("BUF", "148-150", "cudaMalloc(&workspace, NUM_WORKSPACE_BYTES)"))
