"""sgl-kernel-npu: SGLang's Ascend ``deep_ep`` — the HCCL window it runs in and every op check against it.

Upstream ``sgl-project/sgl-kernel-npu @f425bdf1`` (2026-08-21):

* the window and the low-latency ``CheckWinSize`` of dispatch and combine (:mod:`epbuf.engines._hccl`);
  ``maxBs = globalBs / ep = T`` (``deep_ep.cpp:867``); limits ``moe_distribute_dispatch_v2_tiling.cpp:80-108``
  (``BS_UPPER_BOUND = 512``, ``K_MAX = 16``, H in [1024, 8192], ``MOE_EXPERT_MAX_NUM = 1024``,
  ep in [2, 768]). ``shared_expert_num = 1`` is passed (``deep_ep.hpp:36``) and counts whenever
  ``MOE_SHARED_EXPERT_RANK_NUM > 0`` (``moe_distribute_dispatch_v2_tiling.cpp:697-701``).
* ``.../cam_moe_dispatch_normal_tiling.cc:631-657`` and ``cam_moe_combine_normal_tiling.cc:555-579``
  (normal mode): ``(maxBs * k * (a512(2h) [x2 if rounds > 1] + a512(a32(2h) + 44)) + 4 MiB +
  102 MiB) * 2`` and ``(realBs * k * a512(2h) [x2 if maxRound > 1] + 4 MiB + 102 MiB) * 2``
  (``tiling_args.h`` ``COMBINE_STATE_WIN_OFFSET``, ``NOTIFY_DISPATCH_WIN_OFFSET``). Dispatch: ``maxBs =
  min(per_round_tokens, real max tokens per rank)`` (``deep_ep.cpp:322-325``). Combine: one round of
  8192 tokens — ``realBs = min(8192, real max)`` — unless ``DEEPEP_NORMAL_COMBINE_ENABLE_LONG_SEQ=1``
  (``deep_ep.cpp:65, 601-605``), which gives it the dispatch rounds (``cam_moe_combine_normal_tiling.cc:561-568``).
* A2 (``--soc a2``): ``build.sh:196-209`` builds ``deep_ep`` for Ascend910B1 from ``csrc/deepep/ops2``,
  whose tilings check the window too: one server (``ep <= 8``, ``RANK_NUM_PER_NODE_A2``) low latency
  ``ops2/op_host/moe_distribute_dispatch_v2_tiling.cc:940-966`` and ``moe_distribute_combine_v2_tiling.cc:919-946``
  (the A3 formula, dispatch tokens always 2-byte: ``MAX_OUT_DTYPE_SIZE``); intranode normal mode
  (``num_rdma_ranks = max(1, ep / 8) == 1``, ``deep_ep.cpp:96-99``) ``ops2/.../cam_moe_dispatch_normal_tiling.cc:567-593``
  ``(maxBs * k * (...) + 8 MiB + 404 MiB) * 2 + 4 x 2 MiB`` and ``cam_moe_combine_normal_tiling.cc:551-574``
  ``(realBs * k * ... + 8 MiB + 404 MiB) * 2`` (``ops2/op_host/tiling_args.h:6-8``; H at most 7168, :76).
  The multi-server A2 tilings check no window; there epbuf uses the documented minimums below.
* ``python/deep_ep/README.md:222`` minimums: non-layered ``(bs * ep * min(local, topk) * h * 2 +
  2 MB) * 2``, layered (A2 two nodes) ``E * bs * (2h + 4 * topk * 4) + 4 MB + 800 MB``;
  ``doc/A2_DEEPEP.md:84-90`` normal mode ``2 * (102 MB + 4 MB + tokens * 3h * topk) + PADDING``.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding, LimitCheck, Quantity, Report
from ..units import MiB, format_bytes, format_int
from .._search import largest_true
from ._common import EngineContext, limit, limit_findings, mib_ceil, topology
from ._deep_ep_npu import (  # noqa: F401  (the op formulas, re-exported: normal_*_need, readme_*)
    A2_RANKS_PER_SERVER, BUILD, DEEP_EP_CPP, H_MAX, H_MIN, LL_BS_UPPER_BOUND, MAX_ROUNDS, MAX_TOKENS_PER_ROUND,
    MIN_TOKENS_PER_ROUND, SGLANG_MAX_DISPATCH_TOKENS, _ll_checks, _ll_need_function, _long_seq_limits,
    _normal_checks, _normal_tokens, a2_normal_doc, normal_combine_need, normal_dispatch_need, readme_layered,
    readme_nonlayered,
)
from ._hccl import LL_TILING, MC2_UTILS, SKN, hccl_knob, hccl_window, npu_budget_findings, tiling_window_mib
from ._knobs import EngineProblem, Knob, Setting
from ._report import EngineReport, Recommendation


def _ep_size(ctx: EngineContext) -> tuple[int, Setting]:
    tp, ep = ctx.setting("--tp-size").value, ctx.setting("--ep-size").value
    ep_flag = "--ep-size"
    if ep is None:
        ep, ep_flag = ctx.num_ranks, ctx.ranks_flag
    if ep is not None:
        return ep, Setting(name="EP size", value=ep, source="flag", note=f"{ep_flag} (get_moe_ep_group on NPU)")
    if tp is not None:
        return tp, Setting(name="EP size", value=tp, source="flag", note="--tp-size (SGLang: ep_size = tp_size)")
    return 16, Setting(name="EP size", value=16, source="default", note="epbuf's default (pass --ep-size)")


VERSIONS = {"main": f"{SKN} (2026-08-21): A3 (ops) and A2 (ops2) op tilings, README minimums"}

KNOBS = (
    Knob(name="--deepep-mode", kind="choice", default="auto", choices=("normal", "low_latency", "auto"),
         source="sgl-project/sglang python/sglang/srt/server_args.py", help="which DeepEP ops run"),
    Knob(name="--tp-size", kind="int", lo=1, aliases=("--tp",), help="SGLang TP size"),
    Knob(name="--ep-size", kind="int", lo=1, aliases=("--ep",), help="SGLang EP size (the NPU DeepEP group)"),
    Knob(name="--ep-num-redundant-experts", kind="int", lo=0, default=0, help="EPLB redundant experts"),
    Knob(name="--deepep-dispatcher-output-dtype", kind="choice", default="auto", choices=("auto", "bf16", "fp8", "int8"),
         help="dispatch dtype: auto/bf16 = BF16 on NPU; fp8/int8 = int8 quantized dispatch"),
    Knob(name="--soc", kind="choice", default="a3", choices=("a3", "a2"),
         help="epbuf's flag: Ascend generation (A3: ops tilings; A2: ops2 tilings on one server, doc minimums across)"),
    # Each communicator is one window in the report; no parallel layout has more than a few dozen.
    Knob(name="--hccl-communicators", kind="int", lo=1, hi=1024, default=1,
         help="epbuf's flag: HCCL communicators on the NPU that use HCCL_BUFFSIZE (the EP group counts 1; at most 1024)"),
    hccl_knob("HCCL_BUFFSIZE", f"CANN; {SKN} {MC2_UTILS}", "MiB of each communicator's window (x2 allocated)"),
    hccl_knob("DEEPEP_HCCL_BUFFSIZE", f"{SKN} {MC2_UTILS}", "what the op checks read instead of HCCL_BUFFSIZE",
               default=None),
    Knob(name="SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", kind="int", lo=1, default=128,
         source="sgl-project/sglang python/sglang/srt/environ.py", help="T of the low-latency ops"),
    Knob(name="DEEPEP_NORMAL_LONG_SEQ_ROUND", kind="int", lo=1, source=f"{SKN} {DEEP_EP_CPP}:63-88",
         help=f"normal mode rounds, 1..{MAX_ROUNDS} (set with ..._PER_ROUND_TOKENS)"),
    Knob(name="DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS", kind="int", lo=1, source=f"{SKN} {DEEP_EP_CPP}:63-88",
         help=f"normal mode tokens per round, {MIN_TOKENS_PER_ROUND}..{MAX_TOKENS_PER_ROUND} (default 8192)"),
    Knob(name="DEEPEP_NORMAL_COMBINE_ENABLE_LONG_SEQ", kind="bool", default=False,
         source=f"{SKN} {DEEP_EP_CPP}:65, 601-605",
         help="normal combine in the DEEPEP_NORMAL_LONG_SEQ_* rounds (unset: one round of 8192 tokens)"),
    Knob(name="MOE_SHARED_EXPERT_RANK_NUM", kind="int", lo=0, default=0, source=f"{SKN} {DEEP_EP_CPP}:62",
         help="ranks holding shared experts (> 0: the low-latency ops count top-k + 1 combine slots)"),
    Knob(name="MOE_ENABLE_CCU", kind="bool", default=False, source=f"{SKN} {DEEP_EP_CPP}:973",
         help="comm_alg ccu (not modelled)"),
    Knob(name="HCCL_INTRA_PCIE_ENABLE", kind="bool", default=False, source=f"{SKN} {DEEP_EP_CPP}:961",
         help="A2 layered mode with HCCL_INTRA_ROCE_ENABLE=0"),
    Knob(name="HCCL_INTRA_ROCE_ENABLE", kind="bool", default=True, source=f"{SKN} {DEEP_EP_CPP}:962",
         help="A2 layered mode when 0 and HCCL_INTRA_PCIE_ENABLE=1"),
)


def _window_setting(ctx: EngineContext) -> tuple[int, int, str, list[Finding]]:
    """(allocated MiB, MiB the op checks read, which variable they read, findings)."""
    alloc = ctx.value("HCCL_BUFFSIZE")
    deepep = ctx.value("DEEPEP_HCCL_BUFFSIZE")
    name = "DEEPEP_HCCL_BUFFSIZE" if deepep is not None else "HCCL_BUFFSIZE"
    raw = deepep if deepep is not None else alloc
    read = tiling_window_mib(raw)
    findings = []
    if read != raw:
        findings.append(Finding(
            severity="error", code="ascend.window-wraps",
            message=f"{name} = {format_int(raw)}: the op tiling stores it in a uint16_t and reads {format_int(read)} MiB "
                    f"({SKN} {MC2_UTILS}); keep it at most 65535",
            data={"value": raw, "read": read}))
    if deepep is not None and deepep > alloc:
        findings.append(Finding(
            severity="warning", code="ascend.deepep-buffsize-above-window",
            message=f"DEEPEP_HCCL_BUFFSIZE = {deepep} MiB lets the ops validate against more than the {alloc} MiB "
                    "HCCL allocated with HCCL_BUFFSIZE; a need in between passes the check and overruns the window "
                    "(cf. vllm-ascend issue #2674: \"The DDR address of the MTE instruction is out of range\")",
            data={"DEEPEP_HCCL_BUFFSIZE": deepep, "HCCL_BUFFSIZE": alloc}))
    return alloc, read, name, findings


def recipe(ctx: EngineContext) -> EngineReport:
    """The HCCL window SGLang's Ascend ``deep_ep`` runs in, and every op check against it.

    Allocation: ``--hccl-communicators x 2 x HCCL_BUFFSIZE`` MiB per NPU (the EP communicator's
    window; the ``deep_ep.Buffer`` byte counts are stubs on NPU). Checks, each against the window
    the ops read (:func:`~epbuf.engines._hccl.tiling_window_mib`):

    * low latency, ``T = SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK``: the dispatch and the
      combine ``CheckWinSize`` (A3, and A2 on one server: ``ops2``); the combine sizes dispatched
      tokens as BF16, so it binds with int8 dispatch. A2 across servers: the README minimums.
    * normal mode: dispatch for ``min(per_round_tokens, real)`` tokens, combine for ``min(8192,
      real)`` unless ``DEEPEP_NORMAL_COMBINE_ENABLE_LONG_SEQ=1`` (:func:`_normal_tokens`); A3 ``ops``,
      A2 intranode ``ops2`` (8 + 404 MiB offsets), A2 across servers the doc minimum.

    What ``deep_ep.Buffer``'s constructor asserts about the ``DEEPEP_NORMAL_LONG_SEQ_*``
    variables (set together, in range, product at most 131072; ``deep_ep.cpp:70-86``) and what
    ``get_dispatch_layout`` asserts of the load (at most ``round x per_round_tokens``, ``deep_ep.cpp:120-130``)
    are broken limits with an ``error`` finding; the window and its checks are still sized.

    Raises:
        InvalidArgumentError: ``MOE_SHARED_EXPERT_RANK_NUM`` not below the EP size with low-latency
            ops (their expert count divides by ``ep - shared_expert_rank_num``).
    """
    num_ranks, ep_setting = _ep_size(ctx)
    per_node, num_nodes = topology(ctx, num_ranks)
    s = ctx.settings
    mode = s["--deepep-mode"].value
    normal, low_latency = mode in ("normal", "auto"), mode in ("low_latency", "auto")
    soc = s["--soc"].value
    redundant = s["--ep-num-redundant-experts"].value
    num_experts = ctx.num_experts + redundant
    dtype = s["--deepep-dispatcher-output-dtype"].value
    dtype_bytes = 1 if dtype in ("fp8", "int8") else 2
    shared_rank = s["MOE_SHARED_EXPERT_RANK_NUM"].value
    rounds, per_round = s["DEEPEP_NORMAL_LONG_SEQ_ROUND"], s["DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS"]
    if low_latency and shared_rank >= num_ranks:
        raise InvalidArgumentError([EngineProblem(
            "--env MOE_SHARED_EXPERT_RANK_NUM", shared_rank,
            f"must be below the EP size {num_ranks}: the low-latency ops split the experts over ep - "
            f"shared_expert_rank_num ranks ({DEEP_EP_CPP}:866; {LL_TILING}:676 allows [0, ep))")])
    n_rounds = rounds.value or 1
    n_per_round = per_round.value or MAX_TOKENS_PER_ROUND
    env_limits = _long_seq_limits(rounds.value, per_round.value)
    tokens = s["SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK"].value
    alloc, read, read_name, findings = _window_setting(ctx)
    window = read * MiB
    layered = soc == "a2" and s["HCCL_INTRA_PCIE_ENABLE"].value and not s["HCCL_INTRA_ROCE_ENABLE"].value
    comms = s["--hccl-communicators"].value
    tok = _normal_tokens(ctx, n_rounds, n_per_round, bool(s["DEEPEP_NORMAL_COMBINE_ENABLE_LONG_SEQ"].value))

    checks: list[tuple[str, int, str]] = []  # (name, need bytes, formula/source)
    quantities: list[Quantity] = []
    limits: list[LimitCheck] = list(env_limits)
    if low_latency:
        ll_checks, ll_quantities, ll_limits, ll_findings = _ll_checks(ctx, soc, tokens, num_ranks, num_experts,
                                                                        dtype_bytes, shared_rank, layered)
        checks += ll_checks
        quantities += ll_quantities
        limits += ll_limits
        findings += ll_findings
        limits.append(limit("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK <= 1024", tokens, "<=",
                            SGLANG_MAX_DISPATCH_TOKENS, "sgl-project/sglang token_dispatcher/deepep.py"))
    if normal:
        normal_checks, normal_limits = _normal_checks(ctx, soc, num_ranks, tok)
        checks += normal_checks
        limits += normal_limits
        if ctx.load is not None:
            limits.append(limit("tokens per rank <= DEEPEP_NORMAL_LONG_SEQ_ROUND x _PER_ROUND_TOKENS", ctx.load, "<=",
                                n_rounds * n_per_round,
                                f"{SKN} {DEEP_EP_CPP}:127-130 get_dispatch_layout (configured capacity)"))
        else:
            findings.append(Finding(
                severity="info", code="ascend.normal-worst-case",
                message=f"normal mode checks the largest batch any rank sends; without --max-tokens-under-load epbuf "
                        f"sizes the most one call accepts (round x per_round_tokens = {n_rounds * n_per_round}): "
                        f"dispatch {tok['dispatch_bs']} tokens, combine {tok['combine_bs']}",
                data={"tokens": tok["dispatch_bs"], "combine_tokens": tok["combine_bs"]}))
    if soc == "a2":
        findings.append(Finding(severity="info", code="sgl-kernel-npu.a2-ops2",
                                message=f"on A2 deep_ep is built from csrc/deepep/ops2 ({BUILD}); one server (ep <= 8) "
                                        "and intranode normal mode check the window in their tilings, the multi-server "
                                        "paths do not (epbuf uses the documented minimums there)", data={}))
    limits.append(limit("hidden >= 1024", ctx.hidden, ">=", H_MIN, f"{LL_TILING}:970"))
    limits.append(limit("hidden <= 8192", ctx.hidden, "<=", H_MAX, f"{LL_TILING}:970"))
    for name, need, formula in checks:
        limits.append(limit(f"{name} <= {read_name}", need, "<=", window, f"{SKN} {MC2_UTILS}; {formula}"))
        quantities.append(Quantity(name=name, value=need, unit="B", source=formula))
    binding = max(checks, key=lambda c: c[1])
    need = binding[1]
    findings += limit_findings("sgl-kernel-npu", limits, {
        **{lim.name: "deep_ep.Buffer's constructor asserts it, so SGLang fails at start-up" for lim in env_limits},
        **{f"{name} <= {read_name}": f"the op fails with \"HCCL_BUFFSIZE is too SMALL\"; set {read_name}="
                                      f"{mib_ceil(need)} (the largest check, {binding[0]})" for name, _, _ in checks}})
    if s["MOE_ENABLE_CCU"].value:
        findings.append(Finding(severity="warning", code="ascend.ccu-not-modelled",
                                message="MOE_ENABLE_CCU=1 selects comm_alg ccu, whose window check epbuf does not model; "
                                        "sized as fullmesh_v1", data={}))
    buffers = [hccl_window("EP communicator HCCL window", alloc, need,
                           f"HCCL_BUFFSIZE = {alloc} MiB; binding check: {binding[0]} needs {format_int(need)} B",
                           "CANN HCCL_BUFFSIZE")]
    for i in range(1, comms):
        buffers.append(hccl_window(f"HCCL window {i + 1}", alloc, None, f"HCCL_BUFFSIZE = {alloc} MiB", "CANN HCCL_BUFFSIZE"))
    total = sum(b.num_bytes for b in buffers)
    findings += npu_budget_findings("sgl-kernel-npu", ctx, total)

    recs = []
    smallest = mib_ceil(need)
    recs.append(Recommendation(setting="HCCL_BUFFSIZE", value=smallest if smallest < 1 << 16 else None, goal="load",
                               num_bytes=2 * smallest * MiB * comms,
                               message=f"the smallest HCCL_BUFFSIZE (MiB) that passes {binding[0]} for these shapes"
                                       + (" (set DEEPEP_HCCL_BUFFSIZE to the same value or unset it)"
                                          if read_name == "DEEPEP_HCCL_BUFFSIZE" else "")))
    if ctx.budget is not None:
        best = largest_true(1, (1 << 16) - 1, lambda v: 2 * v * MiB * comms <= ctx.budget)
        recs.append(Recommendation(setting="HCCL_BUFFSIZE", value=best, goal="budget",
                                   num_bytes=2 * best * MiB * comms if best else None,
                                   message=f"the largest HCCL_BUFFSIZE whose {comms} window(s) of 2 x HCCL_BUFFSIZE fit "
                                           f"--budget {format_bytes(ctx.budget)}"
                                           + ("" if best is None or best >= smallest else
                                              f"; it is below the {smallest} MiB the ops need")))
    if low_latency and (soc == "a3" or num_ranks <= A2_RANKS_PER_SERVER):
        ll_need = _ll_need_function(ctx, soc, num_ranks, num_experts, dtype_bytes, shared_rank)
        best = largest_true(1, LL_BS_UPPER_BOUND, lambda t: ll_need(t) <= window)
        recs.append(Recommendation(setting="SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", value=best, goal="limit",
                                   message=f"the largest T (up to the op's 512-token batch bound) whose low-latency window "
                                           f"checks pass with {read_name} = {read} MiB" if best else
                                           f"not even T = 1 passes with {read_name} = {read} MiB"))
    if ctx.load is not None and low_latency and ctx.load > tokens:
        findings.append(Finding(severity="error", code="sgl-kernel-npu.tokens-above-capacity",
                                message=f"{format_int(ctx.load)} tokens per rank exceed T = {tokens}: the low-latency "
                                        "call's batch must stay within num_max_dispatch_tokens_per_rank",
                                data={"load": ctx.load, "tokens": tokens}))
    settings = [*ctx.base_settings, ep_setting,
                Setting(name="experts seen by the ops", value=num_experts, source="derived",
                        note=f"routed {ctx.num_experts} + redundant {redundant}"),
                Setting(name="window the ops read (MiB)", value=read, source="derived", note=read_name)]
    if normal:
        settings.append(Setting(name="normal-mode tokens per rank", value=tok["dispatch_bs"], source="derived",
                                note="dispatch: min(per_round_tokens, largest batch)"))
        settings.append(Setting(name="normal-mode combine tokens per rank", value=tok["combine_bs"], source="derived",
                                note="min(per_round_tokens, largest batch) with DEEPEP_NORMAL_COMBINE_ENABLE_LONG_SEQ=1, "
                                     "else min(8192, largest batch)"))
    settings += [st for st in s.values() if st.value is not None]
    rep = Report(backend="sgl-kernel-npu/hccl", title=f"sgl-kernel-npu deep_ep ({soc.upper()}, --deepep-mode {mode}): "
                                                     "HCCL window and op checks",
                 upstream=SKN, inputs={"hidden": ctx.hidden, "num_ranks": num_ranks, "num_experts": num_experts,
                                       "num_topk": ctx.num_topk, "num_max_dispatch_tokens_per_rank": tokens,
                                       "dispatch_dtype_bytes": dtype_bytes, "soc": soc, "HCCL_BUFFSIZE": alloc},
                 buffers=tuple(buffers), quantities=tuple(quantities), findings=tuple(findings), limits=tuple(limits))
    return EngineReport(engine="sgl-kernel-npu", version=ctx.version, version_note=VERSIONS[ctx.version],
                        title=rep.title, settings=tuple(settings), report=rep, recommendations=tuple(recs),
                        device_name=ctx.device_name, device_num_bytes=ctx.device_num_bytes, budget=ctx.budget)


def _engine():
    from ._api import EngineSpec

    return EngineSpec(
        name="sgl-kernel-npu", title="sgl-kernel-npu deep_ep", knobs=KNOBS, versions=VERSIONS, default_version="main",
        recipe=recipe, aliases={"num_ranks_per_node": ("--npus-per-node",)}, gpu=False,
        load_help="tokens one rank sends in one dispatch (normal mode: its largest batch)",
        ranks_help="EP size = --ep-size (the NPU DeepEP group), else --tp-size")


ENGINE = _engine()
