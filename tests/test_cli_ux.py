"""Issue 12 (a new user's day with the CLI): each test runs the command the issue names and checks
the behaviour a user expects. Issue 9's CLI items (signals, stdout, progress) are in
test_cli_hostile.py."""

from __future__ import annotations

import json

import pytest

from epbuf.devices import DEVICES
from epbuf.placement import BACKEND_VENDORS, DEVICE_BACKENDS
from epbuf.plan import backend_names

from _cli_run import run_cli as run, run_cli_whole  # tests/_cli_run.py (conftest puts tests/ on the path)


def one_line_error(code: int, out: str, err: str) -> bool:
    return code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err


def body(out: str) -> str:
    """A command's text after its verdict (the first two lines and a blank one, tests/test_columns.py)."""
    lines = out.splitlines(keepends=True)
    assert lines[0].startswith("verdict: ") and lines[2] == "\n", lines[:3]
    return "".join(lines[3:])


def flat(text: str) -> str:
    """Text without its line wrapping (findings and cells wrap at the terminal width)."""
    return " ".join(text.split())


# --- the backend follows the hardware -------------------------------------------------
def test_every_backend_and_device_vendor_has_a_placement():
    assert set(BACKEND_VENDORS) == set(backend_names())
    assert {d.vendor for d in DEVICES.values()} == set(DEVICE_BACKENDS)
    assert all(v in BACKEND_VENDORS[b] for v, b in DEVICE_BACKENDS.items())


@pytest.mark.parametrize(("device", "backend"), [("h200", "deepep-v2"), ("b200", "deepep-v2"), ("910b", "ascend"),
                                                 ("ascend-a3", "ascend"), ("mi300x", "mori-ep")])
def test_the_device_chooses_the_backend_and_says_so(capsys, device, backend):
    code, out, _ = run(capsys, "hint", "--model", "deepseek-v3", "--ranks", "64", "--device", device, "--json")
    data = json.loads(out)
    chosen = [f for f in data["findings"] if f["code"] == "device.backend-chosen"]
    assert code == 0 and data["backend"] == backend and chosen and chosen[0]["data"]["backend"] == backend
    code, out, _ = run(capsys, "hint", "--model", "deepseek-v3", "--ranks", "64", "--device", device)
    assert code == 0 and f"backend {backend} chosen for the" in flat(out)


def test_readme_first_example_sizes_deepep_v2_on_an_h200(capsys):
    code, out, _ = run(capsys, "hint", "--model", "deepseek-v3", "--ranks", "64", "--device", "h200")
    assert code == 0 and body(out).startswith("DeepEP V2 EPBuffer (refactor") and "DeepEP-Ascend" not in out


def test_without_device_the_default_backend_is_unchanged(capsys):
    code, out, _ = run(capsys, "hint", "--json")
    data = json.loads(out)
    assert code == 0 and data["backend"] == "ascend" and not [f for f in data["findings"]
                                                               if f["code"].startswith("device.")]


def test_a_backend_contradicting_the_device_is_a_warning(capsys):
    code, out, _ = run(capsys, "hint", "--backend", "ascend", "--device", "h200", "--json")
    (warning,) = [f for f in json.loads(out)["findings"] if f["code"] == "device.backend-mismatch"]
    assert code == 0 and warning["severity"] == "warning" and warning["data"]["suggested"] == "deepep-v2"
    code, out, _ = run(capsys, "hint", "--backend", "uccl-ep", "--device", "mi300x", "--json")
    assert code == 0 and not [f for f in json.loads(out)["findings"] if f["code"].startswith("device.")]


def test_compare_marks_the_backends_that_cannot_run_on_the_device(capsys):
    argv = ("compare", "--model", "deepseek-v3", "--ranks", "16", "--tokens", "256", "--device", "h200")
    code, out, _ = run(capsys, *argv)
    rows = {}
    for line in out.splitlines():
        if line.strip() and line.split()[0] in backend_names():
            rows.setdefault(line.split()[0], line)
    on_device = {name: row.split()[-1] for name, row in rows.items()}  # the last column of the first table
    assert code == 0 and on_device["ascend"] == on_device["mori-ep"] == "no" and on_device["deepep-v2"] == "yes"
    assert "ascend runs on Huawei Ascend NPUs; mori-ep runs on AMD GPUs" in flat(out)
    code, out, _ = run(capsys, *argv, "--json")
    data = json.loads(out)
    assert data["device"]["runs_on"] == {b: b not in ("ascend", "mori-ep") for b in backend_names()}
    assert "device.backend-mismatch" in [f["code"] for f in data["backends"]["ascend"]["findings"]]


def test_fit_marks_the_backends_that_cannot_run_on_the_device(capsys):
    code, out, _ = run(capsys, "fit", "--model", "deepseek-v3", "--ranks", "16", "--device", "910b",
                       "--backends", "ascend,deepep-v2", "--json")
    assert code == 0 and json.loads(out)["device"]["runs_on"] == {"ascend": True, "deepep-v2": False}


def test_simulate_follows_the_device_too(capsys):
    pytest.importorskip("numpy")
    code, out, _ = run(capsys, "simulate", "--ranks", "8", "--topk", "8", "--tokens", "16", "--device", "h800")
    assert code == 0 and body(out).startswith("backend deepep-v2 chosen for NVIDIA H800")


# --- options for another backend ------------------------------------------------------
@pytest.mark.parametrize("argv", [
    ("--backend", "ascend", "--backend-version", "ll0"),
    ("--backend", "ascend", "--deepep-version", "ll0"),
    ("--backend", "deepep-ll", "--no-hybrid"),
    ("--backend", "deepep-v1", "--single-reduction"),
    ("--backend", "deepep-ll", "--no-nvlink"),
    ("--backend", "deepep-v2", "--num-sms", "24"),
    ("--backend", "deepep-v2", "--sf-packs", "56"),
    ("--backend", "ascend", "--bf16", "--sf-packs", "5"),
    ("--backend", "ascend", "--sf-packs", "0"),
    ("--backend", "deepep-v2", "--nic", "efa"),
    ("--backend", "uccl-ep", "--per-expert-batching"),
    ("--backend", "deepep-ll", "--platform", "rocm"),
    ("--backend", "ascend", "--kernel-type", "IntraNode"),
    ("--backend", "pplx", "--max-total-recv-tokens", "8"),
    ("--backend", "deepep-v2", "--quant-type", "fp8_blockwise"),
    ("--backend", "mori-ep", "--dp-group-size", "2"),
    ("--backend", "deepep-ll", "--num-scale-bytes", "224"),
    ("--backend", "uccl-ll", "--max-token-type-size", "1"),
    ("--backend", "deepep-v2", "--env", "MORI_SHMEM_HEAP_SIZE=8G"),
    ("--backend", "mori-ep", "--topk-idx-bits", "32"),
    ("--device", "h200", "--sf-packs", "56"),  # the device chose deepep-v2
])
def test_options_of_another_backend_are_refused_in_one_line(capsys, argv):
    code, out, err = run(capsys, "hint", *argv)
    assert one_line_error(code, out, err), err
    option = next(a for a in argv if a.startswith("--") and a not in ("--backend", "--device", "--bf16"))
    assert option.replace("--deepep-version", "--backend-version") in err


def test_the_refusal_names_where_the_backend_came_from(capsys):
    _, _, err = run_cli_whole(capsys, "hint", "--device", "h200", "--no-hybrid", "--kernel-type", "IntraNode")
    assert "chosen for NVIDIA H200" in err and "--kernel-type" in err
    _, _, err = run_cli_whole(capsys, "hint", "--backend", "deepep-ll", "--no-hybrid")
    assert "only deepep-v2 reads --no-hybrid; the backend is deepep-ll" in err


@pytest.mark.parametrize("argv", [
    ("--backend", "deepep-v2", "--no-hybrid", "--single-reduction", "--no-nvlink", "--backend-version", "2026-07"),
    ("--backend", "ascend", "--sf-packs", "120"),
    ("--backend", "uccl-ll", "--per-expert-batching", "--nic", "efa", "--platform", "rocm"),
    ("--backend", "mori-ep", "--quant-type", "fp8_blockwise", "--max-total-recv-tokens", "8",
     "--env", "MORI_SHMEM_HEAP_SIZE=8G", "--kernel-type", "IntraNode"),
    ("--backend", "pplx", "--dp-group-size", "2", "--num-scale-bytes", "224"),
    ("--backend", "deepep-v1", "--num-sms", "24", "--topk-idx-bits", "32", "--backend-version", "main"),
])
def test_options_of_the_chosen_backend_are_accepted(capsys, argv):
    code, _, err = run(capsys, "hint", *argv)
    assert code == 0 and err == ""


def test_compare_refuses_options_none_of_its_backends_reads(capsys):
    assert run(capsys, "compare", "--no-hybrid")[0] == 0  # deepep-v2 is among all backends
    code, out, err = run_cli_whole(capsys, "compare", "--backends", "ascend,deepep-ll", "--no-hybrid")
    assert one_line_error(code, out, err) and "none of ascend, deepep-ll reads it" in err
    code, out, err = run(capsys, "fit", "--budget", "8GiB", "--backends", "pplx", "--quant-type", "fp8_blockwise")
    assert one_line_error(code, out, err) and "--quant-type" in err


# --- say when it does not fit ---------------------------------------------------------
ISSUE_H100 = ("hint", "--backend", "deepep-v2", "--model", "deepseek-v3", "--ranks", "64", "--tokens", "131072",
              "--device", "h100")


def test_a_plan_over_the_device_memory_is_an_error_finding_and_strict_fails(capsys):
    code, out, _ = run(capsys, *ISSUE_H100)
    assert code == 0 and "176.75 %" in out and "DOES NOT FIT" in out and "[device.over-capacity]" in flat(out)
    assert run(capsys, *ISSUE_H100, "--strict")[0] == 1
    code, out, _ = run(capsys, *ISSUE_H100, "--json")
    data = json.loads(out)
    assert data["device"]["fits"] is False and "device.over-capacity" in [f["code"] for f in data["findings"]]
    assert run(capsys, "hint", "--model", "deepseek-v3", "--ranks", "64", "--device", "h200", "--strict")[0] == 0


def test_a_plan_over_the_budget_is_an_error_finding(capsys):
    code, out, _ = run(capsys, "hint", "--budget", "256MiB", "--json")
    data = json.loads(out)
    assert code == 0 and data["budget"] == {"num_bytes": 256 << 20, "share": data["num_bytes"] / (256 << 20),
                                            "fits": False}
    assert "budget.exceeded" in [f["code"] for f in data["findings"]]
    assert run(capsys, "hint", "--budget", "256MiB", "--strict")[0] == 1
    assert run(capsys, "hint", "--budget", "1G", "--strict")[0] == 0


@pytest.mark.parametrize(("budget", "num_bytes"), [("4G", 4 << 30), ("4g", 4 << 30), ("4GB", 4 * 10**9),
                                                   ("10%", 150754820096 // 10), ("12.5%", 150754820096 // 8)])
def test_budget_accepts_sizes_and_shares_of_the_device(capsys, budget, num_bytes):
    code, out, _ = run(capsys, "hint", "--device", "h200", "--budget", budget, "--json")
    assert code == 0 and json.loads(out)["budget"]["num_bytes"] == num_bytes
    code, out, _ = run(capsys, "fit", "--device", "h200", "--budget", budget, "--backends", "ascend", "--json")
    assert code == 0 and json.loads(out)["budget"] == num_bytes


@pytest.mark.parametrize("argv", [("--budget", "10%"), ("--device", "h200", "--budget", "0%"),
                                  ("--device", "h200", "--budget", "150%"), ("--budget", "-1GiB"),
                                  ("--budget", "0"), ("--budget", "x%"), ("--budget", "")])
def test_bad_budgets_are_one_line(capsys, argv):
    for command in ("hint", "fit"):
        assert one_line_error(*run(capsys, command, *argv))


def test_fit_with_a_device_has_a_default_budget(capsys):
    code, out, _ = run(capsys, "fit", "--model", "deepseek-v3", "--device", "h200", "--ranks", "16", "--json")
    data = json.loads(out)
    assert code == 0 and data["budget"] == 150754820096 // 10 and "10 %" in data["budget_note"]
    code, out, _ = run(capsys, "fit", "--model", "deepseek-v3", "--device", "h200", "--ranks", "16")
    assert "(the default: 10 % of the 140.40 GiB of NVIDIA H200 (SXM)" in flat(out)
    code, out, err = run(capsys, "fit", "--model", "deepseek-v3")
    assert one_line_error(code, out, err) and "--budget" in err and "--device" in err


# --- models ---------------------------------------------------------------------------
def test_model_config_flags_fill_the_keys_the_file_lacks(capsys, tmp_path):
    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"hidden_size": 4096, "model_type": "toy"}))
    code, out, _ = run(capsys, "hint", "--model-config", str(config), "--topk", "8", "--experts", "128", "--json")
    inputs = json.loads(out)["inputs"]
    assert code == 0 and (inputs["hidden"], inputs["num_topk"], inputs["num_experts"]) == (4096, 8, 128)
    code, out, err = run_cli_whole(capsys, "hint", "--model-config", str(config), "--topk", "8")
    assert one_line_error(code, out, err) and "--experts" in err


def test_a_config_file_without_a_name_is_named_by_its_file_or_folder(capsys, tmp_path):
    """Without _name_or_path: the folder of a config.json (a checkout), else the file itself,
    not the folder a cfg.json was saved in."""
    shape = {"hidden_size": 4096, "num_experts_per_tok": 8, "n_routed_experts": 128}
    (tmp_path / "MyMoE").mkdir()
    (tmp_path / "MyMoE" / "config.json").write_text(json.dumps(shape))
    (tmp_path / "cfg.json").write_text(json.dumps(shape))
    _, out, _ = run(capsys, "hint", "--model-config", str(tmp_path / "MyMoE"), "--json")
    assert json.loads(out)["inputs"]["model"] == "MyMoE"
    _, out, _ = run(capsys, "hint", "--model-config", str(tmp_path / "cfg.json"), "--json")
    assert json.loads(out)["inputs"]["model"] == "cfg.json"


@pytest.mark.parametrize("option", ["--model-config", "--hbm", "--device", "--model", "--backend-version"])
@pytest.mark.parametrize("value", ["", "   "])
def test_empty_values_are_refused(capsys, option, value):
    code, out, err = run(capsys, "hint", option, value)
    assert one_line_error(code, out, err) and option in err and "empty" in err


@pytest.mark.parametrize("option", ["--model-config", "--hbm", "--device", "--model"])
def test_empty_values_are_refused_by_engine_too(capsys, option):
    assert one_line_error(*run(capsys, "engine", "vllm", option, ""))


# --- topology -------------------------------------------------------------------------
def test_nodes_and_ranks_derive_gpus_per_node(capsys):
    code, out, _ = run(capsys, "hint", "--backend", "deepep-v2", "--nodes", "4", "--ranks", "16", "--json")
    inputs = json.loads(out)["inputs"]
    assert code == 0 and (inputs["num_ranks"], inputs["num_ranks_per_node"]) == (16, 4)
    code, out, err = run(capsys, "hint", "--nodes", "3", "--ranks", "16")
    assert one_line_error(code, out, err) and "not a multiple" in err
    code, out, err = run(capsys, "hint", "--nodes", "4", "--ranks", "16", "--gpus-per-node", "8")
    assert one_line_error(code, out, err) and "= 32 ranks, but --ranks is 16" in err


# --- small ----------------------------------------------------------------------------
def test_sweep_quiet_without_an_output_file_is_refused(capsys):
    code, out, err = run(capsys, "sweep", "--quiet")
    assert one_line_error(code, out, err) and "--csv" in err
    code, out, _ = run(capsys, "sweep", "--quiet", "--json")
    assert code == 2


def test_the_share_of_hbm_does_not_repeat_itself(capsys):
    code, out, _ = run(capsys, "hint", "--hbm", "80000000000")
    (line,) = [x for x in out.splitlines() if x.startswith("Share of")]
    assert code == 0 and line == "Share of the 74.51 GiB of --hbm: 0.45 %"


def test_layout_svg_refuses_another_format(capsys, tmp_path):
    code, out, err = run(capsys, "layout", "--svg", str(tmp_path / "map.png"))
    assert one_line_error(code, out, err) and "SVG" in err and not (tmp_path / "map.png").exists()


def test_readme_installs_extras_from_a_checkout():
    import pathlib

    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    assert "pip install 'epbuf[" not in readme
    for extra in ("plot", "sim", "torch", "test"):
        assert f"'.[{extra}]'" in readme


# --- SVG byte maps --------------------------------------------------------------------
SVG_PLANS = [(b, r) for b in backend_names() for r in ("8", "32")]


def _svg_texts(svg: str):
    import re
    from xml.sax.saxutils import unescape

    for m in re.finditer(r"<text x='([\d.]+)' y='[\d.]+' font-size='(\d+)' text-anchor='(\w+)'[^>]*>([^<]*)</text>", svg):
        yield float(m.group(1)), int(m.group(2)), m.group(3), unescape(m.group(4))


@pytest.mark.parametrize(("backend", "ranks"), SVG_PLANS)
def test_every_byte_map_parses_fits_the_page_and_has_its_slot_grids(capsys, tmp_path, backend, ranks):
    """Every backend's map is well-formed SVG, no label runs past the page, every region with a
    slot shape (or arrays of records) gets its grid, and a real renderer draws it."""
    import xml.etree.ElementTree as ET

    from epbuf import svg as svg_module
    from epbuf.plan import Plan, report

    path = tmp_path / "map.svg"
    code, _, err = run(capsys, "layout", "--backend", backend, "--model", "deepseek-v3", "--ranks", ranks,
                       "--tokens", "256", "--svg", str(path))
    assert code == 0 and err == ""
    text = path.read_text()
    root = ET.fromstring(text)
    width = float(root.get("width"))
    for x, size, anchor, content in _svg_texts(text):
        w = svg_module._width(content, size)
        left, right = {"start": (x, x + w), "end": (x - w, x), "middle": (x - w / 2, x + w / 2)}[anchor]
        assert left >= 0 and right <= width + 1, (content, x, w)
    rep = report(Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=int(ranks), num_max_tokens_per_rank=256,
                      model="DeepSeek-V3"), backend)
    gridded = [r for b in rep.buffers for r in b.regions if r.shape or r.arrays]
    if backend in ("ascend", "deepep-v2", "deepep-v1", "deepep-ll", "uccl-ep", "uccl-ll") or \
            (backend == "pplx" and ranks == "32"):
        assert gridded, backend
    for region in gridded:
        names = [f"{region.name} / {a.name}:" for a in region.arrays] or [f"{region.name}:"]
        assert all(n in text for n in names), names
    cairosvg = pytest.importorskip("cairosvg")
    png = cairosvg.svg2png(bytestring=text.encode())
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_slot_shapes_match_the_region_bytes():
    """A region's slot grid covers it exactly: rows x slots divides the bytes, and the record a
    slot holds fits in the slot; arrays of records tile their region in order."""
    from epbuf.plan import Plan, report

    for backend in backend_names():
        for ranks in (8, 32):
            rep = report(Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=ranks,
                              num_max_tokens_per_rank=256), backend)
            records = {r.name: r for r in rep.records}
            for region in (r for b in rep.buffers for r in b.regions):
                if region.shape:
                    rows, slots = region.shape
                    assert region.num_bytes % (rows * slots) == 0, (backend, region.name)
                    if region.record:
                        assert records[region.record].num_bytes <= region.num_bytes // (rows * slots)
                end = 0
                for a in region.arrays:
                    assert a.offset >= end and a.num_bytes == a.shape[0] * a.shape[1] * records[a.record].num_bytes
                    end = a.offset + a.num_bytes
                assert end <= region.num_bytes


# --- shell completion -----------------------------------------------------------------
def _bash_complete(script: str, *words: str) -> list[str]:
    """COMPREPLY of the generated bash function for the command line ``words`` (the last
    one being completed), in a bash subprocess that sourced the script."""
    import shlex
    import subprocess

    line = " ".join(shlex.quote(w) for w in ("epbuf",) + words)
    probe = (f"source {shlex.quote(script)}\nCOMP_WORDS=({line})\nCOMP_CWORD={len(words)}\n_epbuf\n"
             'printf "%s\\n" "${COMPREPLY[@]}"\n')
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout.split()


def test_bash_completion_completes_commands_options_and_values(capsys, tmp_path):
    import shutil

    if shutil.which("bash") is None:
        pytest.skip("no bash")
    code, out, _ = run(capsys, "completion", "bash")
    script = tmp_path / "epbuf.bash"
    script.write_text(out)
    assert code == 0 and "complete -o default -F _epbuf epbuf" in out
    assert _bash_complete(str(script), "hi") == ["hint"]
    assert _bash_complete(str(script), "co") == ["compare", "completion"]
    assert _bash_complete(str(script), "hint", "--dev") == ["--device"]
    assert _bash_complete(str(script), "hint", "--device", "h2") == ["h20", "h200"]
    assert _bash_complete(str(script), "hint", "--backend", "deepep-") == ["deepep-v2", "deepep-v1", "deepep-ll"]
    assert _bash_complete(str(script), "sweep", "--pl") == ["--plot"]
    assert _bash_complete(str(script), "engine", "vllm-a") == ["vllm-ascend"]
    assert "--all2all-backend" in _bash_complete(str(script), "engine", "vllm", "--all")
    assert _bash_complete(str(script), "engine", "vllm", "--all2all-backend", "deepep_l") == ["deepep_low_latency"]
    assert _bash_complete(str(script), "completion", "--h") == ["--help"]


def test_zsh_completion_defines_and_registers_the_function(capsys, tmp_path):
    import shutil
    import subprocess

    if shutil.which("zsh") is None:
        pytest.skip("no zsh")
    code, out, _ = run(capsys, "completion", "zsh")
    script = tmp_path / "_epbuf"
    script.write_text(out)
    # compadd / _files exist only inside a completion widget: stand-ins print what would be offered.
    probe = (f"autoload -U compinit; compinit -u -d {tmp_path}/zcompdump; source {script}\n"
             "print -r -- ${_comps[epbuf]}\n"
             "compadd() { [[ $1 == -- ]] && shift; print -r -- \"$@\" }\n_files() { print FILES }\n"
             "words=(epbuf hint --device ''); CURRENT=4; _epbuf\n"
             "words=(epbuf sweep --csv ''); CURRENT=4; _epbuf\n"
             "words=(epbuf engine ''); CURRENT=3; _epbuf\n")
    done = subprocess.run(["zsh", "-f", "-c", probe], capture_output=True, text=True, timeout=30)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines[0] == "_epbuf", done.stderr
    assert "h200" in lines[1].split() and lines[2] == "FILES" and "vllm-ascend" in lines[3].split()


def test_completion_knows_every_command_and_option():
    """The scripts come from the parsers: every command, every option of each."""
    from epbuf.cli import COMMANDS
    from epbuf.cli.completion import bash_script, commands, zsh_script

    table = commands()
    assert set(COMMANDS) <= set(table) and "engine sglang" in table
    bash, zsh = bash_script(), zsh_script()
    for options, _, _ in table.values():
        for option in options:
            assert option in bash and option in zsh


# --- output people can read -----------------------------------------------------------
WIDE_COMMANDS = [
    ("hint",), ("hint", "--model", "deepseek-v3", "--ranks", "64", "--device", "h200"),
    ("hint", "--backend", "mori-ep", "--ranks", "32"), ("hint", "--backend", "uccl-ep", "--ranks", "32", "--verbose"),
    ("hint", "--hidden", "7000", "--ranks", "300"), ("hint", "--backend", "deepep-v1", "--ranks", "32", "--verbose"),
    ("devices",), ("models",), ("layout", "--backend", "deepep-v2"), ("compare", "--device", "h200"),
    ("fit", "--device", "h200"), ("sweep", "--tokens", "1:3", "--ranks", "8,24"),
    ("engine", "vllm", "--model", "deepseek-v3", "-dp", "16", "--enable-expert-parallel"),
    ("engine", "vllm", "--model", "glm-4.5", "--ranks", "16", "--all2all-backend", "deepep_low_latency",
     "--enable-eplb", "--eplb-config", '{"num_redundant_experts": 288}', "--max-num-batched-tokens", "2048"),
    ("engine", "sgl-kernel-npu", "--model", "deepseek-v3", "--ranks", "16", "--deepep-mode", "low_latency"),
]


@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize("argv", WIDE_COMMANDS)
def test_text_fits_the_terminal_width(capsys, monkeypatch, argv, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, _ = run(capsys, *argv)
    longest = max(out.splitlines(), key=len)
    assert code == 0 and len(longest) <= columns, longest


def test_without_a_terminal_text_wraps_at_100_columns(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, _ = run(capsys, "hint", "--model", "deepseek-v3", "--ranks", "64", "--device", "h200")
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 100


def test_wide_and_verbose_show_the_sources_and_json_stays_complete(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    _, out, _ = run(capsys, "hint")
    assert "[csrc/buffers/ep.hpp:581-605]" not in out and "--verbose lists" in flat(out)
    _, out, _ = run(capsys, "hint", "--wide")
    assert "EP buffer = max of the regions (they reuse the memory), aligned to 2.00 MiB   [csrc/buffers/ep.hpp:581-605]" \
        in out.splitlines()
    _, out, _ = run(capsys, "hint", "--verbose")
    assert "[csrc/buffers/ep.hpp:581-605]" in flat(out)
    _, out, _ = run(capsys, "devices")
    assert "nvidia-smi" not in out and "--wide" in flat(out)
    _, out, _ = run(capsys, "devices", "--wide")
    assert "nvidia-smi memory.total" in out and "150,754,820,096" in out
    _, out, _ = run(capsys, "devices", "--json")
    assert all(d["source"] for d in json.loads(out)["devices"])
    _, out, _ = run(capsys, "models", "--wide")
    assert "config.json" in out
    _, out, _ = run(capsys, "models", "--json")
    assert all(m["source"] for m in json.loads(out)["models"])


def test_sweep_says_the_constant_axes_once(capsys):
    code, out, _ = run(capsys, "sweep", "--tokens", "1:3", "--ranks", "8,24", "--backends", "ascend")
    lines = body(out).splitlines()
    assert code == 0 and lines[0] == "every row: hidden 7,168, top-k 6, experts 256, dtype FP8"
    assert lines[1].split()[:3] == ["backend", "ranks", "tokens"]
    code, out, _ = run(capsys, "sweep", "--tokens", "1:3", "--backends", "ascend", "--wide")
    assert body(out).splitlines()[0].split()[:3] == ["backend", "hidden", "top-k"]


def test_one_note_is_singular(capsys):
    """Issue 12: "(1 notes" reads "(1 note; --verbose shows it)"."""
    from epbuf.engines import report
    from epbuf.render import render_engine_report

    for engine, expected in (("mindspeed", 1), ("vllm", 6)):  # one note, several (FP8 dispatch: no bf16-slots note)
        rep = report(engine, model="deepseek-v3", num_ranks=8 if engine == "mindspeed" else 16)
        notes = [f for f in rep.report.findings if f.severity == "info"]
        text = render_engine_report(rep)
        assert len(notes) == expected
        if len(notes) == 1:
            assert "(1 note; --verbose shows it)" in text
        else:
            assert f"({len(notes)} notes; --verbose shows them)" in text
        assert "(1 notes" not in text


# --- typos get the nearest name ----------------------------------------------------------
@pytest.mark.parametrize(("argv", "suggestion"), [
    (("hnit",), "did you mean hint?"),
    (("hint", "--backend", "depep-ll"), "did you mean deepep-ll?"),
    (("hint", "--backend", "deepep-v3"), "did you mean deepep-v2?"),
    (("engine", "vlm"), "did you mean vllm?"),
    (("completion", "bsh"), "did you mean bash?"),
    (("hint", "--modle", "deepseek-v3"), "did you mean --model?"),
    (("hint", "--devce=h200"), "did you mean --device?"),
    (("fit", "--budegt", "4GiB"), "did you mean --budget?"),
    (("engine", "vllm", "--all2all-backend", "deepep_lowlatency"), "did you mean deepep_low_latency?"),
    (("hint", "--model", "deepsek-v3"), "did you mean deepseek-v3,"),
    (("hint", "--device", "h2000"), "did you mean h200"),
])
def test_a_misspelt_name_gets_the_nearest_one(capsys, argv, suggestion):
    code, out, err = run(capsys, *argv)
    assert one_line_error(code, out, err) and suggestion in err, err


@pytest.mark.parametrize("argv", [("hint", "--backend", "xyz"), ("hint", "--dtype", "fp8"), ("engine", "qqq"),
                                  ("versions", " "), ("hint", "")])
def test_nothing_near_is_not_suggested(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert one_line_error(code, out, err) and "did you mean" not in err, err


def test_versions_wraps_at_the_terminal_width_and_wide_keeps_lines_whole(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "versions")
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 80
    assert "  refactor (default): EPBuffer @ 1a1ffbac1f:" in out
    code, wide, _ = run(capsys, "versions", "--wide")
    assert code == 0 and flat(wide) == flat(out) and max(len(line) for line in wide.splitlines()) > 80


def test_text_findings_put_errors_first(capsys):
    """Text output lists errors, then warnings, then notes (each in the report's order), as the web
    page does; --json keeps the report's order."""
    code, out, _ = run(capsys, "layout", "--hidden", "7000")
    lines = [line.split(":")[0].strip() for line in out.splitlines() if line.startswith(("  error:", "  warning:",
                                                                                         "  info:"))]
    assert code == 0 and lines[:3] == ["error", "error", "warning"]
    code, out, _ = run(capsys, "layout", "--hidden", "7000", "--json")
    order = [f["severity"] for f in json.loads(out)["findings"]]
    assert order.index("warning") < len(order) - 1 - order[::-1].index("error")  # an error after a warning
