"""Records on the wire: pack the rows a rank sends, unpack the rows it receives, with
:mod:`epbuf.codec` over a :class:`~epbuf.report.RecordLayout` (a backend's record where
upstream has one, e.g. DeepEP's low-latency dispatch message; otherwise one built here from
the call's fields, each 16-byte aligned as the kernels' ``int4`` copies are).

Two routes say which rows travel where, in the order the exchange delivers them:

* :class:`TokenRoute` (a token to each rank it selects; DeepEP's normal mode): rows for rank
  0 first, each rank's in token order;
* :class:`ExpertRoute` (a token to each expert it selects; DeepEP's low-latency mode, pplx,
  MORI): ``(token, k)`` pairs sorted by expert, then token, then ``k``; the experts of rank
  ``q`` are ``q * L .. (q + 1) * L - 1``, so rank 0's pairs come first too.
"""

from __future__ import annotations

from functools import lru_cache

from ..codec.record_slots import RecordSlots
from ..report import Field, RecordLayout

__all__ = ["TokenRoute", "ExpertRoute", "record_layout", "pack_rows", "unpack_rows", "reduce_rows"]

_ALIGN = 16  # sizeof(int4)


@lru_cache(maxsize=256)
def record_layout(name: str, fields: tuple[tuple[str, str, int, int], ...]) -> RecordLayout:
    """A record of ``(field name, dtype, element bytes, count)`` fields, each starting at a
    multiple of 16 bytes, the stride a multiple of 16 (fields with ``count == 0`` are left out)."""
    out, offset = [], 0
    for field_name, dtype, size, count in fields:
        if count:
            out.append(Field(name=field_name, offset=offset, num_bytes=size * count, dtype=dtype, count=count))
            offset += -(-size * count // _ALIGN) * _ALIGN
    return RecordLayout.from_fields(name, max(offset, _ALIGN), out, view="epbuf.twin wire record")


def pack_rows(torch, layout: RecordLayout, num_rows: int, rows, out=None, **fields):
    """``uint8 [num_rows, stride]``: row ``i`` holds each field's row ``rows[i]`` (one gather per
    field), in ``out`` (``uint8``, ``num_rows * stride`` bytes) or a fresh tensor."""
    send = torch.empty(num_rows * layout.num_bytes, dtype=torch.uint8) if out is None else out
    if num_rows:
        RecordSlots(layout, send).pack(**{name: (value, rows) for name, value in fields.items()})
    return send.view(num_rows, layout.num_bytes)


def unpack_rows(layout: RecordLayout, recv, names=None) -> dict:
    """The fields of every received row (``recv``: ``uint8 [rows, stride]``), as zero-copy views where possible."""
    return RecordSlots(layout, recv.view(-1)).unpack(num_slots=int(recv.shape[0]), fields=names, copy=False)


_CHUNK = 256  # rows per fp32 block of a reduction: stays in cache, one scratch block reused


def reduce_rows(engine, rows, token, num_tokens: int, weights=None, out=None, out_dtype=None, bias=()):
    """``out[t] = sum of rows[i] (times weights[i]) over i with token[i] == t`` in fp32, in
    ``rows``' order, plus ``bias`` (each ``[num_tokens, hidden]``), cast to ``out``'s dtype (or a
    fresh ``out_dtype`` tensor). Blocks of 256 rows go through one reused fp32 block."""
    torch = engine.torch
    hidden = int(rows.shape[1])
    total = engine.scratch("reduce total", num_tokens * hidden * 4).view(torch.float32).view(num_tokens, hidden)
    total.zero_()
    block = engine.scratch("reduce block", _CHUNK * hidden * 4).view(torch.float32).view(_CHUNK, hidden)
    for first in range(0, int(rows.shape[0]), _CHUNK):
        last = min(first + _CHUNK, int(rows.shape[0]))
        part = block[:last - first]
        if weights is None:
            part.copy_(rows[first:last])
        else:  # one pass: the BF16 rows times the fp32 weights, computed in fp32
            torch.mul(rows[first:last], weights[first:last].unsqueeze(1), out=part)
        total.index_add_(0, token[first:last], part)
    for b in bias:
        if b is not None:
            total.add_(b)
    if out is None:
        out = engine.output("reduce", (num_tokens, hidden), out_dtype)
    out.copy_(total)
    return out


class TokenRoute:
    """Each token to every rank ``is_token_in_rank`` (``bool [num_tokens, num_ranks]``) selects."""

    __slots__ = ("rank", "token", "counts")

    def __init__(self, torch, is_token_in_rank) -> None:
        rank, token = is_token_in_rank.t().nonzero(as_tuple=True)  # row-major: by rank, then token
        self.rank, self.token = rank, token
        self.counts = torch.bincount(rank, minlength=int(is_token_in_rank.shape[1]))


class ExpertRoute:
    """Each ``(token, k)`` with ``topk_idx[token, k] >= 0`` to expert ``topk_idx[token, k]``.

    Attributes:
        pair: flat ``token * num_topk + k`` of each routed pair, in wire order.
        token, expert: the pair's token and (global) expert.
        per_expert: ``int64 [num_experts]`` pairs per expert; ``per_rank``: per rank.
    """

    __slots__ = ("pair", "token", "expert", "per_expert", "per_rank")

    def __init__(self, torch, topk_idx, num_experts: int, num_ranks: int) -> None:
        num_tokens, num_topk = int(topk_idx.shape[0]), int(topk_idx.shape[1])
        flat = topk_idx.reshape(-1).to(torch.int64)
        pair = (flat >= 0).nonzero().squeeze(1)
        expert = flat[pair]
        order = torch.argsort(expert * max(num_tokens * num_topk, 1) + pair, stable=True)
        self.pair, self.expert = pair[order], expert[order]
        self.token = self.pair // max(num_topk, 1)
        self.per_expert = torch.bincount(expert, minlength=num_experts)
        self.per_rank = self.per_expert.view(num_ranks, -1).sum(1)
