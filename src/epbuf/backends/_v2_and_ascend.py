"""What DeepEP-Ascend, a port of DeepEP V2, keeps of it line for line: the element size of the
dispatched data, and ``BufferLayout`` — ``num_ranks`` x ``num_max_tokens_per_rank`` token records,
packed rank after rank (DeepEP V2 ``layout.cuh:251-311 @dd758ca``, DeepEP-Ascend
``layout/ep/token.hpp:85-130``). Each backend subclasses :class:`RankTokenBuffer` with its own
``TokenLayout`` and says how many bytes one record takes (``num_bytes_per_token``) and how the
buffer's ``get_num_bytes`` multiplies (``num_bytes``)."""

from __future__ import annotations

from .._record import Record
from ..errors import InvalidArgumentError, Problem, check_bool, check_int
from ..units import INT32_MAX

__all__ = ["element_size", "RankTokenBuffer"]


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


class RankTokenBuffer(Record):
    """The arguments of ``BufferLayout(token_layout, num_ranks, num_max_tokens_per_rank)``, checked
    as upstream's ``int`` fields, and the slot arithmetic both backends share."""

    token_layout: object
    num_ranks: int
    num_max_tokens_per_rank: int

    #: The backend's ``TokenLayout`` class and how an error names it (set by each subclass).
    _token_layout_type: type = type(None)
    _token_layout_name: str = ""

    def __post_init__(self) -> None:
        ranks, tokens = self.num_ranks, self.num_max_tokens_per_rank
        if not (type(ranks) is int and type(tokens) is int and 0 <= ranks <= INT32_MAX and 0 <= tokens <= INT32_MAX
                and type(self.token_layout) is self._token_layout_type):
            check_int("num_ranks", ranks, 0, INT32_MAX, "an int upstream")
            check_int("num_max_tokens_per_rank", tokens, 0, INT32_MAX, "an int upstream")
            raise InvalidArgumentError([Problem("token_layout", self.token_layout,
                                                f"must be {self._token_layout_name}")])

    @property
    def num_bytes_per_token(self) -> int:
        raise NotImplementedError  # pragma: no cover - every subclass defines it

    @property
    def num_bytes_per_rank(self) -> int:
        return self.num_max_tokens_per_rank * self.num_bytes_per_token

    def slot_offset(self, rank_idx: int, token_idx: int) -> int:
        """Byte offset of slot (``rank_idx``, ``token_idx``):
        ``get_rank_buffer(rank_idx).get_token_buffer(token_idx)``."""
        ranks, tokens = self.num_ranks, self.num_max_tokens_per_rank
        if not (0 <= rank_idx < ranks and 0 <= token_idx < tokens):
            raise IndexError(f"slot ({rank_idx}, {token_idx}) outside {ranks} x {tokens}")
        return rank_idx * self.num_bytes_per_rank + token_idx * self.num_bytes_per_token
