"""epbuf.codec: real tokens round-trip bit-exactly through every backend's record layouts in
buffers of exactly the hinted size; the FP8/BF16 helpers agree with torch bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import epbuf
from epbuf.codec import (CodecError, bfloat16_to_float32, dequantize_fp8, e4m3fn_to_float32, float32_to_bfloat16,
                         float32_to_e4m3fn, pack, quantize_fp8, region_slots, slot_rows, unpack)
from epbuf.codec._arrays import numpy_ops
from epbuf.errors import EpbufError, InvalidArgumentError

torch = pytest.importorskip("torch")


def plan(**kw) -> epbuf.Plan:
    base = dict(hidden=7168, num_topk=8, num_experts=64, num_ranks=8, num_max_tokens_per_rank=16)
    base.update(kw)
    return epbuf.Plan(**base)


# (backend, plan) pairs whose every record is packed and read back; each line names what it covers.
PLANS = [
    ("ascend", plan(num_topk=6, num_experts=256)),  # FP8, hint over-reserves SF packs
    ("ascend", plan(use_fp8_dispatch=False)),  # BF16
    ("ascend", plan(hidden=2880, num_topk=1)),  # top-1, hidden % 128 != 0 (a kernel-limit finding only)
    ("ascend", plan(hidden=7000, num_topk=6, num_experts=256)),  # getters overrun the stride; writer view
    ("ascend", plan(num_topk=0)),  # top-k 0 reserves 32
    ("deepep-v2", plan(version="2026-04")),
    ("deepep-v2", plan(version="2026-07", use_fp8_dispatch=False)),
    ("deepep-v2", plan(version="refactor", num_topk=1)),
    ("deepep-v2", plan(num_ranks=32, num_ranks_per_node=8)),  # hybrid mode
    ("deepep-ll", plan(version="ll0")),  # FP8-only message, data first
    ("deepep-ll", plan(version="ll2", use_fp8_dispatch=False)),
    ("deepep-ll", plan(version="main")),
    ("deepep-ll", plan(version="main", use_fp8_dispatch=False)),
    ("deepep-v1", plan()),  # the NVL hint slot
    ("deepep-v1", plan(num_ranks=16)),  # internode dispatch/combine tokens
]


def random_fields(record, num_tokens: int, rng) -> dict:
    """Random bytes for every data field, as arrays of the field's numpy dtype (NaN payloads included)."""
    ops = numpy_ops()
    out = {}
    for f in record.data_fields():
        raw = rng.integers(0, 256, (num_tokens, f.num_bytes), dtype=np.uint8)
        dtype = ops.dtype(f.dtype)
        out[f.name] = raw.view(dtype).reshape(num_tokens, f.num_bytes // dtype.itemsize)
    return out


def capacity(rep, record):
    """``(buffer bytes, slots)``: the region's ``(rows, slots)`` grid when the report gives one,
    else as many whole records as the report's largest buffer holds."""
    try:
        grid = region_slots(rep, record.name)
        return grid.buffer.num_bytes, grid.offset, grid.num_slots
    except (EpbufError, KeyError):
        largest = max(rep.buffers, key=lambda b: b.num_bytes)
        return largest.num_bytes, 0, largest.num_bytes // record.num_bytes


@pytest.mark.parametrize("backend,the_plan", PLANS, ids=[f"{b}-{i}" for i, (b, _) in enumerate(PLANS)])
def test_every_record_round_trips_in_a_buffer_of_the_hinted_size(backend, the_plan):
    """Tokens in the first and the last slot (and some between) of a zero buffer of exactly the
    hint's size come back bit-exactly; nothing outside their fields is written; one byte
    less than the last slot needs is refused."""
    rep = epbuf.report(the_plan, backend)
    rng = np.random.default_rng(len(rep.records))
    for record in rep.records:
        num_bytes, offset, num_slots = capacity(rep, record)
        assert num_slots >= 1 and offset + num_slots * record.num_bytes <= num_bytes
        slots = np.unique(np.concatenate([[0, num_slots - 1], rng.integers(0, num_slots, 5)]))
        values = random_fields(record, len(slots), rng)
        buffer = np.zeros(num_bytes, dtype=np.uint8)
        region = buffer[offset:]
        if record.overlaps() or record.overrun_bytes():
            with pytest.raises(CodecError, match="a writer must stay inside its slot"):
                pack(record, out=region, slots=slots, **values)
            continue
        pack(record, out=region, slots=slots, **values)
        back = unpack(record, region, slots=slots)
        for name, value in values.items():
            assert np.array_equal(back[name].view(np.uint8), value.view(np.uint8)), (record.name, name)
        written = sum(int(np.count_nonzero(v.view(np.uint8))) for v in values.values())
        assert int(np.count_nonzero(buffer)) == written
        last_end = offset + int(slots[-1] + 1) * record.num_bytes
        assert last_end <= num_bytes
        with pytest.raises(CodecError, match="buffer holds"):
            pack(record, out=buffer[offset:last_end - 1], slots=slots, **values)


def test_the_largest_ascend_slot_fits_the_default_hint_exactly():
    """The default plan (8 x 4,096 tokens, hidden 7,168, FP8): the last dispatch slot (7, 4095)
    and the last combine slot (5, 4095) are written inside the 354,418,688-byte hint."""
    rep = epbuf.report(plan(num_topk=6, num_experts=256, num_max_tokens_per_rank=4096), "ascend")
    buffer = np.zeros(rep.buffer("EP buffer").num_bytes, dtype=np.uint8)
    assert buffer.size == 354_418_688
    rng = np.random.default_rng(0)
    for name, last in (("dispatch", (7, 4095)), ("combine", (5, 4095))):
        grid = region_slots(rep, name)
        slot = grid.slot_index(*last)
        values = random_fields(grid.record, 1, rng)
        pack(grid.record, out=buffer, slots=[slot], **values)
        assert grid.slot_offset(*last) + grid.record.num_bytes <= buffer.size
        back = unpack(grid.record, buffer, slots=[slot])
        assert all(np.array_equal(back[k].view(np.uint8), v.view(np.uint8)) for k, v in values.items())


def _getter_offsets(token_layout) -> dict:
    """Each field's offset in a record as the backend's ``TokenLayout`` getters give it (not
    the report's ``RecordLayout``, which the codec reads)."""
    names = ("sf", "topk_idx", "topk_weights", "src_token_global_idx", "linked_list_idx")
    return {"hidden": 0, **{n: getattr(token_layout, f"{n}_offset") for n in names
                            if hasattr(token_layout, f"{n}_offset")}}


@pytest.mark.parametrize("fp8,hidden,topk", [(True, 7168, 6), (False, 7168, 8), (True, 2880, 1)])
def test_packed_bytes_sit_where_the_ascend_layout_puts_them(fp8, hidden, topk):
    """Independent of unpack: after pack into ``region_slots``' slot (r, t), each field's bytes
    are at ``BufferLayout.slot_offset(r, t) + TokenLayout.<field>_offset`` of the backend's own
    layout objects (``backends.ascend.sizes``), and the grid's slot offsets are the backend's."""
    from epbuf.backends.ascend.sizes import actual_num_sf_packs, combine_buffer_layout, dispatch_buffer_layout

    ranks, tokens = 4, 16
    p = plan(hidden=hidden, num_topk=topk, num_experts=64, num_ranks=ranks, num_max_tokens_per_rank=tokens,
             use_fp8_dispatch=fp8)
    rep = epbuf.report(p, "ascend")
    backend = {"dispatch": dispatch_buffer_layout(tokens, hidden, actual_num_sf_packs(hidden, fp8), topk,
                                                  1 if fp8 else 2, ranks),
               "combine": combine_buffer_layout(ranks, tokens, hidden, topk)}
    rng = np.random.default_rng(hidden + topk)
    for name, layout in backend.items():
        grid = region_slots(rep, name)
        assert grid.record.num_bytes == layout.num_bytes_per_token and (grid.rows, grid.slots) == (
            layout.num_ranks, layout.num_max_tokens_per_rank)
        cells = [(0, 0), (layout.num_ranks - 1, tokens - 1), (min(1, layout.num_ranks - 1), 3)]
        buffer = np.zeros(grid.buffer.num_bytes, dtype=np.uint8)
        values = random_fields(grid.record, len(cells), rng)
        pack(grid.record, out=buffer, slots=[grid.slot_index(r, t) for r, t in cells], **values)
        offsets = _getter_offsets(layout.token_layout)
        assert set(values) <= set(offsets)
        for i, (r, t) in enumerate(cells):
            base = layout.slot_offset(r, t)
            assert grid.slot_offset(r, t) == base
            for field, value in values.items():
                expected = value[i].view(np.uint8)
                start = base + offsets[field]
                assert np.array_equal(buffer[start:start + expected.size], expected), (name, field, r, t)


@pytest.mark.parametrize("version,fp8", [("2026-04", True), ("2026-07", False), ("refactor", True)])
def test_packed_bytes_sit_where_the_deepep_v2_layout_puts_them(version, fp8):
    """The same for DeepEP V2's records: byte positions from ``backends.deepep_v2.records``'
    ``TokenLayout`` getters, slot ``i`` at ``i * num_bytes()``."""
    from epbuf.backends.deepep_v2.records import (actual_num_sf_packs, get_combine_token_layout,
                                                  get_dispatch_token_layout)

    hidden, topk = 7168, 8
    rep = epbuf.report(plan(hidden=hidden, num_topk=topk, version=version, use_fp8_dispatch=fp8), "deepep-v2")
    backend = {"dispatch": get_dispatch_token_layout(hidden, 1 if fp8 else 2, actual_num_sf_packs(hidden, fp8), topk,
                                                     version=version),
               "combine": get_combine_token_layout(hidden, 2, topk, version=version)}
    rng = np.random.default_rng(7)
    for name, token_layout in backend.items():
        record = rep.record(name)
        assert record.num_bytes == token_layout.num_bytes()
        slots = [0, 5, 2]
        values = random_fields(record, len(slots), rng)
        buffer = pack(record, out=np.zeros(6 * record.num_bytes, np.uint8), slots=slots, **values)
        offsets = _getter_offsets(token_layout)
        assert set(values) <= set(offsets) and "topk_weights" in values
        for i, slot in enumerate(slots):
            for field, value in values.items():
                expected = value[i].view(np.uint8)
                start = slot * token_layout.num_bytes() + offsets[field]
                assert np.array_equal(buffer[start:start + expected.size], expected), (name, field, slot)


@settings(max_examples=60, deadline=None)
@given(backend=st.sampled_from(["ascend", "deepep-v2"]), hidden32=st.integers(1, 240), topk=st.integers(1, 32),
       fp8=st.booleans(), num_tokens=st.integers(0, 12), array=st.sampled_from(["numpy", "torch"]),
       seed=st.integers(0, 2 ** 32 - 1))
def test_pack_unpack_is_the_identity(backend, hidden32, topk, fp8, num_tokens, array, seed):
    """For any shape and dtype: unpack(pack(fields)) == fields bit for bit, tokens land in the
    slots asked for (in any order), other slots keep their bytes, padding is zeroed."""
    rep = epbuf.report(plan(hidden=32 * hidden32, num_topk=topk, use_fp8_dispatch=fp8, num_experts=256), backend)
    rng = np.random.default_rng(seed)
    for record in rep.records:
        num_slots = num_tokens + 3
        slots = rng.permutation(num_slots)[:num_tokens]
        values = random_fields(record, num_tokens, rng)
        garbage = rng.integers(0, 256, num_slots * record.num_bytes, dtype=np.uint8)
        buffer = garbage.copy()
        if array == "torch":
            values = {k: torch.from_numpy(v) if v.dtype != np.uint16  # BF16 bit patterns -> torch.bfloat16
                      else torch.from_numpy(v.view(np.int16)).view(torch.bfloat16) for k, v in values.items()}
            buffer = torch.from_numpy(buffer)
        pack(record, out=buffer, slots=slots, **values)
        back = unpack(record, buffer, slots=slots)
        host = buffer.numpy() if array == "torch" else buffer
        for name, value in values.items():
            a = back[name].contiguous().view(torch.uint8).numpy() if array == "torch" else back[name].view(np.uint8)
            b = value.contiguous().view(torch.uint8).numpy() if array == "torch" else value.view(np.uint8)
            assert np.array_equal(a.ravel(), b.ravel()) and a.size == num_tokens * record.field(name).num_bytes
        rows = host.reshape(num_slots, record.num_bytes)
        untouched = np.setdiff1d(np.arange(num_slots), slots)
        assert np.array_equal(rows[untouched], garbage.reshape(num_slots, -1)[untouched])
        for f in record.fields:
            if f.is_padding:
                assert not rows[slots, f.offset:f.end].any()


def test_values_convert_only_when_exact():
    """DeepEP V2 stores int32 top-k indices: int64 ids convert; ids beyond int32 are refused,
    naming the field; fp32 scales travel as Ascend's int16 SF packs (same bytes)."""
    v2 = epbuf.report(plan(num_topk=2, use_fp8_dispatch=False), "deepep-v2").record("dispatch")
    buffer = pack(v2, topk_idx=np.array([[3, -1], [7, 9]], dtype=np.int64))
    assert unpack(v2, buffer)["topk_idx"].dtype == np.int32
    assert unpack(v2, buffer)["topk_idx"].tolist() == [[3, -1], [7, 9]]
    with pytest.raises(InvalidArgumentError, match=r"^topk_idx = 'int64 \[1, 2\]': .*do not all fit int32"):
        pack(v2, topk_idx=np.array([[1 << 40, 0]]))
    ascend = epbuf.report(plan(), "ascend").record("dispatch")
    scales = np.arange(2 * 56, dtype=np.float32).reshape(2, 56)
    back = unpack(ascend, pack(ascend, sf=scales))["sf"]
    assert back.dtype == np.int16 and back.shape == (2, 112) and np.array_equal(back.view(np.float32), scales)


@pytest.mark.parametrize("kwargs,message", [
    (dict(hidden=np.zeros((2, 7168), np.float32)), r"^hidden = 'float32 \[2, 7168\]': the record field is "
                                                   r"float8_e4m3fn x 7168 = 7168 B per token"),
    (dict(topk_idx=np.zeros((2, 8)), topk_weights=np.zeros((3, 8), np.float32)), "same number of tokens"),
    (dict(experts=np.zeros((1, 1))), r"^experts = 'given': not a field of the 'dispatch' record"),
    (dict(topk_idx=np.zeros((2, 7), np.int64)), r"give 8 elements of int64 or 64 bytes per token"),
])
def test_bad_fields_name_the_field_and_what_fits(kwargs, message):
    record = epbuf.report(plan(), "ascend").record("dispatch")
    with pytest.raises(InvalidArgumentError, match=message):
        pack(record, **kwargs)


def test_out_of_bounds_and_bad_buffers_are_refused():
    record = epbuf.report(plan(), "ascend").record("combine")
    buffer = np.zeros(3 * record.num_bytes, dtype=np.uint8)
    with pytest.raises(CodecError, match=r"slot 3 needs bytes up to .* at most 3 slots fit"):
        pack(record, out=buffer, slots=[3], topk_weights=np.zeros((1, 8), np.float32))
    with pytest.raises(CodecError, match="at most 3 slots fit"):
        unpack(record, buffer, num_slots=4)
    with pytest.raises(InvalidArgumentError, match="contiguous 1-D uint8"):
        unpack(record, buffer.reshape(3, -1))
    with pytest.raises(InvalidArgumentError, match="must be a torch array like the others"):
        pack(record, out=torch.zeros(record.num_bytes, dtype=torch.uint8), topk_weights=np.zeros((1, 8), np.float32))
    with pytest.raises(CodecError, match="the buffer holds"):
        slot_rows(buffer, record.num_bytes, 4)


def test_a_reader_may_read_past_its_slot_but_not_past_the_buffer():
    """Ascend's getters view for hidden 7000 reads 4 bytes of the next slot: fine for every
    slot but the last of an exact buffer."""
    rep = epbuf.report(plan(hidden=7000, num_topk=6, num_experts=256), "ascend")
    reader = rep.record("dispatch")
    assert reader.overrun_bytes() == 4
    buffer = np.zeros(2 * reader.num_bytes, dtype=np.uint8)
    assert unpack(reader, buffer, num_slots=1)["src_token_global_idx"].shape == (1, 1)
    with pytest.raises(CodecError, match="field 'src_token_global_idx' of slot 1"):
        unpack(reader, buffer)


# --- FP8 and BF16 ------------------------------------------------------------------------------
def test_e4m3fn_and_bf16_conversions_match_torch():
    codes = np.arange(256, dtype=np.uint8)
    assert np.array_equal(e4m3fn_to_float32(codes),
                          torch.from_numpy(codes).view(torch.float8_e4m3fn).float().numpy(), equal_nan=True)
    rng = np.random.default_rng(0)
    edges = [0.0, -0.0, 448.0, -448.0, 2 ** -9, 2 ** -10, 3 * 2 ** -11, 1.5 * 2 ** -9]
    values = np.concatenate([rng.uniform(-448, 448, 200_000), rng.standard_normal(200_000) * 2.0 ** -7,
                             edges]).astype(np.float32)
    by_torch = torch.from_numpy(values).to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    assert np.array_equal(float32_to_e4m3fn(values), by_torch)
    assert float32_to_e4m3fn(np.array([1000.0, np.nan], np.float32)).tolist() == [0x7E, 0x7F]  # saturate; NaN
    floats = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    finite = floats[~np.isnan(floats)]
    assert np.array_equal(float32_to_bfloat16(finite),
                          torch.from_numpy(finite).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16))
    assert float32_to_bfloat16(np.array([np.nan], np.float32)).tolist() == [0x7FC0]
    bits = np.arange(65536, dtype=np.uint16)
    by_torch = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).float().numpy()
    assert np.array_equal(bfloat16_to_float32(bits), by_torch, equal_nan=True)


def _deepep_cast(x):
    """``per_token_cast_to_fp8`` (deep_ep/utils/math.py:31-39 @dd758ca) without torch.compile."""
    m, n = x.shape
    padded = torch.nn.functional.pad(x, (0, (n + 127) // 128 * 128 - n)).view(m, -1, 128)
    amax = padded.abs().float().amax(dim=2).view(m, -1).clamp(1e-4)
    codes = (padded * (448.0 / amax.unsqueeze(2))).to(torch.float8_e4m3fn).view(m, -1)[:, :n]
    return codes.contiguous(), (amax / 448.0).view(m, -1)


@pytest.mark.parametrize("hidden", [7168, 2880, 7000, 100])
def test_quantize_fp8_is_deepeps_recipe_bit_for_bit(hidden):
    rng = np.random.default_rng(hidden)
    x = (rng.standard_normal((16, hidden)) * np.exp(rng.uniform(-25, 8, (16, 1)))).astype(np.float32)
    x[3, :200] = 0.0
    codes, scales = quantize_fp8(x)
    want_codes, want_scales = _deepep_cast(torch.from_numpy(x))
    assert np.array_equal(codes, want_codes.view(torch.uint8).numpy())
    assert np.array_equal(scales, want_scales.numpy())


@settings(max_examples=80, deadline=None)
@given(num_tokens=st.integers(0, 4), hidden=st.integers(1, 300), log_scale=st.floats(-30, 30),
       seed=st.integers(0, 2 ** 32 - 1))
def test_fp8_error_bound(num_tokens, hidden, log_scale, seed):
    """|dequantize(quantize(x)) - x| <= 2**-4 |x| + 2**-10 s + 2**-20 |x|, s the block's scale
    (epbuf.codec.fp8 docstring)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((num_tokens, hidden)) * 2.0 ** log_scale).astype(np.float32)
    codes, scales = quantize_fp8(x)
    back = dequantize_fp8(codes, scales)
    s = np.repeat(scales, 128, axis=1)[:, :hidden]
    bound = 2.0 ** -4 * np.abs(x) + 2.0 ** -10 * s + 2.0 ** -20 * np.abs(x)
    assert (np.abs(back.astype(np.float64) - x) <= bound).all()


def test_fp8_helpers_refuse_bad_input():
    with pytest.raises(InvalidArgumentError, match="non-finite"):
        quantize_fp8(np.array([[1.0, np.inf]], np.float32))
    with pytest.raises(InvalidArgumentError, match=r"^x = \(3,\): must be a 2-D array"):
        quantize_fp8(np.zeros(3, np.float32))
    with pytest.raises(InvalidArgumentError, match=r"^scales = \(1, 2\): must be \[num_tokens, ceil\(hidden / 128\)\]"):
        dequantize_fp8(np.zeros((1, 128), np.uint8), np.zeros((1, 2), np.float32))


_WITHOUT = r"""
import sys
sys.modules[{blocked!r}] = None  # import fails as if the package were not installed
from epbuf.codec._arrays import numpy_ops, torch_ops
from epbuf.codec import bfloat16_to_float32
from epbuf.errors import MissingExtraError
for call in {calls}:
    try:
        call()
    except MissingExtraError as error:
        print(error)
"""


@pytest.mark.parametrize("blocked, calls, message", [
    ("numpy", ["numpy_ops", "lambda: bfloat16_to_float32([0])"],
     "this feature needs numpy: pip install 'epbuf[codec]' (in a checkout: '.[codec]')"),
    ("torch", ["torch_ops"],
     "this feature needs PyTorch: pip install 'epbuf[torch]' (in a checkout: '.[torch]')"),
])
def test_a_missing_library_names_its_extra(blocked, calls, message):
    """The numpy back-end and the BF16 conversions (one numpy import, codec/_numpy.py) and the
    torch back-end each raise MissingExtraError naming the extra to install."""
    import subprocess
    import sys

    probe = _WITHOUT.format(blocked=blocked, calls="(" + ", ".join(calls) + ",)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [message] * len(calls)
