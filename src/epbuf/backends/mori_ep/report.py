"""A :class:`~epbuf.plan.Plan` through MORI-EP: the config vLLM would pass, every allocation,
records, findings and limits (``report``), and the fast totals sweeps read (``summarize``).

How a plan becomes an ``EpDispatchCombineConfig`` (what vLLM's ``MoriAll2AllManager``
passes, ``vllm/distributed/device_communicators/all2all.py @e04bcc7``):
``world_size`` = ranks, ``gpu_per_node`` = ranks per node (``min(8, ranks)`` by default),
``num_experts_per_rank`` = (routed + redundant experts) / ranks, ``max_token_type_size`` =
2 (BF16 activations) unless set, scales = ``ceil(hidden / 128)`` float32 per token for FP8
(``num_scale_bytes`` overrides: ``scale_dim = num_scale_bytes``, ``scale_type_size = 1``,
the same bytes), kernel type ``IntraNode`` on one node and ``InterNodeV1`` across nodes.
"""

from __future__ import annotations

import operator
from functools import lru_cache

from ...errors import InvalidArgumentError, Problem
from ...report import Buffer, Field, Finding, LimitCheck, Quantity, RecordLayout, Region, Report, Summary
from ...units import MiB, align, ceil_div, format_bytes, format_int
from .config import (INDEX_BYTES, INTRANODE_KERNELS, SRC_TOKEN_ID_BYTES, V1_KERNELS, WEIGHT_BYTES,
                     EpDispatchCombineConfig, handle_config, kernel_type_name, quant_type_name, KERNEL_TYPES,
                     QUANT_TYPES)
from .env import ShmemSettings, shmem_settings
from .limits import limit_rows
from .sizes import (CCO_ALIGNMENT, HEAP_ALIGNMENT, INTERNAL_SYNC_NUM_BYTES, cco_arena_num_bytes, cco_arena_usage,
                    first_overflow, handle_allocations, metadata_num_bytes, static_heap_usage)
from .versions import (ASYNC_LL, CPP, HDR, INTER_V1, INTRA_LL, PY, SHMEM_H, SHMEM_INIT, SHMEM_MEM, SYMM,
                       UPSTREAM, VA, check_version, src)

__all__ = ["FP8_SCALE_BLOCK", "DEFAULT_MAX_TOKEN_TYPE_SIZE", "plan_config", "report", "summarize"]

FP8_SCALE_BLOCK = 128  # one float32 scale per 128 hidden elements (DeepSeek-style block FP8, what vLLM passes)
DEFAULT_MAX_TOKEN_TYPE_SIZE = 2  # vLLM: max_token_type_size = input_dtype.itemsize, BF16 activations


def plan_config(plan) -> tuple[EpDispatchCombineConfig, int]:
    """``(config after the handle constructor, the cap the plan asked for)``.

    Raises:
        InvalidArgumentError: an unknown version, kernel type or quant type; experts not
            divisible by ranks (MORI takes ``num_experts_per_rank``); top-k 0; a token count
            whose ``world_size x tokens`` overflows int32.
    """
    shape = _token_independent(plan.version, plan.kernel_type, plan.quant_type, plan.num_ranks, plan.ranks_per_node,
                               plan.num_total_experts, plan.hidden, plan.use_fp8_dispatch, plan.num_scale_bytes)
    if isinstance(shape, InvalidArgumentError):
        raise shape
    kernel, quant, scale_dim, scale_type_size = shape
    config = EpDispatchCombineConfig(
        world_size=plan.num_ranks, hidden_dim=plan.hidden, scale_dim=scale_dim, scale_type_size=scale_type_size,
        max_token_type_size=plan.max_token_type_size or DEFAULT_MAX_TOKEN_TYPE_SIZE,
        max_num_inp_token_per_rank=plan.num_max_tokens_per_rank,
        num_experts_per_rank=plan.num_total_experts // plan.num_ranks, num_experts_per_token=plan.num_topk,
        max_total_recv_tokens=plan.max_total_recv_tokens, kernel_type=kernel, gpu_per_node=plan.ranks_per_node,
        quant_type=quant)
    return handle_config(config), plan.max_total_recv_tokens


@lru_cache(maxsize=4096)
def _token_independent(version, kernel_type, quant_type, ranks: int, per_node: int, experts: int, hidden: int,
                       fp8: bool, num_scale_bytes):
    """``(kernel type, quant type, scale_dim, scale_type_size)``, or the error that refuses them —
    what does not depend on the token count, once per shape."""
    problems = []
    try:
        check_version(version)
    except InvalidArgumentError as error:
        problems += error.problems
    if kernel_type is None:
        kernel = "IntraNode" if ranks <= per_node else "InterNodeV1"
    else:
        kernel = kernel_type_name(kernel_type)
        if kernel is None:
            problems.append(Problem("kernel_type", kernel_type,
                                    f"a MORI-EP KernelType: {', '.join(KERNEL_TYPES)} ({src(HDR, '56-63')})"))
    quant = quant_type_name(quant_type)
    if quant is None:
        problems.append(Problem("quant_type", quant_type, f"one of {', '.join(QUANT_TYPES)} ({src(PY, '142-149')})"))
    if experts % ranks:
        problems.append(Problem("num_experts", experts,
                                f"experts (incl. redundant) must be divisible by num_ranks = {ranks}: MORI-EP takes "
                                f"num_experts_per_rank ({src(PY, '263')})"))
    if problems:
        return InvalidArgumentError(problems)
    if num_scale_bytes is not None:
        return kernel, quant, num_scale_bytes, 1
    if fp8:
        return kernel, quant, ceil_div(hidden, FP8_SCALE_BLOCK), 4
    return kernel, quant, 0, 0


def _memory(config: EpDispatchCombineConfig, settings: ShmemSettings, symmetric: list[tuple[str, int]]):
    """``(usage, capacity, alignment)`` of the place the symmetric buffers are carved from."""
    sizes = [n for _, n in symmetric]
    if settings.comm == "cco":
        return cco_arena_usage(sizes), cco_arena_num_bytes(config), CCO_ALIGNMENT
    if settings.shmem_mode == "static_heap":
        return static_heap_usage(sizes), settings.heap_num_bytes, HEAP_ALIGNMENT
    return INTERNAL_SYNC_NUM_BYTES + sum(sizes), 0, 1  # isolation: one allocation each, no shared capacity


def _uncapped_symmetric(config: EpDispatchCombineConfig, scale_dim: int, rows: list[tuple]) -> list[tuple[str, int]]:
    """The symmetric buffers whose size does not shrink with the receive cap."""
    if config.max_total_recv_tokens == 0:
        return []
    free = {name: n for name, sym, n, _, _ in handle_allocations(config.replace(max_total_recv_tokens=0), scale_dim)
            if sym}
    return [(name, n) for name, sym, n, _, _ in rows if sym and free.get(name) == n]


# The config fields besides the token count and the cap (world_size first).
_SHAPE_FIELDS = ("world_size", "hidden_dim", "scale_dim", "scale_type_size", "max_token_type_size",
                 "num_experts_per_rank", "num_experts_per_token", "kernel_type", "gpu_per_node", "num_qp_per_pe",
                 "quant_type")


_shape_key = operator.attrgetter(*_SHAPE_FIELDS)


@lru_cache(maxsize=4096)
def _affine_rows(key: tuple, scale_dim: int):
    """Every allocation as ``(name, symmetric, a, b, d)`` with ``bytes = a x T + b x Recv + d``
    (``T`` = tokens per rank, ``Recv`` = ``MaxNumTokensToRecv()``), for the config fields in
    ``key`` (:data:`_SHAPE_FIELDS`: all but the token count and the cap), or ``None``.

    Every size in :mod:`.sizes` is such a product (CPP:302-557); the coefficients are solved from
    three evaluations of :func:`handle_allocations` and checked against a fourth, so the sweep path
    reads the same functions as the report (a shape where they cannot be evaluated falls back)."""
    ranks = key[0]
    try:
        points = [handle_allocations(EpDispatchCombineConfig(**dict(zip(_SHAPE_FIELDS, key)), max_num_inp_token_per_rank=t,
                                                             max_total_recv_tokens=cap), scale_dim)
                  for t, cap in ((1, 0), (2, 0), (2, 1), (5, 2 * ranks))]
    except InvalidArgumentError:
        return None
    rows = []
    for (name, sym, s1, _, _), (_, _, s2, _, _), (_, _, s3, _, _), (_, _, s4, _, _) in zip(*points):
        a = s3 - s1  # T: 1 -> 2 at Recv = W
        b, rest = divmod(s2 - s3, ranks)  # Recv: W -> 2W at T = 2
        d = s1 - a - b * ranks
        if rest or s4 != 5 * a + 2 * ranks * b + d:
            return None
        rows.append((name, sym, a, b, d))
    return tuple(rows)


def summarize(plan) -> Summary:
    """:func:`report`'s totals, binding allocation and broken limits, without byte maps or findings,
    in one pass over the allocations (what sweeps call once per configuration)."""
    config, _ = plan_config(plan)
    settings = shmem_settings(plan)
    scale_dim = settings.blockwise_scale_dim
    affine = _affine_rows(_shape_key(config), scale_dim)
    if affine is None:  # bytes = 0 x T + 0 x Recv + the evaluated size
        affine = [(name, sym, 0, 0, n) for name, sym, n, _, _ in handle_allocations(config, scale_dim)]
    tokens, recv = config.max_num_inp_token_per_rank, config.max_num_tokens_to_recv()
    shmem = settings.comm == "shmem"
    alignment = HEAP_ALIGNMENT if (not shmem or settings.shmem_mode == "static_heap") else 1
    # the first largest region of each buffer, in report order, as Buffer.binding_region finds it
    best_sym, best_sym_n = ("shmem internal sync (shmem init)", INTERNAL_SYNC_NUM_BYTES) if shmem else ("", -1)
    best_local, best_local_n = "", -1
    usage = INTERNAL_SYNC_NUM_BYTES if shmem else 0
    local = count = 0
    for name, sym, a, b, d in affine:
        n = a * tokens + b * recv + d
        if sym:
            n = (n + alignment - 1) & -alignment
            usage += n
            count += 1
            if n > best_sym_n:
                best_sym, best_sym_n = name, n
        else:
            local += n
            if n > best_local_n:
                best_local, best_local_n = name, n
    metadata = count * metadata_num_bytes(config.world_size, settings.comm)
    local += metadata
    if metadata > best_local_n:
        best_local = "symmetric-buffer metadata (hipMalloc)"
    if not shmem:
        capacity = cco_arena_num_bytes(config)
    else:
        capacity = settings.heap_num_bytes if settings.shmem_mode == "static_heap" else 0
    if capacity and capacity - usage > best_sym_n:
        best_sym = _free_name(settings)
    reserved = max(usage, capacity)  # the heap or arena is allocated whole
    broken = tuple(row[0] for row in limit_rows(config, settings.comm, settings.shmem_mode, usage, capacity)
                   if not row[4])
    return Summary(num_bytes=reserved + local, num_bytes_needed=usage + local,
                   binding=best_sym if reserved >= local else best_local, broken=broken)


def _free_name(settings: ShmemSettings) -> str:
    return "CCO arena not used by the handle" if settings.comm == "cco" else "static heap not used by the handle"


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


def _limit_findings(limits: list[LimitCheck]) -> list[Finding]:
    out = []
    for lim in limits:
        if lim.ok or lim.name.startswith(("symmetric heap usage", "CCO arena usage")):
            continue  # the memory limits have findings of their own, with the numbers
        consequence = {"kernel": "the kernel's device assertion fails",
                       "host": "the call is refused on the host",
                       "assumed": "nothing checks it: the kernels index out of range"}[lim.enforced]
        if lim.relation == "in":
            broken = f"{lim.name}: kernel_type {KERNEL_TYPES[lim.value]} is not one of them"
        else:
            broken = f"{lim.name} = {format_int(lim.value)} breaks {lim.relation} {format_int(lim.bound)}"
        out.append(Finding(severity="error", code="mori-ep.limit",
                           message=f"{broken} ({lim.source}); {consequence}",
                           data={"limit": lim.name, "value": lim.value, "bound": lim.bound, "enforced": lim.enforced}))
    return out


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
    usage, capacity, alignment = _memory(config, settings, symmetric)
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
            name=_free_name(settings), num_bytes=free, num_bytes_used=0,
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
    limits = [LimitCheck(name=n, value=v, relation=r, bound=b, ok=ok, source=s, enforced=e)
              for n, v, r, b, ok, s, e in limit_rows(config, settings.comm, settings.shmem_mode, usage, capacity)]
    findings = [Finding(severity=sev, code=code, message=msg) for sev, code, msg in settings.notes]
    findings += _memory_findings(config, settings, symmetric, usage, capacity, rows)
    findings += _cap_findings(config, requested_cap, rows, scale_dim, usage if settings.comm == "cco" else None)
    if plan.use_fp8_dispatch and config.max_token_type_size > 1:
        findings.append(Finding(
            severity="info", code="mori-ep.fp8-slot-reserve",
            message=(f"the buffers reserve max_token_type_size = {config.max_token_type_size} B per hidden element "
                     f"(the BF16 combine); an FP8 dispatch writes 1 B, so a dispatched token moves "
                     f"{format_int(config.xfer_bytes_per_token(1))} B of the {format_int(config.max_xfer_bytes_per_token())} "
                     f"B reserved per token ({src(HDR, '174-177,203-209')})"),
            data={"reserved_xfer_bytes": config.max_xfer_bytes_per_token(), "fp8_xfer_bytes": config.xfer_bytes_per_token(1)}))
    findings += _limit_findings(limits)

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


def _memory_findings(config, settings: ShmemSettings, symmetric, usage: int, capacity: int, rows) -> list[Finding]:
    out = []
    if settings.comm == "cco":
        if usage > capacity:
            failing = first_overflow(symmetric, capacity, 0, CCO_ALIGNMENT)
            uncapped = _uncapped_symmetric(config, settings.blockwise_scale_dim, rows)
            why = ""
            if uncapped:
                why = (f": the arena is sized from the capped receive count (6 x MaxNumTokensToRecv "
                       f"{format_int(config.max_num_tokens_to_recv())} x hidden x max_token_type_size + 256 MiB), but "
                       f"{len(uncapped)} symmetric buffers are not capped and take "
                       f"{format_int(sum(align(n, CCO_ALIGNMENT) for _, n in uncapped))} B")
            out.append(Finding(
                severity="error", code="mori-ep.cco-arena-exhausted",
                message=(f"the symmetric buffers need {format_int(usage)} B of the {format_int(capacity)} B CCO arena{why}; "
                         f"MallocSymm throws 'cco arena exhausted' at {failing} ({src(CPP, '211-233')})"),
                data={"usage": usage, "arena": capacity, "failing_buffer": failing}))
        else:
            out.append(Finding(
                severity="info", code="mori-ep.cco-arena",
                message=(f"MORI_EP_COMM=cco: the handle registers one CCO window of {format_int(capacity)} B "
                         f"({format_bytes(capacity)}, 6 x MaxNumTokensToRecv x hidden x max_token_type_size + 256 MiB) and "
                         f"carves {format_int(usage)} B of it ({src(CPP, '211-235')})"),
                data={"usage": usage, "arena": capacity}))
        return out
    if settings.shmem_mode != "static_heap":
        return out
    text_issue = (f"upstream's out-of-heap message says 'Increase via MORI_SHMEM_HEAP_SIZE (default: 2GB)' "
                  f"({src(SHMEM_MEM, '44-47')}) but the default is 4 GiB ({src(SHMEM_H, '61')}; {VA}:200-203 says 4GB)")
    if usage > capacity:
        failing = first_overflow(symmetric, capacity, INTERNAL_SYNC_NUM_BYTES, HEAP_ALIGNMENT)
        need_mib = ceil_div(usage, MiB)
        out.append(Finding(
            severity="error", code="mori-ep.heap-exhausted",
            message=(f"the symmetric buffers need {format_int(usage)} B ({format_bytes(usage)}) of the "
                     f"{format_int(capacity)} B ({format_bytes(capacity)}) MORI-shmem static heap: the allocation of "
                     f"{failing} fails ({src(SHMEM_MEM, '35-49')}, then hipMemset in MallocSymm, {CPP}:198-199); set "
                     f"MORI_SHMEM_HEAP_SIZE={need_mib}M or more (upstream's own message points at a 2GB default that "
                     f"is really 4 GiB: mori-ep.heap-error-text)"),
            data={"usage": usage, "heap": capacity, "failing_buffer": failing, "min_heap_mib": need_mib}))
    else:
        out.append(Finding(
            severity="info", code="mori-ep.static-heap",
            message=(f"MORI-shmem reserves its static heap whole at init: {format_int(capacity)} B ({format_bytes(capacity)}) "
                     f"per GPU (MORI_SHMEM_HEAP_SIZE, {src(SHMEM_INIT, '219-240')}); this handle carves "
                     f"{format_int(usage)} B of it ({usage / capacity * 100:.1f} %): MORI_SHMEM_HEAP_SIZE="
                     f"{ceil_div(usage, MiB)}M is the smallest heap that holds it"),
            data={"usage": usage, "heap": capacity}))
    out.append(Finding(severity="info", code="mori-ep.heap-error-text", message=text_issue,
                       data={"message_default": "2GB", "default_num_bytes": 4 << 30}))
    return out


def _cap_findings(config, requested_cap: int, rows, scale_dim: int, cco_usage: int | None) -> list[Finding]:
    out = []
    send, recv = config.max_num_tokens_to_send(), config.max_num_tokens_to_recv()
    if requested_cap > send:
        out.append(Finding(
            severity="info", code="mori-ep.recv-cap-clamped",
            message=(f"max_total_recv_tokens = {format_int(requested_cap)} exceeds the worst case world_size x "
                     f"max_num_inp_token_per_rank = {format_int(send)}: the handle clamps it ({src(CPP, '153-159')})"),
            data={"requested": requested_cap, "clamped": send}))
    if config.max_total_recv_tokens == 0 or recv == send:
        return out
    out.append(Finding(
        severity="warning", code="mori-ep.recv-cap",
        message=(f"max_total_recv_tokens = {format_int(config.max_total_recv_tokens)} sizes the receive buffers for "
                 f"MaxNumTokensToRecv = {config.world_size} x min(ceil({format_int(config.max_total_recv_tokens)} / "
                 f"{config.world_size}), {format_int(config.max_num_inp_token_per_rank)}) = {format_int(recv)} tokens "
                 f"instead of the worst case {format_int(send)}; a dispatch that delivers more to one rank trips the "
                 f"kernels' assert ({INTRA_LL}:190, {ASYNC_LL}:342, {INTER_V1}:56; {src(HDR, '160-166')})"),
        data={"max_num_tokens_to_recv": recv, "worst_case": send}))
    uncapped = _uncapped_symmetric(config, scale_dim, rows)
    arena = cco_arena_num_bytes(config)
    need = cco_arena_usage([n for name, sym, n, _, _ in rows if sym])
    if cco_usage is not None and need > arena:
        return out  # the cco-arena-exhausted error already says it, with these numbers
    big = sorted(uncapped, key=lambda item: -item[1])[:3]
    out.append(Finding(
        severity="warning" if need > arena else "info", code="mori-ep.arena-sizing-disagreement",
        message=(f"upstream sizes the CCO arena (MORI_EP_COMM=cco, the gfx125x default) from the capped receive count: "
                 f"6 x {format_int(recv)} x {config.hidden_dim} x {config.max_token_type_size} + 256 MiB = "
                 f"{format_int(arena)} B, but {len(uncapped)} symmetric buffers are not capped ("
                 + ", ".join(f"{name} {format_int(n)} B" for name, n in big)
                 + f"{', ...' if len(uncapped) > 3 else ''}; {format_int(sum(align(n, CCO_ALIGNMENT) for _, n in uncapped))} B "
                 f"in all): the handle needs {format_int(need)} B of the arena, "
                 + (f"{format_int(need - arena)} B more than it has, so MallocSymm would throw 'cco arena exhausted'"
                    if need > arena else f"{format_int(arena - need)} B to spare")
                 + f" ({src(CPP, '211-233,303-354')})"),
        data={"arena": arena, "need": need, "uncapped": dict(uncapped)}))
    return out

