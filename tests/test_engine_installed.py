"""``--from-installed`` where the engine is not installed (the main suite's environment), and the
stand-alone parts of the resolvers (dispatch, one-line errors, SGLang's option table); the runs against the installed engines are in
``tests/conformance/``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from _cli_run import run_cli

from epbuf.engines._sglang_launch import OPTIONS, expand, with_defaults
from epbuf.engines.installed import InstalledMismatch, compare, stand_in_errors, title
from epbuf.errors import EpbufError, InvalidArgumentError


def test_installed_package_imports_with_the_standard_library_only():
    code = ("import sys, epbuf.engines.installed, epbuf.engines.installed.sglang, epbuf.engines.installed.megatron, "
            "epbuf.engines.installed.vllm; "
            "print(sorted(m for m in ('torch', 'numpy', 'sglang', 'megatron', 'vllm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


LINES = {"vllm": ["vllm", "serve", "deepseek-ai/DeepSeek-V3", "-dp", "16", "--enable-expert-parallel",
                  "--all2all-backend", "deepep_low_latency"],
         "sglang": ["python", "-m", "sglang.launch_server", "--tp", "8", "--moe-a2a-backend", "deepep"],
         "megatron": ["torchrun", "pretrain_gpt.py", "--expert-model-parallel-size", "8",
                      "--moe-token-dispatcher-type", "flex"]}


@pytest.mark.parametrize("engine", sorted(LINES))
def test_from_installed_without_the_engine_keeps_the_recipe(capsys, monkeypatch, engine):
    """One behaviour for every engine: one warning line naming the engine, the recipe's answer and exit status."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.split(".")[0] in ("vllm", "sglang", "megatron") else real(name, *a))
    code, out, _ = run_cli(capsys, "engine", engine, "--json", "--", *LINES[engine])
    plain = json.loads(out)
    code2, out2, err2 = run_cli(capsys, "engine", engine, "--from-installed", "--json", "--", *LINES[engine])
    rep = json.loads(out2)
    assert code == code2 == 0 and err2 == "" and rep["num_bytes"] == plain["num_bytes"] > 0
    (finding,) = [f for f in rep["report"]["findings"] if f["code"].startswith("engine.installed")]
    assert finding["code"] == "engine.installed-unavailable" and finding["severity"] == "warning"
    assert finding["data"] == {"engine": engine, "reason": "not-installed"}
    assert "is not installed" in finding["message"] and "\n" not in finding["message"]
    assert finding["message"].startswith(f"--from-installed: {title(engine)} ")
    code3, out3, _ = run_cli(capsys, "engine", engine, "--from-installed", "--", *LINES[engine])
    assert code3 == 0 and sum("is not installed" in line for line in out3.splitlines()) == 1


def test_compare_dispatches_on_the_engine_that_answered():
    """``installed.compare`` picks the engine module's comparison from ``found["engine"]`` (no engine needed:
    a capture without EP calls against a report with a buffer differs on the count)."""
    rep = {"num_bytes": 5, "report": {"inputs": {}, "quantities": {}, "buffers": [], "findings": []}, "settings": []}
    assert compare({"engine": "megatron", "calls": [], "resolved": {}}, rep) == [("DeepEP buffers built", 0, 1)]
    assert compare({"engine": "vllm", "calls": [], "resolved": {}}, rep) == [
        ("buffer built", False, True), ("num_bytes without a buffer", 0, 5)]
    with pytest.raises(EpbufError, match="vllm, sglang, megatron"):
        compare({"engine": "trtllm", "calls": []}, rep)


def test_stand_in_errors_are_one_line(monkeypatch):
    monkeypatch.delenv("EPBUF_INSTALLED_TRACEBACK", raising=False)
    with pytest.raises(InstalledMismatch) as caught:
        with stand_in_errors("sglang"):
            raise TypeError("__init__() got an unexpected keyword argument 'x'\nmore")
    assert str(caught.value).startswith("the installed SGLang ") and "no longer fits epbuf's stand-ins (TypeError: " \
        "__init__() got an unexpected keyword argument 'x')" in str(caught.value)


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
