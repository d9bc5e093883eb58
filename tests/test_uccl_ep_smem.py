"""UCCL-EP's TMA launches: dynamic shared memory against the device's per-block maximum
(epbuf.backends.uccl_ep.smem; formulas from ep/src/*.cu @ da914a2, v0.1.1 @ 73ee4f1)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epbuf.backends.uccl_ep import smem
from epbuf.backends.uccl_ep.versions import get_version
from epbuf.cli import main
from epbuf.devices import DEVICES
from epbuf.engines import report as engine_report
from epbuf.plan import Plan, report

MAIN, V011 = get_version("main"), get_version("v0.1.1")
H200 = DEVICES["h200"].max_smem_per_block_optin

# (version, launch, num_sms, bytes), from the source:
# internode.cu:66, 1685 kNumTMABytesPerWarp (20480; 16384 at v0.1.1) x NUM_MAX_NVL_PEERS 8;
# internode.cu:1998-2003 8192 B x max(128, 32 x num_sms/2) / 32 warps;
# internode.cu:3058-3065 max(kNumTMABytesPerWarp x 8, 9248 x 16);
# intranode.cu:609-615 8192 x 768/32, intranode.cu:1119-1126 4096 x 768/32 (num_sms does not enter).
LAUNCHES = [
    (MAIN, "internode dispatch", 20, 163_840), (MAIN, "internode dispatch", 56, 163_840),
    (V011, "internode dispatch", 20, 131_072), (V011, "internode dispatch", 56, 131_072),
    (MAIN, "cached_notify", 20, 81_920), (MAIN, "cached_notify", 56, 229_376),
    (V011, "cached_notify", 8, 32_768), (V011, "cached_notify", 58, 237_568),
    (MAIN, "internode combine", 20, 163_840), (MAIN, "internode combine", 56, 163_840),
    (V011, "internode combine", 20, 147_968), (V011, "internode combine", 56, 147_968),
    (MAIN, "intranode dispatch", 20, 196_608), (MAIN, "intranode dispatch", 56, 196_608),
    (MAIN, "intranode combine", 20, 98_304), (V011, "intranode combine", 56, 98_304),
]


@pytest.mark.parametrize("v, launch, num_sms, num_bytes", LAUNCHES)
def test_normal_launch_bytes(v, launch, num_sms, num_bytes):
    launches = smem.normal_launches(v, launch.startswith("internode") or launch == "cached_notify",
                                    {"config": num_sms})
    assert [b for name, b, _, _ in launches if name.split(" (")[0] == launch] == [num_bytes]


# internode_ll.cu:1254-1282: 12 x (512 + 16) = 6,336 B per warp, 32 warps when they fit; otherwise the
# launcher shrinks to a multiple of the warp groups g when at least 2 g fit, else keeps the full block.
@pytest.mark.parametrize("bound, groups, warps, num_bytes", [
    (232_448, 1, 32, 202_752), (232_448, 3, 30, 190_080), (166_912, 1, 26, 164_736),
    (100_000, 4, 12, 76_032), (12_672, 1, 2, 12_672), (12_671, 1, 32, 202_752), (50_000, 8, 32, 202_752)])
def test_low_latency_combine_launch(bound, groups, warps, num_bytes):
    assert smem.low_latency_combine_launch(7168, bound, groups) == (warps, num_bytes)


def _smem_limits(rep):
    return [lim for lim in rep.limits if "dynamic shared memory" in lim.name]


def _plan(**kw):
    base = dict(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=128)
    return Plan(**{**base, **kw})


def test_largest_num_sms_on_h200_is_56():
    """The formula allows 57 (DeepEP's max_cached_notify_num_sms), but UCCL-EP's set_num_sms and
    the internode configs need an even count: 56 is the largest that runs, 58 breaks."""
    assert H200 == 232_448
    ok = {n: all(lim.ok for lim in _smem_limits(report(_plan(num_sms=n, device="h200"), "uccl-ep")))
          for n in range(2, 80, 2)}
    assert max(n for n, fits in ok.items() if fits) == 56 and not any(ok[n] for n in range(58, 80, 2))


def test_report_rows_finding_and_sizes():
    rep = report(_plan(num_sms=58, device="h200"), "uccl-ep")
    rows = _smem_limits(rep)
    assert [(r.value, r.ok) for r in rows] == [(163_840, True), (237_568, False), (163_840, True)]
    assert "ep/include/ep_launch.cuh:36 @da914a2" in rows[1].source and "internode.cu:1998-2003" in rows[1].source
    assert "h200, sm_90" in rows[1].name
    assert any(f.severity == "error" and "cached_notify (num_sms = 58)" in f.message for f in rep.findings)
    plain = report(_plan(num_sms=58), "uccl-ep")
    assert plain.num_bytes == rep.num_bytes and "no device given" in _smem_limits(plain)[1].name
    assert [r.value for r in _smem_limits(report(_plan(num_ranks=8), "uccl-ep"))] == [196_608, 98_304]
    assert [r.value for r in _smem_limits(report(_plan(version="v0.1.1"), "uccl-ep"))] == [131_072, 81_920, 147_968]


def test_no_rows_on_rocm_or_without_sm90_features():
    for kw in ({"platform": "rocm"}, {"device": "mi300x", "platform": "rocm"}, {"device": "a100-80gb"}):
        assert _smem_limits(report(_plan(num_sms=64, **kw), "uccl-ep")) == []
        assert _smem_limits(report(_plan(**kw), "uccl-ll")) == []


def test_low_latency_row():
    rows = _smem_limits(report(_plan(device="h200"), "uccl-ll"))
    assert [(r.value, r.bound, r.ok) for r in rows] == [(202_752, 232_448, True)]
    assert "internode_ll.cu:1237-1243, 1254-1282, 1295" in rows[0].source
    assert _smem_limits(report(_plan(hidden=7040), "uccl-ll")) == []  # SWITCH_HIDDEN refuses it first


def test_cli_strict_exit_codes(capsys):
    argv = ["hint", "--backend", "uccl-ep", "--topk", "8", "--ranks", "16", "--device", "h200", "--strict"]
    assert main(argv + ["--num-sms", "56"]) == 0
    capsys.readouterr()
    assert main(argv + ["--num-sms", "58", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert [lim["ok"] for lim in data["limits"] if "dynamic shared memory" in lim["name"]] == [True, False, True]
    assert main(argv + ["--num-sms", "57"]) == 2  # odd: Buffer.set_num_sms asserts it (one line)
    capsys.readouterr()


def test_engines_carry_the_rows(tmp_path):
    one = {"num_sms": 64, "num_max_nvl_chunked_send_tokens": 6, "num_max_nvl_chunked_recv_tokens": 256,
           "num_max_rdma_chunked_send_tokens": 6, "num_max_rdma_chunked_recv_tokens": 256}
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"normal_dispatch": one, "normal_combine": one}))
    rep = engine_report("sglang", model="deepseek-v3", num_ranks=16,
                        flags={"--deepep-mode": "normal", "--deepep-config": str(path), "--uccl-ep": True})
    assert [(r.value, r.ok) for r in _smem_limits(rep.report)] == [(163_840, True), (262_144, False), (163_840, True)]
    assert any(f.severity == "error" and f.message.startswith("cached_notify") for f in rep.report.findings)
    for backend, values in (("deepep_high_throughput", [163_840, 81_920, 163_840]), ("deepep_low_latency", [202_752])):
        rep = engine_report("vllm", model="deepseek-v3", num_ranks=16, flags={"--all2all-backend": backend,
                                                                               "--uccl-ep": True})
        assert [r.value for r in _smem_limits(rep.report)] == values


@given(st.integers(2, 200), st.integers(2, 200))
def test_monotone_in_num_sms(a, b):
    lo, hi = sorted((a, b))
    ok = [row[4] for row in smem.normal_rows(MAIN, "cuda", None, True, {"c": lo})]
    ok_hi = [row[4] for row in smem.normal_rows(MAIN, "cuda", None, True, {"c": hi})]
    assert all(ok_hi) <= all(ok)  # once broken, more SMs stay broken
    assert [row[1] for row in smem.normal_rows(MAIN, "cuda", None, True, {"c": lo})][1] <= \
        [row[1] for row in smem.normal_rows(MAIN, "cuda", None, True, {"c": hi})][1]


@given(st.integers(1, 300_000), st.integers(1, 32))
def test_low_latency_launch_fits_unless_two_groups_do_not(bound, groups):
    warps, num_bytes = smem.low_latency_combine_launch(7168, bound, groups)
    assert warps % groups == 0 and warps <= 32
    assert num_bytes <= bound or bound < 2 * groups * 6336
