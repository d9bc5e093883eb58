"""Pack token fields into the bytes of a record layout, and read them back — vectorised.

The byte map is a :class:`~epbuf.report.RecordLayout` from a backend's report
(``epbuf.report(plan, backend).records``): the record stride ``num_bytes`` and each
field's ``offset``, ``num_bytes``, ``dtype`` and ``count``. Nothing here computes an
offset; a field of slot ``s`` occupies ``buffer[s * stride + offset :][:num_bytes]``.

Every field is one column of the 2-D byte view ``[slots, stride]`` of the buffer (a
strided view, so a reader's field may even run past its slot, as DeepEP-Ascend's getters
do for hidden 7000): one vectorised copy per field, no loop over tokens.

>>> import numpy as np, epbuf
>>> plan = epbuf.Plan(hidden=256, num_topk=2, num_experts=8, num_ranks=2, num_max_tokens_per_rank=4,
...                   use_fp8_dispatch=False)
>>> record = epbuf.report(plan, "ascend").record("dispatch")
>>> buffer = pack(record, hidden=np.ones((3, 256), np.uint16), topk_idx=np.array([[0, 5], [1, -1], [7, 2]]),
...               topk_weights=np.full((3, 2), 0.5, np.float32), src_token_global_idx=np.array([0, 1, 2]))
>>> buffer.shape, record.num_bytes
((1728,), 576)
>>> fields = unpack(record, buffer)
>>> fields["topk_idx"].tolist(), fields["src_token_global_idx"].tolist()
([[0, 5], [1, -1], [7, 2]], [[0], [1], [2]])
"""

from __future__ import annotations

from ..errors import ArgumentProblem as Problem
from ..errors import InvalidArgumentError
from ..report import RecordLayout
from ._arguments import CodecError, check_buffer, num_tokens_of, split_rows
from ._arrays import ops_for
from ._layout_spec import check_writable, layout_spec
from .record_slots import RecordSlots

__all__ = ["pack", "unpack", "slot_rows", "RecordSlots", "CodecError"]


def pack(layout: RecordLayout, *, out=None, slots=None, **fields):
    """Write tokens into record slots and return the buffer.

    Every byte of a written slot is written once: each given field by one vectorised copy
    (a gather when given as ``(array, rows)``), padding and fields not given by one fill
    of zeros per run of adjacent such bytes. Bytes outside the written slots are untouched.
    To pack into the same buffer many times, :class:`RecordSlots` skips the per-call set-up.

    Args:
        layout: the record (``report.record("dispatch")`` ...). Its data fields must not
            overlap nor run past the stride: a writer stays inside its slot.
        out: a contiguous 1-D uint8 buffer (numpy array or torch tensor) to write into;
            ``None`` allocates ``num_tokens x stride`` bytes (numpy, or torch on the
            inputs' device when they are tensors).
        slots: where token ``i`` goes: ``None`` = slot ``i``; an int = consecutive slots
            from it; an index array = one slot per token.
        **fields: field name -> ``[num_tokens, count]`` values (``[num_tokens]`` when
            ``count == 1``), in the field's dtype, or in another numeric dtype whose values
            convert exactly, or with the same bytes per token (``field_bytes``); or
            ``(array, rows)``: rows ``rows`` of ``array``, gathered straight into the slots.
            Fields not given and padding are written as zeros in every slot written.

    Raises:
        InvalidArgumentError: an unknown field, a value of the wrong shape or dtype.
        CodecError: a slot beyond the buffer, or a layout whose fields overlap or overrun.
    """
    check_writable(layout, layout_spec(layout), fields)
    if out is None:
        given = {name: split_rows(v) for name, v in fields.items() if v is not None}
        ops = ops_for(*(v for v, _ in given.values()), argument="out")
        num_tokens = num_tokens_of(given, ops)
        if slots is not None and not (isinstance(slots, int) and not isinstance(slots, bool) and slots == 0):
            raise InvalidArgumentError([Problem("slots", "given", "needs out= (a buffer to place the slots in)")])
        like = next(iter(given.values()), (None,))[0]
        out = ops.empty(num_tokens * layout.num_bytes, ops.uint8, like)  # every byte is written
    else:
        ops_for(out, *(split_rows(v)[0] for v in fields.values() if v is not None), argument="out")
    return RecordSlots(layout, out).pack(slots=slots, **fields)


def unpack(layout: RecordLayout, buffer, *, num_slots: int | None = None, slots=None, fields=None,
           copy: bool = True) -> dict:
    """Read the fields of record slots: field name -> array.

    Args:
        layout: the record as the reader sees it (fields may run past the stride: a
            reader of DeepEP-Ascend's getters view reads the next slot's first bytes).
        buffer: contiguous 1-D uint8 (numpy array or torch tensor).
        num_slots: read slots ``0 .. num_slots - 1`` (default: every whole slot of the
            buffer, ``len(buffer) // stride``); ignored when ``slots`` is an index array.
        slots: an int (the first of ``num_slots`` consecutive slots) or an index array.
        fields: the names to read (default: every data field).
        copy: ``True`` (default): arrays of their own, one copy of the field's bytes each.
            ``False``: for consecutive slots, zero-copy strided views into ``buffer`` where
            the element type allows (numpy: always; torch: when the field's offset and the
            stride are multiples of its element size) — they **alias the buffer**: a later
            write to the buffer (the next ``pack``, the runtime's next dispatch or combine)
            changes them. Index-array slots always copy.

    Returns:
        ``{name: [n, count] array}`` (2-D even when ``count == 1``) in the field's dtype as
        :mod:`epbuf.codec._dtypes` maps it (numpy: BF16 as uint16 bits, FP8 as uint8 codes).

    Raises:
        CodecError: a slot whose field lies (partly) beyond the buffer.
    """
    return RecordSlots(layout, buffer).unpack(num_slots=num_slots, slots=slots, fields=fields, copy=copy)


def slot_rows(buffer, stride: int, num_slots: int, offset: int = 0):
    """The 2-D view ``[num_slots, stride]`` of ``buffer[offset:]``: whole records, for
    moving slots without reading their fields.

    Raises:
        CodecError: the slots do not fit in the buffer.
        InvalidArgumentError: ``stride`` not a positive int, ``num_slots`` or ``offset`` not an
            int >= 0 (a negative offset read from the buffer's end).
    """
    from ..errors import check_int

    check_int("stride", stride, 1)
    check_int("num_slots", num_slots, 0)
    check_int("offset", offset, 0)
    ops = ops_for(buffer)
    length = check_buffer(buffer, ops)
    if offset + num_slots * stride > length:
        raise CodecError(f"{num_slots:,} slots of {stride:,} B from offset {offset:,} need "
                         f"{offset + num_slots * stride:,} B; the buffer holds {length:,} B")
    return ops.strided(buffer, offset, num_slots, stride, stride)
