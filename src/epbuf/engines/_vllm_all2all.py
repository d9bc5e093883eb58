"""The DeepEP buffers of vLLM's all2all managers (``--all2all-backend deepep_*``): low latency,
high throughput and DeepEP V2, each as a report and its recommendations. The engine, its knobs
and the settings vLLM derives are in :mod:`epbuf.engines.vllm`; the citations below are listed
there. DeepEP's numbers come from :mod:`epbuf.backends.deepep_v1` / :mod:`epbuf.backends.deepep_v2`.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding, Quantity, Region, Report
from ..units import INT32_MAX, MiB, align, format_bytes, format_int
from . import _deepep
from .._search import largest_true
from ._common import EngineContext, budget_findings, fixed_buffer, limit_findings, mib_ceil
from ._knobs import EngineProblem
from ._report import Recommendation

__all__ = ["ll_hidden", "ht_hidden", "low_latency", "high_throughput", "deepep_v2"]

REPO = "vllm-project/vllm"
A2A = "vllm/distributed/device_communicators/all2all.py @001430048e81"
A2A_UTILS = "vllm/model_executor/layers/fused_moe/all2all_utils.py @02bd2a49"
LL_PF = "vllm/model_executor/layers/fused_moe/prepare_finalize/deepep_ll.py @055e47c2"
HT_PF = "vllm/model_executor/layers/fused_moe/prepare_finalize/deepep_ht.py @055e47c2"
DEEPEP_BUF = "deepseek-ai/DeepEP csrc/legacy/buffer.hpp"

#: ``DeepEPLLPrepareAndFinalize.SUPPORTED_HIDDEN_SIZES`` (LL_PF).
SUPPORTED_HIDDEN_SIZES = (2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192)
#: ``xfer_atom_size = 32 * 16``: HT/V2 round hidden bytes up to it (HT_PF).
HT_HIDDEN_ALIGNMENT_BYTES = 512
#: Activations are BF16 (``act_dtype.itemsize``).
ACT_BYTES = 2
#: ``DeepEPAll2AllManagerBase.__init__``: "This is the DeepEP default" (A2A).
NUM_SMS = 20
#: ``DeepEPHTPrepareAndFinalize``: configs passed only for these EP sizes (HT_PF).
HT_CONFIG_RANKS = (2, 4, 8, 16, 24, 32, 64, 128, 144, 160)



def ll_hidden(hidden: int) -> int:
    """``DeepEPLLPrepareAndFinalize.maybe_roundup_layer_hidden_size`` (LL_PF): the next supported size.

    >>> ll_hidden(5120), ll_hidden(2880), ll_hidden(7000)
    (5120, 3072, 7168)

    Raises:
        InvalidArgumentError: above 8192 (vLLM raises ``ValueError``).
    """
    for size in SUPPORTED_HIDDEN_SIZES:
        if size >= hidden:
            return size
    raise InvalidArgumentError([EngineProblem(
        "--hidden", hidden, f"allowed up to {SUPPORTED_HIDDEN_SIZES[-1]} on vLLM's DeepEP low-latency path "
                            f"({LL_PF} maybe_roundup_layer_hidden_size raises ValueError)")])


def ht_hidden(hidden: int) -> int:
    """HT/V2 ``maybe_roundup_layer_hidden_size`` (HT_PF): BF16 bytes rounded up to 512.

    >>> ht_hidden(2880), ht_hidden(7168)
    (3072, 7168)
    """
    return align(hidden * ACT_BYTES, HT_HIDDEN_ALIGNMENT_BYTES) // ACT_BYTES



def _nvl_buffer(ctx: EngineContext, needed: int | None = None, note: str = ""):
    mb = ctx.value("VLLM_DEEPEP_BUFFER_SIZE_MB")
    return fixed_buffer("NVL buffer", mb * MiB, f"VLLM_DEEPEP_BUFFER_SIZE_MB = {mb} x 1024 x 1024{note}",
                        f"{REPO} {A2A} _make_all2all_kwargs", needed=needed, region="VLLM_DEEPEP_BUFFER_SIZE_MB")


# --- low latency -----------------------------------------------------------------------------
def low_latency(ctx, num_ranks, per_node, num_nodes, num_experts, redundant, tokens, tokens_knob):
    from ..backends import deepep_v1
    from ..plan import Plan

    hidden = ll_hidden(ctx.hidden)
    fp8 = bool(ctx.value("--fp8-dispatch"))
    plan = Plan(hidden=hidden, num_topk=ctx.num_topk, num_experts=ctx.num_experts, num_redundant_experts=redundant,
                num_ranks=num_ranks, num_ranks_per_node=per_node, num_max_tokens_per_rank=tokens,
                use_fp8_dispatch=fp8, version=ctx.backend_version, model=ctx.model)
    ll = deepep_v1.report_low_latency(plan)
    version = deepep_v1.get_version(ctx.backend_version)
    nvl = _nvl_buffer(ctx)
    rdma = ll.buffers[0].replace(name="LL RDMA buffer")
    nvl_bytes, hint = nvl.num_bytes, rdma.num_bytes
    own = _deepep.without_low_latency_duplicates(_deepep.constructor_limits(nvl_bytes, hint, num_ranks, True))
    depth = ctx.value("NVSHMEM_QP_DEPTH")
    if _deepep.qp_depth_applies(version):
        own.append(_deepep.qp_depth_limit(depth, tokens))
    limits = own + list(ll.limits)
    findings: list[Finding] = []
    if hidden != ctx.hidden:
        findings.append(Finding(severity="info", code="vllm.ll-hidden-rounded",
                                message=f"vLLM rounds hidden {ctx.hidden} up to {hidden}, the next size DeepEP's "
                                        f"low-latency kernels are built for ({LL_PF})",
                                data={"hidden": ctx.hidden, "rounded": hidden}))
    findings.append(Finding(
        severity="info", code="vllm.ll-nvl-allocated",
        message=f"vLLM also allocates the NVL buffer ({format_bytes(nvl_bytes)}, VLLM_DEEPEP_BUFFER_SIZE_MB) in "
                "low-latency mode; DeepEP's low-latency kernels lay out only the RDMA buffer "
                f"(LowLatencyLayout(rdma_buffer_ptr, ...), {DEEPEP_BUF} low_latency_dispatch @dd758ca)",
        data={"num_nvl_bytes": nvl_bytes}))
    ceiling = deepep_v1.max_low_latency_tokens(hidden, num_ranks, num_experts, version=version.id) \
        if version.int4_count_check else None
    findings += _deepep.ceiling_finding("vllm.ll-32gib-ceiling", tokens_knob, tokens, hint, hidden, num_ranks,
                                        num_experts, ceiling, redundant)
    findings += limit_findings("vllm", own, {
        "NVSHMEM_QP_DEPTH >= (num_max_dispatch_tokens_per_rank + 1) x 2":
            f"set NVSHMEM_QP_DEPTH={(tokens + 1) * 2} or lower {tokens_knob}"})
    findings += _deepep.without_backend_ceiling(ll.findings)
    findings += _load_findings(ctx, tokens, tokens_knob)
    ctor = _deepep.constructor_allocations(version, nvl_bytes)  # one Buffer (module docstring of .vllm)
    ctor_bytes = sum(b.num_bytes for b in ctor)
    total = nvl_bytes + hint + ctor_bytes
    findings += budget_findings("vllm", ctx, total)

    recs = _deepep.ll_recommendations(
        ctx, tokens_knob, hidden=hidden, num_ranks=num_ranks, num_experts=num_experts,
        fixed_bytes=nvl_bytes + ctor_bytes,
        other_rdma_bytes=0, version=version,
        extra_load_text=(" (a larger per-step batch is dispatched in chunks of this size)"
                         if tokens_knob == "VLLM_MOE_DP_CHUNK_SIZE" else
                         " (it is also the scheduler's per-step token budget)"))
    if _deepep.qp_depth_applies(version):
        fix = _deepep.qp_depth_recommendation(depth, tokens)
        if fix is not None:
            recs.append(fix)
    quantities = [Quantity(name="num_qps_per_rank", value=num_experts // num_ranks, source=f"{A2A} (E / R)"),
                  Quantity(name="num_nvl_bytes", value=nvl_bytes, unit="B"),
                  Quantity(name="num_rdma_bytes", value=hint, unit="B",
                           source=f"{A2A}; DeepEP get_low_latency_rdma_size_hint")]
    if ceiling is not None:
        quantities.append(Quantity(name="max_num_max_dispatch_tokens_per_rank", value=ceiling,
                                   source=f"{DEEPEP_BUF}:112 (num_rdma_bytes / 16 < INT_MAX)"))
    rep = Report(
        backend="vllm/deepep_low_latency",
        title=f"vLLM --all2all-backend deepep_low_latency ({ctx.version}): NVL + low-latency RDMA buffers",
        upstream=f"{REPO} {A2A} DeepEPLLAll2AllManager; {ll.upstream}",
        inputs={"num_max_dispatch_tokens_per_rank": tokens, "hidden": hidden, "num_ranks": num_ranks,
                "num_experts": num_experts, "num_topk": ctx.num_topk, "num_nodes": num_nodes,
                "use_fp8_dispatch": fp8, "deepep_version": version.id},
        buffers=(nvl, rdma, *ctor), records=ll.records, quantities=tuple(quantities), findings=tuple(findings),
        limits=tuple(limits))
    return rep, recs


def _load_findings(ctx: EngineContext, tokens: int, knob: str) -> list[Finding]:
    if ctx.load is None or ctx.load <= tokens:
        return []
    if knob == "VLLM_MOE_DP_CHUNK_SIZE":
        if not ctx.value("VLLM_ENABLE_MOE_DP_CHUNK"):
            return [Finding(severity="warning", code="vllm.tokens-above-capacity",
                            message=f"{format_int(ctx.load)} tokens per rank exceed T = {format_int(tokens)} and "
                                    "VLLM_ENABLE_MOE_DP_CHUNK=0 turns chunking off (PR #29936): a batch above T fails "
                                    "DeepEP's assert x.size(0) <= num_max_dispatch_tokens_per_rank (epbuf still sizes "
                                    "T = VLLM_MOE_DP_CHUNK_SIZE; how vLLM sizes the buffer without chunking is not "
                                    "modelled)", data={"load": ctx.load, "tokens": tokens})]
        return [Finding(severity="info", code="vllm.dp-chunked",
                        message=f"{format_int(ctx.load)} tokens per rank are dispatched in "
                                f"{-(-ctx.load // tokens)} chunks of VLLM_MOE_DP_CHUNK_SIZE = {format_int(tokens)}",
                        data={"load": ctx.load, "tokens": tokens})]
    return [Finding(severity="info", code="vllm.scheduler-caps-load",
                    message=f"--max-num-batched-tokens = {format_int(tokens)} caps a step below the "
                            f"{format_int(ctx.load)} tokens per rank of --max-tokens-under-load",
                    data={"load": ctx.load, "tokens": tokens})]


# --- high throughput ------------------------------------------------------------------------
def high_throughput(ctx, num_ranks, per_node, num_nodes, num_experts, redundant, tokens, tokens_knob):
    from ..backends import deepep_v1

    version = deepep_v1.get_version(ctx.backend_version)
    hidden = ht_hidden(ctx.hidden)
    fp8 = bool(ctx.value("--fp8-dispatch"))
    internode = num_nodes > 1
    force = bool(ctx.value("VLLM_DEEPEP_HIGH_THROUGHPUT_FORCE_INTRA_NODE"))
    mb = ctx.value("VLLM_DEEPEP_BUFFER_SIZE_MB")
    env_bytes = mb * MiB
    use_rdma = internode and not force
    hidden_bytes = deepep_v1.get_hidden_bytes(hidden, fp8)
    findings: list[Finding] = []
    nvl_regions, rdma_regions = [], []
    try:
        configs = {"dispatch": deepep_v1.get_dispatch_config(num_ranks, NUM_SMS, version=version.id),
                   "combine": deepep_v1.get_combine_config(num_ranks, NUM_SMS, version=version.id)}
    except InvalidArgumentError as error:
        configs = {}
        findings.append(Finding(severity="error", code="vllm.ht-no-config",
                                message=f"DeepEP has no default dispatch/combine config for {num_ranks} ranks, so "
                                        f"dispatch fails ({error})", data={"num_ranks": num_ranks}))
    cfg_src = f"DeepEP {deepep_v1.CFG} @{version.short}"
    for kind, cfg in configs.items():
        for regions, fn, what in ((nvl_regions, cfg.get_nvl_buffer_size_hint, "get_nvl_buffer_size_hint"),
                                  (rdma_regions, cfg.get_rdma_buffer_size_hint, "get_rdma_buffer_size_hint")):
            n = fn(hidden_bytes, num_ranks, version=version.id)
            regions.append(Region(name=f"{kind} config hint", num_bytes=n, num_bytes_used=n,
                                  formula=f"Config{cfg.as_tuple()}.{what}({format_int(hidden_bytes)}, {num_ranks})",
                                  source=cfg_src))
    nvl_hint = max((r.num_bytes for r in nvl_regions), default=0)
    rdma_hint = max((r.num_bytes for r in rdma_regions), default=0)
    # Without a DeepEP config there is no hint to compare with: the need is not known.
    hint_note = (lambda n: f"; DeepEP's hint for this shape: {format_int(n)} B") if configs else (lambda n: "")
    nvl = _nvl_buffer(ctx, needed=nvl_hint if configs else None, note=hint_note(nvl_hint))
    buffers = [nvl]
    rdma_bytes = env_bytes if use_rdma else 0
    if use_rdma:
        buffers.append(fixed_buffer("RDMA buffer", rdma_bytes,
                                    f"VLLM_DEEPEP_BUFFER_SIZE_MB = {mb} x 1024 x 1024 (internode){hint_note(rdma_hint)}",
                                    f"{REPO} {A2A} _make_all2all_kwargs", needed=rdma_hint if configs else None,
                                    region="VLLM_DEEPEP_BUFFER_SIZE_MB"))
    limits = _deepep.constructor_limits(env_bytes, rdma_bytes, num_ranks, False)
    limits += _deepep.smem_limits(version, num_ranks, NUM_SMS, ctx.device)
    findings += limit_findings("vllm", limits, {
        _deepep.RANKS_LIMIT: _deepep.RANKS_CONSEQUENCE,
        "num_ranks > 8 (num_rdma_bytes > 0, normal mode)":
            "the group spans nodes with at most 8 ranks; set VLLM_DEEPEP_HIGH_THROUGHPUT_FORCE_INTRA_NODE=1"})
    if configs:
        for what, allocated, hint in (("NVL", env_bytes, nvl_hint), ("RDMA", rdma_bytes, rdma_hint if use_rdma else 0)):
            if hint and allocated < hint:
                findings.append(Finding(
                    severity="warning", code="vllm.ht-below-hint",
                    message=f"the {what} buffer ({format_bytes(allocated)}) is smaller than DeepEP's hint for hidden "
                            f"{hidden} ({format_bytes(hint)}); dispatch/combine check their real need against it at "
                            "run time (the hint reserves 128 top-k slots per token, so the real need is a little less)",
                    data={"allocated": allocated, "hint": hint}))
            elif hint:
                findings.append(Finding(
                    severity="info", code="vllm.ht-fixed-size",
                    message=f"the {what} buffer is the fixed VLLM_DEEPEP_BUFFER_SIZE_MB = {mb} MiB; DeepEP's hint "
                            f"for this shape is {format_bytes(hint)} ({allocated / hint:.2f}x)",
                    data={"allocated": allocated, "hint": hint}))
    if internode and force:
        findings.append(Finding(severity="info", code="vllm.ht-force-intra-node",
                                message="VLLM_DEEPEP_HIGH_THROUGHPUT_FORCE_INTRA_NODE=1: no RDMA buffer although the "
                                        "EP group spans nodes (num_qps_per_rank = 1)", data={}))
    if hidden != ctx.hidden:
        findings.append(Finding(severity="info", code="vllm.ht-hidden-rounded",
                                message=f"vLLM rounds hidden {ctx.hidden} up to {hidden} (BF16 bytes to a multiple of "
                                        f"512, {HT_PF})", data={"hidden": ctx.hidden, "rounded": hidden}))
    if num_ranks not in HT_CONFIG_RANKS and configs:
        findings.append(Finding(severity="info", code="vllm.ht-config-none",
                                message=f"vLLM passes config=None for {num_ranks} ranks; DeepEP then uses the same "
                                        "default tables", data={}))
    ctor = _deepep.constructor_allocations(version, env_bytes)  # one Buffer (module docstring of .vllm)
    buffers += ctor
    findings += budget_findings("vllm", ctx, env_bytes + rdma_bytes + sum(b.num_bytes for b in ctor))

    cap = 2047 if use_rdma else (INT32_MAX * 16 - 1) // MiB  # the constructor's INT_MAX checks, in MiB
    nbuf = 2 if use_rdma else 1

    def total(m: int) -> int:
        """The device allocation with VLLM_DEEPEP_BUFFER_SIZE_MB = m: the buffer(s) and the constructor's own."""
        return m * MiB * nbuf + _deepep.constructor_num_bytes(version, m * MiB)

    recs = [Recommendation(setting="VLLM_DEEPEP_BUFFER_SIZE_MB", value=cap, goal="limit", num_bytes=total(cap),
                           message="the largest value DeepEP's Buffer constructor accepts here "
                                   + ("(NVL and RDMA bytes <= INT_MAX)" if use_rdma else "(NVL bytes / 16 < INT_MAX)"))]
    need = max(nvl_hint, rdma_hint if use_rdma else 0)
    if need:
        value = mib_ceil(need)
        recs.append(Recommendation(setting="VLLM_DEEPEP_BUFFER_SIZE_MB", value=value if value <= cap else None,
                                   goal="load", num_bytes=total(value),
                                   message="the smallest value that holds DeepEP's own hints for this shape "
                                           "(high-throughput buffers do not depend on the token count)"))
    if ctx.budget is not None:
        best = largest_true(0, cap, lambda m: total(m) <= ctx.budget)
        recs.append(Recommendation(setting="VLLM_DEEPEP_BUFFER_SIZE_MB", value=best, goal="budget",
                                   num_bytes=total(best) if best is not None else None,
                                   message=f"the largest value whose {nbuf} buffer(s) and DeepEP's 32 MiB workspace "
                                           f"fit --budget {format_bytes(ctx.budget)}" if best is not None else
                                           f"nothing fits --budget {format_bytes(ctx.budget)}: DeepEP's workspace "
                                           f"alone takes {format_int(total(0))} B"))
    inputs = {"hidden": hidden, "hidden_bytes": hidden_bytes, "num_ranks": num_ranks, "num_nodes": num_nodes,
              "internode": internode, "num_sms": NUM_SMS, "deepep_version": version.id}
    quantities = [Quantity(name="num_qps_per_rank", value=NUM_SMS // 2 if use_rdma else 1, source=A2A),
                  Quantity(name="num_nvl_bytes", value=env_bytes, unit="B"),
                  Quantity(name="num_rdma_bytes", value=rdma_bytes, unit="B"),
                  Quantity(name="deepep_nvl_hint", value=nvl_hint, unit="B", source=cfg_src),
                  Quantity(name="deepep_rdma_hint", value=rdma_hint, unit="B", source=cfg_src)]
    rep = Report(backend="vllm/deepep_high_throughput",
                 title="vLLM --all2all-backend deepep_high_throughput: fixed NVL" + (" + RDMA" if use_rdma else "")
                       + " buffers",
                 upstream=f"{REPO} {A2A} DeepEPHTAll2AllManager; DeepEP @{version.short}", inputs=inputs,
                 buffers=tuple(buffers), quantities=tuple(quantities),
                 findings=tuple(findings), limits=tuple(limits))
    return rep, recs


# --- DeepEP V2 -------------------------------------------------------------------------------
def deepep_v2(ctx, num_ranks, per_node, num_nodes, num_experts, redundant, tokens, tokens_knob):
    from ..backends import deepep_v2
    from ..plan import Plan

    hidden = ht_hidden(ctx.hidden)
    fp8 = bool(ctx.value("--fp8-dispatch"))
    hybrid = bool(ctx.value("VLLM_DEEPEP_V2_ALLOW_HYBRID_MODE"))
    amr = bool(ctx.value("VLLM_DEEPEP_V2_ALLOW_MULTIPLE_REDUCTION"))
    plan = Plan(hidden=hidden, num_topk=ctx.num_topk, num_experts=ctx.num_experts, num_redundant_experts=redundant,
                num_ranks=num_ranks, num_ranks_per_node=per_node, num_max_tokens_per_rank=tokens,
                use_fp8_dispatch=fp8, allow_hybrid_mode=hybrid, allow_multiple_reduction=amr,
                version=ctx.backend_version, model=ctx.model)
    v2 = deepep_v2.report(plan)
    findings = list(v2.findings)
    findings += _load_findings(ctx, tokens, tokens_knob)
    findings += budget_findings("vllm", ctx, v2.num_bytes)
    if hidden != ctx.hidden:
        findings.append(Finding(severity="info", code="vllm.v2-hidden-rounded",
                                message=f"vLLM rounds hidden {ctx.hidden} up to {hidden} (BF16 bytes to a multiple of "
                                        f"512)", data={"hidden": ctx.hidden, "rounded": hidden}))
    if ctx.version == "dp-chunk":
        findings.append(Finding(severity="info", code="vllm.v2-version",
                                message="DeepEP V2 support postdates PR #39107 in vLLM; sized here with "
                                        "VLLM_MOE_DP_CHUNK_SIZE as T as --engine-version dp-chunk asks", data={}))
    recs = _deepep.v2_recommendations(ctx, tokens_knob, num_ranks=num_ranks, num_nvl_ranks=per_node, hidden=hidden,
                                      num_topk=ctx.num_topk, use_fp8_dispatch=fp8, allow_hybrid_mode=hybrid,
                                      allow_multiple_reduction=amr, generation=v2.inputs["version"])
    rep = v2.replace(backend="vllm/deepep_v2",
                     title=f"vLLM --all2all-backend deepep_v2 ({ctx.version}): {v2.title}",
                     upstream=f"{REPO} {A2A} DeepEPV2All2AllManager; {v2.upstream}",
                     findings=tuple(findings))
    return rep, recs
