"""A dense, single-process reference written like DeepEP's ``deep_ep/utils/refs.py @dd758ca``
(per-destination masking, a loop over destination ranks), the deterministic inputs the
runtime tests feed every rank, and what each spawned rank runs in
tests/test_runtime_distributed.py (importable by the spawned processes: the tests put this
folder on ``sys.path``). The reference is independent of ``epbuf.runtime``: nothing in it
packs records or uses the buffer.
"""

from __future__ import annotations

import math
import os
import time

import pytest

np = pytest.importorskip("numpy")  # the test extra installs both; a plain checkout skips, not errors
torch = pytest.importorskip("torch")

from epbuf.codec.fp8 import quantize_fp8  # noqa: E402


class Case:
    """One dispatch/combine configuration: shapes, per-rank token counts, dtype, weights, y form."""

    def __init__(self, name, hidden, num_topk, num_experts, tokens, num_max_tokens_per_rank, fp8, weights=True,
                 minus_one=0.2, y_2d=False, seed=0):
        self.name, self.hidden, self.num_topk, self.num_experts = name, hidden, num_topk, num_experts
        self.tokens, self.num_max_tokens_per_rank, self.fp8 = list(tokens), num_max_tokens_per_rank, fp8
        self.weights, self.minus_one, self.y_2d, self.seed = weights, minus_one, y_2d, seed

    @property
    def num_ranks(self) -> int:
        return len(self.tokens)

    def plan(self):
        import epbuf

        return epbuf.Plan(hidden=self.hidden, num_topk=self.num_topk, num_experts=self.num_experts,
                          num_ranks=self.num_ranks, num_max_tokens_per_rank=self.num_max_tokens_per_rank,
                          use_fp8_dispatch=self.fp8)

    def __repr__(self) -> str:
        return f"Case({self.name})"


def make_inputs(case: Case, rank: int):
    """``(x, topk_idx, topk_weights)`` of ``rank``: x is BF16, or ``(fp8 codes, fp32 scales)``
    from DeepEP's per-128 recipe; top-k experts distinct per token, some slots -1."""
    g = torch.Generator().manual_seed(case.seed * 1009 + rank)
    n, hidden, topk = case.tokens[rank], case.hidden, case.num_topk
    values = torch.randn(n, hidden, generator=g)
    if case.fp8:
        codes, scales = quantize_fp8(values.numpy())
        x = (torch.from_numpy(codes).view(torch.float8_e4m3fn), torch.from_numpy(scales))
    else:
        x = values.to(torch.bfloat16)
    idx = torch.rand(n, case.num_experts, generator=g).argsort(dim=1)[:, :topk].to(torch.int64)
    idx = idx.masked_fill(torch.rand(n, topk, generator=g) < case.minus_one, -1)
    weights = torch.rand(n, topk, generator=g) if case.weights else None
    return x, idx, weights


def reference_dispatch(case: Case, rank: int, inputs: list):
    """What ``rank`` receives, computed like ``refs.dispatch``: for each source rank, the
    tokens with an expert on ``rank`` (mask, nonzero), their top-k indices masked to
    ``rank``'s experts and made local, all weights, ``src_token_global_idx``."""
    per_rank = case.num_experts // case.num_ranks
    start, end = rank * per_rank, (rank + 1) * per_rank
    xs, sfs, idxs, ws, srcs, counts = [], [], [], [], [], []
    for source, (x, idx, w) in enumerate(inputs):
        x, sf = x if isinstance(x, tuple) else (x, None)
        mask = ((start <= idx) & (idx < end)).any(dim=1)
        indices = mask.nonzero(as_tuple=True)[0]
        counts.append(int(indices.numel()))
        xs.append(x[indices])
        sfs.append(sf[indices] if sf is not None else None)
        sent = idx[indices]
        ok = (start <= sent) & (sent < end)
        idxs.append(torch.where(ok, sent - start, torch.full_like(sent, -1)))
        ws.append(w[indices] if w is not None else None)
        srcs.append((indices + source * case.num_max_tokens_per_rank).to(torch.int32))
    return {
        "x": torch.cat(xs), "sf": torch.cat(sfs) if case.fp8 else None, "topk_idx": torch.cat(idxs),
        "topk_weights": torch.cat(ws) if case.weights else None, "src": torch.cat(srcs),
        "counts": torch.tensor(counts, dtype=torch.int32),
    }


def expert_output(case: Case, src_token_global_idx: torch.Tensor) -> torch.Tensor:
    """``[n, num_topk, hidden]`` BF16 outputs of each token's top-k slots, generated from the
    source index like ``refs.generate_pre_combine_data`` (global seed 0)."""
    topk, hidden = case.num_topk, case.hidden
    seeds = src_token_global_idx.to(torch.int64).unsqueeze(1) * topk + torch.arange(topk).unsqueeze(0)
    max_seed = case.num_ranks * case.num_max_tokens_per_rank * topk
    phase = (((seeds * 131071 % max_seed).float() + 1) / max_seed).unsqueeze(-1)
    return torch.sin(phase * torch.arange(1, hidden + 1, dtype=torch.float32) + math.sin(0.0)).to(torch.bfloat16)


def weighted(case: Case, y: torch.Tensor, weights, topk_idx: torch.Tensor) -> torch.Tensor:
    """Each slot's output times its weight, in BF16; slots without an expert are 0."""
    if weights is not None:
        y = (weights.unsqueeze(-1) * y.float()).to(torch.bfloat16)
    return torch.where((topk_idx >= 0).unsqueeze(-1), y, torch.zeros_like(y))


def reference_combine(case: Case, y: torch.Tensor, topk_idx: torch.Tensor) -> torch.Tensor:
    """``refs.combine(y, topk_idx, 1, num_ranks, num_experts, None, reduce_in_local=True,
    reduce_in_scaleup=False)``: reduce each rank's slots (its sum at its rightmost slot),
    then accumulate the slots in order in fp32."""
    num_tokens, topk, hidden = y.shape
    group = topk_idx // (case.num_experts // case.num_ranks)
    group, order = torch.sort(group, dim=-1, stable=True)
    flat = (order + torch.arange(num_tokens).unsqueeze(-1) * topk).flatten()
    data = y.reshape(-1, hidden)[flat].reshape(num_tokens, topk, hidden).clone()
    acc = torch.zeros(num_tokens, hidden)
    for i in range(topk):
        brk = torch.ones(num_tokens, dtype=torch.bool) if i == topk - 1 else group[:, i] != group[:, i + 1]
        acc += data[:, i].float()
        rows = torch.where(brk)[0]
        data[rows, i] = acc[rows].to(data.dtype)
        acc[rows] = 0.0
        data[torch.where(~brk)[0], i] = 0.0
    reduced = torch.empty_like(data)
    reduced.reshape(-1, hidden)[flat] = data.reshape(-1, hidden)
    result = torch.zeros(num_tokens, hidden)
    for i in range(topk):
        result += reduced[:, i].float()
    return result.to(torch.bfloat16)


def local_partial(case: Case, y: torch.Tensor, weights, recv_topk_idx: torch.Tensor) -> torch.Tensor:
    """What a rank sends back per received token when it reduces its own slots first (the 2-D
    ``y`` of DeepEP's combine): fp32 sum in top-k order of its weighted slots, to BF16."""
    contributions = weighted(case, y, weights, recv_topk_idx).float()
    acc = torch.zeros(y.shape[0], y.shape[2])
    for j in range(y.shape[1]):
        acc += contributions[:, j]
    return acc.to(torch.bfloat16)


def bits(t: torch.Tensor) -> np.ndarray:
    """The bytes of ``t``, for bit-exact comparison of any dtype."""
    return t.contiguous().view(torch.uint8).numpy() if t.element_size() == 1 else \
        t.contiguous().view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]).numpy()


# --- what the ranks run ----------------------------------------------------------------------
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


def run_cases(rank: int, num_ranks: int, cases, self_bypass_bytes=(None,)) -> list[str]:
    """Every case through one torch.distributed Buffer per case, once per entry of
    ``self_bypass_bytes`` (``RankState.SELF_BYPASS_BYTES``: 0 = a rank's records to itself
    always skip the exchange, a huge value = they always travel, None = the default)."""
    from epbuf.runtime import Buffer
    from epbuf.runtime._core import RankState

    default = RankState.SELF_BYPASS_BYTES
    problems = []
    for threshold in self_bypass_bytes:
        RankState.SELF_BYPASS_BYTES = default if threshold is None else threshold
        for case in cases:
            assert case.num_ranks == num_ranks
            buffer = Buffer(None, case.plan(), timeout=30)
            assert buffer.num_bytes == buffer.layout.num_bytes
            problems += [f"{p} (self bypass from {threshold} B)"
                         for p in check_case(case, rank, buffer.dispatch, buffer.combine)]
    RankState.SELF_BYPASS_BYTES = default
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


def time_out(rank: int, num_ranks: int, case, done_file: str) -> dict:
    """Rank 1 does not call dispatch (it waits, alive, until rank 0 is done): rank 0 must
    raise after its 1.5 s timeout."""
    from epbuf.runtime import Buffer, PeerError

    buffer = Buffer(None, case.plan(), timeout=1.5)
    if rank == 1:
        deadline = time.monotonic() + 30
        while not os.path.exists(done_file) and time.monotonic() < deadline:
            time.sleep(0.05)
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
    open(done_file, "w").close()
    return outcome


def hang_survivor(rank: int, store: str, case, report: str) -> None:
    """A process of a 2-rank gloo group whose process-group timeout is 30 s: rank 1 joins, then
    hangs (never calls dispatch, never exits by itself); rank 0's dispatch times out after 1.5 s
    and it writes the time of its PeerError to ``report``, then returns, so the process exits."""
    from datetime import timedelta

    import torch.distributed as dist

    from epbuf.runtime import Buffer, PeerError

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2,
                            timeout=timedelta(seconds=30))
    buffer = Buffer(None, case.plan(), timeout=1.5)
    if rank == 1:
        time.sleep(120)
        return
    x, idx, w = make_inputs(case, rank)
    try:
        buffer.dispatch(x, idx, w)
        message = "no error"
    except PeerError as error:
        message = f"PeerError: {error}"
    with open(report, "w") as f:
        f.write(f"{time.time()}\n{message}\n")
