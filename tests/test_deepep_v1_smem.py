"""DeepEP V1's TMA launches: dynamic shared memory against the device's per-block maximum
(epbuf.backends.deepep_v1.smem; formulas from csrc/kernels/legacy/*.cu @ dd758ca)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epbuf.backends.deepep_v1 import smem
from epbuf.backends.deepep_v1.versions import get_version
from epbuf.cli import main
from epbuf.devices import DEVICES
from epbuf.plan import Plan, report

# internode.cu:1497-1501 @ dd758ca: 8192 B x max(128, 32 x num_sms/2) / 32 warps
CACHED_NOTIFY = [(2, 32768), (8, 32768), (10, 40960), (20, 81920), (24, 98304), (56, 229376), (57, 229376),
                 (58, 237568), (64, 262144)]


@pytest.mark.parametrize("num_sms, num_bytes", CACHED_NOTIFY)
def test_cached_notify_formula(num_sms, num_bytes):
    assert smem.cached_notify_smem_bytes(num_sms) == num_bytes


def test_fixed_launches():
    assert (smem.INTRANODE_DISPATCH_SMEM_BYTES, smem.INTRANODE_COMBINE_SMEM_BYTES) == (196608, 98304)
    assert (smem.INTERNODE_DISPATCH_SMEM_BYTES, smem.INTERNODE_COMBINE_SMEM_BYTES) == (131072, 221952)


@pytest.mark.parametrize("hidden, variant, num_bytes", [
    (7168, 5, 205312),  # send: 32 x (3 x 2064 + 224) > recv 2 x (3 x 14352 + 14336 + 2016) = 118816
    (8192, 5, 206336), (2048, 5, 200192), (7168, 4, 202752), (7168, 3, 0)])
def test_low_latency_combine_formula(hidden, variant, num_bytes):
    assert smem.low_latency_combine_smem_bytes(hidden, variant) == num_bytes


@pytest.mark.parametrize("device, largest", [("h200", 57), ("h100", 57), ("b200", 57), ("gb300", 57),
                                             ("a100-80gb", 41)])
def test_largest_num_sms_per_device(device, largest):
    bound = DEVICES[device].max_smem_per_block_optin
    assert smem.max_cached_notify_num_sms(bound) == largest
    assert smem.cached_notify_smem_bytes(largest) <= bound < smem.cached_notify_smem_bytes(largest + 1)


def test_device_field():
    assert DEVICES["h200"].max_smem_per_block_optin == 232448 and DEVICES["a100-40gb"].max_smem_per_block_optin == 166912
    assert DEVICES["mi300x"].max_smem_per_block_optin is None and DEVICES["ascend-a3"].compute_capability == ""


def _smem_limits(rep):
    return [lim for lim in rep.limits if "dynamic shared memory" in lim.name]


def _plan(**kw):
    base = dict(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=4096)
    return Plan(**{**base, **kw})


def test_report_rows_and_finding():
    rep = report(_plan(num_sms=58, device="h200"), "deepep-v1")
    rows = _smem_limits(rep)
    assert [r.value for r in rows] == [131072, 237568, 221952] and [r.ok for r in rows] == [True, False, True]
    assert "launch.cuh:46" in rows[1].source and "h200, sm_90" in rows[1].name
    assert any(f.severity == "error" and "cached_notify" in f.message for f in rep.findings)
    same = report(_plan(num_sms=58), "deepep-v1")
    assert same.num_bytes == rep.num_bytes and "no device given" in _smem_limits(same)[1].name
    assert [r.value for r in _smem_limits(report(_plan(num_ranks=8), "deepep-v1"))] == [196608, 98304]


def test_no_rows_without_tma_or_before_ll4():
    assert _smem_limits(report(_plan(num_sms=64, device="a100-80gb"), "deepep-v1")) == []
    assert _smem_limits(report(_plan(num_sms=64, version="ll3"), "deepep-v1")) == []


def test_low_latency_row():
    rows = _smem_limits(report(_plan(device="h200"), "deepep-ll"))
    assert [(r.value, r.bound, r.ok) for r in rows] == [(205312, 232448, True)]
    assert _smem_limits(report(_plan(hidden=7000), "deepep-ll")) == []  # SWITCH_HIDDEN refuses it first


def test_cli_strict_exits_1(capsys):
    argv = ["hint", "--backend", "deepep-v1", "--topk", "8", "--ranks", "16", "--device", "h200", "--strict"]
    assert main(argv + ["--num-sms", "56"]) == 0
    capsys.readouterr()
    assert main(argv + ["--num-sms", "58", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [lim["ok"] for lim in data["limits"] if "dynamic shared memory" in lim["name"]] == [True, False, True]


def test_megatron_engine_shows_it(capsys):
    argv = ["engine", "megatron", "--model", "deepseek-v3", "--expert-model-parallel-size", "16", "--strict"]
    assert main(argv + ["--moe-flex-dispatcher-num-sms", "56"]) == 0
    capsys.readouterr()
    assert main(argv + ["--moe-flex-dispatcher-num-sms", "64"]) == 1
    assert "cached_notify (num_sms = 64)" in capsys.readouterr().out


@given(st.integers(2, 200), st.integers(2, 200))
def test_monotone_in_num_sms(a, b):
    lo, hi = sorted((a, b))
    assert smem.cached_notify_smem_bytes(lo) <= smem.cached_notify_smem_bytes(hi)
    v = get_version("main")
    ok = [row[4] for row in smem.smem_rows(v, None, smem.normal_launches(True, {"c": lo}))]
    ok_hi = [row[4] for row in smem.smem_rows(v, None, smem.normal_launches(True, {"c": hi}))]
    assert all(ok_hi) <= all(ok)  # once broken, more SMs stay broken
