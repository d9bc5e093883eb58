"""The ``uccl-ep`` report: UCCL-EP's normal-mode (high-throughput) ``Buffer`` for a plan, and its
fast summary. The token count does not enter: everything is computed once per shape
(:func:`_normal_core`)."""

from __future__ import annotations

from functools import lru_cache

from ..._record import Record
from ...errors import Checker, InvalidArgumentError
from ...report import Finding, Quantity, Report, Summary, summary_of
from ...units import format_int
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
from .limits import NUM_MAX_NVL_PEERS, normal_limit_rows
from .memory import nvl_allocation, placement, rdma_allocation
from .._limits import limit_checks, limit_findings
from .._shape_cache import shape_cache
from .report_parts import (CFG, dropped_checks_finding, host_memory_finding, nic_of, platform_of, runtime_buffers,
                           upstream_line)
from .smem import device_spec
from .versions import Version, cite, get_version

__all__ = ["report_normal", "summarize_normal"]


def _validate_normal(v: Version, ranks: int, num_sms: int | None, config: object) -> Config | None:
    """What no normal-mode size function can evaluate: the hints' rank assert, an odd
    ``Buffer.set_num_sms``, a rank count the tables lack, a ``Config`` of another type."""
    c = Checker()
    if ranks > NUM_MAX_NVL_PEERS and ranks % NUM_MAX_NVL_PEERS:
        c.add("num_ranks", ranks, f"must be below {NUM_MAX_NVL_PEERS} or a multiple of {NUM_MAX_NVL_PEERS} "
                                  f"(EP_HOST_ASSERT in the size hints, {cite(CFG, '65-66, 103')})")
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
        c.add("num_sms", config.num_sms, f"must be even above {NUM_MAX_NVL_PEERS} ranks ({cite(CFG, '67, 104')})")
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
                 topk: int, routed: int, redundant: int, platform: str, nic: str,
                 device: str | None = None) -> _Normal | InvalidArgumentError:
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
    workspace, runtime, host = runtime_buffers(rpn, platform, nic)
    buffers = (nvl_allocation(nvl[nvl_key], rpn),) + ((rdma_alloc,) if not in_host else ()) + (workspace, runtime)
    host_buffers = ((rdma_alloc,) if in_host else ()) + (host,)

    dispatch_cfg = configs.get("dispatch", override)
    element_size = 1 if fp8 else 2
    rdma_dispatched = rdma_buffer(dispatch_cfg, hidden * element_size, ranks).num_bytes
    combine_cfg = configs.get("combine", override)
    limits = tuple(limit_checks(normal_limit_rows(v, platform, ranks, rpn, topk, experts, hidden, fp8, configs,
                                                  combine_cfg, num_nvl_bytes, num_rdma_bytes, rdma_dispatched,
                                                  device=device_spec(device))))
    records = _deepep.hint_slot_records("NVL hint slot", nvl[nvl_key])
    if ranks > NUM_MAX_NVL_PEERS:
        records += _deepep.hint_slot_records("RDMA hint slot", rdma[rdma_key])
        records += internode_records(hidden, fp8, topk)
    summary = summary_of(Report(backend="uccl-ep", title="", upstream="", inputs={}, buffers=buffers, limits=limits))
    return _Normal(version=v, override=override, hidden_bytes=hidden_bytes, configs=configs, nvl_hints=nvl,
                   rdma_hints=rdma, nvl_key=nvl_key, rdma_key=rdma_key, buffers=buffers, host_buffers=host_buffers,
                   records=tuple(records), limits=limits, summary=summary)


def _normal_key(plan) -> tuple:
    return (plan.version, plan.num_ranks, plan.num_ranks_per_node, plan.hidden, plan.use_fp8_dispatch, plan.num_sms,
            plan.deepep_config, plan.num_topk, plan.num_experts, plan.num_redundant_experts, platform_of(plan),
            nic_of(plan), plan.device)


#: ``_normal(plan)``: :func:`_normal_core` for ``plan``; ``_normal(plan, _normal_summary)``: its summary.
_normal, _normal_summary = shape_cache(_normal_core, _normal_key)


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
    platform, nic = platform_of(plan), nic_of(plan)
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
                message=f"UCCL-EP's Config and hints are DeepEP V1's ({cite(CFG, '24-132')}, from "
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
    findings.append(host_memory_finding("uccl-ep", core.host_buffers, runtime))
    findings.append(dropped_checks_finding("uccl-ep", False, rdma_hint.num_bytes))
    findings += limit_findings("uccl-ep.limit", core.limits)

    first = next(iter(configs.values()))
    quantities = (
        Quantity(name="hidden_bytes", value=core.hidden_bytes, unit="B"),
        Quantity(name="num_sms", value=first.num_sms, source=cite("bench/buffer.py", "74")),
        Quantity(name="num_channels", value=first.num_channels, source=cite(CFG, "70")),
        Quantity(name="num_nvl_bytes", value=nvl_hint.num_bytes, unit="B", source=cite(CFG, "60-92")),
        Quantity(name="num_rdma_bytes", value=rdma_hint.num_bytes, unit="B", source=cite(CFG, "94-132")),
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
    return Report(backend="uccl-ep", title="UCCL-EP normal-mode Buffer (NVL + RDMA, proxies)", upstream=upstream_line(v),
                  inputs=inputs, buffers=core.buffers, records=core.records, quantities=quantities,
                  findings=tuple(findings), limits=core.limits, host_buffers=core.host_buffers)


def summarize_normal(plan) -> Summary:
    """``summary_of(report_normal(plan))``, computed once per token-independent plan shape.

    Raises:
        InvalidArgumentError: as :func:`report_normal`.
    """
    return _normal(plan, _normal_summary)
