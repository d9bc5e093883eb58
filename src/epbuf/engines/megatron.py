"""Megatron-LM's DeepEP buffer: the flex token dispatcher with ``--moe-flex-dispatcher-backend deepep``.

Upstream ``NVIDIA/Megatron-LM @d98e8a64ddf3`` (2026-08-22):

* megatron-core 0.16.1 (``--engine-version 0.16.1``, the newest release on PyPI, run by
  ``tests/conformance/megatron``): the same ``get_buffer``; ``num_sms`` is ``moe_deepep_num_sms`` (below);
  the ``allgather`` (Megatron's default) and ``alltoall`` dispatchers build no DeepEP buffer (0 B).
* ``megatron/core/transformer/moe/fused_a2a.py`` ``get_hidden_bytes(x)`` (l.24-33):
  ``x.size(1) * max(x.element_size(), 2)`` — FP8 activations count as 2 bytes.
* ``get_buffer(group, hidden_bytes)`` (l.36-69): for ``config in
  (Buffer.get_dispatch_config(group.size()), Buffer.get_combine_config(group.size()))``
  ``num_nvl_bytes = max(config.get_nvl_buffer_size_hint(hidden_bytes, group.size()), ...)`` and
  the same for RDMA; ``Buffer(group, num_nvl_bytes, num_rdma_bytes)`` (DeepEP defaults: normal
  mode, ``num_qps_per_rank = 24``) is (re)allocated only when none exists, the group changed,
  or the existing one is smaller — the buffer grows, it never shrinks. One ``Buffer`` at a time: the
  module-level ``_buffer`` (l.21, 46) is replaced by ``_buffer = Buffer(group, num_nvl_bytes,
  num_rdma_bytes)`` (l.68). Its constructor also allocates the NVL metadata and the 32 MiB workspace
  (:func:`epbuf.engines._deepep.constructor_allocations`).
* ``set_deepep_num_sms`` (l.261-263) -> ``Buffer.set_num_sms``; ``_DeepepManager.__init__``
  (``token_dispatcher.py:1287-1292``) passes ``moe_flex_dispatcher_num_sms`` or 20.
* ``TransformerConfig.__post_init__`` (``transformer_config.py:1792-1811``): the deprecated
  ``moe_deepep_num_sms`` / ``moe_hybridep_num_sms`` (:969, :973) are routed to
  ``moe_flex_dispatcher_num_sms`` (:964) only when it is ``None`` — an explicit flex value wins, with a
  deprecation warning; ``ValueError`` only when the two deprecated knobs disagree and the flex one is unset.
* Latent MoE (``--moe-latent-size``, ``transformer_config.py:952``): ``MoELayer`` projects the tokens
  to ``moe_latent_size`` before dispatch (``moe_layer.py:488-490``), so ``get_hidden_bytes`` sees the
  latent width; ``arguments.py:1980-1981`` asserts it is positive.
* ``MoEFlexTokenDispatcher.__init__`` (``token_dispatcher.py:1835-1842``): the group is
  ``tp_ep_group`` (expert TP x EP ranks) and ``assert self.tp_size * self.ep_size > 1``;
  ``expert_tensor_parallel_size`` defaults to ``tensor_model_parallel_size``
  (``megatron/training/arguments.py:587-588``).

DeepEP's hints are :mod:`epbuf.backends.deepep_v1` (``Config.get_nvl_buffer_size_hint`` ...).
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding, Quantity, Region, Report
from ..units import format_bytes, format_int
from . import _deepep
from .._search import largest_true
from ._common import EngineContext, budget_findings, limit_findings, max_buffer, topology
from ._knobs import EngineProblem, Knob, Setting
from ._report import EngineReport, Recommendation

REPO = "NVIDIA/Megatron-LM"
COMMIT = "d98e8a64ddf3"
FUSED = f"megatron/core/transformer/moe/fused_a2a.py @{COMMIT}"
DISPATCHER = f"megatron/core/transformer/moe/token_dispatcher.py @{COMMIT}"
CONFIG = f"megatron/core/transformer/transformer_config.py @{COMMIT}"
DEFAULT_NUM_SMS = 20  # "None -> 20 (DeepEP's historical mcore default)", DISPATCHER:1287
#: The search bound of the num_sms recommendation (an even SM count; the GPU's own count caps it further).
MAX_SEARCH_NUM_SMS = 256

#: Megatron-LM's own defaults for a launch line that leaves them unset (``--moe-token-dispatcher-type``
#: ``allgather``: ``transformer_config.py`` and ``megatron/training/arguments.py``), where epbuf's differ.
LAUNCH_DEFAULTS = {"--moe-token-dispatcher-type": "allgather"}

VERSIONS = {"main": f"Megatron-LM @{COMMIT} (2026-08-22): fused_a2a.get_buffer",
            "0.16.1": "megatron-core 0.16.1 (the newest on PyPI; its own code run by tests/conformance/megatron): "
                      "fused_a2a.get_buffer, num_sms = --moe-deepep-num-sms (default 20)"}

KNOBS = (
    Knob(name="--moe-token-dispatcher-type", kind="choice", default="flex", choices=("flex", "alltoall", "allgather"),
         default_note="epbuf's default: only the flex dispatcher allocates a DeepEP buffer", source=f"{REPO} {CONFIG}",
         help="MoE token dispatcher"),
    Knob(name="--moe-flex-dispatcher-backend", kind="choice", default="deepep", choices=("deepep", "hybridep", "ncclep"),
         source=f"{REPO} {CONFIG}", help="flex dispatcher backend"),
    Knob(name="--moe-flex-dispatcher-num-sms", kind="int", lo=2, source=f"{REPO} {CONFIG}:964",
         help="SMs for DeepEP (even; default 20)"),
    Knob(name="--moe-deepep-num-sms", kind="int", lo=2, source=f"{REPO} {CONFIG}:969",
         help="deprecated: routed to --moe-flex-dispatcher-num-sms when that is unset"),
    Knob(name="--moe-hybridep-num-sms", kind="int", lo=2, source=f"{REPO} {CONFIG}:973",
         help="deprecated: routed to --moe-flex-dispatcher-num-sms when that is unset (sizes DeepEP too)"),
    Knob(name="--moe-latent-size", kind="int", lo=1, source=f"{REPO} {CONFIG}:952; megatron/training/arguments.py:1980",
         help="latent MoE: tokens are dispatched at this width (moe_layer.py:488-490)"),
    Knob(name="--tensor-model-parallel-size", kind="int", lo=1, default=1, source=f"{REPO} {CONFIG}",
         help="TP size (the default expert TP size)"),
    Knob(name="--expert-tensor-parallel-size", kind="int", lo=1, source=f"{REPO} megatron/training/arguments.py:587",
         help="expert TP size (default: --tensor-model-parallel-size)"),
    Knob(name="--expert-model-parallel-size", kind="int", lo=1, source=f"{REPO} {CONFIG}",
         help="EP size; the DeepEP group is expert TP x EP"),
)


def _num_sms(ctx: EngineContext) -> tuple[int, Setting, list[Finding]]:
    """``moe_flex_dispatcher_num_sms`` after ``TransformerConfig.__post_init__`` (CONFIG:1792-1811), or 20.

    Raises:
        InvalidArgumentError: the two deprecated knobs disagree while the flex one is unset
            (upstream's ``ValueError``); an odd count (``Buffer.set_num_sms`` asserts it is even).
    """
    if ctx.version == "0.16.1":
        return _num_sms_0_16_1(ctx)
    flex = ctx.setting("--moe-flex-dispatcher-num-sms")
    deprecated = {name: ctx.value(name) for name in ("--moe-deepep-num-sms", "--moe-hybridep-num-sms")
                  if ctx.value(name) is not None}
    findings = []
    if deprecated:
        findings.append(Finding(
            severity="warning", code="megatron.deprecated-num-sms",
            message=f"{', '.join(deprecated)} is deprecated; use --moe-flex-dispatcher-num-sms "
                    + ("(it is set and wins)" if flex.value is not None else "(the value is routed to it)")
                    + f" ({CONFIG}:1792-1811)", data={"deprecated": deprecated}))
    value, note = DEFAULT_NUM_SMS, "None -> 20 (_DeepepManager.__init__)"
    if flex.value is not None:
        value, note = flex.value, "--moe-flex-dispatcher-num-sms"
    elif deprecated:
        if len(set(deprecated.values())) > 1:
            raise InvalidArgumentError([EngineProblem(
                "--moe-hybridep-num-sms", deprecated.get("--moe-hybridep-num-sms"),
                f"conflicts with --moe-deepep-num-sms = {deprecated.get('--moe-deepep-num-sms')}: "
                f"TransformerConfig.__post_init__ raises ValueError ({CONFIG}:1805-1810); set one "
                "--moe-flex-dispatcher-num-sms")])
        name, value = next(iter(deprecated.items()))
        note = f"{name} (deprecated, routed to moe_flex_dispatcher_num_sms)"
    if value % 2:
        raise InvalidArgumentError([EngineProblem(note.split(" ")[0] if note.startswith("--") else
                                                  "--moe-flex-dispatcher-num-sms", value,
                                                  "must be even: DeepEP's Buffer.set_num_sms asserts num_sms % 2 == 0")])
    return value, Setting(name="num_sms", value=value, source="derived", note=note), findings


def _num_sms_0_16_1(ctx: EngineContext) -> tuple[int, Setting, list[Finding]]:
    """megatron-core 0.16.1: ``_DeepepManager.__init__`` calls ``set_deepep_num_sms(config.moe_deepep_num_sms)``
    (``megatron/core/transformer/moe/token_dispatcher.py:1153``; ``transformer_config.py:722``: default 20);
    there is no ``moe_flex_dispatcher_num_sms`` and ``moe_hybridep_num_sms`` (l.725) sizes HybridEP only.

    Raises:
        InvalidArgumentError: ``--moe-flex-dispatcher-num-sms`` (not a 0.16.1 setting); an odd count.
    """
    if ctx.value("--moe-flex-dispatcher-num-sms") is not None:
        raise InvalidArgumentError([EngineProblem("--moe-flex-dispatcher-num-sms", ctx.value("--moe-flex-dispatcher-num-sms"),
                                                  "not a setting of megatron-core 0.16.1; use --moe-deepep-num-sms")])
    value = ctx.value("--moe-deepep-num-sms")
    note = "--moe-deepep-num-sms (0.16.1 token_dispatcher.py:1153)"
    if value is None:
        value, note = DEFAULT_NUM_SMS, "moe_deepep_num_sms default 20 (0.16.1 transformer_config.py:722)"
    if value % 2:
        raise InvalidArgumentError([EngineProblem("--moe-deepep-num-sms", value,
                                                  "must be even: DeepEP's Buffer.set_num_sms asserts num_sms % 2 == 0")])
    findings = []
    if ctx.value("--moe-hybridep-num-sms") is not None:
        findings.append(Finding(severity="info", code="megatron.hybridep-num-sms",
                                message="--moe-hybridep-num-sms sizes HybridEP only in megatron-core 0.16.1; DeepEP "
                                        f"takes --moe-deepep-num-sms ({value})", data={}))
    return value, Setting(name="num_sms", value=value, source="derived", note=note), findings


def _group(ctx: EngineContext) -> tuple[int, Setting]:
    tp = ctx.value("--tensor-model-parallel-size")
    etp_setting = ctx.setting("--expert-tensor-parallel-size")
    etp = etp_setting.value if etp_setting.value is not None else tp
    ep = ctx.value("--expert-model-parallel-size")
    if ep is not None:
        size = etp * ep
        if ctx.num_ranks is not None and ctx.num_ranks != size:
            raise InvalidArgumentError([EngineProblem(
                ctx.ranks_flag, ctx.num_ranks, f"the DeepEP group is expert TP x EP = {etp} x {ep} = {size}; "
                                               "drop one or make them agree")])
        return size, Setting(name="DeepEP group size (tp_ep)", value=size, source="derived",
                             note=f"expert TP {etp} x EP {ep}")
    if ctx.num_ranks is not None:
        return ctx.num_ranks, Setting(name="DeepEP group size (tp_ep)", value=ctx.num_ranks, source="flag",
                                      note=ctx.ranks_flag)
    return 8, Setting(name="DeepEP group size (tp_ep)", value=8, source="default",
                      note="epbuf's default (pass --expert-model-parallel-size)")


def recipe(ctx: EngineContext) -> EngineReport:
    """NVL and RDMA buffers of ``fused_a2a.get_buffer`` for the group and hidden size: the max of
    DeepEP's hints over the default dispatch and combine configs at ``num_sms``.

    Raises:
        InvalidArgumentError: what cannot be sized: a group of one rank, odd ``num_sms`` or EP
            sizes without a DeepEP config (DeepEP's config tables and size hints assert against
            them), conflicting flags.
    """
    from ..backends import deepep_v1

    if ctx.value("--moe-token-dispatcher-type") != "flex":
        return _no_buffer(ctx)
    if ctx.value("--moe-flex-dispatcher-backend") != "deepep":
        raise InvalidArgumentError([EngineProblem(
            "--moe-flex-dispatcher-backend", ctx.value("--moe-flex-dispatcher-backend"),
            "epbuf models the deepep backend of flex (hybridep and ncclep size their buffers in "
            "DeepEP's hybrid-ep branch / TransformerEngine)")])
    num_ranks, group_setting = _group(ctx)
    if num_ranks < 2:
        raise InvalidArgumentError([EngineProblem("--expert-model-parallel-size", num_ranks,
                                                  f"DeepEP dispatcher requires TPxEP > 1 ({DISPATCHER}:1836)")])
    per_node, num_nodes = topology(ctx, num_ranks)
    num_sms, sms_setting, sms_findings = _num_sms(ctx)
    version = deepep_v1.get_version(ctx.backend_version)
    latent = ctx.value("--moe-latent-size")
    width = latent if latent is not None else ctx.hidden  # moe_layer.py:488-490: dispatch at the latent width
    hidden_bytes = deepep_v1.get_hidden_bytes(width, True)  # width x max(element size, 2), FP8 or BF16

    def hints(sms: int) -> tuple[list[Region], list[Region]]:
        nvl, rdma = [], []
        for kind, get in (("dispatch", deepep_v1.get_dispatch_config), ("combine", deepep_v1.get_combine_config)):
            cfg = get(num_ranks, sms, version=version.id)
            for regions, fn, what in ((nvl, cfg.get_nvl_buffer_size_hint, "get_nvl_buffer_size_hint"),
                                      (rdma, cfg.get_rdma_buffer_size_hint, "get_rdma_buffer_size_hint")):
                n = fn(hidden_bytes, num_ranks, version=version.id)
                regions.append(Region(name=f"{kind} config", num_bytes=n, num_bytes_used=n,
                                      formula=f"Config{cfg.as_tuple()}.{what}({format_int(hidden_bytes)}, {num_ranks})",
                                      source=f"DeepEP {deepep_v1.CFG} @{version.short}"))
        return nvl, rdma

    def total(sms: int) -> int:
        """The device allocation at ``sms``: the hinted buffers and the constructor's own."""
        nvl, rdma = hints(sms)
        nvl_bytes = max(r.num_bytes for r in nvl)
        return nvl_bytes + max(r.num_bytes for r in rdma) + _deepep.constructor_num_bytes(version, nvl_bytes)

    nvl_regions, rdma_regions = hints(num_sms)
    src = f"{REPO} {FUSED}:36-69 get_buffer"
    buffers = [max_buffer("NVL buffer", nvl_regions, src)]
    if max(r.num_bytes for r in rdma_regions):
        buffers.append(max_buffer("RDMA buffer", rdma_regions, src))
    nvl_bytes = buffers[0].num_bytes
    rdma_bytes = buffers[1].num_bytes if len(buffers) > 1 else 0
    ctor = _deepep.constructor_allocations(version, nvl_bytes)  # the one get_buffer Buffer (module docstring)
    buffers += ctor
    limits = _deepep.constructor_limits(nvl_bytes, rdma_bytes, num_ranks, False)
    limits += _deepep.smem_limits(version, num_ranks, num_sms, ctx.device)
    findings = limit_findings("megatron", limits, {_deepep.RANKS_LIMIT: _deepep.RANKS_CONSEQUENCE}) + sms_findings
    findings += [
        Finding(severity="info", code="megatron.hidden-bytes",
                message=f"hidden_bytes = {'moe_latent_size' if latent is not None else 'hidden'} x max(element size, 2) "
                        f"= {format_int(hidden_bytes)} ({FUSED}:24-33): FP8 and BF16 activations size the same buffers",
                data={}),
        Finding(severity="info", code="megatron.grow-only",
                message="get_buffer reallocates only when a call needs more; with MoE layers of different hidden "
                        "sizes the largest one sizes the buffer", data={}),
        Finding(severity="info", code="megatron.token-independent",
                message="the buffers do not depend on the token count (per-channel rings of chunked tokens); "
                        "--moe-flex-dispatcher-num-sms is the knob that sizes them", data={}),
    ]
    findings += budget_findings("megatron", ctx, nvl_bytes + rdma_bytes + sum(b.num_bytes for b in ctor))
    recs = []
    if ctx.budget is not None:
        best = largest_true(1, MAX_SEARCH_NUM_SMS // 2, lambda half: total(2 * half) <= ctx.budget)
        value = 2 * best if best is not None else None
        recs.append(Recommendation(
            setting="--moe-flex-dispatcher-num-sms", value=value, goal="budget",
            num_bytes=total(value) if value is not None else None,
            message=(f"the largest even num_sms (up to {MAX_SEARCH_NUM_SMS}; your GPU's SM count caps it) whose NVL + "
                     f"RDMA buffers and DeepEP's 32 MiB workspace fit --budget {format_bytes(ctx.budget)}") if value is not None else
                    f"even num_sms = 2 takes {format_bytes(total(2))}, above --budget {format_bytes(ctx.budget)}"))
    if ctx.load is not None:
        findings.append(Finding(severity="info", code="megatron.load-unused",
                                message="--max-tokens-under-load does not change Megatron's DeepEP buffers", data={}))
    settings = [*ctx.base_settings, group_setting, sms_setting,
                Setting(name="nodes x GPUs per node", value=f"{num_nodes} x {per_node}", source="derived"),
                Setting(name="hidden_bytes", value=hidden_bytes, source="derived",
                        note=("--moe-latent-size (moe_layer.py:488-490)" if latent is not None else "hidden")
                             + " x max(element size, 2)")]
    settings += [st for st in ctx.settings.values() if st.value is not None]
    rep = Report(
        backend="megatron/deepep", title="Megatron-LM flex dispatcher (deepep): fused_a2a.get_buffer",
        upstream=f"{REPO} {FUSED}; DeepEP @{version.short}",
        inputs={"hidden": ctx.hidden, "dispatch_width": width, "hidden_bytes": hidden_bytes, "num_ranks": num_ranks, "num_nodes": num_nodes,
                "num_sms": num_sms, "deepep_version": version.id},
        buffers=tuple(buffers),
        quantities=(Quantity(name="num_qps_per_rank", value=24, source="DeepEP Buffer default"),
                    Quantity(name="num_nvl_bytes", value=nvl_bytes, unit="B"),
                    Quantity(name="num_rdma_bytes", value=rdma_bytes, unit="B")),
        findings=tuple(findings), limits=tuple(limits))
    return EngineReport(engine="megatron", version=ctx.version, version_note=VERSIONS[ctx.version], title=rep.title,
                        settings=tuple(settings), report=rep, recommendations=tuple(recs),
                        device_name=ctx.device_name, device_num_bytes=ctx.device_num_bytes, budget=ctx.budget)


def _no_buffer(ctx: EngineContext) -> EngineReport:
    """The ``allgather`` and ``alltoall`` dispatchers build no DeepEP buffer (only ``MoEFlexTokenDispatcher``'s
    ``_DeepepManager`` calls ``fused_a2a``): a report that says so, total 0 B."""
    kind = ctx.value("--moe-token-dispatcher-type")
    rep = Report(backend="megatron/none", title=f"Megatron-LM --moe-token-dispatcher-type {kind}: no DeepEP buffer",
                 upstream=f"{REPO} {DISPATCHER}", inputs={"dispatcher": kind}, buffers=(),
                 findings=(Finding(severity="info", code="megatron.no-deepep",
                                   message=f"the {kind} token dispatcher allocates no DeepEP buffer (only the flex "
                                           "dispatcher with --moe-flex-dispatcher-backend deepep calls "
                                           "fused_a2a.get_buffer)"),))
    settings = [*ctx.base_settings] + [st for st in ctx.settings.values() if st.value is not None]
    return EngineReport(engine="megatron", version=ctx.version, version_note=VERSIONS[ctx.version], title=rep.title,
                        settings=tuple(settings), report=rep, recommendations=(),
                        device_name=ctx.device_name, device_num_bytes=ctx.device_num_bytes, budget=ctx.budget)


def _engine():
    from ._api import EngineSpec

    return EngineSpec(
        name="megatron", title="Megatron-LM", knobs=KNOBS, versions=VERSIONS, default_version="main", recipe=recipe,
        aliases={"hidden": ("--hidden-size",), "num_topk": ("--moe-router-topk",), "num_experts": ("--num-experts",)},
        gpu=True, load_help="not used (the normal-mode buffers do not depend on tokens)",
        ranks_help="DeepEP group = --expert-tensor-parallel-size x --expert-model-parallel-size")


ENGINE = _engine()
