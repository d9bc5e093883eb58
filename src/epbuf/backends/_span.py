"""``Span``: a named byte range of a buffer — the spans of DeepEP V1's low-latency RDMA buffer
and of UCCL-EP's (which keeps DeepEP's layout), and UCCL-EP's atomic-buffer spans."""

from __future__ import annotations

from .._record import Record

__all__ = ["Span"]


class Span(Record):
    """A named byte range: ``num_bytes`` bytes from ``offset``."""

    name: str
    offset: int
    num_bytes: int

    @property
    def end(self) -> int:
        return self.offset + self.num_bytes
