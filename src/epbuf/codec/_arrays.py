"""numpy and torch behind one small interface, so the codec and the runtime run the same
code on a numpy array (CPU, the ``epbuf[codec]`` extra) or a torch tensor on any device
(the ``epbuf[torch]`` extra).

Neither library is imported until an array of it is seen: :func:`ops_for` looks at the
type's module name first.

Field dtypes
------------
The backends name each field's element type as upstream declares it. Their
representation here:

=====================  =====  ==========================  =====================
record dtype           bytes  numpy                       torch
=====================  =====  ==========================  =====================
``uint8``, ``int16``,  1-8    the same                    the same
``int32``, ``int64``,
``float32``
``bfloat16``           2      ``uint16`` (the bit pattern) ``torch.bfloat16``
``float8_e4m3fn``,     1      ``uint8`` (the code)        ``torch.float8_e4m3fn``
``float8_e4m3``
``sf_pack_t``          4      ``float32``                 ``torch.float32``
anything else          1      ``uint8`` (raw bytes)       ``torch.uint8``
=====================  =====  ==========================  =====================

``sf_pack_t`` is DeepEP V2's ``union { float fp32; int ue8m0x4; }`` (``compiled.cuh:74-77
@dd758ca``): the codec reads its fp32 member; ``.view(int32)`` gives the packed UE8M0 form.
``float8_e4m3`` is DeepEP V1's ``__nv_fp8_e4m3``, the same encoding as ``float8_e4m3fn``.
"""

from __future__ import annotations

from ..errors import ArgumentProblem as Problem
from ..errors import InvalidArgumentError, MissingExtraError

__all__ = ["ops_for", "numpy_ops", "torch_ops", "FIELD_DTYPES", "NUMERIC_DTYPES"]

# record dtype -> (element bytes, numpy name, torch name)
FIELD_DTYPES: dict[str, tuple[int, str, str]] = {
    "uint8": (1, "uint8", "uint8"),
    "int16": (2, "int16", "int16"),
    "int32": (4, "int32", "int32"),
    "int64": (8, "int64", "int64"),
    "float32": (4, "float32", "float32"),
    "bfloat16": (2, "uint16", "bfloat16"),
    "float8_e4m3fn": (1, "uint8", "float8_e4m3fn"),
    "float8_e4m3": (1, "uint8", "float8_e4m3fn"),
    "sf_pack_t": (4, "float32", "float32"),
}
_RAW = (1, "uint8", "uint8")
# Fields whose values a caller may give in another numeric dtype: converted when every value
# survives the conversion exactly (e.g. int64 top-k indices into DeepEP V2's int32 slots).
NUMERIC_DTYPES = frozenset({"uint8", "int16", "int32", "int64", "float32"})


def field_dtype(name: str) -> tuple[int, str, str]:
    return FIELD_DTYPES.get(name, _RAW)


def _missing(extra: str, module: str) -> MissingExtraError:
    return MissingExtraError(f"this feature needs {module}: pip install 'epbuf[{extra}]'")


class _NumpyOps:
    """Array operations on numpy arrays (host memory)."""

    kind = "numpy"

    def __init__(self) -> None:
        try:
            import numpy
        except ImportError:
            raise _missing("codec", "numpy") from None
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


class _TorchOps:
    """The same operations on torch tensors, on the tensor's device."""

    kind = "torch"

    def __init__(self) -> None:
        try:
            import torch
        except ImportError:
            raise _missing("torch", "PyTorch") from None
        self.torch = torch
        self.uint8 = torch.uint8
        self.int64 = torch.int64
        self._WORDS = ((8, torch.int64), (4, torch.int32), (2, torch.int16))
        self._WORD = dict(self._WORDS)

    def is_array(self, value: object) -> bool:
        return isinstance(value, self.torch.Tensor)

    def dtype(self, record_dtype: str):
        return getattr(self.torch, field_dtype(record_dtype)[2])

    def dtype_name(self, value) -> str:
        return str(value.dtype).removeprefix("torch.")

    def itemsize(self, value) -> int:
        return value.element_size()

    def is_numeric(self, value) -> bool:
        return value.dtype in (self.torch.uint8, self.torch.int8, self.torch.int16, self.torch.int32,
                               self.torch.int64, self.torch.float16, self.torch.float32, self.torch.float64)

    def _device(self, like):
        return like.device if like is not None else None

    def zeros(self, shape, dtype, like=None):
        return self.torch.zeros(shape, dtype=dtype, device=self._device(like))

    def empty(self, shape, dtype, like=None):
        return self.torch.empty(shape, dtype=dtype, device=self._device(like))

    def index(self, values, like=None):
        if isinstance(values, self.torch.Tensor):
            return values.to(device=self._device(like) or values.device, dtype=self.torch.int64)
        import numpy

        return self.torch.from_numpy(numpy.asarray(values, dtype=numpy.int64)).to(self._device(like) or "cpu")

    def to_numpy(self, value):
        return value.detach().cpu().numpy()

    def from_numpy(self, array, like=None):
        tensor = self.torch.from_numpy(array)
        return tensor.to(like.device) if like is not None else tensor

    def byte_rows(self, value, num_rows: int, width: int):
        if value.numel() == 0:  # empty tensors may carry strides view(dtype) refuses
            return self.torch.empty((num_rows, width), dtype=self.torch.uint8, device=value.device)
        return value.contiguous().view(self.torch.uint8).reshape(num_rows, width)

    def strided(self, flat, offset: int, num_rows: int, width: int, stride: int):
        return flat.as_strided((num_rows, width), (stride, 1), flat.storage_offset() + offset)

    def as_dtype(self, rows, dtype):
        if rows.numel() == 0:
            size = self.torch.empty(0, dtype=dtype).element_size()
            return self.torch.empty((rows.shape[0], rows.shape[1] // size), dtype=dtype, device=rows.device)
        return rows.contiguous().view(dtype)

    def word_size(self, rows) -> int:
        """As numpy's, for torch: width, row stride and storage offset divisible (torch's
        ``view(dtype)`` rule); torch copies words several times faster than bytes at any width."""
        width = rows.shape[-1]
        for size, _ in self._WORDS:
            if width % size == 0 and rows.stride(0) % size == 0 and rows.storage_offset() % size == 0:
                return size
        return 1

    def as_words(self, rows, size: int):
        if size == 1:
            return rows
        if rows.shape[-1] % size or rows.stride(0) % size or rows.storage_offset() % size:
            return None
        return rows.view(self._WORD[size])

    def copy_into(self, out, rows) -> None:
        out.copy_(rows)

    def fill_zero(self, out) -> None:
        out.zero_()

    def gather_into(self, out, rows, index) -> None:
        self.torch.index_select(rows, 0, index, out=out)  # writes straight into a strided ``out``

    def gather(self, rows, index):
        return rows.index_select(0, index)  # much faster than rows[index] on a strided view

    def scatter_into(self, rows, index, values) -> None:
        if rows.device.type == "cpu":  # index_copy_ into a strided CPU view is ~30x slower than numpy's
            rows.numpy()[index.numpy()] = values.numpy()
        else:
            rows.index_copy_(0, index, values)

    def zero_at(self, rows, index) -> None:
        if rows.device.type == "cpu":
            rows.numpy()[index.numpy()] = 0
        else:
            rows.index_fill_(0, index, 0)

    def take(self, value, index):
        return value.index_select(0, index)

    def move(self, flat, source: int, target: int, num_bytes: int) -> None:
        chunk = flat[source:source + num_bytes]
        if abs(target - source) < num_bytes:  # torch refuses partially overlapping copies
            chunk = chunk.clone()
        flat[target:target + num_bytes].copy_(chunk)

    def view_as(self, rows, dtype):
        """``rows`` (uint8, last axis contiguous) viewed as ``dtype`` without a copy, when torch allows."""
        size = self.torch.empty(0, dtype=dtype).element_size()
        if rows.numel() == 0 or rows.shape[-1] % size or rows.storage_offset() % size or \
                any(s % size for s in rows.stride()[:-1]):
            return None
        return rows.view(dtype)

    def cast(self, value, dtype):
        return value.to(dtype)

    def equal(self, a, b) -> bool:
        return bool(self.torch.equal(a, b))

    def check_flat_bytes(self, buffer) -> bool:
        return isinstance(buffer, self.torch.Tensor) and buffer.dtype == self.torch.uint8 and buffer.dim() == 1 and \
            buffer.is_contiguous()

    def length(self, buffer) -> int:
        return int(buffer.shape[0])

    def bf16_to_float32(self, values):
        return values.float()

    def float32_to_bf16(self, values):
        return values.to(self.torch.bfloat16)  # round to nearest even, as c10::BFloat16

    def float32(self, value):
        return value.float()

    def is_bfloat16(self, value) -> bool:
        return value.dtype == self.torch.bfloat16

    def index_add(self, acc, index, values) -> None:
        acc.index_add_(0, index, values)

    def load_bfloat16(self, acc, values) -> None:
        acc.copy_(values)  # exact

    def add_bfloat16(self, acc, values) -> None:
        """``acc += values.float()`` without the temporary: torch adds a BF16 tensor (even a
        strided view) into fp32 exactly, several times faster than ``.float()`` of the view."""
        acc.add_(values)

    def store_bfloat16(self, out, acc) -> None:
        # fp32 acc + 0.0, rounded to nearest even into BF16 ``out`` (as .to(torch.bfloat16)):
        # the +0.0 turns a -0.0 sum into +0.0, as a sum that starts from +0.0 ends.
        self.torch.add(acc, 0.0, out=out)

    def where(self, mask, values, other: float):
        return self.torch.where(mask, values, other)

    def concat(self, arrays, like=None):
        return self.torch.cat(arrays) if arrays else self.torch.empty(0, dtype=self.torch.uint8,
                                                                       device=self._device(like))


_OPS: dict[str, object] = {}


def numpy_ops() -> _NumpyOps:
    if "numpy" not in _OPS:
        _OPS["numpy"] = _NumpyOps()
    return _OPS["numpy"]  # type: ignore[return-value]


def torch_ops() -> _TorchOps:
    if "torch" not in _OPS:
        _OPS["torch"] = _TorchOps()
    return _OPS["torch"]  # type: ignore[return-value]


def ops_for(*values: object, argument: str = "buffer"):
    """The operations for the first array among ``values`` (``None`` entries skipped):
    torch for a ``torch.Tensor``, numpy for a ``numpy.ndarray``."""
    for value in values:
        if value is None:
            continue
        module = type(value).__module__.split(".")[0]
        if module == "torch":
            return torch_ops()
        if module == "numpy":
            return numpy_ops()
        raise InvalidArgumentError([Problem(argument, type(value).__name__,
                                            "must be a numpy.ndarray or a torch.Tensor")])
    return numpy_ops()
