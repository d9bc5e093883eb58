"""One rank's side of dispatch and combine, whatever moves the bytes between ranks.

:class:`RankState` does everything but the exchange: it validates the inputs, routes
tokens, packs send records with :func:`epbuf.codec.pack`, places received records in
their slots of the buffer, and reads them back with :func:`epbuf.codec.unpack`. The
torch.distributed :class:`~epbuf.runtime.Buffer` and the single-process
:class:`~epbuf.runtime.Simulator` call the same steps and differ only in how the counts
and the packed records reach the peers.

Semantics: DeepEP's reference ``deep_ep/utils/refs.py @dd758ca``.

* ``dispatch`` (``refs.py:10-123``): rank ``s`` sends token ``i`` once to every rank that
  hosts one of its experts (``expert // (num_experts / num_ranks)``), with the top-k
  indices of other ranks' experts set to -1 (``:76-77``), all its weights, and
  ``src_token_global_idx = s * num_max_tokens_per_rank + i`` (``:90``). The receiver
  gets the tokens not expanded, sorted by ``src_token_global_idx`` (by source rank, then
  token), with its own experts' indices made local and the rest -1 (``:112-117``).
* ``combine`` (``refs.py:177-243``, ``reduce_in_local=True``; ``ordered_accumulate``
  ``:156-174``): each rank first reduces a token's top-k slots of its own experts (fp32
  sum in top-k order, rounded to BF16), then the source rank sums those per-rank partials
  in fp32 in the order of each rank's last top-k slot (``grouped_reduce``, ``:201-234``,
  keeps a group's sum at its rightmost slot; ``ordered_accumulate`` adds slots in order)
  and rounds to BF16.

The bytes: slot ``(r, t)`` of the dispatch region holds the ``t``-th token received from
rank ``r``; slot ``(k, i)`` of the combine region holds, for source token ``i``, the
partial of its ``k``-th destination rank in that accumulation order — the region's
``min(top-k, ranks)`` rows are exactly enough — and slots past a token's destinations hold
zeros (epbuf writes them so the reduction is one strided sum over the rows). Shapes,
offsets and strides come from :func:`epbuf.codec.region_slots` of the backend's report.

Memory: a workspace and an fp32 block beside the buffer, reused across calls (:mod:`epbuf.runtime._rank`).

Where each part lives: :mod:`epbuf.runtime._layout` (:class:`RuntimeLayout`, from the report),
:mod:`epbuf.runtime._rank` (the buffer, workspace and count exchange), :mod:`epbuf.runtime._dispatch`
and :mod:`epbuf.runtime._combine` (the steps), :mod:`epbuf.runtime._results` (what the steps
hand on: the prepared sends, the handle, the results).
"""

from __future__ import annotations

from ._combine import CombineSteps
from ._dispatch import DispatchSteps
from ._layout import RuntimeLayout
from ._rank import PeerError
from ._results import CombineResult, CombineSend, DispatchResult, DispatchSend, Handle  # noqa: F401 (as before)

__all__ = ["RuntimeLayout", "RankState", "Handle", "DispatchResult", "CombineResult", "PeerError"]


class RankState(DispatchSteps, CombineSteps):
    """One rank's buffer and the steps of dispatch and combine around the exchange."""
