"""vLLM's MORI all2all backends (AMD ROCm): the ``EpDispatchCombineOp`` its ``MoriAll2AllManager``
builds, sized by :mod:`epbuf.backends.mori_ep` (:mod:`._mori`).

Upstream ``vllm-project/vllm`` (the public code index):

* ``vllm/distributed/device_communicators/all2all.py`` ``MoriAll2AllManager``: ``__init__`` runs
  ``mori.shmem.shmem_torch_process_group_init`` (the MORI-shmem static heap, ``MORI_SHMEM_HEAP_SIZE``);
  ``_make_all2all_kwargs`` passes ``world_size = num_ep_ranks``, ``hidden_dim = token_hidden_size``,
  ``scale_dim``, ``scale_type_size``, ``max_token_type_size = input_dtype.itemsize``,
  ``max_num_inp_token_per_rank = max_num_tokens_per_dp_rank``, ``num_experts_per_rank =
  num_local_experts``, ``num_experts_per_token`` and ``gpu_per_node = min(8, num_ep_ranks)`` — not the
  real node size. Kernel type: ``IntraNode`` when ``not self.internode``; across nodes
  ``InterNodeV1`` at ``@e04bcc7`` (backend ``mori``), and at ``@001430048e81`` (main) ``InterNodeV1``
  for ``mori_high_throughput`` and ``InterNodeV1LL`` for ``mori_low_latency`` (``__init__`` asserts
  one of those two names).
* ``vllm/model_executor/layers/fused_moe/all2all_utils.py @02bd2a49`` ``maybe_make_prepare_finalize``
  (``moe.use_mori_kernels``): FP8 dispatch for block-quantized models with ``scale_dim = hidden_dim //
  128`` and ``scale_type_size = 4`` (float32), and for per-token and per-tensor FP8 (and int8 w8a8) with
  ``scale_dim = 1`` (``is_per_act_token or is_per_tensor``); unquantized dispatch has ``scale_dim = 0``,
  ``scale_type_size = 0``; ``max_num_tokens_per_dp_rank = moe.max_num_tokens``, ``num_local_experts =
  moe.num_experts // world_size`` (routed + EPLB redundant), ``input_dtype = moe.in_dtype`` (BF16).
* ``moe.max_num_tokens``: ``VLLM_MOE_DP_CHUNK_SIZE`` before PR #39107 (``--engine-version dp-chunk``),
  ``--max-num-batched-tokens`` since.
* vLLM adds ``mori`` in PR #28664 (2025-11); PR #41751 (2026-05) still selects the internode kernel of
  ``mori`` through an environment variable, so the split into ``mori_high_throughput`` /
  ``mori_low_latency`` postdates PR #39107: ``dp-chunk`` knows ``mori`` only.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding
from ..units import format_int
from ._knobs import EngineProblem
from ._libraries import MORI_ENV_KNOBS, with_findings
from ._mori import MoriArgs, mori_report

__all__ = ["KNOBS", "BACKENDS", "mori"]

REPO = "vllm-project/vllm"
A2A_OLD = "vllm/distributed/device_communicators/all2all.py @e04bcc7 MoriAll2AllManager"
A2A_MAIN = "vllm/distributed/device_communicators/all2all.py @001430048e81 MoriAll2AllManager"
UTILS = "vllm/model_executor/layers/fused_moe/all2all_utils.py @02bd2a49 maybe_make_prepare_finalize"
#: ``--all2all-backend`` names of the MORI managers, by vLLM version.
BACKENDS = ("mori", "mori_high_throughput", "mori_low_latency")
#: ``scale_dim = moe.hidden_dim // 128`` float32 scales for block FP8 (UTILS).
FP8_BLOCK = 128
FLOAT32_BYTES = 4
#: ``gpu_per_node=min(8, num_ep_ranks)`` (``_make_all2all_kwargs``).
MAX_GPU_PER_NODE = 8

KNOBS = MORI_ENV_KNOBS


def _kernel(ctx, backend: str, internode: bool) -> tuple[str, str, list[Finding]]:
    """``(kernel type, manager citation, findings)`` for the backend name at the engine version."""
    if ctx.version == "dp-chunk":
        if backend != "mori":
            raise InvalidArgumentError([EngineProblem(
                "--all2all-backend", backend, "dp-chunk's vLLM names it mori (renamed by PR #39107)")])
        return ("InterNodeV1" if internode else "IntraNode"), A2A_OLD, []
    findings = []
    if backend == "mori":
        findings.append(Finding(
            severity="warning", code="vllm.mori-renamed",
            message=f"vLLM main splits mori into mori_high_throughput (InterNodeV1 across nodes, what mori ran) and "
                    f"mori_low_latency (InterNodeV1LL); its MoriAll2AllManager asserts one of the two ({A2A_MAIN}); "
                    "sized as mori_high_throughput (--engine-version dp-chunk sizes the vLLM that still has mori)",
            data={}))
        backend = "mori_high_throughput"
    kernel = "IntraNode" if not internode else ("InterNodeV1LL" if backend == "mori_low_latency" else "InterNodeV1")
    return kernel, A2A_MAIN, findings


def mori(ctx, num_ranks, per_node, num_nodes, num_experts, redundant, tokens, tokens_knob):
    """What ``--all2all-backend mori | mori_high_throughput | mori_low_latency`` allocates per GPU:
    the MORI-shmem heap (allocated whole) with the handle's symmetric buffers, and its local
    buffers (``mori_ep.report`` for the config vLLM builds, module docstring).

    Raises:
        InvalidArgumentError: a backend name the engine version does not have; what the backend
            cannot size (experts not divisible by the EP size, ``gpu_per_node = min(8, ranks)`` not
            dividing the ranks, a token count whose int products overflow).
    """
    backend = ctx.value("--all2all-backend")
    internode = num_nodes > 1
    kernel, manager, findings = _kernel(ctx, backend, internode)
    kind = ctx.value("--activation-quant") or ("fp8-block" if ctx.value("--fp8-dispatch") else "bf16")
    fp8 = kind != "bf16"  # 1-byte elements: FP8, or int8 for w8a8 int8
    # scale_dim: hidden // 128 for 1 x 128 blocks, 1 for per-token and per-tensor (UTILS, :345-385 @v0.33.0)
    scale_dim = 0 if not fp8 else ctx.hidden // FP8_BLOCK if kind == "fp8-block" else 1
    gpu_per_node = min(MAX_GPU_PER_NODE, num_ranks)
    args = MoriArgs(world_size=num_ranks, gpu_per_node=gpu_per_node, tokens=tokens, kernel_type=kernel,
                    scale_bytes=scale_dim * FLOAT32_BYTES, fp8_dispatch=fp8, num_redundant_experts=redundant)
    findings.append(Finding(
        severity="info", code="vllm.mori-args",
        message=f"vLLM builds EpDispatchCombineConfig(world_size = {num_ranks}, hidden_dim = {ctx.hidden}, scale_dim = "
                f"{scale_dim}, scale_type_size = {FLOAT32_BYTES if fp8 else 0}, max_token_type_size = 2 (BF16 input), "
                f"max_num_inp_token_per_rank = {tokens_knob} = {format_int(tokens)}, num_experts_per_rank = "
                f"{num_experts // num_ranks}, num_experts_per_token = {ctx.num_topk}, kernel_type = {kernel}, "
                f"gpu_per_node = min(8, {num_ranks}) = {gpu_per_node}) ({manager}._make_all2all_kwargs; {UTILS})",
        data={"kernel_type": kernel, "gpu_per_node": gpu_per_node, "scale_dim": scale_dim}))
    if gpu_per_node != per_node:
        findings.append(Finding(
            severity="info", code="vllm.mori-gpu-per-node",
            message=f"vLLM passes gpu_per_node = min(8, EP size) = {gpu_per_node}, not the {per_node} GPUs per node of "
                    f"the topology; MORI sizes and checks with the value passed", data={"gpu_per_node": gpu_per_node}))
    rep, recs = mori_report(
        ctx, args, prefix="vllm", knob=tokens_knob,
        load_text=(" (a larger per-step batch is dispatched in chunks of this size)"
                   if tokens_knob == "VLLM_MOE_DP_CHUNK_SIZE" else " (it is also the scheduler's per-step token budget)"))
    rep = with_findings(rep, findings).replace(
        backend=f"vllm/{backend}", title=f"vLLM --all2all-backend {backend} ({ctx.version}): {rep.title}",
        upstream=f"{REPO} {manager}; {UTILS}; {rep.upstream}")
    return rep, recs
