"""vLLM's DeepEP all2all managers on UCCL-EP's drop-in (``--all2all-backend deepep_* --uccl-ep``):
the same ``deep_ep.Buffer(...)`` calls (:mod:`._vllm_all2all` cites them), answered by UCCL-EP
(:mod:`._uccl`, :mod:`epbuf.backends.uccl_ep`).

* ``deepep_low_latency``: ``num_nvl_bytes = VLLM_DEEPEP_BUFFER_SIZE_MB MiB`` and ``num_rdma_bytes =
  Buffer.get_low_latency_rdma_size_hint(T, hidden, R, E)`` — UCCL-EP's hint (DeepEP's ``ll4`` layout,
  per-expert batching with the drop-in's build) — in low-latency mode.
* ``deepep_high_throughput``: the fixed ``VLLM_DEEPEP_BUFFER_SIZE_MB`` NVL buffer and, across nodes
  without ``VLLM_DEEPEP_HIGH_THROUGHPUT_FORCE_INTRA_NODE``, the same RDMA buffer; dispatch and combine
  check their real need against them, which UCCL-EP's hints for its default configs give.
* ``deepep_v2``: UCCL-EP has no ``ElasticBuffer`` (one line).
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding, Quantity, Report
from ..units import INT32_MAX, MiB, format_bytes, format_int
from .._search import largest_true
from . import _uccl
from ._common import budget_findings, limit_findings, mib_ceil
from ._knobs import EngineProblem
from ._report import Recommendation

__all__ = ["uccl"]

A2A = "vllm-project/vllm vllm/distributed/device_communicators/all2all.py @001430048e81"
NUM_SMS = 20  # DeepEPAll2AllManagerBase.num_sms; UCCL-EP's Buffer.num_sms is 20 too (ep/bench/buffer.py:74)


def uccl(ctx, num_ranks, per_node, num_nodes, num_experts, redundant, tokens, tokens_knob):
    """vLLM's ``--all2all-backend`` with ``--uccl-ep`` (module docstring).

    Raises:
        InvalidArgumentError: ``deepep_v2`` or a backend that does not import ``deep_ep``; what
            UCCL-EP's size functions cannot evaluate.
    """
    backend = ctx.value("--all2all-backend")
    common = dict(ctx=ctx, num_ranks=num_ranks, per_node=per_node, num_nodes=num_nodes, redundant=redundant,
                  tokens=tokens, tokens_knob=tokens_knob)
    if backend == "deepep_low_latency":
        return _low_latency(**common)
    if backend == "deepep_high_throughput":
        return _high_throughput(**common)
    if backend == "deepep_v2":
        raise _uccl.no_v2(backend)
    raise InvalidArgumentError([EngineProblem("--uccl-ep", True, f"{backend} does not use deep_ep; "
                                                                 "UCCL-EP's drop-in replaces DeepEP for deepep_low_latency "
                                                                 "and deepep_high_throughput")])


def _plan(ctx, hidden, num_ranks, per_node, redundant, tokens):
    from ..plan import Plan

    return Plan(hidden=hidden, num_topk=ctx.num_topk, num_experts=ctx.num_experts, num_redundant_experts=redundant,
                num_ranks=num_ranks, num_ranks_per_node=per_node, num_max_tokens_per_rank=tokens,
                use_fp8_dispatch=bool(ctx.value("--fp8-dispatch")), model=ctx.model, **_uccl.uccl_plan_kwargs(ctx))


def _nvl_formula(mb: int) -> str:
    return f"VLLM_DEEPEP_BUFFER_SIZE_MB = {mb} x 1024 x 1024"


def _low_latency(ctx, num_ranks, per_node, num_nodes, redundant, tokens, tokens_knob):
    from ..backends import uccl_ep
    from ._vllm_all2all import ll_hidden

    hidden = ll_hidden(ctx.hidden)
    plan = _plan(ctx, hidden, num_ranks, per_node, redundant, tokens)
    ll = uccl_ep.report_low_latency(plan)
    hint = ll.quantity("num_rdma_bytes")
    mb = ctx.value("VLLM_DEEPEP_BUFFER_SIZE_MB")
    nvl = _uccl.fixed_nvl(mb * MiB, _nvl_formula(mb), f"{A2A} DeepEPLLAll2AllManager._make_all2all_kwargs")
    rdma = next(b for b in ll.buffers + ll.host_buffers if b.name.startswith("RDMA buffer"))
    device, host = _uccl.allocations(ctx, nvl, list(rdma.regions), hint, per_node)
    own = _uccl.constructor_limits(ctx, mb * MiB, hint, num_ranks, per_node, True) + _uccl.shrink_limit(ctx)
    findings = [f for f in ll.findings if f.code != "uccl-ll.host-memory"] + _uccl.limits_and_findings("vllm", own)
    if hidden != ctx.hidden:
        findings.append(Finding(severity="info", code="vllm.ll-hidden-rounded",
                                message=f"vLLM rounds hidden {ctx.hidden} up to {hidden} for the low-latency kernels",
                                data={"hidden": ctx.hidden, "rounded": hidden}))
    rep = Report(backend="vllm/deepep_low_latency", title="", upstream=f"{A2A} DeepEPLLAll2AllManager; {ll.upstream}",
                 inputs={**ll.inputs, "num_nvl_bytes": mb * MiB}, buffers=device, host_buffers=host,
                 records=ll.records, quantities=ll.quantities + (Quantity(name="num_nvl_bytes", value=mb * MiB,
                                                                          unit="B"),),
                 limits=tuple(own) + ll.limits, findings=())
    findings += _uccl.runtime_findings("vllm", ctx, host, device) + budget_findings("vllm", ctx, rep.num_bytes)
    rep = rep.replace(findings=tuple(findings),
                      title=f"vLLM --all2all-backend deepep_low_latency --uccl-ep ({ctx.version}): UCCL-EP NVL + "
                            "low-latency RDMA buffers, proxies")
    nvl_allocated = device[0].num_bytes if nvl.num_bytes else 0  # the NVL cudaMalloc, with its barrier signals
    recs = _uccl.ll_token_recommendations(
        ctx, tokens_knob, nvl_allocated, plan,
        load_text=(" (a larger per-step batch is dispatched in chunks of this size)"
                   if tokens_knob == "VLLM_MOE_DP_CHUNK_SIZE" else " (it is also the scheduler's per-step token budget)"))
    return rep, recs


def _high_throughput(ctx, num_ranks, per_node, num_nodes, redundant, tokens, tokens_knob):
    from ..backends import uccl_ep
    from ..backends.uccl_ep import limits as uccl_limits
    from ._vllm_all2all import ht_hidden

    hidden = ht_hidden(ctx.hidden)
    fp8 = bool(ctx.value("--fp8-dispatch"))
    plan = _plan(ctx, hidden, num_ranks, per_node, redundant, tokens)
    mb = ctx.value("VLLM_DEEPEP_BUFFER_SIZE_MB")
    use_rdma = num_nodes > 1 and not ctx.value("VLLM_DEEPEP_HIGH_THROUGHPUT_FORCE_INTRA_NODE")
    nvl_bytes, rdma_bytes = mb * MiB, (mb * MiB if use_rdma else 0)
    findings: list[Finding] = []
    try:
        hints = uccl_ep.report_normal(plan)
    except InvalidArgumentError as error:
        hints = None
        findings.append(Finding(severity="error", code="vllm.ht-no-config",
                                message=f"UCCL-EP has no default dispatch/combine config for {num_ranks} ranks, so "
                                        f"dispatch fails ({error})", data={"num_ranks": num_ranks}))
    nvl_hint = hints.quantity("num_nvl_bytes") if hints else None
    rdma_hint = hints.quantity("num_rdma_bytes") if hints else None
    src = f"{A2A} DeepEPHTAll2AllManager._make_all2all_kwargs"
    nvl = _uccl.fixed_nvl(nvl_bytes, _nvl_formula(mb), src, needed=nvl_hint)
    rdma_regions = _uccl.fixed_nvl(rdma_bytes, _nvl_formula(mb) + " (internode)", src,
                                   needed=rdma_hint).regions if rdma_bytes else []
    device, host = _uccl.allocations(ctx, nvl, list(rdma_regions), rdma_bytes, per_node)
    own = _uccl.constructor_limits(ctx, nvl_bytes, rdma_bytes, num_ranks, per_node, False)
    limits = list(own)
    if hints is not None:
        v, efa = uccl_ep.get_version(plan.version), ctx.value("--uccl-nic") == "efa"
        configs = {"dispatch": uccl_ep.get_dispatch_config(num_ranks, NUM_SMS, efa=efa),
                   "combine": uccl_ep.get_combine_config(num_ranks, NUM_SMS, efa=efa)}
        dispatched = uccl_ep.rdma_buffer(configs["dispatch"], hidden * (1 if fp8 else 2), num_ranks).num_bytes
        rows = uccl_limits.normal_limit_rows(v, plan.platform, num_ranks, per_node, ctx.num_topk, plan.num_total_experts,
                                             hidden, fp8, configs, configs["combine"], nvl_bytes, rdma_bytes, dispatched)
        names = {lim.name for lim in own}
        limits += [_row(r) for r in rows if not r[0].startswith(("num_nvl_bytes (when", "num_rdma_bytes <=",
                                                                  "num_ranks (normal mode)")) and r[0] not in names]
        findings += [f for f in hints.findings if f.code in ("uccl-ep.binding-config", "uccl-ep.deepep-formulas",
                                                             "uccl-ep.dropped-checks")]
        for what, allocated, hint in (("NVL", nvl_bytes, nvl_hint), ("RDMA", rdma_bytes, rdma_hint if use_rdma else 0)):
            if hint and allocated < hint:
                findings.append(Finding(
                    severity="warning", code="vllm.ht-below-hint",
                    message=f"the {what} buffer ({format_bytes(allocated)}) is smaller than UCCL-EP's hint for hidden "
                            f"{hidden} ({format_bytes(hint)}); dispatch/combine check their real need against it at "
                            "run time", data={"allocated": allocated, "hint": hint}))
    findings += limit_findings("vllm", limits)
    rep = Report(backend="vllm/deepep_high_throughput",
                 title="vLLM --all2all-backend deepep_high_throughput --uccl-ep: UCCL-EP fixed NVL"
                       + (" + RDMA" if use_rdma else "") + " buffers, proxies",
                 upstream=f"{src}; {hints.upstream if hints else 'UCCL-EP'}",
                 inputs={"hidden": hidden, "num_ranks": num_ranks, "num_nodes": num_nodes, "num_nvl_bytes": nvl_bytes,
                         "num_rdma_bytes": rdma_bytes, **_uccl.uccl_plan_kwargs(ctx)},
                 buffers=device, host_buffers=host, limits=tuple(limits),
                 quantities=(Quantity(name="num_nvl_bytes", value=nvl_bytes, unit="B"),
                             Quantity(name="num_rdma_bytes", value=rdma_bytes, unit="B")))
    findings += _uccl.runtime_findings("vllm", ctx, host, device) + budget_findings("vllm", ctx, rep.num_bytes)
    rep = rep.replace(findings=tuple(findings))

    def total(m: int) -> int:
        """The device allocation with VLLM_DEEPEP_BUFFER_SIZE_MB = m (UCCL-EP's allocation rules)."""
        b = m * MiB
        dev, _ = _uccl.allocations(ctx, _uccl.fixed_nvl(b, "", src), list(_uccl.fixed_nvl(b, "", src).regions)
                                   if use_rdma and b else [], b if use_rdma else 0, per_node)
        return sum(x.num_bytes for x in dev)

    return rep, _mb_recommendations(ctx, total, use_rdma, nvl_hint, rdma_hint)


def _row(row):
    from ..report import LimitCheck

    name, value, relation, bound, ok, source, enforced = row
    return LimitCheck(name=name, value=value, relation=relation, bound=bound, ok=ok, source=source, enforced=enforced)


def _mb_recommendations(ctx, total, use_rdma: bool, nvl_hint, rdma_hint) -> list[Recommendation]:
    """``VLLM_DEEPEP_BUFFER_SIZE_MB``: the constructor's bound (``limit``: with an RDMA buffer
    ``num_nvl_bytes`` and ``num_rdma_bytes <= INT_MAX`` on CUDA; none without one, or on ROCm where the
    bound is int64), UCCL-EP's hints (``load``), ``--budget`` (exact search over ``total(MB)``, the
    device allocation UCCL-EP makes for that value)."""
    nbuf = 2 if use_rdma else 1
    rocm = ctx.value("--uccl-platform") == "rocm"
    cap = None if (rocm or not use_rdma) else INT32_MAX // MiB
    recs = []
    if cap is not None:
        recs.append(Recommendation(setting="VLLM_DEEPEP_BUFFER_SIZE_MB", value=cap, goal="limit", num_bytes=total(cap),
                                   message="the largest value UCCL-EP's Buffer constructor accepts here (NVL and RDMA "
                                           "bytes <= INT_MAX, ep/src/uccl_ep.cc:459-464)"))
    need = max(nvl_hint or 0, rdma_hint if use_rdma and rdma_hint else 0)
    if need:
        value = mib_ceil(need)
        ok = cap is None or value <= cap
        recs.append(Recommendation(setting="VLLM_DEEPEP_BUFFER_SIZE_MB", value=value if ok else None, goal="load",
                                   num_bytes=total(value) if ok else None,
                                   message="the smallest value that holds UCCL-EP's hints for this shape (high-"
                                           "throughput buffers do not depend on the token count)"))
    if ctx.budget is not None:
        best = largest_true(0, cap if cap is not None else ctx.budget // MiB, lambda m: total(m) <= ctx.budget)
        recs.append(Recommendation(setting="VLLM_DEEPEP_BUFFER_SIZE_MB", value=best, goal="budget",
                                   num_bytes=total(best) if best is not None else None,
                                   message=f"the largest value whose {nbuf} buffer(s), UCCL-EP's workspace and runtime "
                                           f"fit --budget {format_bytes(ctx.budget)}" if best is not None else
                                           f"nothing fits --budget {format_bytes(ctx.budget)}: UCCL-EP's workspace and "
                                           f"runtime alone take {format_int(total(0))} B"))
    return recs
