"""The ``deepep-v1`` report: DeepEP V1's normal-mode ``Buffer`` (NVL + RDMA) for a plan, and its
fast summary.

Upstream's recipe (``DOC:132-148``): ``hidden_bytes = hidden * max(element size, 2)``; for
the dispatch and the combine config of the rank count (or ``plan.deepep_config``), the max
of each hint. The token count and the expert count do not enter. What the hints cannot
evaluate raises (their own asserts, a rank count the tables lack, an odd
``Buffer.set_num_sms``, a product beyond C++ ``int``); everything refused later is a limit
(:mod:`.normal_limits`) with an ``error`` finding.
"""

from __future__ import annotations

from functools import lru_cache

from ..._record import Record
from ...errors import Checker, InvalidArgumentError
from ...report import Finding, Quantity, Report, Summary, summary_of
from ...units import format_int
from .._shape_cache import shape_cache
from .config import Config, hint_slot_records
from .constants import (BF16_BYTES, DEFAULT_NUM_SMS, HINT_NUM_MAX_SCALES, HINT_NUM_MAX_TOPK, NORMAL_NUM_MAX_RANKS,
                        NUM_MAX_NVL_PEERS, NUM_WORKSPACE_BYTES)
from .internode import internode_records
from .limits import check_plan, limit_checks, limit_findings, unmerged_finding, upstream_line
from .memory import nvl_allocation, workspace_allocation
from .normal_limits import normal_limit_rows
from .smem import device_spec
from .tables import get_combine_config, get_dispatch_config, get_hidden_bytes
from .versions import Version, get_version, topk_idx_bytes

__all__ = ["report_normal", "summarize_normal"]


def _validate(v: Version, ranks: int, num_sms: int | None, config: object, bits: object) -> tuple[int, Config | None]:
    """What makes the recipe's size functions refuse the plan, every problem at once; returns
    ``(sizeof(topk_idx_t), the override config or None)``."""
    c = Checker()
    idx_bytes = 8
    try:
        idx_bytes = topk_idx_bytes(v, bits)
    except InvalidArgumentError as error:
        c.problems.extend(error.problems)
    ranks_ok = not (ranks > NUM_MAX_NVL_PEERS and ranks % NUM_MAX_NVL_PEERS)
    if not ranks_ok:
        c.add("num_ranks", ranks, f"must be below {NUM_MAX_NVL_PEERS} or a multiple of {NUM_MAX_NVL_PEERS} (the size "
                                  f"hints assert it, {v.cite('CFG', '58, 84')}; so does Buffer, {v.cite('BUF', '114')})")
    if config is None:
        # The default tables: Buffer.set_num_sms(n) asserts an even n; the rank count must be listed.
        if num_sms is not None and num_sms % 2:
            c.add("num_sms", num_sms, f"must be even (Buffer.set_num_sms asserts it, {v.cite('PY', '162')})")
        elif ranks_ok and ranks > NORMAL_NUM_MAX_RANKS:
            c.add("num_ranks", ranks, f"allowed 1..{NORMAL_NUM_MAX_RANKS} in normal mode (NUM_MAX_NVL_PEERS x "
                                      f"NUM_MAX_RDMA_PEERS, Buffer constructor, {v.cite('BUF', '113')}); the default "
                                      "config tables end there")
        elif ranks_ok:
            try:
                get_dispatch_config(ranks, num_sms or DEFAULT_NUM_SMS, version=v.id)
            except InvalidArgumentError as error:
                c.problems.extend(error.problems)
    elif not isinstance(config, Config):
        c.add("deepep_config", config, "must be an epbuf.backends.deepep_v1.Config")
        config = None
    elif ranks_ok and ranks > NUM_MAX_NVL_PEERS and config.num_sms % 2:
        c.add("num_sms", config.num_sms, f"must be even above {NUM_MAX_NVL_PEERS} ranks (num_ranks = {ranks}; "
                                         f"{v.cite('CFG', '59, 85')})")
    c.raise_if_any()
    return idx_bytes, config


class _Normal(Record):
    """Everything of :func:`report_normal` shared between plans differing only in the token count
    (which normal mode does not read), cached by :func:`_core`. Read-only."""

    version: Version
    override: Config | None
    hidden_bytes: int
    idx_bits: int
    configs: dict  # "dispatch"/"combine" (or "deepep_config") -> Config
    nvl: dict  # same keys -> NVL Buffer
    rdma: dict  # same keys -> RDMA Buffer
    nvl_key: str
    rdma_key: str
    records: tuple
    limits: tuple  # LimitCheck records, from normal_limit_rows
    buffers: tuple  # the constructor's device allocations: NVL (hint + metadata), RDMA, workspace
    summary: Summary


@lru_cache(maxsize=256)  # buffers with their formulas, records, limits: a few tens of kB each
def _core(version: str | None, ranks: int, num_ranks_per_node: int | None, hidden: int, fp8: bool,
          num_sms: int | None, deepep_config: object, topk: int, routed: int, redundant: int,
          bits: int | None, device: str | None = None) -> _Normal | InvalidArgumentError:
    """The token-independent part of :func:`report_normal`, keyed on the plan fields it reads
    (:func:`_key`); a rejected plan gives its error (re-raised by the caller)."""
    try:
        v = get_version(version)
        idx_bytes, override = _validate(v, ranks, num_sms, deepep_config, bits)
        hidden_bytes = get_hidden_bytes(hidden, fp8)
        if override is not None:
            configs = {"deepep_config": override}
        else:
            sms = num_sms or DEFAULT_NUM_SMS
            configs = {"dispatch": get_dispatch_config(ranks, sms, version=v.id),
                       "combine": get_combine_config(ranks, sms, version=v.id)}
        idx_bits = idx_bytes * 8
        nvl = {k: cfg.nvl_buffer(hidden_bytes, ranks, version=v.id, num_topk_idx_bits=idx_bits)
               for k, cfg in configs.items()}
        rdma = {k: cfg.rdma_buffer(hidden_bytes, ranks, version=v.id, num_topk_idx_bits=idx_bits)
                for k, cfg in configs.items()}
    except InvalidArgumentError as error:
        return error
    # The recipe keeps the larger hint of each kind; the first config wins a tie.
    nvl_key = max(nvl, key=lambda k: nvl[k].num_bytes)
    rdma_key = max(rdma, key=lambda k: rdma[k].num_bytes)
    nvl_buffer, rdma_buffer = nvl[nvl_key], rdma[rdma_key]
    records = hint_slot_records("NVL hint slot", nvl_buffer)
    if ranks > NUM_MAX_NVL_PEERS:
        records += hint_slot_records("RDMA hint slot", rdma_buffer)
        records += internode_records(hidden, fp8, topk)
    ranks_per_node = num_ranks_per_node if num_ranks_per_node is not None else min(ranks, NUM_MAX_NVL_PEERS)
    limits = tuple(limit_checks(normal_limit_rows(v, ranks, ranks_per_node, topk, routed + redundant, hidden, fp8,
                                                  configs, nvl_buffer.num_bytes, rdma_buffer.num_bytes, idx_bytes,
                                                  device=device_spec(device))))
    # The hints stay upstream's integers (quantities, limits); the report lists what Buffer allocates.
    buffers = (nvl_allocation(v, nvl_buffer), rdma_buffer, workspace_allocation(v))
    # summary_of reads the buffers and the limits only, the parts computed here.
    summary = summary_of(Report(backend="deepep-v1", title="", upstream="", inputs={}, buffers=buffers, limits=limits))
    return _Normal(version=v, override=override, hidden_bytes=hidden_bytes, idx_bits=idx_bits, configs=configs,
                   nvl=nvl, rdma=rdma, nvl_key=nvl_key, rdma_key=rdma_key, records=tuple(records), limits=limits,
                   buffers=buffers, summary=summary)


def _key(plan) -> tuple:
    """The plan fields normal mode reads, in :func:`_core`'s order (no token count)."""
    return (plan.version, plan.num_ranks, plan.num_ranks_per_node, plan.hidden, plan.use_fp8_dispatch,
            plan.num_sms, plan.deepep_config, plan.num_topk, plan.num_experts, plan.num_redundant_experts,
            plan.num_topk_idx_bits, plan.device)


#: ``_cached(plan)``: :func:`_core` for ``plan``; ``_cached(plan, _summary)``: its summary, kept longer.
_cached, _summary = shape_cache(_core, _key, check_plan)


def report_normal(plan) -> Report:
    """Size DeepEP V1's normal-mode ``Buffer`` (NVL and RDMA buffers) for ``plan`` as upstream's recipe
    does, with what the constructor adds on the device (:mod:`.memory`: the NVL metadata tables and
    the 32 MiB workspace; ``num_nvl_bytes`` / ``num_rdma_bytes`` stay the hints); limits and
    findings for what a run would refuse.

    Raises:
        InvalidArgumentError: an unknown version or commit; ranks neither below nor a multiple of 8
            (the hints assert it); a rank count the default tables lack (above 160 among them);
            an odd ``num_sms``; 32-bit top-k indices where the build option does not exist; a
            ``deepep_config`` that is not a :class:`Config`; a product beyond the hints' C++ ``int``.
    """
    core = _cached(plan)
    v, override, configs, nvl, rdma = core.version, core.override, core.configs, core.nvl, core.rdma
    nvl_key, rdma_key, hidden_bytes, limits, records = core.nvl_key, core.rdma_key, core.hidden_bytes, core.limits, \
        core.records
    nvl_buffer, rdma_buffer = nvl[nvl_key], rdma[rdma_key]
    ranks = plan.num_ranks
    internode = ranks > NUM_MAX_NVL_PEERS
    findings = [
        Finding(severity="info", code="deepep-v1.token-independent",
                message=f"normal-mode buffers do not depend on the token count (num_max_tokens_per_rank = "
                        f"{format_int(plan.num_max_tokens_per_rank)} is not used): they hold per-channel rings of "
                        "chunked tokens", data={"num_max_tokens_per_rank": plan.num_max_tokens_per_rank}),
        Finding(severity="info", code="deepep-v1.hidden-bytes",
                message=f"the recipe sizes with hidden_bytes = hidden x max(element size, 2) = "
                        f"{format_int(hidden_bytes)}, so FP8 and BF16 dispatch get the same buffers",
                data={"hidden_bytes": hidden_bytes, "source": v.cite("DOC", "151-153", "get_hidden_bytes")}),
        Finding(severity="info", code="deepep-v1.hint-assumptions",
                message=f"the hints reserve {HINT_NUM_MAX_TOPK} top-k entries and {HINT_NUM_MAX_SCALES} fp32 scales "
                        "per token slot whatever the model uses; the kernels check the real sizes at run time "
                        "(not modelled here, so 'real need' equals the hint)",
                data={"kNumMaxTopK": HINT_NUM_MAX_TOPK, "kNumMaxScales": HINT_NUM_MAX_SCALES}),
    ]
    if override is None:
        findings.append(Finding(
            severity="info", code="deepep-v1.binding-config",
            message=f"NVL buffer set by the {nvl_key} config, RDMA buffer by the {rdma_key} config "
                    f"(dispatch {configs['dispatch'].as_tuple()}, combine {configs['combine'].as_tuple()}; "
                    "RDMA receive counts rounded up to their send chunk)", data={"nvl": nvl_key, "rdma": rdma_key}))
    elif plan.num_sms is not None and plan.num_sms != override.num_sms:
        findings.append(Finding(severity="info", code="deepep-v1.num-sms-ignored",
                                message=f"num_sms = {plan.num_sms} is ignored: deepep_config brings num_sms = "
                                        f"{override.num_sms}", data={}))
    if not internode:
        findings.append(Finding(severity="info", code="deepep-v1.intranode",
                                message=f"{ranks} ranks fit one NVLink node: get_rdma_buffer_size_hint returns 0",
                                data={"source": v.cite("CFG", "76-78", "get_rdma_buffer_size_hint")}))
    if internode and plan.num_topk == 0:
        findings.append(Finding(severity="info", code="deepep-v1.topk-unspecified",
                                message="num_topk = 0 (unspecified): the internode token records show no top-k fields",
                                data={}))
    findings += unmerged_finding(v)
    findings += limit_findings("deepep-v1.limit", limits)

    first = next(iter(configs.values()))
    by_name = {r.name: r.num_bytes for r in records}
    quantities = [
        Quantity(name="hidden_bytes", value=hidden_bytes, unit="B", source=v.cite("DOC", "151-153")),
        Quantity(name="num_sms", value=first.num_sms),
        Quantity(name="num_channels", value=first.num_channels, source=v.cite("CFG", "62")),
        Quantity(name="num_nvl_ranks", value=min(ranks, NUM_MAX_NVL_PEERS)),
        Quantity(name="num_rdma_ranks", value=max(ranks // NUM_MAX_NVL_PEERS, 1)),
    ]
    for key in configs:
        quantities.append(Quantity(name=f"{key}_num_nvl_bytes", value=nvl[key].num_bytes, unit="B"))
        quantities.append(Quantity(name=f"{key}_num_rdma_bytes", value=rdma[key].num_bytes, unit="B"))
    quantities.append(Quantity(name="num_nvl_bytes", value=nvl_buffer.num_bytes, unit="B"))
    quantities.append(Quantity(name="num_rdma_bytes", value=rdma_buffer.num_bytes, unit="B"))
    for record in records:
        quantities.append(Quantity(name=record.name.replace(" ", "_") + "_num_bytes", value=record.num_bytes, unit="B"))
    # The names every backend shares (README, JSON schemas). hidden_bytes above is the hints'
    # argument (hidden x max(element size, 2)), upstream's meaning in V1.
    quantities += [
        Quantity(name="num_topk", value=plan.num_topk, source=v.cite("BUF", "482", "topk_idx.size(1)")),
        Quantity(name="element_size", value=1 if plan.use_fp8_dispatch else BF16_BYTES, unit="B"),
        Quantity(name="num_scaleup_ranks", value=min(ranks, NUM_MAX_NVL_PEERS), source=v.cite("CFG", "61")),
        Quantity(name="num_scaleout_ranks", value=max(ranks // NUM_MAX_NVL_PEERS, 1), source=v.cite("CFG", "60")),
        Quantity(name="num_topk_idx_bits", value=core.idx_bits),
        Quantity(name="workspace_num_bytes", value=NUM_WORKSPACE_BYTES, unit="B",
                 source=v.cite("CPL", "7", "LEGACY_NUM_WORKSPACE_BYTES")),
    ]
    if "NVL hint slot" in by_name:
        quantities.append(Quantity(name="hint_dispatch_record_num_bytes", value=by_name["NVL hint slot"], unit="B",
                                   source=v.cite("CFG", "66-70")))
    if internode:
        source = v.cite("INK", "47-51", "get_num_bytes_per_token")
        quantities += [Quantity(name="dispatch_record_num_bytes", value=by_name["internode dispatch token"], unit="B",
                                source=source),
                       Quantity(name="combine_record_num_bytes", value=by_name["internode combine token"], unit="B",
                                source=source)]

    inputs = {
        "version": v.id, "deepep_version": v.id, "num_ranks": ranks, "num_ranks_per_node": plan.ranks_per_node,
        "hidden": plan.hidden, "use_fp8_dispatch": plan.use_fp8_dispatch, "hidden_bytes": hidden_bytes,
        "num_topk": plan.num_topk, "num_experts": plan.num_experts,
        "num_redundant_experts": plan.num_redundant_experts, "num_topk_idx_bits": core.idx_bits,
    }
    if override is None:
        inputs["num_sms"] = plan.num_sms or DEFAULT_NUM_SMS
        inputs["dispatch_config"] = list(configs["dispatch"].as_tuple())
        inputs["combine_config"] = list(configs["combine"].as_tuple())
    else:
        inputs["deepep_config"] = list(override.as_tuple())
    return Report(backend="deepep-v1", title="DeepEP V1 normal-mode Buffer (NVL + RDMA)", upstream=upstream_line(v),
                  inputs=inputs, buffers=core.buffers, records=tuple(records),
                  quantities=tuple(quantities), findings=tuple(findings), limits=tuple(limits))


def summarize_normal(plan) -> Summary:
    """``summary_of(report_normal(plan))`` without building the report: the summary is computed once
    per token-independent plan shape, from the same buffers and limit rows.

    Raises:
        InvalidArgumentError: as :func:`report_normal`.
    """
    return _cached(plan, _summary)
