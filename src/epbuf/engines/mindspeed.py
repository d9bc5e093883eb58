"""MindSpeed's per-group HCCL buffers and the HCCL memory they take per NPU.

Upstream ``Ascend/MindSpeed @028de58c`` (2026-07-21): ``mindspeed/core/hccl_buffer/
hccl_adaptive_func.py:78-359`` ``hccl_buffer_auto_adaptive`` (per-group MB from sequence,
micro-batch, hidden and parallel sizes), ``_parse_key_value_string`` (:8-67, ``--hccl-group-buffer``),
``adaptor.py:16-27`` (the per-group value is applied only with ``--hccl-group-buffer-adaptive``);
the legacy copy in ``mindspeed/core/parallel_state.py:75-303`` applies either, splits
``--hccl-group-buffer`` on ``;`` only (:86) and gives ``tp_exp`` the ``exp`` value (:183, :189).
Each group is a communicator whose window is ``2 x hccl_buffer_size`` (:mod:`epbuf.engines._hccl`).

The table is keyed by group *name* (``get_nccl_options(pg_name)``), and the names come from
Megatron-LM. MindSpeed @028de58c pins Megatron ``core_v0.12.1`` (``README.md:95-100``), whose expert
groups are ``ep``, ``ep_tp``, ``tp_ep_mp``, ``tp_ep_pp`` and ``ep_dp``
(``megatron/core/parallel_state.py:1132-1196 @core_v0.12.1``): the adaptive keys ``exp``, ``tp_exp``
and ``mp_exp`` match nothing there, so those groups take ``HCCL_BUFFSIZE``. Megatron
``core_r0.8.0``/``core_r0.9.0`` name them ``exp``, ``tp_exp``, ``mp_exp`` (``--megatron-version
core_r0.8.0``). ``core_v0.12.1`` also requires expert TP x EP x PP to divide the world size
(``parallel_state.py:694-702``).
"""

from __future__ import annotations

import math

from ..errors import InvalidArgumentError
from ..report import Finding, Quantity, Report
from ..units import MiB, format_bytes
from .._search import largest_true
from ._common import EngineContext, limit, limit_findings
from ._hccl import hccl_knob, hccl_window, npu_budget_findings
from ._knobs import EngineProblem, Knob, Setting
from ._report import EngineReport, Recommendation

MS = "Ascend/MindSpeed @028de58c"
MS_FUNC = "mindspeed/core/hccl_buffer/hccl_adaptive_func.py"
MS_ADAPTOR = "mindspeed/core/hccl_buffer/adaptor.py:16-27"
MS_LEGACY = "mindspeed/core/parallel_state.py:75-303"
#: ``_parse_key_value_string`` allowed keys (MS_FUNC:12-42).
MS_KEYS = ("dp", "dp_cp", "cp", "mp", "mp_exp", "tp", "pp", "embd", "tp_dp_cp", "tp_dp", "tp_cp", "tp_exp",
           "tp_ep_mp", "exp", "ep", "dp_modulo_exp", "pp_new_stream", "cp2", "cp_ulysses", "cp_ring", "cp_ring_intra",
           "cp_ring_intra_overlap", "nd1_dim1", "ag_x_sd_rcv_overlap", "nd1_dim2", "ag_y_sd_rcv_overlap", "nd2_dim1",
           "nd2_dim2", "default_group")
#: ``parse_hccl_buffer_string`` allowed keys of the legacy path (MS_LEGACY:80-83).
MS_LEGACY_KEYS = ("dp", "dp_cp", "cp", "mp", "mp_exp", "tp", "pp", "embd", "tp_dp_cp", "tp_dp", "tp_cp", "tp_exp",
                  "exp", "dp_modulo_exp", "pp_new_stream", "cp2", "cp_ulysses", "cp_ring", "cp_ring_intra",
                  "cp_ring_intra_overlap", "nd1_dim1", "ag_x_sd_rcv_overlap", "nd1_dim2", "ag_y_sd_rcv_overlap",
                  "nd2_dim1", "nd2_dim2")
MEGATRON_V012 = "NVIDIA/Megatron-LM @core_v0.12.1 megatron/core/parallel_state.py"
#: Megatron-LM versions by how they name the expert groups (``get_nccl_options`` keys).
MEGATRON_VERSIONS = ("core_v0.12.1", "core_r0.8.0")
#: ``hccl_buffer_size`` reaches ``HcclCommConfig.hcclBufferSize``, a ``uint32_t`` of MB.
MAX_GROUP_MB = (1 << 32) - 1

VERSIONS = {
    "main": f"{MS} feature manager ({MS_FUNC}, {MS_ADAPTOR}): per-group values apply only with "
            "--hccl-group-buffer-adaptive",
    "legacy": f"{MS} {MS_LEGACY}: --hccl-group-buffer or --hccl-group-buffer-adaptive applies the values; "
              "manual values override adaptive ones",
}

KNOBS = (
    Knob(name="--hccl-group-buffer-adaptive", kind="flag", default=False, source=f"{MS} {MS_FUNC}",
         help="compute per-group HCCL buffers"),
    Knob(name="--hccl-ep-group-buffer-adaptive-factor", kind="float", default=-1.0,
         source=f"{MS} {MS_FUNC}", help="> 0 enables the MoE/EP formulas (load-imbalance factor)"),
    Knob(name="--hccl-group-buffer", kind="text", source=f"{MS} {MS_FUNC}:8-67",
         help="manual 'group:MB;group:MB' values"),
    Knob(name="--seq-length", kind="int", lo=1, default=4096, default_note="epbuf's default (pass yours)",
         help="sequence length S"),
    Knob(name="--micro-batch-size", kind="int", lo=1, default=1, help="micro batch B"),
    Knob(name="--tensor-model-parallel-size", kind="int", lo=1, default=1, help="TP"),
    Knob(name="--pipeline-model-parallel-size", kind="int", lo=1, default=1, help="PP"),
    Knob(name="--context-parallel-size", kind="int", lo=1, default=1, help="CP"),
    Knob(name="--expert-model-parallel-size", kind="int", lo=1, default=1, help="EP"),
    Knob(name="--expert-tensor-parallel-size", kind="int", lo=1,
         source=f"{MEGATRON_V012}:694-695 (None -> tensor_model_parallel_size)",
         help="expert TP (core_v0.12.1; default: TP)"),
    Knob(name="--megatron-version", kind="choice", default="core_v0.12.1", choices=MEGATRON_VERSIONS,
         default_note="MindSpeed @028de58c pins Megatron-LM core_v0.12.1 (README.md:95-100)",
         help="epbuf's flag: the Megatron-LM under MindSpeed; core_v0.12.1 names the expert groups ep / ep_tp / "
              "tp_ep_mp / tp_ep_pp / ep_dp, core_r0.8.0 exp / tp_exp / mp_exp"),
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
    hccl_knob("HCCL_BUFFSIZE", "CANN", "MiB of every group without its own value (x2 allocated)"),
)


def mindspeed_adaptive(*, seq_length: int, micro_batch_size: int, hidden_size: int, context_parallel_size: int,
                       tensor_model_parallel_size: int, expert_model_parallel_size: int, moe_router_topk: int,
                       moe_token_dispatcher_type: str, factor: float, sequence_parallel: bool, moe_tp_extend_ep: bool,
                       context_parallel_algo: str | None, num_attention_heads: int | None = None,
                       group_query_attention: bool = False, num_query_groups: int | None = None,
                       cp_window_size: int = 1, use_cp_send_recv_overlap: bool = False,
                       ulysses_degree_in_cp: int | None = None, legacy: bool = False) -> dict[str, int]:
    """``hccl_buffer_auto_adaptive`` (``hccl_adaptive_func.py:78-359``): group key -> MB. With
    ``legacy`` the copy in ``mindspeed/core/parallel_state.py:108-250``, which stores the ``exp``
    value as ``tp_exp`` where the feature-manager copy stores the ``tp_exp`` formula (:183, :189).

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
        g["tp_exp"] = g["exp"] if legacy else 2 * math.ceil(f * S / CP * B * H * EP / 1024 / 1024) if f > 0 else 200
    elif moe_token_dispatcher_type == "alltoall_seq" and moe_tp_extend_ep:  # :192-209
        g["tp_exp"] = g["exp"] if legacy else 2 * math.ceil(f * S / CP / TP * B * H * k / 1024 / 1024) if f > 0 else 200
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


def parse_group_buffer(text: str, legacy: bool = False) -> dict[str, int]:
    """``_parse_key_value_string`` (``hccl_adaptive_func.py:8-67``): ``"tp:56;exp:448"`` (``,`` also
    separates when present). ``legacy``: ``parse_hccl_buffer_string`` (``parallel_state.py:75-105``),
    which splits on ``;`` only and allows fewer keys. Raises :class:`InvalidArgumentError` where
    MindSpeed raises RuntimeError."""
    out: dict[str, int] = {}
    if not text:
        return out
    keys = MS_LEGACY_KEYS if legacy else MS_KEYS
    parts = text.split(";") if legacy or "," not in text else text.split(",")
    for part in parts:
        kv = part.split(":")
        if len(kv) != 2:
            raise InvalidArgumentError([EngineProblem("--hccl-group-buffer", text,
                                                      "expected 'key:value' pairs separated by ';' (MindSpeed raises "
                                                      "RuntimeError" + ("; the legacy path splits on ';' only, "
                                                                        "parallel_state.py:86)" if legacy else ")"))])
        key, value_text = kv[0].strip().replace(" ", ""), kv[1].strip().replace(" ", "")
        if key not in keys:
            raise InvalidArgumentError([EngineProblem("--hccl-group-buffer", text,
                                                      f"key {key!r} is not allowed; keys: {', '.join(keys)}")])
        body = value_text[1:] if value_text[:1] in "+-" else value_text
        try:
            if not (body.isascii() and body.isdigit()) or len(body) > 20:
                raise ValueError(value_text)
            value = int(value_text)
        except ValueError:
            raise InvalidArgumentError([EngineProblem("--hccl-group-buffer", text,
                                                      f"{key}: {value_text!r} is not a valid positive integer")]) from None
        if value <= 0:
            raise InvalidArgumentError([EngineProblem("--hccl-group-buffer", text,
                                                      f"value {value} for key {key!r} must be greater than 0")])
        if value > MAX_GROUP_MB:
            raise InvalidArgumentError([EngineProblem("--hccl-group-buffer", text,
                                                      f"{key}: {value} is beyond the uint32 MB of hcclBufferSize "
                                                      f"(at most {MAX_GROUP_MB})")])
        out[key] = value
    return out


def _ms_group_sizes(s: dict, ep: int) -> tuple[dict[str, int], int, int]:
    """Ranks in each Megatron group a device belongs to, by the group names of ``--megatron-version``
    (epbuf counts the groups of size > 1), the world size and expert TP x EP x PP.

    ``core_v0.12.1`` (``parallel_state.py:694-702, 1129-1196``): ``ep`` = EP, ``ep_tp`` = expert TP,
    ``tp_ep_mp`` = expert TP x EP, ``tp_ep_pp`` = expert TP x EP x PP, ``ep_dp`` = world / (expert
    TP x EP x PP). ``core_r0.8.0``: ``exp`` = EP, ``tp_exp`` = TP x EP, ``mp_exp`` = TP x EP x PP."""
    tp, pp, cp, dp = (s[k].value for k in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                                           "--context-parallel-size", "--data-parallel-size"))
    etp = s["--expert-tensor-parallel-size"].value or tp
    world = tp * pp * cp * dp
    sizes = {"tp": tp, "pp": pp, "cp": cp, "mp": tp * pp, "tp_cp": tp * cp, "dp": dp, "dp_cp": dp * cp}
    if s["--megatron-version"].value == "core_r0.8.0":
        sizes.update(exp=ep, tp_exp=tp * ep, mp_exp=tp * ep * pp)
        return sizes, world, tp * ep * pp
    etp_ep_pp = etp * ep * pp
    sizes.update(ep=ep, ep_tp=etp, tp_ep_mp=etp * ep, tp_ep_pp=etp_ep_pp)
    if world % etp_ep_pp == 0:
        sizes["ep_dp"] = world // etp_ep_pp
    return sizes, world, etp_ep_pp


def recipe(ctx: EngineContext) -> EngineReport:
    """Per-group HCCL buffers of MindSpeed and the HCCL memory they take per NPU: each group a
    device belongs to (of more than one rank) is a communicator of ``2 x hccl_buffer_size`` MB;
    groups without a value — by name, see :func:`_ms_group_sizes` — use ``HCCL_BUFFSIZE``.

    An expert TP x EP x PP that does not divide the world size (Megatron ``core_v0.12.1``
    ``parallel_state.py:699-702`` raises RuntimeError) is a broken limit with an ``error`` finding;
    the groups that exist are still sized.

    Raises:
        InvalidArgumentError: a malformed ``--hccl-group-buffer``; a factor whose group values pass
            the ``uint32`` MB of ``HcclCommConfig.hcclBufferSize``.
    """
    s = ctx.settings
    ep = s["--expert-model-parallel-size"].value
    if ctx.num_ranks is not None and s["--expert-model-parallel-size"].source == "default":
        ep = ctx.num_ranks
    adaptive, factor = s["--hccl-group-buffer-adaptive"].value, s["--hccl-ep-group-buffer-adaptive-factor"].value
    manual_text = s["--hccl-group-buffer"].value
    legacy = ctx.version == "legacy"
    manual = parse_group_buffer(manual_text, legacy) if manual_text else {}
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
            ulysses_degree_in_cp=s["--ulysses-degree-in-cp"].value, legacy=legacy)

    applied = adaptive or (ctx.version == "legacy" and bool(manual))
    if ctx.version == "main" and manual and not adaptive:
        findings.append(Finding(severity="warning", code="mindspeed.manual-not-applied",
                                message="--hccl-group-buffer alone fills the table but the feature-manager "
                                        f"get_nccl_options wrapper applies it only with --hccl-group-buffer-adaptive "
                                        f"({MS_ADAPTOR}); use --engine-version legacy for the legacy path",
                                data={}))
    default = s["HCCL_BUFFSIZE"].value
    sizes, world, etp_ep_pp = _ms_group_sizes(s, ep)
    megatron = s["--megatron-version"].value
    limits = [limit("world size % (expert TP x EP x PP)", world % etp_ep_pp, "==", 0,
                    f"{MEGATRON_V012}:696-702 (decoder world_size not divisible by expert_tensor_model_pipeline_parallel "
                    "size: RuntimeError)")]
    try:
        computed = values_for(factor)
    except OverflowError:  # f x S beyond float range: MindSpeed's math.ceil(inf) raises too
        raise InvalidArgumentError([EngineProblem("--hccl-ep-group-buffer-adaptive-factor", factor,
                                                  "group sizes beyond float range (OverflowError)")]) from None
    too_big = {k: v for k, v in computed.items() if v > MAX_GROUP_MB}
    if adaptive and too_big:
        scaled = {k for k in too_big if k == "tp_exp" or (k == "tp" and s["--moe-token-dispatcher-type"].value
                                                          == "alltoall_seq")}
        label, value = (("--hccl-ep-group-buffer-adaptive-factor", factor) if factor > 0 and scaled == set(too_big)
                        else ("--seq-length", s["--seq-length"].value))
        raise InvalidArgumentError([EngineProblem(label, value, f"{' / '.join(too_big)} above the uint32 MB "
                                                                f"of hcclBufferSize (at most {MAX_GROUP_MB})")])

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
                  for key, v in sorted(computed.items())]
    if adaptive:
        findings.append(Finding(severity="info", code="mindspeed.factor-off" if factor <= 0 else "mindspeed.exp-factor-unused",
                                message="--hccl-ep-group-buffer-adaptive-factor <= 0 (default -1): the MoE/EP groups get "
                                        "the constant 200 MB" if factor <= 0 else "the exp (EP) group formula only checks "
                                        f"factor > 0; it does not multiply by it ({MS_FUNC}:159-172)", data={}))
    findings += limit_findings("mindspeed", limits, {
        "world size % (expert TP x EP x PP)": f"Megatron's initialize_model_parallel raises RuntimeError (world "
                                              f"{world}, expert TP x EP x PP {etp_ep_pp}); the ep_dp group is not "
                                              "counted"})
    unmatched = sorted(k for k in vals if k in ("exp", "tp_exp", "mp_exp") and k not in sizes)
    if megatron == "core_v0.12.1" and unmatched:
        findings.append(Finding(
            severity="warning", code="mindspeed.group-names",
            message=f"{' / '.join(unmatched)} {'is' if len(unmatched) == 1 else 'are'} in the table, but Megatron "
                    f"core_v0.12.1 names its expert groups ep / ep_tp / tp_ep_mp / tp_ep_pp / ep_dp "
                    f"({MEGATRON_V012}:1132-1196): get_nccl_options(pg_name) never finds them, so those groups take "
                    f"HCCL_BUFFSIZE = {default}; pass --megatron-version core_r0.8.0 for a Megatron that names them "
                    "exp / tp_exp / mp_exp", data={"unmatched": unmatched}))
    expert = "ep, ep_tp, tp_ep_mp, tp_ep_pp, ep_dp" if megatron == "core_v0.12.1" else "exp, tp_exp, mp_exp"
    findings.append(Finding(severity="info", code="mindspeed.groups-counted",
                            message=f"counted: the tp, pp, cp, mp, tp_cp, dp, dp_cp and expert ({expert}) groups of "
                                    "more than one rank; not counted: world, embd, tp_dp, tp_dp_cp, pp_new_stream, "
                                    "dp_modulo_exp and CP sub-groups", data={"groups": [b.name for b in buffers]}))
    all_total = sum(b.num_bytes for b in buffers)
    findings += npu_budget_findings("mindspeed", ctx, all_total)
    recs = []
    dispatcher = s["--moe-token-dispatcher-type"].value
    # the factor scales tp (alltoall_seq) and tp_exp (allgather; alltoall_seq + --moe-tp-extend-ep), which only
    # a Megatron naming its groups tp_exp applies
    factor_matters = adaptive and (dispatcher == "alltoall_seq" or ("tp_exp" in sizes and dispatcher == "allgather"))
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
                        note=VERSIONS[ctx.version].split(":")[0])]
    rep = Report(backend="mindspeed/hccl", title=f"MindSpeed per-group HCCL buffers ({ctx.version})", upstream=MS,
                 inputs={"hidden": ctx.hidden, "num_topk": ctx.num_topk, "ep": ep, "adaptive": adaptive,
                         "factor": factor, "HCCL_BUFFSIZE": default},
                 buffers=tuple(buffers), quantities=tuple(quantities), findings=tuple(findings),
                 limits=tuple(limits))
    return EngineReport(engine="mindspeed", version=ctx.version, version_note=VERSIONS[ctx.version], title=rep.title,
                        settings=tuple(settings), report=rep, recommendations=tuple(recs),
                        device_name=ctx.device_name, device_num_bytes=ctx.device_num_bytes, budget=ctx.budget)



def _engine():
    from ._api import EngineSpec

    return EngineSpec(
        name="mindspeed", title="MindSpeed", knobs=KNOBS, versions=VERSIONS, default_version="main", recipe=recipe,
        aliases={"hidden": ("--hidden-size",), "num_topk": ("--moe-router-topk",), "num_experts": ("--num-experts",),
                 "num_ranks_per_node": ("--npus-per-node",)},
        gpu=False, load_help="not used", ranks_help="EP = --expert-model-parallel-size")


ENGINE = _engine()
