"""``Buffer``: dispatch and combine on a ``torch.distributed`` process group.

Each rank allocates one uint8 tensor of the backend's hint size. Per direction the data
moves in two collectives, each bounded by ``timeout``:

1. one ``all_to_all_single`` of ``[count, layout fingerprint]`` per peer (a rank whose
   input is invalid sends ``-1`` so every peer raises instead of waiting), while the rank
   packs its records (:class:`epbuf.codec.RecordSlots` with the backend's record) into a
   workspace next to the buffer;
2. one ``all_to_all_single`` of the packed records, which the receiver places at their
   slots of the buffer — slot ``(source rank, t)`` for dispatch, ``(k, token)`` for
   combine — and reads back.

``all_to_all_single`` delivers each peer's records one after the other: dispatch records
land in the dispatch region from the first exchanged row on and each later peer's run moves
to its row (one copy per peer, last peer first; none with one peer); combine records land in
the workspace and one vectorised row scatter puts them at their slots. A rank's records to
itself skip the exchange when they are large (``RankState.SELF_BYPASS_BYTES``): it writes
them straight into its own slots while the peers' records travel. After that the buffer
holds what DeepEP-Ascend's kernels leave in it. A collective that fails or outlasts
``timeout`` (a dead or absent peer) raises :class:`~epbuf.runtime.PeerError` and leaves the
Buffer unusable (the process group is in an unknown state); nothing partial is returned. The
message says whether a peer left (the collective failed before the timeout) or hangs (it timed
out). The collectives run on a group of the same ranks created with ``timeout`` as its own
(one per ranks and timeout, shared by the Buffers that match, destroyed at exit), so a
collective a hung peer never joins ends in the backend too and the process can exit right
after the error, not after the process group's timeout.

Example (every rank of a 2-rank gloo group)::

    import torch, torch.distributed as dist, epbuf
    from epbuf.runtime import Buffer

    plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=64, num_ranks=2,
                      num_max_tokens_per_rank=128, use_fp8_dispatch=False)
    buffer = Buffer(dist.group.WORLD, plan)                  # buffer.num_bytes == the hint
    recv = buffer.dispatch(x, topk_idx, topk_weights)         # refs.dispatch's results + handle
    out = buffer.combine(expert_out, recv.handle)             # [num_tokens, hidden] BF16
"""

from __future__ import annotations

from ..codec._arrays import torch_ops
from ..errors import ArgumentProblem, EpbufError, InvalidArgumentError
from ._core import CombineResult, DispatchResult, Handle, PeerError, RankState, RuntimeLayout
from .testing import check_seconds

__all__ = ["Buffer"]


#: (ranks, backend, timeout) -> the group of those ranks with that timeout: Buffers of the same
#: ranks and timeout share one (every rank builds its Buffers in the same order, as it must).
_TIMEOUT_GROUPS: dict = {}


def _timeout_group(dist, group, backend: str, timeout):
    """The group of ``group``'s ranks whose own timeout is ``timeout`` (made once, then shared),
    destroyed at exit by :func:`_release`."""
    key = (tuple(dist.get_process_group_ranks(group)), backend, timeout)
    made = _TIMEOUT_GROUPS.get(key)
    if made is None or made not in dist.distributed_c10d._world.pg_map:  # none yet, or destroyed since
        import atexit

        made = dist.new_group(list(key[0]), timeout=timeout, backend=backend, use_local_synchronization=True)
        _TIMEOUT_GROUPS[key] = made
        atexit.register(_release, dist, made)  # before the interpreter tears torch down
    return made


def _release(dist, group) -> None:
    """Destroy a Buffer's own group at exit (unless the caller destroyed it already): left to the
    interpreter's teardown, a group whose peer hung could abort the process (SIGABRT) there."""
    for key in [k for k, made in _TIMEOUT_GROUPS.items() if made is group]:
        del _TIMEOUT_GROUPS[key]  # the last reference goes now, not in the interpreter's teardown
    try:
        dist.destroy_process_group(group)
    except Exception:  # noqa: BLE001 - destroyed already, or torch.distributed torn down
        pass


class Buffer:
    """A communication buffer of the backend's hint size and DeepEP-style dispatch/combine.

    Args:
        group: a ``torch.distributed`` process group (``None``: the default group) of
            ``plan.num_ranks`` ranks; ``init_process_group`` must have run.
        plan: the :class:`~epbuf.Plan`; its ``num_max_tokens_per_rank``, ``hidden``,
            ``num_topk``, experts and ``use_fp8_dispatch`` fix the record layout.
        backend: whose layout and size hint to use; its report must give the dispatch and
            combine regions a ``(rows, slots)`` shape (``"ascend"``).
        num_bytes: the buffer size (default: the hint); smaller than the layout needs is an error.
        timeout: seconds each collective may take before :class:`PeerError` (0 < timeout <= 86,400).
        device: where the buffer lives (default: CPU for gloo, the current CUDA device otherwise).

    Raises:
        EpbufError: torch.distributed not initialised, a group of another size, a backend
            without region shapes, records whose fields overlap, a buffer too small.
    """

    def __init__(self, group, plan, backend: str = "ascend", *, num_bytes: int | None = None,
                 timeout: float = 60.0, device=None) -> None:
        ops = torch_ops()
        torch = ops.torch
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise EpbufError("Buffer needs torch.distributed.init_process_group(...) first")
        self._dist = dist
        self.group = group if group is not None else dist.group.WORLD
        self.rank = dist.get_rank(self.group)
        world = dist.get_world_size(self.group)
        self.layout = RuntimeLayout.from_plan(plan, backend)
        if world != self.layout.num_ranks:
            raise InvalidArgumentError([ArgumentProblem("plan.num_ranks", plan.num_ranks,
                                                        f"must equal the process group's size ({world})")])
        needed = max(r.offset + r.num_bytes for r in (self.layout.dispatch, self.layout.combine))
        num_bytes = self.layout.num_bytes if num_bytes is None else num_bytes
        if isinstance(num_bytes, bool) or not isinstance(num_bytes, int) or num_bytes < needed:
            raise InvalidArgumentError([ArgumentProblem(
                "num_bytes", num_bytes, f"allowed >= {needed:,} (the dispatch and combine regions of the "
                                        f"{backend} layout; its hint is {self.layout.num_bytes:,})")])
        self.timeout = check_seconds("timeout", timeout)
        from datetime import timedelta

        self._timeout_delta = timedelta(seconds=self.timeout)
        # The collectives run on a group of the same ranks whose own timeout is ``timeout``: a
        # collective a hung peer never joins then ends in the backend's thread too, so the process
        # can exit right after the PeerError instead of waiting out the process group's timeout
        # (its destructor joins that thread). Only the members create it (local synchronization).
        group_backend = dist.get_backend(self.group)
        self._user_group = self.group
        self.group = _timeout_group(dist, self.group, group_backend, self._timeout_delta)
        if device is None:
            gloo = group_backend == "gloo"
            device = "cpu" if gloo else torch.device("cuda", torch.cuda.current_device())
        self.buffer = torch.zeros(num_bytes, dtype=torch.uint8, device=device)
        self._state = RankState(self.layout, self.rank, self.buffer)
        self._broken: str | None = None
        self._torch = torch

    @property
    def num_bytes(self) -> int:
        """Bytes this rank reserves."""
        return int(self.buffer.numel())

    @property
    def workspace_num_bytes(self) -> int:
        """Scratch bytes this rank holds besides the buffer (grown to the largest call so far:
        packed send records, received combine records, the reduction's fp32 block)."""
        return self._state.workspace_num_bytes

    # --- collectives ---------------------------------------------------------------------
    def _wait(self, work, what: str) -> None:
        import time

        start = time.monotonic()
        try:
            work.wait(timeout=self._timeout_delta)
        except Exception as error:  # gloo/NCCL raise RuntimeError subclasses: a dead peer, a timeout
            self._broken = f"{what} failed: {error}"
            seconds = time.monotonic() - start
            try:  # let the backend's own wait (the group's timeout is ours) end too, so that no
                work.wait()  # collective is left running when the process exits after this error
            except Exception:  # noqa: BLE001 - it fails as the first wait did
                pass
            why = str(error).splitlines()[0][:300] if str(error).strip() else type(error).__name__
            if seconds < 0.9 * self.timeout:  # it failed before the timeout: a peer closed its connection
                raise PeerError(f"{what} failed on rank {self.rank} after {seconds:.1f} s, before the {self.timeout:g} s "
                                f"timeout: a peer died or left the group: {why}") from None
            raise PeerError(f"{what} did not complete within {self.timeout:g} s on rank {self.rank} (a peer hangs "
                            f"or does not call it): {why}") from None

    def _exchange_rows(self, rows, what: str, meanwhile=None):
        """The count exchange: every rank's ``[count, fingerprint]`` row for this rank.
        ``meanwhile()`` (packing the records) runs while the rows travel."""
        send = self._torch.from_numpy(rows).to(self.buffer.device)
        recv = self._torch.empty_like(send)
        work = self._dist.all_to_all_single(recv, send, group=self.group, async_op=True)
        try:
            if meanwhile is not None:
                meanwhile()
        finally:
            self._wait(work, f"{what}: the count exchange")
        return recv.cpu().numpy()

    def _start_records(self, send, send_counts, recv_counts, stride: int, recv):
        """Start the ``all_to_all_single`` of packed records (``async``): ``send_counts[q]``
        records to rank ``q``, ``recv_counts[q]`` from it, one peer after the other in ``recv``."""
        return self._dist.all_to_all_single(recv, send, [int(c) * stride for c in recv_counts],
                                            [int(c) * stride for c in send_counts], group=self.group, async_op=True)

    def _usable(self) -> None:
        if self._broken:
            raise PeerError(f"this Buffer is unusable since an earlier collective failed ({self._broken}); "
                            "re-create the process group and the Buffer")

    def _prepare_and_count(self, what: str, prepare, counts_of, pack_peers):
        """``prepare()`` this rank's call, then the count exchange, ``pack_peers(prepared)``
        packing the records while the counts travel. A rank whose input ``prepare`` refuses
        still takes part, sending ``-1`` so every peer raises instead of waiting, and raises
        its error after. Returns ``(prepared, the rows received)``."""
        self._usable()
        state = self._state
        try:
            prepared, error = prepare(), None
        except InvalidArgumentError as caught:
            prepared, error = None, caught
        rows = state.count_rows(None if prepared is None else counts_of(prepared),
                                0 if prepared is None else prepared.fingerprint)
        received = self._exchange_rows(rows, what, None if prepared is None else lambda: pack_peers(prepared))
        if error is not None:
            raise error
        return prepared, received

    # --- API -----------------------------------------------------------------------------
    def dispatch(self, x, topk_idx, topk_weights=None) -> DispatchResult:
        """``refs.dispatch`` (``deep_ep/utils/refs.py:10-123 @dd758ca``) through the buffer.

        Args:
            x: BF16 ``[num_tokens, hidden]``, or for an FP8 plan ``(x, sf)``: float8_e4m3fn
                ``[num_tokens, hidden]`` and the scales (fp32 ``[num_tokens, ceil(hidden/128)]``,
                or any dtype with the record's SF bytes per token). ``num_tokens`` may be 0.
            topk_idx: int64/int32 ``[num_tokens, num_topk]`` global expert ids, -1 for none.
            topk_weights: fp32 ``[num_tokens, num_topk]`` or ``None``.

        Returns:
            :class:`~epbuf.runtime.DispatchResult`: ``recv_x``, ``recv_topk_idx`` (local ids,
            -1 for other ranks' experts), ``recv_topk_weights``, ``recv_src_token_global_idx``,
            ``num_recv_tokens_per_rank``, ``handle`` — sorted by ``src_token_global_idx``.

        Raises:
            InvalidArgumentError: this rank's input (after telling the peers).
            PeerError: a peer refused its input, uses another layout, died or timed out.
        """
        state = self._state
        prepared, received = self._prepare_and_count(
            "dispatch", lambda: state.prepare_dispatch(x, topk_idx, topk_weights), lambda p: p.send_counts,
            state.pack_dispatch_peers)
        recv_counts = state.check_peers(received, prepared.fingerprint, "dispatch")
        bypass = prepared.bypass_self
        work = self._start_records(prepared.send, state.peer_counts(prepared.send_counts, bypass),
                                   state.peer_counts(recv_counts, bypass), self.layout.dispatch.record.num_bytes,
                                   state.dispatch_landing(recv_counts, bypass))
        packed = state.landing_spares_own_row(recv_counts, bypass)
        try:
            if packed:  # this rank's own records, written while the peers' are in flight
                state.pack_dispatch_self(prepared)
        finally:
            self._wait(work, "dispatch: the all_to_all_single of packed records")
        return state.finish_dispatch(prepared, recv_counts, self_packed=packed)

    def combine(self, y, handle: Handle, topk_weights=None) -> CombineResult:
        """Send each received token back and reduce at its source (``refs.py`` ``combine``
        with ``reduce_in_local=True``, bit-identical).

        Args:
            y: BF16 ``[num_recv_tokens, hidden]``, each received token already reduced over
                this rank's experts (DeepEP's ``combine``); or ``[num_recv_tokens, num_topk,
                hidden]``, one output per top-k slot: slots of other ranks' experts are
                ignored and each slot is weighted by the dispatched top-k weight
                (``bf16(w * y)``), so the result is the top-k-weighted sum.
            handle: ``dispatch(...).handle`` of this rank.
            topk_weights: fp32 ``[num_recv_tokens, num_topk]`` to sum back per token, or ``None``.

        Returns:
            :class:`~epbuf.runtime.CombineResult`: ``combined_x`` BF16 ``[num_tokens, hidden]``
            in this rank's token order, ``combined_topk_weights`` (or ``None``).
        """
        state = self._state
        prepared, received = self._prepare_and_count("combine", lambda: state.prepare_combine(y, handle, topk_weights),
                                                     lambda p: handle.recv_counts, state.pack_combine_peers)
        state.check_peers(received, prepared.fingerprint, "combine", expected=handle.send_counts)
        bypass = prepared.bypass_self
        work = self._start_records(prepared.send, state.peer_counts(handle.recv_counts, bypass),
                                   state.peer_counts(handle.send_counts, bypass), self.layout.combine.record.num_bytes,
                                   prepared.landing)
        try:
            state.pack_combine_self(prepared, handle)  # while the peers' records are in flight
        finally:
            self._wait(work, "combine: the all_to_all_single of packed records")
        return state.finish_combine(prepared, handle, prepared.landing, self_packed=True)
