"""Pack token fields into the bytes of a record layout, and read them back — vectorised.

The byte map is a :class:`~epbuf.report.RecordLayout` from a backend's report
(``epbuf.report(plan, backend).records``): the record stride ``num_bytes`` and each
field's ``offset``, ``num_bytes``, ``dtype`` and ``count``. Nothing here computes an
offset; a field of slot ``s`` occupies ``buffer[s * stride + offset :][:num_bytes]``.

Every field is one column of the 2-D byte view ``[slots, stride]`` of the buffer (a
strided view, so a reader's field may even run past its slot, as DeepEP-Ascend's getters
do for hidden 7000): one vectorised copy per field, no loop over tokens.

>>> import numpy as np, epbuf
>>> plan = epbuf.Plan(hidden=256, num_topk=2, num_experts=8, num_ranks=2, num_max_tokens_per_rank=4,
...                   use_fp8_dispatch=False)
>>> record = epbuf.report(plan, "ascend").record("dispatch")
>>> buffer = pack(record, hidden=np.ones((3, 256), np.uint16), topk_idx=np.array([[0, 5], [1, -1], [7, 2]]),
...               topk_weights=np.full((3, 2), 0.5, np.float32), src_token_global_idx=np.array([0, 1, 2]))
>>> buffer.shape, record.num_bytes
((1728,), 576)
>>> fields = unpack(record, buffer)
>>> fields["topk_idx"].tolist(), fields["src_token_global_idx"].tolist()
([[0, 5], [1, -1], [7, 2]], [[0], [1], [2]])
"""

from __future__ import annotations

from functools import lru_cache

from ..errors import ArgumentProblem as Problem
from ..errors import EpbufError, InvalidArgumentError
from ..report import Field, RecordLayout
from ._arrays import NUMERIC_DTYPES, field_dtype, ops_for

__all__ = ["pack", "unpack", "slot_rows", "CodecError"]


class CodecError(EpbufError):
    """A buffer too small for the slots asked for, or a record that cannot be written."""


def _shape(value) -> tuple:
    return tuple(int(d) for d in value.shape)


def _problem(field: Field, value, ops, why: str) -> InvalidArgumentError:
    described = f"{ops.dtype_name(value)} {list(_shape(value))}"
    return InvalidArgumentError([Problem(field.name, described,
                                         f"the record field is {field.dtype} x {field.count} = {field.num_bytes} B per "
                                         f"token; {why}")])


def _elements(field: Field) -> int:
    """Elements of the field's dtype per token (raw bytes for dtypes without a size of their own)."""
    size = field_dtype(field.dtype)[0]
    return field.count if field.count * size == field.num_bytes else field.num_bytes // size


def _field_bytes(field: Field, value, num_tokens: int, ops):
    """``value`` as ``[num_tokens, field.num_bytes]`` uint8: same dtype as the field; or the
    same element count in another numeric dtype, converted when every value survives; or
    the same bytes per token, reinterpreted (fp32 scales as Ascend's int16 SF packs)."""
    shape = _shape(value)
    if not shape or shape[0] != num_tokens:
        raise _problem(field, value, ops, f"expected {num_tokens} tokens (rows) like the other fields")
    per_token = 1
    for d in shape[1:]:
        per_token *= d
    row_bytes = per_token * ops.itemsize(value)
    want = ops.dtype(field.dtype)
    count = _elements(field)
    if value.dtype == want and per_token == count:
        return ops.byte_rows(value, num_tokens, field.num_bytes)
    if per_token == count and field.dtype in NUMERIC_DTYPES and ops.is_numeric(value):
        converted = ops.cast(value, want)
        if not ops.equal(ops.cast(converted, value.dtype), value):
            raise _problem(field, value, ops, f"its values do not all fit {field.dtype}")
        return ops.byte_rows(converted, num_tokens, field.num_bytes)
    if row_bytes == field.num_bytes:
        return ops.byte_rows(value, num_tokens, field.num_bytes)
    raise _problem(field, value, ops, f"give {count} elements of {field.dtype} or {field.num_bytes} bytes per token")


class _Slots:
    """Where the tokens go: ``first .. first + count - 1`` or an index array; lowest and
    highest slot computed once."""

    __slots__ = ("first", "index", "count", "lowest", "highest")

    def __init__(self, slots, count: int, ops, like) -> None:
        self.count = count
        if slots is None or (isinstance(slots, int) and not isinstance(slots, bool)):
            self.first, self.index = slots or 0, None
            self.lowest, self.highest = self.first, self.first + count - 1
            return
        self.first = None
        self.index = ops.index(slots, like)
        if _shape(self.index) != (count,):
            raise InvalidArgumentError([Problem("slots", list(_shape(self.index)),
                                                f"must hold one slot per token ({count})")])
        host = ops.to_numpy(self.index)
        self.lowest, self.highest = (int(host.min()), int(host.max())) if count else (0, -1)

    def check(self, stride: int, length: int, end: int, what: str) -> None:
        if self.count == 0:
            return
        if self.lowest < 0:
            raise InvalidArgumentError([Problem("slots", self.lowest, "slot indices must be >= 0")])
        if self.highest * stride + end > length:
            raise CodecError(
                f"{what} slot {self.highest} needs bytes up to {self.highest * stride + end:,} (slot x {stride:,} B "
                f"stride + {end:,}) but the buffer holds {length:,} B; at most "
                f"{max(0, (length - end) // stride + 1):,} slots fit")


def _check_buffer(buffer, ops) -> int:
    if not ops.check_flat_bytes(buffer):
        raise InvalidArgumentError([Problem("buffer", f"{ops.dtype_name(buffer)} {list(_shape(buffer))}",
                                            "must be a contiguous 1-D uint8 array")])
    return ops.length(buffer)


def _addressable(field: Field, stride: int, length: int) -> int:
    """Slots whose ``field`` lies inside a buffer of ``length`` bytes."""
    return max(0, (length - field.end) // stride + 1) if length >= field.end else 0


def _column(buffer, field: Field, stride: int, length: int, ops):
    """The strided ``[slots, field bytes]`` view of one field in every addressable slot."""
    return ops.strided(buffer, field.offset, _addressable(field, stride, length), field.num_bytes, stride)


def _split(value):
    """``(array, rows)`` for a field given as ``(array, rows)``, else ``(value, None)``."""
    if isinstance(value, tuple) and len(value) == 2:
        return value
    return value, None


@lru_cache(maxsize=256)
def _writer_problem(layout: RecordLayout) -> str | None:
    """Why ``layout`` cannot be written slot after slot (fields overlapping or past the stride)."""
    if layout.overlaps() or layout.overrun_bytes():
        return (f"the {layout.name!r} record ({layout.view or 'no view'}) has fields that overlap "
                f"{layout.overlaps()} or end {layout.overrun_bytes()} B past its {layout.num_bytes}-byte "
                "stride; a writer must stay inside its slot (use the writer view)")
    return None


def pack(layout: RecordLayout, *, out=None, slots=None, **fields):
    """Write tokens into record slots and return the buffer.

    Args:
        layout: the record (``report.record("dispatch")`` ...). Its data fields must not
            overlap nor run past the stride: a writer stays inside its slot.
        out: a contiguous 1-D uint8 buffer (numpy array or torch tensor) to write into;
            ``None`` allocates ``num_tokens x stride`` zero bytes (numpy, or torch on the
            inputs' device when they are tensors).
        slots: where token ``i`` goes: ``None`` = slot ``i``; an int = consecutive slots
            from it; an index array = one slot per token.
        **fields: field name -> ``[num_tokens, count]`` values (``[num_tokens]`` when
            ``count == 1``), in the field's dtype, or in another numeric dtype whose values
            convert exactly, or with the same bytes per token (``_field_bytes``); or
            ``(array, rows)``: rows ``rows`` of ``array``, gathered straight into the slots.
            Fields not given and padding are written as zeros in every slot written.

    Raises:
        InvalidArgumentError: an unknown field, a value of the wrong shape or dtype.
        CodecError: a slot beyond the buffer, or a layout whose fields overlap or overrun.
    """
    data = {f.name: f for f in layout.data_fields()}
    unknown = sorted(set(fields) - set(data))
    if unknown:
        raise InvalidArgumentError([Problem(name, "given", f"not a field of the {layout.name!r} record; its fields: "
                                                           f"{', '.join(data)}") for name in unknown])
    problem = _writer_problem(layout)
    if problem:
        raise CodecError(problem)
    values = {name: _split(v) for name, v in fields.items() if v is not None}
    ops = ops_for(out, *(v for v, _ in values.values()), argument="out")
    for name, (v, rows) in values.items():
        if not ops.is_array(v):
            raise InvalidArgumentError([Problem(name, type(v).__name__, f"must be a {ops.kind} array like the others")])
    like = out if out is not None else next(iter(values.values()), (None,))[0]
    counts = {(int(_shape(rows)[0]) if rows is not None else (int(_shape(v)[0]) if _shape(v) else -1))
              for v, rows in values.values()}
    if len(counts) > 1:
        raise InvalidArgumentError([Problem("fields", {k: list(_shape(v)) for k, (v, _) in values.items()},
                                            "every field needs the same number of tokens (rows)")])
    num_tokens = counts.pop() if counts else 0
    stride = layout.num_bytes
    target = _Slots(slots, num_tokens, ops, like)
    fresh = out is None
    if fresh:
        if target.index is not None or target.first:
            raise InvalidArgumentError([Problem("slots", "given", "needs out= (a buffer to place the slots in)")])
        out = ops.zeros(num_tokens * stride, ops.uint8, like)
    length = _check_buffer(out, ops)
    target.check(stride, length, stride, "pack:")
    for f in layout.fields:
        value, rows = values.get(f.name, (None, None)) if not f.is_padding else (None, None)
        if value is None and fresh:
            continue  # already zero
        column = _column(out, f, stride, length, ops)
        if value is None:
            source = 0
        elif rows is None:
            source = _field_bytes(f, value, num_tokens, ops)
        else:
            source = _field_bytes(f, value, int(_shape(value)[0]), ops)
            if target.index is None:  # gather straight into the slots
                ops.take_into(column[target.first:target.first + num_tokens], source, ops.index(rows, like))
                continue
            source = ops.gather_rows(source, ops.index(rows, like))
        if target.index is None:
            ops.assign(column[target.first:target.first + num_tokens], source)
        elif isinstance(source, int):
            ops.scatter_rows(column, target.index, ops.zeros((num_tokens, f.num_bytes), ops.uint8, like))
        else:
            ops.scatter_rows(column, target.index, source)
    return out


def unpack(layout: RecordLayout, buffer, *, num_slots: int | None = None, slots=None, fields=None,
           copy: bool = True) -> dict:
    """Read the fields of record slots: field name -> array.

    Args:
        layout: the record as the reader sees it (fields may run past the stride: a
            reader of DeepEP-Ascend's getters view reads the next slot's first bytes).
        buffer: contiguous 1-D uint8 (numpy array or torch tensor).
        num_slots: read slots ``0 .. num_slots - 1`` (default: every whole slot of the
            buffer, ``len(buffer) // stride``); ignored when ``slots`` is an index array.
        slots: an int (the first of ``num_slots`` consecutive slots) or an index array.
        fields: the names to read (default: every data field).
        copy: ``False`` returns views into the buffer where the slots are consecutive and
            the element type allows (they change when the buffer does).

    Returns:
        ``{name: [n, count] array}`` (2-D even when ``count == 1``) in the field's dtype as
        :mod:`epbuf.codec._arrays` maps it (numpy: BF16 as uint16 bits, FP8 as uint8 codes).

    Raises:
        CodecError: a slot whose field lies (partly) beyond the buffer.
    """
    ops = ops_for(buffer)
    length = _check_buffer(buffer, ops)
    stride = layout.num_bytes
    data = {f.name: f for f in layout.data_fields()}
    names = list(data) if fields is None else list(fields)
    for name in names:
        if name not in data:
            raise InvalidArgumentError([Problem("fields", name, f"not a field of the {layout.name!r} record; its "
                                                                f"fields: {', '.join(data)}")])
    if slots is not None and not isinstance(slots, int):
        num_tokens = int(_shape(slots)[0]) if hasattr(slots, "shape") else len(slots)
    else:
        num_tokens = max(0, length // stride - (slots or 0)) if num_slots is None else num_slots
        if num_tokens < 0:
            raise InvalidArgumentError([Problem("num_slots", num_tokens, "allowed >= 0")])
    source = _Slots(slots, num_tokens, ops, buffer)
    result = {}
    for name in names:
        f = data[name]
        source.check(stride, length, f.end, f"unpack: field {name!r} of")
        column = _column(buffer, f, stride, length, ops)
        dtype = ops.dtype(f.dtype)
        if source.index is not None:
            values = ops.as_dtype(ops.gather_rows(column, source.index), dtype)
        else:
            rows = column[source.first:source.first + num_tokens]
            values = ops.view_as(rows, dtype) if not copy else None
            values = ops.as_dtype(rows, dtype) if values is None else values
        result[name] = values.reshape(num_tokens, _elements(f))
    return result


def slot_rows(buffer, stride: int, num_slots: int, offset: int = 0):
    """The 2-D view ``[num_slots, stride]`` of ``buffer[offset:]``: whole records, for
    moving slots without reading their fields.

    Raises:
        CodecError: the slots do not fit in the buffer.
    """
    ops = ops_for(buffer)
    length = _check_buffer(buffer, ops)
    if offset + num_slots * stride > length:
        raise CodecError(f"{num_slots:,} slots of {stride:,} B from offset {offset:,} need "
                         f"{offset + num_slots * stride:,} B; the buffer holds {length:,} B")
    return ops.strided(buffer, offset, num_slots, stride, stride)
