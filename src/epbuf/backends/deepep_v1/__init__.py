"""DeepEP V1 ("legacy"): normal-mode NVL/RDMA buffers and the low-latency RDMA buffer, exact to the byte.

Upstream: ``github.com/deepseek-ai/DeepEP``. ``path:line`` citations are at main ``dd758ca``
(2026-07-14, version string 2.1.0), where V1 lives under ``legacy`` names, unless they name
another commit. What upstream computes:

* *Normal mode* (backend ``deepep-v1``) sizes two buffers from a :class:`Config` (SMs and chunk
  sizes): ``get_nvl_buffer_size_hint`` and ``get_rdma_buffer_size_hint``. The recipe takes the
  max over the default dispatch and combine configs of the rank count; neither hint depends
  on the number of tokens or experts.
* *Low-latency mode* (backend ``deepep-ll``) sizes one RDMA buffer from :class:`LowLatencyLayout`:
  two (odd/even) sets of signaling, send and receive buffers; the hint is the layout's
  ``total_bytes`` rounded up to 128 *plus a full block when already aligned*.

The package, one concept per module:

``versions``      the versions (ids and commits) and the citations of each
``commits``       every upstream commit mapped to the formulas that hold there (static data)
``constants``     compile-time constants and element sizes
``config``        :class:`Config` and its NVL / RDMA hints
``tables``        the default dispatch/combine configs and the recipe's ``get_hidden_bytes``
``internode``     ``get_num_bytes_per_token``, the clean-meta ranges, internode token records
``normal_limits`` the limits of a normal-mode plan
``normal``        the ``deepep-v1`` report and summary
``ll_formulas``   the low-latency layout's formulas on plain integers (slots, buffers, rounding)
``low_latency``   :class:`LowLatencyLayout`, ``get_low_latency_rdma_size_hint``, the token ceiling
``ll_report``     the ``deepep-ll`` report and summary
``memory``        what the ``Buffer`` constructor allocates besides the hints (NVL metadata, workspace)
``limits``        limit rows and findings shared by both reports
``intranode``     the intranode dispatch/combine host asserts on ``num_nvl_bytes``, per call

Everything public is importable from here; a name loads only its own module (and what
that module needs), so ``epbuf hint --backend deepep-ll`` never imports the normal mode.

>>> from epbuf.backends import deepep_v1
>>> deepep_v1.Config(24, 8, 512, 16, 128).get_nvl_buffer_size_hint(7168, 16)
453380736
"""

from __future__ import annotations

from ..._lazy import exports, guard

# module -> the public names it defines (tests/test_deepep_v1.py checks this against each __all__).
_EXPORTS = {
    "versions": ("Version", "VERSIONS", "DEFAULT_VERSION", "list_versions", "get_version", "REPO", "MAIN_COMMIT",
                 "CPL", "CFG", "BUF", "LAUNCH", "LLK", "INK", "PY", "DOC"),
    "constants": ("NUM_MAX_NVL_PEERS", "NUM_MAX_RDMA_PEERS", "NUM_WORKSPACE_BYTES", "NUM_MAX_LOCAL_EXPERTS",
                  "NUM_BUFFER_ALIGNMENT_BYTES", "HINT_NUM_MAX_TOPK", "HINT_NUM_MAX_SCALES", "INT4_BYTES", "INT_BYTES",
                  "FLOAT_BYTES", "BF16_BYTES", "BF162_BYTES", "UINT64_BYTES", "SOURCE_META_BYTES",
                  "DEFAULT_TOPK_IDX_BITS", "NUM_CHANNELS_PER_SM", "NORMAL_NUM_MAX_TOPK", "FP8_SCALE_BLOCK",
                  "DEFAULT_NUM_SMS", "BINDING_DEFAULT_CONFIG", "NORMAL_NUM_MAX_RANKS", "RDMA_CLEAN_META_INTS",
                  "MAX_NUM_BYTES_INT4_CHECK", "UINT64_MAX"),
    "config": ("Config",),
    "tables": ("get_dispatch_config", "get_combine_config", "supported_num_ranks", "get_hidden_bytes"),
    "internode": ("get_num_bytes_per_token", "get_rdma_clean_meta", "get_nvl_clean_meta"),
    "low_latency": ("num_bytes_per_dispatch_msg", "num_bytes_per_combine_msg", "Span", "LowLatencyBuffer",
                    "LowLatencyLayout", "low_latency_buffer", "get_low_latency_rdma_size_hint",
                    "max_low_latency_tokens"),
    "normal": ("report_normal", "summarize_normal"),
    "ll_report": ("report_low_latency", "summarize_low_latency"),
    "intranode": ("notify_dispatch_nvl_bytes", "intranode_dispatch_nvl_bytes", "cached_notify_combine_nvl_bytes",
                  "intranode_combine_nvl_bytes"),
    "memory": ("NUM_MAX_FIFO_SLOTS", "nvl_metadata_regions", "nvl_metadata_num_bytes", "nvl_metadata",
               "nvl_buffer_with", "nvl_allocation", "workspace_buffer", "workspace_allocation"),
}
__all__ = [name for names in _EXPORTS.values() for name in names]
# Each public name is loaded from its module on first use (PEP 562).
__getattr__, __dir__ = exports(__name__, {name: module for module, names in _EXPORTS.items() for name in names},
                               wrap=guard)
