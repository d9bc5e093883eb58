"""The engine registry's API: :class:`EngineSpec`, :func:`get_engine`, :func:`report`
(re-exported by :mod:`epbuf.engines`)."""

from __future__ import annotations

from .._record import Record
from ..errors import Checker, InvalidArgumentError, UnknownNameError
from . import ENGINES
from ._knobs import EngineProblem

__all__ = ["EngineSpec", "get_engine", "report"]


class EngineSpec(Record):
    """One engine: its knobs, versions and recipe.

    Attributes:
        name: registry name.
        title: display name.
        knobs: :class:`~epbuf.engines._knobs.Knob` table (flags and environment variables).
        versions: version id -> what it is (first one listed in ``--help``).
        default_version: the version used when none is given (the newest).
        recipe: ``recipe(EngineContext) -> EngineReport``.
        aliases: shared option -> the engine's own spellings (``"hidden": ("--hidden-size",)``).
        gpu: ``True`` for DeepEP-based engines (``--deepep-version`` applies).
        load_help: what ``--max-tokens-under-load`` means for this engine.
        ranks_help: how the engine's EP size is derived.
    """

    name: str
    title: str
    knobs: tuple
    versions: dict
    default_version: str
    recipe: object
    aliases: dict
    gpu: bool = True
    load_help: str = ""
    ranks_help: str = ""


def get_engine(name: str) -> EngineSpec:
    """The :class:`EngineSpec` of ``name`` (imports its module).

    Raises:
        UnknownNameError: a name not in :data:`ENGINES`.
    """
    try:
        module_name, attribute, _ = ENGINES[name]
    except KeyError:
        raise UnknownNameError(f"engine = {name!r}: unknown; choose one of {', '.join(ENGINES)}") from None
    from .._lazy import module

    return getattr(module(module_name), attribute)


# The shape used when neither --model nor explicit values are given.
_DEFAULT_MODEL = "deepseek-v3"


def report(engine: str, *, model: object = None, hidden: int | None = None, num_topk: int | None = None,
           num_experts: int | None = None, num_shared_experts: int | None = None, num_ranks: int | None = None,
           num_nodes: int | None = None, num_ranks_per_node: int | None = None, flags: dict | None = None,
           env: dict | None = None, version: str | None = None, backend_version: str | None = None,
           max_tokens_under_load: int | None = None, budget: int | None = None,
           device: object = None, ranks_flag: str | None = None, ignored: tuple = (), launch: bool = False):
    """Size what ``engine`` allocates per device with these flags and environment.

    Args:
        engine: a name of :data:`ENGINES`.
        model: a :class:`~epbuf.models.ModelSpec` or preset name for hidden / top-k / experts
            (``None``: DeepSeek-V3 unless all three are given).
        hidden, num_topk, num_experts, num_shared_experts: explicit shape (override the model).
        num_ranks: expert-parallel size (engines that derive it from their own flags check
            that both agree).
        num_nodes, num_ranks_per_node: topology (default: ``min(ranks, 8)`` per node).
        flags: the engine's flags, name -> value (``{"--max-num-batched-tokens": 2048}``).
        env: the engine's environment variables, name -> value as text.
        version: engine version id (``None``: the newest).
        backend_version: the EP library's formula generation (DeepEP version or commit id) for GPU
            engines (``None``: newest).
        max_tokens_under_load: the most tokens one rank dispatches in one call under the load
            the user plans for (enables the ``load`` recommendations and findings).
        budget: bytes per device the buffers may take (enables ``budget`` recommendations).
        device: a device preset name, a :class:`~epbuf.devices.DeviceSpec` or ``(name, bytes)``.
        ranks_flag: how the caller spelled ``num_ranks`` (``--ranks``, ``--ep-size``), for the
            settings table and error lines (default ``num_ranks``).
        ignored: settings of a pasted launch line that change none of these buffers; listed in
            one ``engine.ignored`` finding.
        launch: the settings come from a pasted launch line: a setting left at a default that is
            epbuf's rather than the engine's gets an ``engine.epbuf-default`` warning.

    Raises:
        UnknownNameError: unknown engine, model or device.
        InvalidArgumentError: malformed or out-of-range values; configurations the engine
            itself refuses to start with.
    """
    from ._common import EngineContext
    from ._knobs import resolve_settings

    spec = get_engine(engine)
    c = Checker()
    if version is None:
        version = spec.default_version
    elif version not in spec.versions:
        c.problems.append(EngineProblem("--engine-version", version,
                                        f"{engine} versions: {', '.join(spec.versions)}"))
    for name, value, lo in (("hidden", hidden, 1), ("num_topk", num_topk, 0), ("num_experts", num_experts, 1),
                            ("num_shared_experts", num_shared_experts, 0), ("num_ranks", num_ranks, 1),
                            ("num_nodes", num_nodes, 1), ("num_ranks_per_node", num_ranks_per_node, 1),
                            ("max_tokens_under_load", max_tokens_under_load, 1), ("budget", budget, 0)):
        if value is not None:
            c.int_range(name, value, lo, None)
    if not spec.gpu and backend_version is not None:
        c.problems.append(EngineProblem("--backend-version", backend_version,
                                        f"engine {engine} does not use DeepEP (Ascend HCCL windows)"))
    c.raise_if_any()

    spec_model, base, model_notes, block_fp8, per_tensor = _shape(model, hidden, num_topk, num_experts,
                                                                  num_shared_experts)
    if base["num_topk"].value > base["num_experts"].value:  # a token picks num_topk distinct experts
        raise InvalidArgumentError([EngineProblem("--topk", base["num_topk"].value,
                                                  f"allowed 0..{base['num_experts'].value} (each token picks "
                                                  "num_topk distinct experts of --experts)")])
    device_name, device_bytes, device_spec = _device(device)
    settings = resolve_settings(spec.knobs, flags, env, engine)
    if per_tensor:
        settings = _checkpoint_quantization(settings)
    if ranks_flag is not None and (not isinstance(ranks_flag, str) or not ranks_flag):
        raise InvalidArgumentError([EngineProblem("ranks_flag", ranks_flag, "allowed the spelling of the EP-size flag")])
    ctx = EngineContext(
        engine=engine, version=version, hidden=base["hidden"].value, num_topk=base["num_topk"].value,
        num_experts=base["num_experts"].value, num_shared_experts=base["num_shared_experts"].value,
        model=spec_model, num_ranks=num_ranks, num_nodes=num_nodes, num_ranks_per_node=num_ranks_per_node,
        settings=settings, backend_version=backend_version,
        base_settings=tuple(v for k, v in base.items() if k != "num_shared_experts" or v.value or v.source == "flag"),
        load=max_tokens_under_load, budget=budget, device_name=device_name, device_num_bytes=device_bytes,
        device=device_spec,
        ranks_flag=ranks_flag or "num_ranks", model_notes=model_notes,
        model_block_fp8=block_fp8, launch=bool(launch),
    )
    from ._libraries import compose

    rep = compose(spec.recipe(ctx))
    used = {st.name: st for st in rep.settings}
    extra = _launch_findings(engine, spec, {k: used.get(k, v) for k, v in settings.items()}, tuple(ignored), launch)
    if extra:
        rep = rep.replace(report=rep.report.replace(findings=rep.report.findings + tuple(extra)))
    return rep


def _launch_findings(engine: str, spec, settings: dict, ignored: tuple, launch: bool) -> list:
    """The ``engine.ignored`` note (settings that change no buffer) and, for a pasted launch line,
    an ``engine.epbuf-default`` warning per setting left at a default that is epbuf's, not the engine's."""
    from ..report import Finding

    out = []
    if ignored:
        out.append(Finding(severity="warning", code="engine.ignored",
                           message=f"ignored ({len(ignored)}; they change none of these buffers): " + ", ".join(ignored),
                           data={"ignored": list(ignored)}))
    if launch:
        for k in spec.knobs:
            st = settings.get(k.name)
            if st is not None and st.source == "default" and k.default_note.startswith("epbuf's default") \
                    and st.value == k.default:  # a recipe that took the engine's own default says so itself
                out.append(Finding(severity="warning", code="engine.epbuf-default",
                                   message=f"the launch line does not set {k.label}; epbuf used {k.default} "
                                           f"({k.default_note})", data={"setting": k.name, "value": k.default}))
    return out


#: Where the engines take ``--quantization`` from the checkpoint's ``quantization_config`` when it is unset.
QUANT_FROM_CHECKPOINT = ("vllm/config/model.py:1455 ModelConfig._verify_quantization @v0.33.0; "
                         "sglang/srt/configs/model_config.py:2107 ModelConfig._verify_quantization @v0.5.23")


def _checkpoint_quantization(settings: dict) -> dict:
    """A per-tensor FP8 checkpoint (:attr:`epbuf.models.ModelSpec.fp8_per_tensor`): the engine adopts its
    ``quant_method`` as ``--quantization`` when the flag is unset (:data:`QUANT_FROM_CHECKPOINT`), so the
    recipes read ``fp8`` on weights without ``weight_block_size``, as for ``--quantization fp8`` on BF16
    weights (vLLM: per-tensor FP8 activations; SGLang: ``Fp8MoEMethod`` without blocks)."""
    from ._knobs import Setting

    given = settings.get("--quantization")
    if given is None or given.source != "default" or given.value is not None:
        return settings
    return {**settings, "--quantization": Setting(
        name="--quantization", value="fp8", source="model",
        note=f"the checkpoint's per-tensor FP8 quantization_config ({QUANT_FROM_CHECKPOINT})")}


def _shape(model: object, hidden, num_topk, num_experts, num_shared) -> tuple[str, dict, str, bool, bool]:
    from ..models import ModelSpec
    from ..models.lookup import get_model
    from ._knobs import Setting

    explicit = {"hidden": hidden, "num_topk": num_topk, "num_experts": num_experts, "num_shared_experts": num_shared}
    spec = model if isinstance(model, ModelSpec) else get_model(model) if model is not None else None
    note = ""
    if spec is None and any(v is None for k, v in explicit.items() if k != "num_shared_experts"):
        spec = get_model(_DEFAULT_MODEL)
        note = f"epbuf's default model {spec.title}"
    label = (spec.title or spec.name) if spec is not None else ""
    fields = {"hidden": "hidden", "num_topk": "num_topk", "num_experts": "num_experts",
              "num_shared_experts": "num_shared_experts"}
    out: dict = {}
    for key, attr in fields.items():
        if explicit[key] is not None:
            out[key] = Setting(name=key, value=explicit[key], source="flag")
        elif spec is not None:
            out[key] = Setting(name=key, value=getattr(spec, attr), source="default" if note else "model",
                               note=note or label)
        else:
            out[key] = Setting(name=key, value=0, source="default", note="")
    known = spec is not None and not note  # the user's model, not epbuf's default
    return (label if not note else "", out, (spec.notes if known else ""), known and spec.block_fp8,
            known and spec.fp8_per_tensor)


def _device(device: object) -> tuple[str, int | None, object]:
    """``(title, bytes, DeviceSpec or None)`` of ``device``: ``None``, a preset name, a ``DeviceSpec``
    or ``(name, bytes)`` (no spec: a capacity only).

    Raises:
        InvalidArgumentError: a tuple that is not ``(non-empty name, integer bytes >= 1)`` (NaN, floats,
            strings), one line naming ``device``.
        UnknownNameError: an unknown preset.
    """
    if device is None:
        return "", None, None
    if isinstance(device, tuple):
        from ..units import MAX_BYTES

        ok = (len(device) == 2 and isinstance(device[0], str) and device[0].strip() and isinstance(device[1], int)
              and not isinstance(device[1], bool) and 1 <= device[1] <= MAX_BYTES)
        if not ok:
            raise InvalidArgumentError([EngineProblem(
                "device", device, f"allowed (name, bytes): a non-empty name and an integer 1..{MAX_BYTES}")])
        return device[0], device[1], None
    if not isinstance(device, str) or not device.strip():
        from ..devices import DeviceSpec

        if not isinstance(device, DeviceSpec):
            raise InvalidArgumentError([EngineProblem(
                "device", device, "allowed a device preset name, a DeviceSpec or (name, bytes)")])
    from ..devices import DeviceSpec, get_device

    spec = device if isinstance(device, DeviceSpec) else get_device(str(device))
    return spec.title, spec.num_bytes, spec
