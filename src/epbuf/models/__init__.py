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

This module holds :class:`ModelSpec`, the record every other one builds; the rest lives in
modules loaded on first use of one of their names (for the CLI's cold start):

* :mod:`.presets` — :data:`MODELS`, :func:`model_names`
* :mod:`.lookup` — :func:`get_model`: presets by name, the local Hugging Face cache
  (:func:`hf_cache_dirs`, :func:`find_cached_config`), :data:`VARIANTS` (released variants of a preset)
* :mod:`.config_json` — :func:`read_model_config`, :func:`parse_model_config` and the keys they read
"""

from __future__ import annotations

from .._lazy import exports
from .._record import Record

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

_WHERE = {"MODELS": "presets", "model_names": "presets", "get_model": "lookup", "VARIANTS": "lookup", "_fold": "lookup",
          "find_cached_config": "lookup", "hf_cache_dirs": "lookup"}
_WHERE.update(dict.fromkeys(("read_model_config", "parse_model_config", "MAX_CONFIG_BYTES", "HIDDEN_KEYS",
                             "EXPERT_KEYS", "TOPK_KEYS", "SHARED_COUNT_KEYS", "SHARED_WIDTH_KEYS", "LAYER_KEYS",
                             "DTYPE_KEYS", "NESTED_KEYS"), "config_json"))
__getattr__, __dir__ = exports(__name__, _WHERE)


class ModelSpec(Record):
    """The shape of one MoE model, as far as expert-parallel buffers care.

    Attributes:
        name: preset key, lower-case with dashes (``"deepseek-v3"``). For a spec read by
            :func:`~epbuf.models.read_model_config`: the config's ``model_type`` (``""`` if absent).
        title: display name (``"DeepSeek-V3"``); for a config file, its folder's name.
        hidden: hidden size (elements per token) — Plan ``hidden``.
        num_experts: routed experts (shared experts not included) — Plan ``num_experts``.
        num_topk: routed experts per token — Plan ``num_topk``.
        num_shared_experts: shared experts every token also runs (not dispatched by
            expert parallelism); 0 when none. A model whose config gives one fused shared
            FFN of some width (Qwen2-MoE ``shared_expert_intermediate_size``) counts 1 and
            says so in ``notes``.
        num_layers: decoder layers (``num_hidden_layers``), dense ones included; 0 = unknown.
        dtype: the config's ``torch_dtype``/``dtype`` as written (``""`` when absent);
            weight quantization, when any, is in ``notes``.
        source: the ``config.json`` copy the numbers come from (repo, path and commit,
            or the file read).
        notes: anything a reader of the numbers should know (``""`` when nothing).
        aliases: other accepted names (matched like ``name``).
        hf_id: Hugging Face repo id of the model (``"deepseek-ai/DeepSeek-V3"``).
        verified: ``True`` when every number was read from a copy of the published config.
        block_fp8: the checkpoint's weights are FP8 in 128 x 128 blocks (``quantization_config``
            ``quant_method: fp8``, ``weight_block_size: [128, 128]``), which engines read without a
            quantization flag (vLLM then dispatches FP8 through DeepEP).
        fp8_per_tensor: the checkpoint's weights are FP8 with one scale per tensor (``quant_method:
            fp8`` without ``weight_block_size``). vLLM and SGLang take ``--quantization fp8`` from it
            (``vllm/config/model.py:1455`` @v0.33.0, ``sglang/srt/configs/model_config.py:2107``
            @v0.5.23) and load it with ``Fp8Config`` per tensor, as ``--quantization fp8`` on BF16 weights.
    """

    name: str
    title: str
    hidden: int
    num_experts: int
    num_topk: int
    num_shared_experts: int = 0
    num_layers: int = 0
    dtype: str = ""
    source: str = ""
    notes: str = ""
    aliases: tuple = ()
    hf_id: str = ""
    verified: bool = True
    block_fp8: bool = False
    fp8_per_tensor: bool = False

    def plan_fields(self) -> dict:
        """The :class:`~epbuf.plan.Plan` fields this model fixes.

        >>> from epbuf.models import get_model
        >>> get_model("mixtral-8x7b").plan_fields()
        {'hidden': 4096, 'num_topk': 2, 'num_experts': 8, 'model': 'mixtral-8x7b'}
        """
        return {
            "hidden": self.hidden,
            "num_topk": self.num_topk,
            "num_experts": self.num_experts,
            "model": self.name or self.title,
        }
