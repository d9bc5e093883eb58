"""DeepEP V2 (NVIDIA): the ``ElasticBuffer`` / ``EPBuffer`` size hint, exact to the byte.

Upstream: deepseek-ai/DeepEP. Three generations of the V2 size arithmetic are known;
``Plan.version`` picks one (``None`` = the newest, ``"refactor"``):

``"2026-04"`` — ``ElasticBuffer`` as first released
    b306af06afd412c88e51e71802951606e40b7358 ("[Public release 26/04] Introducing EPv2",
    2026-04-30). The hint is ``max(dispatch, combine)`` *not* rounded to 2 MiB, and the
    workspace is ``align(WorkspaceLayout::get_num_bytes(), 32)`` placed right before it.
    Aliases ``"b306af0"``.
``"2026-07"`` — ``ElasticBuffer`` with 2 MiB rounding
    a422b5a3693f (#637, 2026-05-21) through dd758caf451848bd150e1046af3d0a73e5fff38d
    (``main``, 2026-07-14; the size arithmetic is unchanged in between). Hint and workspace
    are each rounded up to 2 MiB. Aliases ``"a422b5a"``, ``"dd758ca"``.
``"refactor"`` — ``EPBuffer`` of the refactored tree
    ``deep_ep/include/deep_ep/layout/ep/token.cuh`` @ 1a1ffbac1f9ba94e1f731f7647b5d6353fb38ade
    and ``csrc/buffers/ep.hpp``, ``layout/ep/workspace.cuh`` @ def865146e95aa9ea223e277c0a8a4c6b81e5ac7
    (read from the public code index; newer than dd758ca, not dated). Every token record
    is additionally rounded up to 64 bytes for RDMA, and the workspace is
    ``sizeof(EPSignals)``. Aliases ``"1a1ffba"``, ``"def8651"``, ``"latest"``.

Citations are ``path:line @commit`` (``@b306af0``, ``@dd758ca``, ...); each
:class:`Generation` carries its own in :class:`Sources`.

What upstream computes
----------------------
A token record (``TokenLayout``) is ``hidden | SF packs | top-k idx (int32) | top-k
weights (fp32) | source global index | linked-list indices``, each part rounded up to
32 bytes (``kNumTMAAlignBytes``); in ``"refactor"`` the sum is rounded up again to 64
bytes (``kNumRDMAAlignmentBytes``). Combine records carry BF16 hidden and ``num_topk``
(idx, weight) slots but no source index. ``BufferLayout`` packs ``ranks x tokens``
records with no padding between them.

``calculate_buffer_size`` (what ``get_buffer_size_hint`` and the constructor call)
derives the logical domain ``(num_scaleout_ranks, num_scaleup_ranks)`` from the NCCL
communicator — world size and LSA (NVLink) team size — and ``allow_hybrid_mode``:

* *direct* mode (one scale-out rank): dispatch = receive ``N x T`` records plus a
  one-rank send buffer unless the scale-up domain is NVLink; combine = receive
  ``min(N, topk)`` (``allow_multiple_reduction``) or ``topk`` slots per token plus, off
  NVLink, an ``N``-rank send buffer (``topk``-fold without multiple reduction).
* *hybrid* mode (several scale-out ranks): scale-up receive ``su x (so*T)``, scale-out
  send ``1 x T`` and scale-out receive ``so x (T + kNumMaxChannels)``; combine mirrors it.

The hint is ``max(dispatch, combine)`` (the two phases reuse the buffer), rounded to
2 MiB from ``"2026-07"`` on. The top-k count 0 means 32, and FP8 dispatch reserves
``ceil(hidden / 32)`` 4-byte SF packs per token — an upper bound: a real FP8 dispatch
sends ``ceil(hidden / 128)`` packs (one fp32 scale per 128 elements, or UE8M0 scales per
32 elements packed four to an int). The constructor then allocates one symmetric
region ``[workspace | buffer]``; :func:`report` shows both.

The experts count is not an input of the hint; it only enters the limits.
"""

from __future__ import annotations

from functools import lru_cache
from operator import attrgetter

from .._record import Record
from ..errors import Checker, InvalidArgumentError, Problem
from ..report import Buffer, Field, Finding, LimitCheck, Quantity, RecordLayout, Region, Report, Summary
from ..units import INT32_MAX, INT64_MAX, MiB, align, ceil_div, format_int
from ._cstruct import struct_offsets

__all__ = [
    "VERSIONS",
    "ALIASES",
    "DEFAULT_VERSION",
    "Sources",
    "Generation",
    "get_generation",
    "TokenLayout",
    "BufferLayout",
    "Domain",
    "get_physical_domain_size",
    "get_logical_domain_size",
    "logical_domain",
    "plan_domain",
    "get_dispatch_token_layout",
    "get_combine_token_layout",
    "dispatch_buffer_layouts",
    "combine_buffer_layouts",
    "get_dispatch_buffer_size",
    "get_combine_buffer_size",
    "calculate_buffer_size",
    "get_buffer_size_hint",
    "effective_topk",
    "element_size",
    "hint_num_sf_packs",
    "actual_num_sf_packs",
    "workspace_regions",
    "get_workspace_num_bytes",
    "num_workspace_bytes",
    "check_record",
    "report",
    "summarize",
]

# --- constants shared by every generation ------------------------------------------------
# ptx::kNumTMAAlignBytes (ptx.cuh:15-16 @dd758ca) = kNumTMAAlignmentBytes (compiled.cuh:67 @def8651):
# "More than TMA, `longlong4` requires 32 bytes aligned".
NUM_TMA_ALIGNMENT_BYTES = 32
# kNumRDMAAlignmentBytes (compiled.cuh:68 @def8651); records are rounded to it only in "refactor".
NUM_RDMA_ALIGNMENT_BYTES = 64
# symmetric::kNumAlignmentBytes = 2097152 (symmetric.hpp:16 @dd758ca) = kNumAllocationAlignmentBytes
# (compiled.cuh:69 @def8651).
NUM_ALLOCATION_ALIGNMENT_BYTES = 2 * MiB
# union sf_pack_t { float fp32; int ue8m0x4; } (compiled.cuh:74-77 @dd758ca, :59-62 @def8651).
SF_PACK_BYTES = 4
# sizeof(ptx::mbarrier): the host placeholder is `struct alignas(8) mbarrier { uint64_t }` (ptx.cuh:10-12
# @dd758ca). Only the shared-memory staging record (`get_num_bytes<true>`) holds one, in a 32-byte slot.
MBARRIER_BYTES = 8
TOPK_IDX_BYTES = 4  # "the top-k index is always 32-bit" inside records (layout.cuh:181 @dd758ca)
TOPK_WEIGHT_BYTES = 4  # sizeof(float)
SRC_IDX_BYTES = 4  # sizeof(int): rank_idx * kNumMaxTokensPerRank + token_idx
LINKED_LIST_IDX_BYTES = 4  # sizeof(int), one per top-k slot (hybrid dispatch)
# ElasticBuffer / EPBuffer::kNumMaxChannels = kNumMaxChannelsPerSM (8) * kNumMaxSMs (160)
# (buffer.hpp:57-59 @dd758ca, ep.hpp:41-43 @def8651): the hint's scale-out slack per rank.
NUM_MAX_CHANNELS_PER_SM = 8
NUM_MAX_SMS = 160
NUM_MAX_CHANNELS = NUM_MAX_CHANNELS_PER_SM * NUM_MAX_SMS
NUM_MAX_RANKS = 1024  # WorkspaceLayout::kNumMaxRanks (layout.cuh:19 @dd758ca), kNumMaxRanks (compiled.cuh:74 @def8651)
NUM_MAX_EXPERTS = 2048  # WorkspaceLayout::kNumMaxExperts (layout.cuh:20), EPSignals::kNumMaxExperts (workspace.cuh:10)
NUM_MAX_EXPERTS_PER_RANK_ELASTIC = 256  # WorkspaceLayout::kNumMaxExpertsPerRank (layout.cuh:21 @b306af0, @dd758ca)
NUM_MAX_EXPERTS_PER_RANK_EP = 512  # EPSignals::kNumMaxExpertsPerRank (workspace.cuh:11 @def8651)
# "there are lots of `kNumTopk <= 32` restrictions, so we use 32 to calculate token size"
# (buffer.hpp:662-663 @dd758ca); the kernels statically assert kNumTopk <= 32 (one warp lane each).
NUM_MAX_TOPK = 32
NUM_DEFAULT_TOPK = NUM_MAX_TOPK
HINT_SF_GRANULARITY = 32  # hint: ceil_div(hidden, 32) SF packs, "An approximation" (buffer.hpp:672 @dd758ca)
FP8_BLOCK_SIZE = 128  # per_token_cast_to_fp8: one fp32 scale per 128 elements (deep_ep/utils/math.py:31-39 @dd758ca)
UE8M0_PER_PACK = 4  # int ue8m0x4: four UE8M0 scales in one pack
NUM_MAX_SCALEOUT_RANKS_KERNEL = 32  # hybrid kernels: EP_STATIC_ASSERT(kNumScaleoutRanks <= 32)
NUM_MAX_SCALEUP_RANKS_KERNEL = 64  # hybrid kernels: EP_STATIC_ASSERT(kNumScaleupRanks <= 64) (64-bit lane masks)
NUM_NOTIFY_WARPS = 4  # kNumNotifyWarps (csrc/kernels/elastic/dispatch.hpp:130 @dd758ca)
COMBINE_HIDDEN_GRANULARITY = 32 * 16 // 2  # kHidden % (32 * sizeof(int4) / sizeof(nv_bfloat16)) == 0 -> 256
# Workspace maxima of generation A (WorkspaceLayout, layout.cuh:19-24 @dd758ca and compiled.cuh:83).
WORKSPACE_NUM_MAX_CHANNELS_A = 1024  # deep_ep::kNumMaxChannels: NOT the 1280 of ElasticBuffer
NUM_MAX_INFLIGHT_AGRS = 32
NUM_BARRIER_SIGNAL_BYTES = 16
# EPSignals (workspace.cuh:9-22 @def8651): alignas(kNumRDMAAlignmentBytes), kNumMaxChannels = 1280.
WORKSPACE_NUM_MAX_CHANNELS_B = 1280

_DTYPE_BYTES = {"float8_e4m3fn": 1, "bfloat16": 2, "uint8": 1}


# --- generations -----------------------------------------------------------------------
class Sources(Record):
    """Upstream ``path:line @commit`` of each formula and limit of one generation."""

    constants: str
    workspace_limits: str
    token_layout: str
    token_num_bytes: str
    token_getters: str
    buffer_layout: str
    dispatch_token_layout: str
    combine_token_layout: str
    dispatch_buffer_size: str
    combine_buffer_size: str
    calculate_buffer_size: str
    hint_asserts: str
    hint_alignment: str
    domain: str
    workspace: str
    allocation: str
    host_workspace: str
    python_hint: str
    buffer_checks: str
    kernel_topk: str
    kernel_scaleout: str
    kernel_scaleup: str
    kernel_notify: str
    kernel_combine_hidden: str
    kernel_src_idx: str


class Generation(Record):
    """One generation of DeepEP V2's size arithmetic.

    Attributes:
        id: the ``version`` id (``"2026-04"``, ``"2026-07"``, ``"refactor"``).
        commit: full hash of the commit the formulas follow.
        date: commit date, or ``""`` where unknown.
        buffer_class: ``"ElasticBuffer"`` or ``"EPBuffer"``.
        summary: one line for people.
        num_rdma_alignment_bytes: the record rounding after the 32-byte parts (1 = none).
        num_hint_alignment_bytes: the hint's rounding (2 MiB, or 1 in the first release).
        num_max_experts_per_rank: ``kNumMaxExpertsPerRank`` (256, then 512).
        workspace_kind: ``"WorkspaceLayout"`` (a sum of terms) or ``"EPSignals"`` (a struct).
        num_workspace_alignment_bytes: rounding of the workspace allocation (32 inside
            ``get_num_bytes()`` in the first release, 2 MiB after).
        sources: citations.
    """

    id: str
    commit: str
    date: str
    buffer_class: str
    summary: str
    num_rdma_alignment_bytes: int
    num_hint_alignment_bytes: int
    num_max_experts_per_rank: int
    workspace_kind: str
    num_workspace_alignment_bytes: int
    sources: Sources

    @property
    def description(self) -> str:
        when = f", {self.date}" if self.date else ""
        return f"{self.buffer_class} @ {self.commit[:10]}{when}: {self.summary}"


def _sources_elastic(commit: str, lines: dict[str, str]) -> Sources:
    at = f" @{commit[:7]}"
    layout = "deep_ep/include/deep_ep/common/layout.cuh"
    buffer = "csrc/elastic/buffer.hpp"
    impls = "deep_ep/include/deep_ep/impls"
    return Sources(
        constants=f"deep_ep/include/deep_ep/common/ptx.cuh:{lines['ptx']}, compiled.cuh:{lines['compiled']}, "
                  f"{buffer}:{lines['channels']}{at}",
        workspace_limits=f"{layout}:19-21, :36-40{at}",
        token_layout=f"{layout}:{lines['token_ctor']}{at}",
        token_num_bytes=f"{layout}:{lines['token_num_bytes']}{at}",
        token_getters=f"{layout}:{lines['token_getters']}{at}",
        buffer_layout=f"{layout}:{lines['buffer_layout']}{at}",
        dispatch_token_layout=f"csrc/kernels/elastic/dispatch.hpp:{lines['dispatch_token']}{at}",
        combine_token_layout=f"csrc/kernels/elastic/combine.hpp:109-112{at}",
        dispatch_buffer_size=f"{buffer}:{lines['dispatch_size']}{at}",
        combine_buffer_size=f"{buffer}:{lines['combine_size']}{at}",
        calculate_buffer_size=f"{buffer}:{lines['calculate']}{at}",
        hint_asserts=f"{buffer}:{lines['hint_asserts']}{at}",
        hint_alignment=f"{buffer}:{lines['hint_alignment']}{at}",
        domain=f"csrc/kernels/backend/nccl.cu:{lines['domain']}{at}",
        workspace=f"{layout}:{lines['workspace']}{at}",
        allocation=f"{buffer}:{lines['allocation']}{at}",
        host_workspace=f"{buffer}:{lines['host_workspace']}{at}",
        python_hint=f"deep_ep/buffers/elastic.py:{lines['python']}{at}",
        buffer_checks=f"{buffer}:{lines['checks']}{at}",
        kernel_topk=f"{impls}/dispatch.cuh:{lines['k_topk_direct']}, hybrid_dispatch.cuh:{lines['k_topk_hybrid']}{at}",
        kernel_scaleout=f"{impls}/hybrid_dispatch.cuh:{lines['k_scaleout_d']}, hybrid_combine.cuh:{lines['k_scaleout_c']}{at}",
        kernel_scaleup=f"{impls}/hybrid_dispatch.cuh:{lines['k_scaleup_d']}, hybrid_combine.cuh:{lines['k_scaleup_c']}{at}",
        kernel_notify=f"{impls}/hybrid_dispatch.cuh:{lines['k_notify']}{at}",
        kernel_combine_hidden=f"{impls}/combine.cuh:109, hybrid_combine.cuh:219{at}",
        kernel_src_idx=f"{impls}/dispatch.cuh:{lines['k_src']}{at}",
    )


_SRC_2026_04 = _sources_elastic("b306af06afd4", {
    "ptx": "12,16", "compiled": "74-77,83", "channels": "56-58",
    "token_ctor": "187-200", "token_num_bytes": "202-209", "token_getters": "219-249", "buffer_layout": "252-312",
    "dispatch_token": "209-212", "dispatch_size": "529-557", "combine_size": "559-593", "calculate": "595-629",
    "hint_asserts": "600,603", "hint_alignment": "627-628 (no alignment)", "domain": "51-62, 111-119",
    "workspace": "43-81", "allocation": "98-103, 114", "host_workspace": "118", "python": "240-264",
    "checks": "695, 899-902, 1183-1185",
    "k_topk_direct": "92,309,366", "k_topk_hybrid": "120,386,550,609", "k_scaleout_d": "331,480", "k_scaleout_c": "582",
    "k_scaleup_d": "598", "k_scaleup_c": "178,399", "k_notify": "260-261", "k_src": "326",
})
_SRC_2026_07 = _sources_elastic("dd758caf4518", {
    "ptx": "10-16", "compiled": "74-77,83", "channels": "57-59",
    "token_ctor": "186-199", "token_num_bytes": "201-208", "token_getters": "218-248", "buffer_layout": "251-311",
    "dispatch_token": "136-139", "dispatch_size": "586-614", "combine_size": "616-650", "calculate": "652-686",
    "hint_asserts": "657,660", "hint_alignment": "684-685", "domain": "49-60, 117-125",
    "workspace": "43-80", "allocation": "97-118, 129", "host_workspace": "133", "python": "380-406",
    "checks": "767, 962-966, 1253-1256",
    "k_topk_direct": "93,315,372", "k_topk_hybrid": "121,391,555,614", "k_scaleout_d": "336,485", "k_scaleout_c": "588",
    "k_scaleup_d": "603", "k_scaleup_c": "178,405", "k_notify": "261-262", "k_src": "332",
})
_EP_HPP = "csrc/buffers/ep.hpp"
_TOKEN_CUH = "deep_ep/include/deep_ep/layout/ep/token.cuh"
_IMPLS_EP = "deep_ep/include/deep_ep/impls/ep"
_SRC_REFACTOR = Sources(
    constants="deep_ep/include/deep_ep/common/compiled.cuh:59-62,67-71,74-78 @def8651; csrc/buffers/ep.hpp:41-43 @def8651",
    workspace_limits="deep_ep/include/deep_ep/layout/ep/workspace.cuh:10-12, 42-46 @def8651",
    token_layout=f"{_TOKEN_CUH}:17-30 @1a1ffba",
    token_num_bytes=f"{_TOKEN_CUH}:32-41 @1a1ffba",
    token_getters=f"{_TOKEN_CUH}:55-81 @1a1ffba",
    buffer_layout=f"{_TOKEN_CUH}:84-144 @1a1ffba",
    dispatch_token_layout="csrc/kernels/ep/dispatch.hpp:26-29 @2578e50",
    combine_token_layout="csrc/kernels/ep/combine.hpp:19-22 @855fa9d",
    dispatch_buffer_size=f"{_EP_HPP}:183-211 @def8651",
    combine_buffer_size=f"{_EP_HPP}:213-247 @def8651",
    calculate_buffer_size=f"{_EP_HPP}:249-283 @def8651",
    hint_asserts=f"{_EP_HPP}:254,257 @def8651",
    hint_alignment=f"{_EP_HPP}:281-282 @def8651",
    domain="csrc/kernels/comm/context.cpp:52-63 @855fa9d",
    workspace="deep_ep/include/deep_ep/layout/ep/workspace.cuh:9-23, 49-51 @def8651; "
              "layout/common/barrier.cuh:11-22 @def8651",
    allocation=f"{_EP_HPP}:66-77 @def8651",
    host_workspace=f"{_EP_HPP}:89 @def8651",
    python_hint="deep_ep/buffers/ep.py EPBuffer.get_buffer_size_hint @13b3abaa",
    buffer_checks=f"{_EP_HPP} EPBuffer::dispatch/combine: get_*_buffer_size(...) <= num_buffer_bytes @def8651",
    kernel_topk=f"{_IMPLS_EP}/dispatch.cuh @def8651, hybrid_dispatch.cuh @855fa9d: EP_STATIC_ASSERT(kNumTopk <= 32)",
    kernel_scaleout=f"{_IMPLS_EP}/hybrid_dispatch.cuh @855fa9d: EP_STATIC_ASSERT(kNumScaleoutRanks <= 32)",
    kernel_scaleup=f"{_IMPLS_EP}/hybrid_dispatch.cuh, hybrid_combine.cuh @855fa9d: EP_STATIC_ASSERT(kNumScaleupRanks <= 64)",
    kernel_notify=f"{_IMPLS_EP}/hybrid_dispatch.cuh @855fa9d: kNumScaleupRanks + kNumExpertsPerRank <= kNumNotifyWarps * 32",
    kernel_combine_hidden=f"{_IMPLS_EP}/combine.cuh @855fa9d: kHidden % (32 * sizeof(int4) / sizeof(nv_bfloat16)) == 0",
    kernel_src_idx=f"{_IMPLS_EP}/hybrid_dispatch.cuh @855fa9d: int rank_idx * kNumMaxTokensPerRank + token_idx",
)

_GENERATIONS = {
    "2026-04": Generation(
        id="2026-04", commit="b306af06afd412c88e51e71802951606e40b7358", date="2026-04-30",
        buffer_class="ElasticBuffer",
        summary="first EPv2 release; the hint is max(dispatch, combine) without 2 MiB rounding, "
                "the workspace align(WorkspaceLayout::get_num_bytes(), 32)",
        num_rdma_alignment_bytes=1, num_hint_alignment_bytes=1,
        num_max_experts_per_rank=NUM_MAX_EXPERTS_PER_RANK_ELASTIC,
        workspace_kind="WorkspaceLayout", num_workspace_alignment_bytes=NUM_TMA_ALIGNMENT_BYTES,
        sources=_SRC_2026_04,
    ),
    "2026-07": Generation(
        id="2026-07", commit="dd758caf451848bd150e1046af3d0a73e5fff38d", date="2026-07-14",
        buffer_class="ElasticBuffer",
        summary="a422b5a (2026-05-21) through dd758ca (main, 2026-07-14); hint and workspace rounded to 2 MiB",
        num_rdma_alignment_bytes=1, num_hint_alignment_bytes=NUM_ALLOCATION_ALIGNMENT_BYTES,
        num_max_experts_per_rank=NUM_MAX_EXPERTS_PER_RANK_ELASTIC, workspace_kind="WorkspaceLayout",
        num_workspace_alignment_bytes=NUM_ALLOCATION_ALIGNMENT_BYTES, sources=_SRC_2026_07,
    ),
    "refactor": Generation(
        id="refactor", commit="1a1ffbac1f9ba94e1f731f7647b5d6353fb38ade", date="",
        buffer_class="EPBuffer",
        summary="refactored tree (token.cuh @1a1ffba, ep.hpp and workspace.cuh @def8651, newer than dd758ca); "
                "records rounded to 64 bytes for RDMA, sizeof(EPSignals) workspace, 512 experts per rank",
        num_rdma_alignment_bytes=NUM_RDMA_ALIGNMENT_BYTES, num_hint_alignment_bytes=NUM_ALLOCATION_ALIGNMENT_BYTES,
        num_max_experts_per_rank=NUM_MAX_EXPERTS_PER_RANK_EP, workspace_kind="EPSignals",
        num_workspace_alignment_bytes=NUM_ALLOCATION_ALIGNMENT_BYTES, sources=_SRC_REFACTOR,
    ),
}

#: ``version`` id -> what it stands for (commit, class, what changed).
VERSIONS: dict[str, str] = {gid: gen.description for gid, gen in _GENERATIONS.items()}
#: Other accepted spellings of the ids (commit prefixes).
ALIASES: dict[str, str] = {
    "b306af0": "2026-04",
    "a422b5a": "2026-07",
    "dd758ca": "2026-07",
    "1a1ffba": "refactor",
    "def8651": "refactor",
    "latest": "refactor",
}
DEFAULT_VERSION = "refactor"


def _lookup(version: object) -> Generation | None:
    """The generation of an id or alias (``None``: the newest), or ``None`` when unknown."""
    if version is None:
        return _GENERATIONS[DEFAULT_VERSION]
    if not isinstance(version, str):
        return None
    return _GENERATIONS.get(ALIASES.get(version, version))


def _version_problem(version: object) -> Problem | None:
    if _lookup(version) is not None:
        return None
    return Problem("version", version,
                   f"unknown DeepEP V2 version; choose one of {', '.join(VERSIONS)} "
                   f"(aliases: {', '.join(ALIASES)}); default {DEFAULT_VERSION}")


def get_generation(version: str | None = None) -> Generation:
    """The generation for a ``version`` id or alias (``None``: the newest, ``"refactor"``).

    >>> get_generation("dd758ca").id
    '2026-07'

    Raises:
        InvalidArgumentError: an id that is neither in :data:`VERSIONS` nor in :data:`ALIASES`.
    """
    gen = _lookup(version)
    if gen is None:
        raise InvalidArgumentError([_version_problem(version)])
    return gen


# --- records ---------------------------------------------------------------------------
class TokenLayout(Record):
    """One token record, as ``TokenLayout`` computes it (``layout.cuh:179-249 @dd758ca``,
    ``token.cuh:10-82 @1a1ffba``).

    Attributes:
        num_hidden_bytes: ``hidden * element size`` (upstream asserts ``% 32 == 0``).
        num_sf_bytes: ``num_sf_packs * sizeof(sf_pack_t)`` (4-byte packs).
        num_topk: top-k slots.
        with_metadata: dispatch records carry the source global index and ``num_topk``
            linked-list indices; combine records do not (they still reserve the top-k
            index and weight slots).
        num_rdma_alignment_bytes: rounding of the whole record: 64 in ``"refactor"``,
            1 (none) in ``ElasticBuffer`` generations.

    >>> t = TokenLayout(num_hidden_bytes=7168, num_sf_bytes=896, num_topk=8, with_metadata=True)
    >>> t.num_metadata_bytes, t.num_bytes(), t.num_bytes(with_mbarrier=True)
    (100, 8192, 8224)
    """

    num_hidden_bytes: int
    num_sf_bytes: int
    num_topk: int
    with_metadata: bool
    num_rdma_alignment_bytes: int = NUM_RDMA_ALIGNMENT_BYTES

    @property
    def num_metadata_bytes(self) -> int:
        """``num_topk * (sizeof(int) + sizeof(float)) + (with_metadata ? (1 + num_topk) * sizeof(int) : 0)``
        (``layout.cuh:194-195 @dd758ca``, ``token.cuh:25-26``)."""
        topk_slots = self.num_topk * (TOPK_IDX_BYTES + TOPK_WEIGHT_BYTES)
        return topk_slots + ((SRC_IDX_BYTES + self.num_topk * LINKED_LIST_IDX_BYTES) if self.with_metadata else 0)

    @property
    def num_data_bytes(self) -> int:
        """The three 32-byte aligned parts, rounded to ``num_rdma_alignment_bytes`` (``token.cuh:34-37``;
        without the rounding this is generation A's ``get_num_bytes<false>``, ``layout.cuh:203-205``)."""
        parts = (align(self.num_hidden_bytes, NUM_TMA_ALIGNMENT_BYTES)
                 + align(self.num_sf_bytes, NUM_TMA_ALIGNMENT_BYTES)
                 + align(self.num_metadata_bytes, NUM_TMA_ALIGNMENT_BYTES))
        return align(parts, self.num_rdma_alignment_bytes)

    @property
    def num_rdma_padding_bytes(self) -> int:
        """Bytes the 64-byte RDMA rounding adds (0 or 32; always 0 without it)."""
        return self.num_data_bytes - self.mbarrier_offset_unrounded

    def num_bytes(self, with_mbarrier: bool = False) -> int:
        """``get_num_bytes<kWithMBarrier>()``: the record stride. Buffers use ``false``; the
        shared-memory staging slot adds ``align(sizeof(mbarrier), 32)`` = 32 bytes."""
        return self.num_data_bytes + align(MBARRIER_BYTES if with_mbarrier else 0, NUM_TMA_ALIGNMENT_BYTES)

    # Offsets exactly as the pointer getters compute them (layout.cuh:218-248 @dd758ca, token.cuh:55-81).
    @property
    def sf_offset(self) -> int:
        """``get_sf_ptr``: ``align(num_hidden_bytes, 32)``. With no SF bytes it equals the metadata offset."""
        return align(self.num_hidden_bytes, NUM_TMA_ALIGNMENT_BYTES)

    @property
    def metadata_offset(self) -> int:
        """``get_metadata_ptr`` = ``get_topk_idx_ptr``: after ``align(num_sf_bytes, 32)``."""
        return self.sf_offset + align(self.num_sf_bytes, NUM_TMA_ALIGNMENT_BYTES)

    @property
    def topk_idx_offset(self) -> int:
        return self.metadata_offset

    @property
    def topk_weights_offset(self) -> int:
        """``get_topk_weights_ptr``: ``metadata + num_topk * sizeof(int)``."""
        return self.metadata_offset + TOPK_IDX_BYTES * self.num_topk

    @property
    def src_token_global_idx_offset(self) -> int:
        """``get_src_token_global_idx_ptr``: ``weights + num_topk * sizeof(float)``."""
        return self.topk_weights_offset + TOPK_WEIGHT_BYTES * self.num_topk

    @property
    def linked_list_idx_offset(self) -> int:
        """``get_linked_list_idx_ptr``: ``src_token_global_idx_ptr + 1``."""
        return self.src_token_global_idx_offset + SRC_IDX_BYTES

    @property
    def mbarrier_offset_unrounded(self) -> int:
        """Generation A's ``get_mbarrier_ptr``: ``metadata + align(num_metadata_bytes, 32)`` (``layout.cuh:246-248``)."""
        return self.metadata_offset + align(self.num_metadata_bytes, NUM_TMA_ALIGNMENT_BYTES)

    @property
    def mbarrier_offset(self) -> int:
        """``get_mbarrier_ptr``: ``base + get_num_bytes<false>()`` in ``"refactor"`` (``token.cuh:79-81``),
        which is generation A's formula when records are not RDMA-rounded."""
        return self.num_bytes(with_mbarrier=False)

    def fields(self, hidden_dtype: str = "uint8", with_mbarrier: bool = False) -> list[Field]:
        """Every field at the offset its getter returns and with the size the kernels use."""
        elem = _DTYPE_BYTES.get(hidden_dtype, 1)
        fields = [
            Field(name="hidden", offset=0, num_bytes=self.num_hidden_bytes, dtype=hidden_dtype,
                  count=self.num_hidden_bytes // elem),
            Field(name="sf", offset=self.sf_offset, num_bytes=self.num_sf_bytes, dtype="sf_pack_t",
                  count=self.num_sf_bytes // SF_PACK_BYTES),
            # Combine records reserve the index slots too (num_metadata_bytes counts them) but only
            # the weights are written there (combine.cuh, "Write topk weights").
            Field(name="topk_idx", offset=self.topk_idx_offset, num_bytes=TOPK_IDX_BYTES * self.num_topk,
                  dtype="int32", count=self.num_topk),
            Field(name="topk_weights", offset=self.topk_weights_offset, num_bytes=TOPK_WEIGHT_BYTES * self.num_topk,
                  dtype="float32", count=self.num_topk),
        ]
        if self.with_metadata:
            fields.append(Field(name="src_token_global_idx", offset=self.src_token_global_idx_offset,
                                num_bytes=SRC_IDX_BYTES, dtype="int32", count=1))
            fields.append(Field(name="linked_list_idx", offset=self.linked_list_idx_offset,
                                num_bytes=LINKED_LIST_IDX_BYTES * self.num_topk, dtype="int32", count=self.num_topk))
        if with_mbarrier:
            fields.append(Field(name="mbarrier", offset=self.mbarrier_offset, num_bytes=MBARRIER_BYTES,
                                dtype="mbarrier", count=1))
        return fields

    def record(self, name: str, hidden_dtype: str = "uint8", with_mbarrier: bool = False) -> RecordLayout:
        """The byte map: getters' offsets, ``get_num_bytes<with_mbarrier>()`` stride, gaps as padding.

        The kernels build the record in shared memory through these getters and move it
        whole (``tma_store_1d(..., get_num_bytes<false>())``), so writer and reader views
        are one and the same; :func:`check_record` verifies the getters against the stride.
        """
        view = "smem staging slot" if with_mbarrier else "getters"
        return RecordLayout.from_fields(name, self.num_bytes(with_mbarrier), self.fields(hidden_dtype, with_mbarrier),
                                        view=view)


def check_record(token_layout: TokenLayout, with_mbarrier: bool = False) -> list[str]:
    """Problems with one record's getters versus its stride; ``[]`` when consistent.

    Checked: no two fields overlap, every field ends within ``get_num_bytes``, the
    hidden, SF and metadata parts start 32-byte aligned (TMA), the stride is a multiple
    of 32 (64 with RDMA rounding), and the mbarrier slot lies after the data. Upstream
    is consistent for every input it accepts; the tests assert that property.
    """
    record = token_layout.record("record", with_mbarrier=with_mbarrier)
    problems = [f"{a} overlaps {b}" for a, b in record.overlaps()]
    if record.overrun_bytes():
        problems.append(f"fields end {record.overrun_bytes()} bytes past the {record.num_bytes}-byte stride")
    for f in record.data_fields():
        if f.name in ("hidden", "sf", "topk_idx") and f.offset % NUM_TMA_ALIGNMENT_BYTES:
            problems.append(f"{f.name} at offset {f.offset} is not 32-byte aligned")
    stride_alignment = max(NUM_TMA_ALIGNMENT_BYTES, token_layout.num_rdma_alignment_bytes)
    if token_layout.num_bytes(False) % stride_alignment:
        problems.append(f"stride {token_layout.num_bytes(False)} is not a multiple of {stride_alignment}")
    if with_mbarrier and token_layout.mbarrier_offset < max(f.end for f in record.data_fields() if f.name != "mbarrier"):
        problems.append("the mbarrier slot overlaps the data")
    return problems


class BufferLayout(Record):
    """``num_ranks`` x ``num_max_tokens_per_rank`` records, packed (``BufferLayout<false>``,
    ``layout.cuh:251-311 @dd758ca``, ``token.cuh:84-144 @1a1ffba``)."""

    token_layout: TokenLayout
    num_ranks: int
    num_max_tokens_per_rank: int

    @property
    def num_bytes_per_token(self) -> int:
        return self.token_layout.num_bytes(False)

    @property
    def num_bytes_per_rank(self) -> int:
        return self.num_max_tokens_per_rank * self.num_bytes_per_token

    @property
    def num_bytes(self) -> int:
        """``get_num_bytes`` (int64 upstream): ranks x tokens x record bytes."""
        return self.num_bytes_per_rank * self.num_ranks

    def slot_offset(self, rank_idx: int, token_idx: int) -> int:
        """Byte offset of ``get_rank_buffer(rank_idx).get_token_buffer(token_idx)``."""
        if not (0 <= rank_idx < self.num_ranks and 0 <= token_idx < self.num_max_tokens_per_rank):
            raise IndexError(f"slot ({rank_idx}, {token_idx}) outside {self.num_ranks} x {self.num_max_tokens_per_rank}")
        return rank_idx * self.num_bytes_per_rank + token_idx * self.num_bytes_per_token


# --- logical domain -------------------------------------------------------------------------
class Domain(Record):
    """Physical ``(num_rdma_ranks, num_nvl_ranks)`` and logical ``(num_scaleout_ranks,
    num_scaleup_ranks)`` domains, as the communicator context derives them."""

    num_ranks: int
    num_rdma_ranks: int
    num_nvl_ranks: int
    num_scaleout_ranks: int
    num_scaleup_ranks: int
    is_scaleup_nvlink: bool

    @property
    def mode(self) -> str:
        """``"direct"`` when there is one scale-out rank (``num_scaleout_ranks == 1``), else ``"hybrid"``."""
        return "direct" if self.num_scaleout_ranks == 1 else "hybrid"


def _check_domain(c: Checker, num_ranks: int, num_nvl_ranks: int) -> bool:
    ok = c.int_range("num_ranks", num_ranks, 1, None)
    ok = c.int_range("num_ranks_per_node", num_nvl_ranks, 1, None, "the NVLink (LSA team) size") and ok
    if ok and num_ranks % num_nvl_ranks:
        c.add("num_ranks_per_node", num_nvl_ranks,
              f"must divide num_ranks = {num_ranks} (EP_HOST_ASSERT(num_ranks % num_nvl_ranks == 0))")
        return False
    return ok


def get_physical_domain_size(num_ranks: int, num_nvl_ranks: int) -> tuple[int, int]:
    """``(num_rdma_ranks, num_nvl_ranks)`` = ``(num_ranks / num_nvl_ranks, num_nvl_ranks)``
    (``nccl.cu:49-54 @dd758ca``, ``context.cpp:52-57 @855fa9d``). Upstream reads the world
    size and the NCCL LSA (NVLink) team size from the communicator; here they are given.

    >>> get_physical_domain_size(32, 8)
    (4, 8)
    """
    c = Checker()
    _check_domain(c, num_ranks, num_nvl_ranks)
    c.raise_if_any()
    return num_ranks // num_nvl_ranks, num_nvl_ranks


def get_logical_domain_size(num_ranks: int, num_nvl_ranks: int, allow_hybrid_mode: bool) -> tuple[int, int]:
    """``(num_scaleout_ranks, num_scaleup_ranks)``: the physical domain with hybrid mode,
    else ``(1, num_ranks)`` (``nccl.cu:56-60 @dd758ca``, ``context.cpp:59-63 @855fa9d``).

    >>> get_logical_domain_size(32, 8, True), get_logical_domain_size(32, 8, False)
    ((4, 8), (1, 32))
    """
    num_rdma_ranks, num_nvl_ranks = get_physical_domain_size(num_ranks, num_nvl_ranks)
    if allow_hybrid_mode:
        return num_rdma_ranks, num_nvl_ranks
    return 1, num_rdma_ranks * num_nvl_ranks


def logical_domain(num_ranks: int, num_nvl_ranks: int, allow_hybrid_mode: bool) -> Domain:
    """Both domains plus ``is_scaleup_nvlink = num_scaleup_ranks == num_nvl_ranks``
    (``buffer.hpp:666-668 @dd758ca``, ``ep.hpp:263-265 @def8651``).

    Note the consequence upstream accepts: with an LSA team of one rank and hybrid mode
    allowed, ``(so, su) = (N, 1)`` and ``is_scaleup_nvlink`` is true (``1 == 1``).
    """
    num_rdma_ranks, nvl = get_physical_domain_size(num_ranks, num_nvl_ranks)
    scaleout, scaleup = get_logical_domain_size(num_ranks, num_nvl_ranks, allow_hybrid_mode)
    return Domain(num_ranks=num_ranks, num_rdma_ranks=num_rdma_ranks, num_nvl_ranks=nvl,
                  num_scaleout_ranks=scaleout, num_scaleup_ranks=scaleup, is_scaleup_nvlink=scaleup == nvl)


def plan_domain(plan) -> Domain:
    """The domain of a :class:`~epbuf.plan.Plan`.

    The NCCL LSA team is the NVLink domain: ``plan.ranks_per_node`` ranks when
    ``plan.scaleup_is_nvlink`` (default ``min(num_ranks, 8)``), else one rank (GPUs that
    cannot load/store each other's memory form LSA teams of one).
    """
    return _domain(plan.num_ranks, plan.ranks_per_node, plan.scaleup_is_nvlink, plan.allow_hybrid_mode)


def _domain(num_ranks: int, ranks_per_node: int, scaleup_is_nvlink: bool, allow_hybrid_mode: bool) -> Domain:
    """:func:`plan_domain` from the plan's values (``ranks_per_node`` after its default)."""
    num_nvl_ranks = ranks_per_node if scaleup_is_nvlink else 1
    return logical_domain(num_ranks, num_nvl_ranks, allow_hybrid_mode)


# --- the size functions ------------------------------------------------------------------
def effective_topk(num_topk: int) -> int:
    """``num_topk == 0 ? 32 : num_topk`` (``buffer.hpp:662-663 @dd758ca``, ``ep.hpp:259-260 @def8651``)."""
    return NUM_DEFAULT_TOPK if num_topk == 0 else num_topk


def element_size(use_fp8_dispatch: bool) -> int:
    """``sizeof(__nv_fp8_e4m3)`` = 1 or ``sizeof(nv_bfloat16)`` = 2 (``buffer.hpp:671 @dd758ca``)."""
    return 1 if use_fp8_dispatch else 2


def hint_num_sf_packs(hidden: int, use_fp8_dispatch: bool) -> int:
    """The hint's SF packs per token: ``ceil_div(hidden, 32)`` for FP8 ("An approximation for
    number of SF packs", ``buffer.hpp:672 @dd758ca``): one 4-byte pack per 32 elements, the
    worst case the hint asserts fits (``ceil_div(hidden, 32) * sizeof(float) <= hidden``)."""
    return ceil_div(hidden, HINT_SF_GRANULARITY) if use_fp8_dispatch else 0


def actual_num_sf_packs(hidden: int, use_fp8_dispatch: bool) -> int:
    """SF packs a real FP8 dispatch sends per token: ``ceil(hidden / 128)``.

    The ``sf`` tensor is ``[num_tokens, num_sf_packs]`` of 4-byte ``sf_pack_t`` (fp32 or
    packed UE8M0x4, ``buffer.hpp:762-771 @dd758ca``). Upstream's ``per_token_cast_to_fp8``
    gives one fp32 scale per 128 elements; UE8M0 scales per 32 elements packed four to an
    int give the same count, ``ceil(ceil(hidden / 32) / 4) == ceil(hidden / 128)``. (UE8M0
    per 128 elements packed by four would be ``ceil(hidden / 512)``, smaller still.)
    """
    return ceil_div(hidden, FP8_BLOCK_SIZE) if use_fp8_dispatch else 0


def _check_hidden(c: Checker, hidden: int, elem_size: int, what: str) -> bool:
    """``TokenLayout``'s ``EP_UNIFIED_ASSERT(num_hidden_bytes % 32 == 0)`` and int range."""
    num_hidden_bytes = hidden * elem_size
    if num_hidden_bytes > INT32_MAX:
        c.add("hidden", hidden, f"{what} hidden bytes = {hidden} x {elem_size} = {num_hidden_bytes} must fit int32")
        return False
    if num_hidden_bytes % NUM_TMA_ALIGNMENT_BYTES:
        c.add("hidden", hidden,
              f"{what} hidden bytes = {hidden} x {elem_size} = {num_hidden_bytes} must be a multiple of 32 "
              f"(TokenLayout: EP_UNIFIED_ASSERT(num_hidden_bytes % kNumTMAAlignBytes == 0)); "
              f"use hidden % {NUM_TMA_ALIGNMENT_BYTES // elem_size} == 0")
        return False
    return True


def _token_layout(hidden: int, elem_size: int, num_sf_packs: int, num_topk: int, with_metadata: bool,
                  version: str | None, what: str) -> TokenLayout:
    gen = get_generation(version)
    c = Checker()
    c.int_range("hidden", hidden, 1, None)
    c.int_range("num_topk", num_topk, 0, None)
    c.int_range("num_sf_packs", num_sf_packs, 0, None)
    c.raise_if_any()
    _check_hidden(c, hidden, elem_size, what)
    c.raise_if_any()
    return TokenLayout(num_hidden_bytes=hidden * elem_size, num_sf_bytes=num_sf_packs * SF_PACK_BYTES,
                       num_topk=num_topk, with_metadata=with_metadata,
                       num_rdma_alignment_bytes=gen.num_rdma_alignment_bytes)


def get_dispatch_token_layout(hidden: int, elem_size: int, num_sf_packs: int, num_topk: int, *,
                              version: str | None = None) -> TokenLayout:
    """``get_dispatch_token_layout``: ``TokenLayout(hidden * elem_size, num_sf_packs * sizeof(sf_pack_t),
    num_topk, true)`` (``dispatch.hpp:136-139 @dd758ca``, ``csrc/kernels/ep/dispatch.hpp:26-29 @2578e50``).

    >>> get_dispatch_token_layout(7168, 1, 224, 12, version="2026-07").num_bytes()
    8224
    >>> get_dispatch_token_layout(7168, 1, 224, 12).num_bytes()
    8256
    """
    return _token_layout(hidden, elem_size, num_sf_packs, num_topk, True, version, "dispatch")


def get_combine_token_layout(hidden: int, elem_size: int, num_topk: int, *,
                             version: str | None = None) -> TokenLayout:
    """``get_combine_token_layout``: ``TokenLayout(hidden * elem_size, 0, num_topk, false)``, always
    called with ``sizeof(nv_bfloat16)`` (``combine.hpp:109-112``, ``buffer.hpp:621 @dd758ca``)."""
    return _token_layout(hidden, elem_size, 0, num_topk, False, version, "combine")


# Each buffer of a phase as ``(name, rows, token multiplier, token offset)``: ``rows`` x
# ``(multiplier x T + offset)`` records of the phase's record, T = num_max_tokens_per_rank. The
# one definition of every region: :func:`dispatch_buffer_layouts` / :func:`combine_buffer_layouts`
# build their ``BufferLayout`` from it, and :func:`summarize` reads the same sizes through them.
def _dispatch_regions(num_scaleout_ranks: int, num_scaleup_ranks: int,
                      is_scaleup_nvlink: bool) -> tuple[tuple[str, int, int, int], ...]:
    """The buffers of ``get_dispatch_buffer_size`` in kernel order (``buffer.hpp:586-614 @dd758ca``,
    ``ep.hpp:183-211 @def8651``); see :func:`dispatch_buffer_layouts`."""
    so, su = num_scaleout_ranks, num_scaleup_ranks
    if so == 1:
        return (
            ("recv_buffer", so * su, 1, 0),
            ("send_buffer", 0 if is_scaleup_nvlink else 1, 1, 0),
        )
    return (
        ("scaleup_recv_buffer", su, so, 0),
        ("scaleout_send_buffer", 1, 1, 0),
        ("scaleout_recv_buffer", so, 1, NUM_MAX_CHANNELS),  # T + kNumMaxChannels
    )


def _combine_regions(num_topk: int, num_scaleout_ranks: int, num_scaleup_ranks: int, is_scaleup_nvlink: bool,
                     allow_multiple_reduction: bool) -> tuple[tuple[str, int, int, int], ...]:
    """The buffers of ``get_combine_buffer_size`` in kernel order (``buffer.hpp:616-650 @dd758ca``,
    ``ep.hpp:213-247 @def8651``); see :func:`combine_buffer_layouts`."""
    so, su, amr = num_scaleout_ranks, num_scaleup_ranks, allow_multiple_reduction
    if so == 1:
        num_ranks = so * su
        return (
            ("recv_buffer", min(num_ranks, num_topk) if amr else num_topk, 1, 0),
            ("send_buffer", 0 if is_scaleup_nvlink else num_ranks, 1 if amr else num_topk, 0),
        )
    return (
        ("scaleup_recv_buffer", min(su, num_topk) if amr else num_topk, so, 0),
        ("scaleout_recv_buffer", min(so, num_topk) if amr else num_topk, 1, 0),
        # so x (T + kNumMaxChannels) tokens
        ("scaleout_send_buffer", 1 if amr else num_topk, so, so * NUM_MAX_CHANNELS),
    )


def _buffer_layouts(token_layout: TokenLayout, regions: tuple[tuple[str, int, int, int], ...],
                    num_max_tokens_per_rank: int) -> dict[str, BufferLayout]:
    """One ``BufferLayout`` per region row, by upstream's variable name, in kernel order."""
    return {
        name: BufferLayout(token_layout=token_layout, num_ranks=rows,
                           num_max_tokens_per_rank=multiplier * num_max_tokens_per_rank + offset)
        for name, rows, multiplier, offset in regions
    }


def dispatch_buffer_layouts(num_max_tokens_per_rank: int, hidden: int, num_sf_packs: int, num_topk: int,
                            elem_size: int, num_scaleout_ranks: int, num_scaleup_ranks: int,
                            is_scaleup_nvlink: bool, *, version: str | None = None) -> dict[str, BufferLayout]:
    """The buffers ``get_dispatch_buffer_size`` adds up, by upstream's variable name, in the
    order the kernels place them (``buffer.hpp:586-614 @dd758ca``, ``ep.hpp:183-211 @def8651``).

    Direct (``num_scaleout_ranks == 1``): ``recv_buffer`` = all ranks x T, then
    ``send_buffer`` of 0 ranks on NVLink (the kernel only touches it ``if constexpr (not
    kIsScaleupNVLink)``) else 1. Hybrid: ``scaleup_recv_buffer`` = su x (so x T),
    ``scaleout_send_buffer`` = 1 x T, ``scaleout_recv_buffer`` = so x (T + kNumMaxChannels);
    the kernel uses ``kNumChannels * ceil(T / kNumChannels)`` tokens there, which never
    exceeds ``T + kNumMaxChannels``.
    """
    token_layout = get_dispatch_token_layout(hidden, elem_size, num_sf_packs, num_topk, version=version)
    return _buffer_layouts(token_layout, _dispatch_regions(num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink),
                           num_max_tokens_per_rank)


def combine_buffer_layouts(num_max_tokens_per_rank: int, hidden: int, num_topk: int, num_scaleout_ranks: int,
                           num_scaleup_ranks: int, is_scaleup_nvlink: bool, allow_multiple_reduction: bool, *,
                           version: str | None = None) -> dict[str, BufferLayout]:
    """The buffers ``get_combine_buffer_size`` adds up, in kernel order (``buffer.hpp:616-650
    @dd758ca``, ``ep.hpp:213-247 @def8651``). Records are BF16 whatever the dispatch dtype.

    Direct: ``recv_buffer`` = ``min(N, topk)`` (multiple reduction) or ``topk`` slots x T,
    then ``send_buffer`` = 0 ranks on NVLink else N, x ``T`` tokens, or ``T * topk`` without
    multiple reduction ("we assume the bad case of `do_expand=True`"). Hybrid:
    ``scaleup_recv_buffer`` = ``min(su, topk)`` (or ``topk``) x (so x T), ``scaleout_recv_buffer``
    = ``min(so, topk)`` (or ``topk``) x T, ``scaleout_send_buffer`` = 1 (or ``topk``) x
    ``so * (T + kNumMaxChannels)``.
    """
    token_layout = get_combine_token_layout(hidden, 2, num_topk, version=version)
    regions = _combine_regions(num_topk, num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink,
                               allow_multiple_reduction)
    return _buffer_layouts(token_layout, regions, num_max_tokens_per_rank)


def get_dispatch_buffer_size(num_max_tokens_per_rank: int, hidden: int, num_sf_packs: int, num_topk: int,
                             elem_size: int, num_scaleout_ranks: int, num_scaleup_ranks: int,
                             is_scaleup_nvlink: bool, *, version: str | None = None) -> int:
    """``get_dispatch_buffer_size``, argument order as upstream: the sum of :func:`dispatch_buffer_layouts`.

    >>> get_dispatch_buffer_size(4096, 7168, 224, 8, 1, 4, 8, True)
    1283457024
    """
    layouts = dispatch_buffer_layouts(num_max_tokens_per_rank, hidden, num_sf_packs, num_topk, elem_size,
                                      num_scaleout_ranks, num_scaleup_ranks, is_scaleup_nvlink,
                                      version=version)
    return sum(layout.num_bytes for layout in layouts.values())


def get_combine_buffer_size(num_max_tokens_per_rank: int, hidden: int, num_topk: int, num_scaleout_ranks: int,
                            num_scaleup_ranks: int, is_scaleup_nvlink: bool, allow_multiple_reduction: bool, *,
                            version: str | None = None) -> int:
    """``get_combine_buffer_size``, argument order as upstream: the sum of :func:`combine_buffer_layouts`.

    >>> get_combine_buffer_size(4096, 7168, 8, 4, 8, True, True)
    2433024000
    """
    layouts = combine_buffer_layouts(num_max_tokens_per_rank, hidden, num_topk, num_scaleout_ranks,
                                     num_scaleup_ranks, is_scaleup_nvlink, allow_multiple_reduction,
                                     version=version)
    return sum(layout.num_bytes for layout in layouts.values())


def _check_hint_arguments(c: Checker, num_max_tokens_per_rank: int | None, hidden: int, num_topk: int,
                          use_fp8_dispatch: bool, num_scaleout_ranks: int | None,
                          num_rdma_alignment_bytes: int = NUM_RDMA_ALIGNMENT_BYTES) -> None:
    """What ``calculate_buffer_size`` and the records it builds assert, plus the int32
    arithmetic that must not overflow for the hint to mean anything.

    ``num_max_tokens_per_rank=None`` runs only the checks that do not depend on the token
    count (what :func:`_shape` caches); :func:`_check_tokens` and :func:`_check_token_overflow`
    are the others, in the order they come here.
    """
    tokens_ok = num_max_tokens_per_rank is None or _check_tokens(c, num_max_tokens_per_rank)
    hidden_ok = c.int_range("hidden", hidden, 1, INT32_MAX, "EP_HOST_ASSERT(hidden > 0), an int")
    topk_ok = c.int_range("num_topk", num_topk, 0, None, "0 means 32")
    if hidden_ok and ceil_div(hidden, HINT_SF_GRANULARITY) * SF_PACK_BYTES > hidden:
        c.add("hidden", hidden, "EP_HOST_ASSERT(ceil_div(hidden, 32) * sizeof(float) <= hidden) "
                                "(worst-case SF bytes must not exceed the hidden size)")
        hidden_ok = False
    if hidden_ok:
        # The combine record (BF16) passes whenever the dispatch record does: 2 x hidden is a
        # multiple of 32 whenever 1 or 2 x hidden is; its int range is checked with the record below.
        hidden_ok = _check_hidden(c, hidden, element_size(use_fp8_dispatch), "dispatch")
    if not (tokens_ok and hidden_ok and topk_ok):
        return
    topk = effective_topk(num_topk)
    # TokenLayout::get_num_bytes is computed in int before the int64 cast.
    for with_metadata, elem, packs in ((True, element_size(use_fp8_dispatch),
                                        hint_num_sf_packs(hidden, use_fp8_dispatch)), (False, 2, 0)):
        record = TokenLayout(num_hidden_bytes=hidden * elem, num_sf_bytes=packs * SF_PACK_BYTES, num_topk=topk,
                             with_metadata=with_metadata,
                             num_rdma_alignment_bytes=num_rdma_alignment_bytes).num_bytes(True)
        if record > INT32_MAX:
            c.add("num_topk" if topk > NUM_MAX_TOPK else "hidden", num_topk if topk > NUM_MAX_TOPK else hidden,
                  f"the {'dispatch' if with_metadata else 'combine'} record of {record} bytes must fit int32 "
                  "(TokenLayout::get_num_bytes is int)")
            return
    if num_max_tokens_per_rank is not None:
        _check_token_overflow(c, num_max_tokens_per_rank, topk, num_scaleout_ranks)


def _check_tokens(c: Checker, num_max_tokens_per_rank: int) -> bool:
    """``EP_HOST_ASSERT(num_max_tokens_per_rank > 0)``, an int."""
    return c.int_range("num_max_tokens_per_rank", num_max_tokens_per_rank, 1, INT32_MAX,
                       "EP_HOST_ASSERT(num_max_tokens_per_rank > 0), an int")


def _check_token_overflow(c: Checker, num_max_tokens_per_rank: int, topk: int, num_scaleout_ranks: int | None) -> bool:
    """The int token counts of the combine buffers (``topk`` after its default); ``False``
    when one overflows."""
    if num_scaleout_ranks is not None and num_scaleout_ranks > 1:
        # BufferLayout takes its token count as int: so * (T + kNumMaxChannels) in hybrid combine.
        tokens = num_scaleout_ranks * (num_max_tokens_per_rank + NUM_MAX_CHANNELS)
        if tokens > INT32_MAX:
            c.add("num_max_tokens_per_rank", num_max_tokens_per_rank,
                  f"num_scaleout_ranks x (tokens + kNumMaxChannels) = {num_scaleout_ranks} x "
                  f"({num_max_tokens_per_rank} + {NUM_MAX_CHANNELS}) = {tokens} must fit int32")
            return False
    elif num_max_tokens_per_rank * topk > INT32_MAX:
        # Direct combine without multiple reduction: T * num_topk tokens per rank (int).
        c.add("num_max_tokens_per_rank", num_max_tokens_per_rank,
              f"tokens x num_topk = {num_max_tokens_per_rank} x {topk} must fit int32 "
              "(direct combine send buffer without multiple reduction)")
        return False
    return True


class _Sizes(Record):
    """Everything ``calculate_buffer_size`` computes, kept for the report."""

    domain: Domain
    topk: int
    elem_size: int
    num_sf_packs: int
    dispatch: dict[str, BufferLayout]
    combine: dict[str, BufferLayout]

    @property
    def num_dispatch_bytes(self) -> int:
        return sum(b.num_bytes for b in self.dispatch.values())

    @property
    def num_combine_bytes(self) -> int:
        return sum(b.num_bytes for b in self.combine.values())


def _sizes(domain: Domain, num_max_tokens_per_rank: int, hidden: int, num_topk: int, use_fp8_dispatch: bool,
           allow_multiple_reduction: bool, num_sf_packs: int, version: str | None) -> _Sizes:
    topk = effective_topk(num_topk)
    elem = element_size(use_fp8_dispatch)
    so, su, nvl = domain.num_scaleout_ranks, domain.num_scaleup_ranks, domain.is_scaleup_nvlink
    return _Sizes(
        domain=domain, topk=topk, elem_size=elem, num_sf_packs=num_sf_packs,
        dispatch=dispatch_buffer_layouts(num_max_tokens_per_rank, hidden, num_sf_packs, topk, elem, so, su, nvl,
                                         version=version),
        combine=combine_buffer_layouts(num_max_tokens_per_rank, hidden, topk, so, su, nvl, allow_multiple_reduction,
                                       version=version),
    )


def calculate_buffer_size(num_ranks: int, num_nvl_ranks: int, num_max_tokens_per_rank: int, hidden: int,
                          num_topk: int, use_fp8_dispatch: bool, allow_hybrid_mode: bool,
                          allow_multiple_reduction: bool, *, version: str | None = None) -> int:
    """``ElasticBuffer/EPBuffer::calculate_buffer_size`` (``buffer.hpp:652-686 @dd758ca``,
    ``ep.hpp:249-283 @def8651``), with upstream's ``nccl_comm`` replaced by what it is read
    for: the world size ``num_ranks`` and the NVLink (LSA team) size ``num_nvl_ranks``.

    ``align(max(dispatch, combine), 2 MiB)`` (no rounding in ``"2026-04"``), where the
    dispatch reserves ``ceil(hidden / 32)`` SF packs for FP8 and top-k 0 means 32.

    >>> calculate_buffer_size(32, 8, 4096, 7168, 8, True, True, True)
    2434793472

    Raises:
        InvalidArgumentError: what upstream asserts (tokens and hidden > 0, worst-case SF
            bytes <= hidden, hidden bytes % 32 == 0, ranks divisible by the NVLink size),
            an unknown version, or int32 arithmetic that would overflow upstream.
    """
    c = Checker()
    problem = _version_problem(version)
    if problem is not None:
        c.problems.append(problem)
    domain_ok = _check_domain(c, num_ranks, num_nvl_ranks)
    scaleout = None
    if domain_ok:
        scaleout = get_logical_domain_size(num_ranks, num_nvl_ranks, allow_hybrid_mode)[0]
    gen = _lookup(version)
    _check_hint_arguments(c, num_max_tokens_per_rank, hidden, num_topk, use_fp8_dispatch, scaleout,
                          gen.num_rdma_alignment_bytes if gen is not None else NUM_RDMA_ALIGNMENT_BYTES)
    c.raise_if_any()
    assert gen is not None
    sizes = _sizes(logical_domain(num_ranks, num_nvl_ranks, allow_hybrid_mode), num_max_tokens_per_rank, hidden,
                   num_topk, use_fp8_dispatch, allow_multiple_reduction, hint_num_sf_packs(hidden, use_fp8_dispatch),
                   version)
    return _ep_buffer_num_bytes(sizes.num_dispatch_bytes, sizes.num_combine_bytes, gen.num_hint_alignment_bytes)


def _ep_buffer_num_bytes(num_dispatch_bytes: int, num_combine_bytes: int, alignment: int) -> int:
    """The two phases reuse one buffer: ``align(max(dispatch, combine), alignment)`` (``buffer.hpp:684-685
    @dd758ca``, ``ep.hpp:281-282 @def8651``; alignment 1 in ``"2026-04"``)."""
    return align(max(num_dispatch_bytes, num_combine_bytes), alignment)


def get_buffer_size_hint(group: int | tuple[int, int], num_max_tokens_per_rank: int, hidden: int,
                         num_topk: int = 0, use_fp8_dispatch: bool = False, allow_hybrid_mode: bool = True,
                         allow_multiple_reduction: bool = True, *, version: str | None = None) -> int:
    """``ElasticBuffer.get_buffer_size_hint`` / ``EPBuffer.get_buffer_size_hint``
    (``deep_ep/buffers/elastic.py:380-406 @dd758ca``), same arguments and defaults.

    Args:
        group: the communication group, by size: ``num_ranks`` (all in one NVLink domain)
            or ``(num_rdma_ranks, num_nvl_ranks)`` = (nodes or NVLink domains, ranks in each).
        num_max_tokens_per_rank: the most tokens one rank dispatches per call.
        hidden: hidden size in elements.
        num_topk: experts per token; 0 reserves the maximum, 32.
        use_fp8_dispatch: FP8 (1 byte + SF packs) instead of BF16 (2 bytes) dispatch.
        allow_hybrid_mode: split into scale-out (RDMA) x scale-up (NVLink) when several NVLink domains.
        allow_multiple_reduction: combine reduces per rank before sending.
        version: a :data:`VERSIONS` id or alias (``None`` = newest).

    Returns:
        The buffer size in bytes (2 MiB-aligned except in ``"2026-04"``), excluding the workspace.

    >>> get_buffer_size_hint(8, 4096, 7168, 8, True)
    471859200
    >>> get_buffer_size_hint((4, 8), 4096, 7168, 8, True)
    2434793472
    """
    if isinstance(group, tuple) and len(group) == 2:
        num_rdma_ranks, num_nvl_ranks = group
        c = Checker()
        if c.int_range("num_nodes", num_rdma_ranks, 1, None) and c.int_range("num_ranks_per_node", num_nvl_ranks, 1, None):
            num_ranks = num_rdma_ranks * num_nvl_ranks
        c.raise_if_any()
    elif isinstance(group, int) and not isinstance(group, bool):
        num_ranks = num_nvl_ranks = group
    else:
        raise InvalidArgumentError([Problem("num_ranks", group, "give num_ranks or (num_rdma_ranks, num_nvl_ranks)")])
    return calculate_buffer_size(num_ranks, num_nvl_ranks, num_max_tokens_per_rank, hidden, num_topk,
                                 use_fp8_dispatch, allow_hybrid_mode, allow_multiple_reduction,
                                 version=version)


# --- workspace -----------------------------------------------------------------------------
def _workspace_layout_terms(gen: Generation) -> list[tuple[str, int, str]]:
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
    terms = _workspace_layout_terms(gen) if gen.workspace_kind == "WorkspaceLayout" else _ep_signals_terms()
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
def _workspace_buffer(gen_id: str) -> Buffer:
    """The workspace allocation of one generation, as :func:`report` lists it (it does not depend on the plan)."""
    gen = _GENERATIONS[gen_id]
    return Buffer.combine("workspace", workspace_regions(gen.id), "sum", gen.num_workspace_alignment_bytes,
                          source=f"{gen.sources.allocation}; {gen.sources.workspace}")


# --- validation ------------------------------------------------------------------------------
def _check_plan(c: Checker, version: object, num_ranks: int, ranks_per_node: int, scaleup_is_nvlink: bool,
                allow_hybrid_mode: bool, experts: int, hidden: int, num_topk: int, use_fp8_dispatch: bool,
                num_max_tokens_per_rank: int | None) -> tuple[Generation | None, Domain]:
    """Hard limits: what upstream's host code rejects (asserts in the hint, the records,
    ``WorkspaceLayout`` / ``EPWorkspaceLayout``), an unknown version, int32 overflow —
    collected in ``c``. ``num_max_tokens_per_rank=None`` skips the checks that depend on it.

    Raises:
        InvalidArgumentError: at once, for an NVLink size that does not divide the ranks.
    """
    problem = _version_problem(version)
    if problem is not None:
        c.problems.append(problem)
    gen = _lookup(version)
    src = (gen or _GENERATIONS[DEFAULT_VERSION]).sources
    ranks = num_ranks
    c.int_range("num_ranks", ranks, 1, NUM_MAX_RANKS, f"kNumMaxRanks, {src.workspace_limits}")
    if experts > NUM_MAX_EXPERTS:
        c.add("num_experts", experts,
              f"allowed 1..{NUM_MAX_EXPERTS} including redundant experts (kNumMaxExperts, {src.workspace_limits})")
    if experts % ranks:
        c.add("num_experts", experts,
              f"must be divisible by num_ranks = {ranks} (EP_UNIFIED_ASSERT(num_experts % num_ranks == 0), "
              f"{src.workspace_limits})")
    elif gen is not None and experts // ranks > gen.num_max_experts_per_rank:
        c.add("num_experts", experts,
              f"{experts} / {ranks} ranks = {experts // ranks} experts per rank; allowed <= "
              f"{gen.num_max_experts_per_rank} in {gen.id} (kNumMaxExpertsPerRank, {src.workspace_limits})")
    domain = _domain(ranks, ranks_per_node, scaleup_is_nvlink, allow_hybrid_mode)
    _check_hint_arguments(c, num_max_tokens_per_rank, hidden, num_topk, use_fp8_dispatch, domain.num_scaleout_ranks,
                          gen.num_rdma_alignment_bytes if gen is not None else NUM_RDMA_ALIGNMENT_BYTES)
    return gen, domain


# What a plan's size depends on besides the token count: the key of :func:`_shape`, whose
# first nine values are :func:`_check_plan`'s arguments.
_SHAPE_KEY = attrgetter("version", "num_ranks", "ranks_per_node", "scaleup_is_nvlink", "allow_hybrid_mode",
                        "num_total_experts", "hidden", "num_topk", "use_fp8_dispatch", "allow_multiple_reduction")


class _Shape(Record):
    """Everything of a valid plan but its token count, computed once per distinct
    token-independent inputs (:func:`_shape`) and read by :func:`report` and :func:`summarize`.

    Attributes:
        gen: the generation.
        domain: the logical domain; ``hybrid``: ``domain.mode == "hybrid"``.
        num_ranks: the plan's ranks.
        topk: top-k after its default (0 -> 32).
        allow_multiple_reduction: the plan's flag.
        dispatch, real_dispatch, combine: bytes of the hint's dispatch phase (``ceil(hidden / 32)``
            SF packs), of a real run's and of the combine phase as ``(per token, base)``:
            ``bytes = per token x T + base`` (:func:`_affine`).
        workspace: the workspace allocation; ``workspace_binding``: its largest region.
        limit_rows: the limit rows that do not depend on the token count (:func:`_limit_rows`):
            those before ``ranks x tokens`` and the hybrid ones after it.
        broken: the names of the failed rows of each part of ``limit_rows``.
    """

    gen: Generation
    domain: Domain
    hybrid: bool
    num_ranks: int
    topk: int
    allow_multiple_reduction: bool
    dispatch: tuple[int, int]
    real_dispatch: tuple[int, int]
    combine: tuple[int, int]
    workspace: Buffer
    workspace_binding: str
    limit_rows: tuple[tuple, tuple]
    broken: tuple[tuple, tuple]


def _affine(num_bytes) -> tuple[int, int]:
    """``(a, b)`` with ``num_bytes(T) == a * T + b``. Every region holds ``rows x (multiplier x T +
    offset)`` records (:func:`_dispatch_regions`, :func:`_combine_regions`), so a phase's bytes are
    affine in T and two evaluations of the real formula (T = 0 and 1) give them."""
    base = num_bytes(0)
    return num_bytes(1) - base, base


@lru_cache(maxsize=4096)
def _shape(version: object, num_ranks: int, ranks_per_node: int, scaleup_is_nvlink: bool,
           allow_hybrid_mode: bool, experts: int, hidden: int, num_topk: int, use_fp8_dispatch: bool,
           allow_multiple_reduction: bool) -> _Shape | None:
    """The :class:`_Shape` of plans with these values (:data:`_SHAPE_KEY`), or ``None`` when
    the checks that do not depend on the token count fail."""
    c = Checker()
    try:
        gen, domain = _check_plan(c, version, num_ranks, ranks_per_node, scaleup_is_nvlink, allow_hybrid_mode,
                                  experts, hidden, num_topk, use_fp8_dispatch, None)
    except InvalidArgumentError:
        return None
    if c.problems:
        return None
    assert gen is not None
    fp8, amr = use_fp8_dispatch, allow_multiple_reduction
    hint_packs = hint_num_sf_packs(hidden, fp8)
    real_packs = actual_num_sf_packs(hidden, fp8)

    def sizes(tokens: int, packs: int) -> _Sizes:
        return _sizes(domain, tokens, hidden, num_topk, fp8, amr, packs, gen.id)

    hint = sizes(1, hint_packs)
    workspace = _workspace_buffer(gen.id)
    limit_rows = _limit_rows_static(gen, domain, num_ranks, experts, hidden, hint.elem_size, hint.topk,
                                    next(iter(hint.dispatch.values())).token_layout)
    return _Shape(
        gen=gen, domain=domain, hybrid=domain.mode == "hybrid", num_ranks=num_ranks, topk=hint.topk,
        allow_multiple_reduction=amr,
        dispatch=_affine(lambda tokens: sizes(tokens, hint_packs).num_dispatch_bytes),
        real_dispatch=_affine(lambda tokens: sizes(tokens, real_packs).num_dispatch_bytes),
        combine=_affine(lambda tokens: sizes(tokens, hint_packs).num_combine_bytes),
        workspace=workspace, workspace_binding=workspace.binding_region().name,
        limit_rows=limit_rows,
        broken=tuple(tuple(row[0] for row in rows if not row[4]) for rows in limit_rows),
    )


class _AnswerOnly(Checker):
    """A checker that keeps no problems: its checks only answer whether they pass (the
    fast path of :func:`_validate`, which checks again with a real one when one fails)."""

    __slots__ = ()

    def __init__(self) -> None:
        pass

    def add(self, argument: str, value: object, allowed: str) -> None:
        pass


_ANSWER_ONLY = _AnswerOnly()


def _validate(plan) -> _Shape:
    """Check ``plan`` (:func:`_check_plan`) and return its :class:`_Shape`.

    The checks that do not depend on the token count run once per distinct other inputs
    (:func:`_shape`); the token checks run on every call. When any fails, every check runs
    again on the plan so the error lists each problem in upstream's order.

    Raises:
        InvalidArgumentError: every problem of the plan.
    """
    key = _SHAPE_KEY(plan)
    tokens = plan.num_max_tokens_per_rank
    try:
        shape = _shape(*key)
    except TypeError:  # an unhashable value, which no Plan holds; the checks below name it
        shape = None
    if shape is not None and _check_tokens(_ANSWER_ONLY, tokens) and _check_token_overflow(
            _ANSWER_ONLY, tokens, shape.topk, shape.domain.num_scaleout_ranks):
        return shape
    c = Checker()
    _check_plan(c, *key[:9], tokens)
    c.raise_if_any()
    raise AssertionError(f"the checks of {plan!r} pass one by one but not together")


# --- limits ------------------------------------------------------------------------------------
# Every limit is one row ``(name, value, relation, bound, ok, source, enforced)``, in report order:
# the token-independent rows before ``ranks x tokens`` (cached in the shape), ``ranks x tokens``,
# the hybrid rows (cached too), then the token-dependent rest. :func:`report` turns them into
# ``LimitCheck`` records; :func:`summarize` reads the names of the failed ones.
def _limit_rows_static(gen: Generation, domain: Domain, num_ranks: int, experts: int, hidden: int, elem: int,
                       topk: int, dispatch_record: TokenLayout) -> tuple[tuple, tuple]:
    """The rows that do not depend on the token count: those before ``ranks x tokens``, and
    the hybrid ones after it (none in direct mode). ``dispatch_record``: the hint's."""
    src = gen.sources
    ranks = num_ranks
    experts_per_rank = experts // ranks
    record = dispatch_record.num_bytes(True)
    head = (
        ("num_ranks", ranks, "<=", NUM_MAX_RANKS, True, f"{src.workspace_limits} kNumMaxRanks", "host"),
        ("num_experts", experts, "<=", NUM_MAX_EXPERTS, True, f"{src.workspace_limits} kNumMaxExperts", "host"),
        ("num_experts % num_ranks", experts % ranks, "==", 0, True, src.workspace_limits, "host"),
        ("num_experts_per_rank", experts_per_rank, "<=", gen.num_max_experts_per_rank, True,
         f"{src.workspace_limits} kNumMaxExpertsPerRank", "host"),
        ("dispatch hidden bytes % 32", hidden * elem % NUM_TMA_ALIGNMENT_BYTES, "==", 0, True,
         f"{src.token_layout} EP_UNIFIED_ASSERT", "host"),
        ("combine hidden bytes % 32", hidden * 2 % NUM_TMA_ALIGNMENT_BYTES, "==", 0, True,
         f"{src.token_layout} EP_UNIFIED_ASSERT", "host"),
        ("ceil(hidden / 32) x 4 (worst-case SF bytes)", ceil_div(hidden, 32) * SF_PACK_BYTES, "<=", hidden, True,
         src.hint_asserts, "host"),
        ("record bytes (int)", record, "<=", INT32_MAX, True, f"{src.token_num_bytes} int get_num_bytes", "host"),
        ("num_topk", topk, "<=", NUM_MAX_TOPK, topk <= NUM_MAX_TOPK,
         f"{src.kernel_topk} (kernels only; the hint accepts any)", "kernel"),
        ("hidden % 256 (combine kernels)", hidden % COMBINE_HIDDEN_GRANULARITY, "==", 0,
         hidden % COMBINE_HIDDEN_GRANULARITY == 0, src.kernel_combine_hidden, "kernel"),
    )
    if domain.mode != "hybrid":
        return head, ()
    so, su = domain.num_scaleout_ranks, domain.num_scaleup_ranks
    notify = su + experts_per_rank
    return head, (
        ("num_scaleout_ranks (hybrid kernels)", so, "<=", NUM_MAX_SCALEOUT_RANKS_KERNEL,
         so <= NUM_MAX_SCALEOUT_RANKS_KERNEL, src.kernel_scaleout, "kernel"),
        ("num_scaleup_ranks (hybrid kernels)", su, "<=", NUM_MAX_SCALEUP_RANKS_KERNEL,
         su <= NUM_MAX_SCALEUP_RANKS_KERNEL, src.kernel_scaleup, "kernel"),
        ("num_scaleup_ranks + num_experts_per_rank (hybrid notify threads)", notify, "<=", NUM_NOTIFY_WARPS * 32,
         notify <= NUM_NOTIFY_WARPS * 32, src.kernel_notify, "kernel"),
    )


def _limit_rows_tokens(shape: _Shape, tokens: int, hint_bytes: int) -> tuple[tuple, tuple]:
    """The rows that depend on the token count: ``ranks x tokens``, and those after the hybrid rows."""
    src = shape.gen.sources
    src_idx = shape.num_ranks * tokens
    if shape.hybrid:
        so = shape.domain.num_scaleout_ranks
        tail = (("scale-out tokens so x (T + kNumMaxChannels) (int)", so * (tokens + NUM_MAX_CHANNELS), "<=",
                 INT32_MAX, True, src.combine_buffer_size, "host"),)
    elif not shape.allow_multiple_reduction:
        tail = (("tokens x num_topk (int)", tokens * shape.topk, "<=", INT32_MAX, True, src.combine_buffer_size,
                 "host"),)
    else:
        tail = ()
    return (
        ("ranks x tokens (int source global index)", src_idx, "<=", INT32_MAX, src_idx <= INT32_MAX,
         src.kernel_src_idx, "kernel"),
        tail + (("buffer bytes", hint_bytes, "<=", INT64_MAX, hint_bytes <= INT64_MAX,
                 f"{src.calculate_buffer_size} int64_t", "host"),),
    )


def _limit_rows(shape: _Shape, tokens: int, hint_bytes: int) -> tuple:
    """Every limit row, in report order."""
    head, hybrid = shape.limit_rows
    src_idx, tail = _limit_rows_tokens(shape, tokens, hint_bytes)
    return head + (src_idx,) + hybrid + tail


def _limits(shape: _Shape, tokens: int, hint_bytes: int) -> list[LimitCheck]:
    return [LimitCheck(name=n, value=v, relation=r, bound=b, ok=ok, source=src, enforced=e)
            for n, v, r, b, ok, src, e in _limit_rows(shape, tokens, hint_bytes)]


# --- report ----------------------------------------------------------------------------------
# The EP buffer's two regions (the phases reuse it), as report() names them.
_DISPATCH, _COMBINE = "dispatch", "combine"


def _formula(layouts: dict[str, BufferLayout]) -> str:
    return " + ".join(
        f"{name} {b.num_ranks} x {format_int(b.num_max_tokens_per_rank)} tokens x "
        f"{format_int(b.num_bytes_per_token)} B" for name, b in layouts.items()
    )


def report(plan) -> Report:
    """Size DeepEP V2's buffer and workspace for ``plan``: the hint, the real need, the
    record byte maps, the logical domain and every limit.

    Reads ``hidden``, ``num_topk``, ``num_experts`` + ``num_redundant_experts``,
    ``num_ranks``, ``ranks_per_node``, ``num_max_tokens_per_rank``, ``use_fp8_dispatch``,
    ``allow_hybrid_mode``, ``allow_multiple_reduction``, ``scaleup_is_nvlink`` and
    ``version``.

    Raises:
        InvalidArgumentError: an unknown version; ranks above 1024; experts above 2048,
            not divisible by the ranks or above 256 (512 in ``"refactor"``) per rank;
            hidden bytes not a multiple of 32; int32 overflow in the hint's arithmetic.
    """
    shape = _validate(plan)
    gen, domain = shape.gen, shape.domain
    src = gen.sources
    fp8 = plan.use_fp8_dispatch
    hidden, tokens = plan.hidden, plan.num_max_tokens_per_rank
    amr = plan.allow_multiple_reduction
    hint_packs = hint_num_sf_packs(hidden, fp8)
    real_packs = actual_num_sf_packs(hidden, fp8)
    hint = _sizes(domain, tokens, hidden, plan.num_topk, fp8, amr, hint_packs, gen.id)
    real = _sizes(domain, tokens, hidden, plan.num_topk, fp8, amr, real_packs, gen.id)
    topk = hint.topk

    # Every buffer of one phase holds the same record; the first one's is the phase's record.
    real_dispatch_record = next(iter(real.dispatch.values())).token_layout
    hint_dispatch_record = next(iter(hint.dispatch.values())).token_layout
    combine_record = next(iter(hint.combine.values())).token_layout

    dispatch_formula = _formula(hint.dispatch)
    if real_packs != hint_packs:
        dispatch_formula += (f" (hint: {hint_packs} SF packs per token; a real run sends {real_packs}, "
                             f"{format_int(real_dispatch_record.num_bytes())} B/record)")
    regions = [
        Region(name=_DISPATCH, num_bytes=hint.num_dispatch_bytes, num_bytes_used=real.num_dispatch_bytes,
               formula=dispatch_formula, source=src.dispatch_buffer_size),
        Region(name=_COMBINE, num_bytes=hint.num_combine_bytes, num_bytes_used=real.num_combine_bytes,
               formula=_formula(hint.combine) + (" (multiple reduction)" if amr else " (single reduction)"),
               source=src.combine_buffer_size),
    ]
    buffer = Buffer.combine("EP buffer", regions, "max", gen.num_hint_alignment_bytes,
                            source=f"{src.python_hint} -> {src.calculate_buffer_size}; {src.hint_alignment}")
    workspace = shape.workspace

    dtype = "float8_e4m3fn" if fp8 else "bfloat16"
    records = [real_dispatch_record.record("dispatch", dtype), combine_record.record("combine", "bfloat16")]
    if hint_packs != real_packs:
        records.insert(1, hint_dispatch_record.record("dispatch (hint)", dtype))

    findings: list[Finding] = []
    if hint_packs != real_packs:
        findings.append(Finding(
            severity="info", code="deepep-v2.hint-sf-approximation",
            message=(f"the hint reserves ceil(hidden/32) = {hint_packs} SF packs per token; a real FP8 dispatch "
                     f"sends ceil(hidden/128) = {real_packs} (fp32 per 128 elements or UE8M0 per 32 packed by four), "
                     f"so the dispatch phase reserves "
                     f"{format_int(hint.num_dispatch_bytes - real.num_dispatch_bytes)} B more than it uses"),
            data={"hint_num_sf_packs": hint_packs, "real_num_sf_packs": real_packs,
                  "num_bytes_over_reserved": hint.num_dispatch_bytes - real.num_dispatch_bytes},
        ))
    if buffer.num_bytes_needed > buffer.num_bytes:
        findings.append(Finding(
            severity="error", code="deepep-v2.hint-too-small",
            message=(f"a real run needs {format_int(buffer.num_bytes_needed)} B but the hint allocates "
                     f"{format_int(buffer.num_bytes)} B; dispatch/combine fail their size check ({src.buffer_checks})"),
            data={"num_bytes_needed": buffer.num_bytes_needed, "num_bytes_hint": buffer.num_bytes},
        ))
    limits = _limits(shape, tokens, buffer.num_bytes)
    findings.extend(
        Finding(severity="error", code="deepep-v2.kernel-limit",
                message=(f"{lim.name} = {format_int(lim.value)} breaks {lim.relation} {format_int(lim.bound)} "
                         f"({lim.source}); the kernels will not compile or run for this plan"),
                data={"limit": lim.name, "value": lim.value, "bound": lim.bound})
        for lim in limits if not lim.ok
    )

    quantities = [
        Quantity(name="num_scaleout_ranks", value=domain.num_scaleout_ranks, source=src.domain),
        Quantity(name="num_scaleup_ranks", value=domain.num_scaleup_ranks, source=src.domain),
        Quantity(name="num_topk", value=topk, source=src.calculate_buffer_size),
        Quantity(name="element_size", value=hint.elem_size, unit="B"),
        Quantity(name="hint_num_sf_packs", value=hint_packs, source=src.calculate_buffer_size),
        Quantity(name="real_num_sf_packs", value=real_packs),
        Quantity(name="num_sf_packs_ue8m0x4_per_128", value=ceil_div(ceil_div(hidden, FP8_BLOCK_SIZE), UE8M0_PER_PACK)
                 if fp8 else 0),
        Quantity(name="dispatch_record_num_bytes", value=real_dispatch_record.num_bytes(), unit="B",
                 source=src.token_num_bytes),
        Quantity(name="hint_dispatch_record_num_bytes", value=hint_dispatch_record.num_bytes(), unit="B",
                 source=src.token_num_bytes),
        Quantity(name="combine_record_num_bytes", value=combine_record.num_bytes(), unit="B", source=src.token_num_bytes),
        Quantity(name="dispatch_rdma_padding_bytes", value=hint_dispatch_record.num_rdma_padding_bytes, unit="B"),
        Quantity(name="combine_rdma_padding_bytes", value=combine_record.num_rdma_padding_bytes, unit="B"),
        Quantity(name="dispatch_smem_record_num_bytes", value=hint_dispatch_record.num_bytes(True), unit="B"),
        Quantity(name="combine_smem_record_num_bytes", value=combine_record.num_bytes(True), unit="B"),
    ]
    quantities += [Quantity(name=f"dispatch_{name}_num_bytes", value=b.num_bytes, unit="B",
                            source=src.dispatch_buffer_size) for name, b in hint.dispatch.items()]
    quantities += [Quantity(name=f"combine_{name}_num_bytes", value=b.num_bytes, unit="B",
                            source=src.combine_buffer_size) for name, b in hint.combine.items()]
    quantities += [
        Quantity(name="hint_dispatch_num_bytes", value=hint.num_dispatch_bytes, unit="B"),
        Quantity(name="real_dispatch_num_bytes", value=real.num_dispatch_bytes, unit="B"),
        Quantity(name="combine_num_bytes", value=hint.num_combine_bytes, unit="B"),
        Quantity(name="hint_num_bytes", value=buffer.num_bytes, unit="B", source=src.hint_alignment),
        Quantity(name="needed_num_bytes", value=buffer.num_bytes_needed, unit="B"),
        Quantity(name="workspace_num_bytes", value=get_workspace_num_bytes(gen.id), unit="B", source=src.workspace),
        Quantity(name="host_workspace_num_bytes", value=get_workspace_num_bytes(gen.id), unit="B",
                 source=src.host_workspace),
        Quantity(name="num_max_channels", value=NUM_MAX_CHANNELS, source=src.constants),
    ]
    inputs = {
        "version": gen.id, "deepep_version": gen.id,
        "num_ranks": plan.num_ranks, "num_ranks_per_node": plan.ranks_per_node,
        "scaleup_is_nvlink": plan.scaleup_is_nvlink,
        "num_rdma_ranks": domain.num_rdma_ranks, "num_nvl_ranks": domain.num_nvl_ranks,
        "num_scaleout_ranks": domain.num_scaleout_ranks, "num_scaleup_ranks": domain.num_scaleup_ranks,
        "is_scaleup_nvlink": domain.is_scaleup_nvlink, "mode": domain.mode,
        "num_max_tokens_per_rank": tokens, "hidden": hidden, "num_topk": plan.num_topk,
        "num_experts": plan.num_experts, "num_redundant_experts": plan.num_redundant_experts,
        "use_fp8_dispatch": fp8, "allow_hybrid_mode": plan.allow_hybrid_mode,
        "allow_multiple_reduction": amr,
    }
    return Report(
        backend="deepep-v2",
        title=f"DeepEP V2 {gen.buffer_class} ({gen.id}, {domain.mode} mode)",
        upstream=f"deepseek-ai/DeepEP {gen.buffer_class} @ {gen.commit} ({gen.id}); "
                 f"hint {src.calculate_buffer_size}, records {src.token_num_bytes}",
        inputs=inputs,
        buffers=(buffer, workspace),
        records=tuple(records),
        quantities=tuple(quantities),
        findings=tuple(findings),
        limits=tuple(limits),
    )


def summarize(plan) -> Summary:
    """:func:`report`'s totals, binding region and broken limits without byte maps or
    findings — what sweeps call, equal to ``summary_of(report(plan))``.

    Everything but the token count comes from the plan's cached :class:`_Shape` (the same
    checks, region tables, workspace and limit rows as :func:`report`); per call only the
    token checks, the phases' affine sizes and the token-dependent limit rows are evaluated.

    Raises:
        InvalidArgumentError: as :func:`report`.
    """
    shape = _validate(plan)
    tokens = plan.num_max_tokens_per_rank
    per_token, base = shape.dispatch
    dispatch = per_token * tokens + base
    per_token, base = shape.real_dispatch
    real_dispatch = per_token * tokens + base
    per_token, base = shape.combine
    combine = per_token * tokens + base
    alignment = shape.gen.num_hint_alignment_bytes
    hint = _ep_buffer_num_bytes(dispatch, combine, alignment)
    workspace = shape.workspace
    # summary_of: the largest buffer (the first of equals), then its largest region (likewise).
    if hint >= workspace.num_bytes:
        binding = _DISPATCH if dispatch >= combine else _COMBINE
    else:
        binding = shape.workspace_binding
    src_idx, tail = _limit_rows_tokens(shape, tokens, hint)
    broken, hybrid = shape.broken
    if not src_idx[4]:
        broken += (src_idx[0],)
    broken += hybrid
    for row in tail:
        if not row[4]:
            broken += (row[0],)
    needed = _ep_buffer_num_bytes(real_dispatch, combine, alignment)
    return Summary(num_bytes=hint + workspace.num_bytes, num_bytes_needed=needed + workspace.num_bytes_needed,
                   binding=binding, broken=broken)
