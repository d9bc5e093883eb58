"""SGLang's DeepEP V2 buffer (``--moe-a2a-backend deepep_v2``), sized by the deepep_v2 backend
(kept apart from :mod:`epbuf.engines.sglang`, which dispatches here).

SGLang 0.5.23 (``--engine-version 0.5.23``; ``S`` = ``sglang/srt/`` of the wheel, run by
``tests/conformance/sglang``):

* ``S/layers/moe/fused_moe_triton/layer.py:270-272`` ``_deepep_v2_experts_are_fp8``: every quantized MoE
  method is block FP8, so the dispatch is FP8 for a quantized checkpoint and BF16 otherwise;
  ``S/layers/moe/utils.py:426-442``: a ``--deepep-dispatcher-output-dtype`` that contradicts it is a
  ``ValueError`` at start-up.
* ``layer.py:275-300`` ``_validate_deepep_v2_quant_method``: only BF16 or block-FP8 128 x 128 experts with
  dynamic activations (an FP8 checkpoint; ``--quantization fp8`` on a BF16 one quantizes per tensor).
* ``S/arg_groups/moe_hook.py:641-700`` ``validate_deepep_v2_dispatch_token_budget``: outside
  ``--disaggregation-mode decode``, ``ceil(chunked_prefill_size / max(1, tp_size // attn_dp_size))`` must
  not exceed ``SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK``; nor may the largest decode CUDA graph
  (``cuda_graph_max_bs_decode``, default by GPU memory and TP in ``S/arg_groups/memory_hook.py:89-170``,
  capped by ``max_running_requests // attn_dp_size``; none with ``--disable-cuda-graph`` or a prefill
  instance). Either refusal: no buffer, 0 B.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding
from ..units import format_int
from . import _deepep
from ._common import budget_findings
from ._knobs import EngineProblem, Knob

REPO = "sgl-project/sglang"  # as in epbuf.engines.sglang (which imports this module)
TD_V2 = "python/sglang/srt/layers/moe/token_dispatcher/deepep_v2.py @0134da0b"

SERVER_ARGS = "python/sglang/srt/server_args.py"
MOE_HOOK = "sglang/srt/arg_groups/moe_hook.py:641-700 (0.5.23)"
#: ``cuda_graph_config.decode.max_bs`` defaults by GPU memory in MiB (MEMORY_HOOK): ``(bound, tp < 4, tp >= 4)``.
DECODE_GRAPH_DEFAULTS = ((20 * 1024, 8, 8), (35 * 1024, 48, 160), (60 * 1024, 32, 160), (90 * 1024, 256, 512),
                         (160 * 1024, 256, 512), (None, 512, 512))
KNOBS = (
    Knob(name="--enable-dp-attention", kind="flag", default=False, source=f"{REPO} {SERVER_ARGS}",
         help="with --dp-size: attention data parallel (attn_dp_size = --dp-size)"),
    Knob(name="--dp-size", kind="int", lo=1, aliases=("--data-parallel-size",), source=f"{REPO} {SERVER_ARGS}",
         help="data-parallel size (the attention DP size with --enable-dp-attention)"),
    Knob(name="--attn-dp-size", kind="int", lo=1, source=f"{REPO} {SERVER_ARGS}", help="attention DP size"),
    Knob(name="--cuda-graph-max-bs-decode", kind="int", lo=0, source=f"{REPO} {SERVER_ARGS}",
         help="largest decode CUDA graph batch (default by GPU memory and TP); DeepEP V2 must hold it"),
    Knob(name="--disable-cuda-graph", kind="flag", default=False, source=f"{REPO} {SERVER_ARGS}",
         help="no CUDA graphs: DeepEP V2's decode-graph check does not apply"),
    Knob(name="--max-running-requests", kind="int", lo=1, source=f"{REPO} {SERVER_ARGS}",
         help="caps the decode CUDA graph batch per attention-DP rank"),
)



def use_fp8(ctx, dispatch_dtype: str) -> bool:
    """``use_fp8_dispatch``: 0.5.23 follows the checkpoint (any quantized MoE method is block FP8:
    ``--quantization`` given or FP8 weights); ``main`` the resolved dispatch dtype."""
    if ctx.version == "0.5.23":
        return ctx.value("--quantization") is not None or ctx.model_block_fp8 or ctx.value("--moe-weight-dtype") == "fp8"
    return dispatch_dtype == "fp8"


def attn_dp_size(ctx) -> int:
    """``--attn-dp-size``, else ``--dp-size`` with ``--enable-dp-attention`` (its deprecated spelling), else 1."""
    if ctx.value("--attn-dp-size") is not None:
        return ctx.value("--attn-dp-size")
    if ctx.value("--enable-dp-attention") and ctx.value("--dp-size") is not None:
        return ctx.value("--dp-size")
    return 1


def refusal_0_5_23(ctx, tp: int, fp8: bool) -> str | None:
    """What SGLang 0.5.23 refuses at start-up with ``deepep_v2`` (module docstring), or ``None``."""
    from ._sglang_mori import chunked_prefill_size

    knob = "SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK"
    quant = ctx.value("--quantization")
    if (quant is not None or ctx.model_block_fp8) and not (ctx.model_block_fp8 and quant in (None, "fp8")):
        what = ("a per-tensor FP8 checkpoint" if ctx.setting("--quantization").source == "model" else
                f"--quantization {quant}" if quant else "these weights")
        return (f"SGLang refuses deepep_v2 with {what}: its adapter "
                "feeds block-FP8 (128 x 128, dynamic) or BF16 experts only (0.5.23 "
                "sglang/srt/layers/moe/fused_moe_triton/layer.py:275-300)")
    given = ctx.value("--deepep-dispatcher-output-dtype")
    if given not in ("auto", "fp8" if fp8 else "bf16"):
        return (f"SGLang refuses --deepep-dispatcher-output-dtype {given}: deepep_v2 dispatches "
                f"{'FP8' if fp8 else 'BF16'} for this checkpoint (0.5.23 sglang/srt/layers/moe/utils.py:434-441)")
    capacity = ctx.value(knob)
    dp = attn_dp_size(ctx)
    chunked, origin = chunked_prefill_size(ctx)
    if ctx.value("--disaggregation-mode") != "decode" and chunked is not None and chunked > 0:
        required = -(-chunked // max(1, tp // dp))
        if required > capacity:
            return (f"SGLang refuses to start ({MOE_HOOK}): the per-rank prefill dispatch ceil({format_int(chunked)} "
                    f"({origin}) / {max(1, tp // dp)}) = {format_int(required)} exceeds {knob} = {format_int(capacity)}")
    if ctx.value("--disable-cuda-graph") or ctx.value("--disaggregation-mode") == "prefill":
        return None
    graph = ctx.value("--cuda-graph-max-bs-decode")
    if graph is None and ctx.device_num_bytes is not None:
        mib = ctx.device_num_bytes / (1 << 20)
        row = next(r for r in DECODE_GRAPH_DEFAULTS if r[0] is None or mib < r[0])
        graph = row[1] if tp < 4 else row[2]
    if graph is None:
        return None
    if ctx.value("--max-running-requests") is not None:
        graph = min(graph, max(1, ctx.value("--max-running-requests") // dp))
    if graph > capacity:
        return (f"SGLang refuses to start ({MOE_HOOK}): the decode CUDA graph of {format_int(graph)} tokens per rank "
                f"exceeds {knob} = {format_int(capacity)}; raise it, lower --cuda-graph-max-bs-decode or pass "
                "--disable-cuda-graph")
    return None


def deepep_v2(ctx, num_ranks, per_node, extra_experts, settings, findings, *, fp8: bool):
    """``--moe-a2a-backend deepep_v2``: ``DeepEPv2Buffer.get_buffer`` sizes DeepEP V2's buffer for
    ``SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK`` tokens (``fp8``: the dispatch dtype
    :func:`epbuf.engines.sglang` resolved)."""
    from ..backends import deepep_v2
    from ..plan import Plan

    knob = "SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK"
    tokens = ctx.value(knob)
    dtype = ctx.value("--deepep-dispatcher-output-dtype")
    if dtype == "nvfp4":
        raise InvalidArgumentError([EngineProblem("--deepep-dispatcher-output-dtype", dtype,
                                                  f"deepep_v2 supports bf16/fp8 dispatch only ({TD_V2})")])
    hybrid = ctx.value("--deepep-v2-mode") == "hybrid"
    if ctx.version == "0.5.23":
        refused = refusal_0_5_23(ctx, num_ranks, fp8)
        if refused is not None:
            from ..report import Report

            return Report(backend="sglang/deepep_v2", title="SGLang --moe-a2a-backend deepep_v2: refused at start-up, "
                                                            "no ElasticBuffer", upstream=f"{REPO} {MOE_HOOK}",
                          inputs={"num_buffers": 0}, buffers=(),
                          findings=tuple(findings) + (Finding(severity="error", code="sglang.deepep-v2-refused",
                                                              message=refused),)), []
    plan = Plan(hidden=ctx.hidden, num_topk=ctx.num_topk, num_experts=ctx.num_experts,
                num_redundant_experts=extra_experts, num_ranks=num_ranks, num_ranks_per_node=per_node,
                num_max_tokens_per_rank=tokens, use_fp8_dispatch=fp8, allow_hybrid_mode=hybrid,
                version=ctx.backend_version, model=ctx.model)
    v2 = deepep_v2.report(plan)
    findings = list(findings) + list(v2.findings)
    if ctx.load is not None and ctx.load > tokens:
        findings.append(Finding(severity="error", code="sglang.tokens-above-capacity",
                                message=f"{format_int(ctx.load)} tokens per rank exceed {knob} = {format_int(tokens)}: "
                                        f"SGLang's DeepEP V2 dispatch raises ValueError ({TD_V2})",
                                data={"load": ctx.load, "tokens": tokens}))
    findings += budget_findings("sglang", ctx, v2.num_bytes)
    recs = _deepep.v2_recommendations(ctx, knob, num_ranks=num_ranks, num_nvl_ranks=per_node, hidden=ctx.hidden,
                                      num_topk=ctx.num_topk, use_fp8_dispatch=fp8, allow_hybrid_mode=hybrid,
                                      allow_multiple_reduction=True, generation=v2.inputs["version"])
    rep = v2.replace(backend="sglang/deepep_v2", title=f"SGLang --moe-a2a-backend deepep_v2: {v2.title}",
                     upstream=f"{REPO} {TD_V2} DeepEPv2Buffer.get_buffer; {v2.upstream}", findings=tuple(findings))
    return rep, recs
