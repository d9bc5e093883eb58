"""numpy and torch behind one small interface, so the codec and the runtime run the same
code on a numpy array (CPU, the ``epbuf[codec]`` extra) or a torch tensor on any device
(the ``epbuf[torch]`` extra).

Neither library is imported until an array of it is seen: :func:`ops_for` looks at the
type's module name first. The operations: :mod:`epbuf.codec._numpy_ops` and
:mod:`epbuf.codec._torch_ops`; how each record dtype is represented in them:
:mod:`epbuf.codec._dtypes`.
"""

from __future__ import annotations

from ..errors import ArgumentProblem as Problem
from ..errors import InvalidArgumentError
from ._dtypes import FIELD_DTYPES, NUMERIC_DTYPES, field_dtype
from ._numpy_ops import NumpyOps
from ._torch_ops import TorchOps

__all__ = ["ops_for", "numpy_ops", "torch_ops", "describe", "FIELD_DTYPES", "NUMERIC_DTYPES", "field_dtype"]

_OPS: dict[str, object] = {}


def numpy_ops() -> NumpyOps:
    if "numpy" not in _OPS:
        _OPS["numpy"] = NumpyOps()
    return _OPS["numpy"]  # type: ignore[return-value]


def torch_ops() -> TorchOps:
    if "torch" not in _OPS:
        _OPS["torch"] = TorchOps()
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


def describe(ops, value) -> str:
    """``value``'s dtype and shape as an error message shows them: ``bfloat16 [3, 128]``."""
    return f"{ops.dtype_name(value)} {[int(d) for d in value.shape]}"
