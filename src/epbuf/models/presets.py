"""The model presets (``--model``): every number read from a copy of the model's published
``config.json``; ``source`` says which copy (docs/derivations/models_and_devices.md).

>>> spec = MODELS["deepseek-v3"]
>>> (spec.hidden, spec.num_experts, spec.num_topk, spec.num_shared_experts)
(7168, 256, 8, 1)
"""

from __future__ import annotations

from . import ModelSpec

__all__ = ["MODELS", "model_names"]


# Where the copies live (see docs/derivations/models_and_devices.md §0). Commits are the snapshots read.
_AIC = "github.com/ai-dynamo/aiconfigurator@095f58a5 aic-core/src/aiconfigurator_core/model_configs/"
_AIC_OLD = "github.com/ai-dynamo/aiconfigurator src/aiconfigurator/model_configs/"
_DS = "github.com/deepseek-ai/DeepSeek-V3@9b4e9788 inference/configs/"
_MLC = "github.com/mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py"


def _m(**fields) -> ModelSpec:
    return ModelSpec(**fields)


_PRESETS = (
    # --- DeepSeek -------------------------------------------------------------------
    _m(name="deepseek-v3", block_fp8=True, title="DeepSeek-V3", hf_id="deepseek-ai/DeepSeek-V3",
       hidden=7168, num_experts=256, num_topk=8, num_shared_experts=1, num_layers=61, dtype="bfloat16",
       source=_AIC + "deepseek-ai--DeepSeek-V3_config.json; cross-check " + _DS + "config_671B.json",
       notes="weights fp8 (quantization_config e4m3, block 128x128); first 3 layers dense"),
    _m(name="deepseek-r1", block_fp8=True, title="DeepSeek-R1", hf_id="deepseek-ai/DeepSeek-R1",
       hidden=7168, num_experts=256, num_topk=8, num_shared_experts=1, num_layers=61, dtype="bfloat16",
       source=_AIC + "deepseek-ai--DeepSeek-R1_config.json",
       notes="same architecture as DeepSeek-V3; weights fp8 (quantization_config)"),
    _m(name="deepseek-v3.2", block_fp8=True, title="DeepSeek-V3.2", hf_id="deepseek-ai/DeepSeek-V3.2",
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
    _m(name="kimi-k2", block_fp8=True, title="Kimi-K2", hf_id="moonshotai/Kimi-K2-Instruct",
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
    _m(name="minimax-m2", block_fp8=True, title="MiniMax-M2", hf_id="MiniMaxAI/MiniMax-M2",
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
