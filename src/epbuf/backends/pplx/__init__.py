"""pplx-kernels (vLLM's ``pplx`` all2all backend): every allocation of ``AllToAll``, exact to the byte.

Upstream: ``ppl-ai/pplx-kernels`` @12cecfd (2025-08-06). ``AllToAll.internode`` allocates
NVSHMEM symmetric buffers; ``AllToAll.intranode`` allocates one ``cudaMalloc`` buffer per
peer and shares them over CUDA IPC. Modules:

* :mod:`.versions` — the commit, the files, ``VERSIONS``
* :mod:`.sizes` — ``per_token_bytes``, ``internode_allocations``, ``intranode_allocations``
* :mod:`.limits` — the wrapper's and the constructor's asserts and the kernel limits, as rows
* :mod:`.report` — ``report(plan)`` and the fast ``summarize(plan)``

>>> from epbuf.plan import Plan
>>> plan = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=128)
>>> report(plan).buffer("NVSHMEM symmetric buffers (nvshmem_malloc)").num_bytes
2122747008
"""

from .limits import limit_rows
from .report import KERNEL_TYPES, parse_nvshmem_size, plan_arguments, report, summarize
from .sizes import (internode_allocations, internode_max_batch_tokens, intranode_allocations, intranode_buffer_sizes,
                    intranode_max_batch_tokens, num_dp_groups, num_local_experts, per_token_bytes)
from .versions import DEFAULT_VERSION, UPSTREAM, VERSIONS

__all__ = [
    "UPSTREAM", "VERSIONS", "DEFAULT_VERSION", "KERNEL_TYPES", "per_token_bytes", "num_local_experts",
    "num_dp_groups", "internode_max_batch_tokens", "intranode_max_batch_tokens", "internode_allocations",
    "intranode_allocations", "intranode_buffer_sizes", "limit_rows", "plan_arguments", "parse_nvshmem_size",
    "report", "summarize",
]

from ..._lazy import guard_names  # noqa: E402 - after the names it wraps

guard_names(globals(), __all__)
