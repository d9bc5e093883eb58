"""The array operations of :mod:`epbuf.codec._arrays` on torch tensors, on the tensor's device
(the ``epbuf[torch]`` extra): the same interface as :class:`~epbuf.codec._numpy_ops.NumpyOps`.

torch is imported when the first :class:`TorchOps` is built, not with this module.
"""

from __future__ import annotations

from .._lazy import optional
from ._dtypes import field_dtype

__all__ = ["TorchOps"]


class TorchOps:
    """The same operations on torch tensors, on the tensor's device."""

    kind = "torch"

    def __init__(self) -> None:
        torch = optional("torch", "this feature needs PyTorch: pip install 'epbuf[torch]'")
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
