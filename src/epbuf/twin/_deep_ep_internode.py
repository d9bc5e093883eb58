"""Internode normal mode of the DeepEP V1 twin (``Buffer.internode_dispatch`` /
``internode_combine``, ``deep_ep/buffers/legacy.py:458-535 @dd758ca``): more than
``NUM_MAX_NVL_PEERS`` (8) ranks, "nodes" of 8 consecutive ranks.

The rows move as in intranode mode (:mod:`._deep_ep_normal`, one all-to-all, rows by source
rank); what differs is upstream's checks (``BUF`` ``internode_dispatch`` / ``internode_combine``
and the notify kernels' clean ranges, ``INK:420-433, 1503-1519``, from
:mod:`epbuf.backends.deepep_v1.internode` and the config's RDMA size hint) and the handle,
upstream's ten tensors: ``(is_token_in_rank, rdma_channel_prefix_matrix,
gbl_channel_prefix_matrix, recv_rdma_channel_prefix_matrix, recv_rdma_rank_prefix_sum,
recv_gbl_channel_prefix_matrix, recv_gbl_rank_prefix_sum, recv_src_meta, send_rdma_head,
send_nvl_head)``. The prefix matrices are inclusive per-channel prefixes (a channel is
``ceil(num_tokens / num_channels)`` consecutive tokens), ``recv_src_meta`` is upstream's
``SourceMeta`` (``int src_rdma_rank, is_token_in_nvl_rank_bits``, ``INK:22-36``) as 8 bytes,
``send_rdma_head[t, r]`` token ``t``'s place in its channel's queue to node ``r`` (-1 where not
sent, ``INK:645, 668``). ``send_nvl_head`` (the forwarder's place of each token of the RDMA
receive buffer in its channel's queue to each local rank) depends on the order the forwarder
meets the nodes' chunks on a GPU; the twin takes the nodes in ascending order.
"""

from __future__ import annotations

from ..backends.deepep_v1.internode import get_nvl_clean_meta, get_rdma_clean_meta
from ..errors import EpbufError
from ._deep_ep_normal import _channel_counts, _check_tensor, intranode_combine, intranode_dispatch
from ._engine import UpstreamAssertion, expect

__all__ = ["internode_dispatch", "internode_combine", "NVL_PEERS"]

BUF = "csrc/legacy/buffer.hpp:{} @dd758ca"
INK = "csrc/kernels/legacy/internode.cu:{} @dd758ca"
NVL_PEERS = 8  # LEGACY_NUM_MAX_NVL_PEERS
_INT_MAX = 2**31 - 1


def _clean_ranges(buf, config, hidden_bytes: int, scales: int, topk_idx: int, topk_weights: int, dispatch: bool):
    """The notify kernels' asserts: both buffers' clean ranges fit (``INK:430-433, 1515-1518``),
    the RDMA one in the config's ``get_rdma_buffer_size_hint`` (what upstream passes, ``BUF:1038``)."""
    R = buf.group_size
    N, C = R // NVL_PEERS, config.num_sms // 2
    try:
        hint = config.get_rdma_buffer_size_hint(hidden_bytes, R)
        rdma = get_rdma_clean_meta(hidden_bytes // 16, scales, topk_idx, topk_weights, N,
                                   config.num_max_rdma_chunked_recv_tokens, C)
        nvl = get_nvl_clean_meta(hidden_bytes // 16, scales, topk_idx, topk_weights, N, NVL_PEERS,
                                 config.num_max_nvl_chunked_recv_tokens, C, dispatch)
    except EpbufError as error:
        raise UpstreamAssertion(str(error)) from None
    expect(sum(rdma) * 4 <= hint, "EP_HOST_ASSERT((rdma_clean_meta.first + rdma_clean_meta.second) * sizeof(int) <= "
           "num_rdma_bytes)", INK.format("430, 1515"), f"{sum(rdma) * 4:,} B > the config's RDMA hint {hint:,} B")
    expect(sum(nvl) * 4 <= buf.num_nvl_bytes, "EP_HOST_ASSERT((nvl_clean_meta.first + nvl_clean_meta.second) * "
           "sizeof(int) <= num_nvl_bytes)", INK.format("431, 1516"), f"{sum(nvl) * 4:,} B > {buf.num_nvl_bytes:,} B")
    expect(hint < _INT_MAX and buf.num_nvl_bytes < _INT_MAX, "EP_HOST_ASSERT(num_rdma_bytes, num_nvl_bytes < "
           "std::numeric_limits<int>::max())", INK.format("432-433, 1517-1518"))
    expect(C * 2 > 3 or dispatch, "EP_HOST_ASSERT(num_channels * 2 > 3)", INK.format(1519), f"{C} channels")


def _check_shapes(torch, named, R: int, N: int, C: int) -> None:
    for name, t, shape, line in named:
        dims = len(shape)
        _check_tensor(t, name, torch.int32, dims, line)
        want = tuple(s for s in shape if s is not None)
        got = tuple(int(d) for d, s in zip(t.shape, shape) if s is not None)
        expect(got == want, f"EP_HOST_ASSERT({name} of shape {shape})", BUF.format(line), f"{tuple(t.shape)}")


def _internal_handle(torch, R: int, me: int, recv_gbl_rank_prefix_sum, num_recv: int, mask, per_rank_head):
    """The intranode handle's fields the row exchange reads: the ``[num_ranks, num_ranks]`` rank
    prefix (column ``me``: the rows from each rank), the received rows, the token mask."""
    rank_prefix = torch.zeros((R, R), dtype=torch.int32)
    rank_prefix[:, me] = recv_gbl_rank_prefix_sum
    return rank_prefix, None, None, torch.zeros(num_recv, dtype=torch.int32), mask, per_rank_head


def internode_dispatch(buf, x, handle, num_tokens_per_rank, num_tokens_per_rdma_rank, is_token_in_rank,
                       num_tokens_per_expert, topk_idx, topk_weights, expert_alignment, config, previous_event,
                       async_finish, allocate_on_comm_stream):
    engine, torch = buf._engine, buf._engine.torch
    R, me = engine.num_ranks, engine.rank
    N, node, local = R // NVL_PEERS, me // NVL_PEERS, me % NVL_PEERS
    C = config.num_sms // 2
    x_only, x_scales = x if isinstance(x, tuple) else (x, None)
    if handle is not None:
        assert topk_idx is None and topk_weights is None
        (mask, rdma_prefix, gbl_prefix, recv_rdma_prefix, recv_rdma_sum, recv_gbl_prefix, recv_gbl_sum, src_meta,
         send_rdma_head, send_nvl_head) = handle

        def capacity(hidden_bytes, num_topk, num_scales):
            _check_shapes(torch, (("cached_rdma_channel_prefix_matrix", rdma_prefix, (N, C), "918, 935-936"),
                                  ("cached_recv_rdma_rank_prefix_sum", recv_rdma_sum, (N,), "919, 937-938"),
                                  ("cached_gbl_channel_prefix_matrix", gbl_prefix, (R, C), "920, 939-941"),
                                  ("cached_recv_gbl_rank_prefix_sum", recv_gbl_sum, (R,), "921, 942-943")), R, N, C)
            _clean_ranges(buf, config, hidden_bytes, num_scales, num_topk, num_topk, True)

        inner = _internal_handle(torch, R, me, recv_gbl_sum, int(src_meta.shape[0]), mask, None)
        inner = (inner[0], gbl_prefix) + inner[2:]
        out = intranode_dispatch(buf, x_only, x_scales, None, None, None, None, None, inner, expert_alignment, 0, config,
                                 previous_event, async_finish, allocate_on_comm_stream, capacity=capacity)
        return out
    assert num_tokens_per_rank is not None and is_token_in_rank is not None and num_tokens_per_expert is not None

    def capacity(hidden_bytes, num_topk, num_scales):
        expect(num_tokens_per_rdma_rank is not None, "EP_HOST_ASSERT(num_tokens_per_rdma_rank.has_value())",
               BUF.format(912))
        _check_tensor(num_tokens_per_rdma_rank, "num_tokens_per_rdma_rank", torch.int32, 1, "924, 944")
        expect(tuple(num_tokens_per_rdma_rank.shape) == (N,), "EP_HOST_ASSERT(num_tokens_per_rdma_rank->size(0) == "
               "num_rdma_ranks)", BUF.format(947), f"shape {tuple(num_tokens_per_rdma_rank.shape)}, {N} nodes")
        rdma_mask = is_token_in_rank.view(-1, N, NVL_PEERS).any(2)
        expect(torch.equal(rdma_mask.sum(0).to(torch.int32), num_tokens_per_rdma_rank),
               "num_tokens_per_rdma_rank == is_token_in_rank per node", "notify_dispatch sizes the RDMA receive with "
               "the first, the kernels send by the second", f"{num_tokens_per_rdma_rank.tolist()}")
        _clean_ranges(buf, config, hidden_bytes, num_scales, num_topk, num_topk, True)

    n = int(x_only.shape[0])
    bits = torch.zeros((n, N), dtype=torch.int32)
    if tuple(is_token_in_rank.shape) == (n, R) and is_token_in_rank.dtype == torch.bool:  # else refused below
        weights = (2 ** torch.arange(NVL_PEERS, dtype=torch.int32))
        bits = (is_token_in_rank.reshape(n, N, NVL_PEERS).to(torch.int32) * weights).sum(2).to(torch.int32)
    extra = ((("nvl_bits", "int32", 4, N), bits.contiguous()),)
    recv_xs, recv_topk_idx, recv_topk_weights, per_expert, inner, event = intranode_dispatch(
        buf, x_only, x_scales, topk_idx, topk_weights, num_tokens_per_rank, is_token_in_rank, num_tokens_per_expert, None,
        expert_alignment, 0, config, previous_event, async_finish, allocate_on_comm_stream, capacity=capacity,
        extra=extra)
    rank_prefix, gbl_prefix, recv_gbl_prefix, _, mask, _, got_bits = inner
    rdma_mask = mask.view(n, N, NVL_PEERS).any(2)
    rdma_prefix, send_rdma_head = _channel_counts(torch, rdma_mask, C)
    # Each rank's per-channel prefix to every node: the sources of this rank's RDMA receive buffer.
    table = engine.gather(rdma_prefix.reshape(-1).tolist(), "internode dispatch").view(R, N, C)
    peers = torch.arange(N) * NVL_PEERS + local
    recv_rdma_prefix = table[peers, node].to(torch.int32).contiguous()
    recv_rdma_sum = torch.cumsum(recv_rdma_prefix[:, -1], 0).to(torch.int32)
    recv_gbl_sum = rank_prefix[:, me].contiguous()
    recv_counts = torch.diff(recv_gbl_sum.to(torch.int64), prepend=torch.zeros(1, dtype=torch.int64))
    real = int(recv_counts.sum())
    src_meta = torch.stack([torch.repeat_interleave(torch.arange(R, dtype=torch.int32) // NVL_PEERS, recv_counts),
                            got_bits.reshape(real, N)[:, node].to(torch.int32)], 1).contiguous().view(torch.uint8)
    send_nvl_head = _forwarder_heads(engine, torch, rdma_mask, bits, table, peers, node, C)
    handle = (mask, rdma_prefix, gbl_prefix, recv_rdma_prefix, recv_rdma_sum, recv_gbl_prefix, recv_gbl_sum,
              src_meta, send_rdma_head, send_nvl_head)
    return recv_xs, recv_topk_idx, recv_topk_weights, per_expert, handle, event


def _forwarder_heads(engine, torch, rdma_mask, bits, table, peers, node: int, C: int):
    """``send_nvl_head [num_rdma_recv_tokens, 8]``: for each token of this rank's RDMA receive
    buffer (nodes ascending, then token order), its place in its channel's queue to each local
    rank (-1 where it is not for that rank). The channel and local ranks of each token come from
    its sender (one exchange among the ranks of this GPU index)."""
    R, n, N = engine.num_ranks, int(rdma_mask.shape[0]), int(rdma_mask.shape[1])
    per = -(-n // C) if n else 1
    channel = torch.arange(n, dtype=torch.int32) // max(per, 1)
    dst, token = rdma_mask.t().nonzero(as_tuple=True)  # by node, then token
    rows = torch.stack([channel[token], bits[token, dst]], 1).contiguous().view(torch.uint8)
    send_counts = [0] * R
    recv_counts = [0] * R
    per_node = rdma_mask.sum(0).tolist()
    for r in range(N):
        send_counts[r * NVL_PEERS + int(peers[0]) % NVL_PEERS] = int(per_node[r])
    for peer in peers.tolist():
        recv_counts[peer] = int(table[peer, node, -1])
    recv = engine.exchange(rows, send_counts, recv_counts, "internode dispatch (forwarder)").wait()
    got = recv.contiguous().view(torch.int32).reshape(-1, 2)
    to_k = ((got[:, 1:2] >> torch.arange(NVL_PEERS, dtype=torch.int32)) & 1).to(torch.int32)  # [rows, 8]
    head = torch.full(tuple(to_k.shape), -1, dtype=torch.int32)
    for c in torch.unique(got[:, 0]).tolist():
        sel = got[:, 0] == c
        mine = to_k[sel]
        head[sel] = torch.where(mine.bool(), torch.cumsum(mine, 0) - 1, head[sel]).to(torch.int32)
    return head


def internode_combine(buf, x, handle, topk_weights, bias, config, previous_event, async_finish,
                      allocate_on_comm_stream):
    torch = buf._engine.torch
    R, me = buf.group_size, buf._engine.rank
    N, C = R // NVL_PEERS, config.num_sms // 2
    (mask, _, _, rdma_prefix, rdma_sum, gbl_prefix, gbl_sum, src_meta, send_rdma_head, send_nvl_head) = handle

    def capacity(hidden_bytes, num_topk):
        expect(src_meta.dim() == 2 and src_meta.is_contiguous() and src_meta.dtype == torch.uint8
               and int(src_meta.shape[1]) == 8, "EP_HOST_ASSERT(src_meta [num_tokens, get_source_meta_bytes()] kByte)",
               BUF.format("1269, 1286"), f"{tuple(src_meta.shape)} {src_meta.dtype}")
        expect(mask.dim() == 2 and mask.dtype == torch.bool and int(mask.shape[1]) == R,
               "EP_HOST_ASSERT(is_combined_token_in_rank [num_combined_tokens, num_ranks] kBool)",
               BUF.format("1270-1271, 1287"), f"{tuple(mask.shape)}")
        _check_shapes(torch, (("rdma_channel_prefix_matrix", rdma_prefix, (N, C), "1272, 1288"),
                              ("rdma_rank_prefix_sum", rdma_sum, (N,), "1274, 1289"),
                              ("gbl_channel_prefix_matrix", gbl_prefix, (R, C), "1276, 1290"),
                              ("combined_rdma_head", send_rdma_head, (int(mask.shape[0]), N), "1278, 1291-1292"),
                              ("combined_nvl_head", send_nvl_head, (None, NVL_PEERS), "1280, 1293")), R, N, C)
        expect(config.num_max_nvl_chunked_recv_tokens % N == 0,
               "EP_HOST_ASSERT(config.num_max_nvl_chunked_recv_tokens % num_rdma_ranks == 0)", BUF.format(1326))
        expect(config.num_max_nvl_chunked_send_tokens <= config.num_max_nvl_chunked_recv_tokens // N,
               "EP_HOST_ASSERT(config.num_max_nvl_chunked_send_tokens <= config.num_max_nvl_chunked_recv_tokens / "
               "num_rdma_ranks)", BUF.format(1327))
        _clean_ranges(buf, config, hidden_bytes, 0, 0, num_topk, False)

    head = torch.zeros((int(mask.shape[0]), R), dtype=torch.int32)
    inner = _internal_handle(torch, R, me, gbl_sum, int(src_meta.shape[0]), mask, head)
    return intranode_combine(buf, x, inner, topk_weights, bias, config, previous_event, async_finish,
                             allocate_on_comm_stream, capacity=capacity)
