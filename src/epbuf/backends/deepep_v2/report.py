"""DeepEP V2's report of one plan, and its fast summary for sweeps.

:func:`report` sizes the buffer and workspace (the hint, the real need, the record byte maps,
the logical domain, every limit); :func:`summarize` gives the same totals, binding region and
broken limits from the plan's cached shape. Both read :func:`~.shape.validate`, so a plan is
either invalid for both (the same error) or summarized exactly as reported.
"""

from __future__ import annotations

from ...errors import InvalidArgumentError, Problem
from ...report import Buffer, Finding, Quantity, RecordArray, Region, Report, Summary
from ...units import ceil_div, format_int
from .constants import FP8_BLOCK_SIZE, NUM_MAX_CHANNELS, UE8M0_PER_PACK
from .limits import limit_findings, limit_rows_tokens, limits
from .sizes import check_int64
from .shape import Shape, validate
from .layout import BufferLayout
from .hint import ep_buffer_num_bytes, sizes
from .records import actual_num_sf_packs, hint_num_sf_packs
from .workspace import get_workspace_num_bytes

__all__ = ["report", "summarize"]

# The EP buffer's two regions (the phases reuse it), as report() names them.
_DISPATCH, _COMBINE = "dispatch", "combine"


def _plan_shape(plan) -> Shape:
    from ...plan import Plan

    if not isinstance(plan, Plan):
        raise InvalidArgumentError([Problem("plan", plan, "must be an epbuf.Plan")])
    return validate(plan)


def _arrays(layouts: dict[str, BufferLayout], record: str) -> tuple[RecordArray, ...]:
    """The phase's buffers as record arrays at their offsets: upstream places them one after
    another in the order :func:`~.sizes.dispatch_regions` / ``combine_regions`` list them (an
    empty send buffer on NVLink takes no bytes and is left out)."""
    arrays, offset = [], 0
    for name, b in layouts.items():
        if b.num_bytes:
            arrays.append(RecordArray(name=name, offset=offset, shape=(b.num_ranks, b.num_max_tokens_per_rank),
                                      record=record, num_bytes=b.num_bytes))
        offset += b.num_bytes
    return tuple(arrays)


def _formula(layouts: dict[str, BufferLayout]) -> str:
    return " + ".join(
        f"{name} {b.num_ranks} x {format_int(b.num_max_tokens_per_rank)} tokens x "
        f"{format_int(b.num_bytes_per_token)} B" for name, b in layouts.items()
    )


def report(plan) -> Report:
    """Size DeepEP V2's buffer and workspace for ``plan``: the hint, the real need, the
    record byte maps, the logical domain and every limit.

    Reads ``hidden``, ``num_topk``, ``num_experts`` + ``num_redundant_experts``,
    ``num_ranks``, ``ranks_per_node``, ``num_max_tokens_per_rank``, ``use_fp8_dispatch``,
    ``allow_hybrid_mode``, ``allow_multiple_reduction``, ``scaleup_is_nvlink`` and
    ``version``.

    ``num_topk_idx_bits`` does not enter: records hold 32-bit top-k indices whatever width
    ``topk_idx_t`` has (``layout.cuh:181 @dd758ca``), and dispatch accepts the build's own width.

    A plan the size functions evaluate gets its sizes even when a later step refuses it:
    ranks above 1024, experts above 2048, not divisible by the ranks or above 256 (512 in
    ``"refactor"``) per rank, top-k above 32, kernel limits — each a limit with ``ok=False``
    and a ``deepep-v2.kernel-limit`` error finding naming the assertion.

    Raises:
        InvalidArgumentError: not a :class:`~epbuf.plan.Plan`; an unknown version; what the
            size functions assert (hidden bytes a multiple of 32, worst-case SF bytes <=
            hidden); int32 overflow in their arithmetic; sizes beyond int64.
    """
    shape = _plan_shape(plan)
    gen, domain = shape.gen, shape.domain
    src = gen.sources
    fp8 = plan.use_fp8_dispatch
    hidden, tokens = plan.hidden, plan.num_max_tokens_per_rank
    amr = plan.allow_multiple_reduction
    hint_packs = hint_num_sf_packs(hidden, fp8)
    real_packs = actual_num_sf_packs(hidden, fp8)
    hint = sizes(domain, tokens, hidden, plan.num_topk, fp8, amr, hint_packs, gen.id)
    real = sizes(domain, tokens, hidden, plan.num_topk, fp8, amr, real_packs, gen.id)
    topk = hint.topk

    # Every buffer of one phase holds the same record; the first one's is the phase's record.
    real_dispatch_record = next(iter(real.dispatch.values())).token_layout
    hint_dispatch_record = next(iter(hint.dispatch.values())).token_layout
    combine_record = next(iter(hint.combine.values())).token_layout

    dispatch_formula = _formula(hint.dispatch)
    if real_packs != hint_packs:
        dispatch_formula += (f" (hint: {hint_packs} SF packs per token; a real run sends {real_packs}, "
                             f"{format_int(real_dispatch_record.num_bytes())} B/record)")
    hint_record = "dispatch (hint)" if real_packs != hint_packs else "dispatch"
    regions = [
        Region(name=_DISPATCH, num_bytes=hint.num_dispatch_bytes, num_bytes_used=real.num_dispatch_bytes,
               formula=dispatch_formula, source=src.dispatch_buffer_size,
               arrays=_arrays(hint.dispatch, hint_record)),
        Region(name=_COMBINE, num_bytes=hint.num_combine_bytes, num_bytes_used=real.num_combine_bytes,
               formula=_formula(hint.combine) + (" (multiple reduction)" if amr else " (single reduction)"),
               source=src.combine_buffer_size, arrays=_arrays(hint.combine, "combine")),
    ]
    buffer = Buffer.combine("EP buffer", regions, "max", gen.num_hint_alignment_bytes,
                            source=f"{src.python_hint} -> {src.calculate_buffer_size}; {src.hint_alignment}")
    check_int64(tokens, buffer.num_bytes)
    workspace = shape.workspace

    dtype = "float8_e4m3fn" if fp8 else "bfloat16"
    records = [real_dispatch_record.record("dispatch", dtype), combine_record.record("combine", "bfloat16")]
    if hint_packs != real_packs:
        records.insert(1, hint_dispatch_record.record("dispatch (hint)", dtype))

    findings: list[Finding] = []
    if hint_packs != real_packs:
        findings.append(Finding(
            severity="info", code="deepep-v2.hint-sf-approximation",
            message=(f"the hint reserves ceil(hidden/32) = {hint_packs} SF packs per token; a real FP8 dispatch "
                     f"sends ceil(hidden/128) = {real_packs} (fp32 per 128 elements or UE8M0 per 32 packed by four), "
                     f"so the dispatch phase reserves "
                     f"{format_int(hint.num_dispatch_bytes - real.num_dispatch_bytes)} B more than it uses"),
            data={"hint_num_sf_packs": hint_packs, "real_num_sf_packs": real_packs,
                  "num_bytes_over_reserved": hint.num_dispatch_bytes - real.num_dispatch_bytes},
        ))
    if buffer.num_bytes_needed > buffer.num_bytes:
        findings.append(Finding(
            severity="error", code="deepep-v2.hint-too-small",
            message=(f"a real run needs {format_int(buffer.num_bytes_needed)} B but the hint allocates "
                     f"{format_int(buffer.num_bytes)} B; dispatch/combine fail their size check ({src.buffer_checks})"),
            data={"num_bytes_needed": buffer.num_bytes_needed, "num_bytes_hint": buffer.num_bytes},
        ))
    checks = limits(shape, tokens, buffer.num_bytes)
    findings.extend(limit_findings(checks))
    if not plan.scaleup_is_nvlink and plan.num_ranks_per_node not in (None, 1):
        findings.append(Finding(
            severity="warning", code="deepep-v2.ranks-per-node-unused",
            message=(f"num_ranks_per_node = {plan.num_ranks_per_node} does not enter DeepEP V2's sizes without NVLink: "
                     f"upstream reads only the world size and the NCCL LSA team size ({src.domain}), and ranks that "
                     "cannot load/store each other's memory form LSA teams of one, so the domain is "
                     f"({domain.num_rdma_ranks}, 1); if your GPUs share an LSA team (e.g. over PCIe P2P), "
                     "size it with NVLink and that team size as ranks per node"),
            data={"num_ranks_per_node": plan.num_ranks_per_node, "num_nvl_ranks": domain.num_nvl_ranks},
        ))

    quantities = [
        Quantity(name="num_scaleout_ranks", value=domain.num_scaleout_ranks, source=src.domain),
        Quantity(name="num_scaleup_ranks", value=domain.num_scaleup_ranks, source=src.domain),
        Quantity(name="num_topk", value=topk, source=src.calculate_buffer_size),
        Quantity(name="element_size", value=hint.elem_size, unit="B", source=src.calculate_buffer_size),
        Quantity(name="hidden_bytes", value=hidden * hint.elem_size, unit="B", source=src.dispatch_token_layout),
        Quantity(name="hint_num_sf_packs", value=hint_packs, source=src.calculate_buffer_size),
        Quantity(name="real_num_sf_packs", value=real_packs),
        Quantity(name="num_sf_packs_ue8m0x4_per_128", value=ceil_div(ceil_div(hidden, FP8_BLOCK_SIZE), UE8M0_PER_PACK)
                 if fp8 else 0),
        Quantity(name="dispatch_record_num_bytes", value=real_dispatch_record.num_bytes(), unit="B",
                 source=src.token_num_bytes),
        Quantity(name="hint_dispatch_record_num_bytes", value=hint_dispatch_record.num_bytes(), unit="B",
                 source=src.token_num_bytes),
        Quantity(name="combine_record_num_bytes", value=combine_record.num_bytes(), unit="B", source=src.token_num_bytes),
        Quantity(name="dispatch_rdma_padding_bytes", value=hint_dispatch_record.num_rdma_padding_bytes, unit="B"),
        Quantity(name="combine_rdma_padding_bytes", value=combine_record.num_rdma_padding_bytes, unit="B"),
        Quantity(name="dispatch_smem_record_num_bytes", value=hint_dispatch_record.num_bytes(True), unit="B"),
        Quantity(name="combine_smem_record_num_bytes", value=combine_record.num_bytes(True), unit="B"),
    ]
    quantities += [Quantity(name=f"dispatch_{name}_num_bytes", value=b.num_bytes, unit="B",
                            source=src.dispatch_buffer_size) for name, b in hint.dispatch.items()]
    quantities += [Quantity(name=f"combine_{name}_num_bytes", value=b.num_bytes, unit="B",
                            source=src.combine_buffer_size) for name, b in hint.combine.items()]
    quantities += [
        Quantity(name="hint_dispatch_num_bytes", value=hint.num_dispatch_bytes, unit="B"),
        Quantity(name="real_dispatch_num_bytes", value=real.num_dispatch_bytes, unit="B"),
        Quantity(name="combine_num_bytes", value=hint.num_combine_bytes, unit="B"),
        Quantity(name="hint_num_bytes", value=buffer.num_bytes, unit="B", source=src.hint_alignment),
        Quantity(name="needed_num_bytes", value=buffer.num_bytes_needed, unit="B"),
        Quantity(name="workspace_num_bytes", value=get_workspace_num_bytes(gen.id), unit="B", source=src.workspace),
        Quantity(name="host_workspace_num_bytes", value=get_workspace_num_bytes(gen.id), unit="B",
                 source=src.host_workspace),
        Quantity(name="num_max_channels", value=NUM_MAX_CHANNELS, source=src.constants),
    ]
    inputs = {
        "version": gen.id, "deepep_version": gen.id,
        "num_ranks": plan.num_ranks, "num_ranks_per_node": plan.ranks_per_node,
        "scaleup_is_nvlink": plan.scaleup_is_nvlink,
        "num_rdma_ranks": domain.num_rdma_ranks, "num_nvl_ranks": domain.num_nvl_ranks,
        "num_scaleout_ranks": domain.num_scaleout_ranks, "num_scaleup_ranks": domain.num_scaleup_ranks,
        "is_scaleup_nvlink": domain.is_scaleup_nvlink, "mode": domain.mode,
        "num_max_tokens_per_rank": tokens, "hidden": hidden, "num_topk": plan.num_topk,
        "num_experts": plan.num_experts, "num_redundant_experts": plan.num_redundant_experts,
        "use_fp8_dispatch": fp8, "allow_hybrid_mode": plan.allow_hybrid_mode,
        "allow_multiple_reduction": amr,
    }
    return Report(
        backend="deepep-v2",
        title=f"DeepEP V2 {gen.buffer_class} ({gen.id}, {domain.mode} mode)",
        upstream=f"deepseek-ai/DeepEP {gen.buffer_class} @ {gen.commit} ({gen.id}); "
                 f"hint {src.calculate_buffer_size}, records {src.token_num_bytes}",
        inputs=inputs,
        buffers=(buffer, workspace),
        records=tuple(records),
        quantities=tuple(quantities),
        findings=tuple(findings),
        limits=tuple(checks),
    )


def summarize(plan) -> Summary:
    """:func:`report`'s totals, binding region and broken limits without byte maps or
    findings — what sweeps call, equal to ``summary_of(report(plan))``.

    Everything but the token count comes from the plan's cached :class:`~.shape.Shape` (the same
    checks, region tables, workspace and limit rows as :func:`report`); per call only the
    token checks, the phases' affine sizes and the token-dependent limit rows are evaluated.

    Raises:
        InvalidArgumentError: as :func:`report`.
    """
    shape = _plan_shape(plan)
    tokens = plan.num_max_tokens_per_rank
    per_token, base = shape.dispatch
    dispatch = per_token * tokens + base
    per_token, base = shape.real_dispatch
    real_dispatch = per_token * tokens + base
    per_token, base = shape.combine
    combine = per_token * tokens + base
    alignment = shape.gen.num_hint_alignment_bytes
    hint = check_int64(tokens, ep_buffer_num_bytes(dispatch, combine, alignment))
    workspace = shape.workspace
    # summary_of: the largest buffer (the first of equals), then its largest region (likewise).
    if hint >= workspace.num_bytes:
        binding = _DISPATCH if dispatch >= combine else _COMBINE
    else:
        binding = shape.workspace_binding
    src_idx, tail = limit_rows_tokens(shape, tokens, hint)
    broken, hybrid = shape.broken
    if not src_idx[4]:
        broken += (src_idx[0],)
    broken += hybrid
    for row in tail:
        if not row[4]:
            broken += (row[0],)
    needed = ep_buffer_num_bytes(real_dispatch, combine, alignment)
    return Summary(num_bytes=hint + workspace.num_bytes, num_bytes_needed=needed + workspace.num_bytes_needed,
                   binding=binding, broken=broken)
