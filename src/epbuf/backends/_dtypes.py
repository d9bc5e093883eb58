"""The element size of the dispatched data, as DeepEP V2 and DeepEP-Ascend (its port) both take
it from ``use_fp8_dispatch``: 1 byte for FP8, 2 for BF16."""

from __future__ import annotations

from ..errors import check_bool

__all__ = ["element_size"]


def element_size(use_fp8_dispatch: bool) -> int:
    """``sizeof(__nv_fp8_e4m3)`` = 1 or ``sizeof(nv_bfloat16)`` = 2 (DeepEP V2 ``buffer.hpp:671 @dd758ca``);
    ``sizeof(c10::Float8_e4m3fn)`` = 1 or ``sizeof(c10::BFloat16)`` = 2 (DeepEP-Ascend ``EPB:595``).

    >>> element_size(True), element_size(False)
    (1, 2)
    """
    if use_fp8_dispatch is True:
        return 1
    if use_fp8_dispatch is False:
        return 2
    return check_bool("use_fp8_dispatch", use_fp8_dispatch)
