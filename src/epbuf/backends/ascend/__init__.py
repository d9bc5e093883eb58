"""DeepEP-Ascend: the expert-parallel ``EPBuffer`` on Huawei Ascend NPUs, exact to the byte.

Upstream: DeepEP-Ascend, as read on 2026-11-30 (no git snapshot is published; the
files were read from the public code index). Citations are ``path:line`` in that text:

* ``deep_ep/include/deep_ep/common/compiled.hpp`` — constants (``CPL``)
* ``deep_ep/include/deep_ep/layout/ep/token.hpp`` — ``TokenLayout``, ``BufferLayout`` (``TOK``)
* ``csrc/buffers/ep.hpp`` — ``get_dispatch_buffer_size``, ``get_combine_buffer_size``,
  ``calculate_buffer_size`` and the host checks (``EPB``)
* ``csrc/kernels/ep/dispatch.hpp`` / ``combine.hpp`` — ``get_dispatch_token_layout``,
  ``get_combine_token_layout`` and kernel launch checks
* ``deep_ep/include/deep_ep/impls/ep/dispatch.hpp`` — the dispatch kernel (writer)
* ``deep_ep/include/deep_ep/impls/ep/dispatch_copy_epilogue.hpp`` — the receive epilogue (reader)

What upstream computes
----------------------
A token record is ``hidden | SF packs | top-k indices | top-k weights | source index``.
``TokenLayout.get_num_bytes()`` is ``hidden_bytes + align(sf_bytes, 32) +
align(metadata_bytes, 32)`` — the hidden bytes are *not* aligned — while the pointer
getters start the SF packs at ``align(hidden_bytes, 32)``. The dispatch kernel writes
each record as the hidden bytes followed directly by a metadata block laid out with
``hidden = 0``; the receive epilogue reads SF, top-k and source index through the
getters. When ``hidden_bytes % 32 != 0`` and SF packs are present the two disagree;
:func:`check_record` reports it (see ``Report.findings``).

The package, by file:

``constants``   constants and the upstream files they are cited from (``CPL``, ``TOK``, ``EPB`` ...)
``layout``      :class:`TokenLayout`, :class:`BufferLayout`, :func:`check_record` (writer vs reader)
``sizes``       the upstream-named size functions and ``calculate_buffer_size``
``report``      the workspace, every limit, :func:`report` and the sweep's :func:`summarize`
"""

from __future__ import annotations

from .constants import *  # noqa: F403 - the constants are part of the public API, as before the split
from .constants import UPSTREAM  # noqa: F401 - epbuf.plan.backend_versions reads it
from .layout import BufferLayout, TokenLayout, check_record
from .report import report, summarize, workspace_num_bytes
from .sizes import (actual_num_sf_packs, calculate_buffer_size, combine_buffer_layout, dispatch_buffer_layout,
                    effective_topk, element_size, get_combine_buffer_size, get_combine_token_layout,
                    get_dispatch_buffer_size, get_dispatch_token_layout, hint_num_sf_packs)

__all__ = [
    "TokenLayout",
    "BufferLayout",
    "get_dispatch_token_layout",
    "get_combine_token_layout",
    "dispatch_buffer_layout",
    "combine_buffer_layout",
    "get_dispatch_buffer_size",
    "get_combine_buffer_size",
    "calculate_buffer_size",
    "effective_topk",
    "element_size",
    "hint_num_sf_packs",
    "actual_num_sf_packs",
    "check_record",
    "workspace_num_bytes",
    "report",
    "summarize",
]

from ..._lazy import guard_names  # noqa: E402 - after the names it wraps

guard_names(globals(), __all__)
