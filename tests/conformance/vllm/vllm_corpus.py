"""The vLLM suite's reference corpus: launch lines as users paste them (``NAME=VALUE`` variables, then
``vllm serve MODEL ...``), across the all2all backends, DP/TP/EP shapes (DP = 1 included), dtypes,
variables and the spellings vLLM's ``FlexibleArgumentParser`` accepts. Models are those
``epbuf.engines.installed.vllm.MODELS`` writes a config.json for. Multi-node TP lines carry ``--nnodes``
(vLLM refuses a TP group larger than one node's 8 GPUs without it).
"""

V3 = "vllm serve deepseek-ai/DeepSeek-V3"
R1 = "vllm serve deepseek-ai/DeepSeek-R1"
Q30 = "vllm serve Qwen/Qwen3-30B-A3B"
Q235 = "vllm serve Qwen/Qwen3-235B-A22B"
EP = "--enable-expert-parallel"

LINES = [
    # DeepEP low latency: DP > 1 is use_batched_dp_moe (T = 256 unless given)
    f"{V3} -dp 16 {EP} --all2all-backend deepep_low_latency",
    f"{V3} -dp 8 {EP} --all2all-backend deepep_low_latency",
    f"{V3} -dp 32 {EP} --all2all-backend deepep_low_latency",
    f"{V3} -dp 16 {EP} --all2all-backend deepep_low_latency --max-num-batched-tokens 1024",
    f"{V3} -dp 16 {EP} --all2all-backend deepep_low_latency --performance-mode throughput",
    f"{V3} -dp 16 {EP} --all2all-backend deepep_low_latency --enable-eplb --eplb-config '{{\"num_redundant_experts\": 32}}'",
    f"{V3} -dp 16 {EP} --all2all-backend deepep_low_latency --enable-eplb --eplb-config.num_redundant_experts 16",
    f"{V3} -tp 2 -dp 8 {EP} --all2all-backend deepep_low_latency",
    f"{R1} -dp 16 {EP} --all2all-backend deepep_low_latency",
    f"{Q30} -dp 8 {EP} --all2all-backend deepep_low_latency",
    f"{Q30} -dp 4 {EP} --all2all-backend deepep_low_latency --max-num-batched-tokens 128",
    f"{Q235} -dp 16 {EP} --all2all-backend deepep_low_latency",
    f"{Q235} -dp 8 {EP} --all2all-backend deepep_low_latency --quantization fp8",
    f"VLLM_DEEPEP_BUFFER_SIZE_MB=512 {V3} -dp 16 {EP} --all2all-backend deepep_low_latency",
    f"VLLM_DEEPEP_BUFFER_SIZE_MB=2048 {Q30} -dp 8 {EP} --all2all-backend deepep_low_latency",
    # spellings: underscores, --flag=value, abbreviations
    f"{V3} --data_parallel_size 16 --enable_expert_parallel --all2all_backend deepep_low_latency",
    f"{V3} --tensor_parallel_size 8 --data_parallel_size 2 --all2all_backend deepep_low_latency {EP}",
    f"{V3} --data-parallel-size=16 {EP} --all2all-backend=deepep_low_latency",
    f"{V3} -dp=8 --enable-expert --all2all deepep_low_latency --max-num-batched 512",
    f"{Q30} --data_parallel_size=4 --enable-expert-parallel --all2all-backend=deepep_low_latency --max_num_batched_tokens=64",
    # DP = 1: no all2all manager, no buffer
    f"{V3} -tp 16 --nnodes 2 {EP} --all2all-backend deepep_low_latency",
    f"{V3} -tp 8 {EP} --all2all-backend deepep_low_latency",
    f"{V3} -tp 8 {EP} --all2all-backend deepep_high_throughput",
    f"{Q30} -tp 4 {EP} --all2all-backend deepep_v2",
    f"{Q30} -tp 8 {EP} --all2all-backend deepep_low_latency --performance-mode throughput",
    f"{Q235} --tensor-parallel-size 8 {EP} --all2all-backend deepep_high_throughput",
    # DP > 1 without --enable-expert-parallel: experts sharded, no all2all kernels
    f"{V3} -dp 16 --all2all-backend deepep_low_latency",
    f"{Q30} -dp 8 --all2all-backend deepep_high_throughput",
    # DeepEP high throughput (sizes from the variable; RDMA across nodes)
    f"{V3} -dp 16 {EP} --all2all-backend deepep_high_throughput",
    f"{V3} -dp 8 {EP} --all2all-backend deepep_high_throughput",
    f"{V3} -tp 2 -dp 8 {EP} --all2all-backend deepep_high_throughput",
    f"{Q30} -dp 8 {EP} --all2all-backend deepep_high_throughput",
    f"VLLM_DEEPEP_BUFFER_SIZE_MB=256 {Q30} -dp 8 {EP} --all2all-backend deepep_high_throughput",
    f"VLLM_DEEPEP_HIGH_THROUGHPUT_FORCE_INTRA_NODE=1 {V3} -dp 16 {EP} --all2all-backend deepep_high_throughput",
    f"{V3} -dp 16 {EP} --all2all_backend=deepep_high_throughput --performance-mode throughput",
    # DeepEP V2 (ElasticBuffer)
    f"{Q30} -dp 8 {EP} --all2all-backend deepep_v2",
    f"{Q30} -dp 8 {EP} --all2all-backend deepep_v2 --max-num-batched-tokens 2048",
    f"{Q30} -tp 2 -dp 4 {EP} --all2all-backend deepep_v2",
    f"{Q235} -dp 16 {EP} --all2all-backend deepep_v2",
    f"{V3} -dp 16 {EP} --all2all-backend deepep_v2",
    f"{V3} -dp 8 {EP} --all2all-backend deepep_v2 --performance-mode throughput",
    f"VLLM_DEEPEP_V2_ALLOW_HYBRID_MODE=0 {Q30} -dp 8 {EP} --all2all-backend deepep_v2",
    f"VLLM_DEEPEP_V2_ALLOW_MULTIPLE_REDUCTION=1 {Q30} -dp 8 {EP} --all2all-backend deepep_v2",
    f"{Q235} -dp 8 {EP} --all2all-backend deepep_v2 --quantization fp8",
    # MORI (ROCm; the platform stood in for as an MI300X with AITER's fused MoE): per-tensor FP8 is scale_dim 1
    f"{Q30} -dp 8 {EP} --all2all-backend mori_low_latency --max-num-batched-tokens 4096",
    f"{Q30} -dp 8 {EP} --all2all-backend mori_high_throughput --max-num-batched-tokens 1024",
    f"{Q235} -dp 16 {EP} --all2all-backend mori_high_throughput --quantization fp8 --max-num-batched-tokens 2048",
    f"{Q235} -dp 16 {EP} --all2all-backend mori_low_latency --quantization fp8_per_tensor --max-num-batched-tokens 512",
    f"{Q235} -dp 16 {EP} --all2all-backend mori_low_latency --quantization fp8_per_channel --max-num-batched-tokens 512",
    f"{V3} -dp 16 {EP} --all2all-backend mori_high_throughput --max-num-batched-tokens 1024",
    f"{V3} -dp 8 {EP} --all2all-backend mori_low_latency --max-num-batched-tokens 256",
    f"{V3} -tp 8 {EP} --all2all-backend mori_low_latency --max-num-batched-tokens 256",
    # pplx and naive: removed in 0.33.0, fall back to allgather_reducescatter (no EP-library buffer)
    f"{Q30} -dp 8 {EP} --all2all-backend pplx",
    f"{V3} -dp 16 {EP} --all2all-backend pplx",
    f"{Q30} -dp 8 {EP} --all2all-backend naive",
    f"{V3} -dp 16 {EP} --all2all-backend allgather_reducescatter",
    f"{Q30} -dp 8 {EP}",
    f"{V3} -dp 16 {EP} --max-num-batched-tokens 4096",
]

#: Lines run with UCCL-EP's drop-in as the ``deep_ep`` vLLM imports (epbuf: ``--uccl-ep`` before ``--``).
UCCL_LINES = [
    f"{V3} -dp 16 {EP} --all2all-backend deepep_low_latency",
    f"{V3} -dp 8 {EP} --all2all-backend deepep_low_latency --max-num-batched-tokens 128",
    f"{Q30} -dp 8 {EP} --all2all-backend deepep_low_latency",
    f"{V3} -dp 16 {EP} --all2all-backend deepep_high_throughput",
    f"{Q30} -dp 8 {EP} --all2all-backend deepep_high_throughput",
    f"VLLM_DEEPEP_BUFFER_SIZE_MB=512 {V3} -dp 16 {EP} --all2all-backend deepep_high_throughput",
]

