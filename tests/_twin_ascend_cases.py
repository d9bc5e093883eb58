"""What each rank runs in tests/test_twin_ascend.py (spawned by run_gloo, so importable by name):
epbuf.twin.deep_ep_ascend as ``deep_ep``, checked bit for bit against the dense refs.py-style
reference of tests/_moe_reference.py, re-expanded the way upstream's ``do_expand`` layout groups rows."""

from __future__ import annotations

import numpy as np
import torch
from _moe_reference import (Case, bits, expert_output, make_inputs, reference_combine, reference_dispatch,
                            weighted)


def deep_ep():
    import epbuf.twin.deep_ep_ascend as twin

    twin.install()
    import deep_ep

    return deep_ep


def expand(case: Case, want: dict, rank: int, alignment: int):
    """The reference's received tokens as upstream's expanded rows: (row, slot) per local expert, padded."""
    rows, slots = [], []
    for e in range(case.num_experts // case.num_ranks):
        token, k = (want["topk_idx"] == e).nonzero(as_tuple=True)
        pad = -int(token.numel()) % alignment
        rows.append(torch.cat([token, torch.full((pad,), -1, dtype=torch.int64)]))
        slots.append(torch.cat([k, torch.zeros(pad, dtype=torch.int64)]))
    return torch.cat(rows), torch.cat(slots)


def round_trips(rank: int, num_ranks: int, case: Case, alignments) -> list:
    return [round_trip(rank, num_ranks, case, alignment) for alignment in alignments]


def hostile_and_boundary(rank: int, num_ranks: int, case: Case, wide: Case) -> tuple:
    return hostile(rank, num_ranks, case), boundary(rank, num_ranks, wide)


def round_trip(rank: int, num_ranks: int, case: Case, alignment: int) -> dict:
    ep = deep_ep()
    inputs = [make_inputs(case, r) for r in range(num_ranks)]
    x, idx, w = inputs[rank]
    buffer = ep.EPBuffer(None, num_max_tokens_per_rank=case.num_max_tokens_per_rank, hidden=case.hidden,
                         num_topk=case.num_topk)
    out = buffer.dispatch(x, idx, w, num_experts=case.num_experts, expert_alignment=alignment, do_expand=True)
    recv_x, recv_idx, recv_w, handle, event = out
    want = reference_dispatch(case, rank, inputs)
    rows, slots = expand(case, want, rank, alignment)
    real = rows >= 0
    want_x = torch.zeros(rows.numel(), case.hidden, dtype=torch.bfloat16)
    want_x[real] = want["x"][rows[real]]
    want_w = torch.zeros(rows.numel())
    want_w[real] = want["topk_weights"][rows[real], slots[real]]
    problems = []
    if recv_idx is not None:
        problems.append("recv_topk_idx should be None (upstream returns None)")
    for name, a, b in (("recv_x", recv_x, want_x), ("recv_topk_weights", recv_w, want_w)):
        if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(bits(a), bits(b)):
            problems.append(f"{name} differs: {a.dtype} {tuple(a.shape)} vs {b.dtype} {tuple(b.shape)}")
    per_expert = [int((want["topk_idx"] == e).sum()) for e in range(case.num_experts // num_ranks)]
    if handle.num_recv_tokens_per_expert_list != [n + (-n % alignment) for n in per_expert]:
        problems.append(f"num_recv_tokens_per_expert_list {handle.num_recv_tokens_per_expert_list} vs {per_expert}")
    # combine: each expanded row carries its slot's weighted expert output; padding rows carry junk
    y3 = weighted(case, expert_output(case, want["src"]), want["topk_weights"], want["topk_idx"])
    y = torch.full((rows.numel(), case.hidden), 7.0, dtype=torch.bfloat16)
    y[real] = y3[rows[real], slots[real]]
    combined_x, combined_w, _ = buffer.combine(y, handle)
    sources = torch.arange(case.tokens[rank]) + rank * case.num_max_tokens_per_rank
    source_y = weighted(case, expert_output(case, sources), w, idx)
    expected = reference_combine(case, source_y, idx)
    if not np.array_equal(bits(combined_x), bits(expected)):
        problems.append(f"combined_x differs (max |diff| {(combined_x.float() - expected.float()).abs().max().item()})")
    event.current_stream_wait()
    return {"problems": problems, "expanded": int(rows.numel()), "per_expert": handle.num_recv_tokens_per_expert_list,
            "num_bytes": buffer.num_bytes}


def refusal(fn) -> str:
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - the test compares type and text
        return f"{type(error).__name__}: {str(error).splitlines()[0]}"
    return "no error"


def hostile(rank: int, num_ranks: int, case: Case) -> dict:
    ep = deep_ep()
    x, idx, w = make_inputs(case, rank)
    kw = dict(num_max_tokens_per_rank=case.num_max_tokens_per_rank, hidden=case.hidden, num_topk=case.num_topk)
    got = {
        "multiple_reduction": refusal(lambda: ep.EPBuffer(None, allow_multiple_reduction=False, **kw)),
        "misaligned": refusal(lambda: ep.EPBuffer(None, num_bytes=(1 << 21) + 1, **kw)),
        "qps": refusal(lambda: ep.EPBuffer(None, num_allocated_qps=3, **kw)),
        "timeout": refusal(lambda: ep.EPBuffer(None, num_cpu_timeout_secs=0, **kw)),
    }
    buffer = ep.EPBuffer(None, **kw)
    narrow = ep.EPBuffer(None, num_max_tokens_per_rank=case.num_max_tokens_per_rank, hidden=64, num_topk=case.num_topk)
    got["hidden_64"] = refusal(lambda: narrow.dispatch(x[:, :64].contiguous(), idx, w, num_experts=case.num_experts,
                                                       do_expand=True))
    got["no_expand"] = refusal(lambda: buffer.dispatch(x, idx, w, num_experts=case.num_experts))
    got["experts"] = refusal(lambda: buffer.dispatch(x, idx, w, num_experts=case.num_experts + 1, do_expand=True))
    got["int32_idx"] = refusal(lambda: buffer.dispatch(x, idx.int(), w, num_experts=case.num_experts, do_expand=True))
    got["fp16"] = refusal(lambda: buffer.dispatch(x.half(), idx, w, num_experts=case.num_experts, do_expand=True))
    big = torch.zeros(case.num_max_tokens_per_rank + 1, case.hidden, dtype=torch.bfloat16)
    big_idx = torch.zeros(big.size(0), case.num_topk, dtype=torch.int64)
    got["too_many_tokens"] = refusal(lambda: buffer.dispatch(big, big_idx, None, num_experts=case.num_experts,
                                                             do_expand=True))
    # the capacity boundary: one 2 MiB step below the dispatch region is refused, the hint is accepted
    small = ep.EPBuffer(None, num_bytes=0, **kw)
    got["small_buffer"] = refusal(lambda: small.dispatch(x, idx, w, num_experts=case.num_experts, do_expand=True))
    # a rank-local refusal in the runtime reaches every rank: rank 0 sends an out-of-range expert id
    bad = idx.clone()
    if rank == 0 and bad.numel():
        bad[0, 0] = case.num_experts
    got["peer"] = refusal(lambda: buffer.dispatch(x, bad, w, num_experts=case.num_experts, do_expand=True))
    got["ok_after"] = buffer.dispatch(x, idx, w, num_experts=case.num_experts, do_expand=True)[0].shape[1]
    buffer.destroy()
    got["destroyed"] = refusal(lambda: buffer.dispatch(x, idx, w, num_experts=case.num_experts, do_expand=True))
    return got


def boundary(rank: int, num_ranks: int, case: Case) -> dict:
    """The largest 2 MiB multiple below ``get_dispatch_buffer_size`` is refused; the smallest at or above it
    dispatches (when the runtime's regions fit it: else the hint)."""
    from epbuf.backends.ascend import NUM_ALLOCATION_ALIGNMENT_BYTES as A, calculate_buffer_size, \
        get_dispatch_buffer_size

    ep = deep_ep()
    x, idx, w = make_inputs(case, rank)
    kw = dict(num_max_tokens_per_rank=case.num_max_tokens_per_rank, hidden=case.hidden, num_topk=case.num_topk)
    need = get_dispatch_buffer_size(case.num_max_tokens_per_rank, case.hidden, 0, case.num_topk, 2, num_ranks)
    below = ep.EPBuffer(None, num_bytes=(need - 1) // A * A, **kw)
    at = ep.EPBuffer(None, num_bytes=-(-need // A) * A, **kw)
    return {"below": refusal(lambda: below.dispatch(x, idx, w, num_experts=case.num_experts, do_expand=True)),
            "at": refusal(lambda: at.dispatch(x, idx, w, num_experts=case.num_experts, do_expand=True)).replace(
                "no error", "ok"),
            "hint": ep.EPBuffer.get_buffer_size_hint(None, case.num_max_tokens_per_rank, case.hidden, case.num_topk),
            "hint_backend": calculate_buffer_size(num_ranks, case.num_max_tokens_per_rank, case.hidden,
                                                  case.num_topk, False)}
