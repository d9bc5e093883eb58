"""Issue 21: every command answers first (the verdict in its first two lines, the same verdict as
``summary`` in ``--json``), and every text output and error line fits 100 columns when piped."""

from __future__ import annotations

import json

import pytest

from _cli_run import run_cli as run

LONG = "x" * 300
ENGINES = ["vllm", "sglang", "megatron", "sgl-kernel-npu", "mindspeed", "vllm-ascend"]
ISSUE_EXAMPLE = ["engine", "vllm", "--device", "h200", "--", "vllm", "serve", "deepseek-ai/DeepSeek-V3", "-dp", "16",
                 "--enable-expert-parallel", "--all2all-backend", "deepep_low_latency",
                 "--max-num-batched-tokens", "2048"]

GOOD = [
    ["hint"], ["hint", "--model", "deepseek-v3", "--ranks", "64", "--device", "h200", "--budget", "1GiB", "--verbose"],
    ["hint", "--backend", "mori-ep", "--device", "mi355x", "--verbose"],
    ["hint", "--backend", "pplx", "--ranks", "16", "--verbose"], ["hint", "--backend", "uccl-ll", "--verbose"],
    ["hint", "--backend", "deepep-ll", "--ranks", "16", "--verbose"], ["hint", "--backend", "deepep-v1", "--verbose"],
    ["hint", "--backend", "uccl-ep", "--ranks", "32", "--nic", "efa", "--verbose"], ["layout", "--hidden", "7000"],
    ["layout", "--backend", "deepep-v2"], ["compare"], ["compare", "--model", "deepseek-v3", "--ranks", "16",
                                                        "--tokens", "256", "--device", "h200", "--verbose"],
    ["fit", "--device", "h200"], ["fit", "--model", "deepseek-v3", "--budget", "8GiB", "--tokens", "4096"],
    ["sweep", "--model", "deepseek-v3", "--ranks", "8,16,32", "--tokens", "64:8192:*2", "--dtype", "fp8,bf16",
     "--device", "h200"], ["models"], ["devices"], ["versions"], ["replay", "--hidden", "7000", "--fp8"],
    ["--help"], ISSUE_EXAMPLE,
] + [[c, "--help"] for c in ("hint", "layout", "compare", "fit", "sweep", "simulate", "models", "replay", "engine",
                              "serve", "completion")] + [
    a for e in ENGINES for a in (["engine", e], ["engine", e, "--help"],
                                 ["engine", e, "--verbose", "--budget", "4GiB", "--max-tokens-under-load", "512"])]

BAD = [
    ["hint", "--ranks", "9" * 40], ["hint", "--model", "nosuch"], ["hint", "--model", LONG], ["hint", "--device", LONG],
    ["hint", "--hbm", "abc"], ["hint", "--budget", "10%"], ["hint", "--budget", LONG], ["hint", "--backend", LONG],
    ["hint", "--backend-version", "nosuch"], ["hint", "--backend", "deepep-v2", "--backend-version", LONG],
    ["hint", "--no-hybrid"], ["hint", "--sf-packs", "0"], ["hint", "--env", "FOO=1"],
    ["hint", "--backend", "mori-ep", "--env", "MORI_SHMEM_HEAP_SIZE=" + LONG],
    ["hint", "--backend", "mori-ep", "--kernel-type", "nosuch"], ["hint", "--model-config", "/nonexistent/" + LONG],
    ["hint", "--nodes", "3", "--ranks", "16"], ["hint", "--gpus-per-node", "3", "--ranks", "16"],
    ["hint", "--hidden", "9" * 29], ["hint", "--hidden", "7001", "--bf16", "--backend", "deepep-v2"],
    ["layout", "--svg", "map.png"], ["compare", "--backends", "ascend," + LONG], ["fit"], ["fit", "--budget", LONG],
    ["sweep", "--ranks", "8:1"], ["sweep", "--quiet"], ["sweep", "--ranks", LONG], ["simulate", "--routing", LONG],
    ["simulate", "--routing", "zipf:x"], ["simulate", "--device", "nosuch"], ["simulate", "--backend", "pplx"],
    ["simulate", "--hbm", "80GB"], ["engine", "nosuchengine"], ["engine", "vllm", "--tp", "16"],
    ["engine", "vllm", "--env", "NOSUCH_VAR=1"], ["engine", "vllm", "--env", "VLLM_DEEPEP_BUFFER_SIZE_MB=" + "9" * 60],
    ["engine", "vllm", "--all2all-backend", "nosuch"], ["engine", "sglang", "--deepep-config", "{bad"],
    ["engine", "vllm", "--model", LONG], ["engine", "vllm", "--hidden", "9000", "--all2all-backend",
                                          "deepep_low_latency"], ["engine", "vllm", "--budget", "10%"],
    ["replay", "--backend", "deepep-v2"], ["replay", "--device", "h200"], ["hnit"], ["completion", "fish"],
]


@pytest.fixture
def piped(monkeypatch):
    """Standard output is not a terminal and COLUMNS is unset (what `epbuf ... | cat` sees)."""
    from epbuf.cli import _types

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(_types, "_terminal_columns", lambda: 80)


@pytest.mark.parametrize("argv", GOOD + BAD, ids=lambda a: " ".join(x[:16] for x in a)[:60])
def test_every_line_fits_100_columns_when_piped(capsys, piped, tmp_path, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv)
    assert code in (0, 1, 2)
    for line in out.splitlines() + err.splitlines():
        assert len(line) <= 100, line
    if argv in BAD:
        assert code == 2 and out == "" and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("argv", [
    ["simulate"], ["simulate", "--backend", "deepep-v2", "--ranks", "64", "--gpus-per-node", "8", "--tokens", "512"],
    ["simulate", "--backend", "deepep-v1", "--ranks", "32", "--tokens", "256", "--device", "h800"],
    ["simulate", "--backend", "deepep-ll", "--ranks", "16", "--tokens", "128", "--routing", "all-to-one"],
])
def test_simulate_fits_100_columns_and_wide_keeps_its_tables(capsys, piped, argv):
    pytest.importorskip("numpy")
    code, out, _ = run(capsys, *argv)
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 100
    assert out.startswith("verdict: every region held the routing")
    _, wide, _ = run(capsys, *argv, "--wide")
    assert "mean used" in wide.splitlines()[wide.splitlines().index(next(
        x for x in wide.splitlines() if x.startswith("Occupancy"))) + 1]


def test_engine_tables_keep_variable_names_whole(capsys, piped):
    code, out, _ = run(capsys, "engine", "sglang", "--verbose")
    assert code == 0 and "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK " in out
    assert not any(line.strip().startswith(("ER_RANK", "_RANK", "S_PER_RANK")) for line in out.splitlines())


def test_the_issue_example_opens_with_its_verdict(capsys, piped):
    """DeepSeek-V3 on 16 x H200 with vLLM low-latency: total, share, fits, the first error, at the top."""
    code, out, _ = run(capsys, *ISSUE_EXAMPLE)
    first, second = out.splitlines()[:2]
    assert code == 0
    assert first == ("verdict: 29.47 GiB per device (31,641,831,712 B); 20.99 % of NVIDIA H200 (SXM): fits; "
                     "1 error")
    assert second.startswith("  error: NVSHMEM_QP_DEPTH >= (num_max_dispatch_tokens_per_rank + 1) x 2: 1,024")
    assert second.endswith("[vllm.limit]")
    code, text, _ = run(capsys, *ISSUE_EXAMPLE[:4], "--json", *ISSUE_EXAMPLE[4:])
    s = json.loads(text)["summary"]
    assert s["num_bytes"] == 31_641_831_712 and s["device"]["fits"] and s["fits"] is True
    assert s["num_errors"] == 1 and s["first_error"]["code"] == "vllm.limit"


SUMMARISED = [["hint", "--device", "h100", "--budget", "10%"], ["layout"], ["compare", "--device", "h200"],
              ["fit", "--device", "h200"], ["sweep", "--ranks", "8,16"], ["engine", "megatron"], ["replay"],
              ["models"], ["devices"], ["versions"]]


@pytest.mark.parametrize("argv", SUMMARISED, ids=lambda a: " ".join(a))
def test_every_json_document_has_its_summary(capsys, argv):
    from epbuf.verdict import EXTRA_KEYS, SUMMARY_KEYS, summary

    code, text, _ = run(capsys, *argv[:2], "--json", *argv[2:]) if argv[0] == "engine" else \
        run(capsys, *argv, "--json")
    data = json.loads(text)
    command = argv[0]
    assert code == 0 and list(data["summary"]) == list(SUMMARY_KEYS) + list(EXTRA_KEYS[command])
    rest = {k: v for k, v in data.items() if k != "summary"}
    assert summary(command, rest) == data["summary"]  # one pure function of the document


def test_text_verdicts_say_total_share_and_fit(capsys, piped):
    _, out, _ = run(capsys, "hint", "--model", "deepseek-v3", "--ranks", "64", "--tokens", "131072", "--device",
                    "h100", "--budget", "8GiB")
    assert out.splitlines()[0] == ("verdict: 140.78 GiB per device; 176.75 % of device, 1759.74 % of budget: "
                                   "DOES NOT FIT; 2 errors")
    _, out, _ = run(capsys, "compare", "--model", "deepseek-v3", "--ranks", "16", "--tokens", "256", "--device", "h200")
    lines = out.splitlines()
    assert lines[0].startswith("verdict: smallest deepep-v2: 122.00 MiB per device") and "6 of 8" in lines[0]
    assert lines[3] == "inputs:   DeepSeek-V3 (hidden 7,168, top-k 8, experts 256); 16 ranks; 256 tokens per rank; " \
                       "dtype FP8"
    assert len(lines) < 100 and "= deepep-v1" in out
    _, out, _ = run(capsys, "fit", "--device", "h200")
    assert out.splitlines()[0].startswith("verdict: largest tokens per rank: deepep-v2 174,277; 14.04 GiB per device")
    _, out, _ = run(capsys, "sweep", "--ranks", "8,16", "--tokens", "1024,8192")
    assert out.splitlines()[0] == "verdict: 32 configurations; largest 126.56 GiB; 3 with an error or a broken limit"


def test_the_error_guard_keeps_the_option_the_value_and_what_is_allowed():
    from epbuf.cli._types import fit_line

    short = "epbuf hint: error: --ranks (num_ranks) = 0: allowed >= 1"
    assert fit_line(short) == short
    cited = ("epbuf hint: error: --hidden (hidden) = 7001: dispatch hidden bytes 7001 must be a multiple of 32 "
             "(TokenLayout: EP_UNIFIED_ASSERT(num_hidden_bytes % 32 == 0)); use hidden % 32 == 0")
    assert fit_line(cited) == ("epbuf hint: error: --hidden = 7001: dispatch hidden bytes 7001 must be a "
                               "multiple of 32; …")  # the citation, then the Python name, went
    value = "epbuf engine: error: --env X = '" + "7" * 60 + "… (5,000 characters)': allowed an integer >= 1"
    assert fit_line(value) == "epbuf engine: error: --env X = '777777777777… (5,000 characters)': allowed an integer >= 1"
    path = "epbuf simulate: error: --routing-file: /tmp/" + "d" * 80 + "/r.npy: not a regular file"
    assert fit_line(path) == "epbuf simulate: error: --routing-file: …/r.npy: not a regular file"
    for text in (cited, value, path, "x" * 300, "epbuf: error: " + "word " * 60):
        assert len(fit_line(text)) <= 100


@pytest.mark.parametrize("width", [60, 80, 100, 120])
def test_verdict_lines_fit_any_width(capsys, width):
    from epbuf.verdict import verdict_lines

    for argv in (ISSUE_EXAMPLE[:4] + ["--json"] + ISSUE_EXAMPLE[4:], ["compare", "--device", "mi355x", "--json"],
                 ["fit", "--device", "h100", "--json"], ["hint", "--hbm", "1KiB", "--budget", "10%", "--json"]):
        _, text, _ = run(capsys, *argv)
        for line in verdict_lines(json.loads(text)["summary"], width):
            assert len(line) <= width, line
