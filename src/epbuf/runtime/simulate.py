"""N virtual ranks in one process: dispatch and combine through the same pack, place and
unpack steps as :class:`~epbuf.runtime.Buffer`, with the exchange done in memory.

For teaching (inspect every rank's buffer after each step: slot ``(r, t)`` of rank
``q``'s dispatch region holds exactly what DeepEP-Ascend's receive buffer would) and for
tests. Works on numpy arrays (``epbuf[codec]``; BF16 as uint16 bit patterns, FP8 as
uint8 codes) or torch tensors (``epbuf[torch]``).

>>> import numpy as np, epbuf
>>> from epbuf.runtime import Simulator
>>> plan = epbuf.Plan(hidden=128, num_topk=2, num_experts=4, num_ranks=2, num_max_tokens_per_rank=3,
...                   use_fp8_dispatch=False)
>>> sim = Simulator(plan)
>>> x = [np.full((2, 128), 0x3F80, np.uint16), np.full((1, 128), 0x4000, np.uint16)]   # 1.0 and 2.0 in BF16
>>> idx = [np.array([[0, 3], [1, -1]]), np.array([[2, 3]])]
>>> out = sim.dispatch(x, idx)
>>> out[1].recv_topk_idx.tolist(), out[1].recv_src_token_global_idx.tolist()
([[-1, 1], [0, 1]], [0, 3])
>>> ys = [np.ascontiguousarray(np.broadcast_to(r.recv_x[:, None, :], (len(r.recv_x), 2, 128))) for r in out]
>>> [c.combined_x[:, 0].tolist() for c in sim.combine(ys, [r.handle for r in out])]
[[16384, 16256], [16512]]
"""

from __future__ import annotations

from ..codec._arrays import numpy_ops, torch_ops
from ..errors import ArgumentProblem, InvalidArgumentError
from ._core import CombineResult, DispatchResult, RankState, RuntimeLayout

__all__ = ["Simulator"]


def _per_rank(error: InvalidArgumentError, rank: int) -> InvalidArgumentError:
    return InvalidArgumentError([ArgumentProblem(f"{p.argument} (rank {rank})", p.value, p.allowed)
                                 for p in error.problems])


class Simulator:
    """``num_ranks`` virtual ranks, each with its own buffer of the backend's hint size.

    Args:
        plan: the :class:`~epbuf.Plan` (ranks, tokens, hidden, top-k, experts, FP8 or not).
        backend: whose record layout and buffer size to use (regions need a ``(rows, slots)``
            shape: ``"ascend"``).
        array: ``"numpy"`` or ``"torch"`` — what the buffers (and so the inputs) are.
        device: torch device of the buffers (``array="torch"`` only).

    Attributes:
        buffers: one uint8 buffer per rank, ``layout.num_bytes`` long.
        layout: the :class:`~epbuf.runtime.RuntimeLayout` read from the report.
    """

    def __init__(self, plan, backend: str = "ascend", *, array: str = "numpy", device=None) -> None:
        if array not in ("numpy", "torch"):
            raise InvalidArgumentError([ArgumentProblem("array", array, "allowed 'numpy' or 'torch'")])
        self.layout = RuntimeLayout.from_plan(plan, backend)
        ops = numpy_ops() if array == "numpy" else torch_ops()
        if array == "torch":
            self.buffers = [ops.torch.zeros(self.layout.num_bytes, dtype=ops.uint8, device=device)
                            for _ in range(self.layout.num_ranks)]
        else:
            self.buffers = [ops.zeros(self.layout.num_bytes, ops.uint8) for _ in range(self.layout.num_ranks)]
        self.ops = ops
        self.ranks = [RankState(self.layout, r, b) for r, b in enumerate(self.buffers)]

    def _check_lists(self, **lists) -> None:
        n = self.layout.num_ranks
        for name, value in lists.items():
            if value is not None and (not isinstance(value, (list, tuple)) or len(value) != n):
                raise InvalidArgumentError([ArgumentProblem(name, type(value).__name__,
                                                            f"must be a list with one entry per rank ({n})")])

    def _prepare(self, prepare, pack_peers, *per_rank: list) -> list:
        """``prepare(state, *arguments of its rank)`` on every rank, then ``pack_peers`` of its
        records; an input problem is raised naming its rank."""
        prepared = []
        for r, state in enumerate(self.ranks):
            try:
                prepared.append(prepare(state, *(arguments[r] for arguments in per_rank)))
                pack_peers(state, prepared[-1])
            except InvalidArgumentError as error:
                raise _per_rank(error, r) from None
        return prepared

    def _exchange(self, sends, counts, stride: int):
        """What each rank receives: the chunks every rank sent it, in rank order."""
        np = numpy_ops().np
        counts = np.asarray(counts, dtype=np.int64)  # [source, destination]
        starts = np.concatenate([np.zeros((counts.shape[0], 1), dtype=np.int64), np.cumsum(counts, axis=1)], axis=1)
        received = []
        for q in range(counts.shape[1]):
            chunks = [sends[s][int(starts[s, q]) * stride:int(starts[s, q + 1]) * stride] for s in range(len(sends))]
            received.append(self.ops.concat(chunks, like=self.buffers[q]))
        return received

    def dispatch(self, x: list, topk_idx: list, topk_weights: list | None = None) -> list[DispatchResult]:
        """Every rank's ``refs.dispatch`` results (see :class:`~epbuf.runtime.Buffer.dispatch`).

        Args:
            x: per rank, ``[num_tokens, hidden]`` (or ``(x, sf)`` for FP8).
            topk_idx: per rank, ``[num_tokens, num_topk]`` global expert ids, -1 for none.
            topk_weights: per rank, fp32 ``[num_tokens, num_topk]``, or ``None``.
        """
        self._check_lists(x=x, topk_idx=topk_idx, topk_weights=topk_weights)
        weights = topk_weights or [None] * self.layout.num_ranks
        prepared = self._prepare(RankState.prepare_dispatch, RankState.pack_dispatch_peers, x, topk_idx, weights)
        rows = [state.count_rows(p.send_counts, p.fingerprint) for state, p in zip(self.ranks, prepared)]
        stride = self.layout.dispatch.record.num_bytes
        staging = self._exchange([p.send for p in prepared],
                                 [state.peer_counts(p.send_counts, p.bypass_self)
                                  for state, p in zip(self.ranks, prepared)], stride)
        results = []
        for q, state in enumerate(self.ranks):
            received = numpy_ops().np.stack([rows[s][q] for s in range(len(rows))])
            recv_counts = state.check_peers(received, prepared[q].fingerprint, "dispatch")
            landing = state.dispatch_landing(recv_counts, prepared[q].bypass_self)
            landing[...] = staging[q]
            results.append(state.finish_dispatch(prepared[q], recv_counts))
        return results

    def combine(self, y: list, handles: list, topk_weights: list | None = None) -> list[CombineResult]:
        """Every rank's combined tokens (see :class:`~epbuf.runtime.Buffer.combine`)."""
        self._check_lists(y=y, handles=handles, topk_weights=topk_weights)
        weights = topk_weights or [None] * self.layout.num_ranks
        prepared = self._prepare(RankState.prepare_combine, RankState.pack_combine_peers, y, handles, weights)
        stride = self.layout.combine.record.num_bytes
        staging = self._exchange([p.send for p in prepared],
                                 [state.peer_counts(h.recv_counts, p.bypass_self)
                                  for state, h, p in zip(self.ranks, handles, prepared)], stride)
        results = []
        for q, state in enumerate(self.ranks):
            rows = numpy_ops().np.stack([self.ranks[s].count_rows(handles[s].recv_counts, prepared[s].fingerprint)[q]
                                         for s in range(len(handles))])
            state.check_peers(rows, prepared[q].fingerprint, "combine", expected=handles[q].send_counts)
            results.append(state.finish_combine(prepared[q], handles[q], staging[q]))
        return results
