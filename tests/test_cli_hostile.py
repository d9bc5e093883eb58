"""Issue 9, the command line: Ctrl-C, a closed or full standard output, progress on a terminal,
and random command lines fed to ``cli.main`` in-process (exit status 0, 1 or 2, never a
traceback)."""

from __future__ import annotations

import argparse
import io
import os
import random
import signal
import subprocess
import sys
import time

import pytest

import epbuf.sweep
from epbuf.cli import build_parser, main
from epbuf.cli.engine import build_engine_parser
from epbuf.engines import ENGINES

from _cli_run import run_cli as run, run_cli_whole  # tests/_cli_run.py (conftest puts tests/ on the path)
from _devices import make_device_nodes

CLI = [sys.executable, "-m", "epbuf.cli"]


# --- Ctrl-C ---------------------------------------------------------------------------
def test_ctrl_c_during_a_long_sweep_is_one_line_and_status_130(tmp_path):
    """A sweep of 200,000 configurations runs for seconds; SIGINT half a second in ends it with
    one line and exit status 130, and no CSV (written whole or not at all) appears."""
    csv = tmp_path / "s.csv"
    proc = subprocess.Popen(CLI + ["sweep", "--tokens", "1:100000", "--backends", "ascend,deepep-v2",
                                   "--csv", str(csv)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.8)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err)
    assert err == "epbuf sweep: interrupted\n" and out == "" and not csv.exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".epbuf-")]


def test_ctrl_c_in_process_is_status_130(capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(epbuf.sweep, "sweep", interrupted)
    code, out, err = run(capsys, "sweep")
    assert (code, out, err) == (130, "", "epbuf sweep: interrupted\n")


# --- standard output that cannot be written -------------------------------------------
@pytest.mark.parametrize("argv", [["hint"], ["hint", "--json"], ["devices"], ["hint", "--help"], ["--version"],
                                  ["sweep", "--tokens", "1:3000"], ["layout", "--svg", "-"]])
@pytest.mark.parametrize("target", ["closed", "full"])
def test_stdout_closed_or_full_is_one_line_and_status_2(argv, target, tmp_path):
    nodes = make_device_nodes(tmp_path / "dev", ("full",))  # a /dev/full of the test's own
    if target == "full" and "full" not in nodes:
        pytest.skip("cannot make a device node here")
    if target == "closed":
        done = subprocess.run(CLI + argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: os.close(1))
    else:
        with open(nodes["full"], "w") as full:
            done = subprocess.run(CLI + argv, stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert ("standard output is closed" if target == "closed" else "No space left on device") in done.stderr


def test_a_closed_pipe_is_not_an_error():
    with subprocess.Popen(CLI + ["sweep", "--tokens", "1:20000", "--backends", "ascend"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as proc:
        proc.stdout.read(100)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0 and err == ""


def test_files_still_written_when_stdout_is_closed(tmp_path):
    csv = tmp_path / "s.csv"
    done = subprocess.run(CLI + ["sweep", "--quiet", "--csv", str(csv)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.close(1))
    assert done.returncode == 0 and done.stderr == "" and csv.read_text().startswith("backend,")


# --- progress -------------------------------------------------------------------------
class Tty(io.StringIO):
    def isatty(self):
        return True


def test_a_sweep_longer_than_a_second_shows_progress_on_a_terminal(capsys, monkeypatch):
    clock = iter(range(0, 10_000, 2))  # each look at the clock: 2 s later
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    stderr = Tty()
    monkeypatch.setattr(sys, "stderr", stderr)
    code, out, _ = run(capsys, "sweep", "--tokens", "1:15000", "--backends", "ascend,deepep-v2", "--json")
    text = stderr.getvalue()
    assert code == 0 and out.startswith("{")
    assert "\r\x1b[Kepbuf sweep: 10,000 of 30,000 configurations  33 %" in text and text.endswith("\r\x1b[K")


def test_no_progress_when_quick_or_not_a_terminal(capsys, monkeypatch):
    code, _, err = run(capsys, "sweep", "--tokens", "1:15000", "--backends", "ascend", "--json")
    assert code == 0 and err == ""  # not a terminal
    stderr = Tty()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(time, "monotonic", lambda: 0.0)  # no time passes: under a second
    code, _, _ = run(capsys, "sweep", "--tokens", "1:15000", "--backends", "ascend", "--json")
    assert code == 0 and stderr.getvalue() == ""


# --- random command lines -------------------------------------------------------------
def _parsers(engines: bool) -> dict[str, argparse.ArgumentParser]:
    """Every command's parser as the CLI builds them; with ``engines``, each engine's on its own
    (EPBUF_FUZZ_ENGINES=0 leaves them out)."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    # `serve` runs until interrupted (its bad input is tested in tests/test_serve_*.py).
    parsers = {name: p for name, p in sub.choices.items() if name != "serve"}
    if engines:
        parsers.update({f"engine {name}": build_engine_parser(name) for name in ENGINES})
    return parsers


def _options(parser: argparse.ArgumentParser) -> list[tuple[str, bool, tuple, str]]:
    """``(option, takes a value, choices, dest)`` of every optional argument."""
    out = []
    for action in parser._actions:
        for option in action.option_strings:
            if option in ("-h", "--help", "--version"):
                continue
            out.append((option, action.nargs != 0, tuple(action.choices or ()), action.dest))
    return out


OUTPUT_DESTS = {"csv", "svg", "plot", "save_routing"}

# Values an option of that kind would take: they get the command past parsing, into the library.
PLAUSIBLE = ["1", "2", "4", "6", "8", "16", "32", "64", "128", "256", "512", "1024", "4096", "7168", "5120", "2048",
             "deepseek-v3", "qwen3-235b-a22b", "kimi-k2", "h200", "h100", "910b", "mi300x", "8GiB", "40GiB", "4G",
             "10%", "25%", "8,16", "64:8192:*2", "1:8", "fp8,bf16", "main", "ll0", "refactor", "2026-07"]

HOSTILE = [
    "", " ", "-", "--", "0", "1", "-1", "2", "8", "16", "32", "64", "256", "4096", "7168", "131072", "2147483647",
    "2147483648", "-2147483649", "9" * 400, "1" + "0" * 4400, "1_000", "1__0", "0x10", "1e3", "1.5", "-0", "+8",
    "²", "٣", "１２", "𝟖", "nan", "NaN", "inf", "-inf", "1e400", "1e100000000", "1e-400", "8GiB", "4G", "4g", "-1GiB",
    "10%", "0%", "150%", "nan%", "1e5000%", "80GB", "3e9", "74.51GiB", "0.5B", "deepseek-v3", "kimi-k2", "h200", "a3",
    "mi300x", "ascend", "deepep-v2", "deepep-ll", "ascend,deepep-v2", ",", "a,b", "1:8", "8:1", "1:100000",
    "1:10:0", "1:64:*2", "1:64:*1", "8,16,32", "fp8,bf16", "bf16", "int4", "{}", '{"a": 1}', "[" * 5000, '{"a":' * 3000,
    "NAME=VALUE", "=1", "MORI_SHMEM_HEAP_SIZE=-1", "MORI_SHMEM_HEAP_SIZE=1e400", "NVSHMEM_SYMMETRIC_SIZE=²",
    "VLLM_DEEPEP_BUFFER_SIZE_MB=99999999999999999999", "dev/null", "dev/zero", "dev/full", "dev/urandom",
    "/nonexistent/folder/x", ".", "hello world", "ü", "\x00", "\t", "-5", "--json", "IntraNode", "internode", "main",
    "ll0", "refactor", "dd758ca", "0" * 40, "fp8_blockwise", "efa", "rocm",
]
# dev/...: device nodes _fuzz makes in its folder (the working directory), never the machine's /dev
OUTPUTS = ["out.csv", "out.svg", "out.png", "out.pdf", "out.jpg", "out", "-", "dev/null", "dev/full",
           "/nonexistent/folder/x.csv", ".", "", "sub/x.svg", "ünï.svg"]


def _argv(rng: random.Random, parsers: dict, options: dict, inputs: list[str]) -> list[str]:
    names = list(parsers)
    command = rng.choice(names)
    argv = command.split()
    if command == "engine":  # the engine names, then anything
        argv.append(rng.choice(list(ENGINES) + HOSTILE))
    for _ in range(rng.randint(0, 6)):
        roll = rng.random()
        if roll < 0.05 or not options[command]:
            argv.append(rng.choice(HOSTILE + ["--bogus", "-x"]))  # free text where an option belongs
            continue
        option, takes_value, choices, dest = rng.choice(options[command])
        argv.append(option)
        if not takes_value:
            continue
        if dest in OUTPUT_DESTS:
            argv.append(rng.choice(OUTPUTS))
        elif dest in ("model_config", "routing_file", "deepep_config") and rng.random() < 0.5:
            argv.append(rng.choice(inputs))
        elif choices and rng.random() < 0.5:
            argv.append(str(rng.choice(choices)))
        elif rng.random() < 0.5:
            argv.append(rng.choice(PLAUSIBLE))
        else:
            argv.append(rng.choice(HOSTILE))
    # Keep each case quick: fit and sweep over all backends are the slow paths.
    if command in ("fit", "sweep") and "--backends" not in argv:
        argv += ["--backends", rng.choice(["ascend", "deepep-v2", "deepep-ll", "mori-ep,pplx", "uccl-ep"])]
    return argv


def _fuzz(tmp_path, monkeypatch, seed: int, cases: int, seconds: float, engines: bool = False,
          keep_going: bool = False) -> tuple[int, list]:
    """Feed up to ``cases`` random command lines (or ``seconds`` of them) to main(); returns how
    many ran and the failures (with ``keep_going``; else the first one raises). Each must end
    with status 0, 1 or 2 and no exception; a status-2 error is one line."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(epbuf.sweep, "MAX_CONFIGURATIONS", 2000)  # the cap itself is tested elsewhere
    (tmp_path / "sub").mkdir()
    make_device_nodes(tmp_path / "dev")  # where they cannot be made, the names are missing files
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "cfg.json").write_text('{"hidden_size": 4096, "n_routed_experts": 64, "num_experts_per_tok": 6}')
    (tmp_path / "bad.json").write_text('{"hidden_size": "x"' + "[" * 3000)
    (tmp_path / "r.npy").write_bytes(b"\x93NUMPY garbage")
    inputs = [str(tmp_path / n) for n in ("fifo", "cfg.json", "bad.json", "r.npy", "sub", "missing.json")] + \
        ["dev/zero", "dev/urandom", "dev/null", ""]
    parsers = _parsers(engines)
    options = {name: _options(p) for name, p in parsers.items()}
    rng = random.Random(seed)
    deadline = time.monotonic() + seconds
    done, failures, codes = 0, [], {}
    while done < cases and time.monotonic() < deadline:
        argv = _argv(rng, parsers, options, inputs)
        out, err = io.StringIO(), io.StringIO()
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err
        try:
            try:
                code = main(argv)
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 2
            except BaseException as error:  # noqa: BLE001 - any escape is the bug this test looks for
                raise AssertionError(f"main({argv!r}) raised {type(error).__name__}: {error}") from error
            finally:
                sys.stdout, sys.stderr = saved
            text = err.getvalue()
            codes[code] = codes.get(code, 0) + 1
            assert code in (0, 1, 2), (argv, code, text)
            assert "Traceback" not in text, (argv, text)
            if code == 2 and text:
                assert text.count("\n") == 1 and text.endswith("\n"), (argv, text)
        except AssertionError as failure:
            if not keep_going:
                raise
            failures.append((argv, failure))
        done += 1
    if keep_going:
        print("exit statuses:", codes)
    return done, failures


def test_random_command_lines_end_with_a_status_not_a_traceback(tmp_path, monkeypatch):
    """Thousands of command lines from the real option names, with hostile values (empty, huge,
    negative, unicode digits, nan/inf, 400- and 4,400-digit numbers, devices, FIFOs, missing
    folders) and free text: every one ends with exit status 0, 1 or 2, never a traceback; an
    error is one line. Seeded, so a failure names the same command line again; bounded in time
    (EPBUF_FUZZ_CASES / EPBUF_FUZZ_SECONDS run a longer campaign)."""
    cases = int(os.environ.get("EPBUF_FUZZ_CASES", "3000"))
    seconds = float(os.environ.get("EPBUF_FUZZ_SECONDS", "25"))
    done, _ = _fuzz(tmp_path, monkeypatch, seed=int(os.environ.get("EPBUF_FUZZ_SEED", "9")), cases=cases,
                    seconds=seconds, engines=os.environ.get("EPBUF_FUZZ_ENGINES", "1") == "1")
    assert done >= min(cases, 500)
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".epbuf-")]  # no temporary file left behind


# --- the final audit's exact inputs ----------------------------------------------------
@pytest.mark.parametrize("argv, needle", [
    # An empty list, backend list or output name was silently the default (all backends, no file).
    (["sweep", "--tokens", ""], "argument --tokens: '' is empty"),
    (["sweep", "--hidden", ""], "argument --hidden: '' is empty"),
    (["sweep", "--topk", ""], "argument --topk: '' is empty"),
    (["sweep", "--experts", ""], "argument --experts: '' is empty"),
    (["sweep", "--ranks", ""], "argument --ranks: '' is empty"),
    (["sweep", "--backends", ""], "argument --backends: '' is empty"),
    (["sweep", "--csv", ""], "argument --csv: '' is empty"),
    (["sweep", "--csv", " "], "argument --csv: ' ' is empty"),
    (["compare", "--backends", ""], "argument --backends: '' is empty"),
    (["fit", "--budget", "1GiB", "--backends", ""], "argument --backends: '' is empty"),
    (["simulate", "--plot", ""], "argument --plot: '' is empty"),
    (["simulate", "--save-routing", ""], "argument --save-routing: '' is empty"),
    (["layout", "--svg", " "], "argument --svg: ' ' is empty"),
    # An infinite link made the time estimate 0 ms and the benchmark accounting 0.0 GB/s.
    (["simulate", "--nvlink-gbps", "inf"], "--nvlink-gbps (nvlink_gbps) = inf: allowed a finite number >= 1e-06"),
    (["simulate", "--rdma-gbps", "1e400"], "--rdma-gbps (rdma_gbps) = inf: allowed a finite number >= 1e-06"),
    (["simulate", "--latency-us", "inf"], "--latency-us (latency_us) = inf: allowed a finite number >= 0"),
    # 20+ digits: the line said "allowed an integer >= 1" of a value that is one.
    (["engine", "vllm", "--data-parallel-size", "1" + "0" * 400], "; at most 2^63-1 (64-bit)"),
    (["engine", "vllm", "--max-num-batched-tokens", "9" * 20], "; at most 2^63-1 (64-bit)"),
    # An empty text flag was read as "not fp8" / "no group buffers".
    (["engine", "vllm", "--quantization", ""], "--quantization = '': allowed a non-empty value"),
    (["engine", "mindspeed", "--hccl-group-buffer", " "], "--hccl-group-buffer = ' ': allowed a non-empty value"),
])
def test_audit_inputs_are_one_line_and_status_2(capsys, tmp_path, monkeypatch, argv, needle):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli_whole(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, (code, err)
    assert list(tmp_path.iterdir()) == []  # no file named ' ' or '' written


def _simulate_routing_file(capsys, path) -> tuple[int, str]:
    code, out, err = run_cli_whole(capsys, "simulate", "--routing-file", str(path))
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    return code, err


def test_npy_whose_header_promises_more_than_the_file_holds(capsys, tmp_path):
    """The header of a 1-element array edited to say 99,999,999,999 elements: numpy allocated
    745 GiB (MemoryError traceback); now the file is mapped and found short."""
    np = pytest.importorskip("numpy")
    path = tmp_path / "huge.npy"
    np.save(path, np.zeros((1,), dtype=np.int64))
    path.write_bytes(path.read_bytes().replace(b"(1,)", b"(99999999999,)"))
    code, err = _simulate_routing_file(capsys, path)
    assert code == 2 and "shape [99999999999], expected [ranks, tokens, top-k]" in err  # the header alone
    # a shape the options allow, in a file too short for it: mapped and found short
    np.save(path, np.zeros((8, 2, 8), dtype=np.int64))
    path.write_bytes(path.read_bytes().replace(b"(8, 2, 8)", b"(8, 2, 99999999)"))
    code, err = _simulate_routing_file(capsys, path)
    assert code == 2 and "the file is shorter than the array its header describes" in err


def test_empty_pt_file_is_one_line(capsys, tmp_path):
    """torch's error for an empty file has no message: the first line of it was an IndexError."""
    pytest.importorskip("torch")
    path = tmp_path / "empty.pt"
    path.write_bytes(b"")
    code, err = _simulate_routing_file(capsys, path)
    assert code == 2 and "not a torch file (EOFError)" in err


def test_routing_file_that_is_a_fifo_or_folder_is_named_so(capsys, tmp_path):
    pytest.importorskip("numpy")
    os.mkfifo(tmp_path / "fifo.npy")
    (tmp_path / "dir.npy").mkdir()
    for name in ("fifo.npy", "dir.npy"):
        code, err = _simulate_routing_file(capsys, tmp_path / name)
        assert code == 2 and "not a regular file" in err  # was "no such file"
