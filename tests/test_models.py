"""Model presets (``epbuf.models.MODELS``, ``get_model``) and the ``config.json`` reader.

Golden numbers come from copies of each model's published ``config.json``; the row
comments name the copy (details in ``docs/derivations/models_and_devices.md`` §0-§1).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epbuf.errors import ConfigFileError, EpbufError, UnknownNameError
from epbuf.models import (
    EXPERT_KEYS,
    HIDDEN_KEYS,
    MODELS,
    NESTED_KEYS,
    TOPK_KEYS,
    ModelSpec,
    get_model,
    model_names,
    read_model_config,
)

AIC = "ai-dynamo/aiconfigurator@095f58a5 aic-core/src/aiconfigurator_core/model_configs/"

# ------------------------------------------------------------------------ golden table

# name, hidden, routed experts, top-k, shared experts, layers, dtype
GOLDEN = [
    # AIC deepseek-ai--DeepSeek-V3_config.json; deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json
    pytest.param("deepseek-v3", 7168, 256, 8, 1, 61, "bfloat16", id="deepseek-v3"),
    # AIC deepseek-ai--DeepSeek-R1_config.json
    pytest.param("deepseek-r1", 7168, 256, 8, 1, 61, "bfloat16", id="deepseek-r1"),
    # AIC deepseek-ai--DeepSeek-V3.2_config.json
    pytest.param("deepseek-v3.2", 7168, 256, 8, 1, 61, "bfloat16", id="deepseek-v3.2"),
    # deepseek-ai/DeepSeek-V3 inference/configs/config_236B.json; HF config copy
    pytest.param("deepseek-v2", 5120, 160, 6, 2, 60, "bfloat16", id="deepseek-v2"),
    # mlc-llm model_preset.py "deepseek_v2_lite"; deepseek-ai/DeepSeek-V3 inference/configs/config_16B.json
    pytest.param("deepseek-v2-lite", 2048, 64, 6, 2, 27, "bfloat16", id="deepseek-v2-lite"),
    # AIC moonshotai--Kimi-K2-Instruct_config.json
    pytest.param("kimi-k2", 7168, 384, 8, 1, 61, "bfloat16", id="kimi-k2"),
    # aiconfigurator src/aiconfigurator/model_configs/moonshotai--Kimi-K2-Thinking_config.json (abridged)
    pytest.param("kimi-k2-thinking", 7168, 384, 8, 1, 61, "bfloat16", id="kimi-k2-thinking"),
    # AIC moonshotai--Kimi-K2.5_config.json (text_config)
    pytest.param("kimi-k2.5", 7168, 384, 8, 1, 61, "bfloat16", id="kimi-k2.5"),
    # AIC Qwen--Qwen3-235B-A22B_config.json
    pytest.param("qwen3-235b-a22b", 4096, 128, 8, 0, 94, "bfloat16", id="qwen3-235b-a22b"),
    # AIC Qwen--Qwen3-30B-A3B_config.json
    pytest.param("qwen3-30b-a3b", 2048, 128, 8, 0, 48, "bfloat16", id="qwen3-30b-a3b"),
    # AIC Qwen--Qwen3-Coder-480B-A35B-Instruct_config.json (shared_expert_intermediate_size 0)
    pytest.param("qwen3-coder-480b-a35b", 6144, 160, 8, 0, 62, "bfloat16", id="qwen3-coder-480b-a35b"),
    # aiconfigurator src/aiconfigurator/model_configs/Qwen--Qwen3-Next-80B-A3B-Thinking_config.json (shared width 512)
    pytest.param("qwen3-next-80b-a3b", 2048, 512, 10, 1, 48, "bfloat16", id="qwen3-next-80b-a3b"),
    # mlc-llm model_preset.py "qwen2moe" (shared_expert_intermediate_size 5632)
    pytest.param("qwen1.5-moe-a2.7b", 2048, 60, 4, 1, 24, "bfloat16", id="qwen1.5-moe-a2.7b"),
    # TensorRT-LLM tests/unittest/_torch/modeling/test_modeling_qwen_moe.py QWEN2_57B_A14B_CONFIG
    pytest.param("qwen2-57b-a14b", 3584, 64, 8, 1, 28, "bfloat16", id="qwen2-57b-a14b"),
    # AIC mistralai--Mixtral-8x7B-v0.1_config.json; mlc-llm "Mixtral-8x7B-v0.1"
    pytest.param("mixtral-8x7b", 4096, 8, 2, 0, 32, "bfloat16", id="mixtral-8x7b"),
    # AIC mistralai--Mixtral-8x22B-v0.1_config.json
    pytest.param("mixtral-8x22b", 6144, 8, 2, 0, 56, "bfloat16", id="mixtral-8x22b"),
    # slime scripts/models/glm4.5-355B-A32B.sh; GLM-5 report table (dtype not confirmed)
    pytest.param("glm-4.5", 5120, 160, 8, 1, 92, "", id="glm-4.5"),
    # transformers Glm4MoeConfig dump of GLM-4.5-Air; slime glm4.5-106B-A12B.sh
    pytest.param("glm-4.5-air", 4096, 128, 8, 1, 46, "bfloat16", id="glm-4.5-air"),
    # AIC openai--gpt-oss-120b_config.json (no torch_dtype key)
    pytest.param("gpt-oss-120b", 2880, 128, 4, 0, 36, "", id="gpt-oss-120b"),
    # AIC openai--gpt-oss-20b_config.json (no torch_dtype key)
    pytest.param("gpt-oss-20b", 2880, 32, 4, 0, 24, "", id="gpt-oss-20b"),
    # AIC meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json (text_config; shared expert implicit)
    pytest.param("llama-4-scout", 5120, 16, 1, 1, 48, "bfloat16", id="llama-4-scout"),
    # AIC meta-llama--Llama-4-Maverick-17B-128E-Instruct_config.json (text_config; shared expert implicit)
    pytest.param("llama-4-maverick", 5120, 128, 1, 1, 48, "bfloat16", id="llama-4-maverick"),
    # dbrx-instruct config.json copy (d_model, ffn_config); databricks/dbrx MODEL_CARD_dbrx_base.md
    pytest.param("dbrx", 6144, 16, 4, 0, 40, "bfloat16", id="dbrx"),
    # AIC MiniMaxAI--MiniMax-M2.5_config.json (shared_intermediate_size 0, no torch_dtype)
    pytest.param("minimax-m2", 3072, 256, 8, 0, 62, "", id="minimax-m2"),
    # two ernie4_5_moe fixture copies (moe_num_experts, moe_k, moe_num_shared_experts)
    pytest.param("ernie-4.5-21b-a3b", 2560, 64, 6, 2, 28, "", id="ernie-4.5-21b-a3b"),
]


@pytest.mark.parametrize(("name", "hidden", "experts", "topk", "shared", "layers", "dtype"), GOLDEN)
def test_preset_numbers(name, hidden, experts, topk, shared, layers, dtype):
    spec = MODELS[name]
    assert (spec.hidden, spec.num_experts, spec.num_topk) == (hidden, experts, topk)
    assert (spec.num_shared_experts, spec.num_layers, spec.dtype) == (shared, layers, dtype)
    assert get_model(name) is spec


def test_golden_table_covers_every_preset():
    assert sorted(p.values[0] for p in GOLDEN) == sorted(MODELS)


REQUIRED = [
    "DeepSeek-V3", "DeepSeek-R1", "DeepSeek-V2", "DeepSeek-V2-Lite", "Kimi-K2", "Qwen3-235B-A22B",
    "Qwen3-30B-A3B", "Qwen1.5-MoE-A2.7B", "Qwen2-57B-A14B", "Mixtral-8x7B", "Mixtral-8x22B", "GLM-4.5",
    "GLM-4.5-Air", "gpt-oss-120b", "gpt-oss-20b", "Llama-4-Scout", "Llama-4-Maverick", "DBRX",
]


@pytest.mark.parametrize("title", REQUIRED)
def test_required_presets_exist_under_their_titles(title):
    assert get_model(title).title == title


@pytest.mark.parametrize("spec", list(MODELS.values()), ids=list(MODELS))
def test_preset_is_well_formed(spec: ModelSpec):
    """Every preset: key = name, lower-case dashed name, positive numbers, top-k <= experts,
    a cited source, and (since only verified values were kept) ``verified``."""
    assert MODELS[spec.name] is spec
    assert re.fullmatch(r"[a-z0-9]+(?:[.-][a-z0-9]+)*", spec.name), spec.name
    for value in (spec.hidden, spec.num_experts, spec.num_topk, spec.num_layers):
        assert isinstance(value, int) and value > 0
    assert 1 <= spec.num_topk <= spec.num_experts
    assert spec.num_shared_experts in (0, 1, 2)
    assert spec.source and spec.title and spec.hf_id.count("/") == 1
    assert spec.verified is True
    assert isinstance(spec.aliases, tuple)
    if spec.num_shared_experts and "shared_expert_intermediate_size" in spec.source + spec.notes:
        assert "counted as 1" in spec.notes


def test_no_name_or_alias_points_at_two_presets():
    """Folded names (case, separators, org prefix ignored) are unique across the table."""
    from epbuf.models import _fold

    owner: dict[str, str] = {}
    for spec in MODELS.values():
        for alias in {spec.name, spec.title, spec.hf_id, *spec.aliases}:
            folded = _fold(alias)
            assert owner.setdefault(folded, spec.name) == spec.name, (alias, owner[folded], spec.name)


def test_plan_fields_make_a_plan():
    from epbuf.plan import Plan

    plan = Plan(**get_model("deepseek-v3").plan_fields(), num_ranks=8, num_max_tokens_per_rank=4096)
    assert (plan.hidden, plan.num_topk, plan.num_experts, plan.model) == (7168, 8, 256, "deepseek-v3")


def test_model_names_in_table_order():
    assert model_names() == tuple(MODELS)
    assert model_names()[0] == "deepseek-v3"


# ------------------------------------------------------------------------------ lookup


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("deepseek-v3", "deepseek-v3"),
        ("DeepSeek-V3", "deepseek-v3"),
        ("deepseek_v3", "deepseek-v3"),
        ("DEEPSEEK V3", "deepseek-v3"),
        ("  deepseek-r1 ", "deepseek-r1"),
        ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
        ("deepseek_v3.2", "deepseek-v3.2"),
        ("qwen3_235b_a22b", "qwen3-235b-a22b"),
        ("Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"),
        ("Qwen1.5-MoE-A2.7B", "qwen1.5-moe-a2.7b"),
        ("qwen1_5_moe_a2_7b", "qwen1.5-moe-a2.7b"),
        ("Qwen1.5-MoE-A2.7B-Chat", "qwen1.5-moe-a2.7b"),
        ("Qwen/Qwen3-Next-80B-A3B-Thinking", "qwen3-next-80b-a3b"),
        ("Qwen/Qwen3-Coder-480B-A35B-Instruct", "qwen3-coder-480b-a35b"),
        ("moonshotai/Kimi-K2-Instruct", "kimi-k2"),
        ("Kimi K2", "kimi-k2"),
        ("kimi_k2.5", "kimi-k2.5"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
        ("mixtral_8x22b_v0.1", "mixtral-8x22b"),
        ("zai-org/GLM-4.5-Air", "glm-4.5-air"),
        ("glm_4_5", "glm-4.5"),
        ("openai/gpt-oss-120b", "gpt-oss-120b"),
        ("GPT_OSS_20B", "gpt-oss-20b"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout"),
        ("llama-4-maverick-17b-128e", "llama-4-maverick"),
        ("databricks/dbrx-instruct", "dbrx"),
        ("DBRX-Base", "dbrx"),
        ("MiniMax-M2.5", "minimax-m2"),
        ("baidu/ERNIE-4.5-21B-A3B-PT", "ernie-4.5-21b-a3b"),
    ],
)
def test_get_model_accepts_aliases_and_spellings(given, expected):
    assert get_model(given).name == expected


def test_unknown_model_message():
    with pytest.raises(UnknownNameError) as info:
        get_model("deepseek-v4")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("--model (model) = 'deepseek-v4': unknown; did you mean deepseek-v3")
    # issue 12: three names and a pointer to the list, not a 750-character line of every preset
    assert f"`epbuf models` lists all {len(MODELS)}" in message and "glm-4.5-air" not in message
    assert "--model-config" in message and len(message) < 300
    assert isinstance(info.value, EpbufError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("name", ["xyz", "gpt-5", "llama-3-70b"])
def test_unknown_models_without_close_match(name):
    with pytest.raises(UnknownNameError) as info:
        get_model(name)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"--model (model) = {name!r}: unknown; ")


@pytest.mark.parametrize("name", ["", "   "])
def test_empty_model_name_is_refused(name):
    with pytest.raises(UnknownNameError, match=r"^--model \(model\) = '\s*': empty; name a preset"):
        get_model(name)


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        ("llama4", "llama-4-scout, llama-4-maverick?"),
        ("gpt-oss", "gpt-oss-120b, gpt-oss-20b?"),
        ("qwen3", "qwen3-235b-a22b, qwen3-30b-a3b, qwen3-coder-480b-a35b?"),  # the three closest
        ("kimi", "kimi-k2, kimi-k2-thinking, kimi-k2.5?"),
    ],
)
def test_unknown_model_suggests_family(name, suggested):
    with pytest.raises(UnknownNameError) as info:
        get_model(name)
    assert f"unknown; did you mean {suggested} `epbuf models` lists all " in str(info.value)


def test_lookup_imports_neither_json_nor_difflib():
    """``get_model`` of a known name stays on the fast path (no ``json``/``difflib``/``dataclasses``)."""
    probe = (
        "import sys, epbuf.models as m, epbuf.devices as d; m.get_model('deepseek-v3'); d.get_device('h200');"
        "print(sorted(n for n in ('json', 'difflib', 'dataclasses') if n in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ----------------------------------------------------------------- config.json: real snippets

# AIC deepseek-ai--DeepSeek-V3_config.json (subset, key order kept)
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "first_k_dense_replace": 3,
    "hidden_size": 7168,
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048,
    "n_group": 8,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]},
    "topk_group": 4,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
}

# deepseek-ai/DeepSeek-V3@9b4e9788 inference/configs/config_671B.json (complete)
DEEPSEEK_NATIVE_671B = {
    "vocab_size": 129280, "dim": 7168, "inter_dim": 18432, "moe_inter_dim": 2048, "n_layers": 61,
    "n_dense_layers": 3, "n_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1,
    "n_activated_experts": 8, "n_expert_groups": 8, "n_limited_groups": 4, "route_scale": 2.5,
    "score_func": "sigmoid", "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "dtype": "fp8",
}

# AIC mistralai--Mixtral-8x7B-v0.1_config.json (subset)
MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "model_type": "mixtral",
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_local_experts": 8,
    "sliding_window": None,
    "torch_dtype": "bfloat16",
}

# AIC openai--gpt-oss-20b_config.json (subset; both top-k spellings, no torch_dtype)
GPT_OSS_20B = {
    "architectures": ["GptOssForCausalLM"],
    "experts_per_token": 4,
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "model_type": "gpt_oss",
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_local_experts": 32,
    "quantization_config": {"quant_method": "mxfp4"},
}

# dbrx-instruct config.json copy (subset; MLX "quantization" key dropped). attn_config.top_k is a
# sampling default and must not be read as the MoE top-k.
DBRX = {
    "architectures": ["DbrxForCausalLM"],
    "attn_config": {"model_type": "", "top_k": 50, "attn_pdrop": 0, "clip_qkv": 8, "kv_n_heads": 8,
                    "rope_theta": 500000},
    "d_model": 6144,
    "ffn_config": {"model_type": "", "ffn_act_fn": {"name": "silu"}, "ffn_hidden_size": 10752,
                   "moe_num_experts": 16, "moe_top_k": 4, "moe_jitter_eps": 0, "moe_loss_weight": 0.05,
                   "moe_normalize_expert_weights": 1, "uniform_expert_assignment": False},
    "max_seq_len": 32768,
    "model_type": "dbrx",
    "n_heads": 48,
    "n_layers": 40,
    "torch_dtype": "bfloat16",
    "vocab_size": 100352,
}

# AIC meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json (trimmed copy)
LLAMA4_SCOUT = {
    "architectures": ["Llama4ForConditionalGeneration"],
    "model_type": "llama4",
    "text_config": {
        "hidden_size": 5120,
        "interleave_moe_layer_step": 1,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "model_type": "llama4_text",
        "num_experts_per_tok": 1,
        "num_hidden_layers": 48,
        "num_local_experts": 16,
        "torch_dtype": "bfloat16",
    },
    "torch_dtype": "bfloat16",
}

# AIC moonshotai--Kimi-K2.5_config.json (subset; "dtype" key, text_config.top_k trap)
KIMI_K25 = {
    "architectures": ["KimiK25ForConditionalGeneration"],
    "dtype": "bfloat16",
    "model_type": "kimi_k25",
    "text_config": {
        "architectures": ["DeepseekV3ForCausalLM"],
        "dtype": "bfloat16",
        "hidden_size": 7168,
        "model_type": "kimi_k2",
        "n_routed_experts": 384,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "num_hidden_layers": 61,
        "top_k": 50,
    },
}

# AIC Qwen--Qwen3-235B-A22B_config.json (subset; no shared-expert key)
QWEN3_235B = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "decoder_sparse_step": 1,
    "hidden_size": 4096,
    "mlp_only_layers": [],
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 1536,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 94,
    "torch_dtype": "bfloat16",
}

# mlc-llm model_preset.py "qwen2moe" = Qwen1.5-MoE-A2.7B (subset, JSON-ified)
QWEN15_MOE = {
    "architectures": ["Qwen2MoeForCausalLM"],
    "hidden_size": 2048,
    "model_type": "qwen2_moe",
    "num_hidden_layers": 24,
    "torch_dtype": "bfloat16",
    "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632,
    "num_experts_per_tok": 4,
    "num_experts": 60,
}

# AIC MiniMaxAI--MiniMax-M2.5_config.json (subset; shared_intermediate_size 0, no dtype)
MINIMAX_M25 = {
    "architectures": ["MiniMaxM2ForCausalLM"],
    "model_type": "minimax_m2",
    "num_hidden_layers": 62,
    "hidden_size": 3072,
    "intermediate_size": 1536,
    "num_experts_per_tok": 8,
    "num_local_experts": 256,
    "shared_intermediate_size": 0,
    "quantization_config": {"quant_method": "fp8"},
}

# ernie4_5_moe fixture copies of ERNIE-4.5-21B-A3B (subset)
ERNIE_45_21B = {
    "architectures": ["Ernie4_5_MoeForCausalLM"],
    "hidden_size": 2560,
    "model_type": "ernie4_5_moe",
    "moe_k": 6,
    "moe_layer_start_index": 1,
    "moe_num_experts": 64,
    "moe_num_shared_experts": 2,
    "num_hidden_layers": 28,
}


def write_config(folder: Path, config: object, name: str = "config.json") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


# config, hidden, experts, topk, shared, layers, dtype, the preset it must agree with (or None)
SNIPPETS = [
    pytest.param(DEEPSEEK_V3, 7168, 256, 8, 1, 61, "bfloat16", "deepseek-v3", id="deepseek-v3-hf"),
    pytest.param(DEEPSEEK_NATIVE_671B, 7168, 256, 8, 1, 61, "fp8", None, id="deepseek-native-dim"),
    pytest.param(MIXTRAL_8X7B, 4096, 8, 2, 0, 32, "bfloat16", "mixtral-8x7b", id="mixtral-local-experts"),
    pytest.param(GPT_OSS_20B, 2880, 32, 4, 0, 24, "", "gpt-oss-20b", id="gpt-oss-no-dtype"),
    pytest.param(DBRX, 6144, 16, 4, 0, 40, "bfloat16", "dbrx", id="dbrx-ffn-config"),
    pytest.param(LLAMA4_SCOUT, 5120, 16, 1, 1, 48, "bfloat16", "llama-4-scout", id="llama4-text-config"),
    pytest.param(KIMI_K25, 7168, 384, 8, 1, 61, "bfloat16", "kimi-k2.5", id="kimi-k25-text-config"),
    pytest.param(QWEN3_235B, 4096, 128, 8, 0, 94, "bfloat16", "qwen3-235b-a22b", id="qwen3-num-experts"),
    pytest.param(QWEN15_MOE, 2048, 60, 4, 1, 24, "bfloat16", "qwen1.5-moe-a2.7b", id="qwen2moe-shared-width"),
    pytest.param(MINIMAX_M25, 3072, 256, 8, 0, 62, "", "minimax-m2", id="minimax-shared-width-0"),
    pytest.param(ERNIE_45_21B, 2560, 64, 6, 2, 28, "", "ernie-4.5-21b-a3b", id="ernie-moe-k"),
]


@pytest.mark.parametrize(("config", "hidden", "experts", "topk", "shared", "layers", "dtype", "preset"), SNIPPETS)
def test_real_config_snippets(tmp_path, config, hidden, experts, topk, shared, layers, dtype, preset):
    path = write_config(tmp_path / "Model", config)
    spec = read_model_config(path)
    assert (spec.hidden, spec.num_experts, spec.num_topk) == (hidden, experts, topk)
    assert (spec.num_shared_experts, spec.num_layers, spec.dtype) == (shared, layers, dtype)
    assert spec.source == str(path) and spec.title == "Model"
    assert spec.name == config.get("model_type", "")
    if preset is not None:
        known = get_model(preset)
        assert (known.hidden, known.num_experts, known.num_topk, known.num_shared_experts, known.num_layers) == (
            hidden, experts, topk, shared, layers)


def test_notes_name_the_keys_used(tmp_path):
    spec = read_model_config(write_config(tmp_path, DBRX))
    assert spec.notes == "read d_model=6144, ffn_config.moe_num_experts=16, ffn_config.moe_top_k=4, n_layers=40"
    spec = read_model_config(write_config(tmp_path, QWEN15_MOE))
    assert "shared_expert_intermediate_size=5632" in spec.notes and "counted as 1 shared expert" in spec.notes
    spec = read_model_config(write_config(tmp_path, LLAMA4_SCOUT))
    assert "text_config.hidden_size=5120" in spec.notes and "Llama-4: 1 shared expert" in spec.notes


def test_plain_top_k_is_not_the_moe_top_k(tmp_path):
    config = {"hidden_size": 7168, "n_routed_experts": 384, "top_k": 50}
    with pytest.raises(ConfigFileError, match=r"no experts-per-token \(top-k\); tried keys num_experts_per_tok"):
        read_model_config(write_config(tmp_path, config))
    nested = {"text_config": {"hidden_size": 7168, "n_routed_experts": 384, "top_k": 50}}
    with pytest.raises(ConfigFileError, match="no experts-per-token"):
        read_model_config(write_config(tmp_path, nested))


# Every key of every family, alone, at the top level and under each nesting.
FAMILIES = [("hidden", key) for key in HIDDEN_KEYS] + [("experts", key) for key in EXPERT_KEYS] + [
    ("topk", key) for key in TOPK_KEYS
]


@pytest.mark.parametrize("nest", ["", *NESTED_KEYS])
@pytest.mark.parametrize(("field", "key"), FAMILIES, ids=[f"{f}-{k}" for f, k in FAMILIES])
def test_every_key_family_and_nesting(tmp_path, field, key, nest):
    values = {"hidden": 1536, "experts": 48, "topk": 6}
    defaults = {"hidden": "hidden_size", "experts": "num_experts", "topk": "num_experts_per_tok"}
    inner = {defaults[f]: v for f, v in values.items() if f != field}
    inner[key] = values[field]
    config = {nest: inner} if nest else inner
    spec = read_model_config(write_config(tmp_path, config))
    assert (spec.hidden, spec.num_experts, spec.num_topk) == (1536, 48, 6)


@pytest.mark.parametrize(
    ("extra", "shared", "note"),
    [
        ({"n_shared_experts": 2}, 2, ""),
        ({"moe_num_shared_experts": 2}, 2, ""),
        ({"num_shared_experts": 3}, 3, ""),
        ({"n_shared_experts": 0}, 0, ""),
        ({"n_shared_experts": None}, 0, ""),  # null = absent (HF writes null for unset keys)
        ({"shared_expert_intermediate_size": 20480}, 1, "counted as 1"),
        ({"shared_expert_intermediate_size": 0}, 0, ""),
        ({"shared_intermediate_size": 0}, 0, ""),
        ({"n_shared_experts": 1, "shared_expert_intermediate_size": 4096}, 1, ""),  # count wins
        ({"model_type": "llama4_text"}, 1, "Llama-4"),
        ({}, 0, ""),
    ],
)
def test_shared_experts(tmp_path, extra, shared, note):
    config = {"hidden_size": 64, "num_experts": 8, "num_experts_per_tok": 2, **extra}
    spec = read_model_config(write_config(tmp_path, config))
    assert spec.num_shared_experts == shared
    assert note in spec.notes


@pytest.mark.parametrize(
    ("extra", "layers", "dtype"),
    [
        ({"num_hidden_layers": 61}, 61, ""),
        ({"n_layers": 40}, 40, ""),
        ({"n_layer": 12}, 12, ""),
        ({"num_layers": 28}, 28, ""),
        ({"torch_dtype": "float16"}, 0, "float16"),
        ({"dtype": "bfloat16"}, 0, "bfloat16"),
        ({"torch_dtype": None, "dtype": "bfloat16"}, 0, "bfloat16"),
        ({"torch_dtype": 16}, 0, ""),  # not a string: ignored, dtype is only a label
    ],
)
def test_optional_layers_and_dtype(tmp_path, extra, layers, dtype):
    config = {"hidden_size": 64, "num_experts": 8, "num_experts_per_tok": 2, **extra}
    spec = read_model_config(write_config(tmp_path, config))
    assert (spec.num_layers, spec.dtype) == (layers, dtype)


def test_top_level_is_searched_before_nested(tmp_path):
    config = {"hidden_size": 1024, "text_config": {"hidden_size": 2048, "num_experts": 8, "num_experts_per_tok": 2}}
    spec = read_model_config(write_config(tmp_path, config))
    assert (spec.hidden, spec.num_experts) == (1024, 8)


def test_nested_order_text_config_before_language_config(tmp_path):
    config = {
        "language_config": {"hidden_size": 2048, "num_experts": 64, "num_experts_per_tok": 6},
        "text_config": {"hidden_size": 1024, "num_experts": 8, "num_experts_per_tok": 2},
    }
    spec = read_model_config(write_config(tmp_path, config))
    assert (spec.hidden, spec.num_experts, spec.num_topk) == (1024, 8, 2)


def test_null_value_falls_through_to_next_key(tmp_path):
    config = {"hidden_size": None, "d_model": 512, "num_experts": 8, "num_experts_per_tok": 2}
    assert read_model_config(write_config(tmp_path, config)).hidden == 512


def test_vision_config_is_not_searched(tmp_path):
    config = {"vision_config": {"hidden_size": 1152}, "text_config": {"hidden_size": 5120, "num_local_experts": 16,
                                                                    "num_experts_per_tok": 1}}
    assert read_model_config(write_config(tmp_path, config)).hidden == 5120


@pytest.mark.parametrize("kind", ["folder", "file", "str-folder", "str-file"])
def test_folder_or_file_path(tmp_path, kind):
    path = write_config(tmp_path / "DeepSeek-V3", DEEPSEEK_V3)
    target = path.parent if "folder" in kind else path
    if kind.startswith("str"):
        target = str(target)
    spec = read_model_config(target)
    assert (spec.hidden, spec.title, spec.source) == (7168, "DeepSeek-V3", str(path))


def test_file_with_another_name(tmp_path):
    path = write_config(tmp_path, MIXTRAL_8X7B, name="mixtral.json")
    assert read_model_config(path).num_experts == 8


@settings(max_examples=60, deadline=None)
@given(
    hidden=st.integers(1, 1 << 20),
    experts=st.integers(1, 4096),
    data=st.data(),
)
def test_any_key_spelling_round_trips(tmp_path_factory, hidden, experts, data):
    """Invariant: whatever key spelling and nesting a config uses, the reader returns the
    numbers written (top-k <= experts)."""
    topk = data.draw(st.integers(1, experts))
    hidden_key = data.draw(st.sampled_from(HIDDEN_KEYS))
    experts_key = data.draw(st.sampled_from(EXPERT_KEYS))
    topk_key = data.draw(st.sampled_from(TOPK_KEYS))
    nest = data.draw(st.sampled_from(("",) + NESTED_KEYS))
    inner = {hidden_key: hidden, experts_key: experts, topk_key: topk}
    config = {nest: inner} if nest else inner
    folder = tmp_path_factory.mktemp("cfg")
    spec = read_model_config(write_config(folder, config))
    assert (spec.hidden, spec.num_experts, spec.num_topk) == (hidden, experts, topk)


# -------------------------------------------------------------------------- error paths


def one_line_error(target) -> str:
    with pytest.raises(ConfigFileError) as info:
        read_model_config(target)
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith("--model-config: ")
    assert isinstance(info.value, EpbufError)
    return message


def test_missing_file(tmp_path):
    path = tmp_path / "nope" / "config.json"
    message = one_line_error(path)
    assert message.startswith(f"--model-config: {path}: no such file")


def test_missing_hf_id_is_not_downloaded():
    message = one_line_error("deepseek-ai/DeepSeek-V3-not-a-local-path")
    assert "no such file" in message and "does not download" in message


def test_folder_without_config_json(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text("{}")
    message = one_line_error(tmp_path)
    assert message == f"--model-config: {tmp_path}: folder has no config.json"


def test_not_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{\n  "hidden_size": 7168,\n  "n_routed_experts" 256\n}\n')
    message = one_line_error(path)
    assert message == f"--model-config: {path}: not JSON (line 3, column 22: Expecting ':' delimiter)"


def test_empty_file(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("")
    assert "not JSON (line 1, column 1: Expecting value)" in one_line_error(path)


def test_not_utf8(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'{"hidden_size": "\xff"}')
    message = one_line_error(path)
    assert message.startswith(f"--model-config: {path}: not UTF-8 text")


@pytest.mark.parametrize(
    ("top", "kind"),
    [([DEEPSEEK_V3], "an array"), ("config", "a string"), (7168, "a number"), (None, "null"), (True, "true/false")],
)
def test_top_level_not_an_object(tmp_path, top, kind):
    path = write_config(tmp_path, top)
    message = one_line_error(path)
    assert message == f"--model-config: {path}: top level is {kind}, expected a JSON object {{...}}"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads anything")
def test_unreadable(tmp_path):
    path = write_config(tmp_path, DEEPSEEK_V3)
    path.chmod(0)
    try:
        message = one_line_error(path)
    finally:
        path.chmod(0o644)
    assert message.startswith(f"--model-config: {path}: cannot read (")


MISSING = [
    ("hidden_size", "hidden size", HIDDEN_KEYS, "--hidden", "hidden"),
    ("n_routed_experts", "routed expert count", EXPERT_KEYS, "--experts", "num_experts"),
    ("num_experts_per_tok", "experts-per-token (top-k)", TOPK_KEYS, "--topk", "num_topk"),
]


@pytest.mark.parametrize(("drop", "what", "keys", "option", "field"), MISSING)
def test_missing_key(tmp_path, drop, what, keys, option, field):
    config = {k: v for k, v in DEEPSEEK_V3.items() if k != drop}
    path = write_config(tmp_path, config)
    message = one_line_error(path)
    assert message == (
        f"--model-config: {path}: no {what}; tried keys {', '.join(keys)} "
        f"(also under text_config, language_config, ffn_config); or give it with {option}"
    )


@pytest.mark.parametrize(("drop", "what", "keys", "option", "field"), MISSING)
def test_flags_fill_keys_the_file_lacks(tmp_path, drop, what, keys, option, field):
    """Issue 12: ``--model-config cfg.json --topk 8 --experts 128`` completes a partial config."""
    config = {k: v for k, v in DEEPSEEK_V3.items() if k != drop}
    spec = read_model_config(write_config(tmp_path, config), fill={field: 77})
    assert getattr(spec, field) == 77 and f"{option}=77" in spec.notes
    full = read_model_config(write_config(tmp_path, DEEPSEEK_V3), fill={field: 77})
    assert getattr(full, field) != 77  # the file's own value wins (the CLI overrides explicitly)


def _cache_repo(root, repo_id: str, config: dict, revision: str = "0" * 40, main: bool = True):
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / revision
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(config))
    if main:
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(revision)
    return snap / "config.json"


def test_hugging_face_cache_by_id(tmp_path, monkeypatch):
    """Issue 12: an id whose config is in the offline HF cache is read from there and named by the id."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delenv("HF_HOME", raising=False)
    _cache_repo(tmp_path, "acme/Tiny-MoE", {"hidden_size": 1024, "num_local_experts": 16,
                                              "num_experts_per_tok": 2, "model_type": "mixtral"},
                revision="a" * 40)
    spec = get_model("acme/Tiny-MoE")
    assert (spec.hidden, spec.num_experts, spec.num_topk) == (1024, 16, 2)
    assert spec.title == "acme/Tiny-MoE" and "a" * 40 not in spec.title
    assert get_model("ACME/tiny-moe").title == "acme/Tiny-MoE"  # case-insensitive folder match


def test_hugging_face_cache_home_and_newest_snapshot(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    (tmp_path / "hub").mkdir()
    _cache_repo(tmp_path / "hub", "org/M", {"hidden_size": 64, "n_routed_experts": 4, "num_experts_per_tok": 1},
                main=False)
    assert get_model("org/M").hidden == 64


def test_presets_win_over_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    _cache_repo(tmp_path, "deepseek-ai/DeepSeek-V3", {"hidden_size": 1, "n_routed_experts": 1,
                                                        "num_experts_per_tok": 1})
    assert get_model("deepseek-ai/DeepSeek-V3").hidden == 7168


def test_snapshot_config_named_by_name_or_path(tmp_path):
    path = write_config(tmp_path / "abc123", {**DEEPSEEK_V3, "_name_or_path": "deepseek-ai/DeepSeek-V3-0324"})
    assert read_model_config(path).title == "deepseek-ai/DeepSeek-V3-0324"


@pytest.mark.parametrize(("given", "preset", "hidden"), [
    ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1", 7168),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b", 2048),
    ("Qwen/Qwen3-235B-A22B-Thinking-2507-FP8", "qwen3-235b-a22b", 4096),
    ("zai-org/GLM-4.6", "glm-4.5", 5120),
])
def test_released_variants_match_their_preset_family(given, preset, hidden, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # an empty cache: no config to read
    spec = get_model(given)
    assert spec.hidden == hidden and spec.title == given.split("/")[-1]
    assert spec.notes.startswith(f"architecture of the {preset} preset")
    assert spec.plan_fields()["model"] == given.split("/")[-1].lower()


@pytest.mark.parametrize(
    ("key", "value", "shown", "need"),
    [
        ("hidden_size", "7168", "'7168'", "a positive integer"),
        ("hidden_size", 7168.0, "7168.0", "a positive integer"),
        ("hidden_size", True, "True", "a positive integer"),
        ("hidden_size", [7168], "[7168]", "a positive integer"),
        ("hidden_size", 0, "0", "a positive integer"),
        ("n_routed_experts", 0, "0", "a positive integer"),
        ("n_routed_experts", -256, "-256", "a positive integer"),
        ("num_experts_per_tok", 0, "0", "a positive integer"),
        ("num_experts_per_tok", "8", "'8'", "a positive integer"),
        ("num_hidden_layers", 0, "0", "a positive integer"),
        ("n_shared_experts", -1, "-1", "a non-negative integer"),
        ("n_shared_experts", 1.5, "1.5", "a non-negative integer"),
    ],
)
def test_bad_value(tmp_path, key, value, shown, need):
    path = write_config(tmp_path, {**DEEPSEEK_V3, key: value})
    message = one_line_error(path)
    assert message == f"--model-config: {path}: {key} = {shown}: must be {need}"


def test_bad_nested_value_names_the_nesting(tmp_path):
    config = {**LLAMA4_SCOUT, "text_config": {**LLAMA4_SCOUT["text_config"], "num_local_experts": 0}}
    path = write_config(tmp_path, config)
    assert one_line_error(path) == f"--model-config: {path}: text_config.num_local_experts = 0: must be a positive integer"


def test_long_bad_value_is_shortened(tmp_path):
    path = write_config(tmp_path, {**DEEPSEEK_V3, "hidden_size": "x" * 500})
    message = one_line_error(path)
    assert len(message) < len(str(path)) + 120 and "...: must be a positive integer" in message


def test_topk_above_experts(tmp_path):
    path = write_config(tmp_path, {**MIXTRAL_8X7B, "num_experts_per_tok": 9})
    assert one_line_error(path) == f"--model-config: {path}: num_experts_per_tok = 9 is more than num_local_experts = 8"
