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
    Knob(name="--moe-weight-dtype", kind="choice", default="bf16", choices=("bf16", "fp8", "fp4"),
         help="epbuf's flag: the MoE weights' dtype; SGLang's MoRI dispatcher picks its dispatch and combine "
              "dtypes from it (set_quant_config)"),
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


def _dtypes(ctx) -> tuple[str, str, list[str]]:
    """``(dispatch dtype, combine dtype, notes)`` as ``set_quant_config`` and the overrides leave them."""
    weights = ctx.value("--moe-weight-dtype")
    dispatch, combine = {"fp8": ("fp8", "bf16"), "fp4": ("fp4", "fp8")}.get(weights, ("bf16", "bf16"))
    notes: list[str] = []
    dispatch, chosen = _override(ctx, "SGLANG_MORI_DISPATCH_DTYPE", dispatch, "auto, bf16, fp8, fp4, mxfp8", _DISPATCH,
                                 notes)
    if not chosen and (ctx.setting("SGLANG_MORI_FP8_DISP").source == "env"
                       or ctx.setting("SGLANG_MORI_FP4_DISP").source == "env"):
        if ctx.value("SGLANG_MORI_FP8_DISP"):
            dispatch = "fp8"
        if ctx.value("SGLANG_MORI_FP4_DISP"):
            dispatch = "fp4"
    combine, chosen = _override(ctx, "SGLANG_MORI_COMBINE_DTYPE", combine, "auto, bf16, fp8, fp8_direct_cast, fp4",
                                _COMBINE, notes)
    if not chosen and ctx.setting("SGLANG_MORI_FP8_COMB").source == "env" and ctx.value("SGLANG_MORI_FP8_COMB"):
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
    if mode in ("auto", "low_latency") or ctx.value("MORI_ENABLE_SDMA"):
        why = f"--deepep-mode {mode}" if mode != "normal" else "MORI_ENABLE_SDMA=1"
        return "AsyncLL", f"LOW_LATENCY mode ({why})"
    if world_size <= 8:
        return "IntraNode", f"INTRA_NODE mode (world_size {world_size} <= 8)"
    threshold = ctx.value("SGLANG_MORI_DISPATCH_INTER_KERNEL_SWITCH_THRESHOLD")
    if tokens <= threshold:
        return "InterNodeV1LL", f"INTER_NODE mode, {TOKENS} {format_int(tokens)} <= switch threshold {threshold}"
    return "InterNodeV1", f"INTER_NODE mode, {TOKENS} {format_int(tokens)} > switch threshold {threshold}"


def mori(ctx, num_ranks, per_node, num_nodes, num_experts, extra_experts, settings, findings):
    """What ``--moe-a2a-backend mori`` allocates per GPU: the MORI-shmem heap (allocated whole) with
    the op's symmetric buffers, and its local buffers; recommendations for
    ``SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK`` and ``MORI_SHMEM_HEAP_SIZE``.

    Raises:
        epbuf.errors.InvalidArgumentError: what the backend cannot size (experts not divisible by the
            EP size, ``gpu_per_node`` not dividing the ranks, int overflows).
    """
    from ..backends import mori_ep

    tokens = ctx.value(TOKENS)
    dispatch, combine, notes = _dtypes(ctx)
    kernel, why = _kernel(ctx, num_ranks, tokens)
    block, scale_type_size = _DISPATCH[dispatch]
    scale_dim = ctx.hidden // block if block else 0
    gpu_per_node = 8 if num_ranks >= 8 else num_ranks
    args = MoriArgs(world_size=num_ranks, gpu_per_node=gpu_per_node, tokens=tokens, kernel_type=kernel,
                    scale_bytes=scale_dim * scale_type_size, fp8_dispatch=dispatch in ("fp8", "mxfp8"),
                    quant_type=_COMBINE[combine], max_total_recv_tokens=ctx.value("SGLANG_MORI_PREALLOC_MAX_RECV_TOKENS"),
                    num_redundant_experts=extra_experts)
    out = list(findings) + [Finding(severity="warning", code="sglang.mori-env-ignored", message=n) for n in notes]
    out.append(Finding(
        severity="info", code="sglang.mori-args",
        message=f"SGLang builds one MoRI op ({TD} init_mori_op): {kernel} from {why}; dispatch {dispatch} (scale_dim "
                f"{scale_dim} x {scale_type_size} B), combine quant_type {_COMBINE[combine]}, max_token_type_size 2 (BF16 "
                f"params), max_num_inp_token_per_rank {format_int(tokens)}, num_experts_per_rank "
                f"{num_experts // num_ranks}, gpu_per_node {gpu_per_node}, max_total_recv_tokens "
                f"{args.max_total_recv_tokens}",
        data={"kernel_type": kernel, "dispatch_dtype": dispatch, "combine_dtype": combine}))
    if dispatch == "fp4":
        out.append(Finding(severity="info", code="sglang.mori-fp4-dispatch",
                           message="FP4 dispatch: MORI still reserves max_token_type_size = 2 B per hidden element; the "
                                   "records show the BF16 slot", data={}))
    out.append(_qp_finding(mori_ep, mori_plan(ctx, args)))
    settings.append(_setting("MoRI kernel type", kernel, why))
    rep, recs = mori_report(ctx, args, prefix="sglang", knob=TOKENS)
    rep = with_findings(rep, out).replace(
        backend="sglang/mori", title=f"SGLang --moe-a2a-backend mori ({kernel}): {rep.title}",
        upstream=f"{REPO} {TD} init_mori_op; {rep.upstream}")
    return rep, recs


def _setting(name: str, value: object, note: str):
    from ._knobs import Setting

    return Setting(name=name, value=value, source="derived", note=note)


def _qp_finding(mori_ep, plan) -> Finding:
    """SGLang passes ``num_qp_per_pe = 2``; the handle keeps it unless the shmem context has fewer
    queue pairs (its default 4, ``include/mori/shmem/internal.hpp:119``). ``Plan`` cannot carry it, so
    the report is sized with 1; this finding gives the exact difference, from the backend's own
    ``InitializeTokenNumSignalBuf`` rows and heap rounding."""
    config, _ = mori_ep.plan_config(plan)
    settings = mori_ep.shmem_settings(plan)
    rows = {q: [n for _, sym, n, _, _ in mori_ep.initialize_token_num_signal_buf(config.replace(num_qp_per_pe=q))
                if sym] for q in (1, NUM_QP_PER_PE)}
    if settings.comm == "cco":
        delta = mori_ep.cco_arena_usage(rows[2]) - mori_ep.cco_arena_usage(rows[1])
    elif settings.shmem_mode == "static_heap":
        delta = mori_ep.static_heap_usage(rows[2]) - mori_ep.static_heap_usage(rows[1])
    else:
        delta = sum(rows[2]) - sum(rows[1])
    return Finding(
        severity="info", code="sglang.mori-qp-per-pe",
        message=f"SGLang passes num_qp_per_pe = 2 ({TD} init_mori_op) and the handle keeps it (MORI-shmem's default 4 QPs "
                "per PE, include/mori/shmem/internal.hpp:119); the report is sized with epbuf's 1: the recvTokenNum / "
                f"sendTokenNum signal buffers take {format_int(delta)} B more of the symmetric memory with 2",
        data={"num_qp_per_pe": NUM_QP_PER_PE, "symmetric_num_bytes_delta": delta})
