"""The intranode (normal-mode, one node) host asserts on ``num_nvl_bytes``, per call.

Unlike the size hints (:mod:`.config`), which reserve 128 top-k slots and 128 scales per token
slot, ``Buffer::intranode_dispatch`` and ``intranode_combine`` check what the call itself needs
against the Buffer's NVL bytes, with the call's top-k, scales and element size
(``csrc/legacy/buffer.hpp @ dd758ca``, ``BUF``):

* ``notify_dispatch`` (``BUF:552``): ``num_ranks * (num_ranks + num_local_experts) * sizeof(int)``;
* the dispatch (``BUF:627-637``): the rank prefix matrix, channel start/end offsets, queue head
  and tail, then per ring slot (``channels x ranks x num_max_nvl_chunked_recv_tokens``) the
  hidden bytes, a source index, ``num_topk`` indices and weights and ``num_scales`` fp32 scales;
* ``cached_notify_combine`` (``BUF:782``): ``num_channels * num_ranks * sizeof(int) * 2``;
* the combine (``BUF:807-811``): queue head and tail, then per ring slot the hidden bytes, a
  source index and ``num_topk`` fp32 weights.

``num_channels = config.num_sms / 2`` (``BUF:437, 742``).

>>> from epbuf.backends.deepep_v1 import Config
>>> intranode_dispatch_nvl_bytes(Config(24, 8, 256), 8, 7168 * 2, 8, 0)
354780928
"""

from __future__ import annotations

from ...errors import check_int
from .constants import FLOAT_BYTES, INT_BYTES, NUM_CHANNELS_PER_SM

__all__ = ["notify_dispatch_nvl_bytes", "intranode_dispatch_nvl_bytes", "cached_notify_combine_nvl_bytes",
           "intranode_combine_nvl_bytes"]


def notify_dispatch_nvl_bytes(num_ranks: int, num_local_experts: int) -> int:
    """``num_ranks * (num_ranks + num_local_experts) * sizeof(int)`` (``BUF:552``)."""
    _check(num_ranks=num_ranks, num_local_experts=num_local_experts)
    return num_ranks * (num_ranks + num_local_experts) * INT_BYTES


def intranode_dispatch_nvl_bytes(config, num_ranks: int, hidden_bytes: int, num_topk: int, num_scales: int,
                                 topk_idx_bytes: int = 8) -> int:
    """The left side of the dispatch assert (``BUF:627-637``). ``hidden_bytes``: ``hidden *
    recv_x.element_size()`` (1 for FP8); ``num_topk`` and ``num_scales`` are 0 without top-k or
    scales; ``topk_idx_bytes``: ``sizeof(topk_idx_t)``."""
    _check(config, num_ranks=num_ranks, hidden_bytes=hidden_bytes, num_topk=num_topk, num_scales=num_scales,
           topk_idx_bytes=topk_idx_bytes)
    ch = config.num_sms // NUM_CHANNELS_PER_SM
    slots = ch * num_ranks * config.num_max_nvl_chunked_recv_tokens
    return (num_ranks * num_ranks * INT_BYTES + ch * num_ranks * INT_BYTES * 4
            + slots * (hidden_bytes + INT_BYTES + num_topk * topk_idx_bytes + num_topk * FLOAT_BYTES
                       + FLOAT_BYTES * num_scales))


def cached_notify_combine_nvl_bytes(config, num_ranks: int) -> int:
    """``num_channels * num_ranks * sizeof(int) * 2`` (``BUF:782``)."""
    _check(config, num_ranks=num_ranks)
    return config.num_sms // NUM_CHANNELS_PER_SM * num_ranks * INT_BYTES * 2


def intranode_combine_nvl_bytes(config, num_ranks: int, hidden_bytes: int, num_topk: int) -> int:
    """The left side of the combine assert (``BUF:807-811``); ``hidden_bytes``: ``hidden *
    x.element_size()``, ``num_topk`` 0 without weights."""
    _check(config, num_ranks=num_ranks, hidden_bytes=hidden_bytes, num_topk=num_topk)
    ch = config.num_sms // NUM_CHANNELS_PER_SM
    slots = ch * num_ranks * config.num_max_nvl_chunked_recv_tokens
    return ch * num_ranks * INT_BYTES * 2 + slots * (hidden_bytes + INT_BYTES + num_topk * FLOAT_BYTES)


def _check(config: object = None, **counts: object) -> None:
    """``config`` a :class:`~.config.Config` (when given) and each count an ``int`` >= 0
    (``num_ranks`` >= 1): one :class:`~epbuf.errors.EpbufError` line otherwise, as the other public
    functions of the backends (a NaN would come back as a size)."""
    if config is not None:
        from ...errors import InvalidArgumentError, Problem
        from .config import Config

        if not isinstance(config, Config):
            raise InvalidArgumentError([Problem("config", config, "a deepep_v1.Config (num_sms, chunk sizes)")])
    for name, value in counts.items():
        check_int(name, value, 1 if name == "num_ranks" else 0)
