"""BF16 as bit patterns in numpy (numpy has no bfloat16): exact widening to float32 and
round-to-nearest-even narrowing, as c10's scalar ``BFloat16`` conversions do.

Kept apart from :mod:`epbuf.codec.fp8` (which re-exports both) so the numpy back-end,
:mod:`epbuf.codec._numpy_ops`, can use them without an import cycle.
"""

from __future__ import annotations

from ._numpy import numpy_module


def bfloat16_to_float32(bits):
    """float32 values of BF16 bit patterns (uint16): exact."""
    np = numpy_module()
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def float32_to_bfloat16(values):
    """BF16 bit patterns (uint16) of float32 ``values``: round to nearest even, NaN -> 0x7FC0."""
    np = numpy_module()
    values = np.ascontiguousarray(values, dtype=np.float32)
    bits = values.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(values), np.uint16(0x7FC0), rounded)
