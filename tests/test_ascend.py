"""DeepEP-Ascend backend: golden numbers, byte maps, writer/reader consistency, properties.

Golden rows were computed with the book example's transcription of the formulas
(``shared/seeds/buffer_size.py``, outside this repository; the arithmetic and the default
worked example are in ``docs/derivations/ascend.md`` §2-§3), independently of epbuf's code,
then pinned here as literals.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epbuf import InvalidArgumentError, Plan, report
from epbuf.backends import ascend
from epbuf.report import report_from_dict, report_to_dict
from epbuf.units import MiB


def plan(hidden=7168, topk=6, ranks=8, tokens=4096, fp8=True, experts=None, **kw) -> Plan:
    if experts is None:
        experts = 256 if 256 % ranks == 0 else ranks
    return Plan(hidden=hidden, num_topk=topk, num_experts=experts, num_ranks=ranks,
                num_max_tokens_per_rank=tokens, use_fp8_dispatch=fp8, **kw)


def test_seed_default_numbers():
    """The seed's default report, exactly (issue 2's acceptance numbers)."""
    r = report(plan())
    q = {x.name: x.value for x in r.quantities}
    assert q["real_num_sf_packs"] == 112
    assert q["hint_num_sf_packs"] == 224
    assert q["dispatch_record_num_bytes"] == 7_488
    assert q["combine_record_num_bytes"] == 14_368
    assert q["hint_dispatch_num_bytes"] == 252_706_816
    assert q["combine_num_bytes"] == 353_107_968
    assert r.buffer("EP buffer").num_bytes == 354_418_688 == 338 * MiB
    assert r.buffer("workspace").num_bytes == 2 * MiB  # sizeof(EPSignals), alignas(2 MiB)
    assert r.num_bytes == 354_418_688 + 2 * MiB  # the device allocation: buffer + workspace
    assert q["real_dispatch_num_bytes"] == 245_366_784
    assert q["hint_dispatch_num_bytes"] - q["real_dispatch_num_bytes"] == 7_340_032
    assert r.buffer("EP buffer").num_bytes_needed == 354_418_688
    assert ascend.calculate_buffer_size(8, 4096, 7168, 6, True) == 354_418_688


# (hidden, topk, ranks, tokens, fp8) -> (real dispatch record, combine record,
#  hint dispatch layout, combine layout, hint, real need)
GOLDEN = [
    ((7168, 6, 8, 4096, True), (7488, 14368, 252706816, 353107968, 354418688, 354418688)),
    ((7168, 6, 8, 4096, False), (14432, 14368, 472907776, 353107968, 473956352, 473956352)),
    ((2048, 1, 1, 128, True), (2176, 4128, 286720, 528384, 2097152, 2097152)),
    ((2048, 8, 2, 512, False), (4224, 4128, 4325376, 4227072, 6291456, 6291456)),
    ((4096, 8, 8, 1024, True), (4352, 8224, 36700160, 67371008, 69206016, 69206016)),
    ((4096, 9, 16, 256, True), (4384, 8256, 18481152, 19021824, 20971520, 20971520)),
    ((5120, 8, 64, 128, True), (5408, 10272, 45613056, 10518528, 46137344, 46137344)),
    ((5120, 32, 256, 64, False), (10656, 10368, 174587904, 21233664, 176160768, 176160768)),
    ((7168, 8, 256, 128, True), (7520, 14368, 253755392, 14712832, 253755392, 247463936)),
    ((7168, 9, 32, 8192, False), (14496, 14400, 3800039424, 1061683200, 3800039424, 3800039424)),
    ((7168, 32, 4, 2048, True), (7808, 14464, 65798144, 118489088, 119537664, 119537664)),
    ((4096, 1, 256, 4096, False), (8256, 8224, 8657043456, 33685504, 8657043456, 8657043456)),
    ((2048, 32, 128, 1, True), (2528, 4224, 331776, 135168, 2097152, 2097152)),
    ((5120, 0, 16, 512, True), (5696, 10368, 47972352, 84934656, 85983232, 85983232)),
    ((7168, 0, 8, 4096, False), (14752, 14464, 483393536, 473956352, 484442112, 484442112)),
    ((7000, 6, 8, 4096, True), (7320, 14032, 247201792, 344850432, 346030080, 346030080)),
    ((7000, 6, 8, 4096, False), (14096, 14032, 461897728, 344850432, 463470592, 463470592)),
]


@pytest.mark.parametrize(("shape", "expected"), GOLDEN, ids=[str(s) for s, _ in GOLDEN])
def test_golden(shape, expected):
    hidden, topk, ranks, tokens, fp8 = shape
    r = report(plan(hidden, topk, ranks, tokens, fp8))
    got = (r.quantity("dispatch_record_num_bytes"), r.quantity("combine_record_num_bytes"),
           r.quantity("hint_dispatch_num_bytes"), r.quantity("combine_num_bytes"),
           r.buffer("EP buffer").num_bytes, r.buffer("EP buffer").num_bytes_needed)
    assert got == expected
    assert ascend.calculate_buffer_size(ranks, tokens, hidden, topk, fp8) == expected[4]


def test_upstream_argument_order():
    """get_dispatch_buffer_size(tokens, hidden, packs, topk, elem, ranks); get_combine_buffer_size(ranks, tokens, hidden, topk)."""
    assert ascend.get_dispatch_buffer_size(4096, 7168, 224, 6, 1, 8) == 252_706_816
    assert ascend.get_combine_buffer_size(8, 4096, 7168, 6) == 353_107_968
    assert ascend.get_combine_buffer_size(2, 4096, 7168, 6) == 2 * 4096 * 14_368  # min(topk, ranks)


def test_dispatch_byte_map_seed_default():
    """Every field of the default FP8 dispatch record (token.hpp getters)."""
    rec = report(plan()).record("dispatch")
    got = [(f.name, f.offset, f.num_bytes) for f in rec.fields]
    assert got == [
        ("hidden", 0, 7168),
        ("sf", 7168, 224),
        ("topk_idx", 7392, 48),
        ("padding", 7440, 16),
        ("topk_weights", 7456, 24),
        ("src_token_global_idx", 7480, 4),
        ("padding", 7484, 4),
    ]
    assert rec.num_bytes == 7488
    assert rec.field("topk_idx").dtype == "int64" and rec.field("topk_idx").count == 6


def test_combine_byte_map():
    rec = report(plan()).record("combine")
    assert [(f.name, f.offset, f.num_bytes) for f in rec.fields] == [
        ("hidden", 0, 14336), ("topk_weights", 14336, 24), ("padding", 14360, 8)]


def test_reader_writer_mismatch_hidden_7000():
    """hidden 7000, top-k 6, FP8: the reader looks 8 bytes too late; its last field ends 4 bytes past the record."""
    r = report(plan(hidden=7000))
    (finding,) = [f for f in r.findings if f.code == "ascend.reader-writer-mismatch"]
    assert finding.severity == "error"
    assert finding.data["record_num_bytes"] == 7320
    assert finding.data["overrun_bytes"] == 4
    assert finding.data["reader_end"] == 7324
    assert finding.data["last_field"] == "src_token_global_idx"
    shifts = {f["field"]: f["shift_bytes"] for f in finding.data["fields"]}
    assert shifts == {"sf": 8, "topk_idx": 8, "topk_weights": 8, "src_token_global_idx": 8}
    writer = r.record("dispatch (as written)")
    assert writer.field("sf").offset == 7000 and writer.overrun_bytes() == 0
    assert r.record("dispatch").field("sf").offset == 7008


def test_bf16_unaligned_fields_flagged_without_mismatch():
    """BF16 hidden 7000 -> 14000 hidden bytes: no SF, so writer and reader agree, but fields are unaligned."""
    r = report(plan(hidden=7000, fp8=False))
    codes = {f.code for f in r.findings}
    assert "ascend.reader-writer-mismatch" not in codes
    (warn,) = [f for f in r.findings if f.code == "ascend.unaligned-fields"]
    assert {f["field"] for f in warn.data["fields"]} == {"topk_idx", "topk_weights"}


def test_aligned_default_has_no_consistency_findings():
    codes = {f.code for f in report(plan()).findings}
    assert codes == {"ascend.hint-sf-approximation"}
    assert {f.code for f in report(plan(fp8=False)).findings} == set()


def test_reduction_bit_limits():
    """kNumMaxRanks is 256, but the dispatch kernel's 8-bit arrival count allows 255 ranks;
    tokens x ranks must fit the 24-bit reduction value."""
    r = report(plan(ranks=256, experts=256, tokens=1))
    assert {lim.name for lim in r.failed_limits()} == {"num_ranks (8-bit reduction arrival count)"}
    r = report(plan(ranks=128, experts=256, tokens=131072))
    assert "tokens x ranks (24-bit reduction value)" in {lim.name for lim in r.failed_limits()}
    r = report(plan(ranks=128, experts=256, tokens=131071))
    assert "tokens x ranks (24-bit reduction value)" not in {lim.name for lim in r.failed_limits()}


def test_kernel_limits_reported():
    r = report(plan(hidden=7000))
    broken = {lim.name for lim in r.failed_limits()}
    assert broken == {"hidden % 128 (combine reduce epilogue)"}
    r = report(plan(experts=1024, ranks=8))
    assert {lim.name for lim in r.failed_limits()} == {"num_experts (dispatch SIMT worker)"}
    r = report(plan(experts=1024, ranks=1))
    assert {lim.name for lim in r.failed_limits()} == {"num_experts (dispatch SIMT worker)",
                                                        "num_experts_per_rank (receive epilogue)"}


def test_sf_pack_override_larger_than_hint_is_an_error_finding():
    r = report(plan(hidden=7168, num_sf_packs=1000, tokens=64, ranks=256))
    assert any(f.code == "ascend.hint-too-small" for f in r.findings)
    assert r.buffer("EP buffer").num_bytes_needed > r.buffer("EP buffer").num_bytes


# Plans the size functions evaluate but a later step refuses (dispatch's EP_HOST_ASSERT(num_experts %
# num_ranks == 0), EPB:139; kernel limits; signal arrays sized by kNumMaxRanks / kNumMaxExperts): the
# sizes, every broken limit with ok=False and an ascend.kernel-limit error finding each.
REFUSED_LATER = [
    ({"ranks": 512, "experts": 512}, [("num_ranks", 512, 256), ("num_ranks (8-bit reduction arrival count)", 512, 255)]),
    ({"topk": 33}, [("num_topk", 33, 32)]),
    ({"experts": 4096, "ranks": 8}, [("num_experts", 4096, 2048), ("num_experts (dispatch SIMT worker)", 4096, 512)]),
    ({"experts": 100, "ranks": 8}, [("num_experts % num_ranks", 4, 0)]),
    ({"experts": 2040, "ranks": 8, "num_redundant_experts": 16},
     [("num_experts", 2056, 2048), ("num_experts (dispatch SIMT worker)", 2056, 512)]),
]


@pytest.mark.parametrize(("kwargs", "broken"), REFUSED_LATER)
def test_refused_later_are_error_findings_with_sizes(kwargs, broken):
    p = plan(**kwargs)
    r = report(p)
    assert [(lim.name, lim.value, lim.bound) for lim in r.failed_limits()] == broken
    findings = [f for f in r.findings if f.code == "ascend.kernel-limit"]
    assert [f.data["limit"] for f in findings] == [name for name, _, _ in broken]
    assert all(f.severity == "error" for f in findings)
    assert r.buffer("EP buffer").num_bytes == ascend.calculate_buffer_size(
        p.num_ranks, p.num_max_tokens_per_rank, p.hidden, p.num_topk, p.use_fp8_dispatch)
    from epbuf.plan import summarize
    from epbuf.report import summary_of

    assert summarize(p, "ascend") == summary_of(r)


def test_divisibility_finding_names_the_host_assert():
    (finding,) = [f for f in report(plan(experts=100, ranks=8)).findings if f.code == "ascend.kernel-limit"]
    assert "csrc/buffers/ep.hpp:139 EP_HOST_ASSERT(num_experts % context->num_ranks == 0)" in finding.message
    assert finding.data["enforced"] == "host"


def test_32_bit_topk_idx_is_a_broken_limit():
    """Ascend routes with int64 indices: dispatch asserts topk_idx.scalar_type() == torch::kInt64
    (EPB:167), so a plan for a 32-bit topk_idx_t build keeps its sizes and breaks that limit."""
    r = report(plan(num_topk_idx_bits=32))
    assert [(lim.name, lim.value, lim.bound) for lim in r.failed_limits()] == [("topk_idx bits", 32, 64)]
    assert r.num_bytes == report(plan()).num_bytes == report(plan(num_topk_idx_bits=64)).num_bytes
    assert not report(plan(num_topk_idx_bits=64)).failed_limits()
    from epbuf.plan import summarize

    assert summarize(plan(num_topk_idx_bits=32), "ascend").broken == ("topk_idx bits",)


def test_all_broken_limits_collected_in_one_report():
    r = report(plan(ranks=300, topk=40, experts=300))
    assert {"num_ranks", "num_ranks (8-bit reduction arrival count)", "num_topk"} <= {
        lim.name for lim in r.failed_limits()}


@pytest.mark.parametrize(("kwargs", "needle"), [
    # Beyond the int upstream computes in: hidden x element size, a record stride (TOK:36-43).
    ({"hidden": 2**30 + 32, "fp8": False}, "--hidden (hidden) = 1073741856: hidden x element size = 2147483712"),
    ({"hidden": 2**30 + 32, "fp8": True}, "the combine record of 2147483744 B must fit int32"),
    ({"hidden": 7168, "num_sf_packs": 2**30}, "--sf-packs (num_sf_packs) = 1073741824: the dispatch record"),
    ({"topk": 2**28}, "--topk (num_topk) = 268435456: the dispatch record"),
])
def test_int_overflow_is_invalid(kwargs, needle):
    with pytest.raises(InvalidArgumentError, match=re.escape(needle)):
        report(plan(**kwargs))
    from epbuf.plan import summarize

    with pytest.raises(InvalidArgumentError, match=re.escape(needle)):
        summarize(plan(**kwargs), "ascend")


def test_slot_offsets():
    layout = ascend.dispatch_buffer_layout(4096, 7168, 112, 6, 1, 8)
    assert layout.slot_offset(0, 0) == 0
    assert layout.slot_offset(0, 1) == 7488
    assert layout.slot_offset(1, 0) == 4096 * 7488
    assert layout.slot_offset(7, 4095) + 7488 == layout.num_bytes
    with pytest.raises(IndexError):
        layout.slot_offset(8, 0)


# --- properties -------------------------------------------------------------------------
hiddens = st.integers(1, 16384)
topks = st.integers(1, 32)
ranks_st = st.integers(1, 256)
tokens_st = st.integers(1, 1 << 16)


@given(hidden_bytes=st.integers(1, 1 << 15).map(lambda n: n * 32), packs=st.integers(0, 4096), topk=topks,
       with_metadata=st.booleans())
def test_fields_tile_the_record_when_hidden_is_aligned(hidden_bytes, packs, topk, with_metadata):
    """Where upstream's assumption hidden_bytes % 32 == 0 holds: no overlap, nothing past the stride,
    writer and reader agree."""
    t = ascend.TokenLayout(num_hidden_bytes=hidden_bytes, num_sf_bytes=2 * packs, num_topk=topk,
                           with_metadata=with_metadata)
    reader, writer = t.reader_record("r"), t.writer_record("w")
    assert reader.overlaps() == [] and reader.overrun_bytes() == 0
    assert [(f.name, f.offset) for f in reader.fields] == [(f.name, f.offset) for f in writer.fields]
    assert sum(f.num_bytes for f in reader.fields) == t.num_bytes()
    assert ascend.check_record(t) == []


@given(hidden_bytes=st.integers(1, 1 << 16), packs=st.integers(0, 4096), topk=topks)
def test_writer_view_always_fits_and_mismatch_iff_unaligned_sf(hidden_bytes, packs, topk):
    """The kernel's own writes never overlap or overrun; the reader disagrees exactly when SF is
    present and hidden_bytes % 32 != 0."""
    t = ascend.TokenLayout(num_hidden_bytes=hidden_bytes, num_sf_bytes=2 * packs, num_topk=topk)
    writer = t.writer_record("w")
    assert writer.overlaps() == [] and writer.overrun_bytes() == 0
    mismatch = any(f.code == "ascend.reader-writer-mismatch" for f in ascend.check_record(t))
    assert mismatch == (packs > 0 and hidden_bytes % 32 != 0)


@given(hidden=hiddens, topk=st.integers(0, 32), ranks=ranks_st, tokens=tokens_st, fp8=st.booleans())
def test_hint_aligned_and_at_least_the_real_need(hidden, topk, ranks, tokens, fp8):
    """Hints are 2 MiB aligned, cover max(dispatch, combine) by less than 2 MiB, and are >= the real need."""
    r = report(plan(hidden, topk, ranks, tokens, fp8, experts=ranks))
    buf = r.buffer("EP buffer")
    assert buf.num_bytes % (2 * MiB) == 0 and buf.num_bytes_needed % (2 * MiB) == 0
    largest = max(reg.num_bytes for reg in buf.regions)
    assert 0 <= buf.num_bytes - largest < 2 * MiB
    assert buf.num_bytes >= buf.num_bytes_needed
    assert buf.num_bytes == ascend.calculate_buffer_size(ranks, tokens, hidden, topk, fp8)
    assert r.num_bytes == buf.num_bytes + 2 * MiB


@given(hidden=hiddens, topk=st.integers(0, 32), ranks=st.integers(1, 255), tokens=tokens_st, fp8=st.booleans())
def test_monotone_in_tokens_and_ranks(hidden, topk, ranks, tokens, fp8):
    base = ascend.calculate_buffer_size(ranks, tokens, hidden, topk, fp8)
    assert ascend.calculate_buffer_size(ranks, tokens + 1, hidden, topk, fp8) >= base
    assert ascend.calculate_buffer_size(ranks + 1, tokens, hidden, topk, fp8) >= base


@given(hidden=hiddens, topk=st.integers(1, 32), ranks=ranks_st, tokens=tokens_st, fp8=st.booleans())
def test_topk_zero_means_32(hidden, topk, ranks, tokens, fp8):
    assert ascend.calculate_buffer_size(ranks, tokens, hidden, 0, fp8) == ascend.calculate_buffer_size(
        ranks, tokens, hidden, 32, fp8)


@settings(max_examples=50)
@given(hidden=hiddens, topk=st.integers(0, 32), ranks=ranks_st, tokens=tokens_st, fp8=st.booleans())
def test_json_round_trip(hidden, topk, ranks, tokens, fp8):
    r = report(plan(hidden, topk, ranks, tokens, fp8, experts=ranks))
    assert report_from_dict(json.loads(json.dumps(report_to_dict(r)))) == r


def test_sizes_beyond_int64_are_invalid():
    """ranks 255 x 2^31-1 tokens x ~2^30-byte records overflows upstream's int64_t sizes."""
    huge = plan(ranks=255, experts=255, tokens=2**31 - 1, hidden=2**29, fp8=False)
    with pytest.raises(InvalidArgumentError, match=r"--tokens \(num_max_tokens_per_rank\) = 2147483647: .* beyond int64"):
        report(huge)
    from epbuf.plan import summarize

    with pytest.raises(InvalidArgumentError, match="beyond int64"):
        summarize(huge, "ascend")


@st.composite
def any_plan(draw):
    """Plans valid and not: ranks and top-k within and beyond upstream's limits, experts that divide
    the ranks or not, token counts up to int32, hidden sizes whose int products overflow, SF-pack
    overrides and 32-bit topk_idx builds."""
    ranks = draw(st.one_of(st.integers(1, 256), st.integers(257, 4096)))
    return Plan(
        hidden=draw(st.one_of(st.integers(1, 16384), st.sampled_from([7000, 2**30 + 32, 2**31 - 1]))),
        num_topk=draw(st.one_of(st.integers(0, 32), st.integers(33, 64), st.just(2**28))),
        num_experts=draw(st.one_of(st.integers(1, 4).map(lambda k: k * ranks), st.integers(1, 5000))),
        num_redundant_experts=draw(st.sampled_from([0, 0, 16, 31])),
        num_ranks=ranks,
        num_max_tokens_per_rank=draw(st.one_of(st.integers(1, 1 << 16), st.integers(1, 2**31 - 1))),
        use_fp8_dispatch=draw(st.booleans()),
        num_sf_packs=draw(st.one_of(st.none(), st.integers(0, 4096), st.just(2**30))),
        num_topk_idx_bits=draw(st.sampled_from([None, 32, 64])),
    )


def _summary_or_error(fn, p):
    try:
        return fn(p)
    except InvalidArgumentError as error:
        return type(error), str(error)


@settings(max_examples=300, deadline=None)
@given(p=any_plan())
def test_summarize_equals_summary_of_report(p):
    """The sweep's fast path gives exactly the full report's summary, or raises exactly its error;
    a plan is invalid only for int/int64 overflow, never for a limit a later step enforces."""
    from epbuf.plan import summarize
    from epbuf.report import summary_of

    expected = _summary_or_error(lambda q: summary_of(report(q, "ascend")), p)
    assert _summary_or_error(lambda q: summarize(q, "ascend"), p) == expected
    if isinstance(expected, tuple):
        assert "int32" in expected[1] or "int64" in expected[1]


def test_sf_packs_above_the_hint_say_smaller_not_negative_larger(capsys):
    """Issue 9: with a large --sf-packs the finding said "-116,391,936 B larger than used"."""
    from epbuf.cli import main

    assert main(["hint", "--sf-packs", "2000", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "116,391,936 B smaller than a real run needs" in out and "-116,391,936" not in out
    assert "hint UNDER-reserves" in out
