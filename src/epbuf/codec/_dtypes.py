"""How the codec represents each record field's element type in numpy and in torch.

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

__all__ = ["FIELD_DTYPES", "NUMERIC_DTYPES", "field_dtype"]

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
