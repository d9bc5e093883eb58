"""``epbuf sweep``: rows equal the full reports, CSV/JSON/plot outputs, axis parsing."""

from __future__ import annotations

import csv
import json
import sys
import xml.etree.ElementTree as ET

import pytest

from epbuf import InvalidArgumentError, Plan, report
from epbuf.cli import main
from epbuf.plan import backend_names, summarize
from epbuf.report import summary_of
from epbuf.sweep import COLUMNS, parse_values, sweep

BASE = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=8, num_max_tokens_per_rank=128)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8", [8]),
        ("8,16,32", [8, 16, 32]),
        ("1:4", [1, 2, 3, 4]),
        ("128:512:128", [128, 256, 384, 512]),
        ("128:4096:*2", [128, 256, 512, 1024, 2048, 4096]),
        ("8,8,16", [8, 16]),
        ("1_024", [1024]),
    ],
)
def test_parse_values(text, expected):
    assert parse_values(text, "--tokens") == expected


@pytest.mark.parametrize("text", ["", "x", "4:1", "1:8:0", "1:8:*1", "1:2:3:4", "0:8:*2"])
def test_parse_values_rejects(text):
    with pytest.raises(InvalidArgumentError, match="--tokens"):
        parse_values(text, "--tokens")


def test_rows_equal_full_reports_for_every_backend():
    result = sweep(BASE, {"num_ranks": [8, 16], "num_max_tokens_per_rank": [1, 128, 4096],
                          "use_fp8_dispatch": [True, False]}, backend_names())
    assert result.columns == COLUMNS
    assert len(result.rows) == len(backend_names()) * 2 * 3 * 2
    for row in result.rows:
        r = dict(zip(COLUMNS, row))
        plan = BASE.replace(num_ranks=r["num_ranks"], num_max_tokens_per_rank=r["num_max_tokens_per_rank"],
                            use_fp8_dispatch=r["use_fp8_dispatch"])
        full = report(plan, r["backend"])
        assert (r["num_bytes"], r["num_bytes_needed"]) == (full.num_bytes, full.num_bytes_needed)
        assert r["broken_limits"] == ";".join(lim.name for lim in full.failed_limits())


def test_summarize_equals_summary_of_report():
    for backend in backend_names():
        assert summarize(BASE, backend) == summary_of(report(BASE, backend)), backend


def test_rejected_configurations_become_rows_with_the_error():
    result = sweep(BASE, {"num_topk": [8, 300_000_000]}, ["ascend"])
    bad = dict(zip(COLUMNS, result.rows[1]))
    assert bad["num_bytes"] is None and "--topk (num_topk) = 300000000" in bad["error"]


def test_configurations_upstream_refuses_later_are_rows_with_broken_limits():
    """512 ranks: sizes, and the limits that refuse it (the one rule for plans upstream would refuse)."""
    result = sweep(BASE, {"num_ranks": [8, 512]}, ["ascend"])
    row = dict(zip(COLUMNS, result.rows[1]))
    assert row["error"] == "" and row["num_bytes"] == report(BASE.replace(num_ranks=512), "ascend").num_bytes
    assert row["broken_limits"].split(";")[:2] == ["num_ranks", "num_ranks (8-bit reduction arrival count)"]


def test_axis_value_invalid_for_every_plan_is_one_error():
    with pytest.raises(InvalidArgumentError, match="--tokens"):
        sweep(BASE, {"num_max_tokens_per_rank": [0, 8]}, ["ascend"])


def test_cli_csv_matches_json(tmp_path, capsys):
    out = tmp_path / "sweep.csv"
    argv = ["sweep", "--backends", "ascend,deepep-v2", "--ranks", "8,16", "--tokens", "128:1024:*2", "--topk", "8"]
    assert main(argv + ["--csv", str(out), "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert main(argv + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "epbuf.sweep/1" and len(rows) == len(data["rows"]) == 2 * 2 * 4
    for csv_row, json_row in zip(rows, data["rows"]):
        j = dict(zip(data["columns"], json_row))
        assert int(csv_row["num_bytes"]) == j["num_bytes"]
        assert csv_row["backend"] == j["backend"]


def test_cli_plot_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "sweep.png"
    assert main(["sweep", "--backends", "ascend,deepep-v2", "--ranks", "8,16,32", "--tokens", "64:8192:*2",
                 "--model", "deepseek-v3", "--device", "h200", "--plot", str(out), "--quiet"]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.png"]


@pytest.mark.parametrize(("name", "magic"), [("p.png", b"\x89PNG"), ("p.svg", b"<?xml"), ("p.PDF", b"%PDF")])
def test_cli_plot_format_follows_the_extension(tmp_path, capsys, name, magic):
    """Issue 12: ``--plot p.pdf`` writes PDF bytes, ``p.svg`` SVG, ``p.png`` PNG."""
    pytest.importorskip("matplotlib")
    out = tmp_path / name
    assert main(["sweep", "--tokens", "128,256", "--dtype", "fp8,bf16", "--plot", str(out), "--quiet"]) == 0
    assert out.read_bytes().startswith(magic)
    capsys.readouterr()


@pytest.mark.parametrize("name", ["p.jpg", "p", "p.png.txt"])
def test_cli_plot_unknown_extension_is_refused_and_nothing_written(tmp_path, capsys, name):
    code = main(["sweep", "--tokens", "128,256", "--plot", str(tmp_path / name), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "choose the format by the extension: .png, .svg, .pdf" in err
    assert list(tmp_path.iterdir()) == []


def test_plot_facets_by_backend_and_notes_identical_series(tmp_path):
    """One panel per backend; series that coincide (DeepEP LL does not depend on the dtype) drawn once."""
    pytest.importorskip("matplotlib")
    from epbuf import Plan
    from epbuf.plot import plot_sweep
    from epbuf.sweep import sweep

    base = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=8, num_max_tokens_per_rank=128)
    result = sweep(base, {"num_max_tokens_per_rank": [128, 256, 512], "use_fp8_dispatch": [True, False]},
                   ["ascend", "deepep-ll"])
    import matplotlib

    out = tmp_path / "p.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # keep text as <text>, not glyph paths
        plot_sweep(result, str(out))
    texts = [t.text for t in ET.parse(out).iter("{http://www.w3.org/2000/svg}text")]
    assert "ascend" in texts and "deepep-ll" in texts  # one panel title each
    assert "drawn once: all series coincide" in texts  # LL: FP8 = BF16
    assert texts.count("FP8") == 1 and texts.count("BF16") == 1  # the legend explains the encoding once


def test_cli_plot_without_matplotlib_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code = main(["sweep", "--backends", "ascend", "--plot", str(tmp_path / "x.png")])
    err = capsys.readouterr().err
    assert code == 2 and "pip install 'epbuf[plot]'" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["sweep", "--ranks", "1:x"], "--ranks"),
        (["sweep", "--dtype", "fp16"], "--dtype (dtype) = 'fp16'"),
        (["sweep", "--backends", "nope"], "--backends = 'nope'"),
        (["sweep", "--tokens", "0"], "--tokens (num_max_tokens_per_rank) = 0"),
        (["sweep", "--csv", "/nonexistent/dir/x.csv"], "--csv: /nonexistent/dir/x.csv: folder"),
    ],
)
def test_cli_sweep_errors(capsys, argv, needle):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and needle in err and err.count("\n") == 1, err


def test_huge_sweeps_are_refused_before_any_work(capsys):
    for argv in (["sweep", "--tokens", "1:100000000"], ["sweep", "--tokens", "1:100000", "--ranks", "1:8"],
                 # issue 9: 200 ranges, each under the cap, together far over it (6 GB before the fix)
                 ["sweep", "--tokens", ",".join(["1:1999999"] * 200)]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and "200,000" in err and err.count("\n") == 1, err


def test_the_cap_is_counted_before_ranges_expand():
    """Counting happens before ``range`` is materialised: a range of 10^18 values answers at once."""
    from epbuf.errors import InvalidArgumentError
    from epbuf.sweep import parse_values

    with pytest.raises(InvalidArgumentError, match="more than 200,000 values"):
        parse_values("1:1000000000000000000", "--tokens")
    with pytest.raises(InvalidArgumentError, match="use a list"):
        parse_values("1" + "0" * 5000, "--tokens")  # int() refuses 4,301+ digits: one line, not a traceback


def test_progress_is_reported_to_the_end():
    from epbuf import Plan
    from epbuf.sweep import PROGRESS_EVERY, sweep

    seen = []
    base = Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=8, num_max_tokens_per_rank=1)
    total = PROGRESS_EVERY + 5
    sweep(base, {"num_max_tokens_per_rank": list(range(1, total + 1))}, ["ascend"],
          progress=lambda done, n: seen.append((done, n)))
    assert seen[0] == (0, total) and (PROGRESS_EVERY, total) in seen and seen[-1] == (total, total)
