"""DeepEP V2 backend: golden numbers per generation, byte maps, domain, limits, properties.

Golden rows come from the worked examples of ``docs/derivations/deepep_v2.md`` §C
(hand derivations of
``csrc/elastic/buffer.hpp:586-686 @dd758ca`` and ``csrc/buffers/ep.hpp:183-283 @def8651``),
independently of epbuf's code, pinned here as literals. Rows for ``"2026-04"`` (b306af0,
``buffer.hpp:595-629``: the same max without 2 MiB rounding, workspace
``align(12,820,528, 32) = 12,820,544``) were derived the same way from the generation A
numbers. The remaining rows are derived by hand in the comment above them.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epbuf import InvalidArgumentError, Plan
from epbuf.backends import deepep_v2 as v2
from epbuf.plan import report as plan_report
from epbuf.plan import summarizer
from epbuf.report import Summary, report_from_dict, report_to_dict, summary_of
from epbuf.sweep import sweep
from epbuf.units import MiB

TWO_MIB = 2 * MiB
WS_2026_04 = 12_820_544  # align(WorkspaceLayout::get_num_bytes() = 12,820,528, 32), layout.cuh:79-80 @b306af0
WS_2026_07 = 14_680_064  # align(12,820,528, 2 MiB), docs/derivations/deepep_v2.md §A.6
WS_REFACTOR = 16_777_216  # align(sizeof(EPSignals) = 15,831,168, 2 MiB), docs/derivations/deepep_v2.md §B.6
WORKSPACE = {"2026-04": WS_2026_04, "2026-07": WS_2026_07, "refactor": WS_REFACTOR}


def plan(hidden=7168, topk=8, ranks=8, tokens=4096, fp8=True, experts=256, **kw) -> Plan:
    return Plan(hidden=hidden, num_topk=topk, num_experts=experts, num_ranks=ranks,
                num_max_tokens_per_rank=tokens, use_fp8_dispatch=fp8, **kw)


CASES = {
    # docs/derivations/deepep_v2.md §C.1 (a): FP8, 8 ranks on one NVLink node, T=4096, top-8, multiple reduction.
    "a": dict(),
    # docs/derivations/deepep_v2.md §C.1 (b): the same in BF16.
    "b": dict(fp8=False),
    # docs/derivations/deepep_v2.md §C.1 (c): FP8, 32 = 4 x 8 ranks, hybrid.
    "c": dict(ranks=32),
    "c-bf16": dict(ranks=32, fp8=False),
    # docs/derivations/deepep_v2.md §C.2: (c) without multiple reduction, and with hybrid mode disabled.
    "c-amr0": dict(ranks=32, allow_multiple_reduction=False),
    "c-direct": dict(ranks=32, allow_hybrid_mode=False),
    # docs/derivations/deepep_v2.md §C.1 (d): FP8, 16 = 2 x 8, hidden 4096, T=8192, 128 experts.
    "d": dict(ranks=16, tokens=8192, hidden=4096, experts=128),
    "d-bf16": dict(ranks=16, tokens=8192, hidden=4096, experts=128, fp8=False),
    # docs/derivations/deepep_v2.md §C.2 (e): (a) with top-k 0, which reserves 32.
    "e": dict(topk=0),
    # docs/derivations/deepep_v2.md §C.2 (g): FP8, 8 ranks, T=8192, top-12: pins the generation (RDMA rounding).
    "g": dict(tokens=8192, topk=12),
}

# case, version -> (hint dispatch record, combine record, hint dispatch bytes, combine bytes, hint, device total)
GOLDEN = [
    # docs/derivations/deepep_v2.md §C.2 table, generation A (dd758ca) and B (refactor); device = workspace + hint.
    ("a", "2026-07", (8192, 14400, 268_435_456, 471_859_200, 471_859_200, 486_539_264)),
    ("a", "refactor", (8192, 14400, 268_435_456, 471_859_200, 471_859_200, 488_636_416)),
    ("b", "2026-07", (14464, 14400, 473_956_352, 471_859_200, 473_956_352, 488_636_416)),
    ("b", "refactor", (14464, 14400, 473_956_352, 471_859_200, 473_956_352, 490_733_568)),
    ("c", "2026-07", (8192, 14400, 1_283_457_024, 2_433_024_000, 2_434_793_472, 2_449_473_536)),
    ("c", "refactor", (8192, 14400, 1_283_457_024, 2_433_024_000, 2_434_793_472, 2_451_570_688)),
    ("c-bf16", "2026-07", (14464, 14400, 2_266_103_808, 2_433_024_000, 2_434_793_472, 2_449_473_536)),
    ("c-bf16", "refactor", (14464, 14400, 2_266_103_808, 2_433_024_000, 2_434_793_472, 2_451_570_688)),
    ("c-amr0", "2026-07", (8192, 14400, 1_283_457_024, 4_836_556_800, 4_838_129_664, 4_852_809_728)),
    ("c-amr0", "refactor", (8192, 14400, 1_283_457_024, 4_836_556_800, 4_838_129_664, 4_854_906_880)),
    ("c-direct", "2026-07", (8192, 14400, 1_107_296_256, 2_359_296_000, 2_359_296_000, 2_373_976_064)),
    ("c-direct", "refactor", (8192, 14400, 1_107_296_256, 2_359_296_000, 2_359_296_000, 2_376_073_216)),
    ("d", "2026-07", (4736, 8256, 749_273_088, 1_373_798_400, 1_375_731_712, 1_390_411_776)),
    ("d", "refactor", (4736, 8256, 749_273_088, 1_373_798_400, 1_375_731_712, 1_392_508_928)),
    ("d-bf16", "2026-07", (8320, 8256, 1_316_290_560, 1_373_798_400, 1_375_731_712, 1_390_411_776)),
    ("d-bf16", "refactor", (8320, 8256, 1_316_290_560, 1_373_798_400, 1_375_731_712, 1_392_508_928)),
    ("e", "2026-07", (8480, 14592, 277_872_640, 478_150_656, 478_150_656, 492_830_720)),
    ("e", "refactor", (8512, 14592, 278_921_216, 478_150_656, 478_150_656, 494_927_872)),
    ("g", "2026-07", (8224, 14432, 538_968_064, 945_815_552, 945_815_552, 960_495_616)),
    ("g", "refactor", (8256, 14464, 541_065_216, 947_912_704, 947_912_704, 964_689_920)),
    # 2026-04 (b306af0): generation A's records and phases, hint = the unrounded max,
    # device = 12,820,544 + hint (buffer.hpp:99-103, 627-628 @b306af0).
    ("a", "2026-04", (8192, 14400, 268_435_456, 471_859_200, 471_859_200, 484_679_744)),
    ("b", "2026-04", (14464, 14400, 473_956_352, 471_859_200, 473_956_352, 486_776_896)),
    ("c", "2026-04", (8192, 14400, 1_283_457_024, 2_433_024_000, 2_433_024_000, 2_445_844_544)),
    ("c-amr0", "2026-04", (8192, 14400, 1_283_457_024, 4_836_556_800, 4_836_556_800, 4_849_377_344)),
    ("c-direct", "2026-04", (8192, 14400, 1_107_296_256, 2_359_296_000, 2_359_296_000, 2_372_116_544)),
    ("d", "2026-04", (4736, 8256, 749_273_088, 1_373_798_400, 1_373_798_400, 1_386_618_944)),
    ("e", "2026-04", (8480, 14592, 277_872_640, 478_150_656, 478_150_656, 490_971_200)),
    ("g", "2026-04", (8224, 14432, 538_968_064, 945_815_552, 945_815_552, 958_636_096)),
]


@pytest.mark.parametrize(("case", "version", "expected"), GOLDEN, ids=[f"{c}-{v}" for c, v, _ in GOLDEN])
def test_golden(case, version, expected):
    r = v2.report(plan(version=version, **CASES[case]))
    got = (
        r.quantity("hint_dispatch_record_num_bytes"),
        r.quantity("combine_record_num_bytes"),
        r.quantity("hint_dispatch_num_bytes"),
        r.quantity("combine_num_bytes"),
        r.buffer("EP buffer").num_bytes,
        r.num_bytes,
    )
    assert got == expected
    assert r.buffer("workspace").num_bytes == WORKSPACE[version]


def test_hint_api_upstream_arguments():
    """get_buffer_size_hint(group, T, hidden, num_topk, use_fp8_dispatch, allow_hybrid_mode,
    allow_multiple_reduction), as elastic.py:380-406 @dd758ca; group by size. docs/derivations/deepep_v2.md §C.1."""
    assert v2.get_buffer_size_hint(8, 4096, 7168, 8, True) == 471_859_200  # (a)
    assert v2.get_buffer_size_hint(8, 4096, 7168, 8) == 473_956_352  # (b): use_fp8_dispatch=False by default
    assert v2.get_buffer_size_hint((4, 8), 4096, 7168, 8, True) == 2_434_793_472  # (c)
    assert v2.get_buffer_size_hint((4, 8), 4096, 7168, 8, True, False) == 2_359_296_000  # (c) hybrid off
    assert v2.get_buffer_size_hint((4, 8), 4096, 7168, 8, True, True, False) == 4_838_129_664  # (c) amr off
    assert v2.get_buffer_size_hint(8, 8192, 7168, 12, True, version="2026-07") == 945_815_552  # (g) A
    assert v2.get_buffer_size_hint(8, 8192, 7168, 12, True) == 947_912_704  # (g) B
    assert v2.get_buffer_size_hint(8, 8192, 7168, 12, True, version="2026-04") == 945_815_552
    assert v2.calculate_buffer_size(16, 8, 8192, 4096, 8, True, True, True) == 1_375_731_712  # (d)


def test_phase_sub_buffers_hybrid():
    """docs/derivations/deepep_v2.md §C.1 (c): each term of get_dispatch/combine_buffer_size (buffer.hpp:603-612, 636-648)."""
    r = v2.report(plan(ranks=32))
    assert r.inputs["mode"] == "hybrid"
    assert r.quantity("dispatch_scaleup_recv_buffer_num_bytes") == 1_073_741_824
    assert r.quantity("dispatch_scaleout_send_buffer_num_bytes") == 33_554_432
    assert r.quantity("dispatch_scaleout_recv_buffer_num_bytes") == 176_160_768
    assert r.quantity("combine_scaleup_recv_buffer_num_bytes") == 1_887_436_800
    assert r.quantity("combine_scaleout_recv_buffer_num_bytes") == 235_929_600
    assert r.quantity("combine_scaleout_send_buffer_num_bytes") == 309_657_600


def test_phase_sub_buffers_direct_off_nvlink():
    """docs/derivations/deepep_v2.md §C.2, (c) with hybrid mode disabled: (1, 32), is_scaleup_nvlink = (32 == 8) = false,
    so both send buffers exist (buffer.hpp:594-600, 623-633 @dd758ca)."""
    r = v2.report(plan(ranks=32, allow_hybrid_mode=False))
    assert (r.inputs["num_scaleout_ranks"], r.inputs["num_scaleup_ranks"], r.inputs["is_scaleup_nvlink"]) == (1, 32, False)
    assert r.quantity("dispatch_send_buffer_num_bytes") == 33_554_432
    assert r.quantity("dispatch_recv_buffer_num_bytes") == 1_073_741_824
    assert r.quantity("combine_send_buffer_num_bytes") == 1_887_436_800
    assert r.quantity("combine_recv_buffer_num_bytes") == 471_859_200


# No NVLink (LSA team of one rank), 8 ranks, the (a) shapes (D = 8192, C = 14400, T = 4096):
#  hybrid allowed -> (so, su) = (8, 1), is_scaleup_nvlink = (1 == 1): hybrid formulas with su = 1
#    dispatch = 1*(8*4096)*8192 + 1*4096*8192 + 8*(4096+1280)*8192 = 268,435,456 + 33,554,432 + 352,321,536
#    combine  = min(1,8)*(8*4096)*14400 + min(8,8)*4096*14400 + 1*(8*5376)*14400
#             = 471,859,200 + 471,859,200 + 619,315,200 = 1,563,033,600 -> align 2 MiB = 746 x 2 MiB
#  hybrid off -> (1, 8), is_scaleup_nvlink = (8 == 1) = false: direct with send buffers
#    dispatch = (1 + 8)*4096*8192 = 301,989,888; combine = (8 + 8)*4096*14400 = 943,718,400 = 450 x 2 MiB
NO_NVLINK = [
    (True, ("hybrid", 8, 1, True), 654_311_424, 1_563_033_600, 1_564_475_392),
    (False, ("direct", 1, 8, False), 301_989_888, 943_718_400, 943_718_400),
]


@pytest.mark.parametrize(("hybrid", "domain", "dispatch", "combine", "hint"), NO_NVLINK)
def test_no_nvlink_domain(hybrid, domain, dispatch, combine, hint):
    r = v2.report(plan(scaleup_is_nvlink=False, allow_hybrid_mode=hybrid, version="2026-07"))
    i = r.inputs
    assert (i["mode"], i["num_scaleout_ranks"], i["num_scaleup_ranks"], i["is_scaleup_nvlink"]) == domain
    assert i["num_nvl_ranks"] == 1 and i["num_rdma_ranks"] == 8
    assert r.quantity("hint_dispatch_num_bytes") == dispatch
    assert r.quantity("combine_num_bytes") == combine
    assert r.buffer("EP buffer").num_bytes == hint


# --- records -------------------------------------------------------------------------------
def test_dispatch_byte_map_case_a():
    """docs/derivations/deepep_v2.md §C.1: FP8 hidden 7168, 224 hint SF packs, top-8 -> sf 7168, topk_idx 8064, weights 8096,
    src_idx 8128, linked_list 8132..8163, stride 8192 (layout.cuh:201-248 @dd758ca)."""
    record = v2.report(plan()).record("dispatch (hint)")
    assert record.num_bytes == 8192
    assert [(f.name, f.offset, f.num_bytes) for f in record.fields] == [
        ("hidden", 0, 7168), ("sf", 7168, 896), ("topk_idx", 8064, 32), ("topk_weights", 8096, 32),
        ("src_token_global_idx", 8128, 4), ("linked_list_idx", 8132, 32), ("padding", 8164, 28),
    ]
    assert record.field("sf").count == 224 and record.field("topk_idx").dtype == "int32"


def test_real_dispatch_record_and_need():
    """A real FP8 dispatch sends ceil(7168/128) = 56 packs: record 7168 + 224 + 128 = 7520 (A),
    align(7520, 64) = 7552 (B); 8 x 4096 records = 246,415,360 / 247,463,936 B. Combine still binds."""
    for version, record, dispatch in (("2026-07", 7520, 246_415_360), ("refactor", 7552, 247_463_936)):
        r = v2.report(plan(version=version))
        assert r.quantity("real_num_sf_packs") == 56
        assert r.quantity("hint_num_sf_packs") == 224
        assert r.record("dispatch").num_bytes == record
        assert r.quantity("real_dispatch_num_bytes") == dispatch
        assert r.buffer("EP buffer").num_bytes_needed == 471_859_200
        finding = next(f for f in r.findings if f.code == "deepep-v2.hint-sf-approximation")
        assert finding.severity == "info"
        assert finding.data["num_bytes_over_reserved"] == 268_435_456 - dispatch


def test_bf16_has_no_sf_and_no_approximation():
    r = v2.report(plan(fp8=False))
    assert r.quantity("real_num_sf_packs") == r.quantity("hint_num_sf_packs") == 0
    assert not r.findings
    assert [rec.name for rec in r.records] == ["dispatch", "combine"]
    assert r.buffer("EP buffer").num_bytes_needed == r.buffer("EP buffer").num_bytes


def test_rdma_padding_and_mbarrier_slot_topk32():
    """docs/derivations/deepep_v2.md §C.2 (e), topk 32: metadata 8*32 + 4*33 = 388 -> 416; A record 7168+896+416 = 8480,
    B rounds to 8512 (32 bytes RDMA pad); the mbarrier sits after the data: 8480 in A
    (layout.cuh:246-248), 8512 in B (token.cuh:79-81)."""
    a = v2.get_dispatch_token_layout(7168, 1, 224, 32, version="2026-07")
    b = v2.get_dispatch_token_layout(7168, 1, 224, 32)
    assert (a.num_metadata_bytes, a.num_bytes(), a.num_rdma_padding_bytes, a.mbarrier_offset) == (388, 8480, 0, 8480)
    assert (b.num_bytes(), b.num_rdma_padding_bytes, b.mbarrier_offset, b.num_bytes(True)) == (8512, 32, 8512, 8544)
    smem = b.record("smem", with_mbarrier=True)
    assert smem.num_bytes == 8544 and smem.field("mbarrier").offset == 8512


def test_combine_record_reserves_topk_slots():
    """with_metadata=false still reserves num_topk * (4 + 4) bytes (layout.cuh:194-195): 2*7168 + 64."""
    record = v2.report(plan()).record("combine")
    assert [(f.name, f.offset, f.num_bytes) for f in record.fields] == [
        ("hidden", 0, 14336), ("topk_idx", 14336, 32), ("topk_weights", 14368, 32),
    ]


def test_slot_offsets():
    layout = v2.BufferLayout(token_layout=v2.get_dispatch_token_layout(7168, 1, 224, 8), num_ranks=8,
                             num_max_tokens_per_rank=4096)
    assert layout.slot_offset(0, 1) == 8192
    assert layout.slot_offset(1, 0) == 4096 * 8192
    assert layout.slot_offset(7, 4095) == layout.num_bytes - 8192
    with pytest.raises(IndexError):
        layout.slot_offset(8, 0)


# --- workspace ------------------------------------------------------------------------------
def test_workspace_generation_a_terms():
    """docs/derivations/deepep_v2.md §A.6: WorkspaceLayout::get_num_bytes() term by term (layout.cuh:43-80 @dd758ca)."""
    regions = v2.workspace_regions("2026-07")
    assert [r.num_bytes for r in regions] == [16, 24576, 16384, 32768, 4096, 8192, 16384, 8_388_608, 4_194_304,
                                              32, 135_168]
    assert v2.get_workspace_num_bytes("2026-07") == 12_820_528
    assert v2.num_workspace_bytes("2026-07") == 14_680_064
    assert v2.get_workspace_num_bytes("2026-04") == v2.num_workspace_bytes("2026-04") == 12_820_544


def test_workspace_ep_signals_layout():
    """docs/derivations/deepep_v2.md §B.6: sizeof(EPSignals) = 15,831,168 with members at 0, 64, 24640, 73792, 77888,
    102464, 10588224, 15831104 and a 60-byte alignas(64) tail (workspace.cuh:9-22 @def8651)."""
    regions = v2.workspace_regions("refactor")
    offsets, cursor = [], 0
    for r in regions:
        offsets.append((r.name, cursor, r.num_bytes))
        cursor += r.num_bytes
    assert offsets == [
        ("barrier_signals", 0, 64), ("notify_reduction", 64, 24576), ("scaleup_rank_expert_count", 24640, 49152),
        ("scaleup_atomic_sender_count", 73792, 4096), ("scaleout_rank_expert_count", 77888, 24576),
        ("scaleout_channel_signaled_tail", 102464, 10_485_760), ("channel_scaleup_tail", 10_588_224, 5_242_880),
        ("lb_chunk_idx_counter", 15_831_104, 4), ("padding", 15_831_108, 60),
    ]
    assert v2.get_workspace_num_bytes() == 15_831_168
    assert v2.num_workspace_bytes() == 16_777_216
    r = v2.report(plan())
    assert r.quantity("host_workspace_num_bytes") == 15_831_168
    assert r.buffer("workspace").rule == "sum"


# --- versions --------------------------------------------------------------------------------
def test_versions_and_aliases():
    assert list(v2.VERSIONS) == ["2026-04", "2026-07", "refactor"]
    assert v2.get_generation().id == v2.DEFAULT_VERSION == "refactor"
    for alias, target in [("b306af0", "2026-04"), ("a422b5a", "2026-07"), ("dd758ca", "2026-07"),
                          ("1a1ffba", "refactor"), ("def8651", "refactor"), ("latest", "refactor")]:
        assert v2.get_generation(alias).id == target
    assert v2.get_generation("2026-07").commit == "dd758caf451848bd150e1046af3d0a73e5fff38d"
    assert v2.get_generation("2026-04").commit == "b306af06afd412c88e51e71802951606e40b7358"
    assert v2.get_generation("refactor").commit == "1a1ffbac1f9ba94e1f731f7647b5d6353fb38ade"
    r = v2.report(plan(version="dd758ca"))
    assert r.inputs["version"] == "2026-07"
    assert "dd758caf451848bd150e1046af3d0a73e5fff38d" in r.upstream


@pytest.mark.parametrize("bad", ["v3", "2026-08", "", 7])
def test_unknown_version(bad):
    with pytest.raises(InvalidArgumentError) as info:
        v2.get_generation(bad)
    text = str(info.value)
    assert "--backend-version (version)" in text
    assert "2026-04, 2026-07, refactor" in text
    with pytest.raises(InvalidArgumentError, match="--backend-version"):
        v2.report(plan(version=bad))


# --- domain ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("ranks", "nvl", "hybrid", "expected"), [
    # nccl.cu:49-60, 117-125 @dd758ca: (rdma, nvl) -> (so, su), is_scaleup_nvlink = su == nvl.
    (8, 8, True, (1, 1, 8, 8, True, "direct")),
    (8, 8, False, (1, 1, 8, 8, True, "direct")),
    (32, 8, True, (4, 4, 8, 8, True, "hybrid")),
    (32, 8, False, (4, 1, 32, 8, False, "direct")),
    (8, 1, True, (8, 8, 1, 1, True, "hybrid")),
    (8, 1, False, (8, 1, 8, 1, False, "direct")),
    (1, 1, True, (1, 1, 1, 1, True, "direct")),
])
def test_logical_domain(ranks, nvl, hybrid, expected):
    d = v2.logical_domain(ranks, nvl, hybrid)
    assert (d.num_rdma_ranks, d.num_scaleout_ranks, d.num_scaleup_ranks, d.num_nvl_ranks,
            d.is_scaleup_nvlink, d.mode) == expected


def test_plan_domain_defaults():
    """ranks_per_node defaults to min(num_ranks, 8): 16 ranks -> 2 x 8, hybrid."""
    r = v2.report(plan(ranks=16, experts=128))
    assert (r.inputs["num_ranks_per_node"], r.inputs["num_scaleout_ranks"], r.inputs["num_scaleup_ranks"]) == (8, 2, 8)
    r = v2.report(plan(ranks=16, experts=128, num_ranks_per_node=16))
    assert (r.inputs["mode"], r.inputs["num_scaleup_ranks"], r.inputs["is_scaleup_nvlink"]) == ("direct", 16, True)


def test_domain_rejects_uneven_split():
    with pytest.raises(InvalidArgumentError, match="--gpus-per-node"):
        v2.get_physical_domain_size(12, 8)


# --- limits ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("kwargs", "needles"), [
    # Refused by the size functions themselves: TokenLayout's EP_UNIFIED_ASSERT (layout.cuh:198 @dd758ca) ...
    (dict(hidden=7000), ["--hidden", "7000 x 1 = 7000", "multiple of 32"]),
    (dict(hidden=7000, fp8=False), ["--hidden", "7000 x 2 = 14000", "multiple of 32"]),
    (dict(hidden=2064), ["--hidden", "hidden % 32 == 0"]),
    # ... or beyond the int they compute in (BufferLayout's token count, TokenLayout::get_num_bytes).
    (dict(ranks=32, tokens=2**31 - 1000), ["--tokens", "must fit int32"]),
    (dict(tokens=2**27, topk=32, allow_multiple_reduction=False), ["--tokens", "tokens x num_topk"]),
    (dict(hidden=2**30, fp8=False), ["--hidden", "must fit int32"]),
])
def test_invalid_arguments(kwargs, needles):
    with pytest.raises(InvalidArgumentError) as info:
        v2.report(plan(**kwargs))
    for needle in needles:
        assert needle in str(info.value)


# Plans the size functions evaluate but WorkspaceLayout's constructor asserts against later (the buffer
# constructor for the rank count, dispatch for the experts; layout.cuh:37-40 @dd758ca, workspace.cuh:43-46
# @def8651): sizes, the limit with ok=False, and an error finding naming the assertion.
REFUSED_LATER = [
    (dict(ranks=2048, experts=2048), [("num_ranks", 2048, 1024), ("num_scaleout_ranks (hybrid kernels)", 256, 32)],
     "workspace.cuh:44"),
    (dict(experts=4096), [("num_experts", 4096, 2048)], "workspace.cuh:45"),
    (dict(experts=100), [("num_experts % num_ranks", 4, 0)], "workspace.cuh:43"),
    (dict(ranks=4, experts=2048, version="2026-07"), [("num_experts_per_rank", 512, 256)], "layout.cuh:40 @dd758ca"),
    (dict(ranks=2, experts=2048), [("num_experts_per_rank", 1024, 512)], "workspace.cuh:46"),
    (dict(ranks=2048, experts=2048, version="2026-04"), [("num_ranks", 2048, 1024),
                                                         ("num_scaleout_ranks (hybrid kernels)", 256, 32)],
     "layout.cuh:38 @b306af0"),
]


@pytest.mark.parametrize(("kwargs", "broken", "source"), REFUSED_LATER)
def test_refused_later_are_error_findings_with_sizes(kwargs, broken, source):
    p = plan(**kwargs)
    r = v2.report(p)
    assert [(lim.name, lim.value, lim.bound) for lim in r.failed_limits()] == broken
    findings = [f for f in r.findings if f.code == "deepep-v2.kernel-limit"]
    assert [f.data["limit"] for f in findings] == [name for name, _, _ in broken]
    assert source in findings[0].message and findings[0].data["enforced"] == "host"
    assert "refuses this plan" in findings[0].message
    # The sizes are the size functions' own: the expert count is not one of their inputs.
    nvl = p.ranks_per_node
    assert r.buffer("EP buffer").num_bytes == v2.calculate_buffer_size(
        p.num_ranks, nvl, p.num_max_tokens_per_rank, p.hidden, p.num_topk, p.use_fp8_dispatch, True, True,
        version=p.version)
    assert v2.summarize(p) == summary_of(r)


def test_experts_per_rank_512_is_fine_in_refactor_only():
    assert not v2.report(plan(ranks=4, experts=2048)).failed_limits()
    r = v2.report(plan(ranks=4, experts=2048, version="2026-07"))
    assert [lim.name for lim in r.failed_limits()] == ["num_experts_per_rank"]
    assert r.buffer("EP buffer").num_bytes == v2.report(plan(ranks=4, experts=2048)).buffer("EP buffer").num_bytes


def test_redundant_experts_count():
    r = v2.report(plan(experts=256, num_redundant_experts=4))
    assert [(lim.name, lim.value) for lim in r.failed_limits()] == [("num_experts % num_ranks", 260 % 8)]
    r = v2.report(plan(experts=256, num_redundant_experts=32))
    assert next(lim for lim in r.limits if lim.name == "num_experts").value == 288


def test_multiple_reduction_never_multiplies_tokens_by_topk():
    """Direct combine's send buffer holds T x (amr ? 1 : topk) tokens (buffer.hpp:626-630 @dd758ca): with
    multiple reduction T x 32 may exceed int32, nothing upstream computes it. 8 ranks on NVLink, T = 2^27,
    top-32: combine = min(8, 32) x 2^27 x 14592 (B record: 14336 + 256) = 15,668,040,695,808 B."""
    r = v2.report(plan(tokens=2**27, topk=32))
    assert r.quantity("combine_num_bytes") == 8 * 2**27 * 14592 == 15_668_040_695_808
    assert not r.failed_limits()
    with pytest.raises(InvalidArgumentError, match="tokens x num_topk"):
        v2.report(plan(tokens=2**27, topk=32, allow_multiple_reduction=False))


def test_hint_worst_case_sf_assert():
    """EP_HOST_ASSERT(ceil_div(hidden, 32) * sizeof(float) <= hidden) (buffer.hpp:660)."""
    with pytest.raises(InvalidArgumentError, match=r"ceil_div\(hidden, 32\)"):
        v2.get_buffer_size_hint(8, 4096, 3, 8, True)
    with pytest.raises(InvalidArgumentError, match="--tokens"):
        v2.get_buffer_size_hint(8, 0, 7168)


def test_all_problems_collected_in_one_error():
    """The version and the hidden size are both refused; the experts (not divisible) are a finding."""
    with pytest.raises(InvalidArgumentError) as info:
        v2.report(plan(experts=100, hidden=7000, version="v9"))
    assert [p.argument for p in info.value.problems] == ["version", "hidden"]


NOTIFY = "num_scaleup_ranks + num_experts_per_rank (hybrid notify threads)"


@pytest.mark.parametrize(("kwargs", "limits"), [
    (dict(topk=40), ["num_topk"]),
    (dict(hidden=2880), ["hidden % 256 (combine kernels)"]),
    (dict(ranks=512, experts=512), ["num_scaleout_ranks (hybrid kernels)"]),
    # 128 scale-up ranks also leave no notify thread for the experts: 128 + 1 > 4 warps x 32.
    (dict(ranks=256, num_ranks_per_node=128), ["num_scaleup_ranks (hybrid kernels)", NOTIFY]),
    (dict(ranks=16, experts=2048), [NOTIFY]),
    (dict(ranks=1024, experts=1024, tokens=2**21, allow_hybrid_mode=False),
     ["ranks x tokens (int source global index)"]),
])
def test_kernel_limits_are_error_findings(kwargs, limits):
    r = v2.report(plan(**kwargs))
    assert [lim.name for lim in r.failed_limits()] == limits
    findings = [f for f in r.findings if f.code == "deepep-v2.kernel-limit"]
    assert [f.data["limit"] for f in findings] == limits
    assert all(f.severity == "error" for f in findings)
    assert all(lim.enforced == "kernel" for lim in r.failed_limits())


def test_notify_limit_at_its_bound():
    """2 x 8 ranks with 1920 experts: 8 + 120 = 128 notify threads exactly fit; 2048 do not."""
    assert not v2.report(plan(ranks=16, experts=1920)).failed_limits()


def test_hybrid_limits_only_in_hybrid_mode():
    names = {lim.name for lim in v2.report(plan()).limits}
    assert "num_scaleout_ranks (hybrid kernels)" not in names
    names = {lim.name for lim in v2.report(plan(ranks=32)).limits}
    assert {"num_scaleout_ranks (hybrid kernels)", "num_scaleup_ranks (hybrid kernels)"} <= names


def test_report_inputs_and_registry():
    r = plan_report(plan(ranks=32), "deepep-v2")
    assert r.backend == "deepep-v2"
    assert r.inputs == {
        "version": "refactor", "deepep_version": "refactor", "num_ranks": 32, "num_ranks_per_node": 8, "scaleup_is_nvlink": True,
        "num_rdma_ranks": 4, "num_nvl_ranks": 8, "num_scaleout_ranks": 4, "num_scaleup_ranks": 8,
        "is_scaleup_nvlink": True, "mode": "hybrid", "num_max_tokens_per_rank": 4096, "hidden": 7168,
        "num_topk": 8, "num_experts": 256, "num_redundant_experts": 0, "use_fp8_dispatch": True,
        "allow_hybrid_mode": True, "allow_multiple_reduction": True,
    }
    assert all(region.formula and region.source for b in r.buffers for region in b.regions)
    assert [b.name for b in r.buffers] == ["EP buffer", "workspace"]
    assert r.buffer("EP buffer").rule == "max"


# --- properties -----------------------------------------------------------------------------
versions = st.sampled_from(list(v2.VERSIONS))
topks = st.integers(0, 32)
hidden_fp8 = st.integers(1, 512).map(lambda n: n * 32)
tokens_st = st.integers(1, 1 << 14)


@given(hidden_bytes=st.integers(1, 1 << 12).map(lambda n: n * 32), packs=st.integers(0, 2048),
       topk=st.integers(0, 64), with_metadata=st.booleans(), rdma=st.sampled_from([1, 64]),
       with_mbarrier=st.booleans())
def test_getters_agree_with_stride(hidden_bytes, packs, topk, with_metadata, rdma, with_mbarrier):
    """Getters and get_num_bytes agree: no overlaps, nothing past the stride, 32-byte aligned parts."""
    t = v2.TokenLayout(num_hidden_bytes=hidden_bytes, num_sf_bytes=4 * packs, num_topk=topk,
                       with_metadata=with_metadata, num_rdma_alignment_bytes=rdma)
    assert v2.check_record(t, with_mbarrier) == []
    record = t.record("r", with_mbarrier=with_mbarrier)
    assert record.overlaps() == [] and record.overrun_bytes() == 0
    assert sum(f.num_bytes for f in record.fields) == record.num_bytes


@given(hidden_bytes=st.integers(1, 1 << 12).map(lambda n: n * 32), packs=st.integers(0, 2048),
       topk=st.integers(0, 64), with_metadata=st.booleans())
def test_rdma_rounding_closed_form(hidden_bytes, packs, topk, with_metadata):
    """A: align(h,32) + align(4p,32) + align(8k + (4 + 4k if meta), 32); B = align(A, 64), pad 0 or 32;
    the mbarrier follows the data in both (layout.cuh:246-248 @dd758ca vs token.cuh:79-81)."""
    def a32(x):
        return -(-x // 32) * 32
    meta = 8 * topk + ((4 + 4 * topk) if with_metadata else 0)
    expected_a = a32(hidden_bytes) + a32(4 * packs) + a32(meta)
    kw = dict(num_hidden_bytes=hidden_bytes, num_sf_bytes=4 * packs, num_topk=topk, with_metadata=with_metadata)
    a = v2.TokenLayout(num_rdma_alignment_bytes=1, **kw)
    b = v2.TokenLayout(**kw)
    assert a.num_bytes() == expected_a and a.mbarrier_offset == a.mbarrier_offset_unrounded == expected_a
    assert b.num_bytes() == -(-expected_a // 64) * 64
    assert b.num_rdma_padding_bytes in (0, 32) and b.num_rdma_padding_bytes == b.num_bytes() - expected_a
    assert a.num_bytes(True) == expected_a + 32


def _hint(version, ranks, nvl, tokens, hidden, topk, fp8, hybrid, amr):
    return v2.calculate_buffer_size(ranks, nvl, tokens, hidden, topk, fp8, hybrid, amr, version=version)


@given(version=versions, nodes=st.integers(1, 8), nvl=st.sampled_from([1, 2, 4, 8]), tokens=tokens_st,
       hidden=hidden_fp8, topk=topks, fp8=st.booleans(), hybrid=st.booleans(), amr=st.booleans())
def test_hint_aligned(version, nodes, nvl, tokens, hidden, topk, fp8, hybrid, amr):
    """The hint is a multiple of 2 MiB from 2026-07 on, and 2026-07 = align(2026-04, 2 MiB)."""
    hint = _hint(version, nodes * nvl, nvl, tokens, hidden, topk, fp8, hybrid, amr)
    if version == "2026-04":
        assert -(-hint // TWO_MIB) * TWO_MIB == _hint("2026-07", nodes * nvl, nvl, tokens, hidden, topk, fp8, hybrid, amr)
    else:
        assert hint % TWO_MIB == 0 and hint > 0


@given(version=versions, nodes=st.integers(1, 8), nvl=st.sampled_from([1, 2, 4, 8]), tokens=tokens_st,
       more=st.integers(1, 4096), hidden=hidden_fp8, topk=topks, fp8=st.booleans(), hybrid=st.booleans(),
       amr=st.booleans())
def test_monotone_in_tokens(version, nodes, nvl, tokens, more, hidden, topk, fp8, hybrid, amr):
    args = (hidden, topk, fp8, hybrid, amr)
    assert _hint(version, nodes * nvl, nvl, tokens, *args) <= _hint(version, nodes * nvl, nvl, tokens + more, *args)


@given(version=versions, nodes=st.integers(1, 16), extra=st.integers(1, 16), nvl=st.sampled_from([1, 2, 4, 8]),
       tokens=tokens_st, hidden=hidden_fp8, topk=topks, fp8=st.booleans(), hybrid=st.booleans(), amr=st.booleans())
def test_monotone_in_ranks(version, nodes, extra, nvl, tokens, hidden, topk, fp8, hybrid, amr):
    """More NVLink domains of the same size never shrink the hint (direct -> hybrid included)."""
    args = (tokens, hidden, topk, fp8, hybrid, amr)
    assert _hint(version, nodes * nvl, nvl, *args) <= _hint(version, (nodes + extra) * nvl, nvl, *args)


@given(version=versions, ranks=st.integers(1, 64), tokens=tokens_st, hidden=hidden_fp8, topk=topks,
       fp8=st.booleans(), amr=st.booleans())
def test_single_domain_hybrid_flag_is_irrelevant(version, ranks, tokens, hidden, topk, fp8, amr):
    """Upstream's boundary: one NVLink domain gives num_scaleout_ranks == 1 either way, so the
    direct formulas apply whether or not hybrid mode is allowed (nccl.cu:56-60)."""
    args = (tokens, hidden, topk, fp8)
    assert _hint(version, ranks, ranks, *args, True, amr) == _hint(version, ranks, ranks, *args, False, amr)


@given(ranks=st.integers(1, 64), tokens=tokens_st, hidden=hidden_fp8, topk=st.integers(1, 32), fp8=st.booleans(),
       nvlink=st.booleans(), amr=st.booleans())
def test_direct_closed_form(ranks, tokens, hidden, topk, fp8, nvlink, amr):
    """get_*_buffer_size with one scale-out rank is the direct formula of buffer.hpp:594-600, 623-633."""
    d = v2.get_dispatch_token_layout(hidden, 1 if fp8 else 2, 7, topk).num_bytes()
    c = v2.get_combine_token_layout(hidden, 2, topk).num_bytes()
    assert v2.get_dispatch_buffer_size(tokens, hidden, 7, topk, 1 if fp8 else 2, 1, ranks, nvlink) == \
        ((0 if nvlink else 1) + ranks) * tokens * d
    slots = min(ranks, topk) if amr else topk
    send = 0 if nvlink else ranks * tokens * (1 if amr else topk)
    assert v2.get_combine_buffer_size(tokens, hidden, topk, 1, ranks, nvlink, amr) == (send + slots * tokens) * c


@settings(max_examples=40)
@given(version=versions, nodes=st.integers(1, 4), nvl=st.sampled_from([1, 2, 4, 8]), tokens=tokens_st,
       hidden=st.integers(1, 64).map(lambda n: n * 256), topk=topks, fp8=st.booleans(), hybrid=st.booleans(),
       amr=st.booleans(), nvlink=st.booleans())
def test_report_invariants(version, nodes, nvl, tokens, hidden, topk, fp8, hybrid, amr, nvlink):
    """Regions >= 0, hint >= real need, records without overlap or overrun, JSON round trip."""
    ranks = nodes * nvl
    r = v2.report(Plan(hidden=hidden, num_topk=topk, num_experts=ranks * 4, num_ranks=ranks,
                       num_max_tokens_per_rank=tokens, use_fp8_dispatch=fp8, num_ranks_per_node=nvl,
                       scaleup_is_nvlink=nvlink, allow_hybrid_mode=hybrid, allow_multiple_reduction=amr,
                       version=version))
    for b in r.buffers:
        assert b.num_bytes >= b.num_bytes_needed >= 0
        assert all(region.num_bytes >= region.num_bytes_used >= 0 for region in b.regions)
    for record in r.records:
        assert record.overlaps() == [] and record.overrun_bytes() == 0
    assert not [f for f in r.findings if f.severity == "error"]
    data = json.loads(json.dumps(report_to_dict(r)))
    assert report_from_dict(data) == r


# --- summaries (the sweep's fast path) ------------------------------------------------------
def summary_or_error(fn, p):
    """``fn(p)``, or the exception's type, text and problem arguments."""
    try:
        return fn(p)
    except InvalidArgumentError as error:
        return type(error), str(error), [problem.argument for problem in error.problems]


def test_summarize_is_the_sweep_path():
    assert summarizer("deepep-v2") is v2.summarize


def test_summary_examples():
    """docs/derivations/deepep_v2.md §C.1 (a): combine binds, device = hint + align(sizeof(EPSignals), 2 MiB); one token:
    the 2 MiB hint is smaller than the workspace, so the workspace's largest region binds."""
    assert v2.summarize(plan()) == Summary(num_bytes=488_636_416, num_bytes_needed=488_636_416, binding="combine",
                                           broken=())
    # docs/derivations/deepep_v2.md §C.1 (b): 473,956,352 > 471,859,200
    assert v2.summarize(plan(fp8=False)).binding == "dispatch"
    tiny = plan(tokens=1)
    assert v2.summarize(tiny) == Summary(num_bytes=TWO_MIB + WS_REFACTOR, num_bytes_needed=TWO_MIB + WS_REFACTOR,
                                         binding="scaleout_channel_signaled_tail", broken=())
    assert v2.summarize(plan(tokens=1, version="2026-07")).binding == "scale-out channel signaled tails"
    for p in (plan(), plan(fp8=False), tiny, plan(ranks=32), plan(ranks=32, allow_multiple_reduction=False)):
        assert v2.summarize(p) == summary_of(v2.report(p))


@pytest.mark.parametrize(("kwargs", "limits"), [
    (dict(topk=40), ["num_topk"]),
    (dict(hidden=2880), ["hidden % 256 (combine kernels)"]),
    (dict(ranks=512, experts=512), ["num_scaleout_ranks (hybrid kernels)"]),
    (dict(ranks=256, num_ranks_per_node=128), ["num_scaleup_ranks (hybrid kernels)", NOTIFY]),
    (dict(ranks=16, experts=2048), [NOTIFY]),
    (dict(ranks=1024, experts=1024, tokens=2**21, allow_hybrid_mode=False),
     ["ranks x tokens (int source global index)"]),
    # WorkspaceLayout's host assertions (errors before the one rule, now limits like the kernels').
    (dict(ranks=2048, experts=2048), ["num_ranks", "num_scaleout_ranks (hybrid kernels)"]),
    (dict(experts=4096), ["num_experts"]),
    (dict(experts=100), ["num_experts % num_ranks"]),
    (dict(ranks=4, experts=2048, version="2026-07"), ["num_experts_per_rank"]),
    # Several at once, in report order: top-k and hidden before ranks x tokens, the hybrid ones after.
    (dict(ranks=1024, experts=1024, tokens=2**21, topk=40, hidden=2880, num_ranks_per_node=8),
     ["num_topk", "hidden % 256 (combine kernels)", "ranks x tokens (int source global index)",
      "num_scaleout_ranks (hybrid kernels)"]),
])
def test_summary_broken_limits(kwargs, limits):
    p = plan(**kwargs)
    assert list(v2.summarize(p).broken) == limits
    assert v2.summarize(p) == summary_of(v2.report(p))


@pytest.mark.parametrize("kwargs", [
    dict(hidden=7000), dict(hidden=2064), dict(ranks=32, tokens=2**31 - 1000),
    dict(tokens=2**27, topk=32, allow_multiple_reduction=False), dict(hidden=2**30, fp8=False),
    dict(experts=100, hidden=7000, version="v9"), dict(ranks=12, experts=384), dict(version=7),
    dict(ranks=32, tokens=2**31 - 1000, experts=100, version="v9"),
])
def test_summary_errors_are_the_report_errors(kwargs):
    p = plan(**kwargs)
    for _ in range(2):  # the second time through the cached shape
        expected = summary_or_error(v2.report, p)
        assert isinstance(expected, tuple)
        assert summary_or_error(v2.summarize, p) == expected


def test_summary_cached_shape_then_overflowing_tokens():
    """The token checks run on every call: a shape cached by a valid plan still rejects a token
    count whose scale-out buffer overflows int, with report()'s message."""
    ok = plan(ranks=32)
    assert v2.summarize(ok) == summary_of(v2.report(ok))
    bad = ok.replace(num_max_tokens_per_rank=2**31 - 1000)
    assert summary_or_error(v2.summarize, bad) == summary_or_error(v2.report, bad)
    assert "must fit int32" in summary_or_error(v2.summarize, bad)[1]


def test_sweep_rows_are_report_summaries():
    base = plan(tokens=1, experts=384, num_ranks_per_node=None)
    result = sweep(base, {"num_ranks": [1, 8, 12, 16, 32, 64], "num_max_tokens_per_rank": [1, 100, 4096, 2**25]},
                   ["deepep-v2"])
    assert len(result.rows) == 24
    col = result.columns.index
    for row in result.rows:
        p = base.replace(num_ranks=row[col("num_ranks")], num_max_tokens_per_rank=row[col("num_max_tokens_per_rank")])
        expected = summary_or_error(lambda q: summary_of(v2.report(q)), p)
        if isinstance(expected, Summary):
            got = Summary(num_bytes=row[col("num_bytes")], num_bytes_needed=row[col("num_bytes_needed")],
                          binding=row[col("binding")], broken=tuple(filter(None, row[col("broken_limits")].split(";"))))
            assert got == expected and row[col("error")] == ""
        else:
            assert row[col("error")] == expected[1]
    assert any(row[col("error")] for row in result.rows)  # 12 ranks: 8 per node does not divide them


@st.composite
def any_plan(draw):
    """Plans valid and not: every version (and an unknown one), direct and hybrid domains, NVLink
    or not, single or multiple reduction, FP8 or BF16, top-k 0..32 (and beyond), token counts from
    one to int32 overflow, ranks and experts that fit the limits or break them. One plan in three
    draws each value from the wide range, the others mostly from values upstream accepts."""
    wide = draw(st.integers(0, 2)) == 0

    def pick(usual, unusual):
        return draw(st.one_of(usual, unusual) if wide else usual)

    version = pick(st.sampled_from([None, "2026-04", "2026-07", "refactor", "b306af0", "dd758ca", "latest",
                                    "5616959", "4f77720db4a4", "855fa9d"]),
                   st.sampled_from(["v9", "6757592", "0000000"]))
    nvl = draw(st.sampled_from([None, 1, 2, 4, 8, 16]))
    if nvl is None:
        ranks = pick(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128]), st.integers(1, 2048))
    else:
        ranks = nvl * pick(st.sampled_from([1, 2, 4, 8]), st.integers(1, 128))
    return Plan(
        hidden=pick(st.integers(1, 64).map(lambda n: n * 256),
                    st.one_of(st.integers(1, 300).map(lambda n: n * 32),
                              st.sampled_from([2880, 7000, 2064, 3, 2**30]))),
        num_topk=pick(st.integers(0, 32), st.integers(33, 64)),
        num_experts=pick(st.integers(1, 4).map(lambda k: k * ranks),
                         st.one_of(st.sampled_from([256, 384, 512, 2048, 4096]), st.integers(1, 3000))),
        num_redundant_experts=pick(st.just(0), st.sampled_from([32, 4])),
        num_ranks=ranks,
        num_ranks_per_node=nvl,
        num_max_tokens_per_rank=pick(st.integers(1, 1 << 14),
                                     st.one_of(st.integers(1, 2**31 - 1),
                                               st.sampled_from([2**21, 2**27, 2**31 - 1000, 2**31 - 1]))),
        use_fp8_dispatch=draw(st.booleans()),
        scaleup_is_nvlink=draw(st.booleans()),
        allow_hybrid_mode=draw(st.booleans()),
        allow_multiple_reduction=draw(st.booleans()),
        version=version,
    )


@settings(max_examples=300, deadline=None)
@given(p=any_plan())
def test_summarize_equals_summary_of_report(p):
    """The fast path gives exactly the full report's summary, or raises exactly its error."""
    assert summary_or_error(v2.summarize, p) == summary_or_error(lambda q: summary_of(v2.report(q)), p)
    assert summary_or_error(v2.summarize, p) == summary_or_error(v2.summarize, p)  # again, from the cache



# --- commit ids -------------------------------------------------------------------------------
@pytest.mark.parametrize(("commit", "generation"), [
    ("b306af06afd412c88e51e71802951606e40b7358", "2026-04"),  # first release, full id
    ("4f77720", "2026-04"),  # pull-request branch off b306af0 (RDMA-only topology), same size arithmetic
    ("a422b5a3693f", "2026-07"),  # #637: both 2 MiB roundings
    ("5616959", "2026-07"),  # main, 2026-05-21
    ("dd758caf451848bd150e1046af3d0a73e5fff38d", "2026-07"),
    ("DD758CAF4518", "2026-07"),  # hex is case-insensitive
    ("1a1ffbac1f9ba94e1f731f7647b5d6353fb38ade", "refactor"),
    ("def865146e95", "refactor"),
    ("855fa9d", "refactor"),  # known by its short id only
    ("13b3aba", "refactor"),  # a prefix of the short id 13b3abaa
])
def test_commit_ids_map_to_generations(commit, generation):
    assert v2.get_generation(commit).id == generation
    assert v2.report(plan(version=commit)).inputs["version"] == generation


def test_commit_table_is_well_formed():
    """Every commit of the snapshot whose tree holds csrc/elastic/buffer.hpp is in the table, once."""
    from epbuf.backends.deepep_v2.commits import COMMITS, DIFFERENT, SHORT_IDS

    assert all(len(c) == 40 and int(c, 16) >= 0 for c in (*COMMITS, *DIFFERENT))
    assert set(COMMITS.values()) == set(v2.VERSIONS) and set(SHORT_IDS.values()) <= set(v2.VERSIONS)
    assert not set(COMMITS) & set(DIFFERENT)
    assert sum(1 for g in COMMITS.values() if g != "refactor") + len(DIFFERENT) == 121
    assert len({c[:7] for c in (*COMMITS, *DIFFERENT)}) == len(COMMITS) + len(DIFFERENT)  # 7 digits suffice


@pytest.mark.parametrize(("commit", "needle"), [
    ("6757592", "match no generation epbuf follows (unmerged branch: the hint adds an experimental direct recv_x"),
    ("35fd2654daacbf9627ef606cc47dcdf3f075570b", "calculate_buffer_size takes has_nvlink"),
    ("0000000", "commit '0000000' is not among the"),
    ("4623c67", "is not among the"),  # a V1-only commit: V2 did not exist yet
    ("dd758c", "unknown DeepEP V2 version"),  # six digits are not a commit id
])
def test_unknown_or_different_commits(commit, needle):
    with pytest.raises(InvalidArgumentError) as info:
        v2.get_generation(commit)
    text = str(info.value)
    assert needle in text and text.count("\n") == 0
    assert "choose one of 2026-04, 2026-07, refactor" in text and "or a commit id" in text


# --- the logical-topology entry point ------------------------------------------------------------
@given(version=versions, nodes=st.integers(1, 8), nvl=st.sampled_from([1, 2, 4, 8]), tokens=tokens_st,
       hidden=hidden_fp8, topk=topks, fp8=st.booleans(), hybrid=st.booleans(), amr=st.booleans())
def test_logical_entry_point_equals_physical(version, nodes, nvl, tokens, hidden, topk, fp8, hybrid, amr):
    """calculate_buffer_size(N, nvl, ...) == calculate_buffer_size_logical(*logical domain, ...): the
    physical entry point is the topology step (nccl.cu:49-60, buffer.hpp:666-668) and then the logical one."""
    d = v2.logical_domain(nodes * nvl, nvl, hybrid)
    assert v2.calculate_buffer_size(nodes * nvl, nvl, tokens, hidden, topk, fp8, hybrid, amr, version=version) == \
        v2.calculate_buffer_size_logical(d.num_scaleout_ranks, d.num_scaleup_ranks, d.is_scaleup_nvlink, tokens,
                                         hidden, topk, fp8, amr, version=version)


def test_logical_entry_point_examples():
    """docs/derivations/deepep_v2.md §C.1 (c) hybrid and §C.2 (c) with hybrid mode off; the no-NVLink
    domain (8, 1) of test_no_nvlink_domain; errors as calculate_buffer_size's."""
    assert v2.calculate_buffer_size_logical(4, 8, True, 4096, 7168, 8, True, True) == 2_434_793_472
    assert v2.calculate_buffer_size_logical(1, 32, False, 4096, 7168, 8, True, True) == 2_359_296_000
    assert v2.calculate_buffer_size_logical(8, 1, True, 4096, 7168, 8, True, True, version="2026-07") == 1_564_475_392
    with pytest.raises(InvalidArgumentError, match=r"ceil_div\(hidden, 32\)"):
        v2.calculate_buffer_size_logical(1, 8, True, 4096, 3, 8, True, True)
    with pytest.raises(InvalidArgumentError, match="num_ranks = 65536 x 65536 must fit int32"):
        v2.calculate_buffer_size_logical(65536, 65536, True, 4096, 7168, 8, True, True)


def test_ranks_per_node_without_nvlink_is_said_to_be_unused():
    """Upstream reads the LSA team size, never a node size: with scaleup_is_nvlink=False the LSA
    team is one rank, so an explicit num_ranks_per_node changes nothing, and the report says so."""
    r = v2.report(plan(ranks=16, experts=128, num_ranks_per_node=8, scaleup_is_nvlink=False))
    (finding,) = [f for f in r.findings if f.code == "deepep-v2.ranks-per-node-unused"]
    assert finding.severity == "warning" and finding.data == {"num_ranks_per_node": 8, "num_nvl_ranks": 1}
    same = v2.report(plan(ranks=16, experts=128, num_ranks_per_node=4, scaleup_is_nvlink=False))
    assert same.num_bytes == r.num_bytes and (r.inputs["num_rdma_ranks"], r.inputs["num_nvl_ranks"]) == (16, 1)
    for quiet in (plan(ranks=16, experts=128, scaleup_is_nvlink=False),
                  plan(ranks=16, experts=128, num_ranks_per_node=1, scaleup_is_nvlink=False),
                  plan(ranks=16, experts=128, num_ranks_per_node=8)):
        assert "deepep-v2.ranks-per-node-unused" not in {f.code for f in v2.report(quiet).findings}
