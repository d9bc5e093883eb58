"""Backend-agnostic results: the records every backend builds (:mod:`.records`: Field,
RecordLayout, Region, Buffer, Finding, LimitCheck, Quantity, Summary, Report) and their stable
JSON form (:mod:`.json_form`: ``report_to_dict``, ``report_from_dict``, schema
``epbuf.report/1``, loaded on first use: ``epbuf hint`` without ``--json`` does not need it)."""

from .._lazy import exports
from .records import (Buffer, Field, Finding, LimitCheck, Quantity, RecordArray, RecordLayout, Region, Report,
                      Summary, summary_of, tightest_limit)

__all__ = ["Field", "RecordLayout", "Region", "RecordArray", "Buffer", "Finding", "LimitCheck", "Quantity", "Report",
           "Summary"]

# _record_dict: epbuf.codec.replay writes its records in the report's JSON form.
__getattr__, __dir__ = exports(__name__, dict.fromkeys(("SCHEMA", "report_to_dict", "report_from_dict", "_record_dict"),
                                                       "json_form"))
