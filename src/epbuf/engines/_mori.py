"""What vLLM's and SGLang's MORI backends share: one ``EpDispatchCombineOp`` per GPU, sized by
:mod:`epbuf.backends.mori_ep` from the config the engine builds, and the settings that decide it —
the token count, the MORI-shmem heap (``MORI_SHMEM_HEAP_SIZE``, allocated whole at shmem init).

The engine modules (:mod:`._vllm_mori`, :mod:`._sglang_mori`) map their flags to a
:class:`MoriArgs`; :func:`mori_report` turns it into the backend's report plus the engine's
findings and exact recommendations. No formula lives here.
"""

from __future__ import annotations

from .._record import Record
from ..report import Finding
from ..units import INT32_MAX, MiB, ceil_div, format_bytes, format_int
from ._common import EngineContext, budget_findings
from ._libraries import MORI_ENV_KNOBS, library_env, token_recommendations, with_findings
from ._report import Recommendation

__all__ = ["MoriArgs", "mori_plan", "mori_report"]

HEAP_LIMIT = "symmetric heap usage (bytes, MORI_SHMEM_HEAP_SIZE)"


class MoriArgs(Record):
    """The ``EpDispatchCombineConfig`` fields an engine decides, in the backend's vocabulary.

    Attributes:
        world_size: ranks in the EP group.
        gpu_per_node: what the engine passes as ``gpu_per_node`` (not necessarily the real node).
        tokens: ``max_num_inp_token_per_rank``.
        kernel_type: the ``EpDispatchCombineKernelType`` name the engine selects.
        scale_bytes: ``scale_dim x scale_type_size`` of the dispatch scales (0: none).
        fp8_dispatch: the dispatched tokens are 1-byte (FP8) rather than the activation dtype.
        quant_type: the combine ``quant_type`` string.
        max_total_recv_tokens: the receive cap (0: none).
        num_redundant_experts: EPLB / redundant experts on top of the routed ones.
    """

    world_size: int
    gpu_per_node: int
    tokens: int
    kernel_type: str
    scale_bytes: int
    fp8_dispatch: bool
    quant_type: str = "none"
    max_total_recv_tokens: int = 0
    num_redundant_experts: int = 0


def mori_plan(ctx: EngineContext, args: MoriArgs):
    """The :class:`~epbuf.plan.Plan` the ``mori-ep`` backend sizes for ``args`` (``--env`` MORI_*
    variables included; ``--backend-version`` names the MORI-EP version). ``scale_bytes`` goes in as
    ``Plan.num_scale_bytes``: the backend then takes ``scale_dim = scale_bytes`` and
    ``scale_type_size = 1``, the same bytes as the engine's ``scale_dim x scale_type_size``."""
    from ..plan import Plan

    return Plan(hidden=ctx.hidden, num_topk=ctx.num_topk, num_experts=ctx.num_experts,
                num_redundant_experts=args.num_redundant_experts, num_ranks=args.world_size,
                num_ranks_per_node=args.gpu_per_node, num_max_tokens_per_rank=args.tokens,
                use_fp8_dispatch=args.fp8_dispatch, kernel_type=args.kernel_type,
                max_total_recv_tokens=args.max_total_recv_tokens, quant_type=args.quant_type,
                num_scale_bytes=args.scale_bytes, env=library_env(ctx, MORI_ENV_KNOBS), version=ctx.backend_version,
                model=ctx.model)


def _heap_parts(rep) -> tuple[int, int]:
    """``(symmetric usage, local bytes)`` of a ``mori-ep`` report (its quantities)."""
    return rep.quantity("symmetric_usage_num_bytes"), rep.quantity("local_num_bytes")


def mori_report(ctx: EngineContext, args: MoriArgs, *, prefix: str, knob: str, load_text: str = "",
                cap: int | None = None, cap_text: str = ""):
    """``(report, recommendations)`` for the engine's MORI handle.

    Recommendations: for the token count ``knob`` the largest value MORI accepts with the heap as set
    (``limit``), the load and the budget (:func:`~._libraries.token_recommendations`, exact searches
    over ``mori_ep.summarize``; with the static heap the budget search sizes the heap to the handle,
    since it is allocated whole); with the static heap, the smallest ``MORI_SHMEM_HEAP_SIZE`` (whole
    MiB, as ``ParseSizeString`` reads ``M``) that holds the handle at the current count (``fix`` when
    the heap is too small, else ``budget`` when ``--budget`` is given).

    Raises:
        epbuf.errors.InvalidArgumentError: what the backend cannot size (``mori_ep.report``).
    """
    from ..backends import mori_ep

    plan = mori_plan(ctx, args)
    rep = mori_ep.report(plan)
    findings: list[Finding] = budget_findings(prefix, ctx, rep.num_bytes)

    def at(t: int):
        return mori_ep.summarize(plan.replace(num_max_tokens_per_rank=t))

    settings = mori_ep.shmem_settings(plan)
    static_heap = settings.comm == "shmem" and settings.shmem_mode == "static_heap"

    def sized_heap(t: int) -> int:
        """The allocation at ``t`` tokens with MORI_SHMEM_HEAP_SIZE set to the whole MiB that hold the handle."""
        usage, local = _heap_parts(mori_ep.report(plan.replace(num_max_tokens_per_rank=t)))
        return ceil_div(usage, MiB) * MiB + local

    what = f"MORI's EpDispatchCombineHandle ({args.kernel_type})"
    # MaxNumTokensToSend() = world_size x tokens is a C++ int (the backend's config refuses more).
    recs = token_recommendations(ctx, knob, lambda t: at(t).num_bytes, lambda t: at(t).broken, what=what,
                                 hi=INT32_MAX // args.world_size, load_text=load_text, cap=cap, cap_text=cap_text,
                                 budget_total=sized_heap if static_heap else None,
                                 budget_text=" with MORI_SHMEM_HEAP_SIZE set to what the handle needs" if static_heap
                                 else "", budget_ignores=(HEAP_LIMIT,) if static_heap else ())
    if static_heap:
        usage, local = _heap_parts(rep)
        mib = ceil_div(usage, MiB)
        exhausted = usage > settings.heap_num_bytes
        if exhausted or ctx.budget is not None:
            total = mib * MiB + local
            recs.append(Recommendation(
                setting="MORI_SHMEM_HEAP_SIZE", value=f"{mib}M", goal="fix" if exhausted else "budget", num_bytes=total,
                message=(f"the handle's symmetric buffers need {format_int(usage)} B of the MORI-shmem heap (its "
                         f"1 KiB internal sync buffer included); the heap is allocated whole at init, so {mib} MiB "
                         f"is the least it can take ({format_bytes(total)} per GPU with the local buffers)"
                         + ("" if exhausted or total <= ctx.budget else
                            f" - still above --budget {format_bytes(ctx.budget)}"))))
    return with_findings(rep, findings), recs

