"""What each spawned rank runs in tests/test_runtime_distributed.py (importable by the
spawned processes: the test puts this folder on ``sys.path``)."""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from _moe_reference import (bits, expert_output, local_partial, make_inputs, reference_combine,
                            reference_dispatch, weighted)


def check_case(case, rank: int, run_dispatch, run_combine) -> list[str]:
    """Dispatch and combine one case through ``run_*`` (a Buffer's or a Simulator rank's) and
    compare every output with the dense reference; the mismatches, as text."""
    inputs = [make_inputs(case, r) for r in range(case.num_ranks)]
    x, idx, w = inputs[rank]
    got = run_dispatch(x, idx, w)
    want = reference_dispatch(case, rank, inputs)
    problems = []
    recv_x, recv_sf = got.recv_x if case.fp8 else (got.recv_x, None)
    checks = [("recv_x", recv_x, want["x"]), ("recv_topk_idx", got.recv_topk_idx, want["topk_idx"]),
              ("recv_src_token_global_idx", got.recv_src_token_global_idx, want["src"]),
              ("num_recv_tokens_per_rank", got.num_recv_tokens_per_rank, want["counts"])]
    if case.fp8:
        checks.append(("recv_sf", recv_sf, want["sf"]))
    if case.weights:
        checks.append(("recv_topk_weights", got.recv_topk_weights, want["topk_weights"]))
    elif got.recv_topk_weights is not None:
        problems.append("recv_topk_weights should be None")
    for name, a, b in checks:
        if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape) or not np.array_equal(bits(a), bits(b)):
            problems.append(f"{case.name} rank {rank}: {name} differs ({a.dtype} {tuple(a.shape)} vs "
                            f"{b.dtype} {tuple(b.shape)})")
    if problems:
        return problems
    y = expert_output(case, got.recv_src_token_global_idx)
    if case.y_2d:
        y = local_partial(case, y, got.recv_topk_weights, got.recv_topk_idx)
    combined = run_combine(y, got.handle, got.recv_topk_weights)
    source_y = weighted(case, expert_output(case, torch.arange(case.tokens[rank]) + rank * case.num_max_tokens_per_rank),
                        w, idx)
    expected = reference_combine(case, source_y, idx)
    if not np.array_equal(bits(combined.combined_x), bits(expected)):
        diff = (combined.combined_x.float() - expected.float()).abs().max().item()
        problems.append(f"{case.name} rank {rank}: combined_x differs (max |diff| {diff})")
    if case.weights:
        # every destination rank returns the token's full weights: they add up once per destination
        count = torch.zeros(case.tokens[rank])
        per_rank = case.num_experts // case.num_ranks
        for r in range(case.num_ranks):
            count += ((idx >= r * per_rank) & (idx < (r + 1) * per_rank)).any(dim=1).float()
        expected_w = torch.zeros(case.tokens[rank], case.num_topk)
        for k in range(int(count.max().item()) if len(count) else 0):
            expected_w += torch.where((count > k).unsqueeze(1), w, torch.zeros_like(w))
        if not torch.equal(combined.combined_topk_weights, expected_w):
            problems.append(f"{case.name} rank {rank}: combined_topk_weights differ")
    return problems


def run_cases(rank: int, num_ranks: int, cases) -> list[str]:
    """Every case through one torch.distributed Buffer per case."""
    from epbuf.runtime import Buffer

    problems = []
    for case in cases:
        assert case.num_ranks == num_ranks
        buffer = Buffer(None, case.plan(), timeout=30)
        assert buffer.num_bytes == buffer.layout.num_bytes
        problems += check_case(case, rank, buffer.dispatch, buffer.combine)
    return problems


def refuse_then_die(rank: int, num_ranks: int, case) -> dict:
    """Rank 1 gives bad expert ids (both ranks must raise, nothing exchanged), then rank 1
    dies and rank 0's next dispatch must raise, not hang."""
    import epbuf
    from epbuf.runtime import Buffer, PeerError

    buffer = Buffer(None, case.plan(), timeout=20)
    x, idx, w = make_inputs(case, rank)
    if rank == 1:
        idx = idx.clone()
        idx[0, 0] = case.num_experts  # out of range
    outcome = {}
    try:
        buffer.dispatch(x, idx, w)
        outcome["refusal"] = "no error"
    except epbuf.InvalidArgumentError as error:
        outcome["refusal"] = f"InvalidArgumentError: {error}"
    except PeerError as error:
        outcome["refusal"] = f"PeerError: {error}"
    if rank == 1:
        os._exit(3)
    x, idx, w = make_inputs(case, rank)
    start = time.monotonic()
    try:
        buffer.dispatch(x, idx, w)
        outcome["dead peer"] = "no error"
    except PeerError as error:
        outcome["dead peer"] = f"PeerError: {error}"
    outcome["dead peer seconds"] = time.monotonic() - start
    return outcome


def time_out(rank: int, num_ranks: int, case) -> dict:
    """Rank 1 does not call dispatch: rank 0 must raise after its 1.5 s timeout."""
    from epbuf.runtime import Buffer, PeerError

    buffer = Buffer(None, case.plan(), timeout=1.5)
    if rank == 1:
        time.sleep(4)
        return {}
    x, idx, w = make_inputs(case, rank)
    start = time.monotonic()
    outcome = {}
    try:
        buffer.dispatch(x, idx, w)
        outcome["timeout"] = "no error"
    except PeerError as error:
        outcome["timeout"] = f"PeerError: {error}"
    outcome["seconds"] = time.monotonic() - start
    try:
        buffer.dispatch(x, idx, w)
    except PeerError as error:
        outcome["after"] = f"PeerError: {error}"
    return outcome
