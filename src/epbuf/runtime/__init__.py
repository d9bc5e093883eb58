"""DeepEP's dispatch and combine, moving packed records through a buffer of the hint's size.

``Buffer(group, plan, backend="ascend")`` (:mod:`epbuf.runtime.distributed`) runs on a
``torch.distributed`` process group (gloo on CPUs; NCCL/HCCL with ``device=``); the
:class:`Simulator` (:mod:`epbuf.runtime.simulate`) runs ``num_ranks`` virtual ranks in one
process through the same steps (:mod:`epbuf.runtime._core`: ``RankState``). Semantics follow
``deep_ep/utils/refs.py @dd758ca``: tokens not expanded, sorted by
``src_token_global_idx``; combine sums in refs.py's order, so results are bit-identical
to a dense reference written like it.

Needs torch for :class:`Buffer` (``pip install 'epbuf[torch]'``) and numpy for both.
``import epbuf.runtime`` imports neither; the names load on first use.
"""

from __future__ import annotations

from .._lazy import exports

_EXPORTS = {
    "Buffer": "distributed", "Simulator": "simulate",
    "RuntimeLayout": "_layout", "Handle": "_results", "DispatchResult": "_results", "CombineResult": "_results",
    "PeerError": "_rank",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = exports(__name__, _EXPORTS)
