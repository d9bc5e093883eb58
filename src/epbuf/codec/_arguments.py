"""The arguments of :func:`~epbuf.codec.pack` and :func:`~epbuf.codec.unpack` as the codec reads
them: field values as the bytes of a record field, the slots a call addresses, the buffer.
"""

from __future__ import annotations

from ..errors import ArgumentProblem as Problem
from ..errors import EpbufError, InvalidArgumentError
from ..report import Field
from ._arrays import describe
from ._dtypes import NUMERIC_DTYPES, field_dtype

__all__ = ["CodecError", "dtype_and_count", "field_bytes", "split_rows", "num_tokens_of", "TargetSlots",
           "check_buffer"]


class CodecError(EpbufError):
    """A buffer too small for the slots asked for, or a record that cannot be written."""


def _shape(value) -> tuple:
    return tuple(int(d) for d in value.shape)


def _problem(field: Field, value, ops, why: str) -> InvalidArgumentError:
    return InvalidArgumentError([Problem(field.name, describe(ops, value),
                                         f"the record field is {field.dtype} x {field.count} = {field.num_bytes} B per "
                                         f"token; {why}")])


_WANT: dict = {}


def dtype_and_count(field: Field, ops) -> tuple:
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


def field_bytes(field: Field, value, num_tokens: int, ops):
    """``value`` as ``[num_tokens, field.num_bytes]`` uint8: same dtype as the field; or the
    same element count in another numeric dtype, converted when every value survives; or
    the same bytes per token, reinterpreted (fp32 scales as Ascend's int16 SF packs)."""
    shape = value.shape
    if not shape or shape[0] != num_tokens:
        raise _problem(field, value, ops, f"expected {num_tokens} tokens (rows) like the other fields")
    want, count = dtype_and_count(field, ops)
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


def split_rows(value):
    """``(array, rows)`` for a field given as ``(array, rows)``, else ``(value, None)``."""
    if isinstance(value, tuple) and len(value) == 2:
        return value
    return value, None


def num_tokens_of(values: dict, ops) -> int:
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


class TargetSlots:
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


def check_buffer(buffer, ops) -> int:
    if not ops.check_flat_bytes(buffer):
        raise InvalidArgumentError([Problem("buffer", describe(ops, buffer),
                                            "must be a contiguous 1-D uint8 array")])
    return ops.length(buffer)
