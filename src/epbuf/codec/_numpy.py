"""numpy for the codec, imported on first use: the one place a missing numpy becomes the
error that names the ``epbuf[codec]`` extra (the BF16 conversions and the numpy back-end
both start here)."""

from __future__ import annotations

from .._lazy import optional

__all__ = ["numpy_module"]


def numpy_module():
    """The numpy module, or :class:`~epbuf.errors.MissingExtraError` naming the extra."""
    return optional("numpy", "this feature needs numpy: pip install 'epbuf[codec]'")
