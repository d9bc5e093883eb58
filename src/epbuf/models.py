"""MoE model presets (``--model``) and a reader for Hugging Face ``config.json`` (``--model-config``).

A :class:`ModelSpec` holds the numbers an expert-parallel buffer depends on: the hidden
size, the routed experts and how many of them each token goes to (top-k), plus the
shared experts, layer count and dtype for reports. Every preset in :data:`MODELS` was
read from a copy of the model's published ``config.json``; ``source`` says which copy.

>>> spec = get_model("DeepSeek-V3")
>>> (spec.hidden, spec.num_experts, spec.num_topk, spec.num_shared_experts)
(7168, 256, 8, 1)
>>> get_model("qwen3_235b_a22b").name
'qwen3-235b-a22b'
>>> get_model("meta-llama/Llama-4-Scout-17B-16E-Instruct").title
'Llama-4-Scout'
>>> get_model("deepseek-ai/DeepSeek-R1-0528").notes.split(";")[0]
'architecture of the deepseek-r1 preset: variant of DeepSeek-R1 (suffix 0528)'
>>> get_model("deepseek-v4")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
epbuf.errors.UnknownNameError: --model (model) = 'deepseek-v4': unknown; did you mean deepseek-v3, deepseek-v2, deepseek-v3.2? `epbuf models` lists all 25; or read ...

Names are matched ignoring case, an ``org/`` prefix and the separators ``- _ .`` and
spaces, so ``"DeepSeek-V3"``, ``"deepseek_v3"`` and ``"deepseek-ai/DeepSeek-V3"`` are the
same preset.

Anything this module does not know can be read from the model's own ``config.json``
with :func:`read_model_config`; ``json`` is imported only then, to keep the CLI's cold
start fast.
"""

from __future__ import annotations

import os

from ._record import Record
from .errors import ConfigFileError, UnknownNameError

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


class ModelSpec(Record):
    """The shape of one MoE model, as far as expert-parallel buffers care.

    Attributes:
        name: preset key, lower-case with dashes (``"deepseek-v3"``). For a spec read by
            :func:`read_model_config`: the config's ``model_type`` (``""`` if absent).
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

    def plan_fields(self) -> dict:
        """The :class:`~epbuf.plan.Plan` fields this model fixes.

        >>> get_model("mixtral-8x7b").plan_fields()
        {'hidden': 4096, 'num_topk': 2, 'num_experts': 8, 'model': 'mixtral-8x7b'}
        """
        return {
            "hidden": self.hidden,
            "num_topk": self.num_topk,
            "num_experts": self.num_experts,
            "model": self.name or self.title,
        }


# Where the copies live (see docs/derivations/models_and_devices.md §0). Commits are the snapshots read.
_AIC = "github.com/ai-dynamo/aiconfigurator@095f58a5 aic-core/src/aiconfigurator_core/model_configs/"
_AIC_OLD = "github.com/ai-dynamo/aiconfigurator src/aiconfigurator/model_configs/"
_DS = "github.com/deepseek-ai/DeepSeek-V3@9b4e9788 inference/configs/"
_MLC = "github.com/mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py"


def _m(**fields) -> ModelSpec:
    return ModelSpec(**fields)


_PRESETS = (
    # --- DeepSeek -------------------------------------------------------------------
    _m(name="deepseek-v3", title="DeepSeek-V3", hf_id="deepseek-ai/DeepSeek-V3",
       hidden=7168, num_experts=256, num_topk=8, num_shared_experts=1, num_layers=61, dtype="bfloat16",
       source=_AIC + "deepseek-ai--DeepSeek-V3_config.json; cross-check " + _DS + "config_671B.json",
       notes="weights fp8 (quantization_config e4m3, block 128x128); first 3 layers dense"),
    _m(name="deepseek-r1", title="DeepSeek-R1", hf_id="deepseek-ai/DeepSeek-R1",
       hidden=7168, num_experts=256, num_topk=8, num_shared_experts=1, num_layers=61, dtype="bfloat16",
       source=_AIC + "deepseek-ai--DeepSeek-R1_config.json",
       notes="same architecture as DeepSeek-V3; weights fp8 (quantization_config)"),
    _m(name="deepseek-v3.2", title="DeepSeek-V3.2", hf_id="deepseek-ai/DeepSeek-V3.2",
       hidden=7168, num_experts=256, num_topk=8, num_shared_experts=1, num_layers=61, dtype="bfloat16",
       source=_AIC + "deepseek-ai--DeepSeek-V3.2_config.json",
       notes="model_type deepseek_v32 (sparse-attention indexer); weights fp8, ue8m0 scales"),
    _m(name="deepseek-v2", title="DeepSeek-V2", hf_id="deepseek-ai/DeepSeek-V2",
       hidden=5120, num_experts=160, num_topk=6, num_shared_experts=2, num_layers=60, dtype="bfloat16",
       source=_DS + "config_236B.json (dim 5120, n_routed_experts 160, n_activated_experts 6, "
       "n_shared_experts 2, n_layers 60); HF config.json copy agrees "
       "(docs/derivations/models_and_devices.md §1)",
       notes="first layer dense (first_k_dense_replace 1); group-limited routing, 8 groups, top 3"),
    _m(name="deepseek-v2-lite", title="DeepSeek-V2-Lite", hf_id="deepseek-ai/DeepSeek-V2-Lite",
       hidden=2048, num_experts=64, num_topk=6, num_shared_experts=2, num_layers=27, dtype="bfloat16",
       source=_MLC + " key deepseek_v2_lite; cross-check " + _DS + "config_16B.json",
       notes="first layer dense (first_k_dense_replace 1)"),
    # --- Moonshot Kimi (DeepSeek-V3 architecture) -----------------------------------
    _m(name="kimi-k2", title="Kimi-K2", hf_id="moonshotai/Kimi-K2-Instruct",
       hidden=7168, num_experts=384, num_topk=8, num_shared_experts=1, num_layers=61, dtype="bfloat16",
       source=_AIC + "moonshotai--Kimi-K2-Instruct_config.json",
       notes="model_type kimi_k2, DeepseekV3ForCausalLM; weights fp8 (quantization_config); first layer dense",
       aliases=("kimi-k2-instruct",)),
    _m(name="kimi-k2-thinking", title="Kimi-K2-Thinking", hf_id="moonshotai/Kimi-K2-Thinking",
       hidden=7168, num_experts=384, num_topk=8, num_shared_experts=1, num_layers=61, dtype="bfloat16",
       source=_AIC_OLD + "moonshotai--Kimi-K2-Thinking_config.json (commit d9219759; abridged copy)",
       notes="same shape as Kimi-K2; the published checkpoint's int4 quantization is not in the copy read"),
    _m(name="kimi-k2.5", title="Kimi-K2.5", hf_id="moonshotai/Kimi-K2.5",
       hidden=7168, num_experts=384, num_topk=8, num_shared_experts=1, num_layers=61, dtype="bfloat16",
       source=_AIC + "moonshotai--Kimi-K2.5_config.json (values under text_config)",
       notes="multimodal; text model under text_config (model_type kimi_k2); weights int4 "
       "compressed-tensors, group 32; text_config.top_k 50 is a sampling default, not MoE top-k"),
    # --- Qwen -----------------------------------------------------------------------
    _m(name="qwen3-235b-a22b", title="Qwen3-235B-A22B", hf_id="Qwen/Qwen3-235B-A22B",
       hidden=4096, num_experts=128, num_topk=8, num_shared_experts=0, num_layers=94, dtype="bfloat16",
       source=_AIC + "Qwen--Qwen3-235B-A22B_config.json",
       notes="no shared expert; every layer MoE"),
    _m(name="qwen3-30b-a3b", title="Qwen3-30B-A3B", hf_id="Qwen/Qwen3-30B-A3B",
       hidden=2048, num_experts=128, num_topk=8, num_shared_experts=0, num_layers=48, dtype="bfloat16",
       source=_AIC + "Qwen--Qwen3-30B-A3B_config.json",
       notes="no shared expert; every layer MoE"),
    _m(name="qwen3-coder-480b-a35b", title="Qwen3-Coder-480B-A35B", hf_id="Qwen/Qwen3-Coder-480B-A35B-Instruct",
       hidden=6144, num_experts=160, num_topk=8, num_shared_experts=0, num_layers=62, dtype="bfloat16",
       source=_AIC + "Qwen--Qwen3-Coder-480B-A35B-Instruct_config.json",
       notes="shared_expert_intermediate_size 0: no shared expert",
       aliases=("qwen3-coder-480b-a35b-instruct",)),
    _m(name="qwen3-next-80b-a3b", title="Qwen3-Next-80B-A3B", hf_id="Qwen/Qwen3-Next-80B-A3B-Thinking",
       hidden=2048, num_experts=512, num_topk=10, num_shared_experts=1, num_layers=48, dtype="bfloat16",
       source=_AIC_OLD + "Qwen--Qwen3-Next-80B-A3B-Thinking_config.json (commit 1b7cfb10)",
       notes="one shared expert of width 512 (shared_expert_intermediate_size 512, counted as 1); "
       "read from the -Thinking config, -Instruct not checked",
       aliases=("qwen3-next-80b-a3b-thinking",)),
    _m(name="qwen1.5-moe-a2.7b", title="Qwen1.5-MoE-A2.7B", hf_id="Qwen/Qwen1.5-MoE-A2.7B",
       hidden=2048, num_experts=60, num_topk=4, num_shared_experts=1, num_layers=24, dtype="bfloat16",
       source=_MLC + " key qwen2moe (commit abd7d518)",
       notes="one fused shared expert of width 5632 (shared_expert_intermediate_size = 4 x "
       "moe_intermediate_size 1408), counted as 1",
       aliases=("qwen1.5-moe-a2.7b-chat",)),
    _m(name="qwen2-57b-a14b", title="Qwen2-57B-A14B", hf_id="Qwen/Qwen2-57B-A14B",
       hidden=3584, num_experts=64, num_topk=8, num_shared_experts=1, num_layers=28, dtype="bfloat16",
       source="github.com/NVIDIA/TensorRT-LLM@08b2040c tests/unittest/_torch/modeling/test_modeling_qwen_moe.py "
       "QWEN2_57B_A14B_CONFIG",
       notes="one fused shared expert of width 20480 (shared_expert_intermediate_size = 8 x "
       "moe_intermediate_size 2560), counted as 1"),
    # --- Mistral --------------------------------------------------------------------
    _m(name="mixtral-8x7b", title="Mixtral-8x7B", hf_id="mistralai/Mixtral-8x7B-v0.1",
       hidden=4096, num_experts=8, num_topk=2, num_shared_experts=0, num_layers=32, dtype="bfloat16",
       source=_AIC + "mistralai--Mixtral-8x7B-v0.1_config.json; " + _MLC + " key Mixtral-8x7B-v0.1 (identical)",
       notes="Instruct-v0.1 has the same architecture",
       aliases=("mixtral-8x7b-v0.1", "mixtral-8x7b-instruct-v0.1")),
    _m(name="mixtral-8x22b", title="Mixtral-8x22B", hf_id="mistralai/Mixtral-8x22B-v0.1",
       hidden=6144, num_experts=8, num_topk=2, num_shared_experts=0, num_layers=56, dtype="bfloat16",
       source=_AIC + "mistralai--Mixtral-8x22B-v0.1_config.json",
       aliases=("mixtral-8x22b-v0.1",)),
    # --- Zhipu GLM ------------------------------------------------------------------
    _m(name="glm-4.5", title="GLM-4.5", hf_id="zai-org/GLM-4.5",
       hidden=5120, num_experts=160, num_topk=8, num_shared_experts=1, num_layers=92, dtype="",
       source="github.com/zyzshishui/slime scripts/models/glm4.5-355B-A32B.sh (fork of THUDM/slime; "
       "Megatron args from the config); cross-check GLM-5 report table (glennklockwood.com/garden/GLM-5)",
       notes="no verbatim config.json read; 3 dense + 89 MoE layers, plus 1 MTP layer; dtype not confirmed",
       aliases=("glm-4.5-355b-a32b",)),
    _m(name="glm-4.5-air", title="GLM-4.5-Air", hf_id="zai-org/GLM-4.5-Air",
       hidden=4096, num_experts=128, num_topk=8, num_shared_experts=1, num_layers=46, dtype="bfloat16",
       source="transformers Glm4MoeConfig dump of the GLM-4.5-Air checkpoint (ms-swift conversion note); "
       "cross-check slime scripts/models/glm4.5-106B-A12B.sh",
       notes="1 dense + 45 MoE layers, plus 1 MTP layer",
       aliases=("glm-4.5-air-106b-a12b",)),
    # --- OpenAI ---------------------------------------------------------------------
    _m(name="gpt-oss-120b", title="gpt-oss-120b", hf_id="openai/gpt-oss-120b",
       hidden=2880, num_experts=128, num_topk=4, num_shared_experts=0, num_layers=36, dtype="",
       source=_AIC + "openai--gpt-oss-120b_config.json",
       notes="config has no torch_dtype; experts mxfp4 (quantization_config), attention/router bf16"),
    _m(name="gpt-oss-20b", title="gpt-oss-20b", hf_id="openai/gpt-oss-20b",
       hidden=2880, num_experts=32, num_topk=4, num_shared_experts=0, num_layers=24, dtype="",
       source=_AIC + "openai--gpt-oss-20b_config.json",
       notes="config has no torch_dtype; experts mxfp4 (quantization_config), attention/router bf16"),
    # --- Meta Llama 4 ---------------------------------------------------------------
    _m(name="llama-4-scout", title="Llama-4-Scout", hf_id="meta-llama/Llama-4-Scout-17B-16E-Instruct",
       hidden=5120, num_experts=16, num_topk=1, num_shared_experts=1, num_layers=48, dtype="bfloat16",
       source=_AIC + "meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json (trimmed copy; values under text_config)",
       notes="one shared expert per MoE layer is part of the architecture (no config key); every layer MoE",
       aliases=("llama-4-scout-17b-16e", "llama-4-scout-17b-16e-instruct")),
    _m(name="llama-4-maverick", title="Llama-4-Maverick", hf_id="meta-llama/Llama-4-Maverick-17B-128E-Instruct",
       hidden=5120, num_experts=128, num_topk=1, num_shared_experts=1, num_layers=48, dtype="bfloat16",
       source=_AIC + "meta-llama--Llama-4-Maverick-17B-128E-Instruct_config.json (trimmed copy; values under text_config)",
       notes="one shared expert per MoE layer is part of the architecture (no config key); "
       "MoE every 2nd layer (interleave_moe_layer_step 2: 24 MoE layers)",
       aliases=("llama-4-maverick-17b-128e", "llama-4-maverick-17b-128e-instruct")),
    # --- Databricks -----------------------------------------------------------------
    _m(name="dbrx", title="DBRX", hf_id="databricks/dbrx-instruct",
       hidden=6144, num_experts=16, num_topk=4, num_shared_experts=0, num_layers=40, dtype="bfloat16",
       source="dbrx-instruct config.json copy (MLX 4-bit re-export); experts and top-k also in "
       "github.com/databricks/dbrx MODEL_CARD_dbrx_base.md (\"16 experts and chooses 4\")",
       notes="keys d_model, n_layers, ffn_config.moe_num_experts, ffn_config.moe_top_k",
       aliases=("dbrx-instruct", "dbrx-base")),
    # --- extras ---------------------------------------------------------------------
    _m(name="minimax-m2", title="MiniMax-M2", hf_id="MiniMaxAI/MiniMax-M2",
       hidden=3072, num_experts=256, num_topk=8, num_shared_experts=0, num_layers=62, dtype="",
       source=_AIC + "MiniMaxAI--MiniMax-M2.5_config.json; M2 test fixture with the same numbers",
       notes="M2 and M2.5 share the architecture; shared_intermediate_size 0; config has no "
       "torch_dtype, weights fp8 (quantization_config)",
       aliases=("minimax-m2.5",)),
    _m(name="ernie-4.5-21b-a3b", title="ERNIE-4.5-21B-A3B", hf_id="baidu/ERNIE-4.5-21B-A3B-PT",
       hidden=2560, num_experts=64, num_topk=6, num_shared_experts=2, num_layers=28, dtype="",
       source="two agreeing ernie4_5_moe test-fixture copies of the config "
       "(docs/derivations/models_and_devices.md §1)",
       notes="keys moe_num_experts, moe_k, moe_num_shared_experts; MoE layers 1..27; dtype not confirmed",
       aliases=("ernie-4.5-21b-a3b-pt",)),
)

#: Preset name -> :class:`ModelSpec`.
MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in _PRESETS}


def model_names() -> tuple[str, ...]:
    """Preset names, in table order (families together)."""
    return tuple(MODELS)


# ----------------------------------------------------------------------------- lookup


def _fold(name: str) -> str:
    """Matching key of a name: lower case, no ``org/`` prefix, no ``- _ .`` or spaces."""
    text = str(name).strip().rsplit("/", 1)[-1].lower()
    return "".join(ch for ch in text if ch not in "-_. \t")


def _index(table: dict, titles: bool = True) -> dict[str, str]:
    """folded name, alias, Hugging Face id (and title when ``titles``) -> preset key."""
    index: dict[str, str] = {}
    for key, spec in table.items():
        for alias in (key, spec.title if titles else "", *spec.aliases, getattr(spec, "hf_id", "")):
            if not alias:
                continue
            index.setdefault(_fold(alias), key)
    return index


def _lookup(table: dict, index: dict, name: str, argument: str, fallback: str):
    """``table[...]`` for ``name`` or an :class:`UnknownNameError` naming ``argument``, the three
    closest names and the command that lists them all (``epbuf models`` / ``epbuf devices``)."""
    key = index.get(_fold(name))
    if key is not None:
        return table[key]
    raise UnknownNameError(f"--{argument} ({argument}) = {_shown(name)}: unknown; {_suggest(index, name)}"
                           f"`epbuf {argument}s` lists all {len(table)}; {fallback}")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _suggest(index: dict, name: str) -> str:
    """``"did you mean a, b, c? "``: names that start with what was typed first, then difflib's nearest."""
    import difflib

    wanted = _fold(name)
    prefixed = [folded for folded in index if wanted and folded.startswith(wanted)]
    close: list[str] = []
    for folded in prefixed + difflib.get_close_matches(wanted, list(index), n=6, cutoff=0.6):
        if index[folded] not in close:
            close.append(index[folded])
    return f"did you mean {', '.join(close[:3])}? " if close else ""


_MODEL_INDEX: dict[str, str] = {}

#: Published variants that keep a preset's architecture (same hidden size, experts, top-k):
#: folded name -> (preset, where the equality was read). Checked after the presets, so a
#: Hugging Face id of a variant answers without its config.json.
VARIANTS: dict[str, tuple[str, str]] = {
    "glm46": ("glm-4.5", "GLM-4.6 config (hidden_size 5120, 160 routed + 1 shared experts, top-8, 92 layers): "
                         "github.com/andreidhoang/stanford-ai LLM/glm-4.6-training-pipeline/docs/GLM-4.6_DEEP_DIVE.md "
                         "(a copy of the published config; secondary source)"),
}
#: Suffixes of released variants that do not change the architecture; stripped (repeatedly,
#: from the end) to find the preset of e.g. ``DeepSeek-R1-0528`` or ``Qwen3-30B-A3B-Instruct-2507``.
_VARIANT_SUFFIXES = ("instruct", "thinking", "chat", "base", "fp8", "bf16", "awq", "gptq", "int4", "int8", "hf")


def _variant(name: str) -> ModelSpec | None:
    """The preset whose architecture a released variant keeps, retitled with the variant's name."""
    import re

    words = [w for w in re.split(r"[-_. /]+", str(name).strip().rsplit("/", 1)[-1].lower()) if w]
    trimmed = list(words)
    while trimmed:
        key = _MODEL_INDEX.get("".join(trimmed))
        found = VARIANTS.get("".join(trimmed))
        if found is not None:
            key = found[0]
        if key is not None and trimmed != words:
            how = found[1] if found is not None else f"variant of {MODELS[key].title} (suffix {'-'.join(words[len(trimmed):])})"
            break
        if key is not None and found is not None:
            how = found[1]
            break
        last = trimmed[-1]
        if last in _VARIANT_SUFFIXES or (last.isdigit() and len(last) == 4):
            trimmed.pop()
            continue
        return None
    else:
        return None
    spec = MODELS[key]
    title = str(name).strip().rsplit("/", 1)[-1]
    notes = f"architecture of the {spec.name} preset: {how}" + (f"; {spec.notes}" if spec.notes else "")
    return spec.replace(name=title.lower(), title=title, notes=notes,
                        hf_id=str(name).strip() if "/" in str(name) else "", aliases=())


def get_model(name: str) -> ModelSpec:
    """The preset called ``name`` (a preset name, title, alias or Hugging Face id), or the
    model of a Hugging Face id whose ``config.json`` is in the local cache, or a released
    variant of a preset (``DeepSeek-R1-0528``, ``Qwen3-30B-A3B-Instruct-2507``, ``GLM-4.6``).

    Matching ignores case, an ``org/`` prefix and the separators ``- _ .`` and spaces.
    The cache is read offline (:func:`find_cached_config`); a preset name wins over it.

    Raises:
        UnknownNameError: none of these; the one-line message suggests the three closest
            names and points to ``epbuf models``.
    """
    if not isinstance(name, str) or not name.strip():
        raise UnknownNameError(f"--model (model) = {_shown(name)}: empty; name a preset (`epbuf models`), a "
                               "Hugging Face id in the local cache, or read a file with --model-config PATH")
    if not _MODEL_INDEX:
        _MODEL_INDEX.update(_index(MODELS))
    key = _MODEL_INDEX.get(_fold(name))
    if key is not None:
        return MODELS[key]
    cached = find_cached_config(name)
    if cached is not None:
        return read_model_config(cached)
    variant = _variant(name)
    if variant is not None:
        return variant
    return _lookup(MODELS, _MODEL_INDEX, name, "model",
                   "or read the model's own file with --model-config PATH (a Hugging Face id works when its "
                   "config.json is in the local cache)")


# ------------------------------------------------------------------- Hugging Face cache


def hf_cache_dirs() -> tuple[str, ...]:
    """Where ``huggingface_hub`` keeps downloaded repositories, in its own order:
    ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else ``XDG_CACHE_HOME/huggingface/hub``, else
    ``~/.cache/huggingface/hub`` (huggingface_hub ``constants.py``)."""
    env = os.environ
    if env.get("HF_HUB_CACHE"):
        return (env["HF_HUB_CACHE"],)
    if env.get("HF_HOME"):
        return (os.path.join(env["HF_HOME"], "hub"),)
    xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return (os.path.join(xdg, "huggingface", "hub"),)


def find_cached_config(repo_id: str) -> str | None:
    """The ``config.json`` of Hugging Face repo ``repo_id`` (``org/name``) in the local
    cache, or ``None``: ``models--org--name/snapshots/<rev>/config.json`` for the revision
    ``refs/main`` names, else the most recently modified snapshot that has one. Matching
    is exact first, then ignoring case. Nothing is downloaded."""
    if "/" not in repo_id or repo_id.count("/") != 1 or ".." in repo_id:
        return None
    folder_name = "models--" + repo_id.strip().replace("/", "--")
    for cache in hf_cache_dirs():
        try:
            entries = os.listdir(cache)
        except OSError:
            continue
        matches = [e for e in entries if e == folder_name] or [e for e in entries if e.lower() == folder_name.lower()]
        for entry in matches:
            repo = os.path.join(cache, entry)
            snapshots = os.path.join(repo, "snapshots")
            try:
                with open(os.path.join(repo, "refs", "main"), encoding="utf-8") as f:
                    main = f.read(100).strip()
            except OSError:
                main = ""
            candidate = os.path.join(snapshots, main, "config.json") if main else ""
            if candidate and os.path.isfile(candidate):
                return candidate
            try:
                revisions = [os.path.join(snapshots, rev, "config.json") for rev in os.listdir(snapshots)]
            except OSError:
                continue
            found = [c for c in revisions if os.path.isfile(c)]
            if found:
                return max(found, key=os.path.getmtime)
    return None


def _repo_id_of(file: str) -> str:
    """``org/name`` when ``file`` lies in a Hugging Face cache snapshot, else ``""``."""
    parts = os.path.abspath(file).split(os.sep)
    for i in range(len(parts) - 3, -1, -1):
        if parts[i].startswith("models--") and i + 1 < len(parts) and parts[i + 1] == "snapshots":
            return parts[i][len("models--"):].replace("--", "/", 1)
    return ""


# ----------------------------------------------------------------------- config.json

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


def _read_config_text(file: str, fail) -> str:
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
        ``_name_or_path``, else the folder's name; ``source`` = the file read and
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

    text = _read_config_text(file, fail)
    # Name the model by what it is: the cache's repo id, else the config's own _name_or_path,
    # else its folder (a snapshot folder is a commit hash, never a name).
    return _parse_config(text, file, fail, fill, title=_repo_id_of(file),
                         fallback_title=os.path.basename(os.path.dirname(os.path.abspath(file))))


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
    )
