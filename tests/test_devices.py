"""Accelerator presets (``epbuf.devices``) and ``--hbm`` parsing.

Capacities are the driver-reported totals listed with their public sources in
``docs/derivations/models_and_devices.md`` §3.1 (``nvidia-smi`` MiB, ``npu-smi`` MB = MiB, ``rocm-smi``
bytes); the byte column repeats that table's arithmetic so a typo in either place shows up.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epbuf.devices import DEVICES, DeviceSpec, device_names, get_device, parse_capacity
from epbuf.errors import EpbufError, InvalidArgumentError, UnknownNameError
from epbuf.units import GiB, MiB

# name, driver MiB, bytes (§3.1's column), label, ranks per node, scale-up domain
GOLDEN = [
    # nvidia-smi "A100-SXM4-40GB ... / 40960MiB" (A100-PCIE-40GB the same)
    pytest.param("a100-40gb", 40960, 42_949_672_960, "40 GB", 8, 8, id="a100-40gb"),
    # nvidia-smi "A100-SXM4-80GB ... / 81920MiB"
    pytest.param("a100-80gb", 81920, 85_899_345_920, "80 GB", 8, 8, id="a100-80gb"),
    # nvidia-smi "H100 80GB HBM3 ... / 81559MiB" (H100 PCIe the same)
    pytest.param("h100", 81559, 85_520_809_984, "80 GB", 8, 8, id="h100"),
    # nvidia-smi "H100 NVL ... / 95830MiB"; NVLink-bridged pairs
    pytest.param("h100-nvl", 95830, 100_485_038_080, "94 GB", 8, 2, id="h100-nvl"),
    # nvidia-smi "H20 ... / 97871MiB"
    pytest.param("h20", 97871, 102_625_181_696, "96 GB", 8, 8, id="h20"),
    # nvidia-smi "H200 ... / 143771MiB"; MLPerf v4.1 H200-SXM-141GBx8 "141 GB", 8 per node
    pytest.param("h200", 143771, 150_754_820_096, "141 GB", 8, 8, id="h200"),
    # nvidia-smi "B200 ... / 183359MiB"; MLPerf v6.0 Nebius B200-SXM-180GB
    pytest.param("b200", 183359, 192_265_846_784, "180 GB", 8, 8, id="b200"),
    # nvidia-smi "B300 SXM6 AC ... / 275040MiB"; aiconfigurator b300_sxm.yaml mem_capacity 288400343040
    pytest.param("b300", 275040, 288_400_343_040, "288 GB", 8, 8, id="b300"),
    # nvidia-smi "GB200 ... / 189471MiB"; aiconfigurator gb200.yaml 198674743296, 4 per node, 72 per rack
    pytest.param("gb200", 189471, 198_674_743_296, "186 GB", 4, 72, id="gb200"),
    # nvidia-smi "GB300 ... / 284208MiB"; aiconfigurator gb300.yaml 298013687808
    pytest.param("gb300", 284208, 298_013_687_808, "288 GB", 4, 72, id="gb300"),
    # rocm-smi --showmeminfo vram 206158430208 B (= 192 GiB); MLPerf v4.1 AMD 8xMI300X
    pytest.param("mi300x", 196608, 206_158_430_208, "192 GB", 8, 8, id="mi300x"),
    # AMD labels "256 GB" / "288 GB" HBM3E read as GiB (no driver total seen: verified=False)
    pytest.param("mi325x", 262144, 274_877_906_944, "256 GB", 8, 8, id="mi325x"),
    pytest.param("mi355x", 294912, 309_237_645_312, "288 GB", 8, 8, id="mi355x"),
    # npu-smi HBM 65536 MB on 910B2/910B3/910B4-1 (vllm-ascend #975, #1903; lmdeploy #2585; HAMi-WebUI #47)
    pytest.param("ascend-910b", 65536, 68_719_476_736, "64 GB", 8, 8, id="ascend-910b"),
    # npu-smi on A3: each 910C = 2 chips of 65536 MB (vllm-ascend #2534); 16 dies per node (MindCluster docs)
    pytest.param("ascend-a3", 65536, 68_719_476_736, "64 GB per die (128 GB per 910C)", 16, 16, id="ascend-a3"),
]


@pytest.mark.parametrize(("name", "mib", "num_bytes", "label", "per_node", "scaleup"), GOLDEN)
def test_device_capacity(name, mib, num_bytes, label, per_node, scaleup):
    spec = DEVICES[name]
    assert spec.num_bytes == mib * MiB == num_bytes
    assert (spec.label, spec.ranks_per_node, spec.scaleup_ranks) == (label, per_node, scaleup)
    assert get_device(name) is spec


def test_golden_table_covers_every_device():
    assert sorted(p.values[0] for p in GOLDEN) == sorted(DEVICES) == sorted(device_names())


@pytest.mark.parametrize("spec", list(DEVICES.values()), ids=list(DEVICES))
def test_device_is_well_formed(spec: DeviceSpec):
    """Every preset: key = name, dashed lower-case name, a MiB-exact capacity, a label that
    is text, a node that tiles the scale-up domain (or the reverse), a source."""
    assert DEVICES[spec.name] is spec
    assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", spec.name)
    assert isinstance(spec.num_bytes, int) and spec.num_bytes > 0 and spec.num_bytes % MiB == 0
    assert spec.vendor in ("NVIDIA", "AMD", "Huawei")
    assert spec.label and spec.source and spec.title
    big, small = max(spec.ranks_per_node, spec.scaleup_ranks), min(spec.ranks_per_node, spec.scaleup_ranks)
    assert big % small == 0
    # Driver-read capacities are verified; a label-derived one says so in its notes.
    assert spec.verified is True or (spec.verified is False and "unverified" in spec.notes)


def test_labels_are_not_a_unit():
    """The marketing label is neither GiB nor 10^9 B consistently: H200 '141 GB' is less
    than 141 GiB, B300 '288 GB' is more than 288 x 10^9 B... so presets store driver bytes."""
    assert get_device("h200").num_bytes < 141 * GiB
    assert get_device("b300").num_bytes > 288 * 10**9
    assert get_device("mi300x").num_bytes == 192 * GiB


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("H200", "h200"),
        ("h200-141gb", "h200"),
        ("H200_141GB", "h200"),
        ("h200 sxm", "h200"),
        ("H100-SXM5-80GB", "h100"),
        ("h100-pcie", "h100"),
        ("H100 NVL", "h100-nvl"),
        ("A100-SXM4-40GB", "a100-40gb"),
        ("a800-80gb", "a100-80gb"),
        ("B200-180GB", "b200"),
        ("b200-192gb", "b200"),
        ("gb200-nvl72", "gb200"),
        ("MI300X", "mi300x"),
        ("MI325X", "mi325x"),
        ("Instinct MI355X", "mi355x"),
        ("910b", "ascend-910b"),
        ("910B3", "ascend-910b"),
        ("Ascend910B2", "ascend-910b"),
        ("ascend_910b4-1", "ascend-910b"),
        ("a2", "ascend-910b"),
        ("A3", "ascend-a3"),
        ("910c", "ascend-a3"),
        ("atlas-800i-a3", "ascend-a3"),
    ],
)
def test_get_device_aliases(given, expected):
    assert get_device(given).name == expected


@pytest.mark.parametrize("name", ["910b4", "910b1", "mi250x", "h800", "a100", "tpu-v5p", ""])
def test_unknown_devices(name):
    """Not in the table: unverified capacities (910B4 is reported as 32 GB, 910B1 driver figure
    unseen), devices not covered (MI250X) and ambiguous names (``a100``: 40 or 80 GB)."""
    with pytest.raises(UnknownNameError) as info:
        get_device(name)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"--device (device) = {name!r}: unknown; ")
    assert f"`epbuf devices` lists all {len(DEVICES)}" in message and "--hbm" in message
    assert isinstance(info.value, EpbufError)


def test_unknown_device_suggests():
    with pytest.raises(UnknownNameError, match=r"did you mean a100-40gb, a100-80gb[,?]"):
        get_device("a100")


# ------------------------------------------------------------------------------- --hbm


@pytest.mark.parametrize(
    ("text", "num_bytes"),
    [
        ("96GiB", 96 * GiB),
        ("96 GiB", 96 * GiB),
        ("143771MiB", 150_754_820_096),
        ("141GB", 141 * 10**9),
        ("80gb", 80 * 10**9),
        ("1.5GiB", 1_610_612_736),
        ("3e9", 3_000_000_000),
        ("1024B", 1024),
        ("1048576", 1 << 20),
        ("64TiB", 64 << 40),
    ],
)
def test_parse_capacity(text, num_bytes):
    assert parse_capacity(text) == num_bytes


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "not a byte size"),
        ("abc", "not a byte size"),
        ("96 gigs", "not a byte size"),
        ("12XB", "not a byte size"),
        ("-1GiB", "not a byte size"),
        ("h200", "not a byte size"),
        ("1.5B", "not a whole number of bytes"),
        ("0", "must be more than 0 bytes"),
        ("0GiB", "must be more than 0 bytes"),
    ],
)
def test_parse_capacity_rejects(text, why):
    with pytest.raises(InvalidArgumentError) as info:
        parse_capacity(text)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"--hbm (hbm) = {text!r}: {why}; ")
    assert "GiB" in message and "--device" in message
    (problem,) = info.value.problems
    assert (problem.argument, problem.value) == ("hbm", text)


@given(st.integers(1, 1 << 24))
def test_mib_capacities_round_trip(mib):
    """Invariant: an nvidia-smi figure ``N MiB`` parses to exactly ``N * 2**20`` bytes."""
    assert parse_capacity(f"{mib}MiB") == mib * MiB


def test_unitless_hbm_is_refused_with_the_units_it_may_mean(capsys):
    """Issue 21: ``hint --hbm 80`` read 80 bytes ("445644800.00 % DOES NOT FIT")."""
    from _cli_run import run_cli

    code, out, err = run_cli(capsys, "hint", "--hbm", "80")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--hbm (hbm) = '80': 80 bytes is no device memory" in err and "80GB or 80GiB" in err
    code, out, _ = run_cli(capsys, "hint", "--hbm", "3e10", "--json")
    assert code == 0 and json.loads(out)["device"]["num_bytes"] == 30_000_000_000
