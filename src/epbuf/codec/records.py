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

__all__ = ["pack", "unpack", "slot_rows", "RecordSlots", "CodecError"]


class CodecError(EpbufError):
    """A buffer too small for the slots asked for, or a record that cannot be written."""


def _shape(value) -> tuple:
    return tuple(int(d) for d in value.shape)


def _problem(field: Field, value, ops, why: str) -> InvalidArgumentError:
    described = f"{ops.dtype_name(value)} {list(_shape(value))}"
    return InvalidArgumentError([Problem(field.name, described,
                                         f"the record field is {field.dtype} x {field.count} = {field.num_bytes} B per "
                                         f"token; {why}")])


_WANT: dict = {}


def _want(field: Field, ops) -> tuple:
    """``(dtype, elements per token)`` of ``field`` for ``ops`` (cached: asked for every field
    of every pack)."""
    key = (ops.kind, field.dtype, field.count, field.num_bytes)
    found = _WANT.get(key)
    if found is None:
        found = _WANT[key] = (ops.dtype(field.dtype), _elements(field))
    return found


def _elements(field: Field) -> int:
    """Elements of the field's dtype per token (raw bytes for dtypes without a size of their own)."""
    size = field_dtype(field.dtype)[0]
    return field.count if field.count * size == field.num_bytes else field.num_bytes // size


def _field_bytes(field: Field, value, num_tokens: int, ops):
    """``value`` as ``[num_tokens, field.num_bytes]`` uint8: same dtype as the field; or the
    same element count in another numeric dtype, converted when every value survives; or
    the same bytes per token, reinterpreted (fp32 scales as Ascend's int16 SF packs)."""
    shape = value.shape
    if not shape or shape[0] != num_tokens:
        raise _problem(field, value, ops, f"expected {num_tokens} tokens (rows) like the other fields")
    want, count = _want(field, ops)
    if value.dtype == want and (shape[1:] == (count,) or (count == 1 and len(shape) == 1)):  # the usual case
        return ops.byte_rows(value, num_tokens, field.num_bytes)
    per_token = 1
    for d in shape[1:]:
        per_token *= int(d)
    row_bytes = per_token * ops.itemsize(value)
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
        if self.index.shape != (count,):
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


def _addressable(offset: int, num_bytes: int, stride: int, length: int) -> int:
    """Slots whose bytes ``[offset, offset + num_bytes)`` lie inside a buffer of ``length`` bytes."""
    end = offset + num_bytes
    return max(0, (length - end) // stride + 1) if length >= end else 0


def _column(buffer, offset: int, num_bytes: int, stride: int, length: int, ops):
    """The strided ``[slots, num_bytes]`` byte view of one field in every addressable slot."""
    return ops.strided(buffer, offset, _addressable(offset, num_bytes, stride, length), num_bytes, stride)


def _split(value):
    """``(array, rows)`` for a field given as ``(array, rows)``, else ``(value, None)``."""
    if isinstance(value, tuple) and len(value) == 2:
        return value
    return value, None


class _Spec:
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


_SPECS: dict[int, _Spec] = {}


def _spec(layout: RecordLayout) -> _Spec:
    """The layout's :class:`_Spec`, found by identity (hashing a layout costs more than a
    small pack); equal layouts built separately share an entry through ``_writer_problem``."""
    spec = _SPECS.get(id(layout))
    if spec is None or spec.layout is not layout:
        if len(_SPECS) >= 256:
            _SPECS.clear()
        spec = _SPECS[id(layout)] = _Spec(layout)
    return spec


@lru_cache(maxsize=256)
def _writer_problem(layout: RecordLayout) -> str | None:
    """Why ``layout`` cannot be written slot after slot (fields overlapping or past the stride)."""
    if layout.overlaps() or layout.overrun_bytes():
        return (f"the {layout.name!r} record ({layout.view or 'no view'}) has fields that overlap "
                f"{layout.overlaps()} or end {layout.overrun_bytes()} B past its {layout.num_bytes}-byte "
                "stride; a writer must stay inside its slot (use the writer view)")
    return None


class _Column:
    """One field (or run of bytes) in every addressable slot of a buffer: the strided byte
    view ``[slots, num_bytes]`` and the same bytes as the widest words it allows."""

    __slots__ = ("bytes", "words", "size")

    def __init__(self, rows, ops) -> None:
        self.bytes = rows
        self.size = ops.word_size(rows) if rows.shape[0] else 1
        self.words = ops.as_words(rows, self.size)


class RecordSlots:
    """A buffer seen as an array of ``layout`` records, for packing and unpacking it again
    and again: each field's strided view is built on first use and kept, so a call costs
    the copies and the checks of its arguments, not the set-up. :func:`pack` and
    :func:`unpack` build one per call; the runtime keeps one per region of its buffer.

    Args:
        layout: the record (its fields may run past the stride for reading; writing
            needs a layout whose fields neither overlap nor overrun).
        buffer: a contiguous 1-D uint8 numpy array or torch tensor.
    """

    __slots__ = ("layout", "buffer", "ops", "length", "stride", "spec", "_columns")

    def __init__(self, layout: RecordLayout, buffer) -> None:
        self.ops = ops_for(buffer)
        self.length = _check_buffer(buffer, self.ops)
        self.layout, self.buffer, self.stride = layout, buffer, layout.num_bytes
        self.spec = _spec(layout)
        self._columns: dict = {}

    def _column(self, offset: int, num_bytes: int) -> _Column:
        key = (offset, num_bytes)
        column = self._columns.get(key)
        if column is None:
            column = self._columns[key] = _Column(_column(self.buffer, offset, num_bytes, self.stride, self.length,
                                                          self.ops), self.ops)
        return column

    def whole_records(self, size: bool = False):
        """Every whole slot as one row: ``[slots, stride]`` bytes viewed as the widest words
        the stride allows (for moving records without reading their fields)."""
        column = self._column(0, self.stride)
        return (column.words, column.size) if size else column.words

    def field_view(self, name: str):
        """Field ``name`` of every addressable slot as a zero-copy ``[slots, count]`` view in
        its dtype (it aliases the buffer), or ``None`` where the element type allows none."""
        f = self.spec.data[name]
        dtype, count = _want(f, self.ops)
        rows = self._column(f.offset, f.num_bytes).bytes
        view = self.ops.view_as(rows, dtype)
        return None if view is None else view.reshape(rows.shape[0], count)

    def whole_records_bytes(self):
        """Every whole slot as one ``[slots, stride]`` uint8 row."""
        return self._column(0, self.stride).bytes

    def pack(self, *, slots=None, **fields):
        """:func:`pack` into this buffer (same arguments, but no ``out``); returns the buffer."""
        ops = self.ops
        _check_writable(self.layout, self.spec, fields)
        values = {name: _split(v) for name, v in fields.items() if v is not None}
        num_tokens = _num_tokens(values, ops)
        target = _Slots(slots, num_tokens, ops, self.buffer)
        target.check(self.stride, self.length, self.stride, "pack:")
        _write(self, values, num_tokens, target)
        return self.buffer

    def unpack(self, *, num_slots: int | None = None, slots=None, fields=None, copy: bool = True) -> dict:
        """:func:`unpack` of this buffer (same arguments)."""
        layout, ops, stride, length = self.layout, self.ops, self.stride, self.length
        data = self.spec.data
        names = data if fields is None else fields
        for name in names:
            if name not in data:
                raise InvalidArgumentError([Problem("fields", name, f"not a field of the {layout.name!r} record; its "
                                                                    f"fields: {', '.join(data)}")])
        if slots is not None and not isinstance(slots, int):
            num_tokens = int(slots.shape[0]) if hasattr(slots, "shape") else len(slots)
        else:
            num_tokens = max(0, length // stride - (slots or 0)) if num_slots is None else num_slots
            if num_tokens < 0:
                raise InvalidArgumentError([Problem("num_slots", num_tokens, "allowed >= 0")])
        source = _Slots(slots, num_tokens, ops, self.buffer)
        first, index = source.first, source.index
        result = {}
        for name in names:
            f = data[name]
            source.check(stride, length, f.end, f"unpack: field {name!r} of")
            column = self._column(f.offset, f.num_bytes)
            dtype, count = _want(f, ops)
            if not num_tokens:
                result[name] = ops.empty((0, count), dtype, self.buffer)
                continue
            if index is not None:  # one gather, word by word, into a fresh array
                values = ops.gather(column.words, index)
                values = ops.as_dtype(values.view(ops.uint8) if column.size > 1 else values, dtype)
            else:
                rows = column.bytes[first:first + num_tokens]
                values = None if copy else ops.view_as(rows, dtype)
                if values is None:
                    owned = ops.empty((num_tokens, f.num_bytes), ops.uint8, self.buffer)
                    ops.copy_into(ops.as_words(owned, column.size), column.words[first:first + num_tokens])
                    values = ops.as_dtype(owned, dtype)
            result[name] = values.reshape(num_tokens, count)
        return result


def _check_writable(layout: RecordLayout, spec: _Spec, fields: dict) -> None:
    """Unknown field names, or a layout no writer can fill slot after slot."""
    data = spec.data
    if not fields.keys() <= data.keys():
        raise InvalidArgumentError([Problem(name, "given", f"not a field of the {layout.name!r} record; its fields: "
                                                           f"{', '.join(data)}")
                                    for name in sorted(set(fields) - set(data))])
    if spec.writer_problem:
        raise CodecError(spec.writer_problem)


def _num_tokens(values: dict, ops) -> int:
    """The tokens (rows) every field gives; every value must be an array of ``ops``' kind."""
    counts = set()
    for name, (v, rows) in values.items():
        if not ops.is_array(v):
            raise InvalidArgumentError([Problem(name, type(v).__name__, f"must be a {ops.kind} array like the others")])
        counts.add(int(rows.shape[0]) if rows is not None else (int(v.shape[0]) if v.shape else -1))
    if len(counts) > 1:
        raise InvalidArgumentError([Problem("fields", {k: list(_shape(v)) for k, (v, _) in values.items()},
                                            "every field needs the same number of tokens (rows)")])
    return counts.pop() if counts else 0


def _write(slots: RecordSlots, values: dict, num_tokens: int, target: _Slots) -> None:
    """Every byte of the target slots, once: each field by one copy (word by word where the
    field and its source allow), padding and fields not given by one fill per run of zeros."""
    ops, data, like = slots.ops, slots.spec.data, slots.buffer
    first, index = target.first, target.index
    end = None if first is None else first + num_tokens
    index_rows = {}  # one index array per rows argument
    for name, (value, rows) in values.items():
        f = data[name]
        column = slots._column(f.offset, f.num_bytes)
        source = _field_bytes(f, value, num_tokens if rows is None else int(value.shape[0]), ops)
        words = ops.as_words(source, column.size)
        dst, src = (column.words, words) if words is not None else (column.bytes, source)
        if not num_tokens:
            continue
        if rows is not None:
            key = id(rows)
            if key not in index_rows:
                index_rows[key] = (rows, ops.index(rows, like))
            rows_index = index_rows[key][1]
            if index is None:  # gather straight into the slots
                ops.gather_into(dst[first:end], src, rows_index)
                continue
            src = ops.gather(src, rows_index)
        if index is None:
            ops.copy_into(dst[first:end], src)
        else:
            ops.scatter_into(dst, index, src)
    if not num_tokens:
        return
    for offset, num_bytes in slots.spec.zero_runs(values):
        column = slots._column(offset, num_bytes)
        if index is None:
            ops.fill_zero(column.words[first:end])
        else:
            ops.zero_at(column.words, index)


def pack(layout: RecordLayout, *, out=None, slots=None, **fields):
    """Write tokens into record slots and return the buffer.

    Every byte of a written slot is written once: each given field by one vectorised copy
    (a gather when given as ``(array, rows)``), padding and fields not given by one fill
    of zeros per run of adjacent such bytes. Bytes outside the written slots are untouched.
    To pack into the same buffer many times, :class:`RecordSlots` skips the per-call set-up.

    Args:
        layout: the record (``report.record("dispatch")`` ...). Its data fields must not
            overlap nor run past the stride: a writer stays inside its slot.
        out: a contiguous 1-D uint8 buffer (numpy array or torch tensor) to write into;
            ``None`` allocates ``num_tokens x stride`` bytes (numpy, or torch on the
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
    _check_writable(layout, _spec(layout), fields)
    if out is None:
        given = {name: _split(v) for name, v in fields.items() if v is not None}
        ops = ops_for(*(v for v, _ in given.values()), argument="out")
        num_tokens = _num_tokens(given, ops)
        if slots is not None and not (isinstance(slots, int) and not isinstance(slots, bool) and slots == 0):
            raise InvalidArgumentError([Problem("slots", "given", "needs out= (a buffer to place the slots in)")])
        like = next(iter(given.values()), (None,))[0]
        out = ops.empty(num_tokens * layout.num_bytes, ops.uint8, like)  # every byte is written
    else:
        ops_for(out, *(_split(v)[0] for v in fields.values() if v is not None), argument="out")
    return RecordSlots(layout, out).pack(slots=slots, **fields)


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
        copy: ``True`` (default): arrays of their own, one copy of the field's bytes each.
            ``False``: for consecutive slots, zero-copy strided views into ``buffer`` where
            the element type allows (numpy: always; torch: when the field's offset and the
            stride are multiples of its element size) — they **alias the buffer**: a later
            write to the buffer (the next ``pack``, the runtime's next dispatch or combine)
            changes them. Index-array slots always copy.

    Returns:
        ``{name: [n, count] array}`` (2-D even when ``count == 1``) in the field's dtype as
        :mod:`epbuf.codec._arrays` maps it (numpy: BF16 as uint16 bits, FP8 as uint8 codes).

    Raises:
        CodecError: a slot whose field lies (partly) beyond the buffer.
    """
    return RecordSlots(layout, buffer).unpack(num_slots=num_slots, slots=slots, fields=fields, copy=copy)


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
