"""UCCL-EP (``github.com/uccl-project/uccl``, ``ep/``): DeepEP's API for any NIC, on NVIDIA
and AMD GPUs, exact to the byte. Two backends read this package: ``uccl-ep`` (normal mode,
:func:`report_normal`) and ``uccl-ll`` (low-latency mode, :func:`report_low_latency`).

UCCL-EP keeps DeepEP V1's size functions, which epbuf reuses (:mod:`._deepep`): the
normal-mode ``Config`` hints, and the low-latency layout as DeepEP had it at ``ll4`` (combine
messages without the LogFMT term). What is UCCL-EP's own lives here:

* :mod:`.versions` — the supported commits (``v0.1.1``, ``main`` = da914a2);
* :mod:`.config` — the default config tables with their EFA rows, the hints re-cited at
  ``ep/include/ep_config.hpp``, the internode token record;
* :mod:`.low_latency` — ``LowLatencyLayout`` with the ``PER_EXPERT_BATCHING`` build and the
  signaling buffers that live in the atomic buffer, ``get_low_latency_rdma_size_hint``;
* :mod:`.memory` — every other allocation per GPU, device or pinned host (proxy FIFOs,
  atomic buffer, workspace, D2H handles, counters);
* :mod:`.limits` — constructor and launch limits as rows; :mod:`.smem` — the TMA launches'
  dynamic shared memory against the device's per-block maximum (CUDA only);
* :mod:`.normal` — ``report_normal`` (``uccl-ep``) and its fast summary; :mod:`.ll_report` —
  ``report_low_latency`` (``uccl-ll``) and its fast summary; :mod:`.report_parts` — what both share
  (:mod:`.report` re-exports the four).

>>> from epbuf.backends import uccl_ep
>>> uccl_ep.get_low_latency_rdma_size_hint(128, 7168, 16, 256)
1880098944
>>> uccl_ep.get_dispatch_config(32, efa=True).as_tuple()
(20, 32, 288, 32, 512)
"""

from .config import (
    DEFAULT_NUM_SMS,
    Config,
    get_combine_config,
    get_dispatch_config,
    get_hidden_bytes,
    get_num_bytes_per_token,
    nvl_buffer,
    rdma_buffer,
    supported_num_ranks,
)
from .ll_report import report_low_latency, summarize_low_latency
from .low_latency import LowLatencyLayout, Span, get_low_latency_rdma_size_hint
from .memory import num_d2h_channels
from .normal import report_normal, summarize_normal
from .versions import DEFAULT_VERSION, UPSTREAM, VERSIONS, Version, get_version, list_versions

__all__ = [
    "UPSTREAM",
    "VERSIONS",
    "DEFAULT_VERSION",
    "Version",
    "get_version",
    "list_versions",
    "Config",
    "DEFAULT_NUM_SMS",
    "supported_num_ranks",
    "get_dispatch_config",
    "get_combine_config",
    "get_hidden_bytes",
    "nvl_buffer",
    "rdma_buffer",
    "get_num_bytes_per_token",
    "LowLatencyLayout",
    "Span",
    "get_low_latency_rdma_size_hint",
    "num_d2h_channels",
    "report_normal",
    "report_low_latency",
    "summarize_normal",
    "summarize_low_latency",
]

from ..._lazy import guard_names  # noqa: E402 - after the names it wraps

guard_names(globals(), __all__)
