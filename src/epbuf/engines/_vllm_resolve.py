"""vLLM's start-up decisions that come before any buffer size: whether an all2all manager and
its buffer exist at all, the default token budget, and what the activations are dispatched as.
No byte formulas; :mod:`epbuf.engines.vllm` composes these with the backends.

Upstream: vLLM 0.33.0 (``pip download --no-deps vllm==0.33.0``, read from the wheel; the
conformance tier, ``tests/conformance/vllm``, runs the same code and compares):

* ``vllm/model_executor/layers/fused_moe/config.py:1198-1201`` ``FusedMoEParallelConfig.make``:
  ``use_ep = dp x pcp x tp > 1 and enable_expert_parallel``; ``:1035-1038``
  ``use_all2all_kernels = use_ep and (dp > 1 or pcp > 1 or sp > 1)``. Without it
  ``all2all_utils.py:203`` ``maybe_make_prepare_finalize`` returns before any ``get_handle``:
  no DeepEP, pplx or MORI buffer. ``sp > 1`` needs DP > 1 (``vllm/config/parallel.py:767-785``
  ``use_sequence_parallel_moe``), so DP = 1 and PCP = 1 is no buffer.
* ``vllm/config/parallel.py:795-805`` ``use_batched_dp_moe``: ``all2all_backend in
  (deepep_low_latency, nixl_ep) and enable_expert_parallel and data_parallel_size > 1``;
  ``vllm/engine/arg_utils.py:3166-3174`` ``_set_default_max_num_seqs_and_batched_tokens_args``
  then defaults ``max_num_batched_tokens`` to ``SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP``
  = 256 (``vllm/config/scheduler.py:42``), else ``get_batch_defaults`` (``arg_utils.py:2940-3006``: 16384 on
  a GPU of >= 160 GiB, 8192 on >= 70 GiB that is not an A100, else 2048, for the OpenAI server);
  ``arg_utils.py:3183-3187``: ``--performance-mode throughput`` doubles a defaulted value.
* ``all2all_utils.py:345-385`` (MORI): FP8 (or int8) dispatch for per-token, block and per-tensor
  activation quantization, ``scale_dim = 1`` for per-token / per-tensor, ``hidden // 128`` for
  blocks; ``:270-273`` (DeepEP LL) FP8 only for 128 x 128 blocks.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding, Report
from ..units import GiB
from ._knobs import EngineProblem, Setting

__all__ = ["RELEASE", "A2A_GATE", "BATCHED_DP", "all2all_gate", "default_batched_tokens", "activation_quant",
           "QUANT_KINDS", "release_flags", "with_activation_quant", "no_all2all"]

#: The vLLM release whose code these rules are read from (``--engine-version 0.33.0``; ``main`` follows it).
RELEASE = "0.33.0"
A2A_GATE = "vllm/model_executor/layers/fused_moe/config.py:1035-1038 @v0.33.0 use_all2all_kernels"
BATCHED_DP = "vllm/config/parallel.py:795-805 @v0.33.0 use_batched_dp_moe"
BATCH_DEFAULTS = "vllm/engine/arg_utils.py:2940-3006,3166-3187 @v0.33.0"
MORI_QUANT = "vllm/model_executor/layers/fused_moe/all2all_utils.py:345-385 @v0.33.0"
#: ``SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP`` (``vllm/config/scheduler.py:42``).
BATCHED_DP_TOKENS = 256
BATCHED_DP_BACKENDS = ("deepep_low_latency", "nixl_ep")
#: What the MoE activations are quantized to before dispatch (``FusedMoEQuantConfig``): ``bf16``
#: (none), ``fp8-block`` (1 x 128 groups, DeepSeek's 128 x 128 weights), ``fp8-tensor``,
#: ``fp8-token``, ``int8-token`` (w8a8 int8: per-token dynamic scales).
QUANT_KINDS = ("bf16", "fp8-block", "fp8-tensor", "fp8-token", "int8-token")
#: ``--quantization`` methods whose MoE activations are FP8 (``vllm/config/quantization.py`` online
#: shorthands; ``fp8`` is per tensor unless the checkpoint carries ``weight_block_size``).
_QUANT_METHODS = {"fp8_per_tensor": "fp8-tensor", "fp8_per_block": "fp8-block", "fp8_per_channel": "fp8-token"}


def all2all_gate(tp: int, dp: int, pcp: int, expert_parallel: bool, backend: str) -> tuple[bool, str]:
    """``(the all2all kernels run, why not)`` by ``use_all2all_kernels`` (:data:`A2A_GATE`)."""
    if not expert_parallel:
        return False, ("without --enable-expert-parallel vLLM shards the experts by TP (use_ep is false): no "
                       f"all2all kernels and no {backend} buffer ({A2A_GATE})")
    if tp * dp * pcp == 1:
        return False, f"one GPU: use_ep needs DP x PCP x TP > 1 ({A2A_GATE})"
    if dp == 1 and pcp == 1:
        return False, (f"DP = 1 (and PCP = 1): use_all2all_kernels needs DP > 1, PCP > 1 or sequence-parallel MoE "
                       f"(which needs DP > 1), so vLLM builds no all2all manager and no {backend} buffer; "
                       f"the MoE layers run EP inside the TP group with all-reduce ({A2A_GATE})")
    return True, ""


def default_batched_tokens(*, backend: str, expert_parallel: bool, dp: int, device_bytes: int | None,
                           device_name: str, throughput: bool) -> tuple[int, str]:
    """vLLM's default ``max_num_batched_tokens`` for the OpenAI server and its reason."""
    if backend in BATCHED_DP_BACKENDS and expert_parallel and dp > 1:
        value, why = BATCHED_DP_TOKENS, (f"use_batched_dp_moe ({backend}, expert parallel, DP {dp} > 1): "
                                         f"DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP ({BATCHED_DP})")
    elif device_bytes is None:
        value, why = 8192, ("the OpenAI-server default on a 70-160 GiB GPU such as the H100/H200 (16384 from 160 "
                            f"GiB, 2048 below 70 GiB or on an A100; {BATCH_DEFAULTS}) - pass --device or the flag")
    else:
        big = device_bytes >= 70 * GiB and "a100" not in device_name.lower()
        value = 16384 if device_bytes >= 160 * GiB else 8192 if big else 2048
        tier = ">= 160 GiB" if value == 16384 else ">= 70 GiB, not A100" if big else "< 70 GiB or A100"
        why = f"the OpenAI-server default for {device_name or 'this device'} ({tier}; {BATCH_DEFAULTS})"
    if throughput:
        value, why = value * 2, f"{why}, doubled by --performance-mode throughput"
    return value, why


def activation_quant(quantization: object, block_fp8_model: bool, given: object) -> tuple[str, str]:
    """``(kind of QUANT_KINDS, why)``: ``given`` (epbuf's ``--activation-quant``) wins; else
    ``--quantization`` and the checkpoint: a block-FP8 checkpoint with ``fp8`` or none is
    ``fp8-block``; ``fp8`` on another is per tensor; the online shorthands say theirs."""
    if given is not None:
        return str(given), "--activation-quant"
    method = None if quantization is None else str(quantization).strip().lower()
    if block_fp8_model and method in (None, "fp8"):
        return "fp8-block", "the checkpoint's 128 x 128 block-FP8 quantization_config"
    if method == "fp8":
        return "fp8-tensor", "--quantization fp8 on weights without weight_block_size: Fp8Config per tensor"
    if method in _QUANT_METHODS:
        return _QUANT_METHODS[method], f"--quantization {method}"
    return "bf16", ("no activation quantization" if method is None else f"--quantization {method}: activations "
                                                                         "are not quantized before dispatch")


def release_flags(ctx, backend: str) -> None:
    """What vLLM 0.33.0's parser refuses (``vllm/engine/arg_utils.py``, ``vllm/config/parallel.py:45-60
    All2AllBackend``): ``--num-redundant-experts`` (gone; the count is ``--eplb-config``) and the bare
    ``mori`` backend (split into ``mori_high_throughput`` / ``mori_low_latency``)."""
    problems = []
    if ctx.setting("--num-redundant-experts").source == "flag":
        n = ctx.value("--num-redundant-experts")
        problems.append(EngineProblem(
            "--num-redundant-experts", n, f"now --eplb-config.num_redundant_experts {n} "
                                          "(gone in vLLM 0.33.0; --engine-version dp-chunk had it)"))
    if backend == "mori":
        problems.append(EngineProblem(
            "--all2all-backend", backend, "use mori_high_throughput or mori_low_latency "
                                          f"(refused by vLLM {RELEASE}: All2AllBackend, vllm/config/parallel.py:45-60; "
                                          "--engine-version dp-chunk sizes the vLLM that had mori)"))
    if problems:
        raise InvalidArgumentError(problems)


def with_activation_quant(ctx):
    """The ``--activation-quant`` setting resolved (:func:`._vllm_resolve.activation_quant`); an explicit
    ``--fp8-dispatch`` means 128 x 128 blocks either way."""
    given = ctx.setting("--activation-quant")
    fp8 = ctx.setting("--fp8-dispatch")
    if given.source == "default" and fp8.source == "flag":
        kind, why = ("fp8-block" if fp8.value else "bf16"), "--fp8-dispatch"
    else:
        kind, why = activation_quant(ctx.value("--quantization"), bool(fp8.value) or ctx.model_block_fp8,
                                                   given.value if given.source != "default" else None)
    if given.source != "default":
        return ctx
    return ctx.replace(settings={**ctx.settings, "--activation-quant": Setting(
        name="--activation-quant", value=kind, source="derived", note=why)})


def no_all2all(backend: str, why: str):
    rep = Report(backend=f"vllm/{backend}", title=f"vLLM --all2all-backend {backend}: no all2all buffer",
                 upstream=f"vllm-project/vllm {A2A_GATE}", inputs={}, buffers=(),
                 findings=(Finding(severity="info", code="vllm.no-all2all", message=why,
                                   data={"backend": backend}),))
    return rep, []
