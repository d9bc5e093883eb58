"""Ascend engines: HCCL windows (``HCCL_BUFFSIZE``) and the MC2 op checks against them.

On Ascend the expert-parallel communication memory is the HCCL window of a communicator:
"Each communicator occupies 2 x HCCL_BUFFSIZE memory, which is used for receiving and
sending" (Huawei CANN, environment variable ``HCCL_BUFFSIZE``: integer >= 1, default 200,
unit MB = 2^20 B; a communicator created with ``HcclCommConfig.hcclBufferSize`` — what
``torch_npu``'s ``ProcessGroupHCCL.Options().hccl_config["hccl_buffer_size"]`` sets — uses
that value instead). The MC2 dispatch/combine ops do not allocate: their tiling checks that
their need fits ``1 x HCCL_BUFFSIZE``.

Three engines:

``sgl-kernel-npu`` — ``sgl-project/sgl-kernel-npu @f425bdf1`` (2026-08-21), SGLang's Ascend ``deep_ep``:
    * ``csrc/deepep/ops/op_host/mc2_tiling_utils.h:22-41`` ``Mc2TilingUtils::GetMaxWindowSize``:
      reads ``DEEPEP_HCCL_BUFFSIZE`` if set, else ``HCCL_BUFFSIZE``; ``uint16_t defaultWindowSize =
      200; defaultWindowSize = std::stoi(env)`` — the value is stored in 16 bits, so 65536 MiB
      and above wrap; times ``1024 * 1024``.
    * ``.../moe_distribute_dispatch_v2_tiling.cpp:1209-1252`` ``CheckWinSize`` (low latency;
      combine v2 checks the same): ``(maxBs * a512(a32(h * dtype) + 44) * ep * localExperts +
      maxBs * a512(2h) * (k + sharedExperts)) * 2``; ``maxBs = globalBs / ep = T``
      (``deep_ep.cpp:867``); limits :80-108 (``BS_UPPER_BOUND = 512``, ``K_MAX = 16``, H in
      [1024, 8192], ``MOE_EXPERT_MAX_NUM = 1024``, ep in [2, 768]).
    * ``.../cam_moe_dispatch_normal_tiling.cc:631-657`` and ``cam_moe_combine_normal_tiling.cc:555-579``
      (normal mode): ``(maxBs * k * (a512(2h) [x2 if rounds > 1] + a512(a32(2h) + 44)) + 4 MiB +
      102 MiB) * 2`` and ``(realBs * k * a512(2h) [x2] + 4 MiB + 102 MiB) * 2`` (``tiling_args.h``
      ``COMBINE_STATE_WIN_OFFSET``, ``NOTIFY_DISPATCH_WIN_OFFSET``); ``maxBs = min(per_round_tokens,
      real max tokens per rank)`` (``deep_ep.cpp:325``).
    * ``python/deep_ep/README.md:222`` minimums: non-layered ``(bs * ep * min(local, topk) * h * 2 +
      2 MB) * 2``, layered (A2 two nodes) ``E * bs * (2h + 4 * topk * 4) + 4 MB + 800 MB``;
      ``doc/A2_DEEPEP.md:84-90`` normal mode ``2 * (102 MB + 4 MB + tokens * 3h * topk) + PADDING``.

``mindspeed`` — ``Ascend/MindSpeed @028de58c`` (2026-07-21): ``mindspeed/core/hccl_buffer/
hccl_adaptive_func.py:78-359`` ``hccl_buffer_auto_adaptive`` (per-group MB from sequence,
micro-batch, hidden and parallel sizes), ``_parse_key_value_string`` (:8-67, ``--hccl-group-buffer``),
``adaptor.py:16-27`` (the per-group value is applied only with ``--hccl-group-buffer-adaptive``);
the legacy copy in ``mindspeed/core/parallel_state.py:75-303`` applies either.

``vllm-ascend`` — ``vllm-project/vllm-ascend @182b75ea`` (2026-08-22): ``vllm_ascend/utils.py:70-72,
960-1005`` (``get_hccl_config_for_pg_options``: groups named ``mc2`` get no option and use
``HCCL_BUFFSIZE``; ``dp`` gets ``max(ceil((dp + 1) * 4 / 2^20), 50)``; ``dynamic_eplb`` 100;
every other group 200), ``ascend_forward_context.py:176-200`` (``set_mc2_tokens_capacity``: per
TP rank at most 512 tokens), ``ops/fused_moe/token_dispatcher.py:113-150`` (MC2 ``global_bs``,
experts incl. redundant).
"""

from __future__ import annotations

import math

from ..errors import InvalidArgumentError
from ..report import Buffer, Finding, LimitCheck, Quantity, Region, Report
from ..units import GiB, MiB, align, format_bytes, format_int
from .._search import largest_true
from ._common import (
    EngineContext, EngineProblem, EngineReport, Knob, Recommendation, Setting, limit, limit_findings,
    mib_ceil, topology,
)

# --- sgl-kernel-npu ------------------------------------------------------------------------
SKN = "sgl-project/sgl-kernel-npu @f425bdf1"
MC2_UTILS = "csrc/deepep/ops/op_host/mc2_tiling_utils.h:22-41 GetMaxWindowSize"
LL_TILING = "csrc/deepep/ops/op_host/moe_distribute_dispatch_v2_tiling.cpp"
NORMAL_DISPATCH = "csrc/deepep/ops/op_host/cam_moe_dispatch_normal_tiling.cc:631-657"
NORMAL_COMBINE = "csrc/deepep/ops/op_host/cam_moe_combine_normal_tiling.cc:555-579"
DEEP_EP_CPP = "csrc/deepep/deep_ep.cpp"
README = "python/deep_ep/README.md:222"
A2_DOC = "python/deep_ep/doc/A2_DEEPEP.md:84-90"

DEFAULT_HCCL_BUFFSIZE = 200  # CANN default; GetMaxWindowSize's uint16_t default
WINDOW_VALUE_BITS = 16  # uint16_t defaultWindowSize
WIN_ADDR_ALIGN = 512  # tokens start 512-B aligned in the window
UB_ALIGN = 32
SCALE_EXPAND_IDX_BUFFER = 44  # "scale 32B + 3*4 expandIdx"
FULL_MESH_DATA_ALIGN = 480  # fullmesh_v2 packs 480 data bytes per 512-B block
MAX_OUT_DTYPE_SIZE = 2
DOUBLE_DATA_BUFFER = 2
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


def tiling_window_mib(value: int) -> int:
    """What ``GetMaxWindowSize`` reads from ``HCCL_BUFFSIZE = value``: ``std::stoi`` into a
    ``uint16_t`` (``mc2_tiling_utils.h:24-31``): values wrap modulo 65536; beyond ``int`` range
    ``stoi`` throws and the default 200 stays.

    >>> tiling_window_mib(1024), tiling_window_mib(65536 + 200), tiling_window_mib(2**31)
    (1024, 200, 200)
    """
    if value > (1 << 31) - 1:
        return DEFAULT_HCCL_BUFFSIZE
    return value % (1 << WINDOW_VALUE_BITS)


def _a512(x: int) -> int:
    return align(x, WIN_ADDR_ALIGN)


def ll_token_bytes(hidden: int, dispatch_dtype_bytes: int = 2, comm_alg: str = "fullmesh_v1") -> tuple[int, int]:
    """``(tokenNeedSizeDispatch, tokenNeedSizeCombine)`` of ``CheckWinSize``
    (``moe_distribute_dispatch_v2_tiling.cpp:1219-1235``).

    >>> ll_token_bytes(7168), ll_token_bytes(7168, 1)
    ((14848, 14336), (7680, 14336))
    """
    combine = _a512(hidden * MAX_OUT_DTYPE_SIZE)
    actual = align(hidden * dispatch_dtype_bytes, UB_ALIGN) + SCALE_EXPAND_IDX_BUFFER
    if comm_alg == "fullmesh_v2":
        dispatch = -(-actual // FULL_MESH_DATA_ALIGN) * WIN_ADDR_ALIGN
    else:
        dispatch = _a512(actual)
    return dispatch, combine


def ll_window_need(max_bs: int, hidden: int, ep_world_size: int, num_experts: int, num_topk: int, *,
                   dispatch_dtype_bytes: int = 2, shared_expert_num: int = 0, shared_expert_rank_num: int = 0,
                   comm_alg: str = "fullmesh_v1") -> int:
    """The window bytes ``CheckWinSize`` requires (low-latency dispatch/combine v2, A3):
    ``(maxBs * dispatch * ep * localExperts + maxBs * combine * (k + shared)) * 2`` with
    ``localExperts = E / (ep - sharedExpertRankNum)``.

    >>> ll_window_need(512, 7168, 16, 256, 8)
    4009754624
    """
    local = num_experts // (ep_world_size - shared_expert_rank_num)
    dispatch, combine = ll_token_bytes(hidden, dispatch_dtype_bytes, comm_alg)
    return (max_bs * dispatch * ep_world_size * local + max_bs * combine * (num_topk + shared_expert_num)) \
        * DOUBLE_DATA_BUFFER


def normal_dispatch_need(max_bs: int, hidden: int, num_topk: int, rounds: int = 1) -> int:
    """``CamMoeDispatchNormal`` tiling (``cam_moe_dispatch_normal_tiling.cc:636-648``).

    >>> normal_dispatch_need(512, 7168, 8)
    461373440
    """
    dispatch = _a512(align(hidden * MAX_OUT_DTYPE_SIZE, UB_ALIGN) + SCALE_EXPAND_IDX_BUFFER)
    combine = _a512(hidden * MAX_OUT_DTYPE_SIZE) * (2 if rounds > 1 else 1)
    return (max_bs * num_topk * (combine + dispatch) + COMBINE_STATE_WIN_OFFSET + NOTIFY_DISPATCH_WIN_OFFSET) \
        * DOUBLE_DATA_BUFFER


def normal_combine_need(real_bs: int, hidden: int, num_topk: int, max_round: int = 1) -> int:
    """``CamMoeCombineNormal`` tiling (``cam_moe_combine_normal_tiling.cc:564-569``).

    >>> normal_combine_need(512, 7168, 8)
    339738624
    """
    combine = _a512(hidden * MAX_OUT_DTYPE_SIZE) * (2 if max_round > 1 else 1)
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


def hccl_window(name: str, buffsize_mib: int, need: int | None, formula: str, source: str) -> Buffer:
    """A communicator's HCCL window: ``2 x buffsize`` MiB (send + receive halves). ``need``:
    bytes the ops check against one half (``None``: nothing checks it); the buffer's
    ``num_bytes_needed`` is twice the smallest whole-MiB half that passes."""
    half = buffsize_mib * MiB
    used = mib_ceil(need) * MiB if need is not None else half
    regions = [Region(name=f"{what} half (hccl_buffer_size)", num_bytes=half, num_bytes_used=used,
                      formula=formula, source=source) for what in ("send", "receive")]
    return Buffer(name=name, regions=tuple(regions), rule="sum", alignment=MiB, num_bytes=2 * half,
                  num_bytes_needed=2 * used, source="CANN HCCL_BUFFSIZE: each communicator takes 2 x HCCL_BUFFSIZE")


def _hccl_knob(name: str, source: str, help_text: str, default: int | None = DEFAULT_HCCL_BUFFSIZE) -> Knob:
    return Knob(name=name, kind="int", lo=1, default=default, source=source, help=help_text)


def _budget_findings(prefix: str, ctx: EngineContext, total: int) -> list[Finding]:
    from ._deepep import budget_findings

    return budget_findings(prefix, ctx, total, per="NPU")


def _ep_size_sglang(ctx: EngineContext) -> tuple[int, Setting]:
    tp, ep = ctx.setting("--tp-size").value, ctx.setting("--ep-size").value
    if ep is None:
        ep = ctx.num_ranks
    if ep is not None:
        return ep, Setting(name="EP size", value=ep, source="flag", note="--ep-size (get_moe_ep_group on NPU)")
    if tp is not None:
        return tp, Setting(name="EP size", value=tp, source="flag", note="--tp-size (SGLang: ep_size = tp_size)")
    return 16, Setting(name="EP size", value=16, source="default", note="epbuf's default (pass --ep-size)")


SKN_VERSIONS = {"main": f"{SKN} (2026-08-21): A3 op tilings and README minimums"}

SKN_KNOBS = (
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
    _hccl_knob("HCCL_BUFFSIZE", f"CANN; {SKN} {MC2_UTILS}", "MiB of each communicator's window (x2 allocated)"),
    _hccl_knob("DEEPEP_HCCL_BUFFSIZE", f"{SKN} {MC2_UTILS}", "what the op checks read instead of HCCL_BUFFSIZE",
               default=None),
    Knob(name="SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", kind="int", lo=1, default=128,
         source="sgl-project/sglang python/sglang/srt/environ.py", help="T of the low-latency ops"),
    Knob(name="DEEPEP_NORMAL_LONG_SEQ_ROUND", kind="int", lo=1, hi=MAX_ROUNDS, source=f"{SKN} {DEEP_EP_CPP}:63-88",
         help="normal mode rounds (set with ..._PER_ROUND_TOKENS)"),
    Knob(name="DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS", kind="int", lo=MIN_TOKENS_PER_ROUND, hi=MAX_TOKENS_PER_ROUND,
         source=f"{SKN} {DEEP_EP_CPP}:63-88", help="normal mode tokens per round (default 8192)"),
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


def sgl_kernel_npu_recipe(ctx: EngineContext) -> EngineReport:
    """The HCCL window SGLang's Ascend ``deep_ep`` runs in, and every op check against it.

    Allocation: ``--hccl-communicators x 2 x HCCL_BUFFSIZE`` MiB per NPU (the EP communicator's
    window; the ``deep_ep.Buffer`` byte counts are stubs on NPU). Checks: A3 low-latency
    ``CheckWinSize`` for ``T = SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK``; A3 normal
    dispatch/combine for ``min(per_round_tokens, --max-tokens-under-load)`` tokens per rank
    (8192 when no load is given: the most one call accepts with one round); A2: the README and
    doc minimums.

    Raises:
        InvalidArgumentError: only one of the two ``DEEPEP_NORMAL_LONG_SEQ_*`` variables set,
            their product above 131072.
    """
    num_ranks, ep_setting = _ep_size_sglang(ctx)
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
    if (rounds.value is None) != (per_round.value is None):
        raise InvalidArgumentError([EngineProblem(
            "--env DEEPEP_NORMAL_LONG_SEQ_ROUND", rounds.value,
            f"set together with DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS (EP_HOST_ASSERT(roundSet == tokensSet), "
            f"{DEEP_EP_CPP}:70)")])
    n_rounds = rounds.value or 1
    n_per_round = per_round.value or MAX_TOKENS_PER_ROUND
    if n_rounds * n_per_round > NORMAL_MAX_BS:
        raise InvalidArgumentError([EngineProblem(
            "--env DEEPEP_NORMAL_LONG_SEQ_ROUND", n_rounds,
            f"DEEPEP_NORMAL_LONG_SEQ_ROUND x DEEPEP_NORMAL_LONG_SEQ_PER_ROUND_TOKENS = {n_rounds * n_per_round} must "
            f"not exceed {NORMAL_MAX_BS} ({DEEP_EP_CPP}:82-84)")])
    tokens = s["SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK"].value
    alloc, read, read_name, findings = _window_setting(ctx)
    window = read * MiB
    layered = soc == "a2" and s["HCCL_INTRA_PCIE_ENABLE"].value and not s["HCCL_INTRA_ROCE_ENABLE"].value
    comms = s["--hccl-communicators"].value

    checks: list[tuple[str, int, str]] = []  # (name, need bytes, formula/source)
    quantities: list[Quantity] = []
    limits: list[LimitCheck] = []
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
    findings += _budget_findings("sgl-kernel-npu", ctx, total)

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
    return EngineReport(engine="sgl-kernel-npu", version=ctx.version, version_note=SKN_VERSIONS[ctx.version],
                        title=rep.title, settings=tuple(settings), report=rep, recommendations=tuple(recs),
                        device_name=ctx.device_name, device_num_bytes=ctx.device_num_bytes, budget=ctx.budget)


# --- MindSpeed -----------------------------------------------------------------------------
MS = "Ascend/MindSpeed @028de58c"
MS_FUNC = "mindspeed/core/hccl_buffer/hccl_adaptive_func.py"
MS_ADAPTOR = "mindspeed/core/hccl_buffer/adaptor.py:16-27"
MS_LEGACY = "mindspeed/core/parallel_state.py:75-303"
#: ``_parse_key_value_string`` allowed keys (MS_FUNC:12-42).
MS_KEYS = ("dp", "dp_cp", "cp", "mp", "mp_exp", "tp", "pp", "embd", "tp_dp_cp", "tp_dp", "tp_cp", "tp_exp",
           "tp_ep_mp", "exp", "ep", "dp_modulo_exp", "pp_new_stream", "cp2", "cp_ulysses", "cp_ring", "cp_ring_intra",
           "cp_ring_intra_overlap", "nd1_dim1", "ag_x_sd_rcv_overlap", "nd1_dim2", "ag_y_sd_rcv_overlap", "nd2_dim1",
           "nd2_dim2", "default_group")

MS_VERSIONS = {
    "main": f"{MS} feature manager ({MS_FUNC}, {MS_ADAPTOR}): per-group values apply only with "
            "--hccl-group-buffer-adaptive",
    "legacy": f"{MS} {MS_LEGACY}: --hccl-group-buffer or --hccl-group-buffer-adaptive applies the values; "
              "manual values override adaptive ones",
}

MS_KNOBS = (
    Knob(name="--hccl-group-buffer-adaptive", kind="flag", default=False, source=f"{MS} {MS_FUNC}",
         help="compute per-group HCCL buffers"),
    Knob(name="--hccl-ep-group-buffer-adaptive-factor", kind="float", default=-1.0, source=f"{MS} {MS_FUNC}",
         help="> 0 enables the MoE/EP formulas (load-imbalance factor)"),
    Knob(name="--hccl-group-buffer", kind="text", source=f"{MS} {MS_FUNC}:8-67",
         help="manual 'group:MB;group:MB' values"),
    Knob(name="--seq-length", kind="int", lo=1, default=4096, default_note="epbuf's default (pass yours)",
         help="sequence length S"),
    Knob(name="--micro-batch-size", kind="int", lo=1, default=1, help="micro batch B"),
    Knob(name="--tensor-model-parallel-size", kind="int", lo=1, default=1, help="TP"),
    Knob(name="--pipeline-model-parallel-size", kind="int", lo=1, default=1, help="PP"),
    Knob(name="--context-parallel-size", kind="int", lo=1, default=1, help="CP"),
    Knob(name="--expert-model-parallel-size", kind="int", lo=1, default=1, help="EP"),
    Knob(name="--data-parallel-size", kind="int", lo=1, default=1,
         help="epbuf's flag: DP size (Megatron derives it from the world size)"),
    Knob(name="--moe-token-dispatcher-type", kind="choice", default="allgather",
         choices=("allgather", "alltoall", "alltoall_seq", "flex"), help="MoE dispatcher"),
    Knob(name="--sequence-parallel", kind="flag", default=False, help="sequence parallelism"),
    Knob(name="--moe-tp-extend-ep", kind="flag", default=False, help="MindSpeed TP-extend-EP"),
    Knob(name="--context-parallel-algo", kind="choice", default="ulysses_cp_algo",
         choices=("ulysses_cp_algo", "megatron_cp_algo", "hybrid_cp_algo"), help="CP algorithm"),
    Knob(name="--num-attention-heads", kind="int", lo=1, help="attention heads (megatron/hybrid CP)"),
    Knob(name="--group-query-attention", kind="flag", default=False, help="GQA"),
    Knob(name="--num-query-groups", kind="int", lo=1, help="query groups (GQA)"),
    Knob(name="--cp-window-size", kind="int", lo=1, default=1, help="CP window size"),
    Knob(name="--use-cp-send-recv-overlap", kind="flag", default=False, help="CP send/recv overlap"),
    Knob(name="--ulysses-degree-in-cp", kind="int", lo=1, help="hybrid CP: Ulysses degree"),
    _hccl_knob("HCCL_BUFFSIZE", "CANN", "MiB of every group without its own value (x2 allocated)"),
)


def mindspeed_adaptive(*, seq_length: int, micro_batch_size: int, hidden_size: int, context_parallel_size: int,
                       tensor_model_parallel_size: int, expert_model_parallel_size: int, moe_router_topk: int,
                       moe_token_dispatcher_type: str, factor: float, sequence_parallel: bool, moe_tp_extend_ep: bool,
                       context_parallel_algo: str | None, num_attention_heads: int | None = None,
                       group_query_attention: bool = False, num_query_groups: int | None = None,
                       cp_window_size: int = 1, use_cp_send_recv_overlap: bool = False,
                       ulysses_degree_in_cp: int | None = None) -> dict[str, int]:
    """``hccl_buffer_auto_adaptive`` (``hccl_adaptive_func.py:78-359``): group key -> MB.

    Reproduces upstream's float arithmetic in its order (``math.ceil`` of true divisions), so
    the values are upstream's to the MB.

    >>> g = mindspeed_adaptive(seq_length=4096, micro_batch_size=1, hidden_size=7168, context_parallel_size=1,
    ...     tensor_model_parallel_size=1, expert_model_parallel_size=16, moe_router_topk=8,
    ...     moe_token_dispatcher_type="alltoall", factor=1.0, sequence_parallel=True, moe_tp_extend_ep=False,
    ...     context_parallel_algo=None)
    >>> g["tp"], g["pp"], g["exp"], g["cp"], g["mp"]
    (56, 56, 448, 56, 10)
    """
    S, B, H = seq_length, micro_batch_size, hidden_size
    CP, TP, EP, k, f = context_parallel_size, tensor_model_parallel_size, expert_model_parallel_size, moe_router_topk, factor
    g: dict[str, int] = {}
    mlp = 2 * math.ceil(S / CP * B * H / 1024 / 1024)  # :100-102 / :125-127
    g["tp"] = mlp if sequence_parallel else mlp * 2
    if moe_token_dispatcher_type == "alltoall_seq":  # :98-122
        moe = 2 * math.ceil(f * S / CP / TP * B * H / 1024 / 1024 * k) if f > 0 else 200
        g["tp"] = max(moe, g["tp"])
    if sequence_parallel:  # :133-150
        g["pp"] = 2 * math.ceil(S / CP / TP * B * H / 1024 / 1024)
    else:
        g["pp"] = 2 * math.ceil(S / CP * B * H / 1024 / 1024)
    g["pp_new_stream"] = g["pp"]
    g["mp"] = g["mp_exp"] = 10  # :154-155
    # :159-172: the factor only switches the EP formula on; it does not multiply it
    g["exp"] = 2 * math.ceil(S / CP / TP * B * H / 1024 / 1024 * k) if f > 0 else 200
    if moe_token_dispatcher_type == "allgather":  # :177-191
        g["tp_exp"] = 2 * math.ceil(f * S / CP * B * H * EP / 1024 / 1024) if f > 0 else 200
    elif moe_token_dispatcher_type == "alltoall_seq" and moe_tp_extend_ep:  # :192-209
        g["tp_exp"] = 2 * math.ceil(f * S / CP / TP * B * H * k / 1024 / 1024) if f > 0 else 200
    g["tp_cp"] = 10  # :212
    if context_parallel_algo in ("ulysses_cp_algo", None):  # :218-228
        g["cp"] = 2 * math.ceil(S / CP * B * H / TP / 1024 / 1024)
    elif context_parallel_algo == "megatron_cp_algo":  # :229-297
        heads = num_attention_heads or 1
        if group_query_attention:
            base = math.ceil(S / CP * B * H / heads * (num_query_groups or 1) / TP / 1024 / 1024)
        else:
            base = math.ceil(S / CP * B * H / heads / TP / 1024 / 1024)
        cp2, cp_full = 2 * base, 2 * 2 * base
        if cp_window_size > 1:
            if use_cp_send_recv_overlap:
                g.update(cp2=cp2, cp=cp2, cp_ring_intra=cp2, cp_ring_intra_overlap=cp2)
            else:
                g.update(cp=cp_full, cp_ring_intra=cp_full)
        elif use_cp_send_recv_overlap:
            g.update(cp2=cp2, cp=cp2)
        else:
            g["cp"] = cp_full
    elif context_parallel_algo == "hybrid_cp_algo":  # :298-359
        heads = num_attention_heads or 1
        uly = ulysses_degree_in_cp or 1
        ring = CP / uly
        cp_uly = 2 * math.ceil(S / uly * B * H / TP / 1024 / 1024)
        if group_query_attention:
            cp_ring = 2 * math.ceil(S / ring * B * H / heads * (num_query_groups or 1) / TP / 1024 / 1024)
        else:
            cp_ring = 2 * math.ceil(S / ring * B * H / heads / TP / 1024 / 1024)
        if cp_window_size > 1:
            if use_cp_send_recv_overlap:
                g.update(cp_ulysses=cp_uly, cp_ring=cp_ring, cp2=cp_ring, cp_ring_intra=cp_ring,
                         cp_ring_intra_overlap=cp_ring, cp=10)
            else:
                g.update(cp_ulysses=cp_uly, cp_ring=cp_ring * 2, cp_ring_intra=cp_ring * 2, cp=10)
        elif use_cp_send_recv_overlap:
            g.update(cp_ulysses=cp_uly, cp_ring=cp_ring, cp2=cp_ring, cp=10)
        else:
            g.update(cp_ulysses=cp_uly, cp_ring=cp_ring * 2, cp=10)
    return g


def parse_group_buffer(text: str) -> dict[str, int]:
    """``_parse_key_value_string`` (``hccl_adaptive_func.py:8-67``): ``"tp:56;exp:448"`` (``,`` also
    separates when present). Raises :class:`InvalidArgumentError` where MindSpeed raises RuntimeError."""
    out: dict[str, int] = {}
    if not text:
        return out
    parts = text.split(";") if "," not in text else text.split(",")
    for part in parts:
        kv = part.split(":")
        if len(kv) != 2:
            raise InvalidArgumentError([EngineProblem("--hccl-group-buffer", text,
                                                      "expected 'key:value' pairs separated by ';' (MindSpeed raises "
                                                      "RuntimeError)")])
        key, value_text = kv[0].strip().replace(" ", ""), kv[1].strip().replace(" ", "")
        if key not in MS_KEYS:
            raise InvalidArgumentError([EngineProblem("--hccl-group-buffer", text,
                                                      f"key {key!r} is not allowed; keys: {', '.join(MS_KEYS)}")])
        try:
            value = int(value_text)
        except ValueError:
            raise InvalidArgumentError([EngineProblem("--hccl-group-buffer", text,
                                                      f"{value_text!r} is not a valid positive integer for key "
                                                      f"{key!r}")]) from None
        if value <= 0:
            raise InvalidArgumentError([EngineProblem("--hccl-group-buffer", text,
                                                      f"value {value} for key {key!r} must be greater than 0")])
        out[key] = value
    return out


def _ms_group_sizes(s: dict, ep: int) -> dict[str, int]:
    """Ranks in each Megatron group a device belongs to (epbuf counts the groups of size > 1)."""
    tp, pp, cp, dp = (s[k].value for k in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                                           "--context-parallel-size", "--data-parallel-size"))
    sizes = {"tp": tp, "pp": pp, "cp": cp, "exp": ep, "tp_exp": tp * ep, "mp": tp * pp, "mp_exp": tp * ep * pp,
             "tp_cp": tp * cp, "dp": dp, "dp_cp": dp * cp}
    return sizes


def mindspeed_recipe(ctx: EngineContext) -> EngineReport:
    """Per-group HCCL buffers of MindSpeed and the HCCL memory they take per NPU: each group a
    device belongs to (of more than one rank) is a communicator of ``2 x hccl_buffer_size`` MB;
    groups without a value use ``HCCL_BUFFSIZE``."""
    s = ctx.settings
    ep = s["--expert-model-parallel-size"].value
    if ctx.num_ranks is not None and s["--expert-model-parallel-size"].source == "default":
        ep = ctx.num_ranks
    adaptive, factor = s["--hccl-group-buffer-adaptive"].value, s["--hccl-ep-group-buffer-adaptive-factor"].value
    manual_text = s["--hccl-group-buffer"].value
    manual = parse_group_buffer(manual_text) if manual_text else {}
    findings: list[Finding] = []

    def values_for(f: float) -> dict[str, int]:
        return mindspeed_adaptive(
            seq_length=s["--seq-length"].value, micro_batch_size=s["--micro-batch-size"].value, hidden_size=ctx.hidden,
            context_parallel_size=s["--context-parallel-size"].value,
            tensor_model_parallel_size=s["--tensor-model-parallel-size"].value, expert_model_parallel_size=ep,
            moe_router_topk=ctx.num_topk, moe_token_dispatcher_type=s["--moe-token-dispatcher-type"].value, factor=f,
            sequence_parallel=s["--sequence-parallel"].value, moe_tp_extend_ep=s["--moe-tp-extend-ep"].value,
            context_parallel_algo=s["--context-parallel-algo"].value,
            num_attention_heads=s["--num-attention-heads"].value,
            group_query_attention=s["--group-query-attention"].value, num_query_groups=s["--num-query-groups"].value,
            cp_window_size=s["--cp-window-size"].value, use_cp_send_recv_overlap=s["--use-cp-send-recv-overlap"].value,
            ulysses_degree_in_cp=s["--ulysses-degree-in-cp"].value)

    applied = adaptive or (ctx.version == "legacy" and bool(manual))
    if ctx.version == "main" and manual and not adaptive:
        findings.append(Finding(severity="warning", code="mindspeed.manual-not-applied",
                                message="--hccl-group-buffer alone fills the table but the feature-manager "
                                        f"get_nccl_options wrapper applies it only with --hccl-group-buffer-adaptive "
                                        f"({MS_ADAPTOR}); use --engine-version legacy for the legacy path",
                                data={}))
    default = s["HCCL_BUFFSIZE"].value
    sizes = _ms_group_sizes(s, ep)

    def table(f: float) -> dict[str, int]:
        vals = values_for(f) if adaptive else {}
        vals.update(manual)
        return vals if applied else {}

    def total(f: float) -> int:
        vals = table(f)
        return sum(2 * MiB * vals.get(key, default) for key, size in sizes.items() if size > 1)

    vals = table(factor)
    buffers = []
    for key, size in sizes.items():
        if size <= 1:
            continue
        mb = vals.get(key, default)
        origin = ("--hccl-group-buffer" if key in manual else "adaptive") if key in vals else "HCCL_BUFFSIZE"
        buffers.append(hccl_window(f"HCCL window: {key} group ({size} ranks)", mb, None,
                                   f"hccl_buffer_size = {mb} MB ({origin})", f"{MS} {MS_FUNC}" if origin != "HCCL_BUFFSIZE"
                                   else "CANN HCCL_BUFFSIZE"))
    quantities = [Quantity(name=f"group_buffer_mb.{key}", value=v, unit="MiB", source=f"{MS} {MS_FUNC}")
                  for key, v in sorted(values_for(factor).items())]
    if adaptive and factor <= 0:
        findings.append(Finding(severity="info", code="mindspeed.factor-off",
                                message="--hccl-ep-group-buffer-adaptive-factor <= 0 (default -1): the MoE/EP groups "
                                        "get the constant 200 MB", data={}))
    if adaptive and factor > 0:
        findings.append(Finding(severity="info", code="mindspeed.exp-factor-unused",
                                message="the exp (EP) group formula only checks factor > 0; it does not multiply by it "
                                        f"({MS_FUNC}:159-172)", data={}))
    findings.append(Finding(severity="info", code="mindspeed.group-names",
                            message="the adaptive keys are exp / tp_exp; Megatron versions that name the EP groups "
                                    "ep / ep_tp never match them (get_nccl_options(pg_name))", data={}))
    findings.append(Finding(severity="info", code="mindspeed.groups-counted",
                            message="counted: the tp, pp, cp, exp, tp_exp, mp, mp_exp, tp_cp, dp and dp_cp groups of "
                                    "more than one rank; not counted: world, embd, pp_new_stream, dp_modulo_exp and "
                                    "CP sub-groups", data={"groups": [b.name for b in buffers]}))
    all_total = sum(b.num_bytes for b in buffers)
    findings += _budget_findings("mindspeed", ctx, all_total)
    recs = []
    factor_matters = adaptive and (s["--moe-token-dispatcher-type"].value in ("allgather", "alltoall_seq"))
    if ctx.budget is not None and factor_matters:
        best = largest_true(1, 100000, lambda hundredths: total(hundredths / 100) <= ctx.budget)
        recs.append(Recommendation(setting="--hccl-ep-group-buffer-adaptive-factor",
                                   value=best / 100 if best is not None else None, goal="budget",
                                   num_bytes=total(best / 100) if best is not None else None,
                                   message=f"the largest factor (in steps of 0.01, up to 1000) whose group buffers fit "
                                           f"--budget {format_bytes(ctx.budget)}"))
    if ctx.budget is not None:
        others = sum(b.num_bytes for b in buffers if "HCCL_BUFFSIZE" not in b.regions[0].formula)
        users = sum(1 for b in buffers if "HCCL_BUFFSIZE" in b.regions[0].formula)
        if users:
            best = largest_true(1, (1 << 16) - 1, lambda v: others + users * 2 * v * MiB <= ctx.budget)
            recs.append(Recommendation(setting="HCCL_BUFFSIZE", value=best, goal="budget",
                                       num_bytes=others + users * 2 * best * MiB if best else None,
                                       message=f"the largest HCCL_BUFFSIZE for the {users} group(s) without their own "
                                               f"value, within --budget {format_bytes(ctx.budget)}"))
    settings = [*ctx.base_settings, *(st for st in s.values() if st.value is not None),
                Setting(name="values applied", value=applied, source="derived",
                        note=MS_VERSIONS[ctx.version].split(":")[0])]
    rep = Report(backend="mindspeed/hccl", title=f"MindSpeed per-group HCCL buffers ({ctx.version})", upstream=MS,
                 inputs={"hidden": ctx.hidden, "num_topk": ctx.num_topk, "ep": ep, "adaptive": adaptive,
                         "factor": factor, "HCCL_BUFFSIZE": default},
                 buffers=tuple(buffers), quantities=tuple(quantities), findings=tuple(findings))
    return EngineReport(engine="mindspeed", version=ctx.version, version_note=MS_VERSIONS[ctx.version], title=rep.title,
                        settings=tuple(settings), report=rep, recommendations=tuple(recs),
                        device_name=ctx.device_name, device_num_bytes=ctx.device_num_bytes, budget=ctx.budget)


# --- vllm-ascend ---------------------------------------------------------------------------
VA = "vllm-project/vllm-ascend @182b75ea"
VA_UTILS = "vllm_ascend/utils.py"
VA_CTX = "vllm_ascend/ascend_forward_context.py:176-200 set_mc2_tokens_capacity"
VA_DISPATCHER = "vllm_ascend/ops/fused_moe/token_dispatcher.py:113-150 TokenDispatcherWithMC2"
DEFAULT_BUFFER_SIZE, MIN_DP_BUFFER_SIZE, DYNAMIC_EPLB_BUFFER_SIZE = 200, 50, 100  # VA_UTILS:70-72
MC2_TOKENS_PER_RANK_LIMIT = 512  # ascend_forward_context.py:35
MEGA_MOE_TOKENS_PER_RANK_LIMIT = 4096  # :33

VA_VERSIONS = {"main": f"{VA} (2026-08-22)"}

VA_KNOBS = (
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
    _hccl_knob("HCCL_BUFFSIZE", f"CANN; {VA} {VA_UTILS}:968-987 (mc2 group)", "MiB of the MC2 group's window (x2)"),
)


def vllm_ascend_recipe(ctx: EngineContext) -> EngineReport:
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
    findings += _budget_findings("vllm-ascend", ctx, total)
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
    return EngineReport(engine="vllm-ascend", version=ctx.version, version_note=VA_VERSIONS[ctx.version],
                        title=rep.title, settings=tuple(settings), report=rep, recommendations=tuple(recs),
                        device_name=ctx.device_name, device_num_bytes=ctx.device_num_bytes, budget=ctx.budget)


def _specs():
    from ._api import EngineSpec

    skn = EngineSpec(name="sgl-kernel-npu", title="sgl-kernel-npu deep_ep", knobs=SKN_KNOBS, versions=SKN_VERSIONS,
                     default_version="main", recipe=sgl_kernel_npu_recipe, aliases={"num_ranks_per_node": ("--npus-per-node",)},
                     gpu=False, load_help="tokens one rank sends in one dispatch (normal mode: its largest batch)",
                     ranks_help="EP size = --ep-size (the NPU DeepEP group), else --tp-size")
    ms = EngineSpec(name="mindspeed", title="MindSpeed", knobs=MS_KNOBS, versions=MS_VERSIONS, default_version="main",
                    recipe=mindspeed_recipe,
                    aliases={"hidden": ("--hidden-size",), "num_topk": ("--moe-router-topk",),
                             "num_experts": ("--num-experts",), "num_ranks_per_node": ("--npus-per-node",)},
                    gpu=False, load_help="not used", ranks_help="EP = --expert-model-parallel-size")
    va = EngineSpec(name="vllm-ascend", title="vllm-ascend", knobs=VA_KNOBS, versions=VA_VERSIONS,
                    default_version="main", recipe=vllm_ascend_recipe,
                    aliases={"num_ranks": ("--ep-size",), "num_ranks_per_node": ("--npus-per-node",)}, gpu=False,
                    load_help="tokens one rank sends in one MoE step", ranks_help="EP size = TP x DP")
    return skn, ms, va


SGL_KERNEL_NPU, MINDSPEED, VLLM_ASCEND = _specs()
