"""DeepEP's intranode (normal-mode) dispatch and combine on the twin engine.

Upstream: ``Buffer::intranode_dispatch`` / ``intranode_combine`` (``csrc/legacy/buffer.hpp:417-
873 @dd758ca``, ``BUF``) and the kernels of ``csrc/kernels/legacy/intranode.cu``. What the twin
returns, as upstream: ``recv_x`` ordered by source rank (``rank_prefix_matrix[:, rank]`` its
prefix), each source's tokens in token order; ``recv_topk_idx`` local expert ids (-1 for other
ranks' experts, whose weights are 0); the per-local-expert counts aligned to
``expert_alignment``; the handle ``(rank_prefix_matrix, channel_prefix_matrix,
recv_channel_prefix_matrix, recv_src_idx, is_token_in_rank, send_head)``, with channels of
``ceil(num_tokens / num_channels)`` consecutive tokens and ``send_head`` each token's position
in its channel's queue to a rank (-1 where not sent). Combine sums each token's rows from every
rank it went to (fp32, in rank order) plus the biases. The NVL-bytes asserts come from
:mod:`epbuf.backends.deepep_v1.intranode`.
"""

from __future__ import annotations

from ..backends.deepep_v1.intranode import (cached_notify_combine_nvl_bytes, intranode_combine_nvl_bytes,
                                            intranode_dispatch_nvl_bytes, notify_dispatch_nvl_bytes)
from ._engine import UpstreamAssertion, expect
from ._engine_records import TokenRoute, pack_rows, record_layout, reduce_rows, unpack_rows

__all__ = ["intranode_dispatch", "intranode_combine"]

BUF = "csrc/legacy/buffer.hpp:{} @dd758ca"
# The agreement's fingerprint: [cached, hidden, element size, scales, scale dtype, top-k, experts, channels].
_FP_LEN = 8


def _check_tensor(t, name: str, dtype, dims: int, line: str) -> None:
    expect(t.dim() == dims and t.is_contiguous(), f"EP_HOST_ASSERT({name}.dim() == {dims} and {name}.is_contiguous())",
           BUF.format(line), f"{name} has shape {tuple(t.shape)}")
    if dtype is not None:
        expect(t.dtype == dtype, f"EP_HOST_ASSERT({name}.scalar_type() == {dtype})", BUF.format(line),
               f"{name} is {t.dtype}")


def _channel_counts(torch, mask, num_channels: int):
    """Inclusive per-channel prefix of tokens to each rank ``[num_ranks, num_channels]`` and each
    token's position in its channel's queue to each rank (``send_head``, -1 where not sent)."""
    n = int(mask.shape[0])
    per = -(-n // num_channels) if n else 0
    cum = torch.cumsum(mask.to(torch.int32), 0)
    ends = torch.clamp(torch.arange(1, num_channels + 1) * per, max=n)
    padded = torch.cat([torch.zeros((1, mask.shape[1]), dtype=torch.int32), cum])
    prefix = padded[ends].t().contiguous()
    starts = padded[torch.clamp(torch.arange(n) // max(per, 1) * per, max=n)] if n else padded[:0]
    send_head = torch.where(mask, cum - starts - 1, torch.full_like(cum, -1)).to(torch.int32)
    return prefix.to(torch.int32), send_head.contiguous()


def intranode_dispatch(buf, x, x_scales, topk_idx, topk_weights, num_tokens_per_rank, is_token_in_rank,
                       num_tokens_per_expert, handle, expert_alignment, num_worst_tokens, config, previous_event,
                       async_finish, allocate_on_comm_stream, capacity=None, extra=()):
    """``capacity(hidden_bytes, num_topk, num_scales)``, where set, replaces the intranode
    buffer checks (the internode twin's); ``extra`` adds ``(field, values)`` to each record and the
    received values to the returned handle's end."""
    engine, torch = buf._engine, buf._engine.torch
    R, me = engine.num_ranks, engine.rank
    cached = handle is not None

    def prepare():
        expect(config.num_sms % 2 == 0, "EP_HOST_ASSERT(config.num_sms % 2 == 0)", BUF.format(436))
        channels = config.num_sms // 2
        if cached:
            rank_prefix, channel_prefix, _, recv_src_idx, mask, _ = handle
            _check_tensor(rank_prefix, "cached_rank_prefix_matrix", torch.int32, 2, "449, 462")
            _check_tensor(channel_prefix, "cached_channel_prefix_matrix", torch.int32, 2, "450, 464")
            expect(tuple(rank_prefix.shape) == (R, R) and tuple(channel_prefix.shape) == (R, channels),
                   "EP_HOST_ASSERT(cached prefix matrices of [num_ranks, num_ranks] and [num_ranks, num_channels])",
                   BUF.format("463, 465"), f"{tuple(rank_prefix.shape)}, {tuple(channel_prefix.shape)}")
        else:
            assert num_tokens_per_rank is not None and is_token_in_rank is not None \
                and num_tokens_per_expert is not None
            mask = is_token_in_rank
        expect(mask.dtype == torch.bool, "EP_HOST_ASSERT(is_token_in_rank.scalar_type() == torch::kBool)",
               BUF.format(447), f"is {mask.dtype}")
        if not cached:
            _check_tensor(num_tokens_per_expert, "num_tokens_per_expert", torch.int32, 1, "452, 467")
            _check_tensor(num_tokens_per_rank, "num_tokens_per_rank", torch.int32, 1, "453, 470")
        _check_tensor(x, "x", None, 2, 457)
        n, hidden = int(x.shape[0]), int(x.shape[1])
        expect(hidden * x.element_size() % 16 == 0,
               "EP_HOST_ASSERT((x.size(1) * x.element_size()) % sizeof(int4) == 0)",
               BUF.format(458), f"hidden {hidden} x {x.element_size()} B")
        _check_tensor(mask, "is_token_in_rank", None, 2, 459)
        expect(tuple(mask.shape) == (n, R), "EP_HOST_ASSERT(is_token_in_rank.size(0) == x.size(0) and "
               "is_token_in_rank.size(1) == num_ranks)", BUF.format(460), f"shape {tuple(mask.shape)}, x {n} tokens")
        experts = 0
        if not cached:
            experts = int(num_tokens_per_expert.shape[0])
            expect(experts % R == 0, "EP_HOST_ASSERT(num_tokens_per_expert->size(0) % num_ranks == 0)", BUF.format(468),
                   f"{experts} experts, {R} ranks")
            expect(experts // R <= 1024, "EP_HOST_ASSERT(num_local_experts <= NUM_MAX_LOCAL_EXPERTS)", BUF.format(469))
            expect(tuple(num_tokens_per_rank.shape) == (R,),
                   "EP_HOST_ASSERT(num_tokens_per_rank->size(0) == num_ranks)",
                   BUF.format(471))
        expect((topk_idx is None) == (topk_weights is None),
               "EP_HOST_ASSERT(topk_idx.has_value() == topk_weights.has_value())", BUF.format(481))
        num_topk = 0
        if topk_idx is not None:
            num_topk = int(topk_idx.shape[1]) if topk_idx.dim() == 2 else -1
            expect(experts > 0, "EP_HOST_ASSERT(num_experts > 0)", BUF.format(484))
            _check_tensor(topk_idx, "topk_idx", torch.int64, 2, "485, 1482")
            _check_tensor(topk_weights, "topk_weights", torch.float32, 2, "486, 489")
            expect(tuple(topk_idx.shape) == tuple(topk_weights.shape) == (n, num_topk),
                   "EP_HOST_ASSERT(num_tokens == topk_idx->size(0) == topk_weights->size(0), num_topk == "
                   "topk_weights->size(1))", BUF.format("487-488"))
            bad = (topk_idx < -1) | (topk_idx >= experts)
            expect(not bool(bad.any()), "topk_idx in [-1, num_experts)", "the kernels index experts with it",
                   f"{int(bad.sum())} ids out of range")
        num_scales, scale_code = 0, 0
        if x_scales is not None:
            expect(x.element_size() == 1, "EP_HOST_ASSERT(x.element_size() == 1)", BUF.format(498))
            expect(x_scales.dtype in (torch.float32, torch.int32), "EP_HOST_ASSERT(x_scales->scalar_type() == "
                   "torch::kFloat32 or x_scales->scalar_type() == torch::kInt)", BUF.format(499), f"{x_scales.dtype}")
            expect(x_scales.dim() == 2 and int(x_scales.shape[0]) == n, "EP_HOST_ASSERT(x_scales->dim() == 2 and "
                   "x_scales->size(0) == num_tokens)", BUF.format("500-501"), f"shape {tuple(x_scales.shape)}")
            num_scales, scale_code = int(x_scales.shape[1]), 1 if x_scales.dtype == torch.float32 else 2
        if allocate_on_comm_stream:
            expect(previous_event is not None and async_finish,
                   "EP_HOST_ASSERT(previous_event.has_value() and async)", BUF.format(512))
        if not cached and capacity is None:
            need = notify_dispatch_nvl_bytes(R, experts // R)
            expect(need <= buf.num_nvl_bytes, "EP_HOST_ASSERT(num_ranks * (num_ranks + num_local_experts) * "
                   "sizeof(int) <= num_nvl_bytes)", BUF.format(552), f"{need:,} > {buf.num_nvl_bytes:,}")
            if num_worst_tokens > 0:
                expect(topk_idx is not None, "EP_HOST_ASSERT(topk_idx.has_value())", BUF.format(576))
        if capacity is not None:
            capacity(hidden * x.element_size(), num_topk, num_scales)
        need = 0 if capacity is not None else intranode_dispatch_nvl_bytes(config, R, hidden * x.element_size(),
                                                                           num_topk, num_scales)
        expect(need <= buf.num_nvl_bytes, "EP_HOST_ASSERT(prefix matrix + channel offsets + queues + "
               "channels x ranks x num_max_nvl_chunked_recv_tokens x (hidden + index + top-k + scales) <= "
               "num_nvl_bytes)", BUF.format("627-637"), f"{need:,} B > {buf.num_nvl_bytes:,} B")
        route = TokenRoute(torch, mask)
        if not cached:
            expect(torch.equal(route.counts.to(torch.int32), num_tokens_per_rank),
                   "num_tokens_per_rank == is_token_in_rank.sum(0)", "notify_dispatch sizes with the first, the "
                   "kernels send by the second", f"{num_tokens_per_rank.tolist()} vs {route.counts.tolist()}")
        head = [int(cached), hidden, x.element_size(), num_scales, scale_code, num_topk, experts, channels]
        if cached:  # the rows this rank sends, and those its handle expects from each rank
            expected = torch.diff(rank_prefix[:, me].to(torch.int64), prepend=torch.zeros(1, dtype=torch.int64))
            info, prefix, send_head = torch.cat([route.counts, expected]), None, None
        else:  # the rows it sends, its tokens per expert, its per-channel prefix to each rank
            prefix, send_head = _channel_counts(torch, mask, channels)
            info = torch.cat([route.counts, num_tokens_per_expert.to(torch.int64), prefix.reshape(-1).to(torch.int64)])
        return head, info, (route, channels, n, hidden, num_topk, num_scales, prefix, send_head)

    (route, channels, n, hidden, num_topk, num_scales, prefix, send_head), heads, counts = engine.agree_counts(
        "dispatch", "cached, hidden, element size, scales, scale dtype, top-k, experts and channels", _FP_LEN, prepare)
    experts = int(heads[0, 6])
    L = experts // R if experts else 0
    if cached:
        rank_prefix = handle[0]
        sends, expects = counts[:, :R], counts[:, R:]
        if not torch.equal(sends, expects.t()):
            raise UpstreamAssertion("cached dispatch: a rank's handle does not match the others' (the counts sent "
                                    f"{sends.tolist()} vs expected {expects.t().tolist()}); pass each rank's own "
                                    "handle")
        recv_counts = sends[:, me]
        num_recv = int(handle[3].shape[0])
    else:
        sends = counts[:, :R]
        recv_counts = sends[:, me]
        rank_prefix = torch.cumsum(sends, 0).to(torch.int32)
        num_recv = int(recv_counts.sum())
        if num_worst_tokens > 0:
            if num_worst_tokens < num_recv:
                raise UpstreamAssertion(f"num_worst_tokens = {num_worst_tokens} < the {num_recv} tokens rank {me} "
                                        "receives (the kernel's EP_DEVICE_ASSERT)")
            num_recv = num_worst_tokens
    fields = [("x", {1: "uint8", 2: "bfloat16", 4: "float32"}.get(x.element_size(), "uint8"), x.element_size(),
               hidden)]
    values = {"x": x.view(torch.uint8) if x.element_size() == 1 else x}
    if num_scales:
        fields.append(("scales", "float32" if x_scales.dtype == torch.float32 else "int32", 4, num_scales))
        values["scales"] = x_scales
    if not cached:
        fields.append(("src_idx", "int32", 4, 1))
        values["src_idx"] = torch.arange(n, dtype=torch.int32)
        if num_topk:
            fields += [("topk_idx", "int64", 8, num_topk), ("topk_weights", "float32", 4, num_topk)]
            values["topk_idx"], values["topk_weights"] = topk_idx, topk_weights
        for field, value in extra:
            fields.append(field)
            values[field[0]] = value
    layout = record_layout("DeepEP intranode dispatch", tuple(fields))
    num_rows = int(route.token.shape[0])
    send = pack_rows(torch, layout, num_rows, route.token, out=engine.scratch(("dispatch", "send"),
                                                                             num_rows * layout.num_bytes), **values)
    recv = engine.exchange(send, route.counts.tolist(), recv_counts.tolist(), "dispatch",
                           key=("dispatch", "recv")).wait()
    got = unpack_rows(layout, recv)
    real = int(recv.shape[0])
    recv_x = engine.output("dispatch x", (num_recv, hidden), x.dtype)
    recv_x.view(torch.uint8 if x.element_size() == 1 else x.dtype)[:real] = got["x"]
    recv_x[real:].view(torch.uint8).zero_()
    recv_scales = None
    if num_scales:
        recv_scales = torch.zeros((num_recv, num_scales), dtype=x_scales.dtype)
        recv_scales[:real] = got["scales"]
    event = buf._event(async_finish)
    if cached:
        return (recv_x, recv_scales) if num_scales else recv_x, None, None, None, None, event
    recv_src_idx = torch.zeros(num_recv, dtype=torch.int32)
    recv_src_idx[:real] = got["src_idx"].reshape(-1)
    recv_topk_idx = recv_topk_weights = None
    if num_topk:
        glob = got["topk_idx"]
        local = glob - me * L
        mine = (glob >= 0) & (local >= 0) & (local < L)
        recv_topk_idx = torch.full((num_recv, num_topk), -1, dtype=torch.int64)
        recv_topk_idx[:real] = torch.where(mine, local, torch.full_like(local, -1))
        recv_topk_weights = torch.zeros((num_recv, num_topk), dtype=torch.float32)
        recv_topk_weights[:real] = torch.where(mine, got["topk_weights"], torch.zeros_like(got["topk_weights"]))
    if num_worst_tokens > 0:
        per_expert = []
    else:
        summed = counts[:, R:R + experts].sum(0)[me * L:(me + 1) * L]
        per_expert = [-(-int(c) // expert_alignment) * expert_alignment for c in summed.tolist()]
    channel_prefixes = counts[:, R + experts:].view(R, R, channels)[:, me, :]  # source j's prefix to me
    starts = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(recv_counts, 0)[:-1]])
    recv_channel_prefix = (starts.unsqueeze(1) + torch.cat(
        [torch.zeros((R, 1), dtype=torch.int64), channel_prefixes[:, :-1]], 1)).to(torch.int32)
    new_handle = (rank_prefix, prefix, recv_channel_prefix, recv_src_idx, is_token_in_rank, send_head)
    new_handle += tuple(got[field[0]] for field, _ in extra)
    recv_xs = (recv_x, recv_scales) if num_scales else recv_x
    return recv_xs, recv_topk_idx, recv_topk_weights, per_expert, new_handle, event


def intranode_combine(buf, x, handle, topk_weights, bias, config, previous_event, async_finish,
                      allocate_on_comm_stream, capacity=None):
    engine, torch = buf._engine, buf._engine.torch
    R, me = engine.num_ranks, engine.rank
    rank_prefix, _, channel_prefix, src_idx, mask, send_head = handle
    bias_0, bias_1 = bias if isinstance(bias, tuple) else (bias, None)

    def prepare():
        _check_tensor(x, "x", None, 2, 732)
        _check_tensor(src_idx, "src_idx", torch.int32, 1, 733)
        _check_tensor(send_head, "send_head", torch.int32, 2, 734)
        expect(config.num_sms % 2 == 0, "EP_HOST_ASSERT(config.num_sms % 2 == 0)", BUF.format(741))
        n, hidden = int(x.shape[0]), int(x.shape[1])
        expect(int(src_idx.shape[0]) == n, "EP_HOST_ASSERT(src_idx.size(0) == num_tokens)", BUF.format(746),
               f"x has {n} rows, the handle {int(src_idx.shape[0])}")
        expect(int(send_head.shape[1]) == R and tuple(rank_prefix.shape) == (R, R),
               "EP_HOST_ASSERT(send_head.size(1) == num_ranks, rank_prefix_matrix [num_ranks, num_ranks])",
               BUF.format("747-748"))
        expect(hidden * x.element_size() % 16 == 0, "EP_HOST_ASSERT((hidden * x.element_size()) % sizeof(int4) == 0)",
               BUF.format(750))
        if allocate_on_comm_stream:
            expect(previous_event is not None and async_finish,
                   "EP_HOST_ASSERT(previous_event.has_value() and async)", BUF.format(756))
        num_topk = 0
        if topk_weights is not None:
            _check_tensor(topk_weights, "topk_weights", torch.float32, 2, "772, 774")
            expect(int(topk_weights.shape[0]) == n, "EP_HOST_ASSERT(topk_weights->size(0) == num_tokens)",
                   BUF.format(773))
            num_topk = int(topk_weights.shape[1])
        if capacity is not None:
            capacity(hidden * x.element_size(), num_topk)
        need = 0 if capacity is not None else cached_notify_combine_nvl_bytes(config, R)
        expect(need <= buf.num_nvl_bytes, "EP_HOST_ASSERT(num_channels * num_ranks * sizeof(int) * 2 <= num_nvl_bytes)",
               BUF.format(782))
        for b in (bias_0, bias_1):
            if b is not None:
                _check_tensor(b, "bias", x.dtype, 2, "799-800")
                expect(tuple(b.shape) == (int(mask.shape[0]), hidden), "EP_HOST_ASSERT(bias.size(0) == "
                       "num_recv_tokens and bias.size(1) == hidden)", BUF.format(801))
        need = 0 if capacity is not None else intranode_combine_nvl_bytes(config, R, hidden * x.element_size(),
                                                                          num_topk)
        expect(need <= buf.num_nvl_bytes, "EP_HOST_ASSERT(queues + channels x ranks x num_max_nvl_chunked_recv_tokens "
               "x (hidden + index + top-k weights) <= num_nvl_bytes)", BUF.format("807-811"),
               f"{need:,} B > {buf.num_nvl_bytes:,} B")
        back = torch.diff(rank_prefix[:, me].to(torch.int64), prepend=torch.zeros(1, dtype=torch.int64))
        route = TokenRoute(torch, mask)
        return [hidden, x.element_size(), num_topk] + back.tolist() + route.counts.tolist(), \
            (hidden, num_topk, back, route)

    # One all-gather: the shapes, and the rows each rank sends back and expects (2 x num_ranks).
    (hidden, num_topk, back, route), rows = engine.agree("combine", 3 + 2 * R, prepare)
    engine.same_everywhere(rows, slice(0, 3), "combine", "hidden, element size and top-k")
    counts = rows[:, 3:]
    if not torch.equal(counts[:, :R], counts[:, R:].t()):
        raise UpstreamAssertion("combine: the handles do not match across ranks (rows sent "
                                f"{counts[:, :R].tolist()} vs expected {counts[:, R:].t().tolist()})")
    fields = [("x", {2: "bfloat16", 4: "float32"}.get(x.element_size(), "uint8"), x.element_size(), hidden)]
    values = {"x": x}
    if num_topk:
        fields.append(("topk_weights", "float32", 4, num_topk))
        values["topk_weights"] = topk_weights
    layout = record_layout("DeepEP intranode combine", tuple(fields))
    num_back = int(back.sum())
    send = pack_rows(torch, layout, num_back, torch.arange(num_back),
                     out=engine.scratch(("combine", "send"), num_back * layout.num_bytes), **values)
    recv = engine.exchange(send, back.tolist(), route.counts.tolist(), "combine", key=("combine", "recv")).wait()
    got = unpack_rows(layout, recv)
    n = int(mask.shape[0])
    combined_x = reduce_rows(engine, got["x"], route.token, n, out_dtype=x.dtype, bias=(bias_0, bias_1))
    combined_weights = None
    if num_topk:
        combined_weights = torch.zeros((n, num_topk), dtype=torch.float32)
        combined_weights.index_add_(0, route.token, got["topk_weights"])
    return combined_x, combined_weights, buf._event(async_finish)
