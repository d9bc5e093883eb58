"""SGLang's DeepEP buffers: what ``--moe-a2a-backend deepep`` / ``deepep_v2`` allocates per GPU.

Upstream ``sgl-project/sglang`` (read from the public code index, several versions;
``python/sglang/srt/layers/moe/token_dispatcher/deepep.py`` at ``454e84da`` and ``003a81bf``,
whose sizing code is the same; ``TD`` below):

* ``DeepEPBuffer.get_deepep_buffer(group, hidden_size, param_bytes, deepep_mode,
  num_max_dispatch_tokens_per_rank, num_experts)`` — a process-wide singleton. Normal part
  (``deepep_mode`` normal or auto): ``hidden_bytes = hidden_size * param_bytes``; for the
  dispatch and combine configs (``--deepep-config`` or ``Buffer.get_dispatch_config(R)`` /
  ``get_combine_config(R)``) ``num_nvl_bytes = max(config.get_nvl_buffer_size_hint(hidden_bytes,
  R), ...)`` and the same for RDMA. Low-latency part (low_latency or auto): asserts
  ``num_experts % R == 0``; ``num_rdma_bytes = max(Buffer.get_low_latency_rdma_size_hint(T,
  hidden_size, R, num_experts), num_rdma_bytes)``. ``Buffer(group, num_nvl_bytes, num_rdma_bytes,
  low_latency_mode = deepep_mode.enable_low_latency(), num_qps_per_rank = num_sms | E / R |
  max(num_sms, E / R))``. One ``Buffer`` per process in every mode, ``auto`` included (@003a81bf):
  ``DeepEPBuffer._buffer = None`` (l.149) is returned once set (l.165-166) and assigned once,
  ``cls._buffer = Buffer(...)`` (l.233); the normal and low-latency dispatchers share it. Its
  constructor also allocates the NVL metadata (``num_nvl_bytes > 0``: normal and auto) and the 32 MiB
  workspace (:func:`epbuf.engines._deepep.constructor_allocations`).
* ``_DeepEPDispatcherImplBase.__init__``: ``self.params_bytes = 2`` (``454e84da`` and earlier);
  T = ``SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK`` (``EnvInt(128)``,
  ``python/sglang/srt/environ.py``) and ``assert self.num_max_dispatch_tokens_per_rank <= 1024``
  ("DeepEP internode_ll dispatch uses FINISHED_SUM_TAG=1024").
* SGLang 0.5.23 (``--engine-version 0.5.23``, the PyPI wheel): ``self.params_bytes = 2``
  (``sglang/srt/layers/moe/token_dispatcher/deepep.py:402``) whatever the dispatch dtype, which
  ``set_deepep_dispatcher_dtype`` (l.448-506) maps to ``use_fp8`` only; the buffer is built on the
  first dispatch (``_get_buffer``, l.733-744 and 963-972), the singleton of l.204-305.
* ``003a81bf``: ``set_deepep_dispatcher_dtype`` sets ``params_bytes`` 2 for BF16 output and 1 for
  FP8 / NVFP4; the output dtype is ``--deepep-dispatcher-output-dtype`` (not auto), else the
  deprecated ``SGLANG_DEEPEP_BF16_DISPATCH``, else FP8 (the GPU default).
* ``DeepEPConfig`` (``--deepep-config``): JSON text or a file path (``load_json_config``) with
  ``normal_dispatch`` and ``normal_combine`` dicts of ``deep_ep.Config`` keyword arguments;
  asserts equal ``num_sms``. Without it ``num_sms = Buffer.num_sms`` (20).
* Dispatch dtype on ``auto`` (``python/sglang/srt/layers/moe/utils.py`` ``get_deepep_output_dtype``
  @004813e1): the flag, ``SGLANG_DEEPEP_BF16_DISPATCH``, the quant config's NVFP4 / dtype, then BF16
  for ``--moe-runner-backend`` ``flashinfer_cutedsl`` / ``cutlass`` (``humming`` in later versions), else FP8.
* Experts: routed + ``--ep-num-redundant-experts``; with fused shared experts and DeepEP every EP rank
  holds its own shared slots (``fused_moe_triton/layer.py`` ``FusedMoE.__init__``: ``num_shared_slots =
  num_fused_shared_experts x moe_ep_size`` inside ``num_experts``) and tokens route to ``top_k +
  num_fused_shared_experts`` experts — DeepSeek-V3, TP16, one fused: 256 + 16 = 272, top-k 9. Older
  versions disabled the fusion with DeepEP (``--fused-shared-experts 0``, the default).
* ``python/sglang/srt/server_args.py``: with ``--moe-a2a-backend deepep`` SGLang sets
  ``ep_size = tp_size`` ("The expert parallel size is adjusted to be the same as the tensor
  parallel size"); the DeepEP group is the TP group on CUDA.
* DeepEP V2 (``token_dispatcher/deepep_v2.py @0134da0b``): ``ElasticBuffer(group,
  num_max_tokens_per_rank = SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK (128), hidden,
  num_topk, use_fp8_dispatch, allow_hybrid_mode = --deepep-v2-mode == "hybrid")``; dispatch
  raises ``ValueError`` when a rank's batch exceeds T.

DeepEP's hints are :mod:`epbuf.backends.deepep_v1` / :mod:`epbuf.backends.deepep_v2`.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding, LimitCheck, Quantity, Region, Report
from ..units import format_bytes, format_int
from . import _deepep, _sglang_launch, _sglang_mori, _sglang_v2, _uccl, _uccl_sglang
from ._common import EngineContext, budget_findings, limit, limit_findings, max_buffer, topology
from ._knobs import EngineProblem, Knob, Setting
from ._report import EngineReport

REPO = "sgl-project/sglang"
TD = "python/sglang/srt/layers/moe/token_dispatcher/deepep.py"
ENVIRON = "python/sglang/srt/environ.py"
SERVER_ARGS = "python/sglang/srt/server_args.py"
#: "DeepEP internode_ll dispatch uses FINISHED_SUM_TAG=1024" (TD, _DeepEPDispatcherImplBase.__init__).
MAX_DISPATCH_TOKENS = 1024
EXPERTS_DIVIDE = "num_experts % group.size() == 0 (low-latency)"
SAME_NUM_SMS = "--deepep-config normal_combine num_sms == normal_dispatch num_sms"
NUM_SMS = 20  # deep_ep.Buffer.num_sms
MOE_UTILS = "python/sglang/srt/layers/moe/utils.py"
FUSED_MOE = "python/sglang/srt/layers/moe/fused_moe_triton/layer.py FusedMoE.__init__"
#: ``MoeRunnerBackend`` values (MOE_UTILS @004813e1; ``humming`` from later versions).
RUNNER_BACKENDS = ("auto", "deep_gemm", "triton", "triton_kernel", "flashinfer_trtllm", "flashinfer_trtllm_routed",
                   "flashinfer_cutlass", "flashinfer_mxfp4", "flashinfer_cutedsl", "cutlass", "marlin", "aiter",
                   "humming")
#: Runners that quantize internally and take BF16 dispatch (get_deepep_output_dtype, step 4).
BF16_RUNNERS = ("flashinfer_cutedsl", "cutlass", "humming")

VERSIONS = {
    "main": f"SGLang {TD} @003a81bf: param_bytes = 1 for FP8/NVFP4 dispatch output (the GPU default), 2 for BF16",
    "0.5.23": "SGLang 0.5.23 (the PyPI release, its own code run by tests/conformance/sglang): "
              "params_bytes = 2 (token_dispatcher/deepep.py:402); MoRI --deepep-mode auto resolves to normal",
    "param-bytes-2": f"SGLang {TD} @454e84da and earlier: param_bytes = 2 whatever the dispatch dtype",
}

KNOBS = (
    Knob(name="--moe-a2a-backend", kind="choice", default="deepep",
         choices=("deepep", "deepep_v2", "mori", "pplx", "none"),
         default_note="epbuf's default: SGLang's own default none allocates no DeepEP buffer",
         source=f"{REPO} {SERVER_ARGS}", help="the MoE all-to-all backend"),
    Knob(name="--deepep-mode", kind="choice", default="auto", choices=("normal", "low_latency", "auto"),
         source=f"{REPO} {SERVER_ARGS}", help="DeepEP V1 mode (auto: normal for prefill, low_latency for decode)"),
    Knob(name="--tp-size", kind="int", lo=1, aliases=("--tp",), source=f"{REPO} {SERVER_ARGS}",
         help="TP size; with DeepEP SGLang sets ep_size = tp_size (the EP group)"),
    Knob(name="--ep-size", kind="int", lo=1, aliases=("--ep", "--expert-parallel-size"),
         source=f"{REPO} {SERVER_ARGS}", help="EP size (overridden by --tp-size with DeepEP)"),
    Knob(name="--ep-num-redundant-experts", kind="int", lo=0, default=0, source=f"{REPO} {SERVER_ARGS}",
         help="EPLB redundant experts added to the experts DeepEP sees"),
    Knob(name="--deepep-config", kind="json", source=f"{REPO} {TD} DeepEPConfig",
         help="JSON text or file with normal_dispatch / normal_combine deep_ep.Config arguments"),
    Knob(name="--deepep-dispatcher-output-dtype", kind="choice", default="auto",
         choices=("auto", "bf16", "fp8", "nvfp4"), source=f"{REPO} {TD} @003a81bf get_deepep_output_dtype",
         help="dispatch output dtype (main: sets param_bytes; V2: use_fp8_dispatch)"),
    Knob(name="--deepep-v2-mode", kind="choice", default="direct", choices=("direct", "hybrid"),
         source=f"{REPO} {SERVER_ARGS}", help="DeepEP V2 ElasticBuffer allow_hybrid_mode"),
    Knob(name="--fused-shared-experts", kind="int", lo=0, default=0,
         help="epbuf's flag: shared experts SGLang fuses into the routed ones (num_fused_shared_experts; "
              "with DeepEP each EP rank gets its own slots)"),
    Knob(name="--moe-runner-backend", kind="choice", default="auto", choices=RUNNER_BACKENDS,
         source=f"{REPO} {SERVER_ARGS}; {MOE_UTILS} get_deepep_output_dtype",
         help="MoE runner; flashinfer_cutedsl, cutlass and humming take BF16 dispatch on auto"),
    Knob(name="SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK", kind="int", lo=1, default=128,
         source=f"{REPO} {ENVIRON} EnvInt(128)", help="T of the low-latency buffer (SGLang asserts <= 1024)"),
    Knob(name="SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK", kind="int", lo=1, default=128,
         source=f"{REPO} {ENVIRON} EnvInt(128)", help="num_max_tokens_per_rank of the V2 ElasticBuffer"),
    Knob(name="SGLANG_DEEPEP_BF16_DISPATCH", kind="bool", default=False, source=f"{REPO} {ENVIRON}",
         help="deprecated: BF16 dispatch output"),
    Knob(name="SGLANG_DEEPEP_V2_NUM_SMS", kind="int", lo=0, default=0, affects_size=False,
         source=f"{REPO} {ENVIRON}", help="V2 SMs per call"),
    Knob(name="NVSHMEM_QP_DEPTH", kind="int", lo=1, default=_deepep.DEFAULT_QP_DEPTH,
         source=_deepep.QP_DEPTH_SOURCE, help="DeepEP low-latency: must be >= (T + 1) x 2"),
) + _sglang_mori.KNOBS + _sglang_v2.KNOBS + _sglang_launch.KNOBS + _uccl.KNOBS


def _ep_size(ctx: EngineContext) -> tuple[int, Setting, list[Finding]]:
    tp, ep = ctx.setting("--tp-size").value, ctx.setting("--ep-size").value
    ep_flag = "--ep-size"
    if ep is None:
        ep, ep_flag = ctx.num_ranks, ctx.ranks_flag
    findings = []
    if tp is not None:
        if ep is not None and ep != tp:
            findings.append(Finding(severity="warning", code="sglang.ep-size-overridden",
                                    message=f"SGLang sets ep_size = tp_size = {tp} with DeepEP ({SERVER_ARGS}); "
                                            f"the EP size {ep} given is ignored", data={"tp_size": tp, "ep_size": ep}))
        return tp, Setting(name="EP size", value=tp, source="flag", note="--tp-size (SGLang: ep_size = tp_size)"), findings
    if ep is not None:
        findings.append(Finding(severity="info", code="sglang.pass-tp-size",
                                message="SGLang sets ep_size = tp_size with DeepEP; epbuf used the EP size given as the "
                                        "TP size (pass --tp-size as you launch SGLang)", data={}))
        return ep, Setting(name="EP size", value=ep, source="flag", note=ep_flag), findings
    return 8, Setting(name="EP size", value=8, source="default", note="epbuf's default (pass --tp-size)"), findings


def _dispatch_dtype(ctx: EngineContext) -> str:
    """``get_deepep_output_dtype`` on a GPU (MOE_UTILS @004813e1): the flag, the deprecated variable, BF16
    for :data:`BF16_RUNNERS`, else FP8 (the quant config's NVFP4 between: ``param_bytes`` 1 as FP8)."""
    dtype = ctx.value("--deepep-dispatcher-output-dtype")
    if dtype == "auto":
        if ctx.value("SGLANG_DEEPEP_BF16_DISPATCH") or ctx.value("--moe-runner-backend") in BF16_RUNNERS:
            dtype = "bf16"
        else:
            dtype = "fp8"
    return dtype


def _param_bytes(ctx: EngineContext) -> tuple[int, str]:
    """``params_bytes`` of the dispatcher (TD) for the version."""
    if ctx.version == "param-bytes-2":
        return 2, "self.params_bytes = 2 (454e84da)"
    if ctx.version == "0.5.23":
        return 2, "self.params_bytes = 2 (0.5.23 token_dispatcher/deepep.py:402)"
    dtype = _dispatch_dtype(ctx)
    how = "" if ctx.value("--deepep-dispatcher-output-dtype") != "auto" else (
        f"; auto: --moe-runner-backend {ctx.value('--moe-runner-backend')}" if ctx.value("--moe-runner-backend")
        in BF16_RUNNERS else "")
    return (2 if dtype == "bf16" else 1), f"dispatch output {dtype}{how} (003a81bf set_deepep_dispatcher_dtype)"


def _configs(ctx: EngineContext, num_ranks: int, version):
    """The normal-mode (dispatch, combine) configs and num_sms: ``--deepep-config`` or DeepEP's tables.
    SGLang takes ``num_sms`` from ``normal_dispatch`` after asserting both agree (a limit, see
    :func:`_deepep_v1`)."""
    from ..backends import deepep_v1

    data = ctx.value("--deepep-config")
    if data is None:
        return (deepep_v1.get_dispatch_config(num_ranks, NUM_SMS, version=version.id),
                deepep_v1.get_combine_config(num_ranks, NUM_SMS, version=version.id), NUM_SMS, "Buffer tables")
    configs = []
    for key in ("normal_dispatch", "normal_combine"):
        kw = data.get(key)
        if not isinstance(kw, dict):
            raise InvalidArgumentError([EngineProblem("--deepep-config", data, f"needs a {key!r} object of "
                                                                               "deep_ep.Config arguments")])
        try:
            configs.append(deepep_v1.Config(**kw))
        except TypeError as error:
            raise InvalidArgumentError([EngineProblem("--deepep-config", kw, f"{key}: {error}")]) from None
    return configs[0], configs[1], configs[0].num_sms, "--deepep-config"


def recipe(ctx: EngineContext) -> EngineReport:
    """What SGLang allocates per GPU for ``--moe-a2a-backend`` and ``--deepep-mode``.

    What SGLang or DeepEP refuse although the sizes can be computed — experts not divisible by
    the EP size in low-latency modes, ``--deepep-config`` configs with different ``num_sms``, EP
    sizes the ``Buffer`` constructor rejects — is a broken limit with an ``error`` finding.

    Raises:
        InvalidArgumentError: what cannot be sized: a malformed ``--deepep-config``, EP sizes
            DeepEP's size hints assert against or have no default config for.
    """
    num_ranks, ep_setting, findings = _ep_size(ctx)
    per_node, num_nodes = topology(ctx, num_ranks)
    redundant = ctx.value("--ep-num-redundant-experts")
    fused = _sglang_launch.fused_shared_experts(ctx)
    shared_slots = fused * num_ranks  # FUSED_MOE: num_shared_slots = num_fused_shared_experts x moe_ep_size
    num_experts = ctx.num_experts + shared_slots + redundant
    settings = [*ctx.base_settings, ep_setting,
                Setting(name="nodes x GPUs per node", value=f"{num_nodes} x {per_node}", source="derived"),
                Setting(name="experts seen by DeepEP", value=num_experts, source="derived",
                        note=f"routed {ctx.num_experts} + fused shared {fused} x EP {num_ranks} + redundant {redundant}"
                             f" ({FUSED_MOE})" if fused else f"routed {ctx.num_experts} + redundant {redundant}")]
    if fused:
        settings.append(Setting(name="top-k with fused shared experts", value=ctx.num_topk + fused, source="derived",
                                note=f"top_k {ctx.num_topk} + num_fused_shared_experts {fused}"))
        ctx = ctx.replace(num_topk=ctx.num_topk + fused)
    _uccl.check_options(ctx)
    settings += [st for st in ctx.settings.values() if st.value is not None and _uccl.listed(ctx, st)]
    backend = ctx.value("--moe-a2a-backend")
    if _uccl.enabled(ctx) and backend != "deepep":
        raise _uccl_sglang.not_deep_ep(backend)
    if backend == "deepep" and _uccl.enabled(ctx):
        rep, recs = _uccl_sglang.deepep(ctx, num_ranks, per_node, num_nodes, num_experts, redundant + shared_slots, settings,
                                        findings, configs_fn=_configs, param_bytes=_param_bytes(ctx),
                                        dispatch_dtype=_dispatch_dtype(ctx))
    elif backend == "deepep":
        rep, recs = _deepep_v1(ctx, num_ranks, per_node, num_nodes, num_experts, redundant, settings, findings)
    elif backend == "deepep_v2":
        rep, recs = _sglang_v2.deepep_v2(ctx, num_ranks, per_node, redundant + shared_slots, settings, findings,
                                         fp8=_sglang_v2.use_fp8(ctx, _dispatch_dtype(ctx)))
    elif backend == "mori":
        rep, recs = _sglang_mori.mori(ctx, num_ranks, per_node, num_nodes, num_experts, redundant + shared_slots, settings,
                                      findings)
    elif backend == "pplx":
        raise InvalidArgumentError([EngineProblem("--moe-a2a-backend", backend, _sglang_mori.PPLX_NOT_SIZED)])
    else:
        rep = Report(backend="sglang/none", title="SGLang --moe-a2a-backend none: no DeepEP buffer",
                     upstream=f"{REPO} {SERVER_ARGS}", inputs={}, buffers=(),
                     findings=(Finding(severity="info", code="sglang.no-deepep",
                                       message="--moe-a2a-backend none allocates no DeepEP buffer"),))
        recs = []
    return EngineReport(engine="sglang", version=ctx.version, version_note=VERSIONS[ctx.version], title=rep.title,
                        settings=tuple(settings), report=rep, recommendations=tuple(recs),
                        device_name=ctx.device_name, device_num_bytes=ctx.device_num_bytes, budget=ctx.budget)


def _deepep_v1(ctx, num_ranks, per_node, num_nodes, num_experts, redundant, settings, findings):
    from ..backends import deepep_v1
    from ..plan import Plan

    version = deepep_v1.get_version(ctx.backend_version)
    mode = ctx.value("--deepep-mode")
    normal, low_latency = mode in ("normal", "auto"), mode in ("low_latency", "auto")
    hidden = ctx.hidden
    tokens = ctx.value("SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK")
    knob = "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK"
    src = f"{REPO} {TD} DeepEPBuffer.get_deepep_buffer"
    findings = list(findings)
    own_limits: list[LimitCheck] = []  # SGLang's own asserts; the sizes are still DeepEP's
    nvl_regions: list[Region] = []
    rdma_regions: list[Region] = []
    num_sms = NUM_SMS
    param_bytes, pb_note = _param_bytes(ctx)
    settings.append(Setting(name="param_bytes", value=param_bytes, source="derived", note=pb_note))
    if normal:
        dispatch, combine, num_sms, origin = _configs(ctx, num_ranks, version)
        if origin == "--deepep-config":
            own_limits.append(limit(SAME_NUM_SMS, combine.num_sms, "==", dispatch.num_sms,
                                    f"{REPO} {TD} DeepEPConfig.__init__ (assert on num_sms)"))
        hidden_bytes = hidden * param_bytes
        cfg_src = f"DeepEP {deepep_v1.CFG} @{version.short}"
        for kind, cfg in (("dispatch", dispatch), ("combine", combine)):
            for regions, fn, what in ((nvl_regions, cfg.get_nvl_buffer_size_hint, "get_nvl_buffer_size_hint"),
                                      (rdma_regions, cfg.get_rdma_buffer_size_hint, "get_rdma_buffer_size_hint")):
                n = fn(hidden_bytes, num_ranks, version=version.id)
                regions.append(Region(name=f"normal {kind} config ({origin})", num_bytes=n, num_bytes_used=n,
                                      formula=f"Config{cfg.as_tuple()}.{what}({format_int(hidden)} x {param_bytes} "
                                              f"= {format_int(hidden_bytes)}, {num_ranks})", source=cfg_src))
        if param_bytes < 2:
            bf16 = max(c.get_nvl_buffer_size_hint(hidden * 2, num_ranks, version=version.id) for c in (dispatch, combine))
            findings.append(Finding(
                severity="warning", code="sglang.param-bytes-1",
                message=f"param_bytes = 1 sizes the NVL buffer for 1-byte elements ({format_bytes(max(r.num_bytes for r in nvl_regions))}); "
                        f"combine is BF16 and DeepEP's recipe (hidden x max(element size, 2)) gives "
                        f"{format_bytes(bf16)} - the combine host check against num_nvl_bytes "
                        "(csrc/legacy/buffer.hpp:805-811 @dd758ca, intranode) may fail; pass "
                        "--deepep-dispatcher-output-dtype bf16 or --engine-version param-bytes-2 to compare",
                data={"num_nvl_bytes": max(r.num_bytes for r in nvl_regions), "bf16_hint": bf16}))
    ll_report = None
    if low_latency:
        own_limits.append(limit(EXPERTS_DIVIDE, num_experts % num_ranks, "==", 0,
                                f"{REPO} {TD} DeepEPBuffer.get_deepep_buffer (assert before the low-latency hint)"))
        plan = Plan(hidden=hidden, num_topk=ctx.num_topk, num_experts=num_experts, num_ranks=num_ranks,
                    num_ranks_per_node=per_node, num_max_tokens_per_rank=tokens, use_fp8_dispatch=_dispatch_dtype(ctx) == "fp8",
                    version=version.id, model=ctx.model)
        ll_report = deepep_v1.report_low_latency(plan)
        ll_buf = ll_report.buffers[0]
        rdma_regions.append(Region(name="low-latency hint", num_bytes=ll_buf.num_bytes, num_bytes_used=ll_buf.num_bytes,
                                   formula=f"get_low_latency_rdma_size_hint({format_int(tokens)}, {hidden}, "
                                           f"{num_ranks}, {num_experts})",
                                   source=f"DeepEP {deepep_v1.CFG}:185-188 @{version.short}"))
    buffers = []
    if nvl_regions:
        buffers.append(max_buffer("NVL buffer", nvl_regions, src))
    if low_latency and not normal:
        buffers.append(ll_report.buffers[0].replace(name="RDMA buffer (low-latency)"))
    elif rdma_regions and max(r.num_bytes for r in rdma_regions):  # intranode normal mode: num_rdma_bytes = 0
        buffers.append(max_buffer("RDMA buffer", rdma_regions, src))
    nvl_bytes = buffers[0].num_bytes if nvl_regions else 0
    rdma_bytes = buffers[-1].num_bytes if buffers and buffers[-1].name.startswith("RDMA") else 0
    ctor = _deepep.constructor_allocations(version, nvl_bytes)  # the one DeepEPBuffer (module docstring)
    buffers += ctor
    ctor_bytes = sum(b.num_bytes for b in ctor)
    normal_rdma = max((r.num_bytes for r in rdma_regions if r.name.startswith("normal")), default=0)

    limits = own_limits + _deepep.constructor_limits(nvl_bytes, rdma_bytes, num_ranks, low_latency)
    if ctx.value("--deepep-mode") != "low_latency":  # the normal kernels' launches at num_sms
        limits += _deepep.smem_limits(version, num_ranks, num_sms, ctx.device)
    limits.append(limit(f"{knob} <= 1024", tokens, "<=", MAX_DISPATCH_TOKENS,
                        f"{REPO} {TD} _DeepEPDispatcherImplBase.__init__ (FINISHED_SUM_TAG=1024)"))
    depth = ctx.value("NVSHMEM_QP_DEPTH")
    if low_latency and _deepep.qp_depth_applies(version):
        limits.append(_deepep.qp_depth_limit(depth, tokens))
    if ll_report is not None:
        limits = _deepep.without_low_latency_duplicates(limits) + list(ll_report.limits)
    own = [lim for lim in limits if not (ll_report is not None and lim in ll_report.limits)]
    findings += limit_findings("sglang", own, {
        f"{knob} <= 1024": "SGLang asserts it when the dispatcher is built",
        EXPERTS_DIVIDE: f"SGLang asserts it before sizing the low-latency buffer ({num_experts} experts: routed "
                        f"{ctx.num_experts} + redundant {redundant}); change --ep-num-redundant-experts or the EP size",
        SAME_NUM_SMS: "SGLang asserts it when it reads --deepep-config",
        _deepep.RANKS_LIMIT: _deepep.RANKS_CONSEQUENCE,
        "NVSHMEM_QP_DEPTH >= (num_max_dispatch_tokens_per_rank + 1) x 2":
            f"set NVSHMEM_QP_DEPTH={(tokens + 1) * 2} or lower {knob}"})
    if ll_report is not None:
        ceiling = deepep_v1.max_low_latency_tokens(hidden, num_ranks, num_experts, version=version.id) \
            if version.int4_count_check else None
        findings += _deepep.ceiling_finding("sglang.ll-32gib-ceiling", knob, tokens, ll_report.buffers[0].num_bytes,
                                            hidden, num_ranks, num_experts, ceiling, redundant,
                                            engine_cap=MAX_DISPATCH_TOKENS)
        findings += _deepep.without_backend_ceiling(ll_report.findings)
        if ctx.load is not None and ctx.load > tokens:
            findings.append(Finding(
                severity="error", code="sglang.tokens-above-capacity",
                message=f"{format_int(ctx.load)} tokens per rank exceed {knob} = {format_int(tokens)}: DeepEP's "
                        "low-latency dispatch asserts x.size(0) <= num_max_dispatch_tokens_per_rank (decode batches "
                        "and CUDA-graph batch sizes per rank must stay within it)",
                data={"load": ctx.load, "tokens": tokens}))
    else:
        findings.append(Finding(severity="info", code="sglang.normal-token-independent",
                                message="normal-mode buffers do not depend on the token count (per-channel rings "
                                        f"of chunked tokens); {knob} is not used", data={}))
    findings += budget_findings("sglang", ctx, nvl_bytes + rdma_bytes + ctor_bytes)

    recs = []
    if ll_report is not None:
        recs = _deepep.ll_recommendations(
            ctx, knob, hidden=hidden, num_ranks=num_ranks, num_experts=num_experts, fixed_bytes=nvl_bytes + ctor_bytes,
            other_rdma_bytes=normal_rdma, version=version, engine_cap=MAX_DISPATCH_TOKENS,
            engine_cap_text=f"SGLang asserts {knob} <= 1024 (FINISHED_SUM_TAG)")
        if _deepep.qp_depth_applies(version):
            fix = _deepep.qp_depth_recommendation(depth, tokens)
            if fix is not None:
                recs.append(fix)
    qps = {"normal": num_sms, "low_latency": num_experts // num_ranks,
           "auto": max(num_sms, num_experts // num_ranks)}[ctx.value("--deepep-mode")]
    quantities = [Quantity(name="num_qps_per_rank", value=qps, source=src),
                  Quantity(name="num_sms", value=num_sms),
                  Quantity(name="num_nvl_bytes", value=nvl_bytes, unit="B"),
                  Quantity(name="num_rdma_bytes", value=rdma_bytes, unit="B")]
    rep = Report(
        backend="sglang/deepep",
        title=f"SGLang --moe-a2a-backend deepep --deepep-mode {mode} ({ctx.version}): DeepEPBuffer",
        upstream=f"{REPO} {TD} DeepEPBuffer.get_deepep_buffer; DeepEP @{version.short}",
        inputs={"deepep_mode": mode, "hidden": hidden, "param_bytes": param_bytes, "num_ranks": num_ranks,
                "num_nodes": num_nodes, "num_experts": num_experts, "num_max_dispatch_tokens_per_rank": tokens,
                "low_latency_mode": low_latency, "deepep_version": version.id},
        buffers=tuple(buffers), records=ll_report.records if ll_report is not None else (),
        quantities=tuple(quantities), findings=tuple(findings), limits=tuple(limits))
    return rep, recs


def _engine():
    from ._api import EngineSpec

    return EngineSpec(
        name="sglang", title="SGLang", knobs=KNOBS, versions=VERSIONS, default_version="main", recipe=recipe,
        aliases={}, gpu=True,
        load_help="tokens one rank dispatches in one low-latency call (its decode batch / CUDA-graph batch size)",
        ranks_help="EP size = --tp-size (SGLang sets ep_size = tp_size with DeepEP)")


ENGINE = _engine()
