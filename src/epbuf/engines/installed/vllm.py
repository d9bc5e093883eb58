"""A ``vllm serve`` launch line through the installed vLLM's own code, on a CPU.

What runs is vLLM's: ``FlexibleArgumentParser`` with ``vllm serve``'s arguments
(``vllm/entrypoints/cli/serve.py``), ``AsyncEngineArgs.from_cli_args(...).create_engine_config
(UsageContext.OPENAI_API_SERVER)`` (batch defaults, ``use_batched_dp_moe``, backend checks),
``make_parallel_config`` and ``determine_expert_counts`` (``fused_moe/layer.py``),
``maybe_roundup_layer_hidden_size``, the all2all manager ``vllm.distributed.device_communicators.
cuda_communicator`` would build (only when ``ParallelConfig.use_all2all``), and
``all2all_utils.maybe_make_prepare_finalize``, which calls the manager's ``get_handle`` and so the
EP library. Stood in for (:mod:`._vllm_standins`): the compiled modules, the CUDA platform (an
H200-class device unless told otherwise), the model-class inspection subprocess (run in-process),
the process groups (rank 0; ``in_the_same_node_as`` by 8 GPUs per node), the library modules
(recording), the prepare/finalize classes (built after the call, GPU-only), the model's
``config.json`` (written from transformers' own config classes, :data:`MODELS`; a local folder with
a ``config.json`` is read as it is), and the MoE quant config, built with vLLM's own
``fp8_w8a8_moe_quant_config`` / ``int8_w8a8_moe_quant_config`` from the checkpoint's or
``--quantization``'s scheme (the layer that would build it needs weights).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile

from . import InstalledMismatch, stand_in_errors

__all__ = ["compare", "resolve", "serve_options", "MODELS"]

#: Model ids the resolver writes a config.json for: (transformers config class, its arguments, block FP8).
MODELS = {
    "deepseek-ai/DeepSeek-V3": ("DeepseekV3Config", {}, True),
    "deepseek-ai/DeepSeek-R1": ("DeepseekV3Config", {}, True),
    "Qwen/Qwen3-30B-A3B": ("Qwen3MoeConfig", {}, False),
    "Qwen/Qwen3-235B-A22B": ("Qwen3MoeConfig", dict(hidden_size=4096, num_experts=128, num_experts_per_tok=8,
                                                    moe_intermediate_size=1536, num_hidden_layers=94,
                                                    num_attention_heads=64, num_key_value_heads=4), False),
}
BLOCK_FP8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]}
GPUS_PER_NODE = 8
DEVICE = ("NVIDIA H200", 143771 * 1024 * 1024, (9, 0))


def _write_model(folder: str, model: str) -> str:
    import transformers

    if os.path.isfile(os.path.join(os.path.expanduser(model), "config.json")):  # a local checkpoint: its own
        return os.path.expanduser(model)
    if model not in MODELS:
        raise InstalledMismatch(f"no config.json stand-in for model {model!r} (a folder with a config.json is read "
                                "as it is); known: "
                                + ", ".join(MODELS))
    cls, kwargs, block = MODELS[model]
    config = getattr(transformers, cls)(**kwargs)
    config.architectures = [cls.replace("Config", "ForCausalLM")]
    if block:
        config.quantization_config = dict(BLOCK_FP8)
    path = os.path.join(folder, model.replace("/", "--"))
    config.save_pretrained(path)
    return path


@contextlib.contextmanager
def _environment(env: dict, cache: str):
    saved = dict(os.environ)
    os.environ.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CACHE_ROOT": cache,
                       "VLLM_NO_USAGE_STATS": "1", "VLLM_LOGGING_LEVEL": "ERROR", "VLLM_CONFIGURE_LOGGING": "0"})
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _parse(argv: list[str], model_path: str | None):
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    sub = top.add_subparsers(dest="subparser")
    ServeSubcommand().subparser_init(sub)
    args = top.parse_args(argv)
    if model_path is not None:
        args.model = model_path
        args.model_tag = model_path
    return args


def serve_options() -> frozenset:
    """The long options of the installed ``vllm serve`` parser."""
    from . import _vllm_standins as st

    st.install_modules(st.Recorder(), lambda **kwargs: 0)
    try:
        _platform(DEVICE)
        st.patch_custom_ops()
        from vllm.entrypoints.cli.serve import ServeSubcommand
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        top = FlexibleArgumentParser(prog="vllm")
        parser = ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))
    finally:
        st.uninstall_recorder()
    return frozenset(s for action in parser._actions for s in action.option_strings if s.startswith("--"))


def _device(name: str | None) -> tuple:
    """The CUDA device vLLM is told it runs on: epbuf's ``--device`` (name, memory, compute capability),
    an H200 when none is given. vLLM's batch defaults read the memory and the name (``arg_utils.py``)."""
    if name is None:
        return DEVICE
    from ...devices import get_device

    spec = get_device(name)
    if not spec.compute_capability:
        raise InstalledMismatch(f"vLLM's stand-in platform is CUDA; device {spec.name!r} is not an NVIDIA GPU")
    major, minor = spec.compute_capability.split(".")
    return spec.title, spec.num_bytes, (int(major), int(minor))


def resolve(argv: list[str], env: dict, *, device: str | None = None, model_path: str | None = None,
            uccl: bool = False) -> dict:
    """``{"engine", "engine_version", "calls", "resolved"}`` for ``vllm serve`` words ``argv``
    (``["serve", MODEL, ...]``) under ``env`` (the package docstring) on epbuf device ``device``
    (default an H200). ``uccl``: the ``deep_ep`` vLLM imports is UCCL-EP's drop-in, whose size hint is
    UCCL-EP's (PER_EXPERT_BATCHING build).

    Raises:
        InstalledMismatch: vLLM's internals no longer fit the stand-ins, or the line names a model,
            quantization or backend the stand-ins do not cover.
    """
    with stand_in_errors("vllm"):
        import vllm

        return _resolve(vllm, argv, env, _device(device), model_path, uccl)


def _resolve(vllm, argv, env, device, model_path, uccl) -> dict:
    import functools

    from ...backends.deepep_v1.low_latency import get_low_latency_rdma_size_hint
    from ...backends.uccl_ep import get_low_latency_rdma_size_hint as uccl_hint
    from . import _vllm_standins as st

    rec = st.Recorder()
    st.install_modules(rec, get_low_latency_rdma_size_hint,
                       functools.partial(uccl_hint, per_expert_batching=True) if uccl else None)
    try:
        with tempfile.TemporaryDirectory() as folder, _environment(env, folder):
            words = list(argv[1:] if argv[:1] == ["vllm"] else argv)
            model = words[1] if len(words) > 1 and not words[1].startswith("-") else None
            if model_path is None and model is not None:
                model_path = _write_model(folder, model)
            resolved = _run(rec, words, model_path, device)
    finally:
        st.uninstall_recorder()
    return {"engine": "vllm", "engine_version": vllm.__version__, "calls": rec.calls, "resolved": resolved}


def _platform(device) -> None:
    import vllm.platforms as platforms
    from vllm.platforms.cuda import CudaPlatform

    from ._vllm_standins import platform_class

    name, num_bytes, capability = device
    previous = platforms._current_platform
    platforms._current_platform = platform_class(CudaPlatform, capability, name, num_bytes, GPUS_PER_NODE, False)()
    if previous is not None and type(previous).__name__.startswith("StandIn"):
        # ``from vllm.platforms import current_platform`` bound an earlier resolution's device in the
        # modules imported since (``engine/arg_utils.py:122``): each is told the new one
        for module in [m for n, m in sys.modules.items() if n.startswith("vllm.") and m is not None]:
            if getattr(module, "current_platform", None) is previous:
                module.current_platform = platforms._current_platform


def _run(rec, words, model_path, device) -> dict:
    from . import _vllm_standins as st

    _platform(device)
    st.patch_custom_ops()
    import vllm.model_executor.models.registry as registry

    registry._run_in_subprocess = lambda fn: fn()
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.usage.usage_lib import UsageContext

    args = _parse(words, model_path)
    engine_args = AsyncEngineArgs.from_cli_args(args)
    try:
        config = engine_args.create_engine_config(UsageContext.OPENAI_API_SERVER)
    except ValueError as error:  # vLLM refuses the line at start-up (pydantic's ValidationError included)
        return {"refused": _first_reason(error)}
    pc = config.parallel_config
    resolved = {"all2all_backend": pc.all2all_backend, "tensor_parallel_size": pc.tensor_parallel_size,
                "data_parallel_size": pc.data_parallel_size, "enable_expert_parallel": pc.enable_expert_parallel,
                "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
                "use_all2all": pc.use_all2all, "num_redundant_experts": pc.eplb_config.num_redundant_experts}
    if not pc.use_all2all:
        return resolved
    resolved.update(_prepare_finalize(config, st))
    return resolved


def _quant_config(config, hidden_block: bool):
    """The MoE layer's ``FusedMoEQuantConfig`` for the checkpoint's or ``--quantization``'s scheme,
    built by vLLM's own helpers (the layer that builds it holds weights)."""
    import torch
    from vllm.model_executor.layers.fused_moe import config as moe_config

    quant = config.quant_config
    if quant is None:
        return moe_config.FUSED_MOE_UNQUANTIZED_CONFIG, "bf16"
    name = quant.get_name()
    block = getattr(quant, "weight_block_size", None)
    if name == "online":  # --quantization fp8 / fp8_per_* on a BF16 checkpoint: quantized at load
        scheme = str(getattr(quant, "args", "")).lower()
        name, block = "fp8", ([128, 128] if "block" in scheme else None)
    if name == "fp8" and block:
        scale = torch.empty(1)
        return moe_config.fp8_w8a8_moe_quant_config(w1_scale=scale, w2_scale=scale, block_shape=list(block)), "fp8-block"
    if name == "fp8":
        scale = torch.empty(1)
        return moe_config.fp8_w8a8_moe_quant_config(w1_scale=scale, w2_scale=scale, per_act_token_quant=False), \
            "fp8-tensor"
    raise InstalledMismatch(f"quantization {name!r} has no MoE quant-config stand-in")


def _prepare_finalize(config, st) -> dict:
    """vLLM's MoE layer set-up for one layer, down to ``maybe_make_prepare_finalize``."""
    import vllm.distributed.parallel_state as ps
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers.fused_moe import all2all_utils, layer
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.config import FusedMoEConfig, RoutingMethodType
    from vllm.distributed.device_communicators import all2all

    pc = config.parallel_config
    hf = config.model_config.hf_text_config
    tp, dp, pcp = pc.tensor_parallel_size, pc.data_parallel_size, pc.prefill_context_parallel_size
    world = tp * dp * pcp
    groups = {"get_dp_group": st.Group(dp), "get_tp_group": st.Group(tp), "get_pcp_group": st.Group(pcp),
              "get_ep_group": st.Group(world)}
    for module in (ps, layer, all2all_utils, sys.modules["vllm.model_executor.layers.fused_moe.config"]):
        for fn, group in groups.items():
            if hasattr(module, fn):
                setattr(module, fn, lambda g=group: g)
        if hasattr(module, "get_tensor_model_parallel_world_size"):
            module.get_tensor_model_parallel_world_size = lambda: tp
        if hasattr(module, "get_tensor_model_parallel_rank"):
            module.get_tensor_model_parallel_rank = lambda: 0
    ps.in_the_same_node_as = lambda group, source_rank=0: [r < GPUS_PER_NODE for r in range(group.size())]
    for name in ("DeepEPHTPrepareAndFinalize", "DeepEPLLPrepareAndFinalize", "DeepEPV2PrepareAndFinalize",
                 "MoriPrepareAndFinalize", "NixlEPPrepareAndFinalize"):
        if hasattr(all2all_utils, name):  # built after the library call, on GPU tensors: no constructor
            original = getattr(all2all_utils, name)
            setattr(all2all_utils, name, type(name, (original,), {"__init__": _no_init}))
    if pc.all2all_backend.startswith("mori"):
        _rocm_aiter()
    with set_current_vllm_config(config):
        moe_parallel = layer.make_parallel_config(tp, dp, pcp, pc.use_sequence_parallel_moe, pc)
        num_experts = getattr(hf, "n_routed_experts", None) or hf.num_experts
        global_experts, logical, _ = layer.determine_expert_counts(
            num_experts, pc.eplb_config.num_redundant_experts, None, False)
        in_dtype = config.model_config.dtype
        hidden = all2all_utils.maybe_roundup_layer_hidden_size(hf.hidden_size, in_dtype, moe_parallel)
        quant, quant_kind = _quant_config(config, False)
        moe = FusedMoEConfig(
            num_experts=global_experts, experts_per_token=hf.num_experts_per_tok, hidden_dim=hidden,
            intermediate_size=getattr(hf, "moe_intermediate_size", 0), num_local_experts=global_experts // max(
                moe_parallel.ep_size, 1), num_logical_experts=logical, moe_parallel_config=moe_parallel,
            in_dtype=in_dtype, max_num_tokens=config.scheduler_config.max_num_batched_tokens,
            activation=MoEActivation.from_str("silu"), device=config.device_config.device,
            routing_method=RoutingMethodType.Default)
        manager = _manager(all2all, pc, world)
        all2all_utils.maybe_make_prepare_finalize(moe, quant, all2all_manager=manager)
    return {"use_all2all_kernels": moe_parallel.use_all2all_kernels, "hidden_dim": hidden, "num_experts": global_experts,
            "ep_size": moe_parallel.ep_size, "sp_size": moe_parallel.sp_size, "activation_quant": quant_kind}


def _rocm_aiter() -> None:
    """MORI runs on ROCm with AITER's fused MoE (``FusedMoEConfig`` asserts it): an MI300X (gfx942) whose
    ``VLLM_ROCM_USE_AITER`` fused MoE is on, without the fused shared expert."""
    import vllm.platforms.rocm as rocm
    from vllm._aiter_ops import rocm_aiter_ops

    rocm.on_gfx942, rocm.on_gfx950 = (lambda: True), (lambda: False)
    rocm_aiter_ops.is_fused_moe_enabled = classmethod(lambda cls: True).__get__(rocm_aiter_ops)
    rocm_aiter_ops.is_fusion_moe_shared_experts_enabled = classmethod(lambda cls: False).__get__(rocm_aiter_ops)


def _no_init(self, *args, **kwargs) -> None:
    """The prepare/finalize constructors' stand-in."""


def _manager(all2all, pc, world: int):
    """The manager ``CudaCommunicator.__init__`` builds for ``pc.all2all_backend`` (when ``use_all2all``)."""
    from . import _vllm_standins as st

    group = st.CpuGroup(world)
    backend = pc.all2all_backend
    if backend == "deepep_high_throughput":
        return all2all.DeepEPHTAll2AllManager(group)
    if backend == "deepep_low_latency":
        return all2all.DeepEPLLAll2AllManager(group)
    if backend == "deepep_v2":
        manager = all2all.DeepEPV2All2AllManager(group)
        manager._check_gin_support = lambda group: None  # an NCCL all-reduce on a CUDA tensor
        return manager
    if backend in ("mori_high_throughput", "mori_low_latency"):
        import torch

        register = torch._C._distributed_c10d._register_process_group
        torch._C._distributed_c10d._register_process_group = lambda name, group: None  # a real c10d group only
        try:
            return all2all.MoriAll2AllManager(group, backend)
        finally:
            torch._C._distributed_c10d._register_process_group = register
    if backend in ("naive", "allgather_reducescatter"):
        return all2all.AgRsAll2AllManager(group)
    raise InstalledMismatch(f"no stand-in for the {backend} all2all manager")


def _buffer(rep: dict, *names: str) -> int:
    return sum(b["num_bytes"] for b in rep["report"]["buffers"] if b["name"] in names)


def _setting(rep: dict, name: str):
    return next((s["value"] for s in rep["settings"] if s["name"] == name), None)


def compare(found: dict, rep: dict) -> list[tuple[str, object, object]]:
    """``[(argument, the engine's value, epbuf's value)]`` for every argument compared between what
    :func:`resolve` captured and an ``epbuf.engine/1`` JSON report ``rep`` of the same line: whether a
    buffer is built (0 B when not), the number of handles, DeepEP ``Buffer``'s byte counts and group,
    the low-latency size hint's arguments, ``ElasticBuffer``'s arguments, and the engine's resolved token
    budget. Equal values agree (through :func:`epbuf.engines.installed.compare`)."""
    calls = found["calls"]
    handles = [c for c in calls if c["name"] in ("Buffer", "ElasticBuffer", "EpDispatchCombineOp")]
    inputs = rep["report"]["inputs"]
    out = [("buffer built", bool(handles), rep["num_bytes"] > 0)]
    if not handles:
        return out + [("num_bytes without a buffer", 0, rep["num_bytes"])]
    out.append(("handles", 1, len(handles)))
    if "max_num_batched_tokens" in found.get("resolved", {}):
        out.append(("max_num_batched_tokens", found["resolved"]["max_num_batched_tokens"],
                    _setting(rep, "--max-num-batched-tokens")))
    call = next(c for c in calls if c["name"] in ("Buffer", "ElasticBuffer", "EpDispatchCombineConfig"))
    args = call["args"]
    if call["name"] == "Buffer" and "platform" in inputs:  # UCCL-EP's drop-in: the byte counts it was given
        out += [("num_nvl_bytes", args["num_nvl_bytes"], inputs.get("num_nvl_bytes")),
                ("num_rdma_bytes", args["num_rdma_bytes"], inputs.get("num_rdma_bytes", _buffer(rep, "RDMA buffer"))),
                ("low_latency_mode", args.get("low_latency_mode", False), "num_max_dispatch_tokens_per_rank" in inputs),
                ("group size", args["group_size"], _setting(rep, "EP size"))]
    elif call["name"] == "Buffer":
        out += [("num_nvl_bytes", args["num_nvl_bytes"], _buffer(rep, "NVL buffer")),
                ("num_rdma_bytes", args["num_rdma_bytes"], _buffer(rep, "LL RDMA buffer", "RDMA buffer")),
                ("low_latency_mode", args.get("low_latency_mode", False), "num_max_dispatch_tokens_per_rank" in inputs),
                ("group size", args["group_size"], _setting(rep, "EP size"))]
    hint = next((c["args"] for c in calls if c["name"].endswith("size_hint")), None)
    if hint is not None:
        out += [("hint T", hint["num_max_dispatch_tokens_per_rank"], inputs.get("num_max_dispatch_tokens_per_rank")),
                ("hint hidden", hint["hidden"], inputs.get("hidden")),
                ("hint num_ranks", hint["num_ranks"], inputs.get("num_ranks")),
                ("hint num_experts", hint["num_experts"], inputs.get("num_experts"))]
    if call["name"] == "EpDispatchCombineConfig":
        pairs = (("world_size", "num_ranks"), ("hidden_dim", "hidden"), ("max_token_type_size", "max_token_type_size"),
                 ("max_num_inp_token_per_rank", "num_max_tokens_per_rank"), ("num_experts_per_rank", "num_experts_per_rank"),
                 ("num_experts_per_token", "num_topk"), ("kernel_type", "kernel_type"), ("gpu_per_node", "gpu_per_node"))
        out += [(f"EpDispatchCombineConfig {theirs}", args[theirs], inputs.get(ours)) for theirs, ours in pairs]
        one_byte = any(t in str(args["data_type"]) for t in ("float8", "int8"))
        out += [("EpDispatchCombineConfig data_type bytes", 1 if one_byte else 2, 1 if inputs.get("use_fp8_dispatch") else 2),
                ("EpDispatchCombineConfig scale bytes", args["scale_dim"] * args["scale_type_size"],
                 inputs.get("scale_dim", 0) * inputs.get("scale_type_size", 0))]
    if call["name"] == "ElasticBuffer":
        out += [(f"ElasticBuffer {key}", args[key], inputs.get(key)) for key in (
            "num_max_tokens_per_rank", "hidden", "num_topk", "use_fp8_dispatch", "allow_hybrid_mode",
            "allow_multiple_reduction")]
        if "num_experts" in found.get("resolved", {}):
            out.append(("ElasticBuffer num_experts", found["resolved"]["num_experts"],
                        inputs.get("num_experts", 0) + inputs.get("num_redundant_experts", 0)))
    return out



def _first_reason(error: ValueError) -> str:
    """The line of a start-up refusal that says why: pydantic's ``Value error, ...`` line of a
    ``ValidationError`` (its first line only counts the errors), else the first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    reason = next((line for line in lines if line.startswith("Value error, ")), lines[0] if lines else "")
    return reason.removeprefix("Value error, ").split(" [type=", 1)[0] or type(error).__name__
