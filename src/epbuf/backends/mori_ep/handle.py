"""A plan as MORI-EP's ``EpDispatchCombineHandle`` takes it: the config vLLM would pass
(:func:`plan_config`), and the place its symmetric buffers are carved from (the MORI-shmem static
heap, isolation mode or the CCO arena).

How a plan becomes an ``EpDispatchCombineConfig`` (what vLLM's ``MoriAll2AllManager``
passes, ``vllm/distributed/device_communicators/all2all.py @e04bcc7``):
``world_size`` = ranks, ``gpu_per_node`` = ranks per node (``min(8, ranks)`` by default),
``num_experts_per_rank`` = (routed + redundant experts) / ranks, ``max_token_type_size`` =
2 (BF16 activations) unless set, scales = ``ceil(hidden / 128)`` float32 per token for FP8
(``num_scale_bytes`` overrides: ``scale_dim = num_scale_bytes``, ``scale_type_size = 1``,
the same bytes), kernel type ``IntraNode`` on one node and ``InterNodeV1`` across nodes.
"""

from __future__ import annotations

from functools import lru_cache

from ...errors import InvalidArgumentError, Problem
from ...units import ceil_div
from .config import (KERNEL_TYPES, QUANT_TYPES, EpDispatchCombineConfig, handle_config, kernel_type_name,
                     quant_type_name)
from .env import ShmemSettings
from .sizes import (CCO_ALIGNMENT, HEAP_ALIGNMENT, INTERNAL_SYNC_NUM_BYTES, cco_arena_num_bytes, cco_arena_usage,
                    static_heap_usage)
from .versions import HDR, PY, check_version, src

__all__ = ["FP8_SCALE_BLOCK", "DEFAULT_MAX_TOKEN_TYPE_SIZE", "plan_config", "memory", "free_name"]

FP8_SCALE_BLOCK = 128  # one float32 scale per 128 hidden elements (DeepSeek-style block FP8, what vLLM passes)
DEFAULT_MAX_TOKEN_TYPE_SIZE = 2  # vLLM: max_token_type_size = input_dtype.itemsize, BF16 activations


def plan_config(plan) -> tuple[EpDispatchCombineConfig, int]:
    """``(config after the handle constructor, the cap the plan asked for)``.

    Raises:
        InvalidArgumentError: an unknown version, kernel type or quant type; experts not
            divisible by ranks (MORI takes ``num_experts_per_rank``); top-k 0; a token count
            whose ``world_size x tokens`` overflows int32.
    """
    shape = _token_independent(plan.version, plan.kernel_type, plan.quant_type, plan.num_ranks, plan.ranks_per_node,
                               plan.num_total_experts, plan.hidden, plan.use_fp8_dispatch, plan.num_scale_bytes)
    if isinstance(shape, InvalidArgumentError):
        raise shape
    kernel, quant, scale_dim, scale_type_size = shape
    config = EpDispatchCombineConfig(
        world_size=plan.num_ranks, hidden_dim=plan.hidden, scale_dim=scale_dim, scale_type_size=scale_type_size,
        max_token_type_size=plan.max_token_type_size or DEFAULT_MAX_TOKEN_TYPE_SIZE,
        max_num_inp_token_per_rank=plan.num_max_tokens_per_rank,
        num_experts_per_rank=plan.num_total_experts // plan.num_ranks, num_experts_per_token=plan.num_topk,
        max_total_recv_tokens=plan.max_total_recv_tokens, kernel_type=kernel, gpu_per_node=plan.ranks_per_node,
        quant_type=quant)
    return handle_config(config), plan.max_total_recv_tokens


@lru_cache(maxsize=4096)
def _token_independent(version, kernel_type, quant_type, ranks: int, per_node: int, experts: int, hidden: int,
                       fp8: bool, num_scale_bytes):
    """``(kernel type, quant type, scale_dim, scale_type_size)``, or the error that refuses them —
    what does not depend on the token count, once per shape."""
    problems = []
    try:
        check_version(version)
    except InvalidArgumentError as error:
        problems += error.problems
    if kernel_type is None:
        kernel = "IntraNode" if ranks <= per_node else "InterNodeV1"
    else:
        kernel = kernel_type_name(kernel_type)
        if kernel is None:
            problems.append(Problem("kernel_type", kernel_type,
                                    f"a MORI-EP KernelType: {', '.join(KERNEL_TYPES)} ({src(HDR, '56-63')})"))
    quant = quant_type_name(quant_type)
    if quant is None:
        problems.append(Problem("quant_type", quant_type, f"one of {', '.join(QUANT_TYPES)} ({src(PY, '142-149')})"))
    if experts % ranks:
        problems.append(Problem("num_experts", experts,
                                f"experts (incl. redundant) must be divisible by num_ranks = {ranks}: MORI-EP takes "
                                f"num_experts_per_rank ({src(PY, '263')})"))
    if problems:
        return InvalidArgumentError(problems)
    if num_scale_bytes is not None:
        return kernel, quant, num_scale_bytes, 1
    if fp8:
        return kernel, quant, ceil_div(hidden, FP8_SCALE_BLOCK), 4
    return kernel, quant, 0, 0


def memory(config: EpDispatchCombineConfig, settings: ShmemSettings, symmetric: list[tuple[str, int]]):
    """``(usage, capacity, alignment)`` of the place the symmetric buffers are carved from."""
    sizes = [n for _, n in symmetric]
    if settings.comm == "cco":
        return cco_arena_usage(sizes), cco_arena_num_bytes(config), CCO_ALIGNMENT
    if settings.shmem_mode == "static_heap":
        return static_heap_usage(sizes), settings.heap_num_bytes, HEAP_ALIGNMENT
    return INTERNAL_SYNC_NUM_BYTES + sum(sizes), 0, 1  # isolation: one allocation each, no shared capacity


def free_name(settings: ShmemSettings) -> str:
    return "CCO arena not used by the handle" if settings.comm == "cco" else "static heap not used by the handle"
