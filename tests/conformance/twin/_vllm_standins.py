"""Stand-ins for what vLLM's prepare/finalize reach in its compiled extension (``vllm._C``,
``vllm._moe_C``), which a registry wheel ships for CUDA only: each registers the op under
vLLM's own name with the semantics of vLLM's reference implementation.

``_moe_C::moe_sum(input [m, topk, k], output [m, k], topk_ids?, expert_map?)``: ``output =
input.sum(dim=1)`` (csrc/moe/moe_align_sum_kernels.cu's ``moe_sum``; vLLM's
``TopKWeightAndReduceContiguous`` calls it after weighting each top-k row).

The platform: with no accelerator vLLM resolves ``UnspecifiedPlatform``, which still claims
pinned memory; ``PIN_MEMORY`` (``vllm.utils.torch_utils``, read by ``modular_kernel``'s
``ExpertTokensMetadata.make_from_list``) is set False, as vLLM's CPU platform has it.
"""

from __future__ import annotations

import torch

_LIBRARY = None


def install() -> None:
    import vllm.model_executor.layers.fused_moe.modular_kernel as modular_kernel
    import vllm.utils.torch_utils as torch_utils

    torch_utils.PIN_MEMORY = modular_kernel.PIN_MEMORY = False
    global _LIBRARY
    if _LIBRARY is not None or hasattr(torch.ops, "_moe_C") and hasattr(torch.ops._moe_C, "moe_sum"):
        return
    _LIBRARY = torch.library.Library("_moe_C", "DEF")
    _LIBRARY.define("moe_sum(Tensor input, Tensor(a!) output, Tensor? topk_ids=None, Tensor? expert_map=None) -> ()")

    def moe_sum(input, output, topk_ids=None, expert_map=None):
        output.copy_(input.sum(dim=1))

    _LIBRARY.impl("moe_sum", moe_sum, "CPU")
