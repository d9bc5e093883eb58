"""SGLang's DeepEP V2 buffer (``--moe-a2a-backend deepep_v2``), sized by the deepep_v2 backend
(kept apart from :mod:`epbuf.engines.sglang`, which dispatches here)."""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding
from ..units import format_int
from . import _deepep
from ._common import budget_findings
from ._knobs import EngineProblem

REPO = "sgl-project/sglang"  # as in epbuf.engines.sglang (which imports this module)
TD_V2 = "python/sglang/srt/layers/moe/token_dispatcher/deepep_v2.py @0134da0b"


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
