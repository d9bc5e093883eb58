"""The exchange every twin runs on: one agreement, then one exchange of packed records.

A twin call is collective. Each rank first checks its own arguments (upstream's asserts, the
buffer's capacity), then all ranks take part in one ``all_gather`` of a small int64 row:
``[status, fingerprint, counts...]``. Every rank sees every row, so every rank makes the same
decision from the same numbers:

* a rank that refused (``status != 0``) makes every rank raise :class:`UpstreamAssertion` with
  the refusing rank's message (fetched by one ``all_gather_object``, on the error path only);
* rows whose fingerprints differ (another hidden size, top-k, dtype or layout) or whose counts
  disagree (a combine whose handle is not the dispatch's) make every rank raise the same text.

Then the records move in one ``all_to_all_single`` of ``uint8`` rows (``send_counts[q]``
records to rank ``q``, one peer after the other), started asynchronously so a twin can return
before the data arrives (DeepEP's ``return_recv_hook``). Every wait uses the process group's
own timeout; a failed or timed-out collective (a dead peer) raises
:class:`~epbuf.runtime.PeerError` on every live rank and leaves the engine unusable.
"""

from __future__ import annotations

import sys

from .._lazy import optional
from ..errors import EpbufError
from ..runtime._rank import PeerError

__all__ = ["UpstreamAssertion", "Engine", "Pending", "expect", "torch_module"]


def torch_module():
    """torch, or the one line naming the extra."""
    return optional("torch", "epbuf.twin needs torch: pip install 'epbuf[torch]'")


def _unshared(tensor) -> bool:
    """No other tensor (a view) and no other storage object refers to ``tensor``'s memory."""
    try:
        count = tensor.untyped_storage()._cdata
        import torch

        return torch._C._storage_Use_Count(count) <= 2  # the tensor's reference and the storage object's
    except (AttributeError, RuntimeError):  # no such private API: never reuse
        return False


class UpstreamAssertion(EpbufError, AssertionError, RuntimeError):
    """What upstream would refuse (its ``assert`` or ``EP_HOST_ASSERT``): an ``AssertionError``
    and a ``RuntimeError`` (how a C++ host assert reaches Python), and an epbuf ``ValueError``."""

    def __init__(self, message: str) -> None:
        RuntimeError.__init__(self, message)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def expect(condition: bool, assertion: str, where: str, detail: str = "") -> None:
    """Raise :class:`UpstreamAssertion` naming upstream's ``assertion`` at ``where`` unless ``condition``."""
    if not condition:
        raise UpstreamAssertion(f"{assertion} failed ({where})" + (f": {detail}" if detail else ""))


class Pending:
    """An exchange in flight: :meth:`wait` returns the received rows (once; later calls return them again)."""

    __slots__ = ("_engine", "_work", "_recv", "_what", "_done")

    def __init__(self, engine: Engine, work, recv, what: str) -> None:
        self._engine, self._work, self._recv, self._what, self._done = engine, work, recv, what, work is None

    def wait(self):
        if not self._done:
            self._engine._wait(self._work, self._what)
            self._done = True
        return self._recv


class Engine:
    """One process group's collectives for a twin (``group``: a ``torch.distributed`` group or ``None``)."""

    def __init__(self, group) -> None:
        torch = torch_module()
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise EpbufError("the twin needs torch.distributed.init_process_group(...) first")
        self.torch, self.dist = torch, dist
        self.group = group if group is not None else dist.group.WORLD
        self.rank = dist.get_rank(self.group)
        self.num_ranks = dist.get_world_size(self.group)
        self._broken: str | None = None
        self._scratch: dict = {}
        self._pool: dict = {}

    def output(self, key, shape: tuple, dtype):
        """A tensor to hand out (contents undefined): a kept one of this shape and dtype that
        nobody holds any more (no reference but the pool's, no view, no numpy array on its
        storage), else a fresh one, kept when the pool of ``key`` has room (3). What torch's
        CUDA caching allocator does for the GPU library: without it each call's outputs cost
        their page faults, as much as the exchange itself."""
        pool = self._pool.setdefault(key, [])
        shape = tuple(int(n) for n in shape)
        for i in range(len(pool)):
            if sys.getrefcount(pool[i]) == 2 and _unshared(pool[i]) and pool[i].dtype == dtype \
                    and tuple(pool[i].shape) == shape:
                return pool[i]
        tensor = self.torch.empty(shape, dtype=dtype)
        if len(pool) < 3:
            pool.append(tensor)
        return tensor

    def scratch(self, key, num_bytes: int):
        """``num_bytes`` of this engine's scratch ``key`` (uint8, contents undefined), grown to the
        largest request and kept: a fresh large tensor costs a page fault per 4 KiB on first touch,
        more than the copies (what the floor, preallocated buffers, never pays)."""
        buf = self._scratch.get(key)
        if buf is None or buf.numel() < num_bytes:
            buf = self._scratch[key] = self.torch.empty(max(num_bytes, 1), dtype=self.torch.uint8)
        return buf[:num_bytes]

    # --- collectives ---------------------------------------------------------------------
    def _wait(self, work, what: str) -> None:
        try:
            work.wait()
        except Exception as error:  # gloo/NCCL raise RuntimeError subclasses: a dead peer, a timeout
            self._broken = f"{what} failed: {error}"
            raise PeerError(f"{what} did not complete on rank {self.rank} within the process group's timeout (a "
                            f"peer died, hangs or does not call it): {str(error).splitlines()[0][:300]}") from None

    def _usable(self) -> None:
        if self._broken:
            raise PeerError(f"this twin buffer is unusable since an earlier collective failed ({self._broken}); "
                            "re-create the process group and the buffer")

    def agree(self, what: str, length: int, prepare):
        """Run ``prepare()`` -> ``(row, payload)`` (``row``: ``length`` ints, the counts this call
        shows every rank; ``prepare`` raises :class:`UpstreamAssertion` to refuse), then the
        all-gather of ``[status, *row]``. Returns ``(payload, rows)``: ``rows`` an int64 tensor
        ``[num_ranks, length]``. Raises the same :class:`UpstreamAssertion` on every rank when
        any rank refused."""
        self._usable()
        torch = self.torch
        mine = torch.zeros(length + 1, dtype=torch.int64)
        try:
            row, payload = prepare()
            row = torch.as_tensor(row, dtype=torch.int64).reshape(-1)
            if int(row.shape[0]) != length:  # e.g. a mask of another width than the group's
                raise UpstreamAssertion(f"{what}: the arguments' shapes do not match the group of {self.num_ranks} "
                                        f"ranks ({int(row.shape[0])} counts where {length} belong)")
            mine[1:] = row
            error = None
        except Exception as caught:  # upstream's asserts, and anything else a hostile argument raises
            if not isinstance(caught, UpstreamAssertion):
                caught = UpstreamAssertion(f"{what}: {type(caught).__name__}: {caught}")
            payload, error = None, caught
            mine[0] = 1
        gathered = [torch.empty_like(mine) for _ in range(self.num_ranks)]
        work = self.dist.all_gather(gathered, mine, group=self.group, async_op=True)
        self._wait(work, f"{what}: the agreement")
        rows = torch.stack(gathered)
        refused = [r for r in range(self.num_ranks) if int(rows[r, 0])]
        if refused:
            messages = [None] * self.num_ranks
            try:
                self.dist.all_gather_object(messages, None if error is None else str(error), group=self.group)
            except Exception as caught:
                self._broken = f"{what}: the refusal exchange failed: {caught}"
                raise PeerError(f"{what}: rank(s) {refused} refused, and their reasons did not arrive: "
                                f"{str(caught).splitlines()[0][:300]}") from None
            first = refused[0]
            raise UpstreamAssertion(f"rank {first} of {self.num_ranks}: {messages[first]}")
        return payload, rows[:, 1:]

    def agree_counts(self, what: str, names: str, head_len: int, prepare, cap: int = 256):
        """:meth:`agree` for calls whose counts' length depends on the arguments: ``prepare()`` ->
        ``(head, counts, payload)``; the row is ``[head, len(counts), counts padded to cap]``, so
        the counts ride in the same all-gather when they fit (else they follow in a second one,
        once every rank has shown the same head and length: a gloo all-gather of mismatched
        sizes aborts the process). Every rank must show the same ``head`` (``names`` says what
        it holds). Returns ``(payload, heads [num_ranks, head_len], counts [num_ranks, n])``."""
        torch = self.torch

        def wrapped():
            head, counts, payload = prepare()
            counts = torch.as_tensor(counts, dtype=torch.int64).reshape(-1)
            n = int(counts.shape[0])
            row = torch.zeros(head_len + 1 + cap, dtype=torch.int64)
            row[:head_len] = torch.as_tensor(head, dtype=torch.int64)
            row[head_len] = n
            if n <= cap:
                row[head_len + 1:head_len + 1 + n] = counts
            return row, (payload, counts)

        (payload, counts), rows = self.agree(what, head_len + 1 + cap, wrapped)
        self.same_everywhere(rows, slice(0, head_len + 1), what, names + " (and so the counts' length)")
        n = int(rows[0, head_len])
        table = rows[:, head_len + 1:head_len + 1 + n] if n <= cap else self.gather(counts, what)
        return payload, rows[:, :head_len], table

    def gather(self, values, what: str):
        """All-gather of one int64 vector per rank (every rank's of the same length, as the
        agreement before it established): ``[num_ranks, len(values)]``."""
        torch = self.torch
        mine = torch.as_tensor(values, dtype=torch.int64).reshape(-1).contiguous()
        if self.num_ranks == 1:
            return mine.unsqueeze(0)
        gathered = [torch.empty_like(mine) for _ in range(self.num_ranks)]
        self._wait(self.dist.all_gather(gathered, mine, group=self.group, async_op=True), f"{what}: the count exchange")
        return torch.stack(gathered)

    @staticmethod
    def same_everywhere(rows, column_slice, what: str, names: str) -> None:
        """Raise :class:`UpstreamAssertion` (on every rank: every rank has the same rows) unless
        every rank shows the same values in ``column_slice`` of its row."""
        part = rows[:, column_slice]
        if not bool((part == part[0]).all()):
            raise UpstreamAssertion(f"{what}: the ranks disagree on {names} ({part.tolist()}); every rank must "
                                    "call it with the same shapes (upstream would hang or read garbage)")

    def exchange(self, send, send_counts, recv_counts, what: str, key=None) -> Pending:
        """Start the ``all_to_all_single`` of ``send`` (``uint8 [sum(send_counts), stride]``, rows
        for rank 0 first): ``send_counts[q]`` rows to rank ``q``, ``recv_counts[q]`` from it. The
        rows land in scratch ``key`` (``None``: a fresh tensor)."""
        stride = int(send.shape[1]) if send.dim() == 2 else 1
        rows = int(sum(recv_counts))
        recv = (self.torch.empty(rows * stride, dtype=self.torch.uint8) if key is None
                else self.scratch(key, rows * stride)).view(rows, stride)
        if self.num_ranks == 1:
            recv.copy_(send)
            return Pending(self, None, recv, what)
        work = self.dist.all_to_all_single(recv.view(-1), send.reshape(-1), [int(c) * stride for c in recv_counts],
                                           [int(c) * stride for c in send_counts], group=self.group, async_op=True)
        return Pending(self, work, recv, what)
