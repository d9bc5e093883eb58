"""The stable JSON form of a report: schema ``epbuf.report/1`` (documented in README.md), and
back. Fields are only added, never renamed, within a schema version."""

from __future__ import annotations

from . import Buffer, Field, Finding, LimitCheck, Quantity, RecordArray, RecordLayout, Region, Report

__all__ = ["SCHEMA", "report_to_dict", "report_from_dict"]

SCHEMA = "epbuf.report/1"



def _record_dict(record: RecordLayout) -> dict:
    return {
        "name": record.name,
        "view": record.view,
        "num_bytes": record.num_bytes,
        "fields": [
            {"name": f.name, "offset": f.offset, "num_bytes": f.num_bytes, "dtype": f.dtype, "count": f.count}
            for f in record.fields
        ],
    }


def _buffer_dict(b: Buffer) -> dict:
    return {
        "name": b.name,
        "rule": b.rule,
        "alignment": b.alignment,
        "num_bytes": b.num_bytes,
        "num_bytes_needed": b.num_bytes_needed,
        "source": b.source,
        "regions": [
            {"name": r.name, "num_bytes": r.num_bytes, "num_bytes_used": r.num_bytes_used,
             "formula": r.formula, "source": r.source, "shape": list(r.shape), "record": r.record,
             "arrays": [{"name": a.name, "offset": a.offset, "shape": list(a.shape), "record": a.record,
                         "num_bytes": a.num_bytes} for a in r.arrays]}
            for r in b.regions
        ],
    }


def _buffer_from_dict(b: dict) -> Buffer:
    return Buffer(
        name=b["name"], rule=b["rule"], alignment=b["alignment"], num_bytes=b["num_bytes"],
        num_bytes_needed=b["num_bytes_needed"], source=b["source"],
        regions=tuple(Region(**{**r, "shape": tuple(r["shape"]),
                                 "arrays": tuple(RecordArray(**{**a, "shape": tuple(a["shape"])})
                                                 for a in r.get("arrays", ()))}) for r in b["regions"]),
    )


def report_to_dict(report: Report) -> dict:
    """The stable JSON form of a report (schema ``epbuf.report/1``, documented in README.md)."""
    return {
        "schema": SCHEMA,
        "backend": report.backend,
        "title": report.title,
        "upstream": report.upstream,
        "inputs": dict(report.inputs),
        "num_bytes": report.num_bytes,
        "num_bytes_needed": report.num_bytes_needed,
        "buffers": [_buffer_dict(b) for b in report.buffers],
        "records": [_record_dict(r) for r in report.records],
        "quantities": {q.name: q.value for q in report.quantities},
        "quantity_details": [
            {"name": q.name, "value": q.value, "unit": q.unit, "source": q.source} for q in report.quantities
        ],
        "findings": [
            {"severity": f.severity, "code": f.code, "message": f.message, "data": f.data} for f in report.findings
        ],
        "limits": [
            {"name": lim.name, "value": lim.value, "relation": lim.relation, "bound": lim.bound, "ok": lim.ok,
             "source": lim.source, "enforced": lim.enforced}
            for lim in report.limits
        ],
        "host_num_bytes": report.host_num_bytes,
        "host_buffers": [_buffer_dict(b) for b in report.host_buffers],
    }


def report_from_dict(data: dict) -> Report:
    """Inverse of :func:`report_to_dict` (``report_from_dict(report_to_dict(r)) == r``)."""
    if data.get("schema") != SCHEMA:
        raise ValueError(f"schema {data.get('schema')!r} is not {SCHEMA!r}")
    return Report(
        backend=data["backend"],
        title=data["title"],
        upstream=data["upstream"],
        inputs=dict(data["inputs"]),
        buffers=tuple(_buffer_from_dict(b) for b in data["buffers"]),
        records=tuple(
            RecordLayout(name=r["name"], view=r["view"], num_bytes=r["num_bytes"],
                         fields=tuple(Field(**f) for f in r["fields"]))
            for r in data["records"]
        ),
        quantities=tuple(Quantity(**q) for q in data["quantity_details"]),
        findings=tuple(Finding(**f) for f in data["findings"]),
        limits=tuple(LimitCheck(**lim) for lim in data["limits"]),
        host_buffers=tuple(_buffer_from_dict(b) for b in data.get("host_buffers", ())),
    )
