"""A buffer seen as an array of records: :class:`RecordSlots` keeps each field's strided view
of the buffer and packs and unpacks through them (what :func:`~epbuf.codec.pack` and
:func:`~epbuf.codec.unpack` do once, and the runtime does on every call).
"""

from __future__ import annotations

from ..errors import ArgumentProblem as Problem
from ..errors import InvalidArgumentError, check_int
from ..report import RecordLayout
from ._arguments import TargetSlots, check_buffer, dtype_and_count, field_bytes, num_tokens_of, split_rows
from ._arrays import ops_for
from ._layout_spec import check_writable, layout_spec

__all__ = ["RecordSlots"]


def _addressable(offset: int, num_bytes: int, stride: int, length: int) -> int:
    """Slots whose bytes ``[offset, offset + num_bytes)`` lie inside a buffer of ``length`` bytes."""
    end = offset + num_bytes
    return max(0, (length - end) // stride + 1) if length >= end else 0


def _column(buffer, offset: int, num_bytes: int, stride: int, length: int, ops):
    """The strided ``[slots, num_bytes]`` byte view of one field in every addressable slot."""
    return ops.strided(buffer, offset, _addressable(offset, num_bytes, stride, length), num_bytes, stride)


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
    the copies and the checks of its arguments, not the set-up. :func:`~epbuf.codec.pack` and
    :func:`~epbuf.codec.unpack` build one per call; the runtime keeps one per region of its buffer.

    Args:
        layout: the record (its fields may run past the stride for reading; writing
            needs a layout whose fields neither overlap nor overrun).
        buffer: a contiguous 1-D uint8 numpy array or torch tensor.
    """

    __slots__ = ("layout", "buffer", "ops", "length", "stride", "spec", "_columns")

    def __init__(self, layout: RecordLayout, buffer) -> None:
        self.ops = ops_for(buffer)
        self.length = check_buffer(buffer, self.ops)
        self.layout, self.buffer, self.stride = layout, buffer, layout.num_bytes
        self.spec = layout_spec(layout)
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
        dtype, count = dtype_and_count(f, self.ops)
        rows = self._column(f.offset, f.num_bytes).bytes
        view = self.ops.view_as(rows, dtype)
        return None if view is None else view.reshape(rows.shape[0], count)

    def whole_records_bytes(self):
        """Every whole slot as one ``[slots, stride]`` uint8 row."""
        return self._column(0, self.stride).bytes

    def pack(self, *, slots=None, **fields):
        """:func:`~epbuf.codec.pack` into this buffer (same arguments, but no ``out``); returns the buffer."""
        ops = self.ops
        check_writable(self.layout, self.spec, fields)
        values = {name: split_rows(v) for name, v in fields.items() if v is not None}
        num_tokens = num_tokens_of(values, ops)
        target = TargetSlots(slots, num_tokens, ops, self.buffer)
        target.check(self.stride, self.length, self.stride, "pack:")
        _write(self, values, num_tokens, target)
        return self.buffer

    def unpack(self, *, num_slots: int | None = None, slots=None, fields=None, copy: bool = True) -> dict:
        """:func:`~epbuf.codec.unpack` of this buffer (same arguments)."""
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
            if num_slots is not None:
                check_int("num_slots", num_slots, 0)  # 1.5 reached a slice as a TypeError
            num_tokens = max(0, length // stride - (slots or 0)) if num_slots is None else num_slots
            if num_tokens < 0:
                raise InvalidArgumentError([Problem("num_slots", num_tokens, "allowed >= 0")])
        source = TargetSlots(slots, num_tokens, ops, self.buffer)
        first, index = source.first, source.index
        result = {}
        for name in names:
            f = data[name]
            source.check(stride, length, f.end, f"unpack: field {name!r} of")
            column = self._column(f.offset, f.num_bytes)
            dtype, count = dtype_and_count(f, ops)
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


def _write(slots: RecordSlots, values: dict, num_tokens: int, target: TargetSlots) -> None:
    """Every byte of the target slots, once: each field by one copy (word by word where the
    field and its source allow), padding and fields not given by one fill per run of zeros."""
    ops, data, like = slots.ops, slots.spec.data, slots.buffer
    first, index = target.first, target.index
    end = None if first is None else first + num_tokens
    index_rows = {}  # one index array per rows argument
    for name, (value, rows) in values.items():
        f = data[name]
        column = slots._column(f.offset, f.num_bytes)
        source = field_bytes(f, value, num_tokens if rows is None else int(value.shape[0]), ops)
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
