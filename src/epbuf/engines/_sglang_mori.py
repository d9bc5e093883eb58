"""SGLang's ``--moe-a2a-backend mori`` (AMD ROCm): the ``EpDispatchCombineOp`` of its MoRI dispatcher,
sized by :mod:`epbuf.backends.mori_ep` (:mod:`._mori`).

Upstream ``sgl-project/sglang`` (the public code index), ``python/sglang/srt/layers/moe/token_dispatcher/
moriep.py @0202c26`` (``TD``):

* ``init_mori_op`` (``lru_cache``): one op for the process — the normal and the low-latency
  dispatcher call it with the same arguments (the configured ``deepep_mode``, not the resolved one).
  ``gpu_per_node = 8 if world_size >= 8 else world_size``; mode ``INTRA_NODE`` for ``world_size <= 8``
  else ``INTER_NODE``, and ``LOW_LATENCY`` when ``deepep_mode.enable_low_latency()`` (``auto`` or
  ``low_latency``) or ``MORI_ENABLE_SDMA``. Kernels (``get_ep_dispatch_configs``): ``IntraNode``;
  internode ``InterNodeV1LL`` when ``num_max_dispatch_tokens_per_rank <=
  SGLANG_MORI_DISPATCH_INTER_KERNEL_SWITCH_THRESHOLD`` (256) else ``InterNodeV1``; ``AsyncLL`` for
  ``LOW_LATENCY``.
* Dispatch dtype: ``bf16`` (``scale_dim = 0``), ``fp8`` (``hidden // 128`` float32 scales), ``mxfp8`` and
  ``fp4`` (``hidden // 32`` one-byte e8m0 scales); ``max_token_type_size = params_dtype.itemsize`` (BF16);
  combine ``quant_type`` ``none`` / ``fp8_blockwise`` / ``fp8_direct_cast`` / ``fp4_blockwise``;
  ``max_total_recv_tokens = SGLANG_MORI_PREALLOC_MAX_RECV_TOKENS`` (0); ``num_qp_per_pe = 2``.
* ``set_quant_config``: FP8 weights give FP8 dispatch and a BF16 combine, FP4 weights FP4 dispatch and an
  FP8 blockwise combine, others BF16; ``SGLANG_MORI_DISPATCH_DTYPE`` / ``SGLANG_MORI_COMBINE_DTYPE``
  (``auto`` keeps it; lower-cased; other values are ignored) override it, else the deprecated
  ``SGLANG_MORI_FP8_DISP`` / ``SGLANG_MORI_FP4_DISP`` / ``SGLANG_MORI_FP8_COMB``.
* ``_MoriEPDispatcherImplBase.__init__``: ``SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK`` (4096).
* ``python/sglang/srt/server_args.py``: ``--moe-a2a-backend mori`` sets ``ep_size = tp_size``; at
  ``@001067f`` ``--deepep-mode`` "Select the mode when enable DeepEP or MoriEP MoE" (default ``auto``).

SGLang 0.5.23 (the PyPI wheel, run on CPU by ``tests/conformance/sglang``; ``S`` = ``sglang/srt/``):

* ``S/arg_groups/moe_hook.py:543-551`` ``handle_a2a_moe``: with ``mori`` a ``--deepep-mode auto`` resolves
  to ``normal`` ("auto set deepep_mode=`normal` for MORI EP"; the same in ``server_args.py`` of earlier
  releases), so the kernel is ``IntraNode`` for EP <= 8, ``InterNodeV1`` above, ``InterNodeV1LL`` at
  <= 256 tokens; ``AsyncLL`` only for ``low_latency`` or ``MORI_ENABLE_SDMA``.
* ``moe_hook.py:563-573``: ``assert chunked_prefill_size <= SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK``
  when chunked prefill is on and ``--disaggregation-mode`` is not ``decode``; the default
  ``chunked_prefill_size`` follows the GPU's memory (``S/arg_groups/memory_hook.py:89-170``: 16384 from
  160 GiB, so an MI300X refuses MORI unless ``--chunked-prefill-size`` <= 4096).
* ``S/batch_overlap/two_batch_overlap.py:1158-1175`` ``MaybeTboDeepEPDispatcher``: with
  ``--enable-two-batch-overlap`` two ``MoriEPDispatcher`` (``instance_id`` 0 and 1), and ``init_mori_op``
  (``lru_cache`` keyed on ``instance_id``) builds one op each: two handles per GPU.
* ``S/layers/moe/token_dispatcher/moriep.py:896-907`` ``set_quant_config``: the dispatch dtype follows
  the MoE weights (``S/layers/quantization/fp8.py:2762``, ``unquant.py:896``: ``layer.w13_weight.dtype``),
  FP8 for an FP8 checkpoint or ``--quantization fp8``; quant methods that never call it (``w8a8_int8``)
  keep BF16 and the dtype variables are not read (``mori_op`` applies them only when
  ``quant_config is None``, l.976-978).
* ``moriep.py:480``: ``num_qp_per_pe=2``; the handle's signal buffers are sized with it.
"""

from __future__ import annotations

from ..report import Finding
from ..units import format_int
from ._knobs import Knob
from ._libraries import MORI_ENV_KNOBS, with_findings
from ._mori import MoriArgs, mori_plan, mori_report

__all__ = ["KNOBS", "PPLX_NOT_SIZED", "mori"]

REPO = "sgl-project/sglang"
TD = "python/sglang/srt/layers/moe/token_dispatcher/moriep.py @0202c26"
SERVER_ARGS = "python/sglang/srt/server_args.py"
MOE_HOOK = "sglang/srt/arg_groups/moe_hook.py (0.5.23)"
MEMORY_HOOK = "sglang/srt/arg_groups/memory_hook.py:89-170 (0.5.23)"
TBO = "sglang/srt/batch_overlap/two_batch_overlap.py:1158-1175 (0.5.23) MaybeTboDeepEPDispatcher"
#: ``_handle_gpu_memory_settings``' default ``chunked_prefill_size`` by GPU memory in MiB (MEMORY_HOOK): the
#: first row whose bound the memory is below.
CHUNKED_PREFILL_DEFAULTS = ((20 * 1024, 2048), (35 * 1024, 4096), (60 * 1024, 4096), (90 * 1024, 8192),
                            (160 * 1024, 8192), (None, 16384))
#: ``--quantization`` values whose MoE method calls ``set_quant_config`` (0.5.23: ``fp8.py:2762`` with an FP8
#: ``w13_weight``; ``mxfp4.py:639`` and ``w4afp8.py:290`` without an FP8 weight dtype). The others
#: (``w8a8_int8``, ``w8a8_fp8``, ``compressed-tensors``, ``modelopt_fp8`` ...) never call it: BF16, and the
#: dtype variables are not read.
FP8_QUANTIZATIONS = ("fp8",)
BF16_QUANTIZATIONS = ("mxfp4", "w4afp8")
TOKENS = "SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK"
FP8_BLOCK = 128  # FP8_BLOCK_SIZE (TD)
MX_BLOCK = 32  # MXFP4_BLOCK_SIZE (TD)
#: ``num_qp_per_pe=2`` in ``init_mori_op``'s kwargs (TD).
NUM_QP_PER_PE = 2
_DISPATCH = {"bf16": (0, 0), "fp8": (FP8_BLOCK, 4), "mxfp8": (MX_BLOCK, 1), "fp4": (MX_BLOCK, 1)}
_COMBINE = {"bf16": "none", "fp8": "fp8_blockwise", "fp8_direct_cast": "fp8_direct_cast", "fp4": "fp4_blockwise"}

#: Why ``--moe-a2a-backend pplx`` is one line: the ``PplxDispatcher`` the index stores for upstream
#: (``token_dispatcher/pplx.py @0e20cc7``) builds pplx-garden's ``rose.kernels.efa_all_to_all.EfaAllToAll``,
#: a different library from the pplx-kernels ``AllToAll`` the ``pplx`` backend sizes.
PPLX_NOT_SIZED = "pplx-garden's EfaAllToAll, not sized; allowed deepep, deepep_v2, mori, none"

KNOBS = (
    Knob(name="--moe-weight-dtype", kind="choice", default="auto", choices=("auto", "bf16", "fp8", "fp4", "int8"),
         help="epbuf's flag: the MoE weights' dtype (auto: FP8 for an FP8 checkpoint or --quantization fp8, int8 for "
              "w8a8_int8, else BF16); SGLang's MoRI dispatcher picks its dispatch and combine dtypes from it "
              "(set_quant_config)"),
    Knob(name="--quantization", kind="text", source=f"{REPO} {SERVER_ARGS}",
         help="the weights' quantization (fp8, w8a8_fp8, w8a8_int8, ...); MoRI dispatches FP8 for FP8 weights"),
    Knob(name="--chunked-prefill-size", kind="int", lo=-1, source=f"{REPO} {SERVER_ARGS}; {MEMORY_HOOK}",
         help="SGLang asserts it <= SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK with MoRI (default from the GPU's "
              "memory: 16384 from 160 GiB)"),
    Knob(name="--disaggregation-mode", kind="choice", default="null", choices=("null", "prefill", "decode"),
         source=f"{REPO} {SERVER_ARGS}", help="decode skips the MoRI chunked-prefill check"),
    Knob(name="--enable-two-batch-overlap", kind="flag", default=False, source=f"{REPO} {TBO}",
         help="two-batch overlap: two MoRI handles per GPU (instance_id 0 and 1)"),
    Knob(name=TOKENS, kind="int", lo=1, default=4096, source=f"{REPO} {TD} _MoriEPDispatcherImplBase.__init__",
         help="max_num_inp_token_per_rank of the MoRI op"),
    Knob(name="SGLANG_MORI_DISPATCH_DTYPE", kind="text", source=f"{REPO} {TD} _apply_dispatch_dtype_override",
         help="auto (default), bf16, fp8, fp4 or mxfp8"),
    Knob(name="SGLANG_MORI_COMBINE_DTYPE", kind="text", source=f"{REPO} {TD} _apply_dispatch_dtype_override",
         help="auto (default), bf16, fp8, fp8_direct_cast or fp4"),
    Knob(name="SGLANG_MORI_FP8_DISP", kind="bool", default=False, source=f"{REPO} {TD}",
         help="deprecated: FP8 dispatch (read only without SGLANG_MORI_DISPATCH_DTYPE)"),
    Knob(name="SGLANG_MORI_FP4_DISP", kind="bool", default=False, source=f"{REPO} {TD}",
         help="deprecated: FP4 dispatch (read only without SGLANG_MORI_DISPATCH_DTYPE)"),
    Knob(name="SGLANG_MORI_FP8_COMB", kind="bool", default=False, source=f"{REPO} {TD}",
         help="deprecated: FP8 blockwise combine (read only without SGLANG_MORI_COMBINE_DTYPE)"),
    Knob(name="SGLANG_MORI_PREALLOC_MAX_RECV_TOKENS", kind="int", lo=0, default=0, source=f"{REPO} {TD} init_mori_op",
         help="MORI max_total_recv_tokens (0: no receive cap)"),
    Knob(name="SGLANG_MORI_DISPATCH_INTER_KERNEL_SWITCH_THRESHOLD", kind="int", default=256,
         source=f"{REPO} {TD} get_ep_dispatch_configs", help="internode: InterNodeV1LL up to this many tokens"),
    Knob(name="MORI_ENABLE_SDMA", kind="bool", default=False, source=f"{REPO} {TD} _MoriEPDispatcherImplBase.__init__",
         help="the AsyncLL kernel (SDMA) whatever --deepep-mode"),
) + MORI_ENV_KNOBS


def weight_dtype(ctx) -> tuple[str, str]:
    """``(MoE weight dtype, why)``: ``--moe-weight-dtype`` when given, else ``--quantization`` (``fp8``: FP8;
    a method that never calls ``set_quant_config``: ``none``), else the checkpoint (block FP8: FP8)."""
    given = ctx.value("--moe-weight-dtype")
    if given != "auto":
        return given, "--moe-weight-dtype"
    quant = ctx.value("--quantization")
    if quant is not None:
        if quant in FP8_QUANTIZATIONS:
            from_model = ctx.setting("--quantization").source == "model"
            return "fp8", ("the checkpoint's per-tensor FP8 weights (fp8.py set_quant_config)" if from_model
                           else f"--quantization {quant}")
        if quant in BF16_QUANTIZATIONS:
            return "bf16", f"--quantization {quant}"
        return "none", f"--quantization {quant}: its MoE method never calls set_quant_config"
    if ctx.model_block_fp8:
        return "fp8", "the checkpoint's FP8 weights (fp8.py set_quant_config)"
    return "bf16", "BF16 weights (unquant.py set_quant_config)"


def _dtypes(ctx) -> tuple[str, str, list[str]]:
    """``(dispatch dtype, combine dtype, notes)`` as ``set_quant_config`` and the overrides leave them."""
    weights, _ = weight_dtype(ctx)
    notes: list[str] = []
    if weights == "none":  # set_quant_config never runs: BF16 both ways, no variable read (module docstring)
        return "bf16", "bf16", notes
    dispatch, combine = {"fp8": ("fp8", "bf16"), "fp4": ("fp4", "fp8")}.get(weights, ("bf16", "bf16"))
    dispatch, chosen = _override(ctx, "SGLANG_MORI_DISPATCH_DTYPE", dispatch, "auto, bf16, fp8, fp4, mxfp8", _DISPATCH,
                                 notes)
    if ctx.version == "0.5.23":  # the deprecated switches are gone from 0.5.23's moriep.py
        chosen = True
    if not chosen and (ctx.setting("SGLANG_MORI_FP8_DISP").source == "env"
                       or ctx.setting("SGLANG_MORI_FP4_DISP").source == "env"):
        if ctx.value("SGLANG_MORI_FP8_DISP"):
            dispatch = "fp8"
        if ctx.value("SGLANG_MORI_FP4_DISP"):
            dispatch = "fp4"
    combine, chosen = _override(ctx, "SGLANG_MORI_COMBINE_DTYPE", combine, "auto, bf16, fp8, fp8_direct_cast, fp4",
                                _COMBINE, notes)
    if not chosen and ctx.version != "0.5.23" and ctx.setting("SGLANG_MORI_FP8_COMB").source == "env" and ctx.value("SGLANG_MORI_FP8_COMB"):
        combine = "fp8"
    return dispatch, combine, notes


def _override(ctx, name: str, dtype: str, listed: str, allowed, notes: list[str]) -> tuple[str, bool]:
    """``(dtype, set)``: the dtype variable ``name`` when it names one of ``allowed`` (``auto`` and an
    unknown value keep ``dtype``; an unknown one adds a note); ``set`` is whether the variable was
    given at all, which silences the older boolean variables."""
    text = ctx.value(name)
    if text is None:
        return dtype, False
    value = text.lower()
    if value in allowed:
        return value, True
    if value != "auto":
        notes.append(f"{name}={text!r} is none of {listed}: SGLang keeps {dtype}")
    return dtype, True


def _kernel(ctx, world_size: int, tokens: int) -> tuple[str, str]:
    """``(kernel type, why)``: ``init_mori_op``'s mode and ``get_ep_dispatch_configs``."""
    mode = ctx.value("--deepep-mode")
    if mode == "low_latency" or ctx.value("MORI_ENABLE_SDMA"):
        why = f"--deepep-mode {mode}" if mode == "low_latency" else "MORI_ENABLE_SDMA=1"
        return "AsyncLL", f"LOW_LATENCY mode ({why})"
    if mode == "auto":
        mode = "normal"  # MOE_HOOK:545 "auto set deepep_mode=`normal` for MORI EP"
    if world_size <= 8:
        return "IntraNode", f"INTRA_NODE mode (world_size {world_size} <= 8)"
    threshold = ctx.value("SGLANG_MORI_DISPATCH_INTER_KERNEL_SWITCH_THRESHOLD")
    if tokens <= threshold:
        return "InterNodeV1LL", f"INTER_NODE mode, {TOKENS} {format_int(tokens)} <= switch threshold {threshold}"
    return "InterNodeV1", f"INTER_NODE mode, {TOKENS} {format_int(tokens)} > switch threshold {threshold}"


def chunked_prefill_size(ctx) -> tuple[int | None, str]:
    """``(chunked_prefill_size, where from)``: the flag, else SGLang's default for the GPU's memory
    (:data:`CHUNKED_PREFILL_DEFAULTS`; ``None`` without ``--device``)."""
    given = ctx.value("--chunked-prefill-size")
    if given is not None:
        return given, "--chunked-prefill-size"
    if ctx.device_num_bytes is None:
        return None, "SGLang's default for the GPU's memory (pass --device)"
    mib = ctx.device_num_bytes / (1 << 20)  # get_device_memory_capacity: bytes / (1 << 20)
    value = next(v for bound, v in CHUNKED_PREFILL_DEFAULTS if bound is None or mib < bound)
    return value, f"SGLang's default for {ctx.device_name} ({MEMORY_HOOK})"


def refusal(ctx) -> str | None:
    """SGLang's start-up assert on the MoRI token count (MOE_HOOK:563-573), as one message, or ``None``."""
    chunked, origin = chunked_prefill_size(ctx)
    tokens = ctx.value(TOKENS)
    if chunked is None or chunked <= 0 or ctx.value("--disaggregation-mode") == "decode" or chunked <= tokens:
        return None
    return (f"SGLang refuses to start ({MOE_HOOK}:566-573): chunked_prefill_size {format_int(chunked)} ({origin}) "
            f"exceeds {TOKENS} = {format_int(tokens)}; pass --chunked-prefill-size <= {format_int(tokens)} or raise "
            f"{TOKENS}")


def mori(ctx, num_ranks, per_node, num_nodes, num_experts, extra_experts, settings, findings):
    """What ``--moe-a2a-backend mori`` allocates per GPU: the MORI-shmem heap (allocated whole) with
    the symmetric buffers of SGLang's MoRI handles (two under two-batch overlap, each with
    ``num_qp_per_pe = 2``), and their local buffers; recommendations for
    ``SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK`` and ``MORI_SHMEM_HEAP_SIZE`` (one handle).
    A line SGLang refuses at start-up (:func:`refusal`) allocates nothing: an error, total 0 B.

    Raises:
        epbuf.errors.InvalidArgumentError: what the backend cannot size (experts not divisible by the
            EP size, ``gpu_per_node`` not dividing the ranks, int overflows).
    """
    from ..backends import mori_ep
    from ..report import Report

    tokens = ctx.value(TOKENS)
    dispatch, combine, notes = _dtypes(ctx)
    kernel, why = _kernel(ctx, num_ranks, tokens)
    block, scale_type_size = _DISPATCH[dispatch]
    scale_dim = ctx.hidden // block if block else 0
    gpu_per_node = 8 if num_ranks >= 8 else num_ranks
    handles = 2 if ctx.value("--enable-two-batch-overlap") else 1
    weights, weights_why = weight_dtype(ctx)
    settings.append(_setting("MoE weight dtype", weights, weights_why))
    settings.append(_setting("MoRI handles per GPU", handles, f"two-batch overlap ({TBO})" if handles == 2 else
                             "one MoriEPDispatcher (no two-batch overlap)"))
    refused = refusal(ctx)
    if refused is not None:
        rep = Report(backend="sglang/mori", title="SGLang --moe-a2a-backend mori: refused at start-up, no MoRI handle",
                     upstream=f"{REPO} {MOE_HOOK}", inputs={"num_handles": 0}, buffers=(),
                     findings=tuple(findings) + (Finding(severity="error", code="sglang.mori-refused", message=refused),))
        return rep, []
    args = MoriArgs(world_size=num_ranks, gpu_per_node=gpu_per_node, tokens=tokens, kernel_type=kernel,
                    scale_bytes=scale_dim * scale_type_size, fp8_dispatch=dispatch in ("fp8", "mxfp8"),
                    quant_type=_COMBINE[combine], max_total_recv_tokens=ctx.value("SGLANG_MORI_PREALLOC_MAX_RECV_TOKENS"),
                    num_redundant_experts=extra_experts)
    out = list(findings) + [Finding(severity="warning", code="sglang.mori-env-ignored", message=n) for n in notes]
    out.append(Finding(
        severity="info", code="sglang.mori-args",
        message=f"SGLang builds {handles} MoRI op{'s' if handles > 1 else ''} ({TD} init_mori_op): {kernel} from {why}; "
                f"dispatch {dispatch} (scale_dim {scale_dim} x {scale_type_size} B), combine quant_type {_COMBINE[combine]}, "
                f"max_token_type_size 2 (BF16 params), max_num_inp_token_per_rank {format_int(tokens)}, "
                f"num_experts_per_rank {num_experts // num_ranks}, gpu_per_node {gpu_per_node}, max_total_recv_tokens "
                f"{args.max_total_recv_tokens}, num_qp_per_pe {NUM_QP_PER_PE}",
        data={"kernel_type": kernel, "dispatch_dtype": dispatch, "combine_dtype": combine, "num_handles": handles}))
    if dispatch == "fp4":
        out.append(Finding(severity="info", code="sglang.mori-fp4-dispatch",
                           message="FP4 dispatch: MORI still reserves max_token_type_size = 2 B per hidden element; the "
                                   "records show the BF16 slot", data={}))
    settings.append(_setting("MoRI kernel type", kernel, why))
    rep, recs = mori_report(ctx, args, prefix="sglang", knob=TOKENS)
    qp_delta = _qp_delta(mori_ep, mori_plan(ctx, args))
    rep = _handles(mori_ep, mori_plan(ctx, args), rep, handles, qp_delta)
    if handles > 1:
        recs = []
        out.append(Finding(severity="info", code="sglang.mori-two-handles",
                           message=f"two-batch overlap builds two MoRI handles ({TBO}, instance_id 0 and 1): their "
                                   "symmetric buffers share the MORI-shmem heap and each has its own local buffers; "
                                   "the token and heap recommendations are for one handle, so none is given"))
    rep = with_findings(rep, out).replace(
        backend="sglang/mori", title=f"SGLang --moe-a2a-backend mori ({kernel}, {handles} handle{'s' if handles > 1 else ''}): "
                                     f"{rep.title}",
        upstream=f"{REPO} {TD} init_mori_op; {rep.upstream}",
        inputs={**rep.inputs, "num_handles": handles, "num_qp_per_pe": NUM_QP_PER_PE})
    return rep, recs


def _setting(name: str, value: object, note: str):
    from ._knobs import Setting

    return Setting(name=name, value=value, source="derived", note=note)


def _qp_delta(mori_ep, plan) -> int:
    """Bytes of symmetric memory ``num_qp_per_pe = 2`` adds to one handle over the backend's 1: the
    recvTokenNum / sendTokenNum signal buffers (``InitializeTokenNumSignalBuf`` rows), each rounded as the
    heap places it (static heap: 256 B; isolation: as is; CCO arena: its rule). The handle keeps 2 as
    MORI-shmem has 4 QPs per PE by default (``include/mori/shmem/internal.hpp:119``)."""
    config, _ = mori_ep.plan_config(plan)
    settings = mori_ep.shmem_settings(plan)
    rows = {q: [n for _, sym, n, _, _ in mori_ep.initialize_token_num_signal_buf(config.replace(num_qp_per_pe=q))
                if sym] for q in (1, NUM_QP_PER_PE)}
    if settings.comm == "cco":
        return mori_ep.cco_arena_usage(rows[2]) - mori_ep.cco_arena_usage(rows[1])
    if settings.shmem_mode == "static_heap":
        return mori_ep.static_heap_usage(rows[2]) - mori_ep.static_heap_usage(rows[1])
    return sum(rows[2]) - sum(rows[1])


def _handles(mori_ep, plan, rep, handles: int, qp_delta: int):
    """The report of ``handles`` MoRI handles with ``num_qp_per_pe = 2`` from the backend's report of one
    with 1: the first handle's regions as the backend gives them plus ``qp_delta`` (the larger signal
    buffers), each further handle as one region of the same bytes (symmetric and local); the shmem sync
    buffer, the static heap or the CCO arena once (allocated whole: what the handles leave free is
    reserved too; a heap they overflow is an error)."""
    from ..report import Buffer, Region

    settings = mori_ep.shmem_settings(plan)
    sym, local = rep.buffers
    shared = [r for r in sym.regions if r.name.startswith("shmem internal sync")]
    free = [r for r in sym.regions if r.num_bytes_used == 0 and r not in shared]
    carved = [r for r in sym.regions if r not in shared and r not in free]
    own = sum(r.num_bytes for r in carved) + qp_delta
    capacity = settings.heap_num_bytes if settings.comm == "shmem" and settings.shmem_mode == "static_heap" else (
        rep.quantity("cco_arena_num_bytes") if settings.comm == "cco" else 0)
    regions = shared + carved
    if qp_delta:
        regions.append(Region(name="num_qp_per_pe 2: larger recvTokenNum / sendTokenNum signal buffers",
                              num_bytes=qp_delta, num_bytes_used=qp_delta,
                              formula=f"+{format_int(qp_delta)} B over num_qp_per_pe 1 (heap units)", source=TD))
    for i in range(1, handles):
        regions.append(Region(name=f"handle {i} (instance_id {i}) symmetric buffers", num_bytes=own, num_bytes_used=own,
                              formula="the same buffers as handle 0 (init_mori_op per instance_id)", source=TBO))
    used = sum(r.num_bytes for r in regions)
    findings = []
    if capacity:
        regions.append(Region(name=free[0].name if free else "free", num_bytes=max(0, capacity - used), num_bytes_used=0,
                              formula=f"{format_int(capacity)} - {format_int(used)} carved", source=sym.source))
        if used > capacity:
            findings.append(Finding(severity="error", code="sglang.mori-heap-exhausted",
                                    message=f"{handles} MoRI handle(s) need {format_int(used)} B of symmetric memory, more "
                                            f"than the {format_int(capacity)} B heap/arena; raise MORI_SHMEM_HEAP_SIZE",
                                    data={"usage": used, "capacity": capacity}))
    local_regions = list(local.regions) + [
        Region(name=f"handle {i} (instance_id {i}) local buffers", num_bytes=local.num_bytes,
               num_bytes_used=local.num_bytes, formula="the same local (hipMalloc) buffers as handle 0", source=TBO)
        for i in range(1, handles)]
    new_sym = Buffer.combine(sym.name, regions, "sum", 1, source=sym.source)
    new_local = Buffer.combine(local.name, local_regions, "sum", 1, source=local.source)
    return rep.replace(buffers=(new_sym, new_local), findings=rep.findings + tuple(findings))
