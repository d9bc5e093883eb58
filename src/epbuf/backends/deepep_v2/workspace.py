"""DeepEP V2's workspace: the signals in front of the buffer in the symmetric allocation.

Generation A sums ``WorkspaceLayout::get_num_bytes()`` term by term (fixed maxima, independent
of the plan); ``"refactor"`` takes ``sizeof(EPSignals)``, laid out member by member as the
compiler does (:mod:`epbuf.backends._cstruct`). The constructor places ``align(workspace, 2 MiB)``
bytes (``"2026-04"``: unaligned) before the buffer and pins an unaligned host copy.
"""

from __future__ import annotations

from functools import lru_cache

from ...report import Buffer, Region
from ...units import align
from .._cstruct import struct_offsets
from .constants import (NUM_BARRIER_SIGNAL_BYTES, NUM_MAX_EXPERTS, NUM_MAX_INFLIGHT_AGRS, NUM_MAX_RANKS,
                        NUM_RDMA_ALIGNMENT_BYTES, NUM_TMA_ALIGNMENT_BYTES, WORKSPACE_NUM_MAX_CHANNELS_A,
                        WORKSPACE_NUM_MAX_CHANNELS_B)
from .versions import VERSIONS, get_generation  # noqa: F401 - VERSIONS: the doctests list every generation

__all__ = ["workspace_regions", "get_workspace_num_bytes", "num_workspace_bytes", "workspace_buffer"]


def _workspace_layout_terms() -> list[tuple[str, int, str]]:
    """``WorkspaceLayout::get_num_bytes()`` term by term (``layout.cuh:43-80 @dd758ca``):
    fixed maxima, independent of the plan. Its channel count is ``deep_ep::kNumMaxChannels``
    = 1024 (``compiled.cuh:83``), not ElasticBuffer's 1280."""
    r, e, ch, agrs = NUM_MAX_RANKS, NUM_MAX_EXPERTS, WORKSPACE_NUM_MAX_CHANNELS_A, NUM_MAX_INFLIGHT_AGRS
    return [
        ("NVL barrier signals", NUM_BARRIER_SIGNAL_BYTES, "kNumBarrierSignalBytes = 16 (:46)"),
        ("notify reduction", (r + e) * 8, f"(kNumMaxRanks {r} + kNumMaxExperts {e}) x int64 (:49)"),
        ("scale-up rank send/recv counts", r * 8 * 2, f"{r} x int64 x 2 (:53)"),
        ("scale-up expert send/recv counts", e * 8 * 2, f"{e} x int64 x 2 (:55)"),
        ("scale-up atomic sender counts", r * 4, f"{r} x int (:58)"),
        ("scale-out rank send/recv counts", r * 4 * 2, f"{r} x int x 2 (:62)"),
        ("scale-out expert send/recv counts", e * 4 * 2, f"{e} x int x 2 (:64)"),
        ("scale-out channel signaled tails", r * ch * 8, f"{r} ranks x kNumMaxChannels {ch} x int64 (:67)"),
        ("channel scale-up tails", r * ch * 4, f"{r} ranks x kNumMaxChannels {ch} x int (:71)"),
        ("PP prev/next send/recv counts", 2 * 2 * 8, "2 x 2 x int64 (:74)"),
        ("AGRS signals", (agrs + 1) * r * 4, f"(kNumMaxInflightAGRS {agrs} + 1) x {r} x int (:77)"),
    ]


def _ep_signals_terms() -> list[tuple[str, int, str]]:
    """``sizeof(EPSignals)`` member by member (``workspace.cuh:9-22 @def8651``), laid out as
    the compiler does; ``alignas(64)`` rounds the end."""
    r, e, ch = NUM_MAX_RANKS, NUM_MAX_EXPERTS, WORKSPACE_NUM_MAX_CHANNELS_B
    _, barrier = struct_offsets([("nvl_barrier_counter", 8, 8), ("nvl_barrier_signals", 2 * 4, 4)],
                                NUM_RDMA_ALIGNMENT_BYTES)
    members = [
        ("barrier_signals", barrier, NUM_RDMA_ALIGNMENT_BYTES,
         "BarrierSignals: alignas(64) { u64 counter; int signals[2]; } (barrier.cuh:11-22)"),
        ("notify_reduction", (r + e) * 8, 8, f"int64[kNumMaxRanks {r} + kNumMaxExperts {e}]"),
        ("scaleup_rank_expert_count", 2 * (r + e) * 8, 8, f"int64[2][{r} + {e}]"),
        ("scaleup_atomic_sender_count", r * 4, 4, f"int[{r}]"),
        ("scaleout_rank_expert_count", 2 * (r + e) * 4, 4, f"int[2][{r} + {e}]"),
        ("scaleout_channel_signaled_tail", ch * r * 8, 8, f"int64[kNumMaxChannels {ch}][{r}]"),
        ("channel_scaleup_tail", ch * r * 4, 4, f"int[{ch}][{r}]"),
        ("lb_chunk_idx_counter", 4, 4, "int"),
    ]
    offsets, size = struct_offsets([(name, n, a) for name, n, a, _ in members], NUM_RDMA_ALIGNMENT_BYTES)
    terms: list[tuple[str, int, str]] = []
    cursor = 0
    for name, num_bytes, _, formula in members:
        if offsets[name] > cursor:
            terms.append(("padding", offsets[name] - cursor, "member alignment"))
        terms.append((name, num_bytes, f"{formula} at offset {offsets[name]}"))
        cursor = offsets[name] + num_bytes
    if size > cursor:
        terms.append(("padding", size - cursor, "alignas(kNumRDMAAlignmentBytes = 64) tail"))
    return terms


def workspace_regions(version: str | None = None) -> tuple[Region, ...]:
    """The workspace's terms as regions (their sum, before the generation's rounding, is the
    raw workspace: ``WorkspaceLayout`` terms or ``EPSignals`` members and padding)."""
    gen = get_generation(version)
    terms = _workspace_layout_terms() if gen.workspace_kind == "WorkspaceLayout" else _ep_signals_terms()
    return tuple(Region(name=name, num_bytes=n, num_bytes_used=n, formula=formula, source=gen.sources.workspace)
                 for name, n, formula in terms)


def get_workspace_num_bytes(version: str | None = None) -> int:
    """``WorkspaceLayout::get_num_bytes()`` / ``EPWorkspaceLayout::get_num_bytes()`` =
    ``sizeof(EPSignals)``: the pinned host workspace size. The first release rounded it to
    32 bytes inside ``get_num_bytes`` ("Ensure LDG.256 work", ``layout.cuh:79-80 @b306af0``).

    >>> [get_workspace_num_bytes(v) for v in VERSIONS]
    [12820544, 12820528, 15831168]
    """
    gen = get_generation(version)
    raw = sum(r.num_bytes for r in workspace_regions(gen.id))
    return align(raw, NUM_TMA_ALIGNMENT_BYTES) if gen.id == "2026-04" else raw


def num_workspace_bytes(version: str | None = None) -> int:
    """The device workspace in front of the buffer: ``align(get_num_bytes(), 2 MiB)``
    (``buffer.hpp:103-105 @dd758ca``, ``ep.hpp:70-71 @def8651``); the first release used
    ``get_num_bytes()`` as it is (``buffer.hpp:99-103 @b306af0``).

    >>> [num_workspace_bytes(v) for v in VERSIONS]
    [12820544, 14680064, 16777216]
    """
    gen = get_generation(version)
    return align(get_workspace_num_bytes(gen.id), gen.num_workspace_alignment_bytes)


@lru_cache(maxsize=None)
def workspace_buffer(gen_id: str) -> Buffer:
    """The workspace allocation of one generation, as :func:`report` lists it (it does not depend on the plan)."""
    gen = get_generation(gen_id)
    return Buffer.combine("workspace", workspace_regions(gen.id), "sum", gen.num_workspace_alignment_bytes,
                          source=f"{gen.sources.allocation}; {gen.sources.workspace}")
