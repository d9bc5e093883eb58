"""The ``epbuf`` command line: through main() for data, and through the installed console script."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from epbuf.cli import main


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse exits for --help / parse errors
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def epbuf_command() -> list[str]:
    script = shutil.which("epbuf", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    return [script] if script else [sys.executable, "-m", "epbuf"]


def test_hint_default_reproduces_seed(capsys):
    code, out, err = run_main(capsys, "hint")
    assert code == 0 and err == ""
    for text in ("7,488", "14,368", "252,706,816", "353,107,968", "354,418,688 B (338.00 MiB)", "245,366,784",
                 "7,340,032"):
        assert text in out


def test_hint_json_carries_every_number(capsys):
    code, out, _ = run_main(capsys, "hint", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == "epbuf.report/1"
    q = data["quantities"]
    assert (q["dispatch_record_num_bytes"], q["real_num_sf_packs"], q["combine_record_num_bytes"]) == (7488, 112, 14368)
    assert (q["hint_dispatch_num_bytes"], q["combine_num_bytes"], q["hint_num_bytes"]) == (252706816, 353107968, 354418688)
    assert q["real_dispatch_num_bytes"] == 245366784 and q["needed_num_bytes"] == 354418688
    assert data["num_bytes"] == 354418688 + 2097152  # plus the 2 MiB EPSignals workspace
    buf, workspace = data["buffers"]
    assert (buf["name"], buf["num_bytes"], workspace["num_bytes"]) == ("EP buffer", 354418688, 2097152)
    assert [r["num_bytes"] for r in buf["regions"]] == [252706816, 353107968]


def test_layout_prints_byte_map(capsys):
    code, out, _ = run_main(capsys, "layout")
    assert code == 0
    assert "src_token_global_idx" in out and "7,480" in out


def test_layout_json_mismatch(capsys):
    code, out, _ = run_main(capsys, "layout", "--hidden", "7000", "--json")
    data = json.loads(out)
    (finding,) = [f for f in data["findings"] if f["code"] == "ascend.reader-writer-mismatch"]
    assert finding["data"]["overrun_bytes"] == 4
    assert "dispatch (as written)" in [r["name"] for r in data["records"]]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["hint", "--ranks", "x"], "--ranks: 'x' is not an integer"),
        (["hint", "--ranks", "0"], "--ranks: 0 is out of range"),
        (["hint", "--ranks", "-3"], "--ranks"),
        (["hint", "--topk", "300000000", "--experts", "300000000"], "--topk (num_topk) = 300000000: the dispatch record of"),
        (["hint", "--topk", "9", "--experts", "8"], "--topk (num_topk) = 9: allowed 0..8: each token picks"),
        (["hint", "--hidden", "3000000000"], "--hidden (hidden) = 3000000000"),
        (["hint", "--tokens", "1.5"], "--tokens: '1.5' is not an integer"),
        (["hint", "--backend", "nope"], "invalid choice: 'nope'"),
        (["layout", "--topk", "abc"], "--topk: 'abc' is not an integer"),
        (["hint", "--fp8", "--bf16"], "not allowed with argument"),
    ],
)
def test_errors_are_one_line_exit_2(capsys, argv, needle):
    code, out, err = run_main(capsys, *argv)
    assert code == 2
    assert out == ""
    assert needle in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_console_script_end_to_end():
    """Once through the installed entry point (or python -m epbuf), as a user runs it."""
    ok = subprocess.run(epbuf_command() + ["hint", "--json"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["quantities"]["hint_num_bytes"] == 354418688
    bad = subprocess.run(epbuf_command() + ["hint", "--topk", "300000000"], capture_output=True, text=True,
                         check=False)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.stderr
    assert "--topk (num_topk) = 300000000" in bad.stderr


def test_no_command_prints_help(capsys):
    code, out, _ = run_main(capsys)
    assert code == 2 and "hint" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--backend", "deepep-v2", "--hidden", "7001"], "dispatch hidden bytes = 7001 x 1 = 7001"),
        (["--backend", "deepep-v2", "--deepep-version", "bogus"], "--backend-version (version) = 'bogus'"),
        (["--backend", "deepep-v1", "--ranks", "3", "--experts", "3", "--topk", "3"], "--ranks (num_ranks) = 3"),
        (["--backend", "deepep-v1", "--num-sms", "21"], "--num-sms (num_sms) = 21: must be even"),
        (["--backend", "deepep-ll", "--deepep-version", "ll9"], "--backend-version (version) = 'll9'"),
        (["--model", "no-such-model"], "--model (model) = 'no-such-model': unknown"),
        (["--device", "no-such-gpu"], "--device (device) = 'no-such-gpu': unknown"),
        (["--hbm", "lots"], "--hbm (hbm) = 'lots'"),
    ],
)
def test_backend_limit_errors_through_the_cli(capsys, argv, needle):
    code, out, err = run_main(capsys, "hint", *argv)
    assert code == 2 and out == "" and needle in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "limit"),
    [
        (["--backend", "deepep-ll", "--tokens", "4096"], "the 32 GiB ceiling"),
        (["--backend", "deepep-ll", "--hidden", "7000"], "SWITCH_HIDDEN"),
        (["--backend", "deepep-ll", "--topk", "12"], "num_topk"),  # kNumMaxTopK = 11: a host assert at dispatch
        (["--backend", "deepep-ll", "--experts", "100"], "num_experts % num_ranks"),
        (["--backend", "deepep-v1", "--ranks", "24"], "num_experts % num_ranks"),  # 256 experts, 24 ranks
        (["--backend", "deepep-v1", "--topk", "33"], "num_topk"),  # EP_DEVICE_ASSERT(num_topk <= 32)
        (["--backend", "ascend", "--hidden", "7000"], "hidden % 128"),
        (["--backend", "ascend", "--ranks", "128", "--tokens", "131072"], "24-bit reduction value"),
        # Errors before the one rule: sizes, and the broken limit naming what refuses the plan.
        (["--backend", "ascend", "--ranks", "300"], "kNumMaxRanks"),
        (["--backend", "ascend", "--topk", "33"], "num_topk"),
        (["--backend", "ascend", "--experts", "100"], "EP_HOST_ASSERT(num_experts % context->num_ranks == 0)"),
        (["--backend", "ascend", "--experts", "4096"], "kNumMaxExperts"),
        # WorkspaceLayout's host assertions (layout.cuh:37-40, workspace.cuh:43-46): sizes plus the broken limit.
        (["--backend", "deepep-v2", "--ranks", "2048", "--experts", "2048"], "EP_UNIFIED_ASSERT(num_ranks <= kNumMaxRanks)"),
        (["--backend", "deepep-v2", "--experts", "4096"], "EP_UNIFIED_ASSERT(num_experts <= EPSignals::kNumMaxExperts)"),
    ],
)
def test_kernel_limits_are_reported_and_strict_fails(capsys, argv, limit):
    code, out, _ = run_main(capsys, "hint", *argv)
    assert code == 0 and "BROKEN" in out and limit in " ".join(out.split())  # long lines wrap at the width
    code, _, _ = run_main(capsys, "hint", "--strict", *argv)
    assert code == 1
    code, _, _ = run_main(capsys, "hint", "--strict")
    assert code == 0


def test_topk_idx_bits_reaches_the_plan(capsys):
    """``--topk-idx-bits`` sets ``Plan.num_topk_idx_bits`` (32-bit ``topk_idx_t`` builds); unset is None."""
    for argv, bits in (([], None), (["--topk-idx-bits", "32"], 32), (["--topk-idx-bits", "64"], 64)):
        code, out, _ = run_main(capsys, "compare", "--backends", "deepep-v1", "--json", *argv)
        assert code == 0 and json.loads(out)["plan"]["num_topk_idx_bits"] == bits
    code, out, err = run_main(capsys, "hint", "--topk-idx-bits", "16")
    assert code == 2 and out == "" and "--topk-idx-bits: invalid choice: 16 (one of 32, 64)" in err
