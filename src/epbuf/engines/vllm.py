"""vLLM's DeepEP buffers: what ``--all2all-backend deepep_*`` allocates per GPU.

Upstream ``vllm-project/vllm`` (read from the public code index, which stores several
versions; the commit each citation was read at is given):

* ``vllm/distributed/device_communicators/all2all.py @001430048e81`` (``A2A``) —
  ``DeepEPHTAll2AllManager._make_all2all_kwargs``: ``num_nvl_bytes =
  VLLM_DEEPEP_BUFFER_SIZE_MB * 1024 * 1024``; ``num_rdma_bytes`` the same when
  ``self.internode and not VLLM_DEEPEP_HIGH_THROUGHPUT_FORCE_INTRA_NODE``, else 0;
  ``num_qps_per_rank = num_sms // 2`` (10) or 1; ``num_sms = 20``
  (``DeepEPAll2AllManagerBase.__init__``). No size hint: the sizes are the variable's.
  ``DeepEPLLAll2AllManager._make_all2all_kwargs``: the same ``num_nvl_bytes``, and
  ``num_rdma_bytes = deep_ep.Buffer.get_low_latency_rdma_size_hint(max_num_tokens_per_dp_rank,
  token_hidden_size, num_ep_ranks, num_global_experts)``, ``num_qps_per_rank = E / R``.
  ``DeepEPV2All2AllManager._make_all2all_kwargs``: ``deep_ep.ElasticBuffer(num_max_tokens_per_rank
  = cdiv(moe.max_num_tokens, sp_size), hidden, num_topk, use_fp8_dispatch, allow_hybrid_mode =
  VLLM_DEEPEP_V2_ALLOW_HYBRID_MODE, allow_multiple_reduction = VLLM_DEEPEP_V2_ALLOW_MULTIPLE_REDUCTION)``.
* One ``deep_ep.Buffer`` per GPU (A2A): ``DeepEPAll2AllManagerBase.__init__`` keeps ``self.handle_cache =
  Cache()`` and both managers' ``get_handle`` return ``self.handle_cache.get_or_create(buffer_kwargs,
  deep_ep.Buffer)`` — HT's kwargs do not depend on the layer, LL's are (T, hidden, R, E, E / R), the same
  for every MoE layer of a model. Its constructor also allocates the NVL metadata (``num_nvl_bytes > 0``,
  LL included) and the 32 MiB workspace (:func:`epbuf.engines._deepep.constructor_allocations`).
* ``vllm/model_executor/layers/fused_moe/all2all_utils.py @02bd2a49`` ``maybe_make_prepare_finalize``:
  the LL call passes ``moe.max_num_tokens``, ``moe.hidden_dim``, the EP world size and
  ``moe.num_experts`` = routed + EPLB redundant experts (``FusedMoE.__init__``:
  ``global_num_experts = num_experts + num_redundant_experts``).
* ``.../prepare_finalize/deepep_ll.py @055e47c2`` ``DeepEPLLPrepareAndFinalize``:
  ``SUPPORTED_HIDDEN_SIZES = [2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192]``;
  ``maybe_roundup_layer_hidden_size`` rounds the hidden size up to the next one (``ValueError``
  above 8192). ``.../deepep_ht.py @055e47c2``: HT (and V2) round ``hidden * itemsize`` up to a
  multiple of 512 bytes.
* ``vllm/envs.py``: ``VLLM_DEEPEP_BUFFER_SIZE_MB`` (``int``, default ``"1024"``), the
  ``bool(int(...))`` switches, ``VLLM_MOE_DP_CHUNK_SIZE`` (``"256"``).
* ``vllm/engine/arg_utils.py`` ``EngineArgs.get_batch_defaults``: ``--max-num-batched-tokens``
  defaults to 8192 (OpenAI server on a GPU with >= 70 GiB that is not an A100) or 2048.
* Token count by version: before PR #39107 ("[MoE Refactor] Remove MoE DP chunking", merged
  2026-04) ``FusedMoEConfig.max_num_tokens = VLLM_MOE_DP_CHUNK_SIZE``; since then
  ``scheduler_config.max_num_batched_tokens``.
* EP group: ``TP x PCP x DP`` — ``vllm/distributed/parallel_state.py`` ``initialize_model_parallel`` lays
  the ranks out as ``ExternalDP x DP x PP x PCP x TP`` and builds the EP group from the ``DP x PCP x TP``
  block; ``vllm/config/parallel.py`` (EPLB check) "The EP group spans the TP x PCP x DP ranks".
  ``--prefill-context-parallel-size`` (``-pcp``, default 1).
* DeepEP V2 under sequence parallelism: ``all2all_utils.py @02bd2a49`` passes ``num_max_tokens_per_rank =
  cdiv(max_num_tokens, sp_size)`` with ``sp_size = tp_size if parallel_config.use_sequence_parallel_moe
  else 1``; ``vllm/config/parallel.py @00193b82`` ``use_sequence_parallel_moe`` lists allgather_reducescatter,
  deepep_high_throughput, deepep_low_latency, mori_* and nixl_ep — not deepep_v2 — so at that version
  ``sp_size`` is 1 for V2 and T is unchanged (:data:`SP_MOE_BACKENDS`).
* FP8 dispatch: DeepEP dispatches FP8 when the MoE quant config is FP8 with 128 x 128 blocks
  (``DEEPEP_QUANT_BLOCK_SHAPE``, LL; ``is_block_quantized``, V2; ``all2all_utils.py @02bd2a49``) — what
  ``Fp8Config`` gives a checkpoint with ``weight_block_size [128, 128]`` (DeepSeek-V3/R1); a BF16
  checkpoint quantized at load is per-tensor and dispatches BF16 (pass ``--fp8-dispatch`` explicitly to
  override epbuf's reading of the model). vLLM takes the checkpoint's quantization method when
  ``--quantization`` is unset (:data:`QUANT_FROM_CHECKPOINT`), so DeepSeek-V3 dispatches FP8 without the flag.
* Issue #57894: with EPLB the LL buffer of hidden 5120, 16 ranks, 384 + 64 experts passes
  DeepEP's 32 GiB ceiling below 2048 tokens; :func:`recipe` computes the exact ceiling from
  DeepEP's own assertion (``deepep_v1.max_low_latency_tokens``), not from the issue.

DeepEP's numbers come from :mod:`epbuf.backends.deepep_v1` / :mod:`epbuf.backends.deepep_v2`
(one formula, one place); the constructor asserts cited are DeepEP ``csrc/legacy/buffer.hpp:107-116
@dd758ca``.
"""

from __future__ import annotations

from ..errors import InvalidArgumentError
from ..report import Finding, Report
from ..units import INT64_MAX, GiB, MiB
from . import _deepep, _uccl, _uccl_vllm, _vllm_all2all, _vllm_mori, _vllm_pplx, _vllm_resolve
from ._common import EngineContext, limit, limit_findings, topology
from ._knobs import EngineProblem, Knob, Setting
from ._report import EngineReport
from ._vllm_all2all import A2A, A2A_UTILS, REPO

ENVS = "vllm/envs.py"
LAYER = "vllm/model_executor/layers/fused_moe/layer.py @0014ec6c FusedMoE.__init__ (if self.use_ep)"
EPLB_EVEN = "experts (routed + redundant) % EP size == 0 (--enable-eplb)"
NO_EPLB_REDUNDANT = "redundant experts == 0 without --enable-eplb"
ARG_UTILS = "vllm/engine/arg_utils.py EngineArgs.get_batch_defaults"
BACKENDS = ("deepep_low_latency", "deepep_high_throughput", "deepep_v2", "allgather_reducescatter", "naive", "pplx",
            *_vllm_mori.BACKENDS)
#: ``ParallelConfig.use_sequence_parallel_moe`` backends (``vllm/config/parallel.py @00193b82``): with one of
#: them, EP, TP > 1 and DP > 1 the MoE input is sharded over TP (``sp_size = tp_size``).
SP_MOE_BACKENDS = ("allgather_reducescatter", "deepep_high_throughput", "deepep_low_latency", "mori_high_throughput",
                   "mori_low_latency", "nixl_ep")
PARALLEL_CONFIG = "vllm/config/parallel.py @00193b82"

VERSIONS = {
    "main": f"vLLM {_vllm_resolve.RELEASE} and main since PR #39107 (\"[MoE Refactor] Remove MoE DP chunking\", merged 2026-04): the DeepEP "
            "low-latency and V2 buffers hold T = --max-num-batched-tokens tokens per rank",
    "dp-chunk": "vLLM before PR #39107 (up to about v0.19): T = VLLM_MOE_DP_CHUNK_SIZE (default 256); "
                "a larger batch is dispatched in chunks of T",
    _vllm_resolve.RELEASE: f"the vLLM {_vllm_resolve.RELEASE} release (pip install vllm=={_vllm_resolve.RELEASE}): "
                           "what main models, checked by running its code (tests/conformance/vllm)",
}
#: Versions that follow the release's rules (``use_batched_dp_moe``, no ``--num-redundant-experts``, no ``mori``).
CURRENT = ("main", _vllm_resolve.RELEASE)

KNOBS = (
    Knob(name="--all2all-backend", kind="choice", default="deepep_low_latency", choices=BACKENDS,
         env="VLLM_ALL2ALL_BACKEND", source=f"{REPO} {A2A}",
         default_note="epbuf's default: vLLM's own default allgather_reducescatter allocates no DeepEP buffer",
         help="the all2all manager (older vLLM: VLLM_ALL2ALL_BACKEND)"),
    Knob(name="--max-num-batched-tokens", kind="int", lo=1, source=f"{REPO} {ARG_UTILS}",
         help="scheduler token budget per step; T of the low-latency and V2 buffers since PR #39107"),
    Knob(name="--tensor-parallel-size", kind="int", lo=1, default=1, aliases=("-tp",),
         help="TP size; the EP size is TP x PCP x DP"),
    Knob(name="--data-parallel-size", kind="int", lo=1, default=1, aliases=("-dp",),
         help="DP size; the EP size is TP x PCP x DP"),
    Knob(name="--prefill-context-parallel-size", kind="int", lo=1, default=1, aliases=("-pcp",),
         source=f"{REPO} vllm/distributed/parallel_state.py initialize_model_parallel (EP = DP x PCP x TP)",
         help="prefill context parallel size; the EP size is TP x PCP x DP"),
    Knob(name="--enable-expert-parallel", kind="flag", default=False, affects_size=False,
         help="needed by every all2all backend; epbuf assumes it"),
    Knob(name="--enable-eplb", kind="flag", default=False, help="EPLB (allows redundant experts)"),
    Knob(name="--num-redundant-experts", kind="int", lo=0, default=0,
         help="EPLB redundant experts (before vLLM 0.33.0; since then --eplb-config num_redundant_experts)"),
    Knob(name="--performance-mode", kind="choice", default="balanced",
         choices=("balanced", "interactivity", "throughput"), source=f"{REPO} {_vllm_resolve.BATCH_DEFAULTS}",
         help="throughput doubles the default --max-num-batched-tokens"),
    Knob(name="--activation-quant", kind="choice", choices=_vllm_resolve.QUANT_KINDS,
         help="epbuf's flag: how the MoE activations are quantized before dispatch (pplx, MORI; default from "
              "--quantization and the checkpoint), e.g. int8-token for a w8a8 int8 checkpoint"),
    Knob(name="--eplb-config", kind="json", help="EPLB config JSON; epbuf reads num_redundant_experts"),
    Knob(name="--fp8-dispatch", kind="flag", default=False,
         help="epbuf's flag: the model is block-FP8 quantized, so DeepEP dispatches FP8 (V2 use_fp8_dispatch)"),
    Knob(name="--quantization", aliases=("-q",), kind="text", source=f"{REPO} {A2A_UTILS} (use_fp8_dispatch)",
         help="fp8: FP8 dispatch for block-quantized (128 x 128) checkpoints; other methods: BF16 dispatch"),
    Knob(name="VLLM_DEEPEP_BUFFER_SIZE_MB", kind="int", lo=0, hi=INT64_MAX // MiB, default=1024, source=f"{REPO} {ENVS}",
         help="MiB of the NVL buffer (all DeepEP V1 modes) and the HT RDMA buffer"),
    Knob(name="VLLM_DEEPEP_HIGH_THROUGHPUT_FORCE_INTRA_NODE", kind="bool", default=False, source=f"{REPO} {ENVS}",
         help="HT: no RDMA buffer even across nodes"),
    Knob(name="VLLM_DEEPEP_LOW_LATENCY_USE_MNNVL", kind="bool", default=False, affects_size=False,
         source=f"{REPO} {ENVS}", help="LL: allow_mnnvl"),
    Knob(name="VLLM_MOE_DP_CHUNK_SIZE", kind="int", lo=1, default=256, source=f"{REPO} {ENVS}",
         help="T of the low-latency buffer before PR #39107"),
    Knob(name="VLLM_ENABLE_MOE_DP_CHUNK", kind="bool", default=True, source=f"{REPO} {ENVS} (PR #29936)",
         help="DP chunking on/off before PR #39107"),
    Knob(name="VLLM_DEEPEP_V2_ALLOW_HYBRID_MODE", kind="bool", default=True,
         source=f"{REPO} {ENVS}:2055-2056 @v0.33.0 (default \"1\")", help="V2 allow_hybrid_mode"),
    Knob(name="VLLM_DEEPEP_V2_PREFER_OVERLAP", kind="bool", default=False, affects_size=False,
         source=f"{REPO} {ENVS}", help="V2 prefer_overlap_with_compute"),
    Knob(name="VLLM_DEEPEP_V2_ALLOW_MULTIPLE_REDUCTION", kind="bool", default=False, source=f"{REPO} {ENVS}",
         help="V2 allow_multiple_reduction"),
    Knob(name="NVSHMEM_QP_DEPTH", kind="int", lo=1, default=_deepep.DEFAULT_QP_DEPTH,
         source=_deepep.QP_DEPTH_SOURCE, help="DeepEP low-latency: must be >= (T + 1) x 2"),
    Knob(name="VLLM_DEEPEP_TIMEOUT_SECS", kind="int", lo=0, default=1800, affects_size=False,
         source=f"{REPO} {A2A} (os.getenv)", help="V2 timeouts"),
) + _vllm_pplx.KNOBS + _vllm_mori.KNOBS + _uccl.KNOBS



def _default_batched_tokens(ctx: EngineContext, backend: str = "", expert_parallel: bool = False) -> tuple[int, str]:
    """``EngineArgs`` defaults for the OpenAI server (:func:`._vllm_resolve.default_batched_tokens`);
    ``dp-chunk`` (older vLLM) knows neither ``use_batched_dp_moe`` nor ``--performance-mode``."""
    if ctx.version not in CURRENT or "--performance-mode" not in ctx.settings:  # vllm-ascend reuses it
        return _vllm_resolve.default_batched_tokens(
            backend="", expert_parallel=False, dp=1, device_bytes=ctx.device_num_bytes,
            device_name=ctx.device_name, throughput=False)
    return _vllm_resolve.default_batched_tokens(
        backend=backend, expert_parallel=expert_parallel, dp=ctx.value("--data-parallel-size"),
        device_bytes=ctx.device_num_bytes, device_name=ctx.device_name,
        throughput=ctx.value("--performance-mode") == "throughput")


def _ep_size(ctx: EngineContext) -> tuple[int, Setting]:
    """EP = TP x PCP x DP (``initialize_model_parallel``), or the EP size given (which must agree)."""
    tp, dp = ctx.setting("--tensor-parallel-size"), ctx.setting("--data-parallel-size")
    pcp = ctx.setting("--prefill-context-parallel-size")
    product = tp.value * pcp.value * dp.value  # type: ignore[operator]
    given = tp.source != "default" or dp.source != "default" or pcp.source != "default"
    spelled = "--tensor-parallel-size x --prefill-context-parallel-size x --data-parallel-size" \
        if pcp.value != 1 else "--tensor-parallel-size x --data-parallel-size"
    if ctx.num_ranks is not None:
        if given and product != ctx.num_ranks:
            raise InvalidArgumentError([EngineProblem(
                ctx.ranks_flag, ctx.num_ranks, f"vLLM's EP size is TP x PCP x DP = {tp.value} x {pcp.value} x "
                                               f"{dp.value} = {product}; drop one or make them agree")])
        return ctx.num_ranks, Setting(name="EP size", value=ctx.num_ranks, source="flag", note=ctx.ranks_flag)
    if given:
        return product, Setting(name="EP size", value=product, source="derived", note=spelled)
    return 8, Setting(name="EP size", value=8, source="default",
                      note="epbuf's default (pass --ep-size, or -tp/-dp as vLLM: EP = TP x PCP x DP)")


#: Where vLLM takes the quantization method from the checkpoint when ``--quantization`` is unset
#: (``if self.quantization is None: self.quantization = quant_method``; read from the public code
#: index, 2026-12-01).
QUANT_FROM_CHECKPOINT = "vllm/config/model.py ModelConfig._verify_quantization"


def _fp8_dispatch(ctx: EngineContext) -> tuple[EngineContext, Finding | None]:
    """vLLM's ``use_fp8_dispatch`` (A2A_UTILS): FP8 when the MoE quant config is FP8 in 128 x 128
    blocks, else BF16. ``--fp8-dispatch`` given (true or false) overrides. Without ``--quantization`` vLLM takes the
    checkpoint's ``quantization_config.quant_method`` (:data:`QUANT_FROM_CHECKPOINT`), so a block-FP8
    checkpoint (:attr:`epbuf.models.ModelSpec.block_fp8`: DeepSeek-V3, -R1, -V3.2, Kimi-K2, MiniMax-M2,
    or a ``config.json`` that says so) dispatches FP8 with no flag; ``--quantization fp8`` on any
    other model is ``Fp8Config`` per tensor, which dispatches BF16."""
    quant = ctx.value("--quantization")
    if ctx.setting("--fp8-dispatch").source != "default":  # the user said, either way
        return ctx, None
    block = ctx.model_block_fp8
    fp8 = str(quant).strip().lower() == "fp8"
    if block and (quant is None or fp8):
        why = (f"--quantization fp8 on {ctx.model}'s 128 x 128 block-FP8 weights ({A2A_UTILS})" if fp8 else
               f"{ctx.model}'s checkpoint is block-FP8 128 x 128 (quantization_config), which vLLM reads without "
               f"--quantization ({QUANT_FROM_CHECKPOINT}); {A2A_UTILS}")
        s = {**ctx.settings, "--fp8-dispatch": Setting(name="--fp8-dispatch", value=True, source="derived", note=why)}
        return ctx.replace(settings=s), None
    if quant is None:
        return ctx, None
    why = ("the model's weights are not known to be block-quantized 128 x 128, so Fp8Config quantizes per tensor"
           if fp8 else f"--quantization {quant} is not FP8 with 128 x 128 blocks")
    return ctx, Finding(severity="info", code="vllm.bf16-dispatch",
                        message=f"DeepEP dispatches BF16: {why} (use_fp8_dispatch, {A2A_UTILS}); pass --fp8-dispatch "
                                "if your checkpoint carries weight_block_size [128, 128]", data={"quantization": quant})


def _redundant(ctx: EngineContext) -> tuple[int, str]:
    flag = ctx.setting("--num-redundant-experts")
    config = ctx.value("--eplb-config")
    from_config = None
    if isinstance(config, dict) and "num_redundant_experts" in config:
        from_config = config["num_redundant_experts"]
        if isinstance(from_config, bool) or not isinstance(from_config, int) or from_config < 0:
            raise InvalidArgumentError([EngineProblem("--eplb-config", config,
                                                      "num_redundant_experts must be an integer >= 0")])
    if from_config is not None and flag.source != "default" and flag.value != from_config:
        raise InvalidArgumentError([EngineProblem(
            "--num-redundant-experts", flag.value,
            f"disagrees with --eplb-config num_redundant_experts = {from_config}; give one")])
    if from_config is not None:
        return from_config, "--eplb-config num_redundant_experts"
    return flag.value, "--num-redundant-experts"  # type: ignore[return-value]


def _eplb_limits(eplb: bool, redundant: int, num_experts: int, num_ranks: int) -> list:
    """``FusedMoE.__init__``'s expert checks with expert parallelism (LAYER): with EPLB the experts
    (routed + redundant) divide evenly over the EP ranks; without it there are no redundant ones."""
    if eplb:
        return [limit(EPLB_EVEN, num_experts % num_ranks, "==", 0, f"{REPO} {LAYER}: assert self.global_num_experts "
                                                                   "% self.ep_size == 0")]
    return [limit(NO_EPLB_REDUNDANT, redundant, "==", 0, f"{REPO} {LAYER}: assert num_redundant_experts == 0")]


def recipe(ctx: EngineContext) -> EngineReport:
    """What vLLM allocates per GPU for ``--all2all-backend``, with findings and recommendations.

    * ``deepep_low_latency``: NVL buffer ``VLLM_DEEPEP_BUFFER_SIZE_MB`` MiB (allocated though
      the LL kernels lay out only the RDMA buffer) + the LL RDMA buffer
      ``deepep_v1.low_latency_buffer(T, ll_hidden(H), R, E + redundant)``.
    * ``deepep_high_throughput``: NVL ``VLLM_DEEPEP_BUFFER_SIZE_MB`` MiB, RDMA the same when
      the EP group spans nodes (and not ``..._FORCE_INTRA_NODE``), compared with DeepEP's own
      hints for the default dispatch/combine configs.
    * ``deepep_v2``: ``deepep_v2.report`` for ``ElasticBuffer(num_max_tokens_per_rank=T)``.

    What vLLM refuses at start-up although the sizes can be computed — redundant experts
    without EPLB, experts not divisible by the EP size with EPLB (``FusedMoE.__init__``), EP
    sizes DeepEP's ``Buffer`` rejects — is a broken limit with an ``error`` finding.

    Raises:
        InvalidArgumentError: what cannot be sized: an EP size that disagrees with TP x DP,
            hidden above 8192 for LL (vLLM's rounding raises), a malformed ``--eplb-config``.
    """
    ctx, quant_finding = _fp8_dispatch(ctx)
    ctx = _vllm_resolve.with_activation_quant(ctx)
    s = ctx.settings
    if ctx.launch and s["--all2all-backend"].source == "default":  # the line runs vLLM's own default
        s = {**s, "--all2all-backend": Setting(name="--all2all-backend", value="allgather_reducescatter", source="default",
                                               note=f"vLLM's default (ParallelConfig.all2all_backend, {PARALLEL_CONFIG})")}
        ctx = ctx.replace(settings=s)
    backend = s["--all2all-backend"].value
    if backend == "naive":  # vllm/config/parallel.py:537-543 @v0.33.0: removed, falls back with a warning
        backend = "allgather_reducescatter"
    if ctx.version in CURRENT:
        _vllm_resolve.release_flags(ctx, backend)
    num_ranks, ep_setting = _ep_size(ctx)
    expert_parallel = bool(s["--enable-expert-parallel"].value) or not ctx.launch
    per_node, num_nodes = topology(ctx, num_ranks)
    redundant, redundant_from = _redundant(ctx)
    eplb = s["--enable-eplb"].value
    num_experts = ctx.num_experts + redundant
    eplb_limits = _eplb_limits(eplb, redundant, num_experts, num_ranks)

    tokens_knob = "VLLM_MOE_DP_CHUNK_SIZE" if ctx.version == "dp-chunk" else "--max-num-batched-tokens"
    if s["--max-num-batched-tokens"].value is None:
        value, note = _default_batched_tokens(ctx, backend, expert_parallel)
        s = {**s, "--max-num-batched-tokens": Setting(name="--max-num-batched-tokens", value=value,
                                                       source="default", note=note)}
        ctx = ctx.replace(settings=s)
    tokens = s[tokens_knob].value
    sp_size = _sp_size(ctx, backend)
    settings = [*ctx.base_settings, ep_setting,
                Setting(name="nodes x GPUs per node", value=f"{num_nodes} x {per_node}",
                        source="derived" if ctx.num_ranks_per_node is None and ctx.num_nodes is None else "flag",
                        note="internode" if num_nodes > 1 else "one node"),
                Setting(name="experts seen by DeepEP", value=num_experts, source="derived",
                        note=f"routed {ctx.num_experts} + redundant {redundant} ({A2A_UTILS})")]
    _uccl.check_options(ctx)
    settings += [st for st in s.values() if st.value is not None and _uccl.listed(ctx, st)]
    if backend in ("deepep_low_latency", "deepep_v2", "pplx", *_vllm_mori.BACKENDS):
        settings.append(Setting(name="num_max_tokens_per_rank (T)", value=tokens, source="derived",
                                note=f"{tokens_knob} ({VERSIONS[ctx.version].split(':')[0]})"))
    if backend == "deepep_v2" and ctx.version in CURRENT:
        settings.append(Setting(name="sp_size", value=1, source="derived", note=(
            "vLLM 0.33.0 lists deepep_v2 in use_sequence_parallel_moe but passes ElasticBuffer num_max_tokens_per_rank = "
            "moe.max_num_tokens undivided; sp_size goes to the prepare/finalize only "
            "(vllm/model_executor/layers/fused_moe/all2all_utils.py:284-312 @v0.33.0)")))
    elif backend == "deepep_v2":
        settings.append(Setting(name="sp_size", value=sp_size, source="derived",
                                note=f"tp_size if use_sequence_parallel_moe, else 1 ({PARALLEL_CONFIG}: deepep_v2 is not "
                                     f"among its backends); T = cdiv(T, sp_size) ({A2A_UTILS})"))
        tokens = -(-tokens // sp_size)

    shape_given = any(s[k].source != "default" for k in ("--tensor-parallel-size", "--data-parallel-size",
                                                          "--prefill-context-parallel-size"))
    gate, gate_why = True, ""
    if ctx.launch or shape_given:
        gate, gate_why = _vllm_resolve.all2all_gate(s["--tensor-parallel-size"].value, s["--data-parallel-size"].value,
                                                    s["--prefill-context-parallel-size"].value, expert_parallel, backend)
    common = dict(ctx=ctx, num_ranks=num_ranks, per_node=per_node, num_nodes=num_nodes, num_experts=num_experts,
                  redundant=redundant, tokens=tokens, tokens_knob=tokens_knob)
    if not gate and backend != "allgather_reducescatter":
        rep, recs = _vllm_resolve.no_all2all(backend, gate_why)
    elif _uccl.enabled(ctx):
        rep, recs = _uccl_vllm.uccl(**common)
    elif backend == "deepep_low_latency":
        rep, recs = _vllm_all2all.low_latency(**common)
    elif backend == "deepep_high_throughput":
        rep, recs = _vllm_all2all.high_throughput(**common)
    elif backend == "deepep_v2":
        rep, recs = _vllm_all2all.deepep_v2(**common)
    elif backend == "pplx":
        rep, recs = _vllm_pplx.pplx(**common)
    elif backend in _vllm_mori.BACKENDS:
        rep, recs = _vllm_mori.mori(**common)
    else:
        rep = Report(backend="vllm/allgather_reducescatter", title="vLLM allgather_reducescatter: no DeepEP buffer",
                     upstream=f"{REPO} {A2A}", inputs={"num_ranks": num_ranks}, buffers=(),
                     findings=(Finding(severity="info", code="vllm.no-deepep",
                                       message="allgather_reducescatter uses collectives, not a DeepEP buffer; "
                                               "pass --all2all-backend deepep_low_latency / deepep_high_throughput / "
                                               "deepep_v2 to size one"),))
        recs = []
    unused = None
    if ctx.version == "main" and s["VLLM_MOE_DP_CHUNK_SIZE"].source == "env":
        unused = ("VLLM_MOE_DP_CHUNK_SIZE", "vLLM main no longer reads it (PR #39107 removed MoE DP chunking); "
                                            "T is --max-num-batched-tokens. For an older vLLM pass --engine-version dp-chunk")
    elif ctx.version == "dp-chunk" and s["--max-num-batched-tokens"].source == "flag" \
            and backend in ("deepep_low_latency", "deepep_v2", "pplx", *_vllm_mori.BACKENDS):
        unused = ("--max-num-batched-tokens", "before PR #39107 the DeepEP buffers hold VLLM_MOE_DP_CHUNK_SIZE tokens "
                                              "per rank, not --max-num-batched-tokens")
    if unused is not None and backend != "allgather_reducescatter" and gate:
        rep = rep.replace(findings=rep.findings + (Finding(
            severity="warning", code="vllm.setting-unused", message=f"{unused[0]} does not size the buffer here: "
                                                                    f"{unused[1]}", data={"setting": unused[0]}),))
    if eplb_limits:
        rep = rep.replace(limits=tuple(eplb_limits) + rep.limits, findings=rep.findings + tuple(limit_findings(
            "vllm", eplb_limits, {EPLB_EVEN: f"vLLM's FusedMoE asserts it with --enable-eplb ({redundant_from} = "
                                             f"{redundant}; routed {ctx.num_experts} + redundant {redundant})",
                                  NO_EPLB_REDUNDANT: f"vLLM's FusedMoE asserts it without --enable-eplb "
                                                     f"({redundant_from}); pass --enable-eplb or 0"})))
    if quant_finding is not None and backend != "allgather_reducescatter" and gate:
        rep = rep.replace(findings=rep.findings + (quant_finding,))
    if not s["--enable-expert-parallel"].value and backend != "allgather_reducescatter" and not ctx.launch:
        rep = rep.replace(findings=rep.findings + (Finding(
            severity="info", code="vllm.expert-parallel-assumed",
            message="vLLM uses an all2all backend only with --enable-expert-parallel; epbuf assumes it"),))
    return EngineReport(engine="vllm", version=ctx.version, version_note=VERSIONS[ctx.version],
                        title=rep.title, settings=tuple(settings), report=rep, recommendations=tuple(recs),
                        device_name=ctx.device_name, device_num_bytes=ctx.device_num_bytes, budget=ctx.budget)


def _sp_size(ctx: EngineContext, backend: str) -> int:
    """``sp_size = tp_size if parallel_config.use_sequence_parallel_moe else 1`` (PARALLEL_CONFIG):
    a backend of :data:`SP_MOE_BACKENDS`, expert parallelism, TP > 1 and DP > 1."""
    tp, dp = ctx.value("--tensor-parallel-size"), ctx.value("--data-parallel-size")
    on = backend in SP_MOE_BACKENDS and tp > 1 and dp > 1  # type: ignore[operator]
    return tp if on else 1  # type: ignore[return-value]


def _engine():
    from ._api import EngineSpec

    return EngineSpec(
        name="vllm", title="vLLM", knobs=KNOBS, versions=VERSIONS, default_version="main", recipe=recipe,
        aliases={"num_ranks": ("--ep-size",)}, gpu=True,
        load_help="tokens one DP rank dispatches in one step (its share of the batch)",
        ranks_help="EP size = --tensor-parallel-size x --data-parallel-size (or --ep-size)")


ENGINE = _engine()
