"""UCCL-EP reports: ``report_normal`` (backend ``uccl-ep``) and ``report_low_latency``
(backend ``uccl-ll``), and their fast summaries for sweeps.

A report lists every allocation one UCCL-EP ``Buffer`` makes per GPU (:mod:`.memory`): the
device buffers make up ``Report.num_bytes``; the pinned host memory is in
``Report.host_buffers`` and not in the device total. The limits are the rows of
:mod:`.limits`; a broken one becomes an ``error`` finding with the assertion's ``file:line``.
"""

from __future__ import annotations

from functools import lru_cache

from ..._record import Record
from ...errors import Checker, InvalidArgumentError
from ...report import Buffer, Field, Finding, LimitCheck, Quantity, RecordLayout, Region, Report, Summary, summary_of
from ...units import INT64_MAX, format_bytes, format_int
from . import _deepep
from .config import (
    DEFAULT_NUM_SMS,
    Config,
    get_combine_config,
    get_dispatch_config,
    get_hidden_bytes,
    internode_records,
    nvl_buffer,
    rdma_buffer,
    supported_num_ranks,
)
from .limits import NUM_MAX_NVL_PEERS, low_latency_limit_rows, normal_limit_rows
from .low_latency import (
    K_ATOMIC_BUFFER_SIZE,
    LowLatencyLayout,
    combine_message_record,
    dispatch_message_record,
    get_low_latency_rdma_size_hint,
    hint_round_up,
)
from .memory import (
    device_runtime_allocation,
    host_allocation,
    nvl_allocation,
    placement,
    rdma_allocation,
    workspace_allocation,
)
from .versions import Version, cite, get_version

__all__ = ["report_normal", "report_low_latency", "summarize_normal", "summarize_low_latency"]

_CFG = "include/ep_config.hpp"


def _upstream(v: Version) -> str:
    return f"UCCL-EP {v.id} @ {v.commit} ({v.date})"


def _platform(plan) -> str:
    return plan.platform or "cuda"


def _nic(plan) -> str:
    return plan.nic or "ib"


def _limit_checks(rows) -> tuple[LimitCheck, ...]:
    return tuple(LimitCheck(name=n, value=value, relation=r, bound=b, ok=ok, source=src, enforced=e)
                 for n, value, r, b, ok, src, e in rows)


def _limit_findings(prefix: str, limits) -> list[Finding]:
    return [
        Finding(severity="error", code=f"{prefix}.limit",
                message=f"{lim.name} = {format_int(lim.value)} breaks {lim.relation} {format_int(lim.bound)} "
                        f"({lim.source})",
                data={"limit": lim.name, "value": lim.value, "bound": lim.bound})
        for lim in limits if not lim.ok
    ]


def _runtime_buffers(ranks_per_node: int, platform: str, nic: str) -> tuple[Buffer, Buffer, Buffer]:
    """``(workspace, UCCL proxies and runtime, pinned host memory)``: the same for every plan
    with this topology and build."""
    _, atomic_in_host, _, atomic_why = placement(platform, nic)
    return (workspace_allocation(), device_runtime_allocation(ranks_per_node, atomic_in_host, atomic_why),
            host_allocation(atomic_in_host, atomic_why))


def _host_memory_finding(prefix: str, host_buffers: tuple[Buffer, ...], runtime: Buffer) -> Finding:
    host = sum(b.num_bytes for b in host_buffers)
    names = [r.name for b in host_buffers for r in b.regions]
    extra = (", the atomic buffer" if "atomic buffer" in names else "") + (
        ", the RDMA buffer" if any(b.name.startswith("RDMA buffer") for b in host_buffers) else "")
    return Finding(
        severity="info", code=f"{prefix}.host-memory",
        message=f"per GPU, UCCL-EP also pins {format_int(host)} B ({format_bytes(host)}) of host memory (proxy FIFO "
                f"triggers and tails, receive counters{extra}); "
                f"it is listed under host memory and not counted in the device total. UCCL-only device memory "
                f"(atomic buffer when on the device, FIFO heads, D2H handles, IPC table): "
                f"{format_int(runtime.num_bytes)} B",
        data={"host_num_bytes": host, "uccl_device_runtime_num_bytes": runtime.num_bytes})


def _dropped_checks_finding(prefix: str, low_latency: bool, hint: int) -> Finding:
    ceiling = _deepep.deepep_ll_max_bytes()
    text = (f"UCCL-EP's Buffer drops two of DeepEP V1's constructor checks: num_*_bytes / sizeof(int4) < INT_MAX "
            f"(DeepEP 4623c67; at most {format_int(ceiling)} B) and num_rdma_bytes > 0 => internode or low-latency "
            f"(commented out, {cite('src/uccl_ep.cc', '471-472')}); it checks the topology against LOCAL_WORLD_SIZE")
    if low_latency and hint > ceiling:
        text += f"; this {format_int(hint)} B buffer is accepted by UCCL-EP but DeepEP V1 main would reject it"
    return Finding(severity="info", code=f"{prefix}.dropped-checks", message=text,
                   data={"deepep_max_num_bytes": ceiling, "num_rdma_bytes": hint})


# ======================================================================================
# Normal mode
# ======================================================================================
def _validate_normal(v: Version, ranks: int, num_sms: int | None, config: object) -> Config | None:
    """What no normal-mode size function can evaluate: the hints' rank assert, an odd
    ``Buffer.set_num_sms``, a rank count the tables lack, a ``Config`` of another type."""
    c = Checker()
    if ranks > NUM_MAX_NVL_PEERS and ranks % NUM_MAX_NVL_PEERS:
        c.add("num_ranks", ranks, f"must be below {NUM_MAX_NVL_PEERS} or a multiple of {NUM_MAX_NVL_PEERS} "
                                  f"(EP_HOST_ASSERT in the size hints, {cite(_CFG, '65-66, 103')})")
    if config is None:
        if num_sms is not None and num_sms % 2:
            c.add("num_sms", num_sms, f"must be even (Buffer.set_num_sms asserts it, {cite('bench/buffer.py', '270')})")
        elif not c.problems and ranks not in supported_num_ranks():
            try:
                get_dispatch_config(ranks)
            except InvalidArgumentError as error:
                c.problems.extend(error.problems)
    elif not isinstance(config, Config):
        c.add("deepep_config", config, "must be an epbuf.backends.deepep_v1.Config (UCCL-EP's Config is the same)")
        config = None
    elif ranks > NUM_MAX_NVL_PEERS and config.num_sms % 2:
        c.add("num_sms", config.num_sms, f"must be even above {NUM_MAX_NVL_PEERS} ranks ({cite(_CFG, '67, 104')})")
    c.raise_if_any()
    return config


class _Normal(Record):
    """The token-independent part of :func:`report_normal` (normal mode reads no token count),
    cached by :func:`_normal_core`. Read-only."""

    version: Version
    override: Config | None
    hidden_bytes: int
    configs: dict
    nvl_hints: dict
    rdma_hints: dict
    nvl_key: str
    rdma_key: str
    buffers: tuple
    host_buffers: tuple
    records: tuple
    limits: tuple
    summary: Summary


@lru_cache(maxsize=256)
def _normal_core(version, ranks: int, num_ranks_per_node, hidden: int, fp8: bool, num_sms, deepep_config,
                 topk: int, routed: int, redundant: int, platform: str, nic: str) -> _Normal | InvalidArgumentError:
    try:
        v = get_version(version)
        override = _validate_normal(v, ranks, num_sms, deepep_config)
    except InvalidArgumentError as error:
        return error
    experts = routed + redundant
    rpn = num_ranks_per_node if num_ranks_per_node is not None else min(ranks, NUM_MAX_NVL_PEERS)
    hidden_bytes = get_hidden_bytes(hidden, fp8)
    if override is not None:
        configs = {"deepep_config": override}
    else:
        sms, efa = num_sms or DEFAULT_NUM_SMS, nic == "efa"
        configs = {"dispatch": get_dispatch_config(ranks, sms, efa=efa),
                   "combine": get_combine_config(ranks, sms, efa=efa)}
    nvl = {k: nvl_buffer(cfg, hidden_bytes, ranks) for k, cfg in configs.items()}
    rdma = {k: rdma_buffer(cfg, hidden_bytes, ranks) for k, cfg in configs.items()}
    # The recipe keeps the larger hint of each kind; the first config wins a tie.
    nvl_key = max(nvl, key=lambda k: nvl[k].num_bytes)
    rdma_key = max(rdma, key=lambda k: rdma[k].num_bytes)
    num_nvl_bytes, num_rdma_bytes = nvl[nvl_key].num_bytes, rdma[rdma_key].num_bytes

    rdma_in_host, _, rdma_why, _ = placement(platform, nic)
    in_host = rdma_in_host and num_rdma_bytes > 0  # a zero-byte request never takes the host path (uccl_ep.cc:294-296)
    rdma_alloc = rdma_allocation(list(rdma[rdma_key].regions), num_rdma_bytes, in_host, rdma_why)
    workspace, runtime, host = _runtime_buffers(rpn, platform, nic)
    buffers = (nvl_allocation(nvl[nvl_key], rpn),) + ((rdma_alloc,) if not in_host else ()) + (workspace, runtime)
    host_buffers = ((rdma_alloc,) if in_host else ()) + (host,)

    dispatch_cfg = configs.get("dispatch", override)
    element_size = 1 if fp8 else 2
    rdma_dispatched = rdma_buffer(dispatch_cfg, hidden * element_size, ranks).num_bytes
    combine_cfg = configs.get("combine", override)
    limits = _limit_checks(normal_limit_rows(v, platform, ranks, rpn, topk, experts, hidden, fp8, configs, combine_cfg,
                                             num_nvl_bytes, num_rdma_bytes, rdma_dispatched))
    records = _hint_slot_records("NVL hint slot", nvl[nvl_key])
    if ranks > NUM_MAX_NVL_PEERS:
        records += _hint_slot_records("RDMA hint slot", rdma[rdma_key])
        records += internode_records(hidden, fp8, topk)
    summary = summary_of(Report(backend="uccl-ep", title="", upstream="", inputs={}, buffers=buffers, limits=limits))
    return _Normal(version=v, override=override, hidden_bytes=hidden_bytes, configs=configs, nvl_hints=nvl,
                   rdma_hints=rdma, nvl_key=nvl_key, rdma_key=rdma_key, buffers=buffers, host_buffers=host_buffers,
                   records=tuple(records), limits=limits, summary=summary)


# Per-slot regions of the hints -> (field name, element count per slot, or 0 for "one byte each").
_PER_SLOT = {"hidden data": ("hidden", 0), "source meta": ("source_meta", 2), "top-k indices": ("topk_idx", 128),
             "top-k weights": ("topk_weights", 128), "scales": ("scales", 128), "int4 per token": ("int4", 4)}
_DTYPES = {("topk_idx", 8): "int64", ("topk_weights", 4): "float32", ("scales", 4): "float32",
           ("source_meta", 4): "int32", ("int4", 4): "int32"}


def _hint_slot_records(name: str, hint: Buffer) -> list[RecordLayout]:
    """What a hint reserves per token slot: each per-slot region divided by the slot count
    (the source-meta region holds 8 B per slot). Not a memory layout: the kernels keep the
    fields in separate arrays per channel."""
    by_name = {r.name: r for r in hint.regions}
    slots = by_name["source meta"].num_bytes // 8 if "source meta" in by_name else 0
    if slots == 0:
        return []
    fields, offset = [], 0
    for r in hint.regions:
        if r.name in _PER_SLOT:
            field, count = _PER_SLOT[r.name]
            size = r.num_bytes // slots
            count = count or size
            fields.append(Field(name=field, offset=offset, num_bytes=size, count=count,
                                dtype=_DTYPES.get((field, size // count), "uint8")))
            offset += size
    return [RecordLayout.from_fields(name, offset, fields, view="hint budget per token slot, not a memory layout")]


def _normal_key(plan) -> tuple:
    return (plan.version, plan.num_ranks, plan.num_ranks_per_node, plan.hidden, plan.use_fp8_dispatch, plan.num_sms,
            plan.deepep_config, plan.num_topk, plan.num_experts, plan.num_redundant_experts, _platform(plan),
            _nic(plan))


@lru_cache(maxsize=16384)
def _normal_summary(*key) -> Summary | InvalidArgumentError:
    core = _normal_core(*key)
    return core.summary if isinstance(core, _Normal) else core


def _normal(plan, cached=_normal_core):
    key = _normal_key(plan)
    try:
        result = cached(*key)
    except TypeError:  # an unhashable version / deepep_config, which the checks reject: not cached
        result = _normal_core.__wrapped__(*key)
        if isinstance(result, _Normal) and cached is _normal_summary:
            result = result.summary
    if isinstance(result, InvalidArgumentError):
        raise InvalidArgumentError(result.problems)
    return result


def report_normal(plan) -> Report:
    """Size UCCL-EP's normal-mode (high-throughput) ``Buffer`` for ``plan``: the NVL and RDMA
    buffers of DeepEP's recipe (``hidden_bytes = hidden x max(element size, 2)``, the max of
    each hint over UCCL's default dispatch and combine configs, or ``plan.deepep_config``), and
    every other allocation per GPU. The token count does not enter.

    Raises:
        InvalidArgumentError: an unknown version; ranks above 8 and not a multiple of 8 (the
            hints assert it); a rank count the tables lack; an odd ``num_sms``; a
            ``deepep_config`` that is not a ``Config``.
    """
    core = _normal(plan)
    v, configs = core.version, core.configs
    platform, nic = _platform(plan), _nic(plan)
    nvl_hint, rdma_hint = core.nvl_hints[core.nvl_key], core.rdma_hints[core.rdma_key]
    ranks = plan.num_ranks
    internode = max(ranks // plan.ranks_per_node, 1) > 1  # num_rdma_ranks > 1: the internode path (buffer.py:965)
    runtime = next(b for b in core.buffers if b.name == "UCCL proxies and runtime")
    findings = [
        Finding(severity="info", code="uccl-ep.token-independent",
                message=f"normal-mode buffers do not depend on the token count (num_max_tokens_per_rank = "
                        f"{format_int(plan.num_max_tokens_per_rank)} is not used)",
                data={"num_max_tokens_per_rank": plan.num_max_tokens_per_rank}),
        Finding(severity="info", code="uccl-ep.deepep-formulas",
                message=f"UCCL-EP's Config and hints are DeepEP V1's ({cite(_CFG, '24-132')}, from "
                        "thirdparty/DeepEP/csrc/config.hpp); the recipe sizes with hidden_bytes = hidden x "
                        f"max(element size, 2) = {format_int(core.hidden_bytes)}, so FP8 and BF16 get the same buffers",
                data={"hidden_bytes": core.hidden_bytes, "deepep_version": _deepep.NORMAL_VERSION}),
    ]
    if core.override is None:
        efa = nic == "efa" and ranks in (16, 32)
        findings.append(Finding(
            severity="info", code="uccl-ep.binding-config",
            message=f"NVL buffer set by the {core.nvl_key} config, RDMA buffer by the {core.rdma_key} config "
                    f"(UCCL-EP tables, {cite('bench/buffer.py', '741-794')}: "
                    f"dispatch {configs['dispatch'].as_tuple()}, "
                    f"combine {configs['combine'].as_tuple()}"
                    + ("; EFA rows: 512 RDMA receive tokens instead of 128" if efa else "") + ")",
            data={"nvl": core.nvl_key, "rdma": core.rdma_key, "efa_rows": efa}))
    if not internode and rdma_hint.num_bytes == 0:
        findings.append(Finding(
            severity="info", code="uccl-ep.intranode",
            message=f"{ranks} ranks fit one node: get_rdma_buffer_size_hint returns 0, and get_rdma_buffer still "
                    f"allocates max(0, 1) = 1 B ({cite('src/uccl_ep.cc', '281')})",
            data={}))
    if nic == "host-memory" and rdma_hint.num_bytes > 0:
        findings.append(Finding(
            severity="warning", code="uccl-ep.rdma-buffer-in-host-memory",
            message=f"the NIC cannot register GPU memory, so the {format_int(rdma_hint.num_bytes)} B RDMA buffer is "
                    f"pinned host memory ({cite('src/uccl_ep.cc', '294-304')}); GPU kernels reach it over PCIe",
            data={"num_bytes": rdma_hint.num_bytes}))
    findings.append(_host_memory_finding("uccl-ep", core.host_buffers, runtime))
    findings.append(_dropped_checks_finding("uccl-ep", False, rdma_hint.num_bytes))
    findings += _limit_findings("uccl-ep", core.limits)

    first = next(iter(configs.values()))
    quantities = (
        Quantity(name="hidden_bytes", value=core.hidden_bytes, unit="B"),
        Quantity(name="num_sms", value=first.num_sms, source=cite("bench/buffer.py", "74")),
        Quantity(name="num_channels", value=first.num_channels, source=cite(_CFG, "70")),
        Quantity(name="num_nvl_bytes", value=nvl_hint.num_bytes, unit="B", source=cite(_CFG, "60-92")),
        Quantity(name="num_rdma_bytes", value=rdma_hint.num_bytes, unit="B", source=cite(_CFG, "94-132")),
        Quantity(name="max_nvl_peers", value=plan.ranks_per_node, source=cite("src/uccl_ep.cc", "358-359")),
        Quantity(name="num_rdma_ranks", value=max(ranks // NUM_MAX_NVL_PEERS, 1)),
        Quantity(name="host_num_bytes", value=sum(b.num_bytes for b in core.host_buffers), unit="B"),
    )
    inputs = {
        "version": v.id, "num_ranks": ranks, "num_ranks_per_node": plan.ranks_per_node, "hidden": plan.hidden,
        "use_fp8_dispatch": plan.use_fp8_dispatch, "num_topk": plan.num_topk,
        "num_experts": plan.num_total_experts, "num_routed_experts": plan.num_experts,
        "num_redundant_experts": plan.num_redundant_experts, "platform": platform, "nic": nic,
    }
    if core.override is None:
        inputs["dispatch_config"] = list(configs["dispatch"].as_tuple())
        inputs["combine_config"] = list(configs["combine"].as_tuple())
    else:
        inputs["deepep_config"] = list(core.override.as_tuple())
    return Report(backend="uccl-ep", title="UCCL-EP normal-mode Buffer (NVL + RDMA, proxies)", upstream=_upstream(v),
                  inputs=inputs, buffers=core.buffers, records=core.records, quantities=quantities,
                  findings=tuple(findings), limits=core.limits, host_buffers=core.host_buffers)


def summarize_normal(plan) -> Summary:
    """``summary_of(report_normal(plan))``, computed once per token-independent plan shape.

    Raises:
        InvalidArgumentError: as :func:`report_normal`.
    """
    return _normal(plan, _normal_summary)


# ======================================================================================
# Low-latency mode
# ======================================================================================
_LL_FORMULA_LINES = {"signaling buffer": "243-256", "send buffer": "199-227", "recv buffer": "229-240"}
_ROUNDING = "hint rounding block"


def _ll_layout(plan) -> LowLatencyLayout:
    return LowLatencyLayout(num_max_dispatch_tokens_per_rank=plan.num_max_tokens_per_rank, hidden=plan.hidden,
                            num_ranks=plan.num_ranks, num_experts=plan.num_total_experts,
                            per_expert_batching=plan.per_expert_batching)


def _ll_hint(layout: LowLatencyLayout) -> int:
    hint = get_low_latency_rdma_size_hint(layout.num_max_dispatch_tokens_per_rank, layout.hidden, layout.num_ranks,
                                          layout.num_experts, per_expert_batching=layout.per_expert_batching)
    if hint > INT64_MAX:
        c = Checker()
        c.add("num_max_tokens_per_rank", layout.num_max_dispatch_tokens_per_rank,
              f"the low-latency RDMA buffer would need {hint:,} B, beyond the long num_rdma_bytes of Buffer "
              f"({INT64_MAX:,}, {cite('src/uccl_ep.cc', '350')}); lower --tokens or --experts")
        c.raise_if_any()
    return hint


def _ll_regions(layout: LowLatencyLayout, hint: int) -> list[Region]:
    t, e, r = layout.num_max_dispatch_tokens_per_rank, layout.num_experts, layout.num_ranks
    d, c = layout.num_bytes_per_dispatch_msg, layout.num_bytes_per_combine_msg
    if layout.per_expert_batching:
        send = (f"max(({e} + 1) experts x {format_int(t)} tokens x {format_int(d)} B (per-expert batching), "
                f"{e} x {format_int(t)} x {format_int(c)} B)")
        signaling = f"max({r} x {r} ranks, {e} experts) ints x 4 B, aligned to 128 B"
    else:
        send = (f"max({format_int(t)} tokens x {format_int(d)} B, "
                f"{e} experts x {format_int(t)} tokens x {format_int(c)} B)")
        signaling = f"{e} experts x 4 B, aligned to 128 B"
    formulas = {"signaling buffer": signaling, "send buffer": send,
                "recv buffer": f"{e} experts x {format_int(t)} tokens x max({format_int(d)}, {format_int(c)}) B"}
    regions = []
    for span in layout.spans():
        kind = span.name.rsplit(" ", 1)[0]
        grid = _deepep.slot_grid(span.num_bytes, e, t, c) if kind != "signaling buffer" else {}
        regions.append(Region(name=span.name, num_bytes=span.num_bytes, num_bytes_used=span.num_bytes,
                              formula=f"at offset {format_int(span.offset)}: {formulas[kind]}",
                              source=cite(_CFG, _LL_FORMULA_LINES[kind]), **grid))
    total = layout.total_bytes
    regions.append(Region(name=_ROUNDING, num_bytes=hint - total, num_bytes_used=0,
                          formula=f"((total {format_int(total)} + 128) / 128) x 128 - total: a full block even when "
                                  "aligned", source=cite(_CFG, "318-327")))
    return regions


def _default_hint(plan, hint: int) -> int:
    """The hint of the default (non-batching) build for ``plan`` (``hint`` when that is the build)."""
    if not plan.per_expert_batching:
        return hint
    return _deepep.ll_hint(plan.num_max_tokens_per_rank, plan.hidden, plan.num_ranks, plan.num_total_experts)


def report_low_latency(plan) -> Report:
    """Size UCCL-EP's low-latency ``Buffer`` for ``plan``: the RDMA buffer of
    ``Buffer.get_low_latency_rdma_size_hint(num_max_tokens_per_rank, hidden, num_ranks, num_experts +
    redundant)`` (its six spans and the hint's rounding block), the atomic buffer's signaling
    part, every other allocation per GPU, message byte maps and launch limits. ``num_nvl_bytes``
    is 0, as in UCCL-EP's low-latency tests (``ep/bench/test_low_latency.py:475-484``).

    Raises:
        InvalidArgumentError: an unknown version; a shape whose send/receive buffers are not
            multiples of 16 B (the layout asserts it); a hint beyond int64.
    """
    v = get_version(plan.version)
    platform, nic = _platform(plan), _nic(plan)
    layout = _ll_layout(plan)
    hint = _ll_hint(layout)
    tokens, hidden, ranks, experts = plan.num_max_tokens_per_rank, plan.hidden, plan.num_ranks, plan.num_total_experts
    rpn = plan.ranks_per_node
    rdma_in_host, _, rdma_why, _ = placement(platform, nic)
    rdma = rdma_allocation(_ll_regions(layout, hint), hint, rdma_in_host, rdma_why)
    workspace, runtime, host = _runtime_buffers(rpn, platform, nic)
    buffers = ((rdma,) if not rdma_in_host else ()) + (workspace, runtime)
    host_buffers = ((rdma,) if rdma_in_host else ()) + (host,)
    limits = _limit_checks(low_latency_limit_rows(v, platform, ranks, rpn, plan.num_topk, experts, hidden,
                                                  plan.use_fp8_dispatch, tokens, layout.atomic_buffer_bytes_used,
                                                  plan.per_expert_batching))
    records = (dispatch_message_record(hidden, plan.use_fp8_dispatch, layout.num_bytes_per_dispatch_msg),
               combine_message_record(hidden))

    default_hint = _default_hint(plan, hint)
    try:
        deepep = _deepep.deepep_ll_hint(tokens, hidden, ranks, experts)
        deepep_text = (f"DeepEP V1 {_deepep.LL_VERSION_NEWEST} sizes {format_int(deepep)} B for the same shape "
                       f"({format_int(deepep - default_hint)} B more than UCCL-EP's default build)")
    except InvalidArgumentError as error:  # DeepEP's newer, larger combine slot breaks its own 16-byte asserts
        deepep = None
        deepep_text = f"DeepEP V1 {_deepep.LL_VERSION_NEWEST} rejects this shape ({error})"
    findings = [
        Finding(severity="info", code="uccl-ll.deepep-layout",
                message=f"UCCL-EP's layout is DeepEP V1's as of {_deepep.LL_VERSION} (42253d0): combine slots of "
                        f"2 x hidden = {format_int(layout.num_bytes_per_combine_msg)} B with no LogFMT min/max (its "
                        f"LogFMT is simulated in BF16, {cite('src/internode_ll.cu', '950-951')}); " + deepep_text,
                data={"deepep_version": _deepep.LL_VERSION, "deepep_newest_num_bytes": deepep,
                      "uccl_default_num_bytes": default_hint}),
        Finding(severity="info", code="uccl-ll.hint-extra-block",
                message=f"the hint rounds total_bytes = {format_int(layout.total_bytes)} to the next multiple of 128 "
                        f"strictly above it ({format_int(hint)}); {format_int(rdma.num_bytes_needed)} B is the least "
                        "a run accepts",
                data={"total_bytes": layout.total_bytes, "hint": hint, "needed": rdma.num_bytes_needed}),
        Finding(severity="info", code="uccl-ll.atomic-signaling",
                message=f"the internode signaling buffers (2 x "
                        f"{format_int(layout.signaling_buffer_bytes_internode_aligned)} B of 64-bit counters) live in "
                        f"the proxy's {format_int(K_ATOMIC_BUFFER_SIZE)} B atomic buffer, "
                        f"not in the RDMA buffer ({cite(_CFG, '258-281')})",
                data={"num_bytes": layout.atomic_buffer_bytes_used, "atomic_buffer_num_bytes": K_ATOMIC_BUFFER_SIZE}),
    ]
    if plan.per_expert_batching:
        findings.append(Finding(
            severity="info", code="uccl-ll.per-expert-batching",
            message=f"PER_EXPERT_BATCHING build: each send buffer holds a {format_int(tokens)}-token batch per expert "
                    f"plus the temporary slots, and the counters are num_ranks^2, so num_ranks enters the hint; "
                    f"{format_int(hint - default_hint)} B more than the default build",
            data={"default_build_num_bytes": default_hint, "num_bytes": hint}))
    else:
        findings.append(Finding(severity="info", code="uccl-ll.num-ranks-unused",
                                message="num_ranks does not enter the low-latency hint (only num_experts does) unless "
                                        "UCCL-EP is built with PER_EXPERT_BATCHING=1 (--per-expert-batching), the build "
                                        "the DeepEP drop-in's instructions use (ep/deep_ep_wrapper/README.md:6 "
                                        "@da914a2)", data={}))
    if plan.num_redundant_experts:
        findings.append(Finding(
            severity="info", code="uccl-ll.eplb",
            message=f"EPLB: the library sees {experts} experts ({plan.num_experts} routed + "
                    f"{plan.num_redundant_experts} redundant); send and receive buffers grow linearly with them",
            data={"num_experts": experts}))
    if not plan.use_fp8_dispatch:
        findings.append(Finding(severity="info", code="uccl-ll.bf16-slots",
                                message="BF16 dispatch: the layout always sizes BF16 slots (FP8 uses less of them)",
                                data={}))
    if platform == "rocm" and v.ll_num_max_topk + 1 > 16:
        findings.append(Finding(
            severity="error", code="uccl-ll.rocm-dispatch-warps",
            message=f"on ROCm the low-latency dispatch launcher asserts kNumMaxTopK + 1 = {v.ll_num_max_topk + 1} <= "
                    f"num_warp_groups x num_warps_per_group, which kNumMaxWarpGroups = 16 caps at 16 "
                    f"({cite('src/internode_ll.cu', '16-20, 670-674')}): every dispatch fails since kNumMaxTopK became "
                    "16 (66170bc); v0.1.1 (kNumMaxTopK = 9) passes",
            data={"kNumMaxTopK": v.ll_num_max_topk, "kNumMaxWarpGroups": 16}))
    if rdma_in_host:
        findings.append(Finding(
            severity="warning", code="uccl-ll.rdma-buffer-in-host-memory",
            message=f"the NIC cannot register GPU memory, so the {format_int(hint)} B RDMA buffer is pinned host "
                    f"memory ({cite('src/uccl_ep.cc', '294-304')})", data={"num_bytes": hint}))
    findings.append(_host_memory_finding("uccl-ll", host_buffers, runtime))
    findings.append(_dropped_checks_finding("uccl-ll", True, hint))
    # The ROCm warp cap has its own finding above; the other broken limits get the generic one.
    findings += _limit_findings("uccl-ll", [lim for lim in limits
                                            if not (platform == "rocm" and lim.name.startswith("kNumMaxWarpGroups"))])

    quantities = (
        Quantity(name="num_scales", value=layout.num_scales, source=cite(_CFG, "182")),
        Quantity(name="num_bytes_per_dispatch_msg", value=layout.num_bytes_per_dispatch_msg, unit="B",
                 source=cite(_CFG, "193-195")),
        Quantity(name="num_bytes_per_combine_msg", value=layout.num_bytes_per_combine_msg, unit="B",
                 source=cite(_CFG, "196")),
        Quantity(name="send_buffer_bytes", value=layout.send_buffer_bytes, unit="B", source=cite(_CFG, "199-225")),
        Quantity(name="recv_buffer_bytes", value=layout.recv_buffer_bytes, unit="B", source=cite(_CFG, "231-238")),
        Quantity(name="signaling_buffer_bytes", value=layout.signaling_buffer_bytes, unit="B",
                 source=cite(_CFG, "243-253")),
        Quantity(name="signaling_buffer_bytes_aligned", value=layout.signaling_buffer_bytes_aligned, unit="B"),
        Quantity(name="signaling_buffer_bytes_internode_aligned", value=layout.signaling_buffer_bytes_internode_aligned,
                 unit="B", source=cite(_CFG, "258-274")),
        Quantity(name="total_bytes", value=layout.total_bytes, unit="B"),
        Quantity(name="num_rdma_bytes", value=hint, unit="B", source=cite(_CFG, "318-327")),
    ) + ((Quantity(name="deepep_num_rdma_bytes", value=deepep, unit="B"),) if deepep is not None else ()) + (
        Quantity(name="host_num_bytes", value=sum(b.num_bytes for b in host_buffers), unit="B"),
    )
    inputs = {
        "version": v.id, "num_max_dispatch_tokens_per_rank": tokens, "hidden": hidden, "num_ranks": ranks,
        "num_ranks_per_node": rpn, "num_experts": experts, "num_routed_experts": plan.num_experts,
        "num_redundant_experts": plan.num_redundant_experts, "num_topk": plan.num_topk,
        "use_fp8_dispatch": plan.use_fp8_dispatch, "platform": platform, "nic": nic,
        "per_expert_batching": plan.per_expert_batching,
    }
    return Report(backend="uccl-ll", title="UCCL-EP low-latency Buffer (RDMA buffer, proxies)", upstream=_upstream(v),
                  inputs=inputs, buffers=buffers, records=records, quantities=quantities, findings=tuple(findings),
                  limits=limits, host_buffers=host_buffers)


@lru_cache(maxsize=4096)
def _ll_static(version, hidden: int, ranks: int, experts: int, per_expert_batching: bool, ranks_per_node: int,
               platform: str, nic: str):
    """The token-independent part of :func:`summarize_low_latency`, or ``None`` when the
    one-token layout is rejected (then the full report decides). Every send and receive term
    of the layout is a product with ``T`` (``ep_config.hpp:212-236``), so the send and receive
    buffers at ``T`` tokens are ``T`` times their one-token value; the signaling buffers do not
    depend on ``T``."""
    try:
        v = get_version(version)
        one = LowLatencyLayout(num_max_dispatch_tokens_per_rank=1, hidden=hidden, num_ranks=ranks,
                               num_experts=experts, per_expert_batching=per_expert_batching)
    except InvalidArgumentError:
        return None
    rdma_in_host = placement(platform, nic)[0]
    workspace, runtime, _ = _runtime_buffers(ranks_per_node, platform, nic)
    return (v, one.send_buffer_bytes, one.recv_buffer_bytes, one.signaling_buffer_bytes_aligned,
            one.atomic_buffer_bytes_used, rdma_in_host, workspace.num_bytes + runtime.num_bytes, workspace.num_bytes)


def summarize_low_latency(plan) -> Summary:
    """``summary_of(report_low_latency(plan))`` without records, findings or formulas: the
    layout's sizes from the cached one-token layout (:func:`_ll_static`), the hint and the
    limit rows, as integers.

    Raises:
        InvalidArgumentError: as :func:`report_low_latency`.
    """
    platform, nic = _platform(plan), _nic(plan)
    key = (plan.version, plan.hidden, plan.num_ranks, plan.num_total_experts, plan.per_expert_batching,
           plan.ranks_per_node, platform, nic)
    try:
        static = _ll_static(*key)
    except TypeError:  # an unhashable version: rejected by the report below
        static = None
    if static is not None:
        v, send1, recv1, signaling, atomic_used, rdma_in_host, runtime_bytes, workspace_bytes = static
        tokens = plan.num_max_tokens_per_rank
        send, recv = tokens * send1, tokens * recv1
        total = 2 * (signaling + send + recv)
        hint = hint_round_up(total)
        if hint <= INT64_MAX:
            rows = low_latency_limit_rows(v, platform, plan.num_ranks, plan.ranks_per_node, plan.num_topk,
                                          plan.num_total_experts, plan.hidden, plan.use_fp8_dispatch, tokens,
                                          atomic_used, plan.per_expert_batching)
            broken = tuple(row[0] for row in rows if not row[4])
            if rdma_in_host:
                return Summary(num_bytes=runtime_bytes, num_bytes_needed=runtime_bytes, binding="workspace",
                               broken=broken)
            # The six spans in address order; the binding region is the first largest (Buffer.binding_region).
            if hint < workspace_bytes:
                binding = "workspace"
            elif signaling >= send and signaling >= recv:
                binding = "signaling buffer 0"
            else:
                binding = "send buffer 0" if send >= recv else "recv buffer 0"
            return Summary(num_bytes=hint + runtime_bytes, num_bytes_needed=-(-total // 128) * 128 + runtime_bytes,
                           binding=binding, broken=broken)
    return summary_of(report_low_latency(plan))
