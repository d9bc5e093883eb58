"""DeepEP V2 (NVIDIA): the ``ElasticBuffer`` / ``EPBuffer`` size hint, exact to the byte.

Upstream: deepseek-ai/DeepEP. Three generations of the V2 size arithmetic are known;
``Plan.version`` (or ``version=``) picks one by id, alias or commit id (``None`` = the newest,
``"refactor"``):

``"2026-04"`` — ``ElasticBuffer`` as first released
    b306af06afd412c88e51e71802951606e40b7358 ("[Public release 26/04] Introducing EPv2",
    2026-04-30). The hint is ``max(dispatch, combine)`` *not* rounded to 2 MiB, and the
    workspace is ``align(WorkspaceLayout::get_num_bytes(), 32)`` placed right before it.
``"2026-07"`` — ``ElasticBuffer`` with 2 MiB rounding
    a422b5a3693f (#637, 2026-05-21) through dd758caf451848bd150e1046af3d0a73e5fff38d
    (``main``, 2026-07-14; the size arithmetic is unchanged in between). Hint and workspace
    are each rounded up to 2 MiB.
``"refactor"`` — ``EPBuffer`` of the refactored tree
    ``deep_ep/include/deep_ep/layout/ep/token.cuh`` @ 1a1ffbac1f9ba94e1f731f7647b5d6353fb38ade
    and ``csrc/buffers/ep.hpp``, ``layout/ep/workspace.cuh`` @ def865146e95aa9ea223e277c0a8a4c6b81e5ac7
    (read from the public code index; newer than dd758ca, not dated). Every token record
    is additionally rounded up to 64 bytes for RDMA, and the workspace is
    ``sizeof(EPSignals)``.

A commit id, short (7+ hex digits) or full, maps to the generation whose formulas hold at it
(:mod:`.commits`, a static table of the snapshot's history).

The package, by file:

``constants``   compile-time constants shared by the generations
``versions``    :class:`Generation`, :class:`Sources` (citations), :func:`get_generation`
``commits``     commit id -> generation (imported only when a commit id is given)
``layout``      :class:`TokenLayout`, :class:`BufferLayout`, :func:`check_record`
``records``     per-token counts (top-k, element size, SF packs) and ``get_*_token_layout``
``domain``      physical and logical domains (:class:`Domain`)
``sizes``       each phase's buffers: ``get_dispatch_buffer_size``, ``get_combine_buffer_size``
``hint``        ``calculate_buffer_size`` (physical topology), :func:`calculate_buffer_size_logical`,
                ``get_buffer_size_hint``
``workspace``   the workspace terms and allocation
``limits``      every limit as a row, and the findings of broken ones
``shape``       a plan's checks and its cached token-independent shape
``report``      :func:`report` and the sweep's :func:`summarize`

The experts count is not an input of the hint; it only enters the limits. A plan the size
functions evaluate always gets its sizes; what a later step refuses is a limit with
``ok=False`` and an error finding (README, "Plans upstream would refuse: one rule").
"""

from __future__ import annotations

from .constants import *  # noqa: F403 - the constants are part of the public API, as before the split
from .domain import Domain, get_logical_domain_size, get_physical_domain_size, logical_domain, plan_domain
from .layout import BufferLayout, TokenLayout, check_record
from .report import report, summarize
from .hint import calculate_buffer_size, calculate_buffer_size_logical, get_buffer_size_hint
from .records import (actual_num_sf_packs, effective_topk, element_size, get_combine_token_layout,
                      get_dispatch_token_layout, hint_num_sf_packs)
from .sizes import combine_buffer_layouts, dispatch_buffer_layouts, get_combine_buffer_size, get_dispatch_buffer_size
from .versions import ALIASES, DEFAULT_VERSION, VERSIONS, Generation, Sources, get_generation
from .workspace import get_workspace_num_bytes, num_workspace_bytes, workspace_regions

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
    "calculate_buffer_size_logical",
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

from ..._lazy import guard_names  # noqa: E402 - after the names it wraps

guard_names(globals(), __all__)
