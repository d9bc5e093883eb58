"""DeepEP V1 (legacy) backend: normal-mode Config hints, default tables, low-latency layout.

Golden numbers are literals from sources independent of epbuf's code:

* ``docs/derivations/deepep_v1.md`` (§ numbers below): upstream's formulas written out as arithmetic,
  with worked examples computed independently of epbuf's code;
* ``PR434`` — the description of DeepEP PR #434 (its acceptance numbers);
* published ``test_low_latency.py`` log lines ("Allocating buffer size: ... MB");
* vLLM issue #57894 (35.55 / 32.21 / 31.94 / 26.66 GiB).

Upstream citations are ``path:line`` at DeepEP main ``dd758ca`` unless a row says otherwise.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epbuf import InvalidArgumentError, Plan, report
from epbuf.backends import deepep_v1 as v1
from epbuf.backends.deepep_v1 import (
    Config,
    LowLatencyLayout,
    get_combine_config,
    get_dispatch_config,
    get_low_latency_rdma_size_hint,
    max_low_latency_tokens,
)
from epbuf.plan import summarizer
from epbuf.report import Summary, report_from_dict, report_to_dict, summary_of
from epbuf.sweep import COLUMNS, sweep

INT_MAX = 2**31 - 1


def cfg(num_sms, nvl_send, nvl_recv, rdma_send, rdma_recv) -> Config:
    return Config(num_sms=num_sms, num_max_nvl_chunked_send_tokens=nvl_send, num_max_nvl_chunked_recv_tokens=nvl_recv,
                  num_max_rdma_chunked_send_tokens=rdma_send, num_max_rdma_chunked_recv_tokens=rdma_recv)


def plan(hidden=7168, topk=8, experts=256, ranks=16, tokens=128, fp8=True, **kw) -> Plan:
    return Plan(hidden=hidden, num_topk=topk, num_experts=experts, num_ranks=ranks,
                num_max_tokens_per_rank=tokens, use_fp8_dispatch=fp8, **kw)


# ======================================================================================
# Constants
# ======================================================================================
def test_constants():
    """compiled.cuh:5-9 and config.hpp:56-57; 2^35 - 128 is the largest size Buffer accepts
    from 4623c67 on (docs/derivations/deepep_v1.md §6.1)."""
    assert (v1.NUM_MAX_NVL_PEERS, v1.NUM_MAX_RDMA_PEERS, v1.NUM_BUFFER_ALIGNMENT_BYTES) == (8, 20, 128)
    assert (v1.NUM_WORKSPACE_BYTES, v1.NUM_MAX_LOCAL_EXPERTS) == (33_554_432, 1024)
    assert (v1.HINT_NUM_MAX_TOPK, v1.HINT_NUM_MAX_SCALES, v1.SOURCE_META_BYTES) == (128, 128, 8)
    assert v1.MAX_NUM_BYTES_INT4_CHECK == 34_359_738_240 == 2**35 - 128
    assert v1.DEFAULT_NUM_SMS == 20


# ======================================================================================
# Normal mode: the Config hints
# ======================================================================================
PR434_CONFIG = (24, 8, 512, 16, 128)

# (version, buffer) -> bytes. Source: PR434 description; docs/derivations/deepep_v1.md §2 table.
PR434_GOLDEN = [
    (("main", "nvl"), 453_380_736),
    (("pr434", "nvl"), 429_000_960),
    (("main", "rdma"), 56_774_016),
    (("pr434", "rdma"), 53_629_056),
    (("v1.2.1", "nvl"), 453_380_736),  # every released version has the "before" formula
    (("ll0", "rdma"), 56_774_016),
]


@pytest.mark.parametrize(("case", "expected"), PR434_GOLDEN, ids=[f"{v}-{k}" for (v, k), _ in PR434_GOLDEN])
def test_pr434_acceptance(case, expected):
    version, kind = case
    config = cfg(*PR434_CONFIG)
    hint = getattr(config, f"get_{kind}_buffer_size_hint")(7168, 16, version=version)
    assert hint == expected


# (version, buffer) -> region bytes in order. Source: docs/derivations/deepep_v1.md §2 term table.
PR434_TERMS = [
    (("main", "nvl"), {"channel metadata": 2_688, "hidden data": 352_321_536, "source meta": 393_216,
                       "top-k indices": 50_331_648, "top-k weights": 25_165_824, "scales": 25_165_824}),
    (("pr434", "nvl"), {"channel metadata": 2_304, "hidden data": 352_321_536, "source meta": 393_216,
                        "top-k indices": 25_165_824, "top-k weights": 25_165_824, "scales": 25_165_824,
                        "int4 alignment per token": 786_432}),
    (("main", "rdma"), {"channel metadata": 3_456, "hidden data": 44_040_192, "source meta": 49_152,
                        "top-k indices": 6_291_456, "top-k weights": 3_145_728, "scales": 3_145_728,
                        "int4 per token": 98_304}),
    (("pr434", "rdma"), {"channel metadata": 3_456, "hidden data": 44_040_192, "source meta": 49_152,
                         "top-k indices": 3_145_728, "top-k weights": 3_145_728, "scales": 3_145_728,
                         "int4 per token": 98_304, "head/tail counters": 768}),
]


@pytest.mark.parametrize(("case", "expected"), PR434_TERMS, ids=[f"{v}-{k}" for (v, k), _ in PR434_TERMS])
def test_pr434_terms(case, expected):
    version, kind = case
    buffer = getattr(cfg(*PR434_CONFIG), f"{kind}_buffer")(7168, 16, version=version)
    assert {r.name: r.num_bytes for r in buffer.regions} == expected  # all four sums are 128-aligned: no padding


# (config, ranks, hidden_bytes, buffer) -> (region bytes, padding, hint). Source: docs/derivations/deepep_v1.md §8.4.
INTERMEDIATES = [
    (((20, 6, 256, 6, 128), 8, 14336, "nvl"),
     ((1_600, 293_601_280, 163_840, 20_971_520, 10_485_760, 10_485_760), 64, 335_709_824)),
    (((24, 36, 288, 20, 128), 16, 14336, "nvl"),
     ((2_688, 396_361_728, 221_184, 28_311_552, 14_155_776, 14_155_776), 0, 453_208_704)),
    (((24, 36, 288, 20, 128), 16, 14336, "rdma"),
     ((3_456, 96_337_920, 53_760, 6_881_280, 3_440_640, 3_440_640, 107_520), 0, 110_265_216)),
    (((24, 32, 288, 8, 128), 64, 14336, "rdma"),
     ((13_824, 352_321_536, 196_608, 25_165_824, 12_582_912, 12_582_912, 393_216), 0, 403_256_832)),
]


@pytest.mark.parametrize(("case", "expected"), INTERMEDIATES, ids=[str(c) for c, _ in INTERMEDIATES])
def test_hint_terms(case, expected):
    config, ranks, hidden_bytes, kind = case
    terms, padding, hint = expected
    buffer = getattr(cfg(*config), f"{kind}_buffer")(hidden_bytes, ranks)
    data = tuple(r.num_bytes for r in buffer.regions if r.name != "alignment padding")
    pad = sum(r.num_bytes for r in buffer.regions if r.name == "alignment padding")
    assert (data, pad, buffer.num_bytes) == (terms, padding, hint)
    assert sum(r.num_bytes for r in buffer.regions) == hint


def test_nvl_meta_for_64_ranks():
    """docs/derivations/deepep_v1.md §8.4: Config(24,32,288,8,128), 64 ranks: metadata 12*8*19*4 = 7,296, NVL 453,213,312."""
    buffer = cfg(24, 32, 288, 8, 128).nvl_buffer(14336, 64)
    assert buffer.regions[0].num_bytes == 7_296
    assert buffer.num_bytes == 453_213_312


def test_binding_default_config():
    """docs/derivations/deepep_v1.md §1.1, §8.4: Config() = (20, 6, 256, 6, 256 -> 258); 16 ranks, 14336 B."""
    config = Config()
    assert config.as_tuple() == (20, 6, 256, 6, 258)
    assert config.get_nvl_buffer_size_hint(14336, 16) == 335_710_464
    assert config.get_rdma_buffer_size_hint(14336, 16) == 169_333_504


def test_rdma_hint_is_zero_intranode():
    """config.hpp:77-78: "Legacy mode" returns 0 before any assert (odd num_sms is fine)."""
    assert cfg(21, 6, 256, 6, 128).get_rdma_buffer_size_hint(14336, 8) == 0
    assert cfg(20, 6, 256, 6, 128).rdma_buffer(14336, 4).regions == ()


# (version, num_topk_idx_bits, ranks) -> (NVL, RDMA) with current tables, num_sms 24, 14336 B.
# Source: docs/derivations/deepep_v1.md §8.5 (TOPK_IDX_BITS=32 column) and §2 ("NVL 428,214,912 and RDMA 53,628,288").
TOPK32_GOLDEN = [
    ((8, 14336, "recipe"), (390_268_800, 0)),
    ((16, 14336, "recipe"), (439_052_928, 106_824_576)),
    ((32, 14336, "recipe"), (439_054_464, 195_336_960)),
    ((64, 14336, "recipe"), (439_057_536, 390_673_920)),
    ((16, 7168, "pr434-config"), (428_214_912, 53_628_288)),
]


@pytest.mark.parametrize(("case", "expected"), TOPK32_GOLDEN, ids=[str(c) for c, _ in TOPK32_GOLDEN])
def test_topk_idx_32_bit_builds(case, expected):
    ranks, hidden_bytes, which = case
    configs = ([cfg(*PR434_CONFIG)] if which == "pr434-config"
               else [get_dispatch_config(ranks, 24), get_combine_config(ranks, 24)])
    nvl = max(c.get_nvl_buffer_size_hint(hidden_bytes, ranks, num_topk_idx_bits=32) for c in configs)
    rdma = max(c.get_rdma_buffer_size_hint(hidden_bytes, ranks, num_topk_idx_bits=32) for c in configs)
    assert (nvl, rdma) == expected


def test_topk_idx_32_bits_needs_a_configurable_version():
    with pytest.raises(InvalidArgumentError, match=r"num_topk_idx_bits\) = 32: allowed 64 at v1.2.1"):
        Config().get_nvl_buffer_size_hint(14336, 16, num_topk_idx_bits=32, version="v1.2.1")


@pytest.mark.parametrize(("args", "message"), [
    ((14336, 12), r"--ranks \(num_ranks\) = 12: must be below 8 or a multiple of 8"),
    ((14336, 0), r"--ranks \(num_ranks\) = 0: allowed 1\.\."),
    ((0, 16), r"--hidden-bytes \(hidden_bytes\) = 0: allowed >= 1"),
])
def test_hint_argument_errors(args, message):
    with pytest.raises(InvalidArgumentError, match=message):
        Config().get_nvl_buffer_size_hint(*args)


def test_hint_odd_num_sms_above_8_ranks():
    """config.hpp:59, 85: EP_HOST_ASSERT(num_ranks <= 8 or num_sms % 2 == 0)."""
    config = cfg(21, 6, 256, 6, 128)
    assert config.get_nvl_buffer_size_hint(14336, 8) > 0
    for hint in (config.get_nvl_buffer_size_hint, config.get_rdma_buffer_size_hint):
        with pytest.raises(InvalidArgumentError, match=r"--num-sms \(num_sms\) = 21: must be even above 8 ranks"):
            hint(14336, 16)


# ======================================================================================
# Config constructor
# ======================================================================================
@pytest.mark.parametrize(("rdma", "rounded"), [
    ((6, 128), 132), ((8, 128), 128), ((12, 128), 132), ((20, 128), 140), ((6, 256), 258), ((16, 128), 128),
])
def test_config_rounds_rdma_recv(rdma, rounded):
    """config.hpp:46-47; docs/derivations/deepep_v1.md §3.1 ("send 6 -> 132; 8 -> 128; 12 -> 132; 20 -> 140")."""
    assert cfg(20, 6, 256, *rdma).num_max_rdma_chunked_recv_tokens == rounded


CONFIG_ERRORS = [
    ((20, 256, 256, 6, 128),
     r"num_max_nvl_chunked_send_tokens\) = 256: must be < num_max_nvl_chunked_recv_tokens = 256"),
    ((20, 0, 256, 6, 128), r"num_max_nvl_chunked_send_tokens\) = 0: allowed 1\.\."),
    ((20, 6, 0, 6, 128), r"num_max_nvl_chunked_recv_tokens\) = 0: allowed 1\.\."),
    ((20, 6, 256, 0, 128), r"num_max_rdma_chunked_send_tokens\) = 0: allowed 1\.\."),
    ((20, 6, 256, 6, -1), r"num_max_rdma_chunked_recv_tokens\) = -1: allowed 1\.\."),
    ((-2, 6, 256, 6, 128), r"--num-sms \(num_sms\) = -2: allowed 0\.\."),
    # 128 rounds up to 128: send 128 is not < 128 (config.hpp:48)
    ((20, 6, 256, 128, 100), r"num_max_rdma_chunked_send_tokens\) = 128: must be < num_max_rdma_chunked_recv_tokens "
                             r"rounded up .*align_up\(100, 128\) = 128"),
    ((20, 6.0, 256, 6, 128), r"num_max_nvl_chunked_send_tokens\) = 6\.0: must be an integer"),
    ((20, True, 256, 6, 128), r"num_max_nvl_chunked_send_tokens\) = True: must be an integer"),
]


@pytest.mark.parametrize(("values", "message"), CONFIG_ERRORS, ids=[str(v) for v, _ in CONFIG_ERRORS])
def test_config_errors(values, message):
    with pytest.raises(InvalidArgumentError, match=message):
        cfg(*values)


def test_config_collects_every_problem():
    with pytest.raises(InvalidArgumentError) as info:
        cfg(-1, 10, 5, 0, 128)
    assert [p.argument for p in info.value.problems] == [
        "num_sms", "num_max_nvl_chunked_send_tokens", "num_max_rdma_chunked_send_tokens"]


@given(send=st.integers(1, 600), recv=st.integers(1, 600))
def test_config_rule_orders_agree(send, recv):
    """Upstream's current rules (round, then send < recv, send <= recv/2; config.hpp:46-50)
    accept exactly the configs ebfe47e's order (send < recv before rounding) accepts."""
    try:
        cfg(20, 6, 256, send, recv)
        accepted = True
    except InvalidArgumentError:
        accepted = False
    assert accepted == (send < recv)


# ======================================================================================
# Default config tables and the recipe
# ======================================================================================
# (num_sms, ranks, hidden_bytes) -> (dispatch cfg, NVL, RDMA, combine cfg, NVL, RDMA); cfg after rounding.
# Source: docs/derivations/deepep_v1.md §8.1 (current tables, main).
RECIPE_MAIN = [
    ((20, 8, 14336), ((20, 6, 256, 6, 132), 335_709_824, 0,
                        (20, 4, 256, 6, 132), 335_709_824, 0)),
    ((20, 8, 7168), ((20, 6, 256, 6, 132), 188_909_184, 0,
                        (20, 4, 256, 6, 132), 188_909_184, 0)),
    ((20, 16, 14336), ((20, 36, 288, 20, 140), 377_673_984, 91_887_744,
                        (20, 4, 288, 12, 132), 377_673_984, 86_637_184)),
    ((20, 16, 7168), ((20, 36, 288, 20, 140), 212_523_264, 51_746_944,
                        (20, 4, 288, 12, 132), 212_523_264, 48_790_144)),
    ((20, 32, 14336), ((20, 32, 288, 8, 128), 377_675_264, 168_023_680,
                        (20, 1, 288, 8, 128), 377_675_264, 168_023_680)),
    ((20, 32, 7168), ((20, 32, 288, 8, 128), 212_524_544, 94_623_360,
                        (20, 1, 288, 8, 128), 212_524_544, 94_623_360)),
    ((20, 64, 14336), ((20, 32, 288, 8, 128), 377_677_824, 336_047_360,
                        (20, 1, 288, 8, 128), 377_677_824, 336_047_360)),
    ((20, 64, 7168), ((20, 32, 288, 8, 128), 212_527_104, 189_246_720,
                        (20, 1, 288, 8, 128), 212_527_104, 189_246_720)),
    ((24, 8, 14336), ((24, 6, 256, 6, 132), 402_851_712, 0,
                        (24, 4, 256, 6, 132), 402_851_712, 0)),
    ((24, 8, 7168), ((24, 6, 256, 6, 132), 226_690_944, 0,
                        (24, 4, 256, 6, 132), 226_690_944, 0)),
    ((24, 16, 14336), ((24, 36, 288, 20, 140), 453_208_704, 110_265_216,
                        (24, 4, 288, 12, 132), 453_208_704, 103_964_544)),
    ((24, 16, 7168), ((24, 36, 288, 20, 140), 255_027_840, 62_096_256,
                        (24, 4, 288, 12, 132), 255_027_840, 58_548_096)),
    ((24, 32, 14336), ((24, 32, 288, 8, 128), 453_210_240, 201_628_416,
                        (24, 1, 288, 8, 128), 453_210_240, 201_628_416)),
    ((24, 32, 7168), ((24, 32, 288, 8, 128), 255_029_376, 113_548_032,
                        (24, 1, 288, 8, 128), 255_029_376, 113_548_032)),
    ((24, 64, 14336), ((24, 32, 288, 8, 128), 453_213_312, 403_256_832,
                        (24, 1, 288, 8, 128), 453_213_312, 403_256_832)),
    ((24, 64, 7168), ((24, 32, 288, 8, 128), 255_032_448, 227_096_064,
                        (24, 1, 288, 8, 128), 255_032_448, 227_096_064)),
]


@pytest.mark.parametrize(("case", "expected"), RECIPE_MAIN, ids=[str(c) for c, _ in RECIPE_MAIN])
def test_recipe_main_configs(case, expected):
    num_sms, ranks, hidden_bytes = case
    d, c = get_dispatch_config(ranks, num_sms), get_combine_config(ranks, num_sms)
    got = tuple(x for config in (d, c) for x in (config.as_tuple(),
                                                 config.get_nvl_buffer_size_hint(hidden_bytes, ranks),
                                                 config.get_rdma_buffer_size_hint(hidden_bytes, ranks)))
    assert got == expected


# (version, num_sms, ranks, hidden_bytes) -> (recipe NVL, recipe RDMA).
# Sources: docs/derivations/deepep_v1.md §8.1 (main), §8.2 (v1.2.1 tag tables),
# §8.3 (1.0.0 after 1553fc4 = ll2, 1.1.0), §8.5 (pr434).
RECIPE = [
    (("main", 24, 16, 14336), (453_208_704, 110_265_216)),
    (("v1.2.1", 20, 32, 14336), (377_675_264, 168_023_680)),
    (("v1.2.1", 20, 64, 14336), (377_677_824, 367_550_720)),
    (("v1.2.1", 20, 64, 7168), (212_527_104, 206_987_520)),
    (("v1.2.1", 24, 64, 14336), (453_213_312, 441_060_864)),
    (("v1.2.1", 24, 64, 7168), (255_032_448, 248_385_024)),
    (("v1.2.1", 24, 16, 14336), (453_208_704, 110_265_216)),
    (("ll2", 20, 8, 14336), (335_709_824, 0)),
    (("ll2", 20, 16, 7168), (212_523_264, 51_746_944)),
    (("ll2", 20, 32, 14336), (377_675_264, 183_775_360)),
    (("ll2", 20, 32, 7168), (212_524_544, 103_493_760)),
    (("v1.1.0", 20, 64, 14336), (377_677_824, 367_550_720)),
    (("v1.1.0", 24, 16, 7168), (255_027_840, 62_096_256)),
    (("v1.1.0", 24, 32, 14336), (453_210_240, 220_530_432)),
    (("v1.1.0", 24, 32, 7168), (255_029_376, 124_192_512)),
    (("ll0", 24, 64, 7168), (255_032_448, 248_385_024)),
    (("ll0", 24, 8, 14336), (402_851_712, 0)),
    (("pr434", 24, 8, 14336), (390_661_632, 0)),
    (("pr434", 24, 16, 14336), (439_494_912, 106_825_344)),
    (("pr434", 24, 32, 14336), (439_496_448, 195_338_496)),
    (("pr434", 24, 64, 14336), (439_499_520, 390_676_992)),
]


@pytest.mark.parametrize(("case", "expected"), RECIPE, ids=[str(c) for c, _ in RECIPE])
def test_recipe(case, expected):
    """docs/legacy.md:132-148: max of each hint over the dispatch and combine configs."""
    version, num_sms, ranks, hidden_bytes = case
    configs = [get_dispatch_config(ranks, num_sms, version=version),
               get_combine_config(ranks, num_sms, version=version)]
    got = (max(c.get_nvl_buffer_size_hint(hidden_bytes, ranks, version=version) for c in configs),
           max(c.get_rdma_buffer_size_hint(hidden_bytes, ranks, version=version) for c in configs))
    assert got == expected
    if hidden_bytes == 14336:  # the report follows the recipe with hidden 7168 (FP8 counts as 2 B)
        r = report(plan(ranks=ranks, num_sms=num_sms, version=version), "deepep-v1")
        assert (r.quantity("num_nvl_bytes"), r.quantity("num_rdma_bytes")) == expected


@pytest.mark.parametrize(("version", "ranks", "row"), [
    ("main", 24, (20, 32, 288, 8, 128)),  # e02e4d2 "Support EP24"
    ("v1.2.1", 24, (20, 8, 288, 32, 128)),
    ("v1.2.1", 128, (20, 20, 560, 32, 128)),
    ("main", 128, (20, 20, 560, 12, 132)),  # c939644
    ("ll2", 2, (20, 16, 256, 6, 132)),  # 1553fc4 "Improve EP2/4 performance"
    ("v1.1.0", 2, (20, 24, 256, 6, 132)),  # c8dceba
    ("ll0", 3, (20, 6, 256, 6, 132)),  # ebfe47e: one config for every rank count <= 8
    ("ll0", 160, (20, 28, 720, 12, 132)),
])
def test_dispatch_tables(version, ranks, row):
    """Rows read from deep_ep/buffer.py at each version's commit (docs/derivations/deepep_v1.md §3)."""
    assert get_dispatch_config(ranks, version=version).as_tuple() == row


def test_combine_table_history():
    """docs/derivations/deepep_v1.md §3.2: comb 64 was (1,288,20,128) until c939644, then (1,288,8,128)."""
    assert get_combine_config(64, version="v1.2.1").as_tuple() == (20, 1, 288, 20, 140)
    assert get_combine_config(64).as_tuple() == (20, 1, 288, 8, 128)


@pytest.mark.parametrize(("version", "ranks"), [("main", 12), ("main", 1), ("v1.2.1", 48), ("ll2", 3), ("main", 256)])
def test_unsupported_rank_count(version, ranks):
    with pytest.raises(InvalidArgumentError, match=rf"--ranks \(num_ranks\) = {ranks}: Buffer.get_dispatch_config "
                                                   rf"at {version} knows 2, 4, 8, 16, 24, 32"):
        get_dispatch_config(ranks, version=version)


def test_supported_num_ranks():
    assert v1.supported_num_ranks("v1.2.1") == (2, 4, 8, 16, 24, 32, 64, 128, 144, 160)
    assert v1.supported_num_ranks("ll0") == (1, 2, 3, 4, 5, 6, 7, 8, 16, 24, 32, 64, 128, 144, 160)


def test_hidden_bytes_recipe():
    """docs/legacy.md:151-153: hidden * max(element_size, 2)."""
    assert (v1.get_hidden_bytes(7168, True), v1.get_hidden_bytes(7168, False)) == (14336, 14336)


# ======================================================================================
# Versions
# ======================================================================================
def test_versions_table():
    assert list(v1.VERSIONS) == ["ll0", "ll1", "ll2", "ll3", "v1.1.0", "ll4", "ll5", "v1.2.1", "pr434", "main"]
    assert v1.get_version(None).id == "main"
    assert v1.get_version("v1.2.1").commit == "9af0e0d0e74f3577af1979c9b9e1ac2cad0104ee"  # the only git tag
    assert v1.get_version("main").commit.startswith("dd758ca")
    pr = v1.get_version("pr434")
    assert pr.commit.startswith("74cfcc2") and not pr.merged
    assert "UNMERGED" in v1.VERSIONS["pr434"] and "74cfcc2" in v1.VERSIONS["pr434"]
    assert [v.low_latency for v in v1.list_versions()] == [0, 1, 2, 3, 3, 4, 5, 5, 5, 5]


@pytest.mark.parametrize("bad", ["v9", "LL5", "", 5])
def test_unknown_version(bad):
    with pytest.raises(InvalidArgumentError,
                       match=r"--backend-version \(version\) = .*: unknown DeepEP V1 version; choose one of "
                             r"ll0, ll1, ll2, ll3, v1.1.0, ll4, ll5, v1.2.1, pr434, main"):
        v1.get_version(bad)


def test_unknown_version_through_the_plan():
    with pytest.raises(InvalidArgumentError, match="--backend-version"):
        report(plan(version="nope"), "deepep-ll")


# ======================================================================================
# Low-latency layout and hint
# ======================================================================================
# (T, H, E) -> (num_scales, dispatch msg, combine msg, send = recv, signaling aligned, total, hint).
# Source: docs/derivations/deepep_v1.md §5.5 (LL5).
LL5_GOLDEN = [
    ((128, 7168, 256), (56, 14_352, 14_560, 477_102_080, 1_024, 1_908_410_368, 1_908_410_496)),
    ((256, 7168, 288), (56, 14_352, 14_560, 1_073_479_680, 1_152, 4_293_921_024, 4_293_921_152)),
    ((512, 4096, 128), (32, 8_208, 8_320, 545_259_520, 512, 2_181_039_104, 2_181_039_232)),
    ((128, 7168, 288), (56, 14_352, 14_560, 536_739_840, 1_152, 2_146_961_664, 2_146_961_792)),
    ((128, 3072, 288), (24, 6_160, 6_240, 230_031_360, 1_152, 920_127_744, 920_127_872)),
]


@pytest.mark.parametrize(("shape", "expected"), LL5_GOLDEN, ids=[str(s) for s, _ in LL5_GOLDEN])
def test_ll5_layout(shape, expected):
    tokens, hidden, experts = shape
    layout = LowLatencyLayout(num_max_dispatch_tokens_per_rank=tokens, hidden=hidden, num_ranks=16,
                              num_experts=experts)
    assert layout.send_buffer_bytes == layout.recv_buffer_bytes
    got = (layout.num_scales, layout.num_bytes_per_dispatch_msg, layout.num_bytes_per_combine_msg,
           layout.send_buffer_bytes, layout.signaling_buffer_bytes_aligned, layout.total_bytes,
           get_low_latency_rdma_size_hint(tokens, hidden, 16, experts))
    assert got == expected


# (version, T, H, ranks, E) -> hint. Source: docs/derivations/deepep_v1.md §5.5 "older variants" table.
LL_VARIANTS = [
    (("ll0", 128, 7168, 16, 256), 1_881_147_648),
    (("ll0", 128, 7168, 64, 256), 1_881_147_520),  # LL0 reads num_ranks (E / num_ranks counters)
    (("ll0", 256, 7168, 16, 288), 4_232_579_584),
    (("ll0", 256, 7168, 32, 288), 4_232_579_456),
    (("ll0", 512, 4096, 16, 128), 2_151_679_104),
    (("ll0", 512, 4096, 8, 128), 2_151_679_232),
    (("ll1", 128, 7168, 16, 256), 1_881_147_520),  # LL1 = LL2 numerically
    (("ll2", 128, 7168, 16, 256), 1_881_147_520),
    (("ll2", 256, 7168, 16, 288), 4_232_579_456),
    (("ll2", 512, 4096, 16, 128), 2_151_679_104),
    (("ll3", 128, 7168, 16, 256), 1_880_098_944),
    (("ll4", 128, 7168, 16, 256), 1_880_098_944),
    (("ll3", 256, 7168, 16, 288), 4_230_220_160),
    (("ll4", 512, 4096, 16, 128), 2_149_581_952),
    (("ll3", 128, 7168, 16, 8), 58_753_152),  # LL3 != LL4 when 4E is not a multiple of 128
    (("ll4", 128, 7168, 16, 8), 58_753_408),
    (("v1.1.0", 128, 7168, 16, 256), 1_880_098_944),  # 1.1.0's first commit still has LL3
]


@pytest.mark.parametrize(("case", "expected"), LL_VARIANTS, ids=[str(c) for c, _ in LL_VARIANTS])
def test_ll_variants(case, expected):
    version, tokens, hidden, ranks, experts = case
    assert get_low_latency_rdma_size_hint(tokens, hidden, ranks, experts, version=version) == expected


def test_ll3_intermediates():
    """docs/derivations/deepep_v1.md §5.5: LL3/LL4 at 128/7168/256: disp 14,352 > comb 14,336, so recv != send."""
    layout = LowLatencyLayout(num_max_dispatch_tokens_per_rank=128, hidden=7168, num_ranks=16, num_experts=256,
                              version="ll3")
    assert (layout.num_bytes_per_dispatch_msg, layout.num_bytes_per_combine_msg) == (14_352, 14_336)
    assert (layout.send_buffer_bytes, layout.recv_buffer_bytes) == (469_762_048, 470_286_336)
    assert (layout.signaling_buffer_bytes, layout.total_bytes) == (1_024, 1_880_098_816)


# Published "Allocating buffer size: X MB" lines of test_low_latency.py (MB = 1e6 B).
PUBLISHED = [
    (("ll0", 128, 7168, 8, 288), 2_116_291_200),  # DeepEP issue #38 (2025-03-06): 2116.2912 MB
    (("ll3", 128, 7168, 8, 288), 2_115_111_296),  # third-party log: 2115.111296 MB
    (("main", 128, 3072, 2, 288), 920_127_872),  # DeepEP PR #458 (2025-10-16): 920.127872 MB
    (("v1.2.1", 128, 7168, 8, 288), 2_146_961_792),  # third-party README: 2146.961792 MB
]


@pytest.mark.parametrize(("case", "expected"), PUBLISHED, ids=[str(c) for c, _ in PUBLISHED])
def test_published_log_lines(case, expected):
    version, tokens, hidden, ranks, experts = case
    assert get_low_latency_rdma_size_hint(tokens, hidden, ranks, experts, version=version) == expected


# vLLM issue #57894: hidden 5120, 16 ranks, 384 + 64 redundant experts.
# T -> (send = recv, total_bytes, hint, passes num_rdma_bytes / 16 < INT_MAX). Source: docs/derivations/deepep_v1.md §7.
VLLM_57894 = [
    (2048, (9_542_041_600, 38_168_169_984, 38_168_170_112, False)),  # 35.55 GiB
    (1856, (8_647_475_200, 34_589_904_384, 34_589_904_512, False)),  # 32.21 GiB
    (1840, (8_572_928_000, 34_291_715_584, 34_291_715_712, True)),  # 31.94 GiB
    (1536, (7_156_531_200, 28_626_128_384, 28_626_128_512, True)),  # 26.66 GiB
]


@pytest.mark.parametrize(("tokens", "expected"), VLLM_57894, ids=[str(t) for t, _ in VLLM_57894])
def test_vllm_57894(tokens, expected):
    r = report(plan(hidden=5120, experts=384, num_redundant_experts=64, ranks=16, tokens=tokens), "deepep-ll")
    buffer = r.buffer("RDMA buffer")
    limit = next(lim for lim in r.limits if lim.name.startswith("num_rdma_bytes / sizeof(int4)"))
    got = (r.quantity("send_buffer_bytes"), r.quantity("total_bytes"), buffer.num_bytes, limit.ok)
    assert got == expected
    assert r.quantity("recv_buffer_bytes") == expected[0]
    assert r.inputs["num_experts"] == 448
    assert round(buffer.num_bytes / 2**30, 2) == {2048: 35.55, 1856: 32.21, 1840: 31.94, 1536: 26.66}[tokens]
    assert any(f.code == "deepep-ll.limit" for f in r.findings) is not expected[3]


def test_vllm_57894_ceiling():
    """docs/derivations/deepep_v1.md §7: 1843 is the largest T (hint 34,347,626,112); 1844 gives 34,366,262,912 and fails."""
    assert max_low_latency_tokens(5120, 16, 448) == 1843
    assert get_low_latency_rdma_size_hint(1843, 5120, 16, 448) == 34_347_626_112
    assert get_low_latency_rdma_size_hint(1844, 5120, 16, 448) == 34_366_262_912
    assert 34_347_626_112 // 16 == 2_146_726_632 < INT_MAX < 34_366_262_912 // 16


# (hidden, experts) -> largest T at main (same assertion). Source: docs/derivations/deepep_v1.md §7 "Other ceilings".
CEILINGS = [((5120, 384), 2150), ((5120, 256), 3226), ((5120, 288), 2867), ((7168, 256), 2304), ((7168, 288), 2048)]


@pytest.mark.parametrize(("shape", "expected"), CEILINGS, ids=[str(s) for s, _ in CEILINGS])
def test_token_ceilings(shape, expected):
    assert max_low_latency_tokens(*shape[:1], 16, shape[1]) == expected


def test_ceiling_needs_the_check_or_a_budget():
    """The check exists from 4623c67 (main); v1.2.1 has no bound, so a budget is required."""
    with pytest.raises(InvalidArgumentError, match=r"v1.2.1 has no upper bound on num_rdma_bytes.*pass a budget"):
        max_low_latency_tokens(5120, 16, 448, version="v1.2.1")
    hint_1843 = 34_347_626_112
    assert max_low_latency_tokens(5120, 16, 448, version="v1.2.1", budget=hint_1843) == 1843
    assert max_low_latency_tokens(5120, 16, 448, version="v1.2.1", budget=hint_1843 - 1) == 1842
    assert max_low_latency_tokens(5120, 16, 448, budget=10**15) == 1843  # the check still binds at main
    assert max_low_latency_tokens(5120, 16, 448, budget=1000) == 0
    with pytest.raises(InvalidArgumentError, match=r"--budget \(budget\) = -1"):
        max_low_latency_tokens(5120, 16, 448, budget=-1)


def test_ll_layout_offsets():
    """config.hpp:171-181 (LL4 on: signaling first) vs ebfe47e:csrc/config.hpp:157-167 (last)."""
    new = LowLatencyLayout(num_max_dispatch_tokens_per_rank=128, hidden=7168, num_ranks=16, num_experts=288)
    assert [(s.name, s.offset) for s in new.spans()] == [
        ("signaling buffer 0", 0), ("signaling buffer 1", 1_152), ("send buffer 0", 2_304),
        ("send buffer 1", 536_742_144), ("recv buffer 0", 1_073_481_984), ("recv buffer 1", 1_610_221_824)]
    b0, b1 = new.buffers()
    assert (b1.dispatch_rdma_send_buffer, b1.combine_rdma_recv_data_buffer, b1.combine_rdma_recv_flag_buffer) == (
        536_742_144, 1_610_221_824, 1_152)
    assert b0.num_clean_int == 288 and b0.dispatch_rdma_atomic_token_counter is None

    old = LowLatencyLayout(num_max_dispatch_tokens_per_rank=128, hidden=7168, num_ranks=8, num_experts=288, version="ll0")
    assert [s.name for s in old.spans()][-2:] == ["signaling buffer 0", "signaling buffer 1"]
    b0, b1 = old.buffers()
    # LL0: signaling = 288 + 36 ints; the atomic counters follow the 288 count ints (issue #38: 1296 B)
    assert old.signaling_buffer_bytes == 1_296 and b0.num_clean_int == 324
    assert b1.dispatch_rdma_atomic_token_counter == b1.dispatch_rdma_recv_count_buffer + 1_152


def test_ll_layout_int4_assert():
    """config.hpp:150: send_buffer_bytes % sizeof(int4) == 0 (hidden 100: 216-byte messages)."""
    with pytest.raises(InvalidArgumentError, match=r"--hidden \(hidden\) = 100: the low-latency send buffer"):
        get_low_latency_rdma_size_hint(1, 100, 16, 1)


def test_ll5_logfmt_space_can_break_the_int4_assert():
    """LL5's combine slot 4 x (384/128) + 768 = 780 B: 3 experts x 1 token x 780 = 2,340 B is not
    a multiple of 16, so upstream asserts; LL4's 768-byte slot is fine."""
    # LL4: send max(784, 3 x 768) = 2,304; recv 3 x 784 = 2,352; signaling 128: total 9,568 -> 9,600
    assert get_low_latency_rdma_size_hint(1, 384, 16, 3, version="ll4") == 9_600
    with pytest.raises(InvalidArgumentError, match=r"send buffer \(2,340 B\) must be a multiple of 16 B"):
        get_low_latency_rdma_size_hint(1, 384, 16, 3)


# ======================================================================================
# Reports
# ======================================================================================
def test_report_normal_shape():
    r = report(plan(ranks=16, num_sms=24), "deepep-v1")
    assert [b.name for b in r.buffers] == ["NVL buffer", "RDMA buffer", "workspace"]
    # the hints round to 128 B; the NVL allocation appends the constructor's metadata (memory.py)
    assert all(b.rule == "sum" for b in r.buffers) and r.buffer("RDMA buffer").alignment == 128
    assert "num_max_tokens_per_rank" not in r.inputs
    assert r.inputs["hidden_bytes"] == 14336 and r.inputs["dispatch_config"] == [24, 36, 288, 20, 140]
    assert "dd758caf451848bd150e1046af3d0a73e5fff38d" in r.upstream
    codes = {f.code for f in r.findings}
    assert {"deepep-v1.token-independent", "deepep-v1.hidden-bytes", "deepep-v1.binding-config"} <= codes
    assert not r.failed_limits()
    dispatch = r.record("internode dispatch token")
    # align16(7168 FP8 + 56 scales x 4 + 8 SourceMeta + 8 x 4 idx + 8 x 4 weights) (internode.cu:47-51)
    assert dispatch.num_bytes == 7_472 and dispatch.field("source_meta").offset == 7_392
    assert r.record("internode combine token").num_bytes == 14_384
    assert r.record("NVL hint slot").num_bytes == 14336 + 8 + 1024 + 512 + 512
    assert report_from_dict(json.loads(json.dumps(report_to_dict(r)))) == r


def test_report_normal_intranode():
    r = report(plan(ranks=8), "deepep-v1")
    assert r.buffer("RDMA buffer").num_bytes == 0
    assert r.quantity("num_nvl_bytes") == 335_709_824  # docs/derivations/deepep_v1.md §8.1, num_sms 20
    assert "deepep-v1.intranode" in {f.code for f in r.findings}
    assert [x.name for x in r.records] == ["NVL hint slot"]


def test_report_normal_breaks_limits():
    """v1.2.1 lists EP24 in its table, but SWITCH_RDMA_RANKS (launch.cuh) lacks 3 nodes until
    e02e4d2; 4 GPUs per node break NUM_MAX_NVL_PEERS = 8."""
    r = report(plan(ranks=24, experts=288, version="v1.2.1", num_ranks_per_node=4), "deepep-v1")
    broken = {lim.name.split(" in ")[0] for lim in r.failed_limits()}
    assert broken == {"num_rdma_ranks (SWITCH_RDMA_RANKS)", "num_ranks_per_node (NUM_MAX_NVL_PEERS)"}
    assert sum(f.severity == "error" for f in r.findings) == 2
    assert not report(plan(ranks=24, experts=288), "deepep-v1").failed_limits()


def test_report_normal_with_config_override():
    config = cfg(*PR434_CONFIG)
    r = report(plan(ranks=16, hidden=3584, fp8=False, deepep_config=config), "deepep-v1")  # 3584 x 2 = 7168 B
    assert (r.quantity("num_nvl_bytes"), r.quantity("num_rdma_bytes")) == (453_380_736, 56_774_016)
    assert r.inputs["deepep_config"] == [24, 8, 512, 16, 128]
    r = report(plan(ranks=16, hidden=3584, deepep_config=config, version="pr434"), "deepep-v1")
    assert (r.quantity("num_nvl_bytes"), r.quantity("num_rdma_bytes")) == (429_000_960, 53_629_056)
    assert "deepep-v1.unmerged-version" in {f.code for f in r.findings}
    assert "UNMERGED" in r.upstream


@pytest.mark.parametrize(("changes", "message"), [
    ({"ranks": 12, "experts": 264}, r"--ranks \(num_ranks\) = 12: must be below 8 or a multiple of 8"),
    ({"ranks": 256}, r"--ranks \(num_ranks\) = 256: allowed 1\.\.160"),
    ({"ranks": 48, "experts": 288, "version": "v1.2.1"}, r"= 48: Buffer.get_dispatch_config at v1.2.1 knows"),
    ({"num_sms": 25}, r"--num-sms \(num_sms\) = 25: must be even"),
    ({"deepep_config": (24, 8, 512, 16, 128)}, r"deepep_config\) = .*: must be an epbuf.backends.deepep_v1.Config"),
])
def test_report_normal_rejects(changes, message):
    with pytest.raises(InvalidArgumentError, match=message):
        report(plan(**changes), "deepep-v1")


def test_validation_collects_every_problem():
    """Only what the size functions refuse raises (every such problem at once); top-k and
    experts are limits of a later step (next test)."""
    with pytest.raises(InvalidArgumentError) as info:
        report(plan(ranks=12, topk=40, experts=250, num_topk_idx_bits=32, version="v1.2.1"), "deepep-v1")
    assert [p.argument for p in info.value.problems] == ["num_topk_idx_bits", "num_ranks"]
    with pytest.raises(InvalidArgumentError) as info:  # the table lookup joins the other problems
        report(plan(ranks=48, experts=250, topk=40, version="v1.2.1", num_topk_idx_bits=32), "deepep-v1")
    assert [p.argument for p in info.value.problems] == ["num_topk_idx_bits", "num_ranks"]


@pytest.mark.parametrize(("changes", "broken", "value", "source"), [
    ({"topk": 33}, "num_topk", 33, "csrc/kernels/legacy/internode.cu:519, 1754"),  # EP_DEVICE_ASSERT(num_topk <= 32)
    ({"experts": 250}, "num_experts % num_ranks", 10, "csrc/legacy/buffer.hpp:468, 948"),  # 250 % 16
    ({"ranks": 24}, "num_experts % num_ranks", 16, "csrc/legacy/buffer.hpp:468, 948"),  # 256 % 24
    ({"ranks": 168, "deepep_config": cfg(24, 8, 512, 16, 128), "experts": 168}, "num_ranks", 168,
     "csrc/legacy/buffer.hpp:113"),  # the hints answer 21 nodes; Buffer allows 160 ranks
])
def test_report_normal_limits_upstream_refuses_later(changes, broken, value, source):
    """The hints answer these plans (normal mode reads neither top-k nor experts), a later
    step refuses them: sizes, the broken limit and an error finding with the assertion."""
    r = report(plan(**changes), "deepep-v1")
    lim = next(x for x in r.failed_limits() if x.name.split(" in ")[0] == broken)
    assert (lim.value, lim.ok) == (value, False) and lim.source.startswith(source)
    assert any(f.severity == "error" and f.code == "deepep-v1.limit" and source in f.message for f in r.findings)
    assert summary_of(r) == v1.summarize_normal(plan(**changes))
    if "deepep_config" not in changes:  # the recipe's numbers do not move with top-k or experts
        sizes = {"ranks": 24} if changes.get("ranks") == 24 else {}
        ok = report(plan(**sizes, experts=288 if sizes else 256), "deepep-v1")
        assert r.buffers == ok.buffers and r.num_bytes == ok.num_bytes


def test_issue_8_ranks_24_default_experts():
    """``epbuf hint --backend deepep-v1 --ranks 24`` with 256 experts: the sizes (§8.1 tables at
    main, EP24 row of e02e4d2), and an error finding for the dispatch assert."""
    r = report(plan(ranks=24, topk=8, experts=256), "deepep-v1")
    assert r.inputs["dispatch_config"] == [20, 32, 288, 8, 128]
    assert [lim.name for lim in r.failed_limits()] == ["num_experts % num_ranks"]


def test_odd_num_sms_with_a_config_override():
    """An override brings its own num_sms; odd is fine intranode (config.hpp:59), not above 8 ranks."""
    r = report(plan(ranks=8, num_sms=25, deepep_config=cfg(21, 6, 256, 6, 128)), "deepep-v1")
    assert r.buffer("NVL buffer").num_bytes > 0
    assert "deepep-v1.num-sms-ignored" in {f.code for f in r.findings}
    with pytest.raises(InvalidArgumentError, match=r"--num-sms \(num_sms\) = 21: must be even above 8 ranks"):
        report(plan(ranks=16, deepep_config=cfg(21, 6, 256, 6, 128)), "deepep-v1")


def test_report_low_latency_shape():
    r = report(plan(hidden=7168, experts=288, ranks=8, tokens=128), "deepep-ll")
    assert [b.name for b in r.buffers] == ["RDMA buffer", "workspace"]  # LL: num_nvl_bytes = 0, no NVL buffer
    buffer = r.buffer("RDMA buffer")
    assert [reg.name for reg in buffer.regions] == [
        "signaling buffer 0", "signaling buffer 1", "send buffer 0", "send buffer 1", "recv buffer 0",
        "recv buffer 1", "hint rounding block"]
    assert buffer.num_bytes == 2_146_961_792  # docs/derivations/deepep_v1.md §5.5
    assert buffer.num_bytes_needed == 2_146_961_664  # total_bytes, already 128-aligned
    assert r.inputs["num_max_dispatch_tokens_per_rank"] == 128
    message = r.record("low-latency dispatch message")
    assert message.num_bytes == 16 + 7168 + 56 * 4  # internode_ll.cu:180, FP8
    assert (message.field("src_idx").offset, message.field("hidden").offset, message.field("scales").offset) == (
        0, 16, 7184)
    assert r.record("low-latency combine message").num_bytes == 14_560
    assert r.quantity("max_num_max_dispatch_tokens_per_rank") == 2048  # docs/derivations/deepep_v1.md §7: H7168/E288 -> 2048
    assert not r.failed_limits()
    assert report_from_dict(json.loads(json.dumps(report_to_dict(r)))) == r


def test_report_low_latency_bf16_and_ll0():
    bf16 = report(plan(hidden=7168, experts=288, ranks=8, fp8=False), "deepep-ll")
    assert bf16.record("low-latency dispatch message").num_bytes == 16 + 2 * 7168
    ll0 = report(plan(hidden=7168, experts=288, ranks=8, fp8=False, version="ll0"), "deepep-ll")
    assert ll0.buffer("RDMA buffer").num_bytes == 2_116_291_200
    assert "deepep-ll.bf16-unsupported" in {f.code for f in ll0.findings}
    # LL0's FP8 message: data, scales, then the source index (ebfe47e internode_ll.cu:91-93)
    message = ll0.record("low-latency dispatch message")
    assert (message.num_bytes, message.field("src_idx").offset) == (7_408, 7_392)
    assert ll0.record("low-latency combine message").field("hidden").offset == 16


def test_report_low_latency_older_version_has_no_ceiling():
    r = report(plan(hidden=5120, experts=448, ranks=16, tokens=2048, version="v1.2.1"), "deepep-ll")
    assert not r.failed_limits()
    assert "deepep-ll.newer-ceiling" in {f.code for f in r.findings}
    assert not any(lim.name.startswith("num_rdma_bytes / sizeof(int4)") for lim in r.limits)


@pytest.mark.parametrize(("changes", "broken"), [
    ({"hidden": 3072, "version": "v1.2.1"}, "hidden (SWITCH_HIDDEN)"),  # 3072 arrived with 73b6ea4
    ({"hidden": 1024}, "hidden (SWITCH_HIDDEN)"),
    ({"ranks": 2, "experts": 256, "tokens": 1}, "num_ranks x num_max_dispatch_tokens_per_rank % 4 (TMA)"),
    ({"hidden": 2560 + 128 * 2, "fp8": True}, "hidden % 512 (FP8 dispatch)"),
])
def test_report_low_latency_limits(changes, broken):
    r = report(plan(**changes), "deepep-ll")
    assert broken in {lim.name.split(" in ")[0] for lim in r.failed_limits()}
    assert any(f.severity == "error" and f.code == "deepep-ll.limit" for f in r.findings)


@pytest.mark.parametrize(("changes", "broken", "value", "bound", "source"), [
    ({"topk": 12}, "num_topk", 12, 11, "csrc/kernels/legacy/internode_ll.cu:501, 1179"),
    ({"topk": 10, "version": "ll5"}, "num_topk", 10, 9, "csrc/kernels/internode_ll.cu @ c5facf5"),
    ({"experts": 250}, "num_experts % num_ranks", 10, 0, "csrc/legacy/buffer.hpp:1483"),
    ({"ranks": 20, "experts": 260}, "num_ranks % 8 above 8 ranks (Buffer: below 8 or a multiple of 8)", 4, 0,
     "csrc/legacy/buffer.hpp:114"),
])
def test_report_low_latency_limits_upstream_refuses_later(changes, broken, value, bound, source):
    """get_low_latency_rdma_size_hint answers these (it reads neither top-k nor the rank count
    beyond LL0); Buffer or low_latency_dispatch refuses them: sizes, limit, error finding."""
    r = report(plan(**changes), "deepep-ll")
    lim = next(x for x in r.failed_limits() if x.name == broken)
    assert (lim.value, lim.bound) == (value, bound) and lim.source.startswith(source)
    assert any(f.severity == "error" and f.code == "deepep-ll.limit" for f in r.findings)
    p = plan(**changes)
    assert r.buffer("RDMA buffer").num_bytes == get_low_latency_rdma_size_hint(
        p.num_max_tokens_per_rank, p.hidden, p.num_ranks, p.num_total_experts, version=p.version)
    assert summary_of(r) == v1.summarize_low_latency(p)


def test_report_low_latency_rejects_what_the_layout_cannot_compute():
    """E x T is a C++ int product in LowLatencyLayout: beyond INT_MAX upstream cannot compute."""
    with pytest.raises(InvalidArgumentError, match=r"num_experts x num_max_dispatch_tokens_per_rank = 256 x "
                                                   r"8388608 overflows the C\+\+ int"):
        report(plan(experts=256, tokens=2**23), "deepep-ll")
    assert report(plan(experts=256, tokens=2**23 - 1, version="v1.2.1"), "deepep-ll").num_bytes > 0


def test_eplb_counts_redundant_experts():
    """The library sees routed + redundant experts; the hint is linear in them."""
    with_eplb = report(plan(hidden=5120, experts=384, num_redundant_experts=64, tokens=128), "deepep-ll")
    flat = report(plan(hidden=5120, experts=448, tokens=128), "deepep-ll")
    assert with_eplb.buffer("RDMA buffer") == flat.buffer("RDMA buffer")
    assert "deepep-ll.eplb" in {f.code for f in with_eplb.findings}


# ======================================================================================
# Properties
# ======================================================================================
variants = st.sampled_from([v.id for v in v1.list_versions()])
# Multiples of 512 keep every variant's messages multiples of 16 B (see test_ll_layout_int4_assert).
hiddens = st.sampled_from([2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192]) | st.integers(1, 64).map(lambda n: 512 * n)
tokens_st = st.integers(0, 4096)
ranks_st = st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128])
experts_st = st.integers(1, 1024)


@given(version=variants, hidden=hiddens, ranks=ranks_st, experts=experts_st, t=tokens_st, dt=st.integers(0, 512))
def test_ll_hint_monotone_in_tokens(version, hidden, ranks, experts, t, dt):
    """hint(T) <= hint(T + dT): more tokens never shrink the buffer."""
    assert (get_low_latency_rdma_size_hint(t, hidden, ranks, experts, version=version)
            <= get_low_latency_rdma_size_hint(t + dt, hidden, ranks, experts, version=version))


@given(version=variants, hidden=hiddens, ranks=ranks_st, experts=experts_st, t=tokens_st, de=st.integers(0, 512))
def test_ll_hint_monotone_in_experts(version, hidden, ranks, experts, t, de):
    """hint(E) <= hint(E + dE): more experts never shrink the buffer."""
    assert (get_low_latency_rdma_size_hint(t, hidden, ranks, experts, version=version)
            <= get_low_latency_rdma_size_hint(t, hidden, ranks, experts + de, version=version))


@given(version=variants, hidden=hiddens, ranks=ranks_st, experts=experts_st, t=tokens_st)
def test_ll_hint_rounding(version, hidden, ranks, experts, t):
    """hint % 128 == 0 and total < hint <= total + 128: a full block even when aligned."""
    buffer = v1.low_latency_buffer(t, hidden, ranks, experts, version=version)
    layout = LowLatencyLayout(num_max_dispatch_tokens_per_rank=t, hidden=hidden, num_ranks=ranks,
                              num_experts=experts, version=version)
    assert buffer.num_bytes % 128 == 0
    assert layout.total_bytes < buffer.num_bytes <= layout.total_bytes + 128
    assert buffer.num_bytes_needed == -(-layout.total_bytes // 128) * 128
    assert all(r.num_bytes >= 0 for r in buffer.regions)
    assert sum(r.num_bytes for r in buffer.regions) == buffer.num_bytes
    spans = layout.spans()
    assert all(a.end == b.offset for a, b in zip(spans, spans[1:])) and spans[0].offset == 0


@settings(max_examples=60)
@given(version=variants, hidden=hiddens, experts=st.integers(1, 2048))
def test_max_tokens_is_exact(version, hidden, experts):
    """max_low_latency_tokens(...) = T* with hint(T*) <= 2^35 - 128 < hint(T* + 1) (with a
    budget of 2^35 - 128 for versions without the check)."""
    budget = None if v1.get_version(version).int4_count_check else v1.MAX_NUM_BYTES_INT4_CHECK
    best = max_low_latency_tokens(hidden, 16, experts, version=version, budget=budget)
    assert get_low_latency_rdma_size_hint(best, hidden, 16, experts, version=version) <= 2**35 - 128
    assert get_low_latency_rdma_size_hint(best + 1, hidden, 16, experts, version=version) > 2**35 - 128


normal_ranks = st.sampled_from([2, 4, 8, 16, 32, 64, 128, 144, 160])
normal_versions = st.sampled_from(["ll2", "ll3", "v1.1.0", "ll4", "ll5", "v1.2.1", "pr434", "main"])


@given(version=normal_versions, ranks=normal_ranks, hidden=st.integers(1, 4096).map(lambda n: 8 * n),
       fp8=st.booleans(), num_sms=st.integers(1, 66).map(lambda n: 2 * n), t1=st.integers(1, 1 << 20),
       t2=st.integers(1, 1 << 20))
def test_normal_independent_of_tokens(version, ranks, hidden, fp8, num_sms, t1, t2):
    """Normal-mode buffers are the same for any num_max_tokens_per_rank; every region >= 0
    and the regions sum to their buffer; the hints are multiples of 128 and the NVL allocation
    adds the constructor's metadata to the NVL hint (memory.py)."""
    def run(tokens):
        return report(plan(hidden=hidden, experts=ranks * 4, ranks=ranks, tokens=tokens, fp8=fp8, num_sms=num_sms,
                           version=version), "deepep-v1")
    a, b = run(t1), run(t2)
    assert a.buffers == b.buffers and a.records == b.records and a.inputs == b.inputs
    for buffer in a.buffers:
        assert all(r.num_bytes >= 0 for r in buffer.regions)
        assert sum(r.num_bytes for r in buffer.regions) == buffer.num_bytes
    assert a.quantity("num_nvl_bytes") % 128 == 0 and a.buffer("RDMA buffer").num_bytes % 128 == 0
    metadata = v1.nvl_metadata_num_bytes(v1.get_version(version))
    assert a.buffer("NVL buffer").num_bytes == a.quantity("num_nvl_bytes") + metadata
    assert a.num_bytes == a.quantity("num_nvl_bytes") + a.quantity("num_rdma_bytes") + metadata + v1.NUM_WORKSPACE_BYTES


@given(hidden_bytes=st.integers(1, 1 << 16), ranks=st.sampled_from([1, 2, 3, 4, 5, 6, 7, 8, 16, 24, 64, 160]),
       sms=st.integers(0, 40).map(lambda n: 2 * n), nvl_recv=st.integers(2, 1024), rdma_recv=st.integers(2, 1024))
def test_pr434_differs_by_its_terms(hidden_bytes, ranks, sms, nvl_recv, rdma_recv):
    """PR #434 = released - C*N*4 (one metadata int) - C*N*T*128*4 (idx as int) + C*N*T*16, before rounding."""
    config = cfg(sms, 1, nvl_recv, 1, rdma_recv)
    old = config.nvl_buffer(hidden_bytes, ranks)
    new = config.nvl_buffer(hidden_bytes, ranks, version="pr434")
    raw = [sum(r.num_bytes for r in b.regions if r.name != "alignment padding") for b in (old, new)]
    c, n, t = sms // 2, min(ranks, 8), nvl_recv
    assert raw[1] - raw[0] == -c * n * 4 - c * n * t * 128 * 4 + c * n * t * 16


# ======================================================================================
# Summaries (the sweep's fast paths) equal the summaries of the full reports
# ======================================================================================
def summary_or_error(fn, p):
    """``fn(p)``, or the text of the InvalidArgumentError it raises."""
    try:
        return fn(p)
    except InvalidArgumentError as error:
        return ("InvalidArgumentError", str(error))


def fast_and_full(mode, p):
    summarize, full = {"normal": (v1.summarize_normal, v1.report_normal),
                       "low_latency": (v1.summarize_low_latency, v1.report_low_latency)}[mode]
    return summary_or_error(summarize, p), summary_or_error(lambda q: summary_of(full(q)), p)


def test_sweep_uses_the_fast_paths():
    assert summarizer("deepep-v1") is v1.summarize_normal
    assert summarizer("deepep-ll") is v1.summarize_low_latency


def test_summary_examples():
    """Hand-checked summaries, including the cases where a rare region binds."""
    # docs/derivations/deepep_v1.md §5.5; send = max(T x 14,352, E x T x 14,560) ties recv = E x T x 14,560:
    # the first region wins. Totals: the RDMA buffer + the 32 MiB workspace (33,554,432 B, memory.py).
    p = plan(hidden=7168, experts=288, ranks=8, tokens=128)
    s = v1.summarize_low_latency(p)
    assert s == Summary(num_bytes=2_146_961_792 + 33_554_432, num_bytes_needed=2_146_961_664 + 33_554_432,
                        binding="send buffer 0", broken=())
    assert s == summary_of(report(p, "deepep-ll"))
    # ll3, H 8, E 1, T 1: slots 32 B; spans 32, 32, 32, 32, then signaling 4, 4: total 136 -> hint 256,
    # so the 120-byte rounding block is the largest region of the RDMA buffer; the 32 MiB workspace
    # is the largest buffer, so it binds the summary.
    tiny = plan(hidden=8, topk=1, experts=1, ranks=1, tokens=1, fp8=False, version="ll3")
    assert report(tiny, "deepep-ll").buffer("RDMA buffer").binding_region().name == "hint rounding block"
    assert v1.summarize_low_latency(tiny).binding == "workspace"
    assert fast_and_full("low_latency", tiny)[0] == fast_and_full("low_latency", tiny)[1]
    # main, E 1: the signaling buffer aligned to 128 B ties the 128-byte block and comes first.
    tiny = plan(hidden=8, topk=1, experts=1, ranks=1, tokens=1, fp8=False)
    assert report(tiny, "deepep-ll").buffer("RDMA buffer").binding_region().name == "signaling buffer 0"
    assert v1.summarize_low_latency(tiny).binding == "workspace" == summary_of(report(tiny, "deepep-ll")).binding
    broken = v1.summarize_low_latency(plan(ranks=2, experts=256, tokens=1, hidden=1024)).broken
    assert broken == ("hidden (SWITCH_HIDDEN) in {2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192}",
                      "num_ranks x num_max_dispatch_tokens_per_rank % 4 (TMA)")
    # normal mode: intranode, the RDMA buffer is empty; the NVL hidden-data ring binds
    # (the NVL hint + 160 B of constructor metadata + the 32 MiB workspace)
    total = 335_709_824 + 160 + 33_554_432
    assert v1.summarize_normal(plan(ranks=8)) == Summary(num_bytes=total, num_bytes_needed=total,
                                                          binding="hidden data", broken=())


def test_summary_errors_are_the_report_errors():
    # the token count decides the layout's multiple-of-16 assert: 3 x 780 B is not, 4 x 780 B is
    # (at v1.2.1, whose report has no ceiling search, which checks one token)
    odd, even = (plan(hidden=384, experts=3, ranks=1, tokens=t, version="v1.2.1") for t in (1, 4))
    with pytest.raises(InvalidArgumentError, match=r"send buffer \(2,340 B\) must be a multiple of 16 B"):
        v1.summarize_low_latency(odd)
    # LL5, H 130: send max(276, 2 x 264) = 528 B passes, receive 2 x 276 = 552 B does not
    with pytest.raises(InvalidArgumentError, match=r"= 130: the low-latency receive buffer \(552 B\)"):
        v1.summarize_low_latency(plan(hidden=130, topk=1, experts=2, ranks=2, tokens=1, version="v1.2.1"))
    assert fast_and_full("low_latency", even)[0] == fast_and_full("low_latency", even)[1]
    assert isinstance(fast_and_full("low_latency", even)[0], Summary)
    both = ("normal", "low_latency")
    for modes, p in ((("normal",), plan(ranks=12, topk=40, experts=250)), (both, plan(version="v9")),
                     (both, plan(version=["main"])), (("normal",), plan(ranks=20, experts=260, topk=12, hidden=384)),
                     (("normal",), plan(deepep_config=(24, 8, 512, 16, 128))),
                     (("normal",), plan(deepep_config=[24, 8, 512, 16, 128])), (("normal",), plan(num_sms=25))):
        for mode in modes:
            fast, full = fast_and_full(mode, p)
            assert fast == full and isinstance(fast, tuple), (mode, p)
    # 8 tokens x 18 B pass the layout's multiple-of-16 assert although one token (18 B) does
    # not: the plan is valid (its kernel limits are broken, hidden 1 is unsupported), and the
    # report omits the ceiling, whose search starts from a one-token layout.
    odd_message = plan(hidden=1, topk=0, experts=1, ranks=1, tokens=8)
    fast, full = fast_and_full("low_latency", odd_message)
    assert fast == full and isinstance(fast, Summary) and fast.broken
    assert "deepep-ll.max-tokens" not in {f.code for f in v1.report_low_latency(odd_message).findings}


def test_sweep_rows_equal_full_reports():
    base = plan(tokens=1, experts=384)
    result = sweep(base, {"num_ranks": [4, 8, 12, 16, 48], "num_max_tokens_per_rank": [1, 2, 3, 127, 2048, 4097],
                          "use_fp8_dispatch": [True, False]}, ["deepep-v1", "deepep-ll"])
    for row in result.rows:
        r = dict(zip(COLUMNS, row))
        p = base.replace(num_ranks=r["num_ranks"], num_max_tokens_per_rank=r["num_max_tokens_per_rank"],
                         use_fp8_dispatch=r["use_fp8_dispatch"])
        try:
            full = summary_of(report(p, r["backend"]))
        except InvalidArgumentError as error:
            assert r["error"] == str(error)
            continue
        assert (r["num_bytes"], r["num_bytes_needed"], r["binding"], r["broken_limits"], r["error"]) == (
            full.num_bytes, full.num_bytes_needed, full.binding, ";".join(full.broken), "")


all_versions = st.sampled_from([None] + [v.id for v in v1.list_versions()] + ["v9"])
summary_hiddens = (st.sampled_from([2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192, 384, 1024, 2816])
                   | st.integers(1, 1024).map(lambda n: 8 * n) | st.integers(1, 20_000))
summary_tokens = st.integers(1, 8192) | st.sampled_from([2**31 - 1, 2**20, 262_144]) | st.integers(1, 2**31 - 1)
summary_ranks = st.sampled_from([1, 2, 3, 4, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64, 96, 128, 144, 160, 168, 256])


@st.composite
def summary_plans(draw, configs: bool = False) -> Plan:
    ranks = draw(summary_ranks)
    # mostly experts divisible by the rank count (the interesting, valid plans), sometimes not
    experts = draw(st.integers(1, 64).map(lambda k: k * ranks) | st.integers(1, 4096) | st.just(2**31 - 1))
    kw = dict(hidden=draw(summary_hiddens), num_topk=draw(st.integers(0, 12) | st.sampled_from([32, 33])),
              num_experts=experts, num_ranks=ranks, num_max_tokens_per_rank=draw(summary_tokens),
              use_fp8_dispatch=draw(st.booleans()), version=draw(all_versions),
              num_redundant_experts=draw(st.sampled_from([0, 0, 0, ranks, 2 * ranks, 7, 2**31 - 1])),
              num_sms=draw(st.none() | st.integers(1, 80).map(lambda n: 2 * n) | st.integers(2, 161)),
              num_topk_idx_bits=draw(st.sampled_from([None, None, 64, 32])))
    if configs:
        per_node = draw(st.none() | st.sampled_from([1, 2, 4, 8, 16]))
        if per_node is not None and ranks % per_node == 0:
            kw["num_ranks_per_node"] = per_node
        kind = draw(st.sampled_from(["default", "default", "config", "not a config"]))
        if kind == "config":
            nvl_send, rdma_send = draw(st.integers(1, 32)), draw(st.integers(1, 32))
            kw["deepep_config"] = cfg(draw(st.integers(0, 132)), nvl_send, draw(st.integers(nvl_send + 1, 1024)),
                                      rdma_send, draw(st.integers(2 * rdma_send, 1024)))
        elif kind == "not a config":
            kw["deepep_config"] = (24, 8, 512, 16, 128)
    return Plan(**kw)


@settings(max_examples=400, deadline=None)
@given(p=summary_plans())
def test_summarize_low_latency_equals_the_report(p):
    """summarize_low_latency(plan) == summary_of(report_low_latency(plan)), and a rejected
    plan raises the report's message."""
    fast, full = fast_and_full("low_latency", p)
    assert fast == full


@settings(max_examples=300, deadline=None)
@given(p=summary_plans(configs=True), tokens=summary_tokens)
def test_summarize_normal_equals_the_report(p, tokens):
    """summarize_normal(plan) == summary_of(report_normal(plan)) (rejections: the same message),
    for any token count: the cached summary of one shape answers every token count."""
    fast, full = fast_and_full("normal", p)
    assert fast == full
    other = p.replace(num_max_tokens_per_rank=tokens)
    assert fast_and_full("normal", other) == (fast, full)
    # the same shape but one plan field the cache key must tell apart
    for changes in ({"num_ranks_per_node": None}, {"use_fp8_dispatch": not p.use_fp8_dispatch},
                    {"num_redundant_experts": 0 if p.num_redundant_experts else p.num_ranks}):
        fast, full = fast_and_full("normal", p.replace(**changes))
        assert fast == full


@settings(max_examples=200, deadline=None)
@given(p=summary_plans(), t1=summary_tokens, t2=summary_tokens)
def test_summarize_low_latency_across_token_counts(p, t1, t2):
    """Shapes cached by the fast path answer other token counts exactly (the multiple-of-16
    assert and the TMA / int-product limits depend on the token count)."""
    for tokens in (t1, t2, p.num_max_tokens_per_rank):
        q = p.replace(num_max_tokens_per_rank=tokens)
        fast, full = fast_and_full("low_latency", q)
        assert fast == full



# ======================================================================================
# What Buffer's constructor allocates besides the hints (memory.py)
# ======================================================================================
@pytest.mark.parametrize(("version", "metadata", "names"), [
    # buffer.hpp:101-103 @dd758ca: 8 x sizeof(int) + 8 x sizeof(void*) + 8 x sizeof(int*) = 32 + 64 + 64
    ("main", 160, ["barrier signals", "buffer pointers", "barrier signal pointers"]),
    ("8da2d7b", 160, ["barrier signals", "buffer pointers", "barrier signal pointers"]),  # #200 removes the FIFO
    ("v1.1.0", 160, ["barrier signals", "buffer pointers", "barrier signal pointers"]),
    # deep_ep.cpp:22-24 @ebfe47e: sizeof(int) x NUM_MAX_FIFO_SLOTS 32,768 + 8 x 8 + 8 x 8
    ("ll0", 131_072 + 64 + 64, ["task FIFO", "buffer pointers", "task FIFO pointers"]),
    ("a16af40", 131_072 + 64 + 64, ["task FIFO", "buffer pointers", "task FIFO pointers"]),  # 8da2d7b's parent
])
def test_constructor_allocations_follow_buffer_hpp(version, metadata, names):
    """The NVL allocation is num_nvl_bytes + the metadata tables, only when num_nvl_bytes > 0
    (buffer.hpp:132-135); the workspace is LEGACY_NUM_WORKSPACE_BYTES = 32 MiB (:148-150,
    compiled.cuh:7); the hints do not move."""
    r = report(plan(ranks=16, version=version), "deepep-v1")
    nvl_hint, rdma_hint = r.quantity("num_nvl_bytes"), r.quantity("num_rdma_bytes")
    nvl = r.buffer("NVL buffer")
    assert [x.name for x in nvl.regions[-3:]] == names
    assert nvl.num_bytes == nvl.num_bytes_needed == nvl_hint + metadata == nvl_hint + v1.nvl_metadata_num_bytes(
        v1.get_version(version))
    assert r.buffer("RDMA buffer").num_bytes == rdma_hint
    assert r.buffer("workspace").num_bytes == 32 * 1024 * 1024 == v1.NUM_WORKSPACE_BYTES
    assert r.num_bytes == nvl_hint + rdma_hint + metadata + 33_554_432
    assert summary_of(r) == v1.summarize_normal(plan(ranks=16, version=version))
    # low latency: Buffer(group, 0, num_rdma_bytes, low_latency_mode=True) (docs/legacy.md:256): no NVL allocation
    ll = report(plan(ranks=16, version=version), "deepep-ll")
    assert [b.name for b in ll.buffers] == ["RDMA buffer", "workspace"]
    assert ll.num_bytes == ll.buffer("RDMA buffer").num_bytes + 33_554_432


def test_default_hint_total_is_the_hints_plus_the_constructor():
    """`epbuf hint --backend deepep-v1 --topk 8 --ranks 16`: 469,561,728 B of hints (NVL 377,673,984 +
    RDMA 91,887,744, docs/derivations/deepep_v1.md §8.1) + 160 + 33,554,432."""
    r = report(plan(ranks=16, hidden=7168, tokens=4096), "deepep-v1")
    assert r.quantity("num_nvl_bytes") + r.quantity("num_rdma_bytes") == 469_561_728
    assert r.num_bytes == r.num_bytes_needed == 469_561_728 + 160 + 33_554_432 == 503_116_320


def test_uccl_ep_and_deepep_v1_compare_evenly():
    """The same config through UCCL-EP (DeepEP V1's hints, the same constructor rows with
    max_nvl_peers = 8) and DeepEP V1: the only device difference is UCCL's proxies and runtime."""
    from epbuf import compare
    p = plan(ranks=16, hidden=7168, tokens=4096, version=None)
    reps = compare(p, ["uccl-ep", "deepep-v1"])
    uccl, deepep = reps["uccl-ep"], reps["deepep-v1"]
    for name in ("NVL buffer", "RDMA buffer", "workspace"):
        assert uccl.buffer(name).num_bytes == deepep.buffer(name).num_bytes, name
        assert [x.name for x in uccl.buffer(name).regions] == [x.name for x in deepep.buffer(name).regions], name
    runtime = uccl.buffer("UCCL proxies and runtime").num_bytes
    assert runtime == 84_072  # docs/derivations/uccl_ep.md §4.1
    assert uccl.num_bytes - deepep.num_bytes == runtime  # 503,200,392 - 503,116,320
    assert (uccl.num_bytes, deepep.num_bytes) == (503_200_392, 503_116_320)
