"""DeepEP V2's generations: which upstream commit each ``version`` id follows, and where.

Three generations of the size arithmetic are known (``docs/derivations/deepep_v2.md``):
``"2026-04"`` (b306af0, no 2 MiB rounding), ``"2026-07"`` (a422b5a..dd758ca) and ``"refactor"``
(``EPBuffer``, records rounded to 64 bytes). :func:`get_generation` accepts an id, an alias or
a commit id and returns the :class:`Generation`, whose :class:`Sources` cite every formula and
limit as ``path:line @commit``.
"""

from __future__ import annotations

from ..._record import Record
from ...errors import InvalidArgumentError, Problem
from .constants import (NUM_ALLOCATION_ALIGNMENT_BYTES, NUM_MAX_EXPERTS_PER_RANK_ELASTIC, NUM_MAX_EXPERTS_PER_RANK_EP,
                        NUM_RDMA_ALIGNMENT_BYTES, NUM_TMA_ALIGNMENT_BYTES)

__all__ = ["VERSIONS", "ALIASES", "DEFAULT_VERSION", "Sources", "Generation", "get_generation", "lookup",
           "version_problem"]


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
    limit_experts_divisible: str
    limit_num_ranks: str
    limit_num_experts: str
    limit_experts_per_rank: str


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
        # WorkspaceLayout's constructor asserts (layout.cuh:37-40); the buffer constructor builds one
        # without experts (so only the rank count can fail there), dispatch one with them.
        limit_experts_divisible=f"{layout}:37{at} EP_UNIFIED_ASSERT(num_experts % num_ranks == 0) "
                                f"(WorkspaceLayout built by dispatch, {buffer}:{lines['ws_dispatch']})",
        limit_num_ranks=f"{layout}:38{at} EP_UNIFIED_ASSERT(num_ranks <= kNumMaxRanks) "
                        f"(WorkspaceLayout built by the constructor, {buffer}:{lines['ws_ctor']})",
        limit_num_experts=f"{layout}:39{at} EP_UNIFIED_ASSERT(num_experts <= kNumMaxExperts) "
                          f"(WorkspaceLayout built by dispatch, {buffer}:{lines['ws_dispatch']})",
        limit_experts_per_rank=f"{layout}:40{at} EP_UNIFIED_ASSERT(num_experts_per_rank <= kNumMaxExpertsPerRank) "
                               f"(WorkspaceLayout built by dispatch, {buffer}:{lines['ws_dispatch']})",
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
    "ws_ctor": "112-113", "ws_dispatch": "905-909",
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
    "ws_ctor": "127-128", "ws_dispatch": "969-973",
})
_EP_HPP = "csrc/buffers/ep.hpp"
_TOKEN_CUH = "deep_ep/include/deep_ep/layout/ep/token.cuh"
_IMPLS_EP = "deep_ep/include/deep_ep/impls/ep"
_WORKSPACE_CUH = "deep_ep/include/deep_ep/layout/ep/workspace.cuh"
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
    limit_experts_divisible=f"{_WORKSPACE_CUH}:43 @def8651 EP_UNIFIED_ASSERT(num_experts % num_ranks == 0) "
                            "(EPWorkspaceLayout's constructor)",
    limit_num_ranks=f"{_WORKSPACE_CUH}:44 @def8651 EP_UNIFIED_ASSERT(num_ranks <= kNumMaxRanks) "
                    "(EPWorkspaceLayout's constructor)",
    limit_num_experts=f"{_WORKSPACE_CUH}:45 @def8651 EP_UNIFIED_ASSERT(num_experts <= EPSignals::kNumMaxExperts) "
                      "(EPWorkspaceLayout's constructor)",
    limit_experts_per_rank=f"{_WORKSPACE_CUH}:46 @def8651 EP_UNIFIED_ASSERT(num_experts_per_rank <= "
                           "EPSignals::kNumMaxExpertsPerRank) (EPWorkspaceLayout's constructor)",
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


_HEX = frozenset("0123456789abcdef")


def _commit_generation(commit: str) -> tuple[str | None, str]:
    """``(generation id, "")`` for a commit id of 7 to 40 hex digits that the static table of
    :mod:`.commits` knows, else ``(None, why)``. Imported on first use: plain ids never pay for it."""
    from .commits import COMMITS, DIFFERENT, SHORT_IDS

    commit = commit.lower()
    matches = {full: gen for full, gen in COMMITS.items() if full.startswith(commit)}
    matches.update((short, gen) for short, gen in SHORT_IDS.items() if short.startswith(commit) or commit.startswith(short))
    different = [full for full in DIFFERENT if full.startswith(commit)]
    if len(set(matches.values())) == 1 and not different:
        return next(iter(matches.values())), ""
    if matches or len(different) > 1:
        return None, f"commit prefix {commit!r} is ambiguous; give more digits"
    if different:
        return None, (f"at commit {different[0][:10]} the size formulas match no generation epbuf follows "
                      f"({DIFFERENT[different[0]]})")
    return None, f"commit {commit!r} is not among the {len(COMMITS) + len(SHORT_IDS)} DeepEP V2 commits epbuf knows"


def lookup(version: object) -> tuple[Generation | None, str]:
    """``(generation, "")`` for a version id, an alias or a commit id (7 to 40 hex digits;
    ``None``: the newest), else ``(None, why)``."""
    if version is None:
        return _GENERATIONS[DEFAULT_VERSION], ""
    if type(version) is not str:
        return None, "must be a version id or a commit id (a string)"
    gen = _GENERATIONS.get(ALIASES.get(version, version))
    if gen is not None:
        return gen, ""
    if 7 <= len(version) <= 40 and _HEX.issuperset(version.lower()):
        gid, why = _commit_generation(version)
        return (_GENERATIONS[gid], "") if gid else (None, why)
    return None, "unknown DeepEP V2 version"


def version_problem(version: object) -> Problem | None:
    """The one-line problem of an unknown version (or commit), ``None`` when it is known."""
    gen, why = lookup(version)
    if gen is not None:
        return None
    return Problem("version", version,
                   f"{why}; choose one of {', '.join(VERSIONS)} (aliases: {', '.join(ALIASES)}), or a commit id "
                   f"(7-40 hex digits) of b306af0..dd758ca or the refactored tree; default {DEFAULT_VERSION}")


def get_generation(version: str | None = None) -> Generation:
    """The generation for a ``version`` id, alias or commit id (``None``: the newest, ``"refactor"``).

    A commit id, short (at least 7 hex digits) or full, maps to the generation whose formulas
    hold at that commit (:mod:`.commits`: every DeepEP commit from ``b306af0`` on, with pull-request
    refs, whose tree holds V2, plus the refactored ``EPBuffer`` tree's commits).

    >>> get_generation("dd758ca").id, get_generation("5616959").id, get_generation("4f77720db4a4").id
    ('2026-07', '2026-07', '2026-04')

    Raises:
        InvalidArgumentError: an id neither in :data:`VERSIONS`, :data:`ALIASES` nor a known commit.
    """
    gen, _ = lookup(version)
    if gen is None:
        raise InvalidArgumentError([version_problem(version)])
    return gen
