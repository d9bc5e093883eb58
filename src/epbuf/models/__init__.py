"""MoE model presets (``--model``) and a reader for Hugging Face ``config.json`` (``--model-config``).

A :class:`ModelSpec` holds the numbers an expert-parallel buffer depends on: the hidden
size, the routed experts and how many of them each token goes to (top-k), plus the
shared experts, layer count and dtype for reports. Every preset in :data:`MODELS` was
read from a copy of the model's published ``config.json``; ``source`` says which copy.

>>> from epbuf.models import get_model
>>> spec = get_model("DeepSeek-V3")
>>> (spec.hidden, spec.num_experts, spec.num_topk, spec.num_shared_experts)
(7168, 256, 8, 1)

Names are matched ignoring case, an ``org/`` prefix and the separators ``- _ .`` and
spaces, so ``"DeepSeek-V3"``, ``"deepseek_v3"`` and ``"deepseek-ai/DeepSeek-V3"`` are the
same preset.

Anything the presets do not know can be read from the model's own ``config.json`` with
:func:`read_model_config`.

Modules (each loaded on first use of one of its names, for the CLI's cold start):

* :mod:`.spec` — :class:`ModelSpec`
* :mod:`.presets` — :data:`MODELS`, :func:`model_names`
* :mod:`.lookup` — :func:`get_model`, :data:`VARIANTS` (released variants of a preset)
* :mod:`.hf_cache` — :func:`hf_cache_dirs`, :func:`find_cached_config` (the local Hugging Face cache)
* :mod:`.config_json` — :func:`read_model_config`, :func:`parse_model_config` and the keys they read
"""

from .._lazy import exports

__all__ = [
    "ModelSpec",
    "MODELS",
    "model_names",
    "get_model",
    "read_model_config",
    "parse_model_config",
    "find_cached_config",
    "hf_cache_dirs",
    "VARIANTS",
    "HIDDEN_KEYS",
    "EXPERT_KEYS",
    "TOPK_KEYS",
    "SHARED_COUNT_KEYS",
    "SHARED_WIDTH_KEYS",
    "LAYER_KEYS",
    "DTYPE_KEYS",
    "NESTED_KEYS",
]

_WHERE = {"ModelSpec": "spec", "MODELS": "presets", "model_names": "presets", "get_model": "lookup",
          "VARIANTS": "lookup", "_fold": "lookup", "find_cached_config": "hf_cache", "hf_cache_dirs": "hf_cache"}
_WHERE.update(dict.fromkeys(("read_model_config", "parse_model_config", "MAX_CONFIG_BYTES", "HIDDEN_KEYS",
                             "EXPERT_KEYS", "TOPK_KEYS", "SHARED_COUNT_KEYS", "SHARED_WIDTH_KEYS", "LAYER_KEYS",
                             "DTYPE_KEYS", "NESTED_KEYS"), "config_json"))
__getattr__, __dir__ = exports(__name__, _WHERE)
