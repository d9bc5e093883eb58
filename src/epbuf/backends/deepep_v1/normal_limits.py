"""Every limit of a normal-mode plan, as rows (:mod:`.limits`) the report and the summary share.

The size hints accept these plans; what refuses them comes later: ``Buffer``'s constructor
(``BUF:107-116``), the dispatch/combine host asserts, the launch switches (``SWITCH_RANKS``,
``SWITCH_RDMA_RANKS``) and the kernels' device asserts. Internode plans add the notify
kernels' clean ranges (:mod:`.internode`): ``notify_dispatch`` and ``cached_notify`` assert
``(clean_meta.first + clean_meta.second) * sizeof(int) <= num_rdma_bytes`` (against the
config's own RDMA hint for the activations' bytes, ``BUF:1038, 1080, 1348``) and ``<=
num_nvl_bytes`` (the Buffer's NVL size), ``INK:430-431, 1515-1516``.
"""

from __future__ import annotations

from ...units import INT32_MAX
from .config import Config, rdma_terms
from .constants import (BF16_BYTES, FP8_SCALE_BLOCK, INT4_BYTES, INT_BYTES, NORMAL_NUM_MAX_RANKS,
                        NORMAL_NUM_MAX_TOPK, NUM_BUFFER_ALIGNMENT_BYTES, NUM_MAX_LOCAL_EXPERTS, NUM_MAX_NVL_PEERS)
from .internode import nvl_clean_meta, nvl_clean_token_bytes, rdma_clean_meta, record_num_bytes
from .limits import LimitRow, in_row, passes_int4_check, set_name
from .smem import normal_launches, smem_rows
from .versions import Version

__all__ = ["normal_limit_rows"]


def normal_limit_rows(v: Version, ranks: int, ranks_per_node: int, topk: int, experts: int, hidden: int, fp8: bool,
                      configs: dict[str, Config], num_nvl_bytes: int, num_rdma_bytes: int,
                      idx_bytes: int, device=None) -> list[LimitRow]:
    """Every normal-mode limit, in report order (``configs``: "dispatch"/"combine", or one
    "deepep_config" that serves both; ``idx_bytes``: ``sizeof(topk_idx_t)`` of the build;
    ``device``: the :class:`~epbuf.devices.DeviceSpec` bounding the TMA launches' shared memory,
    :mod:`.smem`)."""
    internode = ranks > NUM_MAX_NVL_PEERS
    ctor = v.cite("BUF", "107-116", "Buffer constructor")
    num_rdma_ranks = max(ranks // NUM_MAX_NVL_PEERS, 1)
    element_size = 1 if fp8 else BF16_BYTES
    rows: list[LimitRow] = [
        ("num_ranks", ranks, "<=", NORMAL_NUM_MAX_RANKS, ranks <= NORMAL_NUM_MAX_RANKS,
         v.cite("BUF", "113", "Buffer constructor"), "host"),
        ("num_topk", topk, "<=", NORMAL_NUM_MAX_TOPK, topk <= NORMAL_NUM_MAX_TOPK,
         v.cite("INK", "519, 1754", "EP_DEVICE_ASSERT(num_topk <= 32)"), "kernel"),
        ("num_ranks_per_node (NUM_MAX_NVL_PEERS)", ranks_per_node, "==", min(ranks, NUM_MAX_NVL_PEERS),
         ranks_per_node == min(ranks, NUM_MAX_NVL_PEERS), v.cite("CPL", "5", "NUM_MAX_NVL_PEERS"), "assumed"),
    ]
    if internode:
        rows.append(in_row(set_name("num_rdma_ranks (SWITCH_RDMA_RANKS)", v.rdma_ranks), num_rdma_ranks,
                           v.rdma_ranks, v.cite("LAUNCH", "66-89", "SWITCH_RDMA_RANKS"), "host"))
    else:
        rows.append(in_row(set_name("num_ranks (SWITCH_RANKS)", v.intranode_ranks), ranks, v.intranode_ranks,
                           v.cite("LAUNCH", "53-64", "SWITCH_RANKS"), "host"))
    rows += [
        ("num_experts % num_ranks", experts % ranks, "==", 0, experts % ranks == 0,
         v.cite("BUF", "468, 948", "dispatch"), "host"),
        ("num_local_experts", experts // ranks, "<=", NUM_MAX_LOCAL_EXPERTS,
         experts // ranks <= NUM_MAX_LOCAL_EXPERTS, v.cite("BUF", "469, 949", "NUM_MAX_LOCAL_EXPERTS"), "host"),
        ("hidden x element size % 16", hidden * element_size % INT4_BYTES, "==", 0,
         hidden * element_size % INT4_BYTES == 0, v.cite("BUF", "458, 930", "dispatch"), "host"),
        ("num_nvl_bytes (when num_rdma_bytes > 0)", num_nvl_bytes if num_rdma_bytes else 0, "<=", INT32_MAX,
         num_nvl_bytes <= INT32_MAX or num_rdma_bytes == 0, ctor, "host"),
        ("num_rdma_bytes", num_rdma_bytes, "<=", INT32_MAX, num_rdma_bytes <= INT32_MAX, ctor, "host"),
    ]
    if v.int4_count_check:
        for what, num_bytes, line in (("num_nvl_bytes", num_nvl_bytes, "111"),
                                      ("num_rdma_bytes", num_rdma_bytes, "112")):
            rows.append((f"{what} / sizeof(int4)", num_bytes // INT4_BYTES, "<", INT32_MAX,
                         passes_int4_check(num_bytes), v.cite("BUF", line), "host"))
    if internode:
        rows += _internode_rows(v, ranks, topk, hidden, fp8, configs, num_nvl_bytes, idx_bytes)
    rows += smem_rows(v, device, normal_launches(internode, {k: cfg.num_sms for k, cfg in configs.items()}))
    return rows


def _internode_rows(v: Version, ranks: int, topk: int, hidden: int, fp8: bool, configs: dict[str, Config],
                    num_nvl_bytes: int, idx_bytes: int) -> list[LimitRow]:
    """The notify kernels' clean ranges and the internode combine's config checks."""
    num_rdma_ranks = ranks // NUM_MAX_NVL_PEERS
    dispatch_cfg = configs.get("dispatch") or configs["deepep_config"]
    combine_cfg = configs.get("combine") or configs["deepep_config"]
    # Dispatch sends the activations (FP8 + fp32 scales, or BF16) with top-k indices and weights;
    # combine sends BF16 and the weights (BUF:1020-1025, 1053-1080; 1330-1333).
    dispatch_x = hidden * (1 if fp8 else BF16_BYTES) // INT4_BYTES * INT4_BYTES
    kinds = (("dispatch", "notify_dispatch", dispatch_cfg, dispatch_x, hidden // FP8_SCALE_BLOCK if fp8 else 0, topk,
              True, ("430", "1080"), "431"),
             ("combine", "cached_notify", combine_cfg, hidden * BF16_BYTES // INT4_BYTES * INT4_BYTES, 0, 0, False,
              ("1515", "1348"), "1516"))
    rows: list[LimitRow] = []
    products = []
    for kind, kernel, cfg, x_bytes, scales, num_idx, is_dispatch, (rdma_line, hint_line), nvl_line in kinds:
        ch = cfg.num_channels
        t_rdma, t_nvl = cfg.num_max_rdma_chunked_recv_tokens, cfg.num_max_nvl_chunked_recv_tokens
        per_token = record_num_bytes(x_bytes, scales, num_idx, topk)
        first, second = rdma_clean_meta(per_token, num_rdma_ranks, t_rdma, ch)
        # Upstream passes the config's RDMA hint for these activation bytes, not the Buffer's size.
        hint = sum(rdma_terms(v, ch, num_rdma_ranks, t_rdma, x_bytes, idx_bytes)[0])
        hint = (hint + 127) // NUM_BUFFER_ALIGNMENT_BYTES * NUM_BUFFER_ALIGNMENT_BYTES
        rows.append((f"{kind} RDMA clean meta x 4 B ({kernel}; bound: the {kind} config's RDMA hint)",
                     (first + second) * INT_BYTES, "<=", hint, (first + second) * INT_BYTES <= hint,
                     v.cite("INK", rdma_line, kernel) + ", " + v.cite("BUF", hint_line, "num_rdma_bytes argument"),
                     "host"))
        nvl_token = nvl_clean_token_bytes(v.nvl_clean_meta, x_bytes, scales, num_idx, topk, is_dispatch)
        nvl_first, nvl_second = nvl_clean_meta(nvl_token, num_rdma_ranks, NUM_MAX_NVL_PEERS, t_nvl, ch)
        rows.append((f"{kind} NVL clean meta x 4 B ({kernel})", (nvl_first + nvl_second) * INT_BYTES, "<=",
                     num_nvl_bytes, (nvl_first + nvl_second) * INT_BYTES <= num_nvl_bytes,
                     v.cite("INK", nvl_line, kernel), "host"))
        products += [per_token * t_rdma * num_rdma_ranks * 2 * ch, t_nvl * nvl_token * NUM_MAX_NVL_PEERS * ch]
    worst = max(products)
    ch = combine_cfg.num_channels
    nvl_send, nvl_recv = combine_cfg.num_max_nvl_chunked_send_tokens, combine_cfg.num_max_nvl_chunked_recv_tokens
    rows += [
        ("clean meta int products (get_rdma/nvl_clean_meta)", worst, "<=", INT32_MAX, worst <= INT32_MAX,
         v.cite("INK", "61-62, 79-80", "int arithmetic"), "assumed"),
        ("num_channels x 2 (cached_notify)", ch * 2, ">", 3, ch * 2 > 3, v.cite("INK", "1519", "cached_notify"),
         "host"),
        ("combine config: num_max_nvl_chunked_recv_tokens % num_rdma_ranks", nvl_recv % num_rdma_ranks, "==", 0,
         nvl_recv % num_rdma_ranks == 0, v.cite("BUF", "1326", "internode_combine"), "host"),
        ("combine config: num_max_nvl_chunked_send_tokens", nvl_send, "<=", nvl_recv // num_rdma_ranks,
         nvl_send <= nvl_recv // num_rdma_ranks, v.cite("BUF", "1327", "internode_combine"), "host"),
    ]
    return rows

