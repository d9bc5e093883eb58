"""``--from-installed`` where the engine is not installed (the main suite's environment), and the
stand-alone parts of the SGLang / Megatron resolvers; the runs against the installed engines are in
``tests/conformance/``."""

from __future__ import annotations

import json
import subprocess
import sys

from _cli_run import run_cli

from epbuf.engines._sglang_launch import OPTIONS, expand, with_defaults
from epbuf.errors import InvalidArgumentError


def test_installed_package_imports_with_the_standard_library_only():
    code = ("import sys, epbuf.engines.installed, epbuf.engines.installed.sglang, epbuf.engines.installed.megatron; "
            "print(sorted(m for m in ('torch', 'numpy', 'sglang', 'megatron') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_from_installed_without_the_engine_keeps_the_recipe(capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.split(".")[0] in ("sglang", "megatron") else real(name, *a))
    for engine, line in (("sglang", ["python", "-m", "sglang.launch_server", "--tp", "8", "--moe-a2a-backend", "deepep"]),
                         ("megatron", ["torchrun", "pretrain_gpt.py", "--expert-model-parallel-size", "8",
                                       "--moe-token-dispatcher-type", "flex"])):
        code, out, _ = run_cli(capsys, "engine", engine, "--json", "--", *line)
        plain = json.loads(out)
        code2, out2, _ = run_cli(capsys, "engine", engine, "--from-installed", "--json", "--", *line)
        rep = json.loads(out2)
        assert code == code2 == 0 and rep["num_bytes"] == plain["num_bytes"] > 0
        (finding,) = [f for f in rep["report"]["findings"] if f["code"].startswith("engine.installed")]
        assert finding["code"] == "engine.installed-unavailable" and "is not installed" in finding["message"]


def test_from_installed_needs_a_launch_line(capsys):
    code, out, err = run_cli(capsys, "engine", "sglang", "--from-installed", "--tp-size", "8")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "launch line" in err


def test_sglang_abbreviations_and_defaults():
    """SGLang's parser takes a prefix naming one option (``--moe-a2a`` -> ``--moe-a2a-backend``) and refuses
    one naming several; exact options and values are kept; a line without ``--moe-a2a-backend`` builds none."""
    assert "moe-a2a-backend" in OPTIONS and "deepep-mode" in OPTIONS
    assert expand(["--moe-a2a=deepep", "--deepep-mo", "normal", "--tp-size", "8", "x"]) == [
        "--moe-a2a-backend=deepep", "--deepep-mode", "normal", "--tp-size", "8", "x"]
    try:
        expand(["--deepep", "auto"])
    except InvalidArgumentError as error:
        assert "ambiguous" in str(error) and "--deepep-mode" in str(error)
    else:
        raise AssertionError("an ambiguous abbreviation was accepted")
    assert with_defaults(["--tp-size", "8"]) == ["--tp-size", "8", "--moe-a2a-backend", "none"]
    assert with_defaults(["--moe-a2a-backend", "mori"]) == ["--moe-a2a-backend", "mori"]


def test_launch_lines_without_an_ep_backend_total_zero(capsys):
    for engine, line in (("sglang", ["python", "-m", "sglang.launch_server", "--model-path", "deepseek-ai/DeepSeek-V3",
                                     "--tp", "16"]),
                         ("megatron", ["torchrun", "pretrain_gpt.py", "--expert-model-parallel-size", "16"])):
        code, out, _ = run_cli(capsys, "engine", engine, "--json", "--", *line)
        rep = json.loads(out)
        assert code == 0 and rep["num_bytes"] == 0 and rep["report"]["buffers"] == []
        assert any(f["code"] in ("sglang.no-deepep", "megatron.no-deepep") for f in rep["report"]["findings"])
