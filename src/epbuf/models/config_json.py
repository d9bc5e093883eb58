"""A model's shape from a Hugging Face ``config.json`` (``--model-config``, or text pasted
into ``epbuf serve``): which keys are read, in which order, and what is refused.

``json`` is imported only when a config is parsed, to keep the CLI's cold start fast.
"""

from __future__ import annotations

import os

from ..errors import ConfigFileError
from . import ModelSpec

__all__ = ["read_model_config", "parse_model_config", "read_config_text", "repo_id_of", "MAX_CONFIG_BYTES", "HIDDEN_KEYS",
           "EXPERT_KEYS", "TOPK_KEYS", "SHARED_COUNT_KEYS", "SHARED_WIDTH_KEYS", "LAYER_KEYS", "DTYPE_KEYS",
           "NESTED_KEYS"]


def repo_id_of(file: str) -> str:
    """``org/name`` when ``file`` lies in a Hugging Face cache snapshot, else ``""``."""
    parts = os.path.abspath(file).split(os.sep)
    for i in range(len(parts) - 3, -1, -1):
        if parts[i].startswith("models--") and i + 1 < len(parts) and parts[i + 1] == "snapshots":
            return parts[i][len("models--"):].replace("--", "/", 1)
    return ""


#: Keys tried for each quantity, in order. In every scope (see :data:`NESTED_KEYS`) the
#: keys are tried in this order; the first present, non-null one wins.
HIDDEN_KEYS = ("hidden_size", "d_model", "dim", "n_embd")
EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts", "n_experts")
# Not plain ``top_k``: old transformers writers serialize the *sampling* default
# ``top_k: 50`` into sub-configs (Kimi-K2.5 ``text_config``, DBRX ``attn_config``).
TOPK_KEYS = (
    "num_experts_per_tok", "experts_per_token", "num_experts_per_token", "n_activated_experts",
    "moe_top_k", "moe_k", "moe_topk", "top_k_experts",
)
SHARED_COUNT_KEYS = ("n_shared_experts", "moe_num_shared_experts", "num_shared_experts")
SHARED_WIDTH_KEYS = ("shared_expert_intermediate_size", "shared_intermediate_size")
LAYER_KEYS = ("num_hidden_layers", "n_layers", "n_layer", "num_layers")
DTYPE_KEYS = ("torch_dtype", "dtype")
#: Sub-objects searched after the top level, in this order: multimodal wrappers keep the
#: language model under ``text_config`` (Llama-4, Kimi-K2.5, Qwen3-VL) or
#: ``language_config`` (DeepSeek-VL2); DBRX keeps its MoE settings in ``ffn_config``.
NESTED_KEYS = ("text_config", "language_config", "ffn_config")

_KINDS = {list: "an array", str: "a string", bool: "true/false", int: "a number", float: "a number"}


#: A real config.json is kilobytes; anything larger is the wrong file (or /dev/zero).
MAX_CONFIG_BYTES = 64 * 1024 * 1024


def read_config_text(file: str, fail) -> str:
    """The text of ``file``: a regular file of at most :data:`MAX_CONFIG_BYTES`, UTF-8.
    Devices, pipes and sockets are refused before opening (a FIFO would block forever,
    ``/dev/zero`` would fill memory)."""
    import stat

    try:
        st = os.stat(file)
    except OSError as error:
        raise fail(f"cannot read ({error.strerror or error})") from None
    if not stat.S_ISREG(st.st_mode):
        raise fail("not a regular file (a device, pipe or socket); give a config.json file")
    if st.st_size > MAX_CONFIG_BYTES:
        raise fail(f"{st.st_size:,} B is too large for a config.json (at most {MAX_CONFIG_BYTES:,} B)")
    try:
        with open(file, "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as error:
        raise fail(f"cannot read ({error.strerror or error})") from None
    if len(data) > MAX_CONFIG_BYTES:  # it grew while we looked
        raise fail(f"more than {MAX_CONFIG_BYTES:,} B; too large for a config.json")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise fail(f"not UTF-8 text ({error.reason} at byte {error.start})") from None


_FILL_OPTIONS = {"hidden": "--hidden", "num_experts": "--experts", "num_topk": "--topk"}


def read_model_config(path: str | os.PathLike, *, fill: dict | None = None) -> ModelSpec:
    """Read a model's shape from a Hugging Face ``config.json`` (or the folder holding it).

    Search order: for each quantity, the top-level object first, then ``text_config``,
    ``language_config`` and ``ffn_config`` (:data:`NESTED_KEYS`); within each object the
    keys of that quantity's family in order (:data:`HIDDEN_KEYS`, :data:`EXPERT_KEYS`,
    :data:`TOPK_KEYS`, ...). A key whose value is ``null`` counts as absent. Plain
    ``top_k`` is never read as the MoE top-k (it is a sampling default).

    Shared experts: a count key (:data:`SHARED_COUNT_KEYS`) if present; otherwise a
    shared-FFN width (:data:`SHARED_WIDTH_KEYS`) above 0 counts as 1 shared expert (noted);
    otherwise Llama-4 (``model_type`` ``llama4``/``llama4_text``) has 1 built in; otherwise 0.
    Layers and dtype are optional (0 and ``""`` when absent).

    ``fill`` gives values for keys the file lacks (``{"hidden": ..., "num_experts": ...,
    "num_topk": ...}``, from ``--hidden``/``--experts``/``--topk``): a config without a
    top-k key plus ``--topk 8`` is a complete shape (the notes say which came from where).

    Returns:
        A :class:`ModelSpec` with ``name`` = the config's ``model_type``, ``title`` = the
        Hugging Face repo id when the file lies in the HF cache, else the config's
        ``_name_or_path``, else the folder's name (of a ``config.json``; another file: its
        own name); ``source`` = the file read and
        ``notes`` = the keys used.

    Raises:
        ConfigFileError: the file is missing, unreadable, not JSON, not a JSON object,
            lacks the hidden size / expert count / top-k, or has a value that is not a
            positive integer (non-negative for shared experts) or a top-k above the
            expert count. One line, naming the file and the key.
    """
    given = os.fspath(path)
    if given == "":
        raise ConfigFileError("--model-config: the path is empty; give a config.json or the folder holding it")
    file = given
    if os.path.isdir(given):
        file = os.path.join(given, "config.json")
        if not os.path.isfile(file):
            raise ConfigFileError(f"--model-config: {given}: folder has no config.json")
    elif not os.path.exists(given):
        raise ConfigFileError(
            f"--model-config: {given}: no such file; give a local config.json or the folder holding it "
            "(epbuf does not download)"
        )

    def fail(what: str) -> ConfigFileError:
        return ConfigFileError(f"--model-config: {file}: {what}")

    text = read_config_text(file, fail)
    # Name the model by what it is: the cache's repo id, else the config's own _name_or_path,
    # else the folder of a config.json (a checkout's name; a snapshot folder is a commit hash,
    # never a name), else the file's own name (/tmp/cfg.json is not a model called "tmp").
    folder = os.path.basename(os.path.dirname(os.path.abspath(file)))
    fallback = folder if os.path.basename(file) == "config.json" else os.path.basename(file)
    return _parse_config(text, file, fail, fill, title=repo_id_of(file), fallback_title=fallback)


def parse_model_config(text: str | bytes, source: str = "config.json", *, fill: dict | None = None) -> ModelSpec:
    """A model's shape from the text of a Hugging Face ``config.json`` (e.g. pasted into
    ``epbuf serve``'s page): the same reading as :func:`read_model_config`, without a file.

    ``source`` names the text in error messages and becomes ``ModelSpec.source``; the
    title is the config's ``_name_or_path``, else ``source``. ``bytes`` must be UTF-8.
    ``fill`` as in :func:`read_model_config`.

    >>> spec = parse_model_config('{"hidden_size": 2048, "num_experts": 128, "num_experts_per_tok": 8}', "pasted")
    >>> (spec.hidden, spec.num_experts, spec.num_topk, spec.title)
    (2048, 128, 8, 'pasted')
    >>> parse_model_config('{"hidden_size": 2048}', "pasted")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    epbuf.errors.ConfigFileError: pasted: no routed expert count; tried keys n_routed_experts, ... or give it with --experts

    Raises:
        ConfigFileError: as :func:`read_model_config`, prefixed with ``source``; also for
            text over :data:`MAX_CONFIG_BYTES` or bytes that are not UTF-8.
    """

    def fail(what: str) -> ConfigFileError:
        return ConfigFileError(f"{source}: {what}")

    if isinstance(text, (bytes, bytearray)):
        if len(text) > MAX_CONFIG_BYTES:
            raise fail(f"{len(text):,} B is too large for a config.json (at most {MAX_CONFIG_BYTES:,} B)")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as error:
            raise fail(f"not UTF-8 text ({error.reason} at byte {error.start})") from None
    if not isinstance(text, str):
        raise fail(f"expected the text of a config.json, got {type(text).__name__}")
    if len(text) > MAX_CONFIG_BYTES:
        raise fail(f"{len(text):,} characters is too large for a config.json (at most {MAX_CONFIG_BYTES:,} B)")
    return _parse_config(text, source, fail, fill, title="", fallback_title=source)


def _parse_config(text: str, source: str, fail, fill: dict | None, *, title: str, fallback_title: str) -> ModelSpec:
    """The shared body of :func:`read_model_config` and :func:`parse_model_config`: ``text``
    parsed as documented there; ``title`` (when not empty) names the model, else the
    config's ``_name_or_path``, else ``fallback_title``; ``fail(what)`` builds the error."""
    import json

    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise fail(f"not JSON (line {error.lineno}, column {error.colno}: {error.msg})") from None
    except RecursionError:
        raise fail("not JSON this reader accepts (nested too deeply)") from None
    except ValueError as error:  # an integer beyond Python's int-from-text digit limit
        raise fail(f"not JSON this reader accepts ({str(error).split(';')[0]})") from None
    if not isinstance(config, dict):
        kind = "null" if config is None else _KINDS.get(type(config), type(config).__name__)
        raise fail(f"top level is {kind}, expected a JSON object {{...}}")

    scopes: list[tuple[str, dict]] = [("", config)]
    scopes += [(f"{key}.", config[key]) for key in NESTED_KEYS if isinstance(config.get(key), dict)]

    def find(keys: tuple[str, ...]) -> tuple[str, object] | None:
        for prefix, scope in scopes:
            for key in keys:
                if scope.get(key) is not None:
                    return prefix + key, scope[key]
        return None

    def number(keys: tuple[str, ...], what: str, lowest: int = 1, required: bool = True, field: str = ""):
        found = find(keys)
        if found is None and fill and fill.get(field) is not None:
            return _FILL_OPTIONS[field], fill[field]
        if found is None:
            if required:
                option = f"; or give it with {_FILL_OPTIONS[field]}" if field else ""
                raise fail(
                    f"no {what}; tried keys {', '.join(keys)} (also under {', '.join(NESTED_KEYS)}){option}"
                )
            return None
        key, value = found
        if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
            shown = repr(value)
            if len(shown) > 40:
                shown = shown[:37] + "..."
            need = "a positive integer" if lowest == 1 else "a non-negative integer"
            raise fail(f"{key} = {shown}: must be {need}")
        return key, value

    hidden_key, hidden = number(HIDDEN_KEYS, "hidden size", field="hidden")
    experts_key, num_experts = number(EXPERT_KEYS, "routed expert count", field="num_experts")
    topk_key, num_topk = number(TOPK_KEYS, "experts-per-token (top-k)", field="num_topk")
    if num_topk > num_experts:
        raise fail(f"{topk_key} = {num_topk} is more than {experts_key} = {num_experts}")
    used = [f"{hidden_key}={hidden}", f"{experts_key}={num_experts}", f"{topk_key}={num_topk}"]
    notes: list[str] = []

    model_types = [scope.get("model_type") for _, scope in scopes]
    num_shared = 0
    shared = number(SHARED_COUNT_KEYS, "shared experts", lowest=0, required=False)
    if shared is not None:
        used.append(f"{shared[0]}={shared[1]}")
        num_shared = shared[1]
    else:
        width = number(SHARED_WIDTH_KEYS, "shared expert width", lowest=0, required=False)
        if width is not None:
            used.append(f"{width[0]}={width[1]}")
            if width[1] > 0:
                num_shared = 1
                notes.append(f"shared FFN of width {width[1]} ({width[0]}) counted as 1 shared expert")
        elif any(t in ("llama4", "llama4_text") for t in model_types):
            num_shared = 1
            notes.append("Llama-4: 1 shared expert per MoE layer built in (no config key)")

    layers = number(LAYER_KEYS, "layer count", required=False)
    num_layers = 0
    if layers is not None:
        used.append(f"{layers[0]}={layers[1]}")
        num_layers = layers[1]
    dtype_found = find(DTYPE_KEYS)
    dtype = dtype_found[1] if dtype_found is not None and isinstance(dtype_found[1], str) else ""

    quant = find(("quantization_config",))
    block_fp8 = per_tensor = False
    if quant is not None and isinstance(quant[1], dict):
        method, block = quant[1].get("quant_method"), quant[1].get("weight_block_size")
        fp8 = isinstance(method, str) and method.lower() == "fp8"
        block_fp8 = fp8 and block == [128, 128]
        per_tensor = fp8 and block is None  # Fp8Config.from_config: weight_block_size None -> per tensor
        if block_fp8:
            notes.append(f"weights fp8, block 128x128 ({quant[0]})")
        if per_tensor:
            notes.append(f"weights fp8, per tensor ({quant[0]}: no weight_block_size)")

    model_type = config.get("model_type")
    name_or_path = config.get("_name_or_path")
    if not title:
        if isinstance(name_or_path, str) and name_or_path.strip() and len(name_or_path) <= 200:
            title = name_or_path.strip().rstrip("/")
        else:
            title = fallback_title
    return ModelSpec(
        name=model_type if isinstance(model_type, str) else "",
        title=title,
        hidden=hidden,
        num_experts=num_experts,
        num_topk=num_topk,
        num_shared_experts=num_shared,
        num_layers=num_layers,
        dtype=dtype,
        source=source,
        notes="; ".join(["read " + ", ".join(used)] + notes),
        block_fp8=block_fp8,
        fp8_per_tensor=per_tensor,
    )
