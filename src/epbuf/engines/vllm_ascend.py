"""vllm-ascend: the per-group HCCL windows it creates and the MC2 dispatch/combine check against
``HCCL_BUFFSIZE``.

Upstream ``vllm-project/vllm-ascend @182b75ea`` (2026-08-22): ``vllm_ascend/utils.py:70-72,
960-1005`` (``get_hccl_config_for_pg_options``: groups named ``mc2`` get no option and use
``HCCL_BUFFSIZE``; ``dp`` gets ``max(ceil((dp + 1) * 4 / 2^20), 50)``; ``dynamic_eplb`` 100;
every other group 200), ``ascend_forward_context.py:176-200`` (``set_mc2_tokens_capacity``: per
TP rank at most 512 tokens), ``ops/fused_moe/token_dispatcher.py:113-150`` (MC2 ``global_bs``,
experts incl. redundant). The MC2 need is the low-latency ``CheckWinSize`` formula of
:mod:`epbuf.engines._hccl`.
"""

from __future__ import annotations

import math

from ..errors import InvalidArgumentError
from ..report import Finding, LimitCheck, Quantity, Report
from ..units import GiB, MiB, format_bytes, format_int
from .._search import largest_true
from ._common import EngineContext, limit, limit_findings, mib_ceil
from ._hccl import LL_TILING, SKN, hccl_knob, hccl_window, ll_window_need, npu_budget_findings, tiling_window_mib
from ._knobs import EngineProblem, Knob, Setting
from ._report import EngineReport, Recommendation

VA = "vllm-project/vllm-ascend @182b75ea"
VA_UTILS = "vllm_ascend/utils.py"
VA_CTX = "vllm_ascend/ascend_forward_context.py:176-200 set_mc2_tokens_capacity"
VA_DISPATCHER = "vllm_ascend/ops/fused_moe/token_dispatcher.py:113-150 TokenDispatcherWithMC2"
DEFAULT_BUFFER_SIZE, MIN_DP_BUFFER_SIZE, DYNAMIC_EPLB_BUFFER_SIZE = 200, 50, 100  # VA_UTILS:70-72
MC2_TOKENS_PER_RANK_LIMIT = 512  # ascend_forward_context.py:35
MEGA_MOE_TOKENS_PER_RANK_LIMIT = 4096  # :33

VERSIONS = {"main": f"{VA} (2026-08-22)"}

KNOBS = (
    Knob(name="--tensor-parallel-size", kind="int", lo=1, default=1, aliases=("-tp",), help="TP"),
    Knob(name="--data-parallel-size", kind="int", lo=1, default=1, aliases=("-dp",), help="DP"),
    Knob(name="--pipeline-parallel-size", kind="int", lo=1, default=1, aliases=("-pp",), help="PP"),
    Knob(name="--enable-expert-parallel", kind="flag", default=False, help="EP over TP x DP (MC2 group)"),
    Knob(name="--max-num-batched-tokens", kind="int", lo=1, help="scheduler token budget (prefill MC2 capacity)"),
    Knob(name="--max-num-seqs", kind="int", lo=1, help="max requests per step"),
    Knob(name="--max-cudagraph-capture-size", kind="int", lo=1, help="largest graph batch (MC2 capacity)"),
    Knob(name="--enforce-eager", kind="flag", default=False, help="no graphs: capacity = max_num_seqs x decode len"),
    Knob(name="--speculative-config", kind="json", help="reads num_speculative_tokens (decode query length)"),
    Knob(name="--additional-config", kind="json",
         help="vllm-ascend config: enable_prefill_mc2, enable_fused_mc2, eplb_config{dynamic_eplb,num_redundant_experts}"),
    Knob(name="--dispatch-dtype", kind="choice", default="bf16", choices=("bf16", "int8"),
         help="epbuf's flag: int8 for W8A8 dynamic-quant dispatch"),
    hccl_knob("HCCL_BUFFSIZE", f"CANN; {VA} {VA_UTILS}:968-987 (mc2 group)", "MiB of the MC2 group's window (x2)"),
)


def recipe(ctx: EngineContext) -> EngineReport:
    """Per-group HCCL windows of vllm-ascend and the MC2 check against ``HCCL_BUFFSIZE``.

    Groups a device belongs to (of more than one rank): ``world`` (TP x DP x PP), ``tp``, ``pp``,
    ``dp``, ``ep`` (with EP), ``mc2`` (with EP: ``HCCL_BUFFSIZE``), ``dynamic_eplb`` (dynamic
    EPLB). The MC2 need is the low-latency ``CheckWinSize`` formula (:func:`ll_window_need`) for
    the per-rank MC2 token capacity.
    """
    from .vllm import _default_batched_tokens

    s = ctx.settings
    tp, dp, pp = (s[k].value for k in ("--tensor-parallel-size", "--data-parallel-size", "--pipeline-parallel-size"))
    ep_enabled = s["--enable-expert-parallel"].value
    ep = tp * dp
    if ctx.num_ranks is not None and ctx.num_ranks != ep:
        if s["--tensor-parallel-size"].source == "default" and s["--data-parallel-size"].source == "default":
            ep, dp = ctx.num_ranks, ctx.num_ranks // tp
            ep_enabled = True
        else:
            raise InvalidArgumentError([EngineProblem("--ep-size", ctx.num_ranks,
                                                      f"vLLM's EP size is TP x DP = {tp * dp}; make them agree")])
    extra = s["--additional-config"].value or {}
    eplb = extra.get("eplb_config", {}) if isinstance(extra, dict) else {}
    dynamic_eplb = bool(eplb.get("dynamic_eplb", False))
    redundant = int(eplb.get("num_redundant_experts", 0)) if dynamic_eplb else 0
    num_experts = ctx.num_experts + redundant
    prefill_mc2 = bool(extra.get("enable_prefill_mc2", False))
    fused_mc2 = int(extra.get("enable_fused_mc2", 0) or 0)
    spec = s["--speculative-config"].value or {}
    decode_len = 1 + int(spec.get("num_speculative_tokens", 0) or 0)
    batched = s["--max-num-batched-tokens"].value
    batched_note = "--max-num-batched-tokens"
    if batched is None:
        batched, batched_note = _default_batched_tokens(ctx)
    max_seqs = s["--max-num-seqs"].value
    seqs_note = "--max-num-seqs"
    if max_seqs is None:
        big = ctx.device_num_bytes is not None and ctx.device_num_bytes >= 70 * GiB
        max_seqs, seqs_note = (1024 if big else 256), "vLLM's OpenAI-server default (EngineArgs.get_batch_defaults)"
    if prefill_mc2:
        max_tokens, how = batched, f"enable_prefill_mc2: max_num_batched_tokens ({batched_note})"
    elif not s["--enforce-eager"].value:
        capture = s["--max-cudagraph-capture-size"].value
        if capture is None:
            capture = min(max_seqs * decode_len * 2, 512)
            how = f"max_cudagraph_capture_size = min(max_num_seqs {max_seqs} x {decode_len} x 2, 512)"
        else:
            how = "--max-cudagraph-capture-size"
        capture = min(capture, batched)
        max_tokens = capture
    else:
        max_tokens, how = max_seqs * decode_len, f"max_num_seqs ({seqs_note}) x decode query length {decode_len}"
    per_tp = -(-max_tokens // tp)
    cap = MC2_TOKENS_PER_RANK_LIMIT
    if fused_mc2:
        cap = MC2_TOKENS_PER_RANK_LIMIT  # dispatch_ffn_combine; MegaMoE (cann_ops_transformer) allows 4096
    capped = min(per_tp, cap)
    findings: list[Finding] = []
    if per_tp > cap:
        findings.append(Finding(severity="info", code="vllm-ascend.mc2-capped",
                                message=f"MC2 capacity per TP rank {per_tp} is capped at {cap} tokens ({VA_CTX})",
                                data={"tokens": per_tp, "cap": cap}))
    alloc = s["HCCL_BUFFSIZE"].value
    read = tiling_window_mib(alloc)
    buffers = []
    need = None
    dtype_bytes = 1 if s["--dispatch-dtype"].value == "int8" else 2
    limits: list[LimitCheck] = []
    if ep_enabled and ep > 1:
        need = ll_window_need(capped, ctx.hidden, ep, num_experts, ctx.num_topk, dispatch_dtype_bytes=dtype_bytes)
        limits.append(limit("MC2 dispatch/combine need <= HCCL_BUFFSIZE", need, "<=", read * MiB,
                            f"CANN MoeDistributeDispatchV2 tiling (formula as {SKN} {LL_TILING}:1209-1252; vllm-ascend "
                            "PR #3073 uses +64 B per token instead of +44, the same 512-B slots for most hidden sizes)"))
        limits.append(limit("moe_expert_num % ep", num_experts % ep, "==", 0, f"{LL_TILING}:880-884"))
        findings += limit_findings("vllm-ascend", limits, {
            "MC2 dispatch/combine need <= HCCL_BUFFSIZE": f"the MC2 op fails (or, unchecked, overruns the window: "
                                                          f"issue #2674); set HCCL_BUFFSIZE >= {mib_ceil(need)}"})
        if read != alloc:
            findings.append(Finding(severity="error", code="ascend.window-wraps",
                                    message=f"HCCL_BUFFSIZE = {alloc} is read as {read} MiB by the MC2 tiling (uint16_t)",
                                    data={"value": alloc, "read": read}))
        if ctx.load is not None and ctx.load > capped:
            findings.append(Finding(severity="info", code="vllm-ascend.mc2-fallback",
                                    message=f"{format_int(ctx.load)} tokens per rank exceed the MC2 capacity {capped}: "
                                            "vllm-ascend switches that step from MC2 to ALLTOALL (A3) / ALLGATHER (A2)",
                                    data={"load": ctx.load, "capacity": capped}))
    groups: list[tuple[str, int, int, str]] = []  # (name, ranks, MB, origin)
    world = tp * dp * pp
    for name, size in (("world", world), ("tp", tp), ("pp", pp), ("dp", dp), ("ep", ep if ep_enabled else 1)):
        if size > 1:
            if name == "dp":
                mb = max(math.ceil((dp + 1) * 4 / (1024 * 1024)), MIN_DP_BUFFER_SIZE)
                groups.append((name, size, mb, f"calculate_dp_buffer_size = max(ceil(({dp} + 1) x 4 / 2^20), 50) "
                                               f"({VA_UTILS}:994-1005)"))
            else:
                groups.append((name, size, DEFAULT_BUFFER_SIZE, f"get_default_buffer_config = 200 ({VA_UTILS}:990)"))
    if ep_enabled and ep > 1:
        groups.append(("mc2", ep, alloc, f"no pg option for 'mc2': HCCL_BUFFSIZE ({VA_UTILS}:968-987)"))
    if dynamic_eplb:
        groups.append(("dynamic_eplb", ep, DYNAMIC_EPLB_BUFFER_SIZE, f"_DYNAMIC_EPLB_BUFFER_SIZE ({VA_UTILS}:72, 985)"))
    for name, size, mb, origin in groups:
        buffers.append(hccl_window(f"HCCL window: {name} group ({size} ranks)", mb, need if name == "mc2" else None,
                                   f"hccl_buffer_size = {mb} MB: {origin}", f"{VA} {VA_UTILS}"))
    findings.append(Finding(severity="info", code="vllm-ascend.groups",
                            message="each named group is its own communicator (hccl_config carries group_name, so the "
                                    "HcclPgRegistry reuses a communicator only within one name); HCCL commits a window "
                                    "when a group first communicates", data={"groups": [g[0] for g in groups]}))
    total = sum(b.num_bytes for b in buffers)
    findings += npu_budget_findings("vllm-ascend", ctx, total)
    recs = []
    if need is not None:
        smallest = mib_ceil(need)
        recs.append(Recommendation(setting="HCCL_BUFFSIZE", value=smallest, goal="load",
                                   num_bytes=total - 2 * alloc * MiB + 2 * smallest * MiB,
                                   message=f"the smallest HCCL_BUFFSIZE (MiB) whose MC2 window holds {capped} tokens per "
                                           "rank"))
        best_tokens = largest_true(1, cap, lambda t: ll_window_need(t, ctx.hidden, ep, num_experts, ctx.num_topk,
                                                                     dispatch_dtype_bytes=dtype_bytes) <= read * MiB)
        recs.append(Recommendation(setting="--max-cudagraph-capture-size",
                                   value=best_tokens * tp if best_tokens else None, goal="limit",
                                   message=f"the largest graph capture size whose MC2 need ({best_tokens or 0} tokens per "
                                           f"TP rank x TP {tp}) fits HCCL_BUFFSIZE = {read} MiB"))
        if ctx.budget is not None:
            others = total - 2 * alloc * MiB
            best = largest_true(1, (1 << 16) - 1, lambda v: others + 2 * v * MiB <= ctx.budget)
            recs.append(Recommendation(setting="HCCL_BUFFSIZE", value=best, goal="budget",
                                       num_bytes=others + 2 * best * MiB if best else None,
                                       message=f"the largest HCCL_BUFFSIZE whose windows (with the other groups') fit "
                                               f"--budget {format_bytes(ctx.budget)}"))
    settings = [*ctx.base_settings,
                Setting(name="EP size", value=ep, source="derived", note="TP x DP"),
                Setting(name="experts seen by MC2", value=num_experts, source="derived",
                        note=f"routed {ctx.num_experts} + redundant {redundant} (dynamic EPLB)"),
                Setting(name="MC2 tokens per rank", value=capped, source="derived", note=f"{how}; / TP; cap {cap}"),
                *(st for st in s.values() if st.value is not None)]
    rep = Report(backend="vllm-ascend/hccl", title="vllm-ascend per-group HCCL windows and the MC2 check", upstream=VA,
                 inputs={"hidden": ctx.hidden, "num_topk": ctx.num_topk, "ep": ep, "tp": tp, "dp": dp,
                         "num_experts": num_experts, "mc2_tokens_per_rank": capped, "HCCL_BUFFSIZE": alloc},
                 buffers=tuple(buffers),
                 quantities=(Quantity(name="mc2_need_bytes", value=need or 0, unit="B"),
                             Quantity(name="mc2_tokens_per_rank", value=capped, source=VA_CTX)),
                 findings=tuple(findings), limits=tuple(limits))
    return EngineReport(engine="vllm-ascend", version=ctx.version, version_note=VERSIONS[ctx.version],
                        title=rep.title, settings=tuple(settings), report=rep, recommendations=tuple(recs),
                        device_name=ctx.device_name, device_num_bytes=ctx.device_num_bytes, budget=ctx.budget)


def _engine():
    from ._api import EngineSpec

    return EngineSpec(
        name="vllm-ascend", title="vllm-ascend", knobs=KNOBS, versions=VERSIONS, default_version="main",
        recipe=recipe, aliases={"num_ranks": ("--ep-size",), "num_ranks_per_node": ("--npus-per-node",)}, gpu=False,
        load_help="tokens one rank sends in one MoE step", ranks_help="EP size = TP x DP")


ENGINE = _engine()
