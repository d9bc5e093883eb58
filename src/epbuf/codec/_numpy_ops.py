"""The array operations of :mod:`epbuf.codec._arrays` on numpy arrays (host memory; the
``epbuf[codec]`` extra): BF16 as uint16 bit patterns, FP8 as uint8 codes (:mod:`epbuf.codec._dtypes`).

numpy is imported when the first :class:`NumpyOps` is built (:mod:`epbuf.codec._numpy`), not with this
module.
"""

from __future__ import annotations

from ._dtypes import field_dtype
from ._numpy import numpy_module

__all__ = ["NumpyOps"]


class NumpyOps:
    """Array operations on numpy arrays (host memory)."""

    kind = "numpy"

    def __init__(self) -> None:
        numpy = numpy_module()
        self.np = numpy
        self.uint8 = numpy.dtype(numpy.uint8)
        self.int64 = numpy.dtype(numpy.int64)
        self._WORDS = tuple((size, numpy.dtype(f"u{size}")) for size in (8, 4, 2))
        self._WORD = dict(self._WORDS)

    def is_array(self, value: object) -> bool:
        return isinstance(value, self.np.ndarray)

    def dtype(self, record_dtype: str):
        return self.np.dtype(field_dtype(record_dtype)[1])

    def dtype_name(self, value) -> str:
        return str(value.dtype)

    def itemsize(self, value) -> int:
        return value.dtype.itemsize

    def is_numeric(self, value) -> bool:
        return value.dtype.kind in "iuf"

    def zeros(self, shape, dtype, like=None):
        return self.np.zeros(shape, dtype=dtype)

    def empty(self, shape, dtype, like=None):
        return self.np.empty(shape, dtype=dtype)

    def index(self, values, like=None):
        """An int64 index array for ``values`` (a sequence or an array)."""
        return self.np.asarray(values, dtype=self.np.int64)

    def to_numpy(self, value):
        return self.np.asarray(value)

    def from_numpy(self, array, like=None):
        return array

    def byte_rows(self, value, num_rows: int, width: int):
        """``value`` as ``[num_rows, width]`` uint8, without a copy when it is contiguous."""
        return self.np.ascontiguousarray(value).view(self.np.uint8).reshape(num_rows, width)

    def strided(self, flat, offset: int, num_rows: int, width: int, stride: int):
        """The view ``[num_rows, width]`` whose row ``i`` is ``flat[offset + i*stride :][:width]``."""
        return self.np.lib.stride_tricks.as_strided(flat[offset:], shape=(num_rows, width), strides=(stride, 1))

    def as_dtype(self, rows, dtype):
        """Fresh contiguous ``rows`` (uint8) reinterpreted as ``dtype``."""
        return self.np.ascontiguousarray(rows).view(dtype)

    def word_size(self, rows) -> int:
        """The widest unsigned integer (8, 4, 2 bytes; 1 = bytes) the 2-D uint8 view ``rows``
        (last axis contiguous) can be copied as: its width and row stride divisible, its
        address aligned. Words copy 3-4x faster than bytes on rows of tens of bytes; rows of
        1 KiB and more stay bytes, which numpy copies with ``memmove`` (as fast, often faster)."""
        width = rows.shape[-1]
        if width >= 1024:
            return 1
        for size, dtype in self._WORDS:
            if width % size == 0 and rows.strides[0] % size == 0 and rows.view(dtype).flags.aligned:
                return size
        return 1

    def as_words(self, rows, size: int):
        """``rows`` (2-D uint8, last axis contiguous) viewed as ``size``-byte words, or ``None``
        when its width or row stride does not allow them."""
        if size == 1:
            return rows
        if rows.shape[-1] % size or rows.strides[0] % size:
            return None
        return rows.view(self._WORD[size])

    def copy_into(self, out, rows) -> None:
        """``out[...] = rows`` (same shape and dtype)."""
        self.np.copyto(out, rows)

    def fill_zero(self, out) -> None:
        out.fill(0)

    def gather_into(self, out, rows, index) -> None:
        """``out[...] = rows[index]`` (2-D, same dtype)."""
        out[...] = rows[index]

    def gather(self, rows, index):
        """``rows[index]``, fresh and contiguous."""
        return rows[index]

    def scatter_into(self, rows, index, values) -> None:
        """``rows[index] = values`` (unique indices)."""
        rows[index] = values

    def zero_at(self, rows, index) -> None:
        rows[index] = 0

    def take(self, value, index):
        return value[index]

    def move(self, flat, source: int, target: int, num_bytes: int) -> None:
        """``flat[target:][:num_bytes] = flat[source:][:num_bytes]``, overlapping or not."""
        flat[target:target + num_bytes] = flat[source:source + num_bytes]  # numpy buffers overlapping copies

    def view_as(self, rows, dtype):
        """``rows`` (uint8, last axis contiguous) viewed as ``dtype`` without a copy."""
        if rows.shape[-1] % dtype.itemsize:
            return None
        return rows.view(dtype)

    def cast(self, value, dtype):
        return value.astype(dtype)

    def equal(self, a, b) -> bool:
        return bool(self.np.array_equal(a, b))

    def check_flat_bytes(self, buffer) -> bool:
        return isinstance(buffer, self.np.ndarray) and buffer.dtype == self.np.uint8 and buffer.ndim == 1 and \
            buffer.flags.c_contiguous

    def length(self, buffer) -> int:
        return int(buffer.shape[0])

    # BF16 arithmetic for the combine reduction (bit patterns in numpy).
    def bf16_to_float32(self, bits):
        from .bf16 import bfloat16_to_float32

        return bfloat16_to_float32(bits)

    def float32_to_bf16(self, values):
        from .bf16 import float32_to_bfloat16

        return float32_to_bfloat16(values)

    def float32(self, value):
        return value.astype(self.np.float32)

    def is_bfloat16(self, value) -> bool:
        return value.dtype == self.np.uint16

    def index_add(self, acc, index, values) -> None:
        acc[index] += values  # unique indices: one addition per element

    def load_bfloat16(self, acc, bits) -> None:
        """``acc[...] = float32(bits)``: fp32 ``acc``, BF16 values as their uint16 bit patterns."""
        acc[...] = self.bf16_to_float32(bits)

    def add_bfloat16(self, acc, bits) -> None:
        """``acc += float32(bits)`` (IEEE results for infinities and NaN, without warnings)."""
        with self.np.errstate(over="ignore", invalid="ignore"):
            acc += self.bf16_to_float32(bits)

    def store_bfloat16(self, out, acc) -> None:
        """``out[...] = bfloat16(acc + 0.0)`` (bit patterns, round to nearest even); the +0.0
        turns a -0.0 sum into +0.0, as a sum that starts from +0.0 ends."""
        with self.np.errstate(over="ignore", invalid="ignore"):
            out[...] = self.float32_to_bf16(acc + self.np.float32(0.0))

    def where(self, mask, values, other: float):
        return self.np.where(mask, values, self.np.asarray(other, dtype=values.dtype))

    def concat(self, arrays, like=None):
        return self.np.concatenate(arrays) if arrays else self.np.empty(0, self.np.uint8)
