"""SGLang's ``--moe-a2a-backend deepep`` on UCCL-EP's drop-in (``--uccl-ep``): SGLang's
``DeepEPBuffer.get_deepep_buffer`` recipe (:mod:`.sglang` cites it) with every ``deep_ep`` call
answered by UCCL-EP — ``Buffer.get_dispatch_config`` / ``get_combine_config`` (UCCL-EP's tables, the
EFA rows included), ``Config.get_nvl_buffer_size_hint`` / ``get_rdma_buffer_size_hint`` and
``Buffer.get_low_latency_rdma_size_hint`` (:mod:`epbuf.backends.uccl_ep`) — and UCCL-EP's
``Buffer`` allocating the result (:mod:`._uccl`). UCCL-EP's own scripts launch SGLang this way
(``ep/bench/sglang/common_launch.sh:85-86``, ``Qwen3-30B_uep_intel_nic.sh:44, 58-60``).
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding, LimitCheck, Quantity, Region, Report
from ..units import format_int
from . import _uccl
from ._common import budget_findings, limit, limit_findings
from ._knobs import EngineProblem, Setting

__all__ = ["deepep"]

REPO = "sgl-project/sglang"
TD = "python/sglang/srt/layers/moe/token_dispatcher/deepep.py"
SRC = f"{REPO} {TD} DeepEPBuffer.get_deepep_buffer"
KNOB = "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK"
MAX_DISPATCH_TOKENS = 1024  # SGLang's assert (FINISHED_SUM_TAG=1024), as in .sglang
EXPERTS_DIVIDE = "num_experts % group.size() == 0 (low-latency)"
SAME_NUM_SMS = "--deepep-config normal_combine num_sms == normal_dispatch num_sms"
NUM_SMS = 20  # UCCL-EP Buffer.num_sms (ep/bench/buffer.py:74)


def deepep(ctx, num_ranks, per_node, num_nodes, num_experts, extra_experts, settings, findings, *, configs_fn,
           param_bytes: tuple, dispatch_dtype: str):
    """``(report, recommendations)`` for ``--moe-a2a-backend deepep --uccl-ep``.

    Args:
        configs_fn: SGLang's ``--deepep-config`` reader (``sglang._configs``), used when the flag is given.
        param_bytes: ``(params_bytes, note)`` of the engine version.
        dispatch_dtype: the dispatcher's output dtype (``fp8`` sizes FP8 low-latency messages).

    Raises:
        InvalidArgumentError: what UCCL-EP's size functions cannot evaluate (a rank count its tables lack,
            ranks above 8 and not a multiple of 8).
    """
    from ..backends import uccl_ep
    from ..backends.uccl_ep import limits as uccl_limits
    from ..plan import Plan

    mode = ctx.value("--deepep-mode")
    normal, low_latency = mode in ("normal", "auto"), mode in ("low_latency", "auto")
    hidden, tokens = ctx.hidden, ctx.value(KNOB)
    fp8 = dispatch_dtype == "fp8"
    pb, pb_note = param_bytes
    settings.append(Setting(name="param_bytes", value=pb, source="derived", note=pb_note))
    plan = Plan(hidden=hidden, num_topk=ctx.num_topk, num_experts=ctx.num_experts, num_redundant_experts=extra_experts,
                num_ranks=num_ranks, num_ranks_per_node=per_node, num_max_tokens_per_rank=tokens, use_fp8_dispatch=fp8,
                model=ctx.model, **_uccl.uccl_plan_kwargs(ctx))
    version = uccl_ep.get_version(plan.version)
    own: list[LimitCheck] = [limit(f"{KNOB} <= 1024", tokens, "<=", MAX_DISPATCH_TOKENS,
                                   f"{REPO} {TD} _DeepEPDispatcherImplBase.__init__ (FINISHED_SUM_TAG=1024)")]
    nvl_regions, rdma_regions, configs = [], [], {}
    if normal:
        if ctx.value("--deepep-config") is not None:
            dispatch, combine, _, origin = configs_fn(ctx, num_ranks, None)
            own.append(limit(SAME_NUM_SMS, combine.num_sms, "==", dispatch.num_sms,
                             f"{REPO} {TD} DeepEPConfig.__init__ (assert on num_sms)"))
        else:
            efa = ctx.value("--uccl-nic") == "efa"
            dispatch = uccl_ep.get_dispatch_config(num_ranks, NUM_SMS, efa=efa)
            combine = uccl_ep.get_combine_config(num_ranks, NUM_SMS, efa=efa)
            origin = "UCCL-EP Buffer tables" + (" (EFA)" if efa else "")
        configs = {"dispatch": dispatch, "combine": combine}
        for kind, cfg in configs.items():
            for regions, fn, what in ((nvl_regions, uccl_ep.nvl_buffer, "get_nvl_buffer_size_hint"),
                                      (rdma_regions, uccl_ep.rdma_buffer, "get_rdma_buffer_size_hint")):
                b = fn(cfg, hidden * pb, num_ranks)
                regions.append(Region(name=f"normal {kind} config ({origin})", num_bytes=b.num_bytes,
                                      num_bytes_used=b.num_bytes, source=b.source,
                                      formula=f"Config{cfg.as_tuple()}.{what}({format_int(hidden)} x {pb}, {num_ranks})"))
    if normal and pb < 2:
        bf16 = max(uccl_ep.nvl_buffer(c, hidden * 2, num_ranks).num_bytes for c in configs.values())
        sized = max(r.num_bytes for r in nvl_regions)
        findings = list(findings) + [Finding(
            severity="warning", code="sglang.param-bytes-1",
            message=f"param_bytes = 1 sizes the NVL buffer for 1-byte elements ({format_int(sized)} B); combine is "
                    f"BF16 and the recipe hidden x max(element size, 2) gives {format_int(bf16)} B with UCCL-EP's "
                    "hints - the combine's check against num_nvl_bytes may fail; pass --deepep-dispatcher-output-dtype "
                    "bf16 or --engine-version param-bytes-2 to compare",
            data={"num_nvl_bytes": sized, "bf16_hint": bf16})]
    ll_rep = None
    if low_latency:
        own.append(limit(EXPERTS_DIVIDE, num_experts % num_ranks, "==", 0, f"{SRC} (assert before the low-latency hint)"))
        ll_rep = uccl_ep.report_low_latency(plan)
        rdma_regions.append(Region(name="low-latency hint", num_bytes=ll_rep.quantity("num_rdma_bytes"),
                                   num_bytes_used=ll_rep.quantity("num_rdma_bytes"),
                                   formula=f"get_low_latency_rdma_size_hint({format_int(tokens)}, {hidden}, {num_ranks}, "
                                           f"{num_experts})", source="UCCL-EP ep/include/ep_config.hpp:318-327"))
    nvl_bytes = max((r.num_bytes for r in nvl_regions), default=0)
    rdma_bytes = max((r.num_bytes for r in rdma_regions), default=0)
    normal_rdma = max((r.num_bytes for r in rdma_regions if r.name.startswith("normal")), default=0)
    nvl = _uccl.fixed_nvl(nvl_bytes, "max of the NVL hints: " + ", ".join(f"{r.name} {format_int(r.num_bytes)}"
                                                                          for r in nvl_regions), SRC)
    if ll_rep is not None and rdma_bytes == ll_rep.quantity("num_rdma_bytes"):  # the low-latency layout sets it
        rdma_layout = next(b for b in ll_rep.buffers + ll_rep.host_buffers if b.name.startswith("RDMA buffer")).regions
    else:
        rdma_layout = _uccl.fixed_nvl(rdma_bytes, "max of the RDMA hints: " + ", ".join(
            f"{r.name} {format_int(r.num_bytes)}" for r in rdma_regions), SRC).regions if rdma_bytes else ()
    device, host = _uccl.allocations(ctx, nvl, list(rdma_layout), rdma_bytes, per_node)

    limits = own + _uccl.constructor_limits(ctx, nvl_bytes, rdma_bytes, num_ranks, per_node, low_latency)
    names = {lim.name for lim in limits}
    if normal:
        dispatched = uccl_ep.rdma_buffer(configs["dispatch"], hidden * (1 if fp8 else 2), num_ranks).num_bytes
        for row in uccl_limits.normal_limit_rows(version, plan.platform, num_ranks, per_node, ctx.num_topk, num_experts,
                                                 hidden, fp8, configs, configs["combine"], nvl_bytes, rdma_bytes,
                                                 dispatched):
            if row[0] not in names and not row[0].startswith(("num_nvl_bytes (when", "num_rdma_bytes <=",
                                                               "num_ranks (normal mode)")):
                names.add(row[0])
                limits.append(LimitCheck(name=row[0], value=row[1], relation=row[2], bound=row[3], ok=row[4],
                                         source=row[5], enforced=row[6]))
    if ll_rep is not None:
        limits += [lim for lim in ll_rep.limits if lim.name not in names]
    out = list(findings) + limit_findings("sglang", [lim for lim in limits if ll_rep is None or lim not in ll_rep.limits], {
        f"{KNOB} <= 1024": "SGLang asserts it when the dispatcher is built",
        EXPERTS_DIVIDE: "SGLang asserts it before sizing the low-latency buffer",
        SAME_NUM_SMS: "SGLang asserts it when it reads --deepep-config"})
    if ll_rep is not None:
        out += [f for f in ll_rep.findings if f.code != "uccl-ll.host-memory"]
        if ctx.load is not None and ctx.load > tokens:
            out.append(Finding(severity="error", code="sglang.tokens-above-capacity",
                               message=f"{format_int(ctx.load)} tokens per rank exceed {KNOB} = {format_int(tokens)}: "
                                       "the low-latency dispatch asserts x.size(0) <= num_max_dispatch_tokens_per_rank",
                               data={"load": ctx.load, "tokens": tokens}))
    rep = Report(backend="sglang/deepep", title=f"SGLang --moe-a2a-backend deepep --deepep-mode {mode} --uccl-ep "
                                                f"({ctx.version}): UCCL-EP DeepEPBuffer",
                 upstream=f"{SRC}; UCCL-EP {version.id} @ {version.commit} ({version.date})",
                 inputs={"deepep_mode": mode, "hidden": hidden, "param_bytes": pb, "num_ranks": num_ranks,
                         "num_nodes": num_nodes, "num_experts": num_experts, "num_max_dispatch_tokens_per_rank": tokens,
                         "low_latency_mode": low_latency, **_uccl.uccl_plan_kwargs(ctx)},
                 buffers=device, host_buffers=host, records=ll_rep.records if ll_rep is not None else (),
                 quantities=(Quantity(name="num_nvl_bytes", value=nvl_bytes, unit="B"),
                             Quantity(name="num_rdma_bytes", value=rdma_bytes, unit="B")),
                 limits=tuple(limits))
    out += _uccl.runtime_findings("sglang", ctx, host, device) + budget_findings("sglang", ctx, rep.num_bytes)
    rep = rep.replace(findings=tuple(out))
    recs = []
    if ll_rep is not None:
        recs = _uccl.ll_token_recommendations(
            ctx, KNOB, device[0].num_bytes if nvl_bytes else 0, plan, other_rdma_bytes=normal_rdma,
            cap=MAX_DISPATCH_TOKENS, cap_text=f"SGLang asserts {KNOB} <= 1024 (FINISHED_SUM_TAG)")
    return rep, recs


def not_deep_ep(backend: str) -> InvalidArgumentError:
    """``--uccl-ep`` with a backend that does not import ``deep_ep``."""
    if backend == "deepep_v2":
        return _uccl.no_v2(backend)
    return InvalidArgumentError([EngineProblem("--uccl-ep", True, f"{backend} does not use deep_ep; "
                                                                 "UCCL-EP's drop-in replaces DeepEP for deepep")])
