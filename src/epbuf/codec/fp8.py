"""FP8 (e4m3fn) block quantisation and BF16 rounding in numpy, bit-exact with PyTorch.

DeepEP's FP8 recipe (``per_token_cast_to_fp8``, ``deep_ep/utils/math.py:31-39 @dd758ca``):
each token is cut into blocks of 128 elements (the last one zero-padded); per block
``amax = max(|x|)`` clamped to at least ``1e-4``; the codes are ``e4m3fn(x * (448 / amax))``
and the fp32 scale is ``amax / 448``. ``per_token_cast_back`` (``:43-55``) multiplies back.
On DeepEP-Ascend the fp32 scales travel as two ``int16`` SF packs each (``sf.view(int16)``,
the dispatch asserts ``sf.element_size() == 2``); DeepEP V2 stores them as 4-byte
``sf_pack_t`` and V1 low-latency as ``float32``: the same bytes in every case.

Error bound
-----------
For every element ``x`` of a block with scale ``s = max(amax, 1e-4) / 448``::

    |dequantize_fp8(*quantize_fp8(x)) - x|  <=  2**-4 * |x|  +  2**-10 * s  +  2**-20 * |x|

``2**-4 |x|``: half a unit in the last place of e4m3's 3-bit mantissa (normal codes);
``2**-10 s``: half the subnormal spacing ``2**-9``, scaled back; ``2**-20 |x|``: a generous
margin for the three fp32 roundings (``448 / amax``, the product, and ``code * s``).
``tests/test_codec.py`` checks the bound with hypothesis.

Conversions
-----------
:func:`float32_to_e4m3fn` rounds to nearest, ties to even, and saturates to ±448 (no
value of the recipe exceeds 448; PyTorch's own cast agrees on every value up to 448).
:func:`float32_to_bfloat16` rounds to nearest even, as ``c10::BFloat16`` does, so numpy and
torch agree bit for bit on every value but NaN (here ``0x7FC0``, as c10's scalar path;
torch's vectorised CPU cast gives ``0xFFFF``: both NaN).

>>> import numpy as np
>>> codes, scales = quantize_fp8(np.array([[1.0, -2.0, 0.5] + [0.0] * 125], dtype=np.float32))
>>> codes[0, :3].tolist(), scales.tolist()
([118, 254, 110], [[0.004464285913854837]])
>>> dequantize_fp8(codes, scales)[0, :3].tolist()
[1.0, -2.0, 0.5]
"""

from __future__ import annotations

from ..errors import ArgumentProblem as Problem
from ..errors import InvalidArgumentError
from ._arrays import numpy_ops
from .bf16 import bfloat16_to_float32, float32_to_bfloat16  # noqa: F401 (part of this module's API)

__all__ = [
    "E4M3_MAX",
    "FP8_BLOCK_SIZE",
    "AMAX_MIN",
    "float32_to_e4m3fn",
    "e4m3fn_to_float32",
    "float32_to_bfloat16",
    "bfloat16_to_float32",
    "quantize_fp8",
    "dequantize_fp8",
    "num_scales",
]

E4M3_MAX = 448.0  # the largest finite e4m3fn value, 0x7E
FP8_BLOCK_SIZE = 128  # elements per scale (per_token_cast_to_fp8: x.view(m, -1, 128))
AMAX_MIN = 1e-4  # .clamp(1e-4) of the block amax
_NAN_CODE = 0x7F


def _np():
    return numpy_ops().np


def num_scales(hidden: int) -> int:
    """Scales per token: ``ceil(hidden / 128)``."""
    return (hidden + FP8_BLOCK_SIZE - 1) // FP8_BLOCK_SIZE


_DECODE = None


def _decode_table():
    """float32 value of each of the 256 e4m3fn codes (``0x7F``/``0xFF`` are NaN)."""
    global _DECODE
    if _DECODE is None:
        np = _np()
        codes = np.arange(256)
        exponent = (codes >> 3) & 0xF
        mantissa = (codes & 7).astype(np.float64)
        magnitude = np.where(exponent == 0, mantissa * 2.0 ** -9, (1 + mantissa / 8) * 2.0 ** (exponent - 7))
        table = np.where(codes & 0x80, -magnitude, magnitude).astype(np.float32)
        table[(codes & 0x7F) == _NAN_CODE] = np.nan
        _DECODE = table
    return _DECODE


def e4m3fn_to_float32(codes):
    """The float32 values of e4m3fn ``codes`` (uint8)."""
    np = _np()
    return _decode_table()[np.asarray(codes, dtype=np.uint8)]


def float32_to_e4m3fn(values):
    """e4m3fn codes (uint8) of ``values``: round to nearest even, saturate to ±448, NaN to 0x7F."""
    np = _np()
    values = np.asarray(values, dtype=np.float32)
    magnitude = np.abs(values)
    _, exponent = np.frexp(magnitude)  # magnitude = m * 2**exponent, 0.5 <= m < 1
    # The spacing of e4m3 numbers near `magnitude`: 2**(E - 3) for 1.mmm x 2**E, E >= -6 (subnormals below).
    quantum_exponent = np.maximum(exponent.astype(np.int32) - 1, -6) - 3
    rounded = np.ldexp(np.rint(np.ldexp(magnitude, -quantum_exponent)), quantum_exponent)  # rint: ties to even
    rounded = np.minimum(rounded, E4M3_MAX)
    positive = _decode_table()[:_NAN_CODE]  # codes 0x00..0x7E, increasing
    codes = np.searchsorted(positive, rounded).astype(np.uint8)
    codes = codes | np.where(np.signbit(values), np.uint8(0x80), np.uint8(0))
    return np.where(np.isnan(values), np.uint8(_NAN_CODE), codes).astype(np.uint8)


def _check_2d(argument: str, value, np) -> None:
    if getattr(value, "ndim", None) != 2:
        raise InvalidArgumentError([Problem(argument, getattr(value, "shape", type(value).__name__),
                                            "must be a 2-D array [num_tokens, hidden]")])


def quantize_fp8(x):
    """``(codes, scales)``: e4m3fn codes ``[num_tokens, hidden]`` (uint8) and fp32 scales
    ``[num_tokens, ceil(hidden / 128)]`` of ``x`` (float, ``[num_tokens, hidden]``), DeepEP's
    per-token, per-128-element recipe (module docstring).

    Raises:
        InvalidArgumentError: ``x`` is not 2-D or holds NaN or infinity.
    """
    np = _np()
    x = np.asarray(x)
    _check_2d("x", x, np)
    x = x.astype(np.float32)
    if not np.isfinite(x).all():
        raise InvalidArgumentError([Problem("x", "non-finite values", "FP8 quantisation needs finite inputs")])
    num_tokens, hidden = x.shape
    blocks = num_scales(hidden)
    padded = np.zeros((num_tokens, blocks * FP8_BLOCK_SIZE), dtype=np.float32)
    padded[:, :hidden] = x
    padded = padded.reshape(num_tokens, blocks, FP8_BLOCK_SIZE)
    amax = np.maximum(np.abs(padded).max(axis=2, initial=0.0), np.float32(AMAX_MIN)).astype(np.float32)
    multiplier = (np.float32(E4M3_MAX) / amax).astype(np.float32)
    codes = float32_to_e4m3fn(padded * multiplier[:, :, None]).reshape(num_tokens, blocks * FP8_BLOCK_SIZE)[:, :hidden]
    return np.ascontiguousarray(codes), (amax / np.float32(E4M3_MAX)).astype(np.float32)


def dequantize_fp8(codes, scales):
    """float32 ``[num_tokens, hidden]``: each e4m3fn code times its block's scale.

    Raises:
        InvalidArgumentError: shapes that do not fit (``scales`` must be ``[num_tokens, ceil(hidden/128)]``).
    """
    np = _np()
    codes, scales = np.asarray(codes), np.asarray(scales, dtype=np.float32)
    _check_2d("codes", codes, np)
    num_tokens, hidden = codes.shape
    if scales.shape != (num_tokens, num_scales(hidden)):
        raise InvalidArgumentError([Problem("scales", tuple(scales.shape),
                                            f"must be [num_tokens, ceil(hidden / 128)] = [{num_tokens}, "
                                            f"{num_scales(hidden)}] for codes of shape {tuple(codes.shape)}")])
    values = e4m3fn_to_float32(codes)
    return values * np.repeat(scales, FP8_BLOCK_SIZE, axis=1)[:, :hidden]
