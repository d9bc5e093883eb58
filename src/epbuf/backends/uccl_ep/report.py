"""UCCL-EP reports: ``report_normal`` (backend ``uccl-ep``) and ``report_low_latency``
(backend ``uccl-ll``), and their fast summaries for sweeps.

A report lists every allocation one UCCL-EP ``Buffer`` makes per GPU (:mod:`.memory`): the
device buffers make up ``Report.num_bytes``; the pinned host memory is in
``Report.host_buffers`` and not in the device total. The limits are the rows of
:mod:`.limits`; a broken one becomes an ``error`` finding with the assertion's ``file:line``.
"""

from .ll_report import report_low_latency, summarize_low_latency
from .normal import report_normal, summarize_normal

__all__ = ["report_normal", "report_low_latency", "summarize_normal", "summarize_low_latency"]
