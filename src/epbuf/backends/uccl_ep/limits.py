"""UCCL-EP's limits, each a row ``(name, value, relation, bound, ok, source, enforced)``,
defined once and read by both the reports (as ``LimitCheck`` records) and the fast summaries.

Where UCCL-EP departs from DeepEP V1 (``csrc/legacy/buffer.hpp:105-115 @dd758ca``):

* the ``Buffer`` constructor (``ep/src/uccl_ep.cc:451-472``) *drops* DeepEP's
  ``num_*_bytes / sizeof(int4) < INT_MAX`` checks (the 32 GiB low-latency ceiling, DeepEP
  4623c67) and its ``num_rdma_bytes > 0`` => internode-or-low-latency check (commented out,
  lines 471-472); it checks the rank topology against ``max_nvl_peers`` = ``LOCAL_WORLD_SIZE``
  instead of the compile-time 8;
* on ROCm the int limits of the constructor and of ``notify_dispatch`` are int64
  (``uccl_ep.cc:451-457``, ``ep/src/internode.cu:501-505``);
* its own launch limits: ``SWITCH_RDMA_RANKS`` compiles 2, 3, 4, 8, 16 RDMA ranks only
  (``ep/include/ep_launch.cuh:67-83``); internode combine needs ``num_rdma_ranks <= 16`` and
  chunk sizes that divide among them (``internode.cu:3098-3110``); the internode TMA staging
  buffer holds one token of ``kNumTMABytesPerWarp`` (``internode.cu:54-71, 683-684,
  2349-2350``); low-latency top-k is at most ``kNumMaxTopK`` (``internode_ll.cu:670-678``);
* the TMA launches' dynamic shared memory against the device's opt-in maximum per block, on CUDA
  (:mod:`.smem`): at ``main`` the internode dispatch and combine stage 20,480 B per warp where
  DeepEP stages 16,384, and ``cached_notify`` grows with ``num_sms`` as DeepEP's does.
"""

from __future__ import annotations

from ...units import INT32_MAX, INT64_MAX, MiB
from .config import get_num_bytes_per_token
from .low_latency import K_ATOMIC_BUFFER_SIZE
from .smem import low_latency_rows, normal_rows
from .versions import Version, cite

__all__ = ["LimitRow", "normal_limit_rows", "low_latency_limit_rows", "warp_size", "int_max",
           "SWITCH_RANKS", "SWITCH_RDMA_RANKS", "SWITCH_HIDDEN"]

LimitRow = tuple[str, int, str, int, bool, str, str]

SWITCH_RANKS = (2, 4, 8)  # intranode kernels (ep/include/ep_launch.cuh:85-97)
SWITCH_RDMA_RANKS = (2, 3, 4, 8, 16)  # internode kernels, num_ranks / NUM_MAX_NVL_PEERS (ep_launch.cuh:67-83)
SWITCH_HIDDEN = (2048, 2560, 4096, 5120, 6144, 7168, 8192)  # low-latency kernels (ep_launch.cuh:45-65)
NUM_MAX_NVL_PEERS = 8  # ep/include/ep_configs.cuh:3-5 (a build may override it; epbuf follows the default)
NUM_MAX_RDMA_PEERS = 20  # ep_configs.cuh:6
NUM_MAX_LOCAL_EXPERTS = 1024  # ep_configs.cuh:8
NUM_WORKSPACE_BYTES = 32 * MiB  # ep_configs.cuh:7
INTRANODE_TMA_BYTES_PER_WARP = 8192  # intranode dispatch kNumTMABytesPerWarp (ep/src/intranode.cu:613)
INTRANODE_NOTIFY_THREADS = 128  # intranode notify_dispatch kNumThreads (intranode.cu:139-142)
COMBINE_FORWARDER_WARPS = 16  # kNumCombineForwarderWarps (internode.cu:3058)
LL_MAX_WARP_GROUPS = {"cuda": 32, "rocm": 16}  # kNumMaxWarpGroups (ep/src/internode_ll.cu:16-20)
HINT_NUM_MAX_TOPK = 128  # kNumMaxTopK of the normal-mode hints (ep/include/ep_config.hpp:63, 101)


def warp_size(platform: str) -> int:
    """``WARP_SIZE``: 32 on CUDA, 64 on ROCm (``ep/include/ep_configs.cuh:73, 82``)."""
    return 64 if platform == "rocm" else 32


def int_max(platform: str) -> int:
    """The bound of the constructor's size checks: ``INT_MAX`` on CUDA, ``INT64_MAX`` on ROCm."""
    return INT64_MAX if platform == "rocm" else INT32_MAX


def _set_name(name: str, allowed: tuple[int, ...]) -> str:
    return f"{name} in {{{', '.join(map(str, allowed))}}}"


def _in_row(name: str, value: int, allowed: tuple[int, ...], source: str, enforced: str) -> LimitRow:
    return (_set_name(name, allowed), value, "in", max(allowed), value in allowed, source, enforced)


def _constructor_rows(platform: str, num_ranks: int, ranks_per_node: int) -> list[LimitRow]:
    ctor = cite("src/uccl_ep.cc", "469-470")
    remainder = num_ranks % ranks_per_node if num_ranks >= ranks_per_node else 0
    return [("num_ranks % max_nvl_peers (LOCAL_WORLD_SIZE) when num_ranks >= it", remainder, "==", 0,
             remainder == 0, ctor, "host")]


def normal_limit_rows(v: Version, platform: str, num_ranks: int, ranks_per_node: int, num_topk: int,
                      num_experts: int, hidden: int, use_fp8_dispatch: bool, configs: dict, combine_config,
                      num_nvl_bytes: int, num_rdma_bytes: int, rdma_hint_dispatched: int,
                      device=None) -> list[LimitRow]:
    """Every normal-mode limit, in report order.

    Args:
        configs: the configs the recipe sized with (``"dispatch"``/``"combine"`` or the override).
        combine_config: the config combine runs with.
        rdma_hint_dispatched: ``get_rdma_buffer_size_hint`` at the *dispatched* hidden bytes, which
            internode ``notify_dispatch`` receives as ``num_rdma_bytes`` (``uccl_ep.cc:1018``).
        device: the :class:`~epbuf.devices.DeviceSpec` bounding the TMA launches' shared memory
            (:mod:`.smem`; ``None``: sm_90's 232,448 B).
    """
    big = int_max(platform)
    big_name = "INT64_MAX" if platform == "rocm" else "INT_MAX"
    rocm = platform == "rocm"
    ctor_lines = "451-457" if rocm else "459-464"
    internode = max(num_ranks // ranks_per_node, 1) > 1
    element_size = 1 if use_fp8_dispatch else 2
    local_experts = num_experts // num_ranks
    rows: list[LimitRow] = [
        ("num_ranks (normal mode)", num_ranks, "<=", ranks_per_node * NUM_MAX_RDMA_PEERS,
         num_ranks <= ranks_per_node * NUM_MAX_RDMA_PEERS, cite("src/uccl_ep.cc", "466-468"), "host"),
        *_constructor_rows(platform, num_ranks, ranks_per_node),
        (f"num_nvl_bytes (when num_rdma_bytes > 0) <= {big_name}", num_nvl_bytes if num_rdma_bytes else 0, "<=", big,
         num_nvl_bytes <= big or num_rdma_bytes == 0, cite("src/uccl_ep.cc", ctor_lines), "host"),
        (f"num_rdma_bytes <= {big_name}", num_rdma_bytes, "<=", big, num_rdma_bytes <= big,
         cite("src/uccl_ep.cc", ctor_lines), "host"),
        ("num_topk (WARP_SIZE)", num_topk, "<=", warp_size(platform), num_topk <= warp_size(platform),
         f"{cite('src/intranode.cu', '213')}; {cite('src/internode.cu', '590')}", "kernel"),
        ("num_local_experts", local_experts, "<=", NUM_MAX_LOCAL_EXPERTS, local_experts <= NUM_MAX_LOCAL_EXPERTS,
         cite("src/uccl_ep.cc", "725, 987"), "host"),
        ("hidden x element size % 16", hidden * element_size % 16, "==", 0, hidden * element_size % 16 == 0,
         cite("src/uccl_ep.cc", "817-818"), "host"),
    ]
    hidden_int4 = hidden * element_size // 16
    if not internode:
        need = num_ranks * (num_ranks + local_experts) * 4
        channels = combine_config.num_channels
        rows += [
            _in_row("num_ranks (SWITCH_RANKS)", num_ranks, SWITCH_RANKS, cite("include/ep_launch.cuh", "85-97"),
                    "host"),
            ("num_experts % num_ranks", num_experts % num_ranks, "==", 0, num_experts % num_ranks == 0,
             cite("src/intranode.cu", "140"), "host"),
            ("num_local_experts (intranode notify_dispatch threads)", local_experts, "<=", INTRANODE_NOTIFY_THREADS,
             local_experts <= INTRANODE_NOTIFY_THREADS, cite("src/intranode.cu", "139-142"), "host"),
            ("num_ranks x (num_ranks + num_local_experts) ints", need, "<=", num_nvl_bytes, need <= num_nvl_bytes,
             cite("src/uccl_ep.cc", "746-747"), "host"),
            ("combine channels x num_ranks x 2 ints", channels * num_ranks * 8, "<=", num_nvl_bytes,
             channels * num_ranks * 8 <= num_nvl_bytes, cite("src/uccl_ep.cc", "912-913"), "host"),
        ]
        if not rocm:
            half = hidden_int4 // 2 * 16
            rows += [
                ("hidden_int4 % 2 (intranode TMA)", hidden_int4 % 2, "==", 0, hidden_int4 % 2 == 0,
                 cite("src/intranode.cu", "281-283"), "kernel"),
                ("hidden bytes / 2 + 8 (intranode TMA staging)", half + 8, "<=", INTRANODE_TMA_BYTES_PER_WARP,
                 half + 8 <= INTRANODE_TMA_BYTES_PER_WARP, cite("src/intranode.cu", "281-283, 613"), "kernel"),
            ]
    else:
        rdma_ranks = num_ranks // NUM_MAX_NVL_PEERS
        cfg = combine_config
        warps_per_forwarder = max(COMBINE_FORWARDER_WARPS // max(rdma_ranks, 1), 1)
        per_rank = cfg.num_max_nvl_chunked_recv_tokens // max(rdma_ranks, 1)
        chunk = max(cfg.num_max_rdma_chunked_send_tokens, cfg.num_max_nvl_chunked_send_tokens)
        channels = max(c.num_channels for c in configs.values())
        head_tail = 2 * 8 * rdma_ranks * channels
        rows += [
            ("num_ranks_per_node (NUM_MAX_NVL_PEERS)", ranks_per_node, "==", NUM_MAX_NVL_PEERS,
             ranks_per_node == NUM_MAX_NVL_PEERS, cite("include/ep_configs.cuh", "3-5"), "assumed"),
            _in_row("num_rdma_ranks (SWITCH_RDMA_RANKS)", rdma_ranks, SWITCH_RDMA_RANKS,
                    cite("include/ep_launch.cuh", "67-83"), "host"),
            ("num_rdma_ranks (combine forwarder warps)", rdma_ranks, "<=", COMBINE_FORWARDER_WARPS,
             rdma_ranks <= COMBINE_FORWARDER_WARPS, cite("src/internode.cu", "3058, 3102"), "host"),
            ("combine nvl_recv % num_rdma_ranks", cfg.num_max_nvl_chunked_recv_tokens % max(rdma_ranks, 1), "==", 0,
             cfg.num_max_nvl_chunked_recv_tokens % max(rdma_ranks, 1) == 0, cite("src/internode.cu", "3105"), "host"),
            ("combine nvl_recv / num_rdma_ranks > max(rdma_send, nvl_send)", per_rank, ">", chunk, per_rank > chunk,
             cite("src/internode.cu", "3106-3108"), "host"),
            ("combine rdma_send >= warps per forwarder", cfg.num_max_rdma_chunked_send_tokens, ">=",
             warps_per_forwarder, cfg.num_max_rdma_chunked_send_tokens >= warps_per_forwarder,
             cite("src/internode.cu", "3109"), "host"),
            ("num_experts % num_ranks", num_experts % num_ranks, "==", 0, num_experts % num_ranks == 0,
             f"not checked internode (num_experts / num_ranks, {cite('src/uccl_ep.cc', '986')})", "assumed"),
            ("RDMA channel head + tail (atomic buffer)", head_tail, "<=", K_ATOMIC_BUFFER_SIZE,
             head_tail <= K_ATOMIC_BUFFER_SIZE, cite("src/internode.cu", "181-189"), "kernel"),
            (f"RDMA hint at the dispatched hidden bytes < {big_name} (notify_dispatch)", rdma_hint_dispatched, "<",
             big, rdma_hint_dispatched < big, cite("src/internode.cu", "501-509"), "host"),
            (f"num_nvl_bytes < {big_name} (notify_dispatch)", num_nvl_bytes, "<", big, num_nvl_bytes < big,
             cite("src/internode.cu", "501-509"), "host"),
        ]
        if not rocm:
            scales = hidden // 128 if use_fp8_dispatch else 0
            dispatch_token = get_num_bytes_per_token(hidden_int4, scales, num_topk, num_topk) + 8
            combine_token = get_num_bytes_per_token(hidden * 2 // 16, 0, 0, num_topk) + 8
            tma = v.internode_tma_bytes_per_warp
            rows += [
                ("internode dispatch token + 8 B mbarrier (TMA staging)", dispatch_token, "<=", tma,
                 dispatch_token <= tma, cite("src/internode.cu", "66, 683-684"), "kernel"),
                ("internode combine token + 8 B mbarrier (TMA staging)", combine_token, "<=", tma,
                 combine_token <= tma, cite("src/internode.cu", "2349-2350, 3059"), "kernel"),
            ]
    product = max(cfg.num_channels * max(min(num_ranks, NUM_MAX_NVL_PEERS) * cfg.num_max_nvl_chunked_recv_tokens,
                                         (num_ranks // NUM_MAX_NVL_PEERS) * cfg.num_max_rdma_chunked_recv_tokens
                                         if num_ranks > NUM_MAX_NVL_PEERS else 0)
                  * HINT_NUM_MAX_TOPK for cfg in configs.values())
    rows.append(("channels x ranks x tokens x kNumMaxTopK (int product in the hints)", product, "<=", INT32_MAX,
                 product <= INT32_MAX, cite("include/ep_config.hpp", "82-84, 116-118"), "assumed"))
    # cached_notify runs with the config of the call it serves: combine's, or a cached dispatch's.
    rows += normal_rows(v, platform, device, internode, {k: cfg.num_sms for k, cfg in configs.items()})
    return rows


def low_latency_limit_rows(v: Version, platform: str, num_ranks: int, ranks_per_node: int, num_topk: int,
                           num_experts: int, hidden: int, use_fp8_dispatch: bool, num_tokens: int,
                           atomic_bytes_used: int, per_expert_batching: bool, device=None) -> list[LimitRow]:
    """Every low-latency limit, in report order (``atomic_bytes_used``: the layout's
    :attr:`~.low_latency.LowLatencyLayout.atomic_buffer_bytes_used`; ``device``: the
    :class:`~epbuf.devices.DeviceSpec` bounding the combine launch's shared memory, :mod:`.smem`)."""
    warps = LL_MAX_WARP_GROUPS["rocm" if platform == "rocm" else "cuda"]
    workspace = (num_experts * (3 if per_expert_batching else 2) + 1) * 4
    tma = num_ranks * num_tokens
    product = (num_experts + (1 if per_expert_batching else 0)) * num_tokens
    rows: list[LimitRow] = [
        ("num_topk (kNumMaxTopK)", num_topk, "<=", v.ll_num_max_topk, num_topk <= v.ll_num_max_topk,
         cite("src/internode_ll.cu", "670, 678, 1237, 1249") + f" (kNumMaxTopK = {v.ll_num_max_topk} at {v.id})",
         "host"),
        ("kNumMaxWarpGroups (most warps of a dispatch) >= kNumMaxTopK + 1", warps, ">=", v.ll_num_max_topk + 1,
         warps >= v.ll_num_max_topk + 1, cite("src/internode_ll.cu", "16-20, 671-674"), "host"),
        *_constructor_rows(platform, num_ranks, ranks_per_node),
        ("num_experts % num_ranks", num_experts % num_ranks, "==", 0, num_experts % num_ranks == 0,
         cite("src/uccl_ep.cc", "1321"), "host"),
        ("hidden % 128", hidden % 128, "==", 0, hidden % 128 == 0, cite("src/uccl_ep.cc", "1319-1320"), "host"),
        _in_row("hidden (SWITCH_HIDDEN)", hidden, SWITCH_HIDDEN, cite("include/ep_launch.cuh", "45-65"), "host"),
    ]
    if use_fp8_dispatch:
        rows.append(("hidden % 512 (FP8 dispatch)", hidden % 512, "==", 0, hidden % 512 == 0,
                     cite("src/uccl_ep.cc", "1326"), "host"))
    rows += [
        ("num_ranks x num_max_dispatch_tokens_per_rank % 4 (TMA)", tma % 4, "==", 0, tma % 4 == 0,
         cite("src/uccl_ep.cc", "1322-1323"), "host"),
        ("internode signaling buffers (atomic buffer)", atomic_bytes_used, "<=", K_ATOMIC_BUFFER_SIZE,
         atomic_bytes_used <= K_ATOMIC_BUFFER_SIZE, cite("include/ep_config.hpp", "275-281"), "host"),
        ("dispatch workspace ints x 4 B", workspace, "<=", NUM_WORKSPACE_BYTES, workspace <= NUM_WORKSPACE_BYTES,
         cite("src/internode_ll.cu", "684-694"), "host"),
        ("num_experts x num_max_dispatch_tokens_per_rank (int product in the layout)"
         if not per_expert_batching else
         "(num_experts + 1) x num_max_dispatch_tokens_per_rank (int product in the layout)",
         product, "<=", INT32_MAX, product <= INT32_MAX, cite("include/ep_config.hpp", "212-236"), "assumed"),
    ]
    if per_expert_batching:
        rows.append(("num_ranks x num_ranks (int product in the layout)", num_ranks * num_ranks, "<=", INT32_MAX,
                     num_ranks * num_ranks <= INT32_MAX, cite("include/ep_config.hpp", "245-246, 261-262"),
                     "assumed"))
    if hidden in SWITCH_HIDDEN:  # another hidden stops at SWITCH_HIDDEN's assert before the launch
        rows += low_latency_rows(platform, device, hidden)
    return rows


