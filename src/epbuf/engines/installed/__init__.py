"""Resolve a launch line through the engine installed next to epbuf, running the engine's own
parser and start-up code up to its call into the EP library, with its GPU parts stood in for.

``resolve(engine, launch_argv, env)`` imports ``epbuf.engines.installed.<engine>`` and returns
what it captured::

    {"engine": "vllm", "engine_version": "0.33.0",
     "calls": [{"library": "deep_ep", "name": "Buffer", "args": {...}}, ...],
     "resolved": {...}}

``calls`` lists the EP library calls in order (empty: the engine builds no EP buffer for this
line); ``resolved`` holds the engine's own values epbuf compares with its recipe (tokens, EP size,
backend). The same modules drive ``epbuf engine NAME --from-installed`` and the conformance tier
(``tests/conformance/``), so both are one code path. Importing this package uses the standard
library only; the engine is imported when :func:`resolve` runs.
"""

from __future__ import annotations

from ...errors import EpbufError

__all__ = ["InstalledMismatch", "NotInstalled", "resolve", "compare", "ENGINES"]

#: Engines with a resolver module here (``installed/<name>.py``).
ENGINES = ("vllm", "sglang", "megatron")


class InstalledMismatch(EpbufError):
    """The installed engine's internals no longer fit the stand-ins (one line saying where)."""


class NotInstalled(EpbufError):
    """The engine is not importable in this Python."""


def resolve(engine: str, launch_argv: list[str], env: dict | None = None, **options) -> dict:
    """Run ``engine``'s own code on ``launch_argv`` (the launch line's words after the program,
    e.g. ``["serve", "deepseek-ai/DeepSeek-V3", "-dp", "16", ...]``) with environment ``env``.

    Raises:
        NotInstalled: the engine cannot be imported.
        InstalledMismatch: its code no longer fits the stand-ins.
    """
    import importlib

    if engine not in ENGINES:
        raise EpbufError(f"--from-installed = {engine!r}: engines with an installed resolver are {', '.join(ENGINES)}")
    try:
        module = importlib.import_module(f"{__name__}.{engine}")
    except ModuleNotFoundError as error:
        if error.name and error.name.startswith(__name__):
            raise EpbufError(f"--from-installed: no resolver for {engine} in this epbuf") from None
        raise
    return module.resolve(list(launch_argv), dict(env or {}), **options)


def _buffer(rep: dict, *names: str) -> int:
    return sum(b["num_bytes"] for b in rep["report"]["buffers"] if b["name"] in names)


def _setting(rep: dict, name: str):
    return next((s["value"] for s in rep["settings"] if s["name"] == name), None)


def compare(found: dict, rep: dict) -> list[tuple[str, object, object]]:
    """``[(argument, the engine's value, epbuf's value)]`` for every argument compared between what
    :func:`resolve` captured and an ``epbuf.engine/1`` JSON report ``rep`` of the same line: whether a
    buffer is built (0 B when not), the number of handles, DeepEP ``Buffer``'s byte counts and group,
    the low-latency size hint's arguments, ``ElasticBuffer``'s arguments, and the engine's resolved token
    budget. Equal values agree; the conformance tier and ``--from-installed`` both use this list."""
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

