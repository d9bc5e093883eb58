"""vllm-ascend: the per-group HCCL windows it creates and the MC2 dispatch/combine check against
``HCCL_BUFFSIZE``.

Upstream ``vllm-project/vllm-ascend @182b75ea`` (2026-08-22):

* ``vllm_ascend/utils.py:70-72, 960-1005`` (``get_hccl_config_for_pg_options``: groups named ``mc2``
  get no option and use ``HCCL_BUFFSIZE``; ``dp`` gets ``max(ceil((dp + 1) * 4 / 2^20), 50)``;
  ``dynamic_eplb`` 100; every other group 200).
* ``ascend_forward_context.py:176-200`` ``set_mc2_tokens_capacity``: ``max_num_batched_tokens`` with
  ``enable_prefill_mc2``, else the largest graph capture size, else ``max_num_seqs x decode length``;
  per TP rank capped at 512 (:35), or with fused MC2 at 4096 when ``cann_ops_transformer`` is
  importable (MegaMoE, :33, ``ascend_config.py:27``) and 512 otherwise (dispatch_ffn_combine, :34).
* ``platform.py:1275-1309`` ``_get_default_max_cudagraph_capture_size``: the default capture size is
  ``min(max_num_seqs x decode_query_len, 512)`` — vLLM's default without its trailing ``x 2``.
* ``ascend_forward_context.py:223-260``: the MoE comm method. A2: MC2 only with at most 24 routed
  experts per device and EP >= 16, else ALLGATHER; A3: with ``enable_fused_mc2`` FUSED_MC2 while EP <=
  64 (MegaMoE) or 32 (dispatch_ffn_combine), else MC2 within the capacity.
* ``ops/fused_moe/token_dispatcher.py:113-150, 174-187`` (MC2 ``global_bs``; ``moe_expert_num =
  len(expert_map) + global_redundant_expert_num``) with ``eplb/core/eplb_utils.py:73-97``
  ``init_eplb_config``: static EPLB from ``eplb_config.expert_map_path`` counts the map's physical
  experts (``n_redundant = physical_count - n_experts``, :86-89); dynamic EPLB adds
  ``num_redundant_experts``; ``mix_placement`` (``ascend_config.py:314``) puts the shared experts in
  the map and adds ``ep - 1`` redundant slots (:97). ``EplbConfig._validate_config``
  (``ascend_config.py:1028-1047``) requires ``num_redundant_experts`` to be an integer >= 0 and the map a
  readable ``.json`` file.
* ``csrc/mc2/dispatch_ffn_combine/op_host/dispatch_ffn_combine_tiling.cpp:62-85, 284-290``
  (FUSED_MC2 without MegaMoE): ``M x topK x H x 1 x 3 + 10 MiB`` against ``HCCL_BUFFSIZE``, read with
  ``stoul``; values above 65535 fall back to 200.

The MC2 need is the low-latency dispatch/combine check of :mod:`epbuf.engines._hccl` (the larger of
the two; int8 dispatch makes the combine bind). MegaMoE allocates its own symmetric buffer inside
``cann_ops_transformer`` (``ops/fused_moe/moe_comm_method.py:283-330``), whose formula vllm-ascend does
not carry; epbuf reports what vllm-ascend passes it.
"""

from __future__ import annotations

import math

from ..errors import InvalidArgumentError
from ..report import Finding, LimitCheck, Quantity, Report
from ..units import GiB, MiB, format_bytes, format_int
from .._search import largest_true
from ._common import EngineContext, limit, limit_findings, mib_ceil
from ._hccl import LL_TILING, SKN, hccl_knob, hccl_window, ll_window_need, npu_budget_findings, tiling_window_mib
from ._json import json_bool, json_int, json_object, json_text, parse_json_object
from ._knobs import EngineProblem, Knob, Setting
from ._report import EngineReport, Recommendation

VA = "vllm-project/vllm-ascend @182b75ea"
VA_UTILS = "vllm_ascend/utils.py"
VA_CTX = "vllm_ascend/ascend_forward_context.py:176-200 set_mc2_tokens_capacity"
VA_SELECT = "vllm_ascend/ascend_forward_context.py"
VA_PLATFORM = "vllm_ascend/platform.py:1275-1309 _get_default_max_cudagraph_capture_size"
VA_DISPATCHER = "vllm_ascend/ops/fused_moe/token_dispatcher.py:113-150 TokenDispatcherWithMC2"
VA_EPLB = "vllm_ascend/eplb/core/eplb_utils.py"
VA_DFFC = "csrc/mc2/dispatch_ffn_combine/op_host/dispatch_ffn_combine_tiling.cpp"
VA_MEGA = "vllm_ascend/ops/fused_moe/moe_comm_method.py:283-330 _init_mega_moe_symm_buffer"
DEFAULT_BUFFER_SIZE, MIN_DP_BUFFER_SIZE, DYNAMIC_EPLB_BUFFER_SIZE = 200, 50, 100  # VA_UTILS:70-72
MC2_TOKENS_PER_RANK_LIMIT = 512  # ascend_forward_context.py:35
MEGA_MOE_TOKENS_PER_RANK_LIMIT = 4096  # :33
DISPATCH_FFN_COMBINE_TOKENS_PER_RANK_LIMIT = 512  # :34
DEFAULT_CAPTURE_CAP = 512  # platform.py:1309
MEGA_MOE_MAX_EP, DISPATCH_FFN_COMBINE_MAX_EP = 64, 32  # ascend_forward_context.py:248-255
A2_MC2_MAX_EXPERTS_PER_DEVICE, A2_MC2_MIN_EP = 24, 16  # ascend_forward_context.py:233-236
MC2_BS_UPPER_BOUND = 512  # the MC2 dispatch tiling's batch bound (sgl-kernel-npu copy :85)
DFFC_EXTRA = 10 * MiB  # dispatch_ffn_combine_tiling.cpp:284

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
         help="vllm-ascend config: enable_prefill_mc2, enable_fused_mc2, mix_placement, "
              "eplb_config{dynamic_eplb,num_redundant_experts,expert_map_path}"),
    Knob(name="--dispatch-dtype", kind="choice", default="bf16", choices=("bf16", "int8"),
         help="epbuf's flag: int8 for W8A8 dynamic-quant dispatch"),
    Knob(name="--soc", kind="choice", default="a3", choices=("a3", "a2"),
         help="epbuf's flag: Ascend generation (A2 uses MC2 only with <= 24 experts per device and EP >= 16)"),
    Knob(name="--cann-ops-transformer", kind="flag", default=False,
         source=f"{VA} vllm_ascend/ascend_config.py:27 (_MEGA_MOE_SUPPORTED)",
         help="epbuf's flag: cann_ops_transformer is importable, so fused MC2 runs MegaMoE (4096-token cap, EP <= 64)"),
    hccl_knob("HCCL_BUFFSIZE", f"CANN; {VA} {VA_UTILS}:968-987 (mc2 group)", "MiB of the MC2 group's window (x2)"),
    Knob(name="VLLM_ASCEND_ENABLE_FUSED_MC2", kind="int", lo=0, hi=1, default=0,
         source=f"{VA} vllm_ascend/envs.py:83-88; ascend_config.py:160-166",
         help="fused MC2 (dispatch_ffn_combine / MegaMoE) when additional_config has no enable_fused_mc2"),
)


def dffc_window_mib(value: int) -> int:
    """What ``dispatch_ffn_combine``'s ``GetMaxWindowSize`` reads (``dispatch_ffn_combine_tiling.cpp:62-85``):
    ``stoul``, kept when it fits a ``uint16_t``, else the default 200.

    >>> dffc_window_mib(1024), dffc_window_mib(65536 + 200)
    (1024, 200)
    """
    return value if value <= 0xFFFF else DEFAULT_BUFFER_SIZE


def dispatch_ffn_combine_need(tokens: int, hidden: int, num_topk: int) -> int:
    """``M x topK x K x sizeof(int8) x 3 + 10 MiB`` (``dispatch_ffn_combine_tiling.cpp:284``; K is the hidden size).

    >>> dispatch_ffn_combine_need(512, 7168, 8)
    98566144
    """
    return tokens * num_topk * hidden * 3 + DFFC_EXTRA


def _expert_map_physical(path: str) -> int:
    """Physical experts of the largest layer of an EPLB expert map (``expert_file_to_tensor``,
    ``eplb_utils.py:27-43``: ``sum(len(device["device_expert"]) for device in layer["device_list"])``).

    Raises:
        InvalidArgumentError: what ``EplbConfig._validate_config`` refuses (not ``.json``, unreadable)
            and a file that is not such a map.
    """
    from ..models.config_json import read_config_text

    label = "--additional-config eplb_config.expert_map_path"
    if path[-5:] != ".json":
        raise InvalidArgumentError([EngineProblem(label, path, "allowed a .json file (EplbConfig raises TypeError)")])
    text = read_config_text(path, lambda why: InvalidArgumentError([EngineProblem(
        label, path, "allowed a readable expert map file (EplbConfig raises ValueError): "
                     + why.replace("; give a config.json file", "").replace("a config.json", "an expert map"))]))
    data = parse_json_object(label, text, shown=path)
    layers = data.get("layer_list")
    try:
        counts = [sum(len(d["device_expert"]) for d in layer["device_list"]) for layer in layers]
        if not counts or not all(isinstance(d["device_expert"], list) for layer in layers for d in layer["device_list"]):
            raise TypeError
    except (TypeError, KeyError):
        raise InvalidArgumentError([EngineProblem(label, path, "allowed an expert map: {\"layer_list\": [{\"device_list\": "
                                                               "[{\"device_expert\": [...]}, ...]}, ...]}")]) from None
    return max(counts)


def _experts(ctx: EngineContext, extra: dict, ep: int) -> tuple[int, str, bool]:
    """``(moe_expert_num, how, dynamic_eplb)`` of the MC2 ops: ``len(expert_map) +
    global_redundant_expert_num`` (``token_dispatcher.py:187``) as ``init_eplb_config``
    (VA_EPLB:73-97) sets them."""
    label = "--additional-config"
    eplb = json_object(label, extra, "eplb_config")
    dynamic = json_bool(label, eplb, "eplb_config", "dynamic_eplb")
    configured = json_int(label, eplb, "eplb_config", "num_redundant_experts", lo=0)
    map_path = json_text(label, eplb, "eplb_config", "expert_map_path")
    mix = json_bool(label, extra, "mix_placement")
    shared = ctx.num_shared_experts if mix else 0
    placement = ctx.num_experts + shared
    if map_path:
        physical = _expert_map_physical(map_path)
        redundant = physical - placement
        how = f"expert_map_path: {physical} physical experts in its largest layer ({VA_EPLB}:86-89)"
    elif not dynamic:
        redundant, how = 0, "no EPLB: no redundant experts"
    else:
        redundant = configured + (ep - 1 if mix else 0)
        how = f"dynamic EPLB num_redundant_experts {configured}" + (f" + mix_placement ep - 1 = {ep - 1} ({VA_EPLB}:96-97)"
                                                                     if mix else "")
    parts = f"routed {ctx.num_experts}" + (f" + shared {shared} (mix_placement)" if mix else "") + f" + redundant {redundant}"
    return placement + redundant, f"{parts}: {how}", dynamic


def recipe(ctx: EngineContext) -> EngineReport:
    """Per-group HCCL windows of vllm-ascend and the MC2 check against ``HCCL_BUFFSIZE``.

    Groups a device belongs to (of more than one rank): ``world`` (TP x DP x PP), ``tp``, ``pp``,
    ``dp``, ``ep`` (with EP), ``mc2`` (with EP: ``HCCL_BUFFSIZE``), ``dynamic_eplb`` (dynamic
    EPLB). What the ``mc2`` window must hold follows the MoE comm method
    (``ascend_forward_context.py:223-260``): MC2 — the dispatch/combine check
    (:func:`~epbuf.engines._hccl.ll_window_need`) for the per-rank MC2 token capacity; fused MC2 —
    ``dispatch_ffn_combine``'s check, or MegaMoE's own buffer (not modelled); ALLGATHER (A2 outside
    the MC2 conditions) — nothing.

    Raises:
        InvalidArgumentError: an EP size that disagrees with TP x DP; malformed or out-of-range
            values in the JSON flags (one line naming the key).
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
            raise InvalidArgumentError([EngineProblem(ctx.ranks_flag, ctx.num_ranks,
                                                      f"vLLM's EP size is TP x DP = {tp * dp}; make them agree")])
    extra = s["--additional-config"].value or {}
    num_experts, experts_how, dynamic_eplb = _experts(ctx, extra, ep)
    prefill_mc2 = json_bool("--additional-config", extra, "enable_prefill_mc2")
    if "enable_fused_mc2" in extra:
        fused_mc2 = json_int("--additional-config", extra, "enable_fused_mc2", lo=0, hi=1)
        fused_how = "additional_config enable_fused_mc2"
    else:
        fused_mc2, fused_how = s["VLLM_ASCEND_ENABLE_FUSED_MC2"].value, "VLLM_ASCEND_ENABLE_FUSED_MC2"
    mega = bool(s["--cann-ops-transformer"].value)
    spec = s["--speculative-config"].value or {}
    decode_len = 1 + json_int("--speculative-config", spec, "num_speculative_tokens", lo=0)
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
            capture = min(max_seqs * decode_len, DEFAULT_CAPTURE_CAP)
            how = (f"max_cudagraph_capture_size = min(max_num_seqs {max_seqs} x decode length {decode_len}, 512) "
                   f"({VA_PLATFORM}: no x 2)")
        else:
            how = "--max-cudagraph-capture-size"
        capture = min(capture, batched)
        max_tokens = capture
    else:
        max_tokens, how = max_seqs * decode_len, f"max_num_seqs ({seqs_note}) x decode query length {decode_len}"
    per_tp = -(-max_tokens // tp)
    if fused_mc2:
        cap = MEGA_MOE_TOKENS_PER_RANK_LIMIT if mega else DISPATCH_FFN_COMBINE_TOKENS_PER_RANK_LIMIT
    else:
        cap = MC2_TOKENS_PER_RANK_LIMIT
    capped = min(per_tp, cap)
    soc = s["--soc"].value
    findings: list[Finding] = []
    if per_tp > cap:
        findings.append(Finding(severity="info", code="vllm-ascend.mc2-capped",
                                message=f"MC2 capacity per TP rank {per_tp} is capped at {cap} tokens ({VA_CTX})",
                                data={"tokens": per_tp, "cap": cap}))
    method = _comm_method(soc, ep if ep_enabled else 1, ctx.num_experts, fused_mc2, mega)
    alloc = s["HCCL_BUFFSIZE"].value
    read = tiling_window_mib(alloc)
    buffers = []
    need = None
    dtype_bytes = 1 if s["--dispatch-dtype"].value == "int8" else 2
    limits: list[LimitCheck] = []
    quantities: list[Quantity] = []

    def mc2_need(t: int) -> int:
        return ll_window_need(t, ctx.hidden, ep, num_experts, ctx.num_topk, dispatch_dtype_bytes=dtype_bytes)

    need_fn = None
    window_mib = read
    if ep_enabled and ep > 1 and method == "MC2":
        need_fn = mc2_need
        need = mc2_need(capped)
        limits.append(limit("MC2 dispatch/combine need <= HCCL_BUFFSIZE", need, "<=", read * MiB,
                            f"CANN MoeDistributeDispatchV2 / CombineV2 tilings (formula as {SKN} {LL_TILING}:1209-1252 "
                            "and moe_distribute_combine_v2_tiling.cpp:1193-1220; vllm-ascend PR #3073 uses +64 B per "
                            "token instead of +44, the same 512-B slots for most hidden sizes)"))
        limits.append(limit("moe_expert_num % ep", num_experts % ep, "==", 0, f"{LL_TILING}:880-884"))
        if capped > MC2_BS_UPPER_BOUND:
            limits.append(limit("MC2 tokens per rank <= 512 (BS_UPPER_BOUND)", capped, "<=", MC2_BS_UPPER_BOUND,
                                f"{SKN} {LL_TILING}:85, 908 (the capacity follows the 4096-token fused MC2 cap "
                                f"while EP > {MEGA_MOE_MAX_EP} runs MC2)"))
        if read != alloc:
            findings.append(Finding(severity="error", code="ascend.window-wraps",
                                    message=f"HCCL_BUFFSIZE = {alloc} is read as {read} MiB by the MC2 tiling (uint16_t)",
                                    data={"value": alloc, "read": read}))
    elif ep_enabled and ep > 1 and method == "FUSED_MC2" and not mega:
        window_mib = dffc_window_mib(alloc)
        need_fn = lambda t: dispatch_ffn_combine_need(t, ctx.hidden, ctx.num_topk)  # noqa: E731
        need = need_fn(capped)
        limits.append(limit("dispatch_ffn_combine need <= HCCL_BUFFSIZE", need, "<=", window_mib * MiB,
                            f"{VA} {VA_DFFC}:284-290 (M x topK x H x 3 + 10 MiB, M = {capped})"))
        findings.append(Finding(severity="info", code="vllm-ascend.fused-mc2",
                                message=f"fused MC2 ({fused_how} = 1, EP {ep} <= {DISPATCH_FFN_COMBINE_MAX_EP}, no "
                                        "cann_ops_transformer): dispatch_ffn_combine (W8A8 MoE layers) replaces MC2 "
                                        "dispatch/combine and checks M x topK x H x 3 + 10 MiB of the window",
                                data={"tokens": capped}))
    elif ep_enabled and ep > 1 and method == "FUSED_MC2":
        max_recv = max(1, capped * ep * min(ctx.num_topk, max(1, num_experts // ep)))
        quantities += [Quantity(name="mega_moe_num_max_tokens_per_rank", value=capped, source=VA_MEGA),
                       Quantity(name="mega_moe_max_recv_token_num", value=max_recv, source=VA_MEGA)]
        findings.append(Finding(
            severity="warning", code="vllm-ascend.megamoe-buffer",
            message=f"fused MC2 runs MegaMoE ({fused_how} = 1, cann_ops_transformer importable, EP {ep} <= "
                    f"{MEGA_MOE_MAX_EP}): it allocates its own symmetric buffer in cann_ops_transformer "
                    f"(get_symm_buffer_for_mega_moe with num_max_tokens_per_rank {capped}, max_recv_token_num "
                    f"{max_recv}; {VA_MEGA}), sized by that package and not counted here",
            data={"num_max_tokens_per_rank": capped, "max_recv_token_num": max_recv}))
    elif ep_enabled and ep > 1 and method == "ALLGATHER":
        findings.append(Finding(
            severity="info", code="vllm-ascend.a2-allgather",
            message=f"on A2 vllm-ascend uses MC2 only with at most {A2_MC2_MAX_EXPERTS_PER_DEVICE} routed experts per "
                    f"device and EP >= {A2_MC2_MIN_EP} ({VA_SELECT}:223-239); here {ctx.num_experts} experts over EP "
                    f"{ep} ({ctx.num_experts // ep} per device): ALLGATHER, no MC2 window need",
            data={"experts_per_device": ctx.num_experts // ep, "ep": ep}))
    findings += limit_findings("vllm-ascend", limits, {
        "MC2 dispatch/combine need <= HCCL_BUFFSIZE": f"the MC2 op fails (or, unchecked, overruns the window: "
                                                      f"issue #2674); set HCCL_BUFFSIZE={mib_ceil(need or 0)}",
        "dispatch_ffn_combine need <= HCCL_BUFFSIZE": f"dispatch_ffn_combine fails with \"HCCL_BUFFSIZE is too "
                                                      f"SMALL\"; set HCCL_BUFFSIZE={mib_ceil(need or 0)}"})
    if need is not None and ctx.load is not None and ctx.load > capped:
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
    if need is not None and need_fn is not None:
        smallest = mib_ceil(need)
        recs.append(Recommendation(setting="HCCL_BUFFSIZE", value=smallest, goal="load",
                                   num_bytes=total - 2 * alloc * MiB + 2 * smallest * MiB,
                                   message=f"the smallest HCCL_BUFFSIZE (MiB) whose MC2 window holds {capped} tokens per "
                                           "rank"))
        best_tokens = largest_true(1, cap, lambda t: need_fn(t) <= window_mib * MiB)
        recs.append(Recommendation(setting="--max-cudagraph-capture-size",
                                   value=best_tokens * tp if best_tokens else None, goal="limit",
                                   message=f"the largest graph capture size whose MC2 need ({best_tokens or 0} tokens per "
                                           f"TP rank x TP {tp}) fits HCCL_BUFFSIZE = {window_mib} MiB"))
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
                        note=experts_how),
                Setting(name="MoE comm method", value=method if ep_enabled and ep > 1 else "none", source="derived",
                        note=f"{soc.upper()}, {VA_SELECT}:223-260"),
                Setting(name="MC2 tokens per rank", value=capped, source="derived", note=f"{how}; / TP; cap {cap}"),
                *(st for st in s.values() if st.value is not None)]
    rep = Report(backend="vllm-ascend/hccl", title="vllm-ascend per-group HCCL windows and the MC2 check", upstream=VA,
                 inputs={"hidden": ctx.hidden, "num_topk": ctx.num_topk, "ep": ep, "tp": tp, "dp": dp,
                         "num_experts": num_experts, "mc2_tokens_per_rank": capped, "HCCL_BUFFSIZE": alloc,
                         "moe_comm_method": method, "soc": soc},
                 buffers=tuple(buffers),
                 quantities=(Quantity(name="mc2_need_bytes", value=need or 0, unit="B"),
                             Quantity(name="mc2_tokens_per_rank", value=capped, source=VA_CTX), *quantities),
                 findings=tuple(findings), limits=tuple(limits))
    return EngineReport(engine="vllm-ascend", version=ctx.version, version_note=VERSIONS[ctx.version],
                        title=rep.title, settings=tuple(settings), report=rep, recommendations=tuple(recs),
                        device_name=ctx.device_name, device_num_bytes=ctx.device_num_bytes, budget=ctx.budget)


def _comm_method(soc: str, ep: int, routed_experts: int, fused_mc2: int, mega: bool) -> str:
    """The MoE comm method for a step within the MC2 capacity (``ascend_forward_context.py:223-260``)."""
    if ep <= 1:
        return "none"
    if soc == "a2":
        ok = routed_experts // ep <= A2_MC2_MAX_EXPERTS_PER_DEVICE and ep >= A2_MC2_MIN_EP
        return "MC2" if ok else "ALLGATHER"
    if fused_mc2 == 1 and ep <= (MEGA_MOE_MAX_EP if mega else DISPATCH_FFN_COMBINE_MAX_EP):
        return "FUSED_MC2"
    return "MC2"


def _engine():
    from ._api import EngineSpec

    return EngineSpec(
        name="vllm-ascend", title="vllm-ascend", knobs=KNOBS, versions=VERSIONS, default_version="main",
        recipe=recipe, aliases={"num_ranks": ("--ep-size",), "num_ranks_per_node": ("--npus-per-node",)}, gpu=False,
        load_help="tokens one rank sends in one MoE step", ranks_help="EP size = TP x DP")


ENGINE = _engine()
