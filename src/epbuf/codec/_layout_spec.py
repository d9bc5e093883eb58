"""What pack and unpack read from a record layout on every call, computed once per layout."""

from __future__ import annotations

from functools import lru_cache

from ..errors import ArgumentProblem as Problem
from ..errors import InvalidArgumentError
from ..report import RecordLayout
from ._arguments import CodecError

__all__ = ["LayoutSpec", "layout_spec", "check_writable"]


class LayoutSpec:
    """What pack and unpack read from a layout on every call, computed once per layout:
    its data fields by name, why a writer cannot use it (or ``None``), and the byte runs a
    writer fills with zeros for each set of fields given (padding and fields not given,
    adjacent runs merged, so a slot's zeros cost one fill per run, not one per field)."""

    __slots__ = ("layout", "data", "writer_problem", "_zero_runs")

    def __init__(self, layout: RecordLayout) -> None:
        self.layout = layout
        self.data = {f.name: f for f in layout.data_fields()}
        self.writer_problem = _writer_problem(layout)
        self._zero_runs: dict[frozenset, tuple[tuple[int, int], ...]] = {}

    def zero_runs(self, given) -> tuple[tuple[int, int], ...]:
        key = frozenset(given)
        runs = self._zero_runs.get(key)
        if runs is None:
            runs = []
            for f in self.layout.fields:  # in offset order; padding fills every gap
                if f.num_bytes and (f.is_padding or f.name not in key):
                    if runs and runs[-1][0] + runs[-1][1] == f.offset:
                        runs[-1] = (runs[-1][0], runs[-1][1] + f.num_bytes)
                    else:
                        runs.append((f.offset, f.num_bytes))
            runs = self._zero_runs[key] = tuple(runs)
        return runs


_SPECS: dict[int, LayoutSpec] = {}


def layout_spec(layout: RecordLayout) -> LayoutSpec:
    """The layout's :class:`LayoutSpec`, found by identity (hashing a layout costs more than a
    small pack); equal layouts built separately share an entry through ``_writer_problem``."""
    spec = _SPECS.get(id(layout))
    if spec is None or spec.layout is not layout:
        if len(_SPECS) >= 256:
            _SPECS.clear()
        spec = _SPECS[id(layout)] = LayoutSpec(layout)
    return spec


@lru_cache(maxsize=256)
def _writer_problem(layout: RecordLayout) -> str | None:
    """Why ``layout`` cannot be written slot after slot (fields overlapping or past the stride)."""
    if layout.overlaps() or layout.overrun_bytes():
        return (f"the {layout.name!r} record ({layout.view or 'no view'}) has fields that overlap "
                f"{layout.overlaps()} or end {layout.overrun_bytes()} B past its {layout.num_bytes}-byte "
                "stride; a writer must stay inside its slot (use the writer view)")
    return None


def check_writable(layout: RecordLayout, spec: LayoutSpec, fields: dict) -> None:
    """Unknown field names, or a layout no writer can fill slot after slot."""
    data = spec.data
    if not fields.keys() <= data.keys():
        raise InvalidArgumentError([Problem(name, "given", f"not a field of the {layout.name!r} record; its fields: "
                                                           f"{', '.join(data)}")
                                    for name in sorted(set(fields) - set(data))])
    if spec.writer_problem:
        raise CodecError(spec.writer_problem)
