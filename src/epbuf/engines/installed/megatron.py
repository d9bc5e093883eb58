"""Resolve a Megatron-LM launch line through the installed megatron-core's own code (tested with 0.16.1).

Upstream (``megatron/core/`` of the wheel): ``transformer/transformer_config.py`` ``TransformerConfig``
(``__post_init__``: the flex dispatcher's checks, ``expert_tensor_parallel_size`` defaulting to TP in
``model_parallel_config.py:413-414``), ``transformer/moe/token_dispatcher.py:1113-1153``
``_DeepepManager.__init__`` (``set_deepep_num_sms(config.moe_deepep_num_sms)``) and
``transformer/moe/fused_a2a.py:33-66`` ``get_buffer(group, get_hidden_bytes(x))`` -> ``deep_ep.Buffer``, as
``FusedDispatch.forward`` (l.88) calls it with the tokens the MoE layer dispatches (BF16, ``hidden`` wide).

Stood in for: Megatron-LM's training argument parser (not in the wheel: the launch line's MoE and
parallelism flags are mapped to ``TransformerConfig`` fields by name, :data:`FLAGS`), the ``tp_ep``
process group (expert TP x EP ranks, seen from rank 0) and ``deep_ep`` (:mod:`._sglang_standins`).
"""

from __future__ import annotations

from . import stand_in_errors

__all__ = ["FLAGS", "compare", "resolve"]

#: Megatron-LM flags -> (TransformerConfig field, type).
FLAGS = {"--hidden-size": ("hidden_size", int), "--num-experts": ("num_moe_experts", int),
         "--moe-router-topk": ("moe_router_topk", int), "--tensor-model-parallel-size": ("tensor_model_parallel_size", int),
         "--expert-model-parallel-size": ("expert_model_parallel_size", int),
         "--expert-tensor-parallel-size": ("expert_tensor_parallel_size", int),
         "--moe-token-dispatcher-type": ("moe_token_dispatcher_type", str),
         "--moe-flex-dispatcher-backend": ("moe_flex_dispatcher_backend", str),
         "--moe-deepep-num-sms": ("moe_deepep_num_sms", int), "--moe-hybridep-num-sms": ("moe_hybridep_num_sms", int),
         "--moe-enable-deepep": ("moe_enable_deepep", bool), "--disable-bias-linear": ("add_bias_linear", "off")}


def _config_kwargs(argv: list[str]) -> dict:
    kwargs: dict = {"num_layers": 2, "hidden_size": 7168, "num_attention_heads": 8, "num_moe_experts": 256,
                    "moe_router_topk": 8, "bf16": True}
    i = 0
    while i < len(argv):
        flag, eq, value = argv[i].partition("=")
        i += 1
        if flag not in FLAGS:
            continue
        field, kind = FLAGS[flag]
        if kind in (bool, "off"):
            kwargs[field] = kind is bool
            continue
        if not eq:
            value = argv[i]
            i += 1
        kwargs[field] = kind(value)
    return kwargs


def resolve(argv: list[str], env: dict) -> dict:
    """Run megatron-core on the launch line's flags (the words after the training script).

    Returns ``{"engine", "engine_version", "calls", "resolved"}``; ``calls`` is empty when the flex
    dispatcher with DeepEP is not used (no DeepEP buffer).

    Raises:
        InstalledMismatch: megatron-core's internals no longer fit the stand-ins.
    """
    import warnings

    from ._sglang_standins import Recorder, install, uninstall

    rec = Recorder()
    with stand_in_errors("megatron"):
        finder = install(rec)
        try:
            with warnings.catch_warnings():  # the engine's own deprecation notes are not epbuf's findings
                warnings.simplefilter("ignore")
                return _run(argv, rec)
        finally:
            uninstall(finder)


def _run(argv: list[str], rec) -> dict:
    import importlib.metadata

    import torch
    from megatron.core.transformer.moe import fused_a2a, token_dispatcher
    from megatron.core.transformer.transformer_config import TransformerConfig

    from ._sglang_standins import StandInGroup

    try:
        config = TransformerConfig(**_config_kwargs(argv))
    except (AssertionError, ValueError) as error:  # Megatron refuses the settings at start-up
        return {"engine": "megatron", "engine_version": importlib.metadata.version("megatron-core"), "calls": [],
                "resolved": {"refused": str(error).splitlines()[0] if str(error) else type(error).__name__}}
    size = config.expert_tensor_parallel_size * config.expert_model_parallel_size
    resolved = {"dispatcher": config.moe_token_dispatcher_type, "backend": config.moe_flex_dispatcher_backend,
                "tp_ep_size": size, "num_sms": config.moe_deepep_num_sms}
    out = {"engine": "megatron", "engine_version": importlib.metadata.version("megatron-core"), "calls": rec.calls,
           "resolved": resolved}
    if config.moe_token_dispatcher_type != "flex" or config.moe_flex_dispatcher_backend != "deepep":
        return out
    group = StandInGroup(size)
    fused_a2a._buffer = None
    token_dispatcher._DeepepManager(group=group, num_local_experts=config.num_moe_experts // config.expert_model_parallel_size,
                                    router_topk=config.moe_router_topk, num_experts=config.num_moe_experts,
                                    config=config)
    x = torch.empty(1, config.hidden_size, dtype=torch.bfloat16)
    fused_a2a.get_buffer(group, fused_a2a.get_hidden_bytes(x))
    return out


def compare(installed: dict, rep: dict) -> list[tuple[str, object, object]]:
    """``(argument, megatron-core's value, epbuf's value)`` for every argument captured by :func:`resolve`
    (``installed``) against ``epbuf engine megatron --json`` (``rep``): how many DeepEP buffers were built
    and each ``deep_ep.Buffer`` argument (group size, NVL and RDMA bytes, the ``num_sms`` set before it)."""
    report = rep["report"]
    inputs, quantities = report["inputs"], report.get("quantities", {})
    buffers = [c for c in installed["calls"] if c["name"] == "Buffer"]
    pairs = [("DeepEP buffers built", len(buffers), 0 if rep["num_bytes"] == 0 else 1)]
    for c in buffers:
        a = c["args"]
        pairs += [("group size", a["group_size"], inputs["num_ranks"]),
                  ("num_nvl_bytes", a["num_nvl_bytes"], quantities["num_nvl_bytes"]),
                  ("num_rdma_bytes", a["num_rdma_bytes"], quantities["num_rdma_bytes"]),
                  ("num_sms", a["num_sms"], inputs["num_sms"])]
    return pairs
