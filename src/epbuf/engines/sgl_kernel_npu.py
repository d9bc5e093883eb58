"""sgl-kernel-npu: SGLang's Ascend ``deep_ep`` — the HCCL window it runs in and every op check against it.

Upstream ``sgl-project/sgl-kernel-npu @f425bdf1`` (2026-08-21):

* the window and the low-latency ``CheckWinSize`` (:mod:`epbuf.engines._hccl`); ``maxBs =
  globalBs / ep = T`` (``deep_ep.cpp:867``); limits ``moe_distribute_dispatch_v2_tiling.cpp:80-108``
  (``BS_UPPER_BOUND = 512``, ``K_MAX = 16``, H in [1024, 8192], ``MOE_EXPERT_MAX_NUM = 1024``,
  ep in [2, 768]).
* ``.../cam_moe_dispatch_normal_tiling.cc:631-657`` and ``cam_moe_combine_normal_tiling.cc:555-579``
  (normal mode): ``(maxBs * k * (a512(2h) [x2 if rounds > 1] + a512(a32(2h) + 44)) + 4 MiB +
  102 MiB) * 2`` and ``(realBs * k * a512(2h) [x2] + 4 MiB + 102 MiB) * 2`` (``tiling_args.h``
  ``COMBINE_STATE_WIN_OFFSET``, ``NOTIFY_DISPATCH_WIN_OFFSET``); ``maxBs = min(per_round_tokens,
  real max tokens per rank)`` (``deep_ep.cpp:325``).
* ``python/deep_ep/README.md:222`` minimums: non-layered ``(bs * ep * min(local, topk) * h * 2 +
  2 MB) * 2``, layered (A2 two nodes) ``E * bs * (2h + 4 * topk * 4) + 4 MB + 800 MB``;
  ``doc/A2_DEEPEP.md:84-90`` normal mode ``2 * (102 MB + 4 MB + tokens * 3h * topk) + PADDING``.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding, LimitCheck, Quantity, Report
from ..units import MiB, align, format_bytes, format_int
from .._search import largest_true
from ._common import EngineContext, limit, limit_findings, mib_ceil, topology
from ._hccl import (
    DOUBLE_DATA_BUFFER, LL_TILING, MAX_OUT_DTYPE_SIZE, MC2_UTILS, SCALE_EXPAND_IDX_BUFFER, SKN, UB_ALIGN, a512,
    hccl_knob, hccl_window, ll_token_bytes, ll_window_need, npu_budget_findings, tiling_window_mib,
)
from ._knobs import EngineProblem, Knob, Setting
from ._report import EngineReport, Recommendation

NORMAL_DISPATCH = "csrc/deepep/ops/op_host/cam_moe_dispatch_normal_tiling.cc:631-657"
NORMAL_COMBINE = "csrc/deepep/ops/op_host/cam_moe_combine_normal_tiling.cc:555-579"
DEEP_EP_CPP = "csrc/deepep/deep_ep.cpp"
README = "python/deep_ep/README.md:222"
A2_DOC = "python/deep_ep/doc/A2_DEEPEP.md:84-90"

COMBINE_STATE_WIN_OFFSET = 4 * MiB  # tiling_args.h
NOTIFY_DISPATCH_WIN_OFFSET = 102 * MiB  # tiling_args.h (the error text says 204MB)
LL_BS_UPPER_BOUND = 512  # moe_distribute_dispatch_v2_tiling.cpp:85
LL_MAX_EP_WORLD_SIZE = 768  # :81
LL_MAX_SHARED_EXPERT_NUM = 4  # :80
LL_MOE_EXPERT_MAX_NUM = 1024  # :101
LL_K_MAX = 16  # :102
H_MIN, H_MAX = 1024, 8192  # :107-108
NORMAL_MAX_EP_WORLD_SIZE = 384  # cam_moe_dispatch_normal_tiling.cc:75
NORMAL_MAX_BS = 131072  # MAX_TOTAL_TOKENS, deep_ep.cpp:37
MAX_ROUNDS, MIN_TOKENS_PER_ROUND, MAX_TOKENS_PER_ROUND = 256, 32, 8192  # deep_ep.cpp:34-36
SGLANG_MAX_DISPATCH_TOKENS = 1024  # SGLang's assert (engines.sglang)


def normal_dispatch_need(max_bs: int, hidden: int, num_topk: int, rounds: int = 1) -> int:
    """``CamMoeDispatchNormal`` tiling (``cam_moe_dispatch_normal_tiling.cc:636-648``).

    >>> normal_dispatch_need(512, 7168, 8)
    461373440
    """
    dispatch = a512(align(hidden * MAX_OUT_DTYPE_SIZE, UB_ALIGN) + SCALE_EXPAND_IDX_BUFFER)
    combine = a512(hidden * MAX_OUT_DTYPE_SIZE) * (2 if rounds > 1 else 1)
    return (max_bs * num_topk * (combine + dispatch) + COMBINE_STATE_WIN_OFFSET + NOTIFY_DISPATCH_WIN_OFFSET) \
        * DOUBLE_DATA_BUFFER


def normal_combine_need(real_bs: int, hidden: int, num_topk: int, max_round: int = 1) -> int:
    """``CamMoeCombineNormal`` tiling (``cam_moe_combine_normal_tiling.cc:564-569``).

    >>> normal_combine_need(512, 7168, 8)
    339738624
    """
    combine = a512(hidden * MAX_OUT_DTYPE_SIZE) * (2 if max_round > 1 else 1)
    return (real_bs * num_topk * combine + COMBINE_STATE_WIN_OFFSET + NOTIFY_DISPATCH_WIN_OFFSET) * DOUBLE_DATA_BUFFER


def readme_nonlayered(bs: int, ep_world_size: int, num_experts: int, num_topk: int, hidden: int) -> int:
    """README minimum, non-layered: ``(bs * ep * min(E / ep, topk) * h * 2 B + 2 MB) * 2``.

    >>> readme_nonlayered(512, 16, 256, 8, 7168)
    1883242496
    """
    local = num_experts // ep_world_size
    return (bs * ep_world_size * min(local, num_topk) * hidden * 2 + 2 * MiB) * 2


def readme_layered(bs: int, num_experts: int, num_topk: int, hidden: int) -> int:
    """README minimum, layered (A2, two nodes): ``E * bs * (h * 2 B + 4 * topk * 4 B) + 4 MB + 800 MB``.

    >>> readme_layered(512, 256, 8, 7168)
    2738880512
    """
    return num_experts * bs * (hidden * 2 + 4 * num_topk * 4) + 4 * MiB + 800 * MiB


def a2_normal_doc(tokens: int, hidden: int, num_topk: int, padding_mib: int = 20) -> int:
    """``doc/A2_DEEPEP.md`` normal mode: ``2 * (102 MB + 4 MB + tokens * (hidden * 3) * topk) + PADDING``
    (PADDING_BUFFSIZE as the recommended 20 MB)."""
    return 2 * (102 * MiB + 4 * MiB + tokens * (hidden * 3) * num_topk) + padding_mib * MiB



def _ep_size(ctx: EngineContext) -> tuple[int, Setting]:
    tp, ep = ctx.setting("--tp-size").value, ctx.setting("--ep-size").value
    if ep is None:
        ep = ctx.num_ranks
    if ep is not None:
        return ep, Setting(name="EP size", value=ep, source="flag", note="--ep-size (get_moe_ep_group on NPU)")
    if tp is not None:
        return tp, Setting(name="EP size", value=tp, source="flag", note="--tp-size (SGLang: ep_size = tp_size)")
    return 16, Setting(name="EP size", value=16, source="default", note="epbuf's default (pass --ep-size)")


VERSIONS = {"main": f"{SKN} (2026-08-21): A3 op tilings and README minimums"}

KNOBS = (
    Knob(name="--deepep-mode", kind="choice", default="auto", choices=("normal", "low_latency", "auto"),
         source="sgl-project/sglang python/sglang/srt/server_args.py", help="which DeepEP ops run"),
    Knob(name="--tp-size", kind="int", lo=1, aliases=("--tp",), help="SGLang TP size"),
    Knob(name="--ep-size", kind="int", lo=1, aliases=("--ep",), help="SGLang EP size (the NPU DeepEP group)"),
    Knob(name="--ep-num-redundant-experts", kind="int", lo=0, default=0, help="EPLB redundant experts"),
    Knob(name="--deepep-dispatcher-output-dtype", kind="choice", default="auto", choices=("auto", "bf16", "fp8", "int8"),
         help="dispatch dtype: auto/bf16 = BF16 on NPU; fp8/int8 = int8 quantized dispatch"),
    Knob(name="--soc", kind="choice", default="a3", choices=("a3", "a2"),
         help="epbuf's flag: Ascend generation (A3: op tiling checks; A2: README/doc minimums)"),
    Knob(name="--hccl-communicators", kind="int", lo=1, default=1,
         help="epbuf's flag: HCCL communicators on the NPU that use HCCL_BUFFSIZE (the EP group counts 1)"),
    hccl_knob("HCCL_BUFFSIZE", f"CANN; {SKN} {MC2_UTILS}", "MiB of each communicator's window (x2 allocated)"),
    hccl_knob("DEEPEP_HCCL_BUFFSIZE", f"{SKN} {MC2_UTILS}", "what the op checks read instead of HCCL_BUFFSIZE",
               default=None),
    Knob(name="SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", kind="int", lo=1, default=128,
         source="sgl-project/sglang python/sglang/srt/environ.py", help="T of the low-latency ops"),
    Knob(name="DEEPEP_NORMAL_LONG_SEQ_ROUND", kind="int", lo=1, source=f"{SKN} {DEEP_EP_CPP}:63-88",
         help=f"normal mode rounds, 1..{MAX_ROUNDS} (set with ..._PER_ROUND_TOKENS)"),
    Knob(name="DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS", kind="int", lo=1, source=f"{SKN} {DEEP_EP_CPP}:63-88",
         help=f"normal mode tokens per round, {MIN_TOKENS_PER_ROUND}..{MAX_TOKENS_PER_ROUND} (default 8192)"),
    Knob(name="MOE_SHARED_EXPERT_RANK_NUM", kind="int", lo=0, default=0, source=f"{SKN} {DEEP_EP_CPP}:62",
         help="ranks holding shared experts"),
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


def _long_seq_limits(rounds: int | None, per_round: int | None) -> list[LimitCheck]:
    """What ``Buffer::Buffer`` asserts about ``DEEPEP_NORMAL_LONG_SEQ_ROUND`` (r) and
    ``DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS`` (t) (``deep_ep.cpp:70-86``): both set or neither,
    ``1 <= r <= 256``, ``32 <= t <= 8192``, ``r * t <= 131072``. Unset: no check (r = 1, t = 8192)."""
    if rounds is None and per_round is None:
        return []
    src = f"{SKN} {DEEP_EP_CPP}"
    out = [limit("DEEPEP_NORMAL_LONG_SEQ_ROUND set iff _PER_ROUND_TOKENS set (1: only one is)",
                 int((rounds is None) != (per_round is None)), "==", 0, f"{src}:70 EP_HOST_ASSERT(roundSet == tokensSet)")]
    r = rounds if rounds is not None else 1
    t = per_round if per_round is not None else MAX_TOKENS_PER_ROUND
    if rounds is not None:
        out.append(limit(f"DEEPEP_NORMAL_LONG_SEQ_ROUND <= {MAX_ROUNDS}", r, "<=", MAX_ROUNDS, f"{src}:80"))
    if per_round is not None:
        out += [limit(f"DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS >= {MIN_TOKENS_PER_ROUND}", t, ">=",
                      MIN_TOKENS_PER_ROUND, f"{src}:82"),
                limit(f"DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS <= {MAX_TOKENS_PER_ROUND}", t, "<=",
                      MAX_TOKENS_PER_ROUND, f"{src}:82")]
    out.append(limit(f"DEEPEP_NORMAL_LONG_SEQ_ROUND x _PER_ROUND_TOKENS <= {NORMAL_MAX_BS}", r * t, "<=", NORMAL_MAX_BS,
                     f"{src}:84 (MAX_TOTAL_TOKENS)"))
    return out


def recipe(ctx: EngineContext) -> EngineReport:
    """The HCCL window SGLang's Ascend ``deep_ep`` runs in, and every op check against it.

    Allocation: ``--hccl-communicators x 2 x HCCL_BUFFSIZE`` MiB per NPU (the EP communicator's
    window; the ``deep_ep.Buffer`` byte counts are stubs on NPU). Checks: A3 low-latency
    ``CheckWinSize`` for ``T = SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK``; A3 normal
    dispatch/combine for ``min(per_round_tokens, --max-tokens-under-load)`` tokens per rank
    (8192 when no load is given: the most one call accepts with one round); A2: the README and
    doc minimums.

    What ``deep_ep.Buffer``'s constructor asserts about the ``DEEPEP_NORMAL_LONG_SEQ_*``
    variables (set together, in range, product at most 131072; ``deep_ep.cpp:70-86``) is a
    broken limit with an ``error`` finding; the window and its checks are still sized (an unset
    variable as its default).

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

    checks: list[tuple[str, int, str]] = []  # (name, need bytes, formula/source)
    quantities: list[Quantity] = []
    limits: list[LimitCheck] = list(env_limits)
    normal_bs = min(n_per_round, ctx.load) if ctx.load is not None else n_per_round
    if low_latency:
        if soc == "a3":
            need = ll_window_need(tokens, ctx.hidden, num_ranks, num_experts, ctx.num_topk,
                                  dispatch_dtype_bytes=dtype_bytes, shared_expert_rank_num=shared_rank)
            d, c = ll_token_bytes(ctx.hidden, dtype_bytes)
            local = num_experts // max(num_ranks - shared_rank, 1)
            checks.append(("low-latency dispatch/combine (CheckWinSize)", need,
                           f"({tokens} x {d} x {num_ranks} x {local} + {tokens} x {c} x {ctx.num_topk}) x 2; "
                           f"{SKN} {LL_TILING}:1209-1252"))
            quantities += [Quantity(name="tokenNeedSizeDispatch", value=d, unit="B", source=f"{LL_TILING}:1228-1235"),
                           Quantity(name="tokenNeedSizeCombine", value=c, unit="B", source=f"{LL_TILING}:1219")]
            readme = readme_nonlayered(tokens, num_ranks, num_experts, ctx.num_topk, ctx.hidden)
            quantities.append(Quantity(name="readme_nonlayered_bytes", value=readme, unit="B", source=README))
            findings.append(Finding(
                severity="info", code="ascend.readme-vs-tiling",
                message=f"the README's non-layered minimum gives {format_bytes(readme)}; the A3 low-latency op "
                        f"checks {format_bytes(need)} (local experts instead of min(local, topk), 512-B token slots, "
                        "the combine area)", data={"readme": readme, "tiling": need}))
            if ctx.load is not None:
                limits.append(limit("tokens per low-latency call <= BS_UPPER_BOUND", ctx.load, "<=", LL_BS_UPPER_BOUND,
                                    f"{SKN} {LL_TILING}:85, 908"))
            elif tokens > LL_BS_UPPER_BOUND:
                findings.append(Finding(
                    severity="warning", code="sgl-kernel-npu.tokens-above-op-bound",
                    message=f"T = {tokens}: the low-latency op rejects batches above {LL_BS_UPPER_BOUND} tokens per "
                            f"rank (BS_UPPER_BOUND, {LL_TILING}:85, 908), yet the window is checked for T tokens",
                    data={"tokens": tokens}))
            limits += [limit("ep_world_size <= 768", num_ranks, "<=", LL_MAX_EP_WORLD_SIZE, f"{LL_TILING}:81"),
                       limit("num_topk <= 16", ctx.num_topk, "<=", LL_K_MAX, f"{LL_TILING}:102, 986"),
                       limit("moe_expert_num <= 1024", num_experts, "<=", LL_MOE_EXPERT_MAX_NUM, f"{LL_TILING}:101"),
                       limit("moe_expert_num % (ep - shared_expert_rank_num)", num_experts % max(num_ranks - shared_rank, 1),
                             "==", 0, f"{LL_TILING}:880-884")]
        else:
            bs = tokens
            need = (readme_layered(bs, num_experts, ctx.num_topk, ctx.hidden) if layered
                    else readme_nonlayered(bs, num_ranks, num_experts, ctx.num_topk, ctx.hidden))
            checks.append((f"low-latency, README {'layered' if layered else 'non-layered'} minimum (A2)", need,
                           f"{SKN} {README}"))
        limits.append(limit("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK <= 1024", tokens, "<=",
                            SGLANG_MAX_DISPATCH_TOKENS, "sgl-project/sglang token_dispatcher/deepep.py"))
    if normal:
        if soc == "a3":
            nd = normal_dispatch_need(normal_bs, ctx.hidden, ctx.num_topk, n_rounds)
            nc = normal_combine_need(normal_bs, ctx.hidden, ctx.num_topk, n_rounds)
            checks.append(("normal dispatch (CamMoeDispatchNormal)", nd,
                           f"({normal_bs} x {ctx.num_topk} x (combine + dispatch token) + 4 MiB + 102 MiB) x 2; "
                           f"{SKN} {NORMAL_DISPATCH}"))
            checks.append(("normal combine (CamMoeCombineNormal)", nc,
                           f"({normal_bs} x {ctx.num_topk} x combine token + 4 MiB + 102 MiB) x 2; {SKN} {NORMAL_COMBINE}"))
            limits += [limit("ep_world_size <= 384 (normal)", num_ranks, "<=", NORMAL_MAX_EP_WORLD_SIZE,
                             f"{NORMAL_DISPATCH.split(':')[0]}:75"),
                       limit("num_topk <= 16 (normal)", ctx.num_topk, "<=", LL_K_MAX, NORMAL_DISPATCH.split(':')[0])]
        else:
            need = a2_normal_doc(normal_bs, ctx.hidden, ctx.num_topk)
            checks.append(("normal mode, doc minimum (A2, PADDING 20 MB)", need, f"{SKN} {A2_DOC}"))
        if ctx.load is None:
            findings.append(Finding(
                severity="info", code="ascend.normal-worst-case",
                message=f"normal mode checks the largest batch any rank sends (capped at the per-round {n_per_round} "
                        "tokens); without --max-tokens-under-load epbuf sizes that cap", data={"tokens": normal_bs}))
    limits.append(limit("hidden >= 1024", ctx.hidden, ">=", H_MIN, f"{LL_TILING}:970"))
    limits.append(limit("hidden <= 8192", ctx.hidden, "<=", H_MAX, f"{LL_TILING}:970"))
    for name, need, formula in checks:
        limits.append(limit(f"{name} <= {read_name}", need, "<=", window, f"{SKN} {MC2_UTILS}; {formula}"))
        quantities.append(Quantity(name=name, value=need, unit="B", source=formula))
    binding = max(checks, key=lambda c: c[1])
    need = binding[1]
    findings += limit_findings("sgl-kernel-npu", limits, {
        **{lim.name: "deep_ep.Buffer's constructor asserts it, so SGLang fails at start-up" for lim in env_limits},
        f"{binding[0]} <= {read_name}": f"the op fails with \"HCCL_BUFFSIZE is too SMALL\"; set {read_name} >= "
                                        f"{mib_ceil(need)}"})
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
    if low_latency and soc == "a3":
        best = largest_true(1, LL_BS_UPPER_BOUND, lambda t: ll_window_need(
            t, ctx.hidden, num_ranks, num_experts, ctx.num_topk, dispatch_dtype_bytes=dtype_bytes,
            shared_expert_rank_num=shared_rank) <= window)
        recs.append(Recommendation(setting="SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", value=best, goal="limit",
                                   message=f"the largest T (up to the op's 512-token batch bound) whose low-latency window "
                                           f"check passes with {read_name} = {read} MiB" if best else
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
        settings.append(Setting(name="normal-mode tokens per rank", value=normal_bs, source="derived",
                                note="min(per_round_tokens, --max-tokens-under-load)"))
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
