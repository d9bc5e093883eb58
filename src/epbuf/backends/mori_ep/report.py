"""A :class:`~epbuf.plan.Plan` through MORI-EP: the config vLLM would pass, every allocation,
records, findings and limits (``report``), and the fast totals sweeps read (``summarize``,
:mod:`.summary`). How a plan becomes the handle's config: :mod:`.handle`.
"""

from __future__ import annotations

from ...report import Buffer, Field, Finding, Quantity, RecordLayout, Region, Report
from ...units import align, format_int
from .._limits import limit_checks
from .config import (INDEX_BYTES, INTRANODE_KERNELS, SRC_TOKEN_ID_BYTES, V1_KERNELS, WEIGHT_BYTES,
                     EpDispatchCombineConfig)
from .env import shmem_settings
from .findings import cap_findings, limit_findings, memory_findings
from .handle import DEFAULT_MAX_TOKEN_TYPE_SIZE, FP8_SCALE_BLOCK, free_name, memory, plan_config
from .limits import limit_rows
from .sizes import INTERNAL_SYNC_NUM_BYTES, handle_allocations, metadata_num_bytes
from .summary import summarize
from .versions import CPP, HDR, SHMEM_H, SHMEM_INIT, SHMEM_MEM, SYMM, UPSTREAM, src

__all__ = ["FP8_SCALE_BLOCK", "DEFAULT_MAX_TOKEN_TYPE_SIZE", "plan_config", "report", "summarize"]


def _records(plan, config: EpDispatchCombineConfig) -> list[RecordLayout]:
    """The dispatch transfer token as the internode kernels write it into the staging buffers.

    InterNodeV1/V1LL and AsyncLL: hidden | top-k indices | top-k weights | scales | source
    token id, stride ``XferBytesPerToken(sizeof(T))`` (``INTER_V1:409-419,460-471``,
    ``ASYNC_LL:99-114``). InterNode: hidden | weights | indices | scales, no id
    (``INTER:76-79``). Intranode kernels write hidden, weights, indices and scales into
    separate arrays, so they have no per-token record.
    """
    kernel = config.kernel_type
    if kernel in INTRANODE_KERNELS:
        return []
    elem = 1 if plan.use_fp8_dispatch else config.max_token_type_size
    dtype = {1: "float8", 2: "bfloat16", 4: "float32"}.get(elem, f"{elem}-byte")
    hidden = config.hidden_bytes(elem)
    k = config.num_experts_per_token
    scale_bytes = config.scale_bytes()
    if config.scale_type_size == 4:
        scale_dtype, scale_count = "float32", config.scale_dim
    else:
        scale_dtype, scale_count = "uint8", scale_bytes
    fields = [Field(name="hidden", offset=0, num_bytes=hidden, dtype=dtype, count=config.hidden_dim)]
    if kernel == "InterNode":
        fields += [Field(name="topk_weights", offset=hidden, num_bytes=k * WEIGHT_BYTES, dtype="float32", count=k),
                   Field(name="topk_idx", offset=hidden + k * WEIGHT_BYTES, num_bytes=k * INDEX_BYTES, dtype="int32",
                         count=k),
                   Field(name="scales", offset=hidden + 2 * k * 4, num_bytes=scale_bytes, dtype=scale_dtype,
                         count=scale_count)]
        stride = hidden + 2 * k * 4 + scale_bytes
        view = "InterNode staging (internode.hpp:76-79)"
    else:
        fields += [Field(name="topk_idx", offset=hidden, num_bytes=k * INDEX_BYTES, dtype="int32", count=k),
                   Field(name="topk_weights", offset=hidden + k * INDEX_BYTES, num_bytes=k * WEIGHT_BYTES,
                         dtype="float32", count=k),
                   Field(name="scales", offset=hidden + 2 * k * 4, num_bytes=scale_bytes, dtype=scale_dtype,
                         count=scale_count),
                   Field(name="src_token_id", offset=hidden + 2 * k * 4 + scale_bytes, num_bytes=SRC_TOKEN_ID_BYTES,
                         dtype="int32", count=1)]
        stride = config.xfer_bytes_per_token(elem)
        view = f"{kernel} staging"
    return [RecordLayout.from_fields("dispatch transfer token", stride, fields, view=view)]


def report(plan) -> Report:
    """Every allocation MORI-EP's ``EpDispatchCombineOp`` makes for ``plan``: symmetric buffers
    (carved from the MORI-shmem static heap, one allocation each in isolation mode, or from the
    CCO arena) and local ``hipMalloc`` buffers, with the heap or arena check, the kernel
    limits and the receive-cap findings.

    Raises:
        InvalidArgumentError: see :func:`plan_config`; an unreadable ``MORI_SHMEM_HEAP_SIZE``
            or ``MORI_SHMEM_MODE=vmm_heap`` (:func:`~epbuf.backends.mori_ep.env.shmem_settings`).
    """
    config, requested_cap = plan_config(plan)
    settings = shmem_settings(plan)
    scale_dim = settings.blockwise_scale_dim
    rows = handle_allocations(config, scale_dim)
    symmetric = [(name, n) for name, sym, n, _, _ in rows if sym]
    usage, capacity, alignment = memory(config, settings, symmetric)
    ranks = config.world_size

    # --- buffers ---------------------------------------------------------------------------
    def carved(name, n, formula, source):
        text = formula()
        if alignment > 1 and n % alignment:
            text += f" = {format_int(n)} B, rounded up to {alignment} B units"
        return Region(name=name, num_bytes=align(n, alignment), num_bytes_used=align(n, alignment),
                      formula=text, source=source)

    sym_regions = []
    if settings.comm == "shmem":
        sync_src = src(SHMEM_INIT, "503-519")
        sym_regions.append(Region(name="shmem internal sync (shmem init)", num_bytes=INTERNAL_SYNC_NUM_BYTES,
                                  num_bytes_used=INTERNAL_SYNC_NUM_BYTES,
                                  formula="MORI_INTERNAL_SYNC_SIZE = 128 x 8, carved first at shmem init",
                                  source=sync_src))
    sym_regions += [carved(name, n, formula, source) for name, sym, n, formula, source in rows if sym]
    if capacity:  # the static heap and the CCO arena are allocated whole: what the buffers leave is reserved too
        free = max(0, capacity - usage)
        sym_regions.append(Region(
            name=free_name(settings), num_bytes=free, num_bytes_used=0,
            formula=(f"{'arena' if settings.comm == 'cco' else 'MORI_SHMEM_HEAP_SIZE'} {format_int(capacity)} - "
                     f"{format_int(usage)} carved" if free else f"none: the buffers need {format_int(usage - capacity)} B "
                     f"more than the {format_int(capacity)} B"),
            source=src(CPP, "211-226") if settings.comm == "cco" else src(SHMEM_INIT, "219-240")))
    if settings.comm == "cco":
        sym_name, sym_source = "CCO arena (symmetric buffers)", src(CPP, "195-264")
    elif settings.shmem_mode == "static_heap":
        sym_name, sym_source = "MORI-shmem static heap (symmetric buffers)", src(SHMEM_MEM, "35-62")
    else:
        sym_name, sym_source = "symmetric buffers (MORI-shmem isolation mode: one allocation each)", src(SYMM, "93-98")
    sym_buffer = Buffer.combine(sym_name, sym_regions, "sum", 1, source=sym_source)

    per_buffer = metadata_num_bytes(ranks, settings.comm)
    meta_text = (f"{len(symmetric)} symmetric buffers x (8 x ranks {ranks} + sizeof(SymmMemObj) 136)"
                 if settings.comm == "cco" else
                 f"{len(symmetric)} symmetric buffers x (sizeof(SymmMemObj) 136 + (8 + 8 + 4) x ranks {ranks})")
    meta_src = src(CPP, "242-255") if settings.comm == "cco" else (
        src(SYMM, "454-466") if settings.shmem_mode == "static_heap" else src(SYMM, "213-225"))
    local_regions = [Region(name=name, num_bytes=n, num_bytes_used=n, formula=formula(), source=source)
                     for name, sym, n, formula, source in rows if not sym]
    local_regions.append(Region(name="symmetric-buffer metadata (hipMalloc)", num_bytes=len(symmetric) * per_buffer,
                                num_bytes_used=len(symmetric) * per_buffer, formula=meta_text, source=meta_src))
    local_buffer = Buffer.combine("local buffers (hipMalloc)", local_regions, "sum", 1, source=src(CPP, "432-557"))
    records = _records(plan, config)
    if records and config.kernel_type in V1_KERNELS:
        sym_regions_by_name = {r.name: r for r in sym_buffer.regions}
        staging = sym_regions_by_name["dispatchStaging"]
        sym_buffer = sym_buffer.replace(regions=tuple(
            r.replace(shape=(1, config.max_num_inp_token_per_rank), record=records[0].name) if r is staging else r
            for r in sym_buffer.regions))

    # --- limits and findings ----------------------------------------------------------------
    limits = limit_checks(limit_rows(config, settings.comm, settings.shmem_mode, usage, capacity))
    findings = [Finding(severity=sev, code=code, message=msg) for sev, code, msg in settings.notes]
    findings += memory_findings(config, settings, symmetric, usage, capacity, rows)
    findings += cap_findings(config, requested_cap, rows, scale_dim, usage if settings.comm == "cco" else None)
    if plan.use_fp8_dispatch and config.max_token_type_size > 1:
        findings.append(Finding(
            severity="info", code="mori-ep.fp8-slot-reserve",
            message=(f"the buffers reserve max_token_type_size = {config.max_token_type_size} B per hidden element "
                     f"(the BF16 combine); an FP8 dispatch writes 1 B, so a dispatched token moves "
                     f"{format_int(config.xfer_bytes_per_token(1))} B of the {format_int(config.max_xfer_bytes_per_token())} "
                     f"B reserved per token ({src(HDR, '174-177,203-209')})"),
            data={"reserved_xfer_bytes": config.max_xfer_bytes_per_token(), "fp8_xfer_bytes": config.xfer_bytes_per_token(1)}))
    findings += limit_findings(limits)

    recv, send = config.max_num_tokens_to_recv(), config.max_num_tokens_to_send()
    quantities = [
        Quantity(name="max_num_tokens_to_send", value=send, source=src(HDR, "156-158")),
        Quantity(name="max_num_tokens_to_recv_per_rank", value=config.max_num_tokens_to_recv_per_rank(),
                 source=src(HDR, "160-166")),
        Quantity(name="max_num_tokens_to_recv", value=recv, source=src(HDR, "168-170")),
        Quantity(name="max_xfer_bytes_per_token", value=config.max_xfer_bytes_per_token(), unit="B",
                 source=src(HDR, "203-209")),
        Quantity(name="num_symmetric_buffers", value=len(symmetric)),
        Quantity(name="symmetric_num_bytes", value=sum(n for _, n in symmetric), unit="B"),
        Quantity(name="symmetric_usage_num_bytes", value=usage, unit="B"),
        Quantity(name="local_num_bytes", value=local_buffer.num_bytes, unit="B"),
    ]
    if settings.comm == "cco":
        quantities.append(Quantity(name="cco_arena_num_bytes", value=capacity, unit="B", source=src(CPP, "211-214")))
    elif settings.shmem_mode == "static_heap":
        quantities.append(Quantity(name="static_heap_num_bytes", value=capacity, unit="B", source=src(SHMEM_H, "61")))
    if config.quant_type in ("fp8_blockwise", "fp4_blockwise"):
        quantities.append(Quantity(name="fp8_blockwise_combine_scale_dim", value=scale_dim, source=src(CPP, "127-130")))

    inputs = {
        "num_ranks": ranks, "gpu_per_node": config.gpu_per_node, "num_max_tokens_per_rank": config.max_num_inp_token_per_rank,
        "hidden": config.hidden_dim, "num_topk": config.num_experts_per_token, "num_experts": plan.num_experts,
        "num_redundant_experts": plan.num_redundant_experts, "num_experts_per_rank": config.num_experts_per_rank,
        "use_fp8_dispatch": plan.use_fp8_dispatch, "kernel_type": config.kernel_type,
        "max_token_type_size": config.max_token_type_size, "scale_dim": config.scale_dim,
        "scale_type_size": config.scale_type_size, "max_total_recv_tokens": config.max_total_recv_tokens,
        "quant_type": config.quant_type, "comm": settings.comm,
    }
    if settings.comm == "shmem":
        inputs["shmem_mode"] = settings.shmem_mode
        if settings.shmem_mode == "static_heap":
            inputs["heap_num_bytes"] = settings.heap_num_bytes
    for name, value in settings.read:
        inputs[name] = value
    return Report(backend="mori-ep", title=f"MORI-EP EpDispatchCombineHandle ({config.kernel_type})", upstream=UPSTREAM,
                  inputs=inputs, buffers=(sym_buffer, local_buffer), records=tuple(records),
                  quantities=tuple(quantities), findings=tuple(findings), limits=tuple(limits))
