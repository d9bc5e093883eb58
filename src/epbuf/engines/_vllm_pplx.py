"""vLLM's ``--all2all-backend pplx``: the pplx-kernels ``AllToAll`` its ``PPLXAll2AllManager`` builds,
sized by :mod:`epbuf.backends.pplx`.

Upstream ``vllm-project/vllm`` (the public code index):

* ``vllm/distributed/device_communicators/all2all.py @e04bcc7`` ``PPLXAll2AllManager``: NVSHMEM is
  initialised only ``if self.internode``; ``get_handle`` builds ``pplx.AllToAll.internode`` when the
  EP group spans nodes, else ``pplx.AllToAll.intranode`` (one handle per distinct kwargs, ``Cache``).
* ``FusedMoEMethodBase._maybe_make_prepare_finalize`` (``vllm/model_executor/layers/fused_moe/layer.py``,
  the text is the same in the versions the index stores; later ``all2all_utils.maybe_make_prepare_finalize``):
  ``max_num_tokens = moe.max_num_tokens``, ``num_experts = moe.num_experts`` (routed + EPLB redundant),
  ``experts_per_token = moe.experts_per_token``, ``world_size`` = the EP group,
  ``dp_size = all2all_manager.tp_group.world_size`` ("dp_size actually means tp_size, bug in pplx
  kernels"), ``hidden_dim = moe.hidden_dim`` and the byte counts of ``pplx_hidden_dim_scale_bytes``.
* ``vllm/model_executor/layers/fused_moe/pplx_prepare_finalize.py @85c990c``
  ``pplx_hidden_dim_scale_bytes``: with an FP8 (or int8) quant dtype ``hidden_dim_bytes = hidden x 1`` and
  ``hidden_scale_bytes = cdiv(hidden, block_shape[1]) x 4`` (block quantization), ``4`` (one float32:
  per-token, ``per_act_token_quant``, or per tensor; rounded up to 16); unquantized
  ``hidden x in_dtype.itemsize`` and 0; both rounded up to 16 ("All pplx byte sizes must be
  16-byte aligned").
* ``FusedMoEConfig.max_num_tokens`` is ``VLLM_MOE_DP_CHUNK_SIZE`` before PR #39107, i.e. in every vLLM
  that has ``pplx``: PR #33724 (merged before 2026-02-26) removed the backend, and from then on
  ``ParallelConfig._validate_parallel_config`` warns "The 'pplx' all2all backend has been removed.
  Falling back to 'allgather_reducescatter'" (``vllm/config/parallel.py``).
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding, Quantity
from ..units import GiB, ceil_div, format_bytes, format_int
from ._common import budget_findings
from ._knobs import EngineProblem
from ._libraries import PPLX_ENV_KNOBS, library_env, no_buffer_report, token_recommendations, with_findings
from ._report import Recommendation

__all__ = ["KNOBS", "PPLX_PF", "hidden_dim_scale_bytes", "pplx"]

REPO = "vllm-project/vllm"
A2A = "vllm/distributed/device_communicators/all2all.py @e04bcc7 PPLXAll2AllManager"
PPLX_PF = "vllm/model_executor/layers/fused_moe/pplx_prepare_finalize.py @85c990c pplx_hidden_dim_scale_bytes"
PF_ARGS = "FusedMoEMethodBase._maybe_make_prepare_finalize (all_to_all_args)"
REMOVED = "PR #33724 removed it; vllm/config/parallel.py ParallelConfig._validate_parallel_config falls back"
#: ``align = 16`` in ``pplx_hidden_dim_scale_bytes``.
ALIGN = 16
#: DeepSeek-style block FP8: one float32 scale per ``block_shape[1] = 128`` elements.
FP8_BLOCK = 128
FLOAT32_BYTES = 4
BF16_BYTES = 2

KNOBS = PPLX_ENV_KNOBS


def hidden_dim_scale_bytes(hidden: int, fp8: bool | str) -> tuple[int, int]:
    """``pplx_hidden_dim_scale_bytes`` (``PPLX_PF``) for BF16 activations and the quantized ones:
    ``fp8`` ``True`` / ``"fp8-block"`` is block FP8 (``block_shape = [128, 128]``: one float32 per 128
    elements); ``"fp8-tensor"``, ``"fp8-token"`` and ``"int8-token"`` are 1-byte elements with one float32
    scale (per tensor or per token); ``False`` / ``"bf16"`` unquantized. Returns
    ``(round_up(hidden_dim_bytes, 16), round_up(hidden_scale_bytes, 16))``.

    >>> hidden_dim_scale_bytes(7168, True), hidden_dim_scale_bytes(2880, True), hidden_dim_scale_bytes(7000, False)
    ((7168, 224), (2880, 96), (14000, 0))
    >>> hidden_dim_scale_bytes(4096, "fp8-tensor"), hidden_dim_scale_bytes(4096, "int8-token")
    ((4096, 16), (4096, 16))
    """
    kind = "fp8-block" if fp8 is True else "bf16" if fp8 is False else fp8
    if kind == "bf16":
        return ceil_div(hidden * BF16_BYTES, ALIGN) * ALIGN, 0
    scales = ceil_div(hidden, FP8_BLOCK) if kind == "fp8-block" else 1
    return ceil_div(hidden, ALIGN) * ALIGN, ceil_div(scales * FLOAT32_BYTES, ALIGN) * ALIGN


def _plan(ctx, num_ranks, per_node, redundant, tokens, kernel, fp8, scale_bytes, dp_size):
    from ..plan import Plan

    return Plan(hidden=ctx.hidden, num_topk=ctx.num_topk, num_experts=ctx.num_experts,
                num_redundant_experts=redundant, num_ranks=num_ranks, num_ranks_per_node=per_node,
                num_max_tokens_per_rank=tokens, use_fp8_dispatch=fp8, kernel_type=kernel, dp_group_size=dp_size,
                num_scale_bytes=scale_bytes, env=library_env(ctx, KNOBS), version=ctx.backend_version, model=ctx.model)


def pplx(ctx, num_ranks, per_node, num_nodes, num_experts, redundant, tokens, tokens_knob):
    """What ``--all2all-backend pplx`` allocates per GPU: ``pplx.report`` for the arguments vLLM
    passes (module docstring), with the NVSHMEM heap fix and exact recommendations for the token
    count. On ``--engine-version main`` vLLM no longer has the backend: no buffer and a warning."""
    from ..backends import pplx as backend

    if ctx.version == "main":
        rep = no_buffer_report(
            "vllm/pplx", "vLLM --all2all-backend pplx (main): removed, falls back to allgather_reducescatter",
            f"{REPO} vllm/config/parallel.py", Finding(
                severity="warning", code="vllm.pplx-removed",
                message=f"vLLM main has no pplx backend ({REMOVED} to allgather_reducescatter with a warning): no "
                        "pplx-kernels buffer is allocated; pass --engine-version dp-chunk to size the AllToAll of a "
                        "vLLM that still has it", data={}))
        return rep, []
    kernel = "internode" if num_nodes > 1 else "intranode"
    kind = ctx.value("--activation-quant") or ("fp8-block" if ctx.value("--fp8-dispatch") else "bf16")
    fp8 = kind != "bf16"  # 1-byte elements (FP8 or int8)
    hidden_bytes, scale_bytes = hidden_dim_scale_bytes(ctx.hidden, kind)
    if hidden_bytes != ctx.hidden * (1 if fp8 else BF16_BYTES):
        raise InvalidArgumentError([EngineProblem(
            "--hidden", ctx.hidden, f"vLLM rounds hidden_dim_bytes up to {hidden_bytes} ({PPLX_PF}); epbuf's pplx "
                                    "backend takes hidden x element size, so it sizes hidden sizes whose bytes are a "
                                    "multiple of 16 only (pplx-kernels' combine needs hidden % 8 == 0 anyway)")])
    dp_size = ctx.value("--tensor-parallel-size")  # tp_group.world_size: 1 unless -tp is given
    plan = _plan(ctx, num_ranks, per_node, redundant, tokens, kernel, fp8, scale_bytes, dp_size)
    rep = backend.report(plan)
    where = "the EP group spans nodes" if kernel == "internode" else "one node"
    findings = [Finding(
        severity="info", code="vllm.pplx-args",
        message=f"vLLM builds pplx.AllToAll.{kernel} ({A2A}.get_handle: {where}) "
                f"with max_num_tokens = {tokens_knob} = {format_int(tokens)}, num_experts = {num_experts}, "
                f"dp_size = TP size {dp_size} ({PF_ARGS}: \"dp_size actually means tp_size\"), hidden_dim_bytes = "
                f"{format_int(hidden_bytes)}, hidden_dim_scale_bytes = {scale_bytes} (rounded up to 16, {PPLX_PF})",
        data={"kernel": kernel, "dp_size": dp_size, "hidden_dim_bytes": hidden_bytes,
              "hidden_dim_scale_bytes": scale_bytes})]
    findings += budget_findings("vllm", ctx, rep.num_bytes)
    recs = []
    heap = next((f for f in rep.findings if f.code == "pplx.nvshmem-heap"), None)
    if heap is not None:
        need = heap.data["nvshmem_num_bytes"]
        recs.append(Recommendation(setting="NVSHMEM_SYMMETRIC_SIZE", value=f"{ceil_div(need, GiB)}g", goal="fix",
                                   num_bytes=rep.num_bytes,
                                   message=f"the nvshmem_malloc buffers take {format_bytes(need)}: a symmetric heap "
                                           "of at least this size holds them"))

    def at(t):
        return backend.summarize(plan.replace(num_max_tokens_per_rank=t))

    recs = token_recommendations(ctx, tokens_knob, lambda t: at(t).num_bytes, lambda t: at(t).broken,
                                 what=f"pplx-kernels AllToAll.{kernel}",
                                 load_text=" (a larger per-step batch is dispatched in chunks of this size)") + recs
    quantities = rep.quantities + (Quantity(name="dp_size", value=dp_size, source=PF_ARGS),)
    rep = with_findings(rep, findings).replace(
        backend="vllm/pplx", title=f"vLLM --all2all-backend pplx ({ctx.version}): {rep.title}",
        upstream=f"{REPO} {A2A}; {PPLX_PF}; {rep.upstream}", quantities=quantities)
    return rep, recs

