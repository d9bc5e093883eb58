"""Real bytes in epbuf's buffers: pack tokens into a backend's record layout and read them back.

Needs numpy (``pip install 'epbuf[codec]'``); torch tensors work too, on their device
(``epbuf[torch]``). ``import epbuf.codec`` itself imports neither: the names below load
their module on first use, so ``epbuf.codec.replay`` (the Ascend writer/reader replay
behind ``epbuf replay``) stays standard-library only.

``pack(layout, out=None, slots=None, **fields)``, ``unpack(layout, buffer, ...)``, ``slot_rows``
    :mod:`epbuf.codec.records`: fields to bytes and back, offsets from the backend's
    :class:`~epbuf.report.RecordLayout` only.
``RecordSlots(layout, buffer)``
    :mod:`epbuf.codec.record_slots`: one buffer packed and unpacked many times, its field
    views built once (what ``pack`` and ``unpack`` use for one call).
``quantize_fp8``, ``dequantize_fp8``, ``float32_to_e4m3fn``, ``e4m3fn_to_float32``,
``float32_to_bfloat16``, ``bfloat16_to_float32``
    :mod:`epbuf.codec.fp8`: DeepEP's per-128 FP8 recipe and BF16 rounding, bit-exact with torch.
``region_slots(report, record_name)``, ``region_offset(buffer, region)``
    :mod:`epbuf.codec.regions`: where a report's regions of records sit in their buffer.
``replay(plan)``, ``replay_to_dict``, ``render_replay``
    :mod:`epbuf.codec.replay`: DeepEP-Ascend's dispatch writer against its receive
    epilogue, on real bytes (standard library only).
"""

from __future__ import annotations

_EXPORTS = {
    "pack": "records", "unpack": "records", "slot_rows": "records", "CodecError": "records",
    "RecordSlots": "record_slots",
    "quantize_fp8": "fp8", "dequantize_fp8": "fp8", "float32_to_e4m3fn": "fp8", "e4m3fn_to_float32": "fp8",
    "float32_to_bfloat16": "fp8", "bfloat16_to_float32": "fp8",
    "region_slots": "regions", "region_offset": "regions", "RegionSlots": "regions",
    "replay": "replay", "replay_to_dict": "replay", "render_replay": "replay",
}

__all__ = sorted(_EXPORTS)


# Not epbuf._lazy.exports, which keeps a name in the package once loaded: ``replay`` is both a
# name here and the submodule epbuf.codec.replay, and keeping the function would make
# ``import epbuf.codec.replay as m`` bind the function. (As it is, the submodule wins: importing
# it sets the package's ``replay``, so ``from epbuf.codec import replay`` gives the module.)
def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'epbuf.codec' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
