"""Resolve an SGLang launch line through the installed SGLang's own code (tested with 0.5.23).

Upstream (``sglang/srt/`` of the wheel, ``S``): ``S/server_args.py:668`` ``prepare_server_args`` (its
argparse parser: ``--flag=value`` and unambiguous abbreviations), ``ServerArgs.resolve_once`` (the
resolution pipeline, ``S/arg_groups/``: ``ep_size = tp_size`` for DeepEP and MoRI, MoRI's ``auto`` ->
``normal``, the MoRI chunked-prefill assert, the GPU-memory defaults), ``S/runtime_context.py:1489``
``publish`` and ``S/layers/moe/utils.py:479`` ``initialize_moe_config``; then the MoE layer's
dispatcher, ``S/layers/moe/fused_moe_triton/layer.py:175`` ``create_moe_dispatcher`` ->
``MaybeTboDeepEPDispatcher`` (two inner dispatchers under two-batch overlap), and each inner
dispatcher's buffer: DeepEP's ``_get_buffer`` -> ``DeepEPBuffer.get_deepep_buffer`` ->
``deep_ep.Buffer(...)``; MoRI's ``set_quant_config`` (as the quant method does after loading, with
the MoE weights' dtype) and ``mori_op`` -> ``init_mori_op`` -> ``mori.ops.EpDispatchCombineConfig``.

Stood in for (:mod:`._sglang_standins`): the GPU, compiled packages, the process groups (the TP
group of ``tp_size`` ranks, seen from rank 0), the EP libraries, and the checkpoint's weights (the
MoE weight dtype follows SGLang's resolved ``quantization``: ``fp8`` -> ``float8_e4m3fn``, none ->
``bfloat16``; other methods never call ``set_quant_config``). The model's shape comes from its
``config.json`` through SGLang's ``ModelConfig``: experts = routed + ``ep_num_redundant_experts``.
"""

from __future__ import annotations

from . import stand_in_errors

__all__ = ["compare", "resolve"]


def _device(name: str):
    from ...devices import get_device
    from ._sglang_standins import Device

    spec = get_device(name)
    rocm = spec.name.startswith("mi")
    return Device(spec.title, spec.num_bytes, rocm=rocm, num_sms=304 if rocm else 132)


def resolve(argv: list[str], env: dict, device: str | None = None) -> dict:
    """Run SGLang on ``argv`` (the words after ``python -m sglang.launch_server``) with ``env``, on epbuf
    device ``device`` (default an H100; an ``mi*`` device is ROCm).

    Returns ``{"engine", "engine_version", "calls", "resolved"}``; ``calls`` is empty when SGLang builds
    no EP buffer (``--moe-a2a-backend none``), and ``resolved["refused"]`` holds the message of a
    start-up refusal (then there are no calls either).

    Raises:
        InstalledMismatch: SGLang's internals no longer fit the stand-ins.
    """
    import os
    import warnings

    from ._sglang_standins import Recorder, install, patch_torch, uninstall

    rec = Recorder()
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        with stand_in_errors("sglang"):
            patch_torch(_device(device or "h100"))
            finder = install(rec)
            try:
                with warnings.catch_warnings():  # the engine's own deprecation notes are not epbuf's findings
                    warnings.simplefilter("ignore")
                    return _run(argv, rec)
            finally:
                uninstall(finder)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _run(argv: list[str], rec) -> dict:
    import torch
    import sglang
    import sglang.srt.utils.common as common
    from sglang.srt.server_args import prepare_server_args

    mib = torch.cuda.get_device_properties(0).total_memory / (1 << 20)
    common.get_nvgpu_memory_capacity = lambda: mib
    common.get_amdgpu_memory_capacity = lambda: mib
    _reset()
    server_args = prepare_server_args(list(argv))
    out = {"engine": "sglang", "engine_version": sglang.__version__, "calls": rec.calls, "resolved": {}}
    try:
        server_args.resolve_once()
    except (AssertionError, ValueError) as error:
        out["resolved"]["refused"] = str(error).splitlines()[0] if str(error) else type(error).__name__
        return out
    from sglang.srt.arg_groups.model_override_base import model_config_of, resolved_view
    from sglang.srt.layers.moe.utils import initialize_moe_config
    from sglang.srt.runtime_context import publish

    view = resolved_view(server_args)
    resolved = {k: getattr(view, k) for k in ("tp_size", "ep_size", "moe_a2a_backend", "deepep_mode",
                                                "chunked_prefill_size", "enable_two_batch_overlap",
                                                "ep_num_redundant_experts", "quantization")}
    model_config = model_config_of(server_args)
    resolved["quantization"] = model_config.quantization
    out["resolved"] = resolved
    if resolved["moe_a2a_backend"] in (None, "none"):
        return out
    hf = model_config.hf_config
    publish(server_args, role="test")
    initialize_moe_config()
    try:
        resolved["num_fused_shared_experts"] = _fused_shared_experts(model_config, resolved["ep_size"])
        _build(rec, resolved, hf)
    except (AssertionError, ValueError) as error:  # refused while the MoE layer is built
        resolved["refused"] = str(error).splitlines()[0] if str(error) else type(error).__name__
    return out


def _fused_shared_experts(model_config, ep: int) -> int:
    """``resolve_shared_experts_config`` for the model's class (``S/layers/moe/utils.py:601-623``; the
    gate reads no quant config here: the corpus' checkpoints are BF16 or block FP8)."""
    from sglang.srt.layers.moe.utils import resolve_shared_experts_config
    from sglang.srt.models.registry import ModelRegistry
    from sglang.srt.runtime_context import get_parallel

    get_parallel().override_permanently(moe_ep_size=ep, moe_ep_rank=0)
    model_cls, _ = ModelRegistry.resolve_model_cls(model_config.hf_config.architectures)
    return resolve_shared_experts_config(model_cls, model_config.hf_config, None).num_fused_shared_experts


def _quant_method(quantization, hf):
    """A stand-in of the MoE quant method SGLang selects (its class is what the DeepEP V2 path reads):
    ``UnquantizedFusedMoEMethod`` without quantization, ``Fp8MoEMethod`` with the checkpoint's block size
    and activation scheme for ``fp8``, and for any other method an object of another class."""
    import types

    from sglang.srt.layers.quantization.fp8 import Fp8MoEMethod
    from sglang.srt.layers.quantization.unquant import UnquantizedFusedMoEMethod

    if quantization is None:
        return object.__new__(UnquantizedFusedMoEMethod)
    if quantization != "fp8":
        return type(f"{quantization}MoEMethod", (), {})()
    qc = getattr(hf, "quantization_config", None) or {}
    method = object.__new__(Fp8MoEMethod)
    method.use_mxfp8, method.is_fp4_expert = False, False
    method.weight_block_size = qc.get("weight_block_size")
    method.quant_config = types.SimpleNamespace(activation_scheme=qc.get("activation_scheme", "dynamic"))
    return method


def _reset() -> None:
    """Forget what an earlier resolution in this process left: the DeepEP buffer singleton (on the
    runtime resources), the ``--deepep-config`` singleton and ``init_mori_op``'s cache."""
    from sglang.srt.layers.moe.token_dispatcher import deepep, moriep
    from sglang.srt.runtime_context import get_parallel, get_resources

    get_parallel().clear_stamp()
    try:
        get_resources().buffers.pop("deepep_ep_state", None)
        get_resources().buffers.pop("deepep_v2_ep_state", None)
    except (ValueError, RuntimeError):  # nothing published yet
        pass
    deepep.DeepEPConfig._instance = None
    moriep.init_mori_op.cache_clear()


def _build(rec, resolved: dict, hf) -> None:
    """The MoE layer's dispatcher and, for each inner dispatcher, the EP library call of its first use."""
    import torch
    from sglang.srt.layers.moe.fused_moe_triton import layer as moe_layer
    from sglang.srt.layers.moe.moe_runner.base import MoeRunnerConfig
    from sglang.srt.runtime_context import get_parallel

    from ._sglang_standins import StandInGroup

    from sglang.srt.layers.moe.utils import has_per_rank_fused_shared_slots

    ep = resolved["ep_size"]
    routed = getattr(hf, "n_routed_experts", None) or getattr(hf, "num_experts", None)
    fused = resolved["num_fused_shared_experts"]
    # DeepseekV2MoE.__init__ (S/models/deepseek_v2.py:690-756): per-rank shared slots with DeepEP-class backends
    shared_slots = ep if has_per_rank_fused_shared_slots(fused) else fused
    num_experts = routed + shared_slots + (resolved["ep_num_redundant_experts"] or 0)
    top_k = hf.num_experts_per_tok + (1 if has_per_rank_fused_shared_slots(fused) else fused)
    group = StandInGroup(resolved["tp_size"])
    moe_layer.get_parallel = lambda: type("P", (), {"tp_group": group, "moe_ep_group": group, "moe_ep_size": ep,
                                                    "moe_ep_rank": 0})()
    import sglang.srt.layers.moe.token_dispatcher.moriep as moriep

    moriep.get_parallel = moe_layer.get_parallel
    if not hasattr(moriep, "get_hip_quant"):  # aiter's quant kernels (ROCm only): never called before the op
        moriep.get_hip_quant = lambda *args: None
        moriep.QuantType = type("QuantType", (), {"per_1x128": 0, "per_1x32": 1})
    config = MoeRunnerConfig(num_experts=num_experts, num_local_experts=num_experts // ep, hidden_size=hf.hidden_size,
                             top_k=top_k, params_dtype=torch.bfloat16)
    if resolved["moe_a2a_backend"] == "deepep_v2":  # the dispatch dtype and the checks follow the quant method
        method = _quant_method(resolved["quantization"], hf)
        moe_layer._validate_deepep_v2_quant_method(method)  # FusedMoE.__init__ (layer.py:528)
        moe_layer.create_moe_dispatcher(config, quant_method=method)._impl._get_buffer()
        return
    dispatcher = moe_layer.create_moe_dispatcher(config, quant_method=None)
    weight = torch.float8_e4m3fn if resolved["quantization"] == "fp8" else torch.bfloat16
    for inner in dispatcher._inners:
        if resolved["moe_a2a_backend"] == "mori":
            if resolved["quantization"] in (None, "fp8"):
                inner.set_quant_config({"weight_dtype": weight})
            impl = getattr(inner, "_normal_dispatcher", None) or inner._low_latency_dispatcher
            impl.mori_op
        else:
            for impl in (getattr(inner, "_normal_dispatcher", None), getattr(inner, "_low_latency_dispatcher", None)):
                if impl is not None:
                    impl._get_buffer()


def compare(installed: dict, rep: dict) -> list[tuple[str, object, object]]:
    """``(argument, SGLang's value, epbuf's value)`` for every argument captured by :func:`resolve`
    (``installed``) against ``epbuf engine sglang --json`` (``rep``): whether SGLang refused the line,
    how many EP buffers / MoRI handles it built, and each ``deep_ep.Buffer`` / low-latency hint /
    ``ElasticBuffer`` / ``EpDispatchCombineConfig`` argument."""
    calls, report = installed["calls"], rep["report"]
    inputs = report["inputs"]
    quantities = report.get("quantities", {})
    pairs = [("refused", bool(installed["resolved"].get("refused")),
              any(f["code"] in ("sglang.mori-refused", "sglang.deepep-v2-refused") for f in report["findings"]))]
    buffers = [c for c in calls if c["name"] == "Buffer"]
    ops = [c for c in calls if c["name"] == "EpDispatchCombineOp"]
    elastic = [c for c in calls if c["name"] == "ElasticBuffer"]
    pairs.append(("EP buffers built", len(buffers) + len(ops) + len(elastic), 0 if rep["num_bytes"] == 0 else
                  inputs.get("num_handles", 1)))
    for c in elastic:
        a = c["args"]
        pairs += [("group size", a["group_size"], inputs["num_ranks"]),
                  ("num_max_tokens_per_rank", a["num_max_tokens_per_rank"], inputs["num_max_tokens_per_rank"]),
                  ("hidden", a["hidden"], inputs["hidden"]), ("num_topk", a["num_topk"], inputs["num_topk"]),
                  ("use_fp8_dispatch", a["use_fp8_dispatch"], inputs["use_fp8_dispatch"]),
                  ("allow_hybrid_mode", a["allow_hybrid_mode"], inputs["allow_hybrid_mode"])]
    for c in buffers:
        a = c["args"]
        pairs += [("group size", a["group_size"], inputs["num_ranks"]),
                  ("num_nvl_bytes", a["num_nvl_bytes"], quantities["num_nvl_bytes"]),
                  ("num_rdma_bytes", a["num_rdma_bytes"], quantities["num_rdma_bytes"]),
                  ("low_latency_mode", a["low_latency_mode"], inputs["low_latency_mode"]),
                  ("num_qps_per_rank", a["num_qps_per_rank"], quantities["num_qps_per_rank"])]
    for c in calls:
        if c["name"] == "Buffer.get_low_latency_rdma_size_hint":
            a = c["args"]
            pairs += [("LL tokens", a["num_max_dispatch_tokens_per_rank"], inputs["num_max_dispatch_tokens_per_rank"]),
                      ("LL hidden", a["hidden"], inputs["hidden"]), ("LL ranks", a["num_ranks"], inputs["num_ranks"]),
                      ("LL experts", a["num_experts"], inputs["num_experts"])]
    for c in ops:
        a = c["args"]
        pairs += [("world_size", a["world_size"], inputs["num_ranks"]), ("hidden_dim", a["hidden_dim"], inputs["hidden"]),
                  ("scale bytes", a["scale_dim"] * a["scale_type_size"], inputs["scale_dim"] * inputs["scale_type_size"]),
                  ("max_token_type_size", a["max_token_type_size"], inputs["max_token_type_size"]),
                  ("max_num_inp_token_per_rank", a["max_num_inp_token_per_rank"], inputs["num_max_tokens_per_rank"]),
                  ("num_experts_per_rank", a["num_experts_per_rank"], inputs["num_experts_per_rank"]),
                  ("num_experts_per_token", a["num_experts_per_token"], inputs["num_topk"]),
                  ("kernel_type", a["kernel_type"], inputs["kernel_type"]),
                  ("gpu_per_node", a["gpu_per_node"], inputs["gpu_per_node"]),
                  ("num_qp_per_pe", a["num_qp_per_pe"], inputs["num_qp_per_pe"]),
                  ("quant_type", a["quant_type"], inputs["quant_type"]),
                  ("max_total_recv_tokens", a["max_total_recv_tokens"], inputs["max_total_recv_tokens"]),
                  ("fp8 dispatch", "float8" in str(a["data_type"]), inputs["use_fp8_dispatch"])]
    return pairs
