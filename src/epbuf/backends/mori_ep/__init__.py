"""MORI-EP (AMD ROCm): every allocation of ``EpDispatchCombineHandle``, exact to the byte.

Upstream: ``ROCm/mori`` @624002c (2026-08-21), ``src/ops/dispatch_combine/`` and the
MORI-shmem heap it carves from. Modules:

* :mod:`.versions` — the commit, the files, ``VERSIONS``
* :mod:`.config` — ``EpDispatchCombineConfig`` and its token counts (``MaxNumTokensToRecv`` ...)
* :mod:`.env` — ``MORI_SHMEM_HEAP_SIZE``, ``MORI_SHMEM_MODE``, ``MORI_EP_COMM``, ``MORI_FP8_COMBINE_SCALE_DIM``
* :mod:`.sizes` — ``initialize_shmem_buf`` ... ``initialize_barrier``: every buffer, in order
* :mod:`.limits` — the limits as rows
* :mod:`.handle` — ``plan_config(plan)``: the config vLLM passes; where the symmetric buffers are carved
* :mod:`.report` — ``report(plan)`` (findings with several numbers in :mod:`.findings`)
* :mod:`.summary` — the fast ``summarize(plan)`` sweeps call

>>> from epbuf.plan import Plan
>>> rep = report(Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=8, num_max_tokens_per_rank=4096))
>>> heap = rep.buffers[0]
>>> heap.name, heap.num_bytes, heap.num_bytes_needed   # reserved whole, carved by the handle
('MORI-shmem static heap (symmetric buffers)', 4294967296, 1031965440)
"""

from .config import (BLOCKWISE_QUANT_TYPES, KERNEL_TYPES, QUANT_TYPES, EpDispatchCombineConfig, handle_config)
from .env import DEFAULT_STATIC_HEAP_NUM_BYTES, ShmemSettings, parse_size_string, shmem_settings
from .handle import plan_config
from .limits import limit_rows
from .report import report
from .sizes import (cco_arena_num_bytes, cco_arena_usage, handle_allocations, initialize_barrier,
                    initialize_order_map_buf, initialize_shmem_buf, initialize_token_num_signal_buf,
                    metadata_num_bytes, static_heap_usage)
from .summary import summarize
from .versions import DEFAULT_VERSION, UPSTREAM, VERSIONS

__all__ = [
    "UPSTREAM", "VERSIONS", "DEFAULT_VERSION", "KERNEL_TYPES", "QUANT_TYPES", "BLOCKWISE_QUANT_TYPES",
    "EpDispatchCombineConfig", "handle_config", "DEFAULT_STATIC_HEAP_NUM_BYTES", "ShmemSettings",
    "parse_size_string", "shmem_settings", "initialize_shmem_buf", "initialize_token_num_signal_buf",
    "initialize_order_map_buf", "initialize_barrier", "handle_allocations", "static_heap_usage",
    "cco_arena_num_bytes", "cco_arena_usage", "metadata_num_bytes", "limit_rows", "plan_config",
    "report", "summarize",
]

from ..._lazy import guard_names  # noqa: E402 - after the names it wraps

guard_names(globals(), __all__)
