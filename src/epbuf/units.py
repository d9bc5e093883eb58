"""Integer helpers shared by every backend, and byte formatting at the edges.

Upstream computes sizes with C++ integer arithmetic on non-negative values, so
``ceil_div``/``align`` below are the exact Python equivalents of
``deep_ep::math::ceil_div`` / ``math::align`` (DeepEP-Ascend
``deep_ep/include/deep_ep/common/math.hpp:24-32``; DeepEP ``common/math.cuh``):
``(a + b - 1) / b`` and ``ceil_div(a, b) * b``.

>>> align(7000, 32)
7008
>>> format_bytes(354_418_688)
'338.00 MiB'
>>> parse_bytes("8GiB")
8589934592
>>> parse_bytes("3e9")
3000000000
"""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1


def ceil_div(a: int, b: int) -> int:
    """``(a + b - 1) / b`` for ``a >= 0``, ``b > 0`` — upstream's rounding-up division."""
    return (a + b - 1) // b


def align(a: int, b: int) -> int:
    """Round ``a`` up to a multiple of ``b`` (``ceil_div(a, b) * b``)."""
    return (a + b - 1) // b * b


_IEC = (("EiB", 1 << 60), ("PiB", 1 << 50), ("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB))


def format_bytes(num_bytes: int) -> str:
    """IEC units with two decimals: ``1536 -> '1.50 KiB'``; below 1 KiB plain bytes.

    Exact for any integer: beyond what a float holds the value is rounded with integers
    (``format_bytes(10**400)`` does not overflow)."""
    magnitude = abs(num_bytes)
    for unit, scale in _IEC:
        if magnitude >= scale:
            if magnitude < 1 << 1000:
                return f"{num_bytes / scale:.2f} {unit}"
            hundredths = (magnitude * 200 + scale) // (2 * scale)
            sign = "-" if num_bytes < 0 else ""
            return f"{sign}{hundredths // 100}.{hundredths % 100:02d} {unit}"
    return f"{num_bytes} B"


def format_int(value: int) -> str:
    """Thousands separators, as people read byte counts: ``354418688 -> '354,418,688'``."""
    return f"{value:,}"


_UNITS = {
    "": 1, "b": 1,
    "kib": KiB, "mib": MiB, "gib": GiB, "tib": TiB,
    "k": KiB, "m": MiB, "g": GiB, "t": TiB,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
}
#: A byte size as text. Compiled on first use (``re`` keeps it cached): ``epbuf hint`` without
#: ``--hbm``/``--budget`` never parses one, and compiling it took 0.3 ms of the command's cold start.
_SIZE = r"\s*([0-9]{1,40}(?:\.[0-9]{0,40})?|\.[0-9]{1,40})(?:[eE]([+-]?[0-9]{1,20}))?\s*([A-Za-z]*)\s*"
#: The largest size a byte count may have: upstream stores sizes as ``int64_t``.
MAX_BYTES = INT64_MAX
#: Exponents beyond this cannot give a size within :data:`MAX_BYTES` (nor below 1 B when
#: negative); checked before any arithmetic, so ``1e100000000`` answers at once.
_MAX_EXPONENT = 60


def parse_bytes(text: str) -> int:
    """Parse a byte size: ``"8GiB"``, ``"512 MiB"``, ``"80GB"`` (SI, 10^9), ``"3e9"``, ``"1024"``.

    IEC suffixes (KiB, MiB, GiB, TiB) are powers of 1024; SI suffixes (KB, MB, GB,
    TB) powers of 1000, as device datasheets use them. A bare ``K``, ``M``, ``G``, ``T``
    means the IEC unit (``4G`` = 4 GiB, as ``docker``, ``java -Xmx`` and ``ulimit`` read
    it). Suffixes are case-insensitive. The result must be a whole number of bytes in
    ``0..2^63-1`` (upstream stores sizes as int64); mantissas have at most 40 digits on
    each side of the point and exponents are bounded, checked before any arithmetic.

    Raises:
        ValueError: on anything else, with a message that names the accepted forms.

    >>> parse_bytes("4G"), parse_bytes("1.5GiB")
    (4294967296, 1610612736)
    """
    import re

    match = re.fullmatch(_SIZE, text) if isinstance(text, str) else None
    unit = match.group(3).lower() if match else None
    if match is None or unit not in _UNITS:
        from .errors import shown_value

        raise ValueError(f"{shown_value(text, 24)} is not a byte size; allowed e.g. 8GiB, 4G, 512MiB, 80GB, 3e9")
    exponent = int(match.group(2) or 0)
    if abs(exponent) > _MAX_EXPONENT:
        raise ValueError(f"{text.strip()!r} is out of range; allowed 0..{MAX_BYTES:,} B (int64)")
    # Exact rational arithmetic: "1.5GiB" must give 1610612736, not a float rounding of it.
    from fractions import Fraction

    value = Fraction(match.group(1)) * Fraction(10) ** exponent * _UNITS[unit]
    if value > MAX_BYTES:
        raise ValueError(f"{text.strip()!r} is out of range; allowed 0..{MAX_BYTES:,} B (int64)")
    if value.denominator != 1:
        raise ValueError(f"{text.strip()!r} is not a whole number of bytes ({float(value)!r} B)")
    return int(value)
