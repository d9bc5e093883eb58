"""pplx-kernels' ``dispatch`` and ``combine`` on the twin engine (``ppl-ai/pplx-kernels @12cecfd``).

What the kernels do (``csrc/all_to_all/internode_dispatch.cu``, ``intranode_dispatch.cu``,
``internode_combine.cu``, ``intranode_combine.cu``): the ``dp_size`` ranks of a DP group hold
the same tokens; token ``i < bound_m`` is sent by the group's rank ``i % dp_size``, once to each
expert ``indices[i, k]``, as one ``perTokenBytes`` record (``hidden_dim_bytes`` of ``dp_x``,
``hidden_dim_scale_bytes`` of ``dp_x_scale``, the ``uint32`` token index, padded to 16:
:func:`epbuf.backends.pplx.per_token_bytes`). Expert ``e`` of rank ``e // L`` packs what it
receives into ``out_expert_x[e % L, 0 .. n)``, sources in rank order, each source's tokens in
token order (the GPU's order across sources follows its atomics; pplx's tests compare sets),
and ``out_expert_num_tokens[e % L] = n``. Combine sends each expert row of ``expert_y`` back to
every rank of the source's DP group, which writes ``out_tokens[i] = sum_k weights[i, k] *
y(indices[i, k], i)`` in fp32, cast to ``out_tokens``' dtype.

``do_send`` / ``do_recv`` split a call as upstream's ``SplitMode``: the send half is the
collective (the agreement, then the exchange starts), the receive half waits and unpacks.
"""

from __future__ import annotations

from ._engine import UpstreamAssertion, expect
from ._engine_experts import ExpertRoute, send_expert_rows, slots_of
from ._engine_records import pack_rows, record_layout, reduce_rows, unpack_rows

__all__ = ["dispatch", "combine"]

OPS = "csrc/bindings/all_to_all_ops.cpp:{} @12cecfd"
PY = "src/pplx_kernels/all_to_all.py:{} @12cecfd"


def _tensor(torch, name: str, x, ndim: int, line: int) -> None:
    """``_CHECK_TENSOR(ndim, x)`` (``OPS:19-24``): contiguous, ``ndim`` dimensional (a CPU tensor
    stands for the GPU's)."""
    expect(isinstance(x, torch.Tensor), f"Tensor {name} is a torch.Tensor", OPS.format(line), f"got {type(x).__name__}")
    expect(x.is_contiguous(), f'TORCH_CHECK(x.is_contiguous(), "Tensor {name} must be contiguous")', OPS.format(line))
    expect(x.dim() == ndim, f'TORCH_CHECK(x.dim() == {ndim}, "Tensor {name} must be {ndim} dimensional")',
           OPS.format(line), f"{name} is {tuple(x.shape)}")


def _bound_m(torch, bound_m, line: int) -> None:
    if bound_m is not None:
        _tensor(torch, "boundM", bound_m, 1, line)
        expect(bound_m.dtype == torch.uint32, 'TORCH_CHECK(boundM->scalar_type() == at::kUInt32, "boundM must be of '
               'type UInt32")', OPS.format(line + 1), f"boundM is {bound_m.dtype}")
        expect(bound_m.numel() == 1, 'TORCH_CHECK(boundM->numel() == 1, "boundM must be a scalar tensor")',
               OPS.format(line + 2), f"{bound_m.numel()} elements")


def _num_tokens(a2a, bound_m, m: int, kind: str) -> int:
    """``boundM ? *boundM : m``, within ``max_num_tokens`` (upstream's ``PPLX_DEVICE_ASSERT(numSendTokens <=
    maxNumTokens)``, compiled out by ``PPLX_ENABLE_DEVICE_ASSERT 0``: the twin keeps it) and ``m``."""
    n = m if bound_m is None else int(bound_m.to(a2a.torch.int64).item())
    expect(n <= a2a.max_num_tokens, *a2a.token_bound(kind),
           f"{n} tokens (bound_m or indices.size(0)) > max_num_tokens {a2a.max_num_tokens}")
    expect(n <= m, "bound_m <= indices.size(0)", "unchecked upstream: the kernels would read indices past the end",
           f"bound_m {n} > {m} rows")
    return n


def _indices(a2a, indices, n: int) -> None:
    """Expert ids of the first ``n`` tokens: below ``numExperts / worldSize * worldSize`` (the kernels' rank of an
    expert), no expert twice in a token (the combine keeps one slot per (expert, token))."""
    torch = a2a.torch
    ids = indices[:n].to(torch.int64)
    bad = ids >= a2a.num_routed_experts
    expect(not bool(bad.any()), "indices < num_experts",
           "unchecked upstream: internode_dispatch.cu:148-150 sends to rank expert / numLocalExperts",
           f"{int(bad.sum())} ids >= {a2a.num_routed_experts}")
    if n and ids.shape[1] > 1:
        ordered = ids.sort(dim=1).values
        twice = (ordered[:, 1:] == ordered[:, :-1]).any(1)
        if bool(twice.any()):
            expect(False, "each token's experts are distinct", "unchecked upstream: the combine keeps one slot per "
                   "(expert, token): internode_combine.cu:86, intranode_combine.cu:89",
                   f"token {int(twice.nonzero()[0, 0])} lists an expert twice")


def _strided(torch, x, shape: tuple, name: str):
    """The elements the kernel reads or writes through ``x``'s strides, beyond its shape where its
    storage allows (vLLM's per-token scales are read four floats at a time), refused past it."""
    try:
        return torch.as_strided(x, shape, x.stride(), x.storage_offset())
    except RuntimeError as error:
        raise UpstreamAssertion(f"{name}: the kernel reaches {shape} through its strides {tuple(x.stride())}, past its "
                                f"memory (unchecked upstream: an out-of-bounds access): {error}") from None


def _read_strided(torch, x, shape: tuple):
    """What the kernel reads through ``x``'s strides: past ``x``'s memory, zeros (upstream reads
    whatever follows it: vLLM passes per-token scales ``[n, 1]`` with 16 scale bytes, so the last
    token's read runs 12 bytes past them, into columns vLLM slices off again)."""
    try:
        return torch.as_strided(x, shape, x.stride(), x.storage_offset())
    except RuntimeError:
        need = x.storage_offset() + sum((s - 1) * st for s, st in zip(shape, x.stride())) + 1
        have = x.untyped_storage().nbytes() // x.element_size()
        padded = torch.zeros(need, dtype=x.dtype)
        padded[:min(have, need)] = torch.as_strided(x, (have,), (1,), 0)[:min(have, need)]
        return torch.as_strided(padded, shape, x.stride(), x.storage_offset())


def _byte_rows(torch, x, n: int, num_bytes: int, name: str):
    """``uint8 [n, num_bytes]``: the bytes the kernel reads from each of ``x``'s first ``n`` rows."""
    flat = x.reshape(-1).view(torch.uint8)
    row_bytes = int(x.shape[1]) * x.element_size()
    try:
        return torch.as_strided(flat, (n, num_bytes), (row_bytes, 1))
    except RuntimeError as error:
        raise UpstreamAssertion(f"{name}: the kernel reads {num_bytes} B from each of {n} rows of {row_bytes} B, past "
                                f"its memory (unchecked upstream: an out-of-bounds read): {error}") from None


def _dispatch_record(a2a):
    record = record_layout("pplx-kernels dispatch token", (
        ("hidden", "uint8", 1, a2a.hidden_dim_bytes), ("scales", "float32", 4, a2a.hidden_dim_scale_bytes // 4),
        ("src_token_index", "int32", 4, 1)))
    assert record.num_bytes == a2a.per_token_bytes, (record.num_bytes, a2a.per_token_bytes)
    return record


def _check_outputs(a2a, out_num, out_x, out_scale, where: str) -> int:
    """The dispatch outputs' checks (``OPS:135-139, 167, 175``) and what the kernel writes; their row capacity."""
    torch, L = a2a.torch, a2a.num_local_experts
    _tensor(torch, "outExpertNumTokens", out_num, 1, 135)
    _tensor(torch, "outExpertX", out_x, 3, 136)
    if out_scale is not None:
        expect(isinstance(out_scale, torch.Tensor) and out_scale.dim() == 3, 'TORCH_CHECK(outExpertXScale->dim() == '
               '3, "Tensor outExpertXScale must be 3 dimensional")', OPS.format(139))
    expect(out_num.dtype == torch.int32, "outExpertNumTokens.data_ptr<int32_t>()", OPS.format(167),
           f"expected scalar type Int but found {out_num.dtype}")
    if out_scale is not None:
        expect(out_scale.dtype == torch.float32, "outExpertXScale->data_ptr<float>()", OPS.format(175),
               f"expected scalar type Float but found {out_scale.dtype}")
    expect(out_num.shape[0] >= L, "out_expert_num_tokens holds num_local_experts", "unchecked upstream: "
           "the kernel writes one count per local expert", f"{int(out_num.shape[0])} < {L}")
    row_bytes = int(out_x.shape[2]) * out_x.element_size()
    expect(out_x.shape[0] >= L and row_bytes >= a2a.hidden_dim_bytes, "out_expert_x is [>= num_local_experts, "
           "rows, >= hidden_dim_bytes bytes]", "unchecked upstream: the kernel writes past it",
           f"{tuple(out_x.shape)} {out_x.dtype}: {L} experts of {a2a.hidden_dim_bytes} B rows needed")
    if out_scale is not None:
        _strided(torch, out_scale, (L, int(out_x.shape[1]), a2a.num_scales), "out_expert_x_scale")
    return int(out_x.shape[1])


def dispatch(a2a, out_num, out_x, out_scale, dp_x, dp_x_scale, indices, bound_m, do_send, do_recv) -> None:
    """``AllToAll.dispatch`` (``PY:27-59``, ``OPS:123-196``)."""
    engine, torch = a2a.engine, a2a.torch
    R, me, L, dp = engine.num_ranks, engine.rank, a2a.num_local_experts, a2a.dp_size
    E = a2a.num_routed_experts
    record = _dispatch_record(a2a)

    def checks():
        a2a.usable()
        if a2a.has_scales:
            expect(out_scale is not None and dp_x_scale is not None, "assert out_expert_x_scale is not None; assert "
                   "dp_x_scale is not None (hidden_dim_scale_bytes > 0)", PY.format("42-43"))
        else:
            expect(out_scale is None and dp_x_scale is None, "assert out_expert_x_scale is None; assert dp_x_scale is "
                   "None (hidden_dim_scale_bytes == 0)", PY.format("45-46"))
        capacity = _check_outputs(a2a, out_num, out_x, out_scale, OPS.format("135-175"))
        _tensor(torch, "dpX", dp_x, 2, 141)
        if dp_x_scale is not None:
            expect(isinstance(dp_x_scale, torch.Tensor) and dp_x_scale.dim() == 2, 'TORCH_CHECK(dpXScale->dim() == 2, '
                   '"Tensor dpXScale must be 2 dimensional")', OPS.format(144))
            expect(dp_x_scale.dtype == torch.float32, 'TORCH_CHECK(dpXScale->scalar_type() == at::kFloat, "dpXScale '
                   'must be of type Float")', OPS.format(145), f"dpXScale is {dp_x_scale.dtype}")
        _tensor(torch, "indices", indices, 2, 147)
        expect(indices.dtype == torch.uint32, 'TORCH_CHECK(indices.scalar_type() == at::kUInt32, "indices must be of '
               'type UInt32")', OPS.format(148), f"indices is {indices.dtype}")
        _bound_m(torch, bound_m, 150)
        expect(indices.shape[0] == dp_x.shape[0], 'TORCH_CHECK(indices.size(0) == dpX.size(0))', OPS.format(157),
               f"{int(indices.shape[0])} vs {int(dp_x.shape[0])}")
        expect(indices.shape[1] == a2a.experts_per_token, 'TORCH_CHECK(indices.size(1) == '
               'all_to_all->getNumExpertsPerToken())', OPS.format("158-161"),
               f"indices.size(1) = {int(indices.shape[1])}, experts_per_token = {a2a.experts_per_token}")
        expect(do_send or do_recv, 'TORCH_CHECK(false, "Invalid split mode")', OPS.format(118),
               "do_send and do_recv are both False")
        return capacity

    if not (do_send or do_recv):  # upstream's binding refuses it on the calling rank, before any exchange
        checks()
    if do_send:
        def prepare():
            a2a.usable()
            a2a.kernel_limits()  # before the output sizes the twin checks: those assume numExperts / worldSize
            capacity = checks()
            expect(not do_recv or a2a.pending_dispatch is None, "a dispatch send half is not waiting for its receive",
                   "the twin's split mode", "call dispatch(do_send=False, do_recv=True) first")
            n = _num_tokens(a2a, bound_m, int(indices.shape[0]), "dispatch")
            _indices(a2a, indices, n)
            data = _byte_rows(torch, dp_x, n, a2a.hidden_dim_bytes, "dp_x")
            scales = None
            if a2a.has_scales:
                scales = _read_strided(torch, dp_x_scale, (n, a2a.num_scales))
            mine = torch.arange(n) % dp == a2a.rank % dp  # token i goes from the DP group's rank i % dp_size
            unsent = torch.full((n, a2a.experts_per_token), -1)
            ids = torch.where(mine.unsqueeze(1), indices[:n].to(torch.int64), unsent)
            route = ExpertRoute(torch, ids, E, R)
            row = route.per_expert.tolist() + [capacity if do_recv else -1]
            return row, (route, data, scales, n)

        (route, data, scales, n), rows = engine.agree("AllToAll.dispatch", E + 1, prepare)
        counts = rows[:, :E]  # [source rank, expert]: pairs each rank sends to each expert
        per_expert = counts.sum(0).view(R, L)  # [rank, local expert]: rows each rank's experts receive
        for q in range(R):
            cap = int(rows[q, E])
            if cap >= 0 and int(per_expert[q].max()) > cap:
                e = int(per_expert[q].argmax())
                raise UpstreamAssertion(f"rank {q} of {R}: out_expert_x.size(1) >= the tokens a local expert receives "
                                        f"failed (unchecked upstream: the kernel writes past it): local expert {e} "
                                        f"receives {int(per_expert[q, e])}, out_expert_x holds {cap}")
        local = counts[:, me * L:(me + 1) * L]  # [source rank, local expert]
        fields = {"hidden": data, "src_token_index": torch.arange(n, dtype=torch.int32)}
        if scales is not None:
            fields["scales"] = scales
        pending = send_expert_rows(engine, record, route, local.sum(1).tolist(), "AllToAll.dispatch",
                                   ("pplx dispatch",), **fields)
        a2a.pending_dispatch = (pending, local)
    if not do_recv:
        return
    if not do_send:  # the receive half: local, as the GPU's receive kernel
        checks()
        expect(a2a.pending_dispatch is not None, "a dispatch(do_send=True) before dispatch(do_recv=True)",
               "upstream's receive kernel would wait forever")
    pending, local = a2a.pending_dispatch
    capacity = int(out_x.shape[1])
    totals = local.sum(0)
    expect(int(totals.max()) <= capacity if L else True, "out_expert_x.size(1) >= the tokens a local expert receives",
           "unchecked upstream: the kernel writes past it", f"{int(totals.max())} > {capacity}")
    a2a.pending_dispatch = None
    got = unpack_rows(record, pending.wait())
    begin = torch.cumsum(local, 0) - local
    slots = slots_of(torch, begin, local, capacity)
    out_rows = out_x.view(-1).view(torch.uint8).view(-1, int(out_x.shape[2]) * out_x.element_size())
    out_rows[:, :a2a.hidden_dim_bytes].index_copy_(0, slots, got["hidden"])
    expert, position = slots // capacity, slots % capacity
    if a2a.has_scales:
        view = _strided(torch, out_scale, (L, capacity, a2a.num_scales), "out_expert_x_scale")
        view[expert, position] = got["scales"]
    out_num[:L].copy_(totals.to(torch.int32))
    a2a.dispatched = (local, expert, position)


def combine(a2a, out_tokens, indices, weights, expert_y, bound_m, do_send, do_recv) -> None:
    """``AllToAll.combine`` (``PY:61-81``, ``OPS:239-311``)."""
    engine, torch = a2a.engine, a2a.torch
    R, L, dp, H, K = engine.num_ranks, a2a.num_local_experts, a2a.dp_size, a2a.hidden_dim, a2a.experts_per_token

    def checks() -> int:
        a2a.usable()
        _tensor(torch, "outTokens", out_tokens, 2, 249)
        _tensor(torch, "indices", indices, 2, 250)
        expect(indices.dtype == torch.uint32, 'TORCH_CHECK(indices.scalar_type() == at::kUInt32, "indices must be of '
               'type UInt32")', OPS.format(251), f"indices is {indices.dtype}")
        _tensor(torch, "weights", weights, 2, 252)
        expect(weights.dtype == torch.float32, 'TORCH_CHECK(weights.scalar_type() == at::kFloat, "weights must be of '
               'type Float")', OPS.format(253), f"weights is {weights.dtype}")
        _tensor(torch, "expertY", expert_y, 3, 254)
        _bound_m(torch, bound_m, 256)
        expect(expert_y.dtype in (torch.float32, torch.bfloat16, torch.float16), 'TORCH_CHECK(false, "Unsupported '
               'dtype for expertY")', OPS.format(309), f"expertY is {expert_y.dtype}")
        expect(out_tokens.dtype in (torch.bfloat16, torch.float16), 'TORCH_CHECK(false, "Unsupported dtype for '
               'outTokens")', OPS.format("277, 291, 305"), f"outTokens is {out_tokens.dtype}")
        expect(do_send or do_recv, 'TORCH_CHECK(false, "Invalid split mode")', OPS.format(118),
               "do_send and do_recv are both False")
        expect(indices.shape[1] == K and tuple(weights.shape[:1]) == tuple(indices.shape[:1]) and weights.shape[1] >= K,
               "indices and weights are [tokens, experts_per_token]", "unchecked upstream: the kernel reads "
               f"experts_per_token = {K} of each row",
               f"indices {tuple(indices.shape)}, weights {tuple(weights.shape)}")
        n = _num_tokens(a2a, bound_m, int(indices.shape[0]), "combine")
        expect(out_tokens.shape[0] >= n and out_tokens.shape[1] >= H, "out_tokens is [>= bound_m, >= hidden_dim]",
               "unchecked upstream: the kernel writes past it", f"{tuple(out_tokens.shape)}, {n} tokens of {H}")
        return n

    if not (do_send or do_recv):
        checks()
    if do_send:
        def prepare():
            n = checks()
            expect(a2a.dispatched is not None, "a dispatch before the combine", "upstream's combine would send "
                   "nothing and wait forever for its tokens")
            _indices(a2a, indices, n)
            local, expert, position = a2a.dispatched
            expect(expert_y.shape[0] >= L and expert_y.shape[2] >= H and (not position.numel() or int(position.max()) <
                   expert_y.shape[1]), "expert_y is [>= num_local_experts, > every dispatched row, >= hidden_dim]",
                   "unchecked upstream: the kernel reads past it", f"expert_y {tuple(expert_y.shape)}")
            from_source = local.sum(1)  # rows received from each rank, in the receive order
            start = torch.cumsum(from_source, 0) - from_source
            order, send = [], []
            for d in range(R):  # each row back to every rank of its source's DP group
                group = range(d // dp * dp, d // dp * dp + dp)
                order += [torch.arange(int(start[s]), int(start[s] + from_source[s])) for s in group]
                send.append(int(sum(int(from_source[s]) for s in group)))
            order = torch.cat(order) if order else torch.zeros(0, dtype=torch.int64)
            ids = indices[:n].to(torch.int64).reshape(-1)
            pair = torch.arange(n * K)
            key = ((ids // L * dp + pair // K % dp) * a2a.num_routed_experts + ids) * max(n * K, 1) + pair
            pair = pair[torch.argsort(key)]
            expect_from = torch.bincount(ids // L, minlength=R)
            return send + expect_from.tolist(), (order, send, pair, n)

        (order, send, pair, n), rows = engine.agree("AllToAll.combine", 2 * R, prepare)
        if not torch.equal(rows[:, :R], rows[:, R:].t()):
            raise UpstreamAssertion("AllToAll.combine: indices or bound_m differ from the dispatch's (rows sent "
                                    f"{rows[:, :R].tolist()} vs expected {rows[:, R:].t().tolist()}); upstream "
                                    "would wait forever")
        local, expert, position = a2a.dispatched
        es = expert_y.element_size()
        y_rows = expert_y.view(-1).view(torch.uint8).view(-1, int(expert_y.shape[2]) * es)[:, :H * es]
        record = record_layout("pplx-kernels combine token", (("hidden", "uint8", 1, H * es),))
        slots = (expert * int(expert_y.shape[1]) + position)[order]
        out = engine.scratch(("pplx combine", "send"), int(slots.shape[0]) * record.num_bytes)
        packed = pack_rows(torch, record, int(slots.shape[0]), slots, out=out, hidden=y_rows)
        pending = engine.exchange(packed, send, rows[engine.rank, R:].tolist(), "AllToAll.combine",
                                  key=("pplx combine", "recv"))
        a2a.pending_combine = (pending, pair, n, expert_y.dtype, record)
    if not do_recv:
        return
    if not do_send:
        checks()
        expect(a2a.pending_combine is not None, "a combine(do_send=True) before combine(do_recv=True)",
               "upstream's receive kernel would wait forever")
    pending, pair, n, dtype, record = a2a.pending_combine
    a2a.pending_combine = None
    received = unpack_rows(record, pending.wait(), ("hidden",))["hidden"].view(dtype)
    reduce_rows(engine, received, pair // K, n, weights=weights[:, :K].reshape(-1)[pair], out=out_tokens[:n, :H])
