"""sgl-kernel-npu ``deep_ep``: the HCCL window every op checks in its tiling (A3 ``csrc/deepep/ops``,
A2 ``csrc/deepep/ops2``), the documented minimums, and the ``deep_ep.Buffer`` checks of the
``DEEPEP_NORMAL_LONG_SEQ_*`` variables — the formulas :mod:`epbuf.engines.sgl_kernel_npu` composes.
Upstream lines are listed in that module's docstring (``sgl-project/sgl-kernel-npu @f425bdf1``).
"""

from __future__ import annotations

from ..report import Finding, LimitCheck, Quantity
from ..units import MiB, align, format_bytes, format_int
from ._common import EngineContext, limit
from ._hccl import (
    DOUBLE_DATA_BUFFER, LL_COMBINE_TILING, LL_TILING, MAX_OUT_DTYPE_SIZE, SCALE_EXPAND_IDX_BUFFER, SKN, UB_ALIGN, a512,
    ll_combine_need, ll_dispatch_need, ll_token_bytes, tiling_shared_expert_num,
)

NORMAL_DISPATCH = "csrc/deepep/ops/op_host/cam_moe_dispatch_normal_tiling.cc:631-657"
NORMAL_COMBINE = "csrc/deepep/ops/op_host/cam_moe_combine_normal_tiling.cc:555-579"
DEEP_EP_CPP = "csrc/deepep/deep_ep.cpp"
README = "python/deep_ep/README.md:222"
A2_DOC = "python/deep_ep/doc/A2_DEEPEP.md:84-90"
BUILD = "build.sh:196-209 (Ascend910B1 -> deepep2: csrc/deepep/ops2)"
OPS2 = "csrc/deepep/ops2/op_host"
OPS2_NORMAL_DISPATCH = f"{OPS2}/cam_moe_dispatch_normal_tiling.cc:567-593"
OPS2_NORMAL_COMBINE = f"{OPS2}/cam_moe_combine_normal_tiling.cc:551-574"
OPS2_LL_DISPATCH = f"{OPS2}/moe_distribute_dispatch_v2_tiling.cc:940-966"
OPS2_LL_COMBINE = f"{OPS2}/moe_distribute_combine_v2_tiling.cc:919-946"

COMBINE_STATE_WIN_OFFSET = 4 * MiB  # tiling_args.h
NOTIFY_DISPATCH_WIN_OFFSET = 102 * MiB  # tiling_args.h (the error text says 204MB)
A2_COMBINE_STATE_WIN_OFFSET = 8 * MiB  # ops2/op_host/tiling_args.h:6
A2_NOTIFY_DISPATCH_WIN_OFFSET = 404 * MiB  # ops2/op_host/tiling_args.h:7
A2_STATE_SIZE = 2 * MiB  # ops2/op_host/tiling_args.h:8; the A2 normal dispatch adds 4 of them
A2_RANKS_PER_SERVER = 8  # RANK_NUM_PER_NODE_A2 (ops2 moe_distribute_*_v2_tiling.cc); A2_MAX_HCCS_PEERS (deep_ep.cpp:33)
A2_NORMAL_H_MAX = 7168  # ops2/op_host/cam_moe_dispatch_normal_tiling.cc:76
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


def normal_dispatch_need(max_bs: int, hidden: int, num_topk: int, rounds: int = 1, soc: str = "a3") -> int:
    """``CamMoeDispatchNormal`` tiling: A3 ``cam_moe_dispatch_normal_tiling.cc:636-648``
    ``(maxBs * k * (combine + dispatch) + 4 MiB + 102 MiB) * 2``; A2 (``ops2``, :567-583) the same
    with 8 MiB + 404 MiB, plus 4 x 2 MiB of state. The combine slot doubles with more than one round.

    >>> normal_dispatch_need(512, 7168, 8), normal_dispatch_need(4096, 4096, 8, soc="a2")
    (461373440, 1979711488)
    """
    dispatch = a512(align(hidden * MAX_OUT_DTYPE_SIZE, UB_ALIGN) + SCALE_EXPAND_IDX_BUFFER)
    combine = a512(hidden * MAX_OUT_DTYPE_SIZE) * (2 if rounds > 1 else 1)
    if soc == "a2":
        return (max_bs * num_topk * (combine + dispatch) + A2_COMBINE_STATE_WIN_OFFSET
                + A2_NOTIFY_DISPATCH_WIN_OFFSET) * DOUBLE_DATA_BUFFER + 4 * A2_STATE_SIZE
    return (max_bs * num_topk * (combine + dispatch) + COMBINE_STATE_WIN_OFFSET + NOTIFY_DISPATCH_WIN_OFFSET) \
        * DOUBLE_DATA_BUFFER


def normal_combine_need(real_bs: int, hidden: int, num_topk: int, max_round: int = 1, soc: str = "a3") -> int:
    """``CamMoeCombineNormal`` tiling: A3 ``cam_moe_combine_normal_tiling.cc:563-568``
    ``(realBs * k * combine + 4 MiB + 102 MiB) * 2``; A2 (``ops2``, :551-563) with 8 MiB + 404 MiB.

    >>> normal_combine_need(512, 7168, 8), normal_combine_need(8192, 7168, 8)
    (339738624, 2101346304)
    """
    combine = a512(hidden * MAX_OUT_DTYPE_SIZE) * (2 if max_round > 1 else 1)
    if soc == "a2":
        return (real_bs * num_topk * combine + A2_COMBINE_STATE_WIN_OFFSET + A2_NOTIFY_DISPATCH_WIN_OFFSET) \
            * DOUBLE_DATA_BUFFER
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


def _normal_tokens(ctx: EngineContext, rounds: int, per_round: int, long_seq_combine: bool) -> dict:
    """Tokens per rank the normal-mode tilings are checked for. ``real`` is the largest batch any
    rank sends (``real_max_bs``, ``deep_ep.cpp:322``): ``--max-tokens-under-load``, else the most a call
    accepts, ``round x per_round_tokens`` (``deep_ep.cpp:127-130``). Dispatch reserves ``min(per_round,
    real)`` (``deep_ep.cpp:324-325``); combine ``min(8192, real)`` in one round, or the dispatch rounds with
    ``DEEPEP_NORMAL_COMBINE_ENABLE_LONG_SEQ=1`` (``deep_ep.cpp:601-605``; ``cam_moe_combine_normal_tiling.cc:561-568``)."""
    real = ctx.load if ctx.load is not None else rounds * per_round
    combine_rounds, combine_per_round = (rounds, per_round) if long_seq_combine else (1, MAX_TOKENS_PER_ROUND)
    return {"real": real, "dispatch_bs": min(per_round, real), "dispatch_rounds": rounds,
            "combine_bs": min(combine_per_round, real), "combine_rounds": combine_rounds}


def _ll_checks(ctx: EngineContext, soc: str, tokens: int, num_ranks: int, num_experts: int, dtype_bytes: int,
               shared_rank: int, layered: bool) -> tuple[list[tuple[str, int, str]], list[Quantity], list[LimitCheck],
                                                        list[Finding]]:
    """The low-latency window checks: ``(name, need, formula)`` rows, quantities, limits, findings."""
    checks: list[tuple[str, int, str]] = []
    quantities: list[Quantity] = []
    limits: list[LimitCheck] = []
    findings: list[Finding] = []
    shared = tiling_shared_expert_num(shared_rank)
    local = num_experts // max(num_ranks - shared_rank, 1)
    k_slots = f"({ctx.num_topk} + {shared})" if shared else f"{ctx.num_topk}"
    if soc == "a3" or num_ranks <= A2_RANKS_PER_SERVER:
        a2 = soc == "a2"
        # ops2 (A2, one server) sizes dispatched tokens as 2-byte elements in both ops
        d_bytes = MAX_OUT_DTYPE_SIZE if a2 else dtype_bytes
        d, c = ll_token_bytes(ctx.hidden, d_bytes)
        c_d, _ = ll_token_bytes(ctx.hidden, MAX_OUT_DTYPE_SIZE)
        kw = dict(shared_expert_num=shared, shared_expert_rank_num=shared_rank)
        dispatch = ll_dispatch_need(tokens, ctx.hidden, num_ranks, num_experts, ctx.num_topk,
                                    dispatch_dtype_bytes=d_bytes, **kw)
        combine = ll_combine_need(tokens, ctx.hidden, num_ranks, num_experts, ctx.num_topk, **kw)
        src_d = f"{SKN} {OPS2_LL_DISPATCH}" if a2 else f"{SKN} {LL_TILING}:1209-1252"
        src_c = f"{SKN} {OPS2_LL_COMBINE}" if a2 else f"{SKN} {LL_COMBINE_TILING}:1193-1220"
        checks.append(("low-latency dispatch (CheckWinSize)", dispatch,
                       f"({tokens} x {d} x {num_ranks} x {local} + {tokens} x {c} x {k_slots}) x 2; {src_d}"))
        checks.append(("low-latency combine", combine,
                       f"({tokens} x {c_d} x {num_ranks} x {local} + {tokens} x {c} x {k_slots}) x 2 (dispatched "
                       f"tokens sized as 2-byte elements whatever the dispatch dtype); {src_c}"))
        quantities += [Quantity(name="tokenNeedSizeDispatch", value=d, unit="B", source=f"{LL_TILING}:1228-1235"),
                       Quantity(name="tokenNeedSizeCombine", value=c, unit="B", source=f"{LL_TILING}:1219"),
                       Quantity(name="sharedExpertNum", value=shared, source=f"deep_ep.hpp:36; {LL_TILING}:697-701")]
        if combine > dispatch:
            findings.append(Finding(
                severity="info", code="ascend.combine-check-binds",
                message=f"the low-latency combine tiling sizes every dispatched token as 2-byte elements "
                        f"({format_int(c_d)} B slots, {LL_COMBINE_TILING}:1202-1207): it needs {format_bytes(combine)}, "
                        f"more than the {format_bytes(dispatch)} the {dtype_bytes}-byte dispatch checks",
                data={"dispatch": dispatch, "combine": combine}))
        need = max(dispatch, combine)
        readme = readme_nonlayered(tokens, num_ranks, num_experts, ctx.num_topk, ctx.hidden)
        quantities.append(Quantity(name="readme_nonlayered_bytes", value=readme, unit="B", source=README))
        findings.append(Finding(
            severity="info", code="ascend.readme-vs-tiling",
            message=f"the README's non-layered minimum gives {format_bytes(readme)}; the {soc.upper()} low-latency "
                    f"ops check {format_bytes(need)} (local experts instead of min(local, topk), 512-B token slots, "
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
        need = (readme_layered(tokens, num_experts, ctx.num_topk, ctx.hidden) if layered
                else readme_nonlayered(tokens, num_ranks, num_experts, ctx.num_topk, ctx.hidden))
        checks.append((f"low-latency, README {'layered' if layered else 'non-layered'} minimum (A2, more than one "
                       "server)", need, f"{SKN} {README}; the ops2 multi-server tilings check no window"))
    return checks, quantities, limits, findings


def _normal_checks(ctx: EngineContext, soc: str, num_ranks: int, tok: dict) -> tuple[list[tuple[str, int, str]],
                                                                                    list[LimitCheck]]:
    checks: list[tuple[str, int, str]] = []
    limits: list[LimitCheck] = []
    a2 = soc == "a2"
    if not a2 or max(1, num_ranks // A2_RANKS_PER_SERVER) == 1:  # A2: intranode while num_rdma_ranks is 1
        dispatch_src = f"{SKN} {OPS2_NORMAL_DISPATCH}" if a2 else f"{SKN} {NORMAL_DISPATCH}"
        combine_src = f"{SKN} {OPS2_NORMAL_COMBINE}" if a2 else f"{SKN} {NORMAL_COMBINE}"
        offsets = "8 MiB + 404 MiB) x 2 + 4 x 2 MiB" if a2 else "4 MiB + 102 MiB) x 2"
        nd = normal_dispatch_need(tok["dispatch_bs"], ctx.hidden, ctx.num_topk, tok["dispatch_rounds"], soc)
        nc = normal_combine_need(tok["combine_bs"], ctx.hidden, ctx.num_topk, tok["combine_rounds"], soc)
        rounds_d = " (x2: rounds > 1)" if tok["dispatch_rounds"] > 1 else ""
        rounds_c = " (x2: rounds > 1)" if tok["combine_rounds"] > 1 else ""
        checks.append(("normal dispatch (CamMoeDispatchNormal)", nd,
                       f"({tok['dispatch_bs']} x {ctx.num_topk} x (combine token{rounds_d} + dispatch token) + "
                       f"{offsets}; {dispatch_src}"))
        checks.append(("normal combine (CamMoeCombineNormal)", nc,
                       f"({tok['combine_bs']} x {ctx.num_topk} x combine token{rounds_c} + "
                       f"{offsets.replace(' + 4 x 2 MiB', '')}; {combine_src}; {SKN} {DEEP_EP_CPP}:601-605"))
        limits += [limit("ep_world_size <= 384 (normal)", num_ranks, "<=", NORMAL_MAX_EP_WORLD_SIZE,
                         f"{NORMAL_DISPATCH.split(':')[0]}:75"),
                   limit("num_topk <= 16 (normal)", ctx.num_topk, "<=", LL_K_MAX, NORMAL_DISPATCH.split(':')[0])]
        if a2:
            limits.append(limit("hidden <= 7168 (A2 normal)", ctx.hidden, "<=", A2_NORMAL_H_MAX,
                                f"{SKN} {OPS2}/cam_moe_dispatch_normal_tiling.cc:76, 425"))
    else:
        need = a2_normal_doc(tok["dispatch_bs"], ctx.hidden, ctx.num_topk)
        checks.append(("normal mode, doc minimum (A2 across servers, PADDING 20 MB)", need,
                       f"{SKN} {A2_DOC}; the A2 internode dispatch tiling checks no window"))
    return checks, limits


def _ll_need_function(ctx: EngineContext, soc: str, num_ranks: int, num_experts: int, dtype_bytes: int,
                      shared_rank: int):
    """``T -> bytes`` of the binding low-latency check (for the exact ``T`` search)."""
    d_bytes = MAX_OUT_DTYPE_SIZE if soc == "a2" else dtype_bytes
    kw = dict(shared_expert_num=tiling_shared_expert_num(shared_rank), shared_expert_rank_num=shared_rank)
    return lambda t: max(ll_dispatch_need(t, ctx.hidden, num_ranks, num_experts, ctx.num_topk,
                                          dispatch_dtype_bytes=d_bytes, **kw),
                         ll_combine_need(t, ctx.hidden, num_ranks, num_experts, ctx.num_topk, **kw))
