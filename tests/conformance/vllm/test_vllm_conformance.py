"""vLLM 0.33.0's own code against ``epbuf engine vllm --json`` on every line of :mod:`vllm_corpus`.

For each line, :func:`epbuf.engines.installed.resolve` runs vLLM's parser, ``create_engine_config`` and
MoE prepare/finalize set-up with the GPU parts stood in for, capturing the EP library calls; the same
line goes through ``epbuf engine vllm --json -- LINE``. Compared, argument by argument: whether a
buffer is built at all (and 0 B when not), the number of handles, DeepEP ``Buffer``'s ``num_nvl_bytes``
and ``num_rdma_bytes``, the low-latency size hint's (T, hidden, ranks, experts), ``ElasticBuffer``'s
arguments, and vLLM's resolved ``max_num_batched_tokens``. Differences fail unless listed in
:data:`EXCEPTIONS` with the reason (docs/guides/conformance.md).
"""

from __future__ import annotations

import json
import shlex

import pytest

from _cli_run import run_cli
from vllm_corpus import LINES, UCCL_LINES

from epbuf.engines.installed import compare, resolve

#: (line, argument) -> why epbuf's answer differs from the engine's and stays so.
EXCEPTIONS: dict = {}


@pytest.fixture(scope="module")
def tally(tally_for):
    return tally_for("vllm", EXCEPTIONS)


def _split(line: str) -> tuple[dict, list[str]]:
    words = shlex.split(line)
    env = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[0] == "vllm"
    return env, words


@pytest.mark.parametrize("line", LINES)
def test_line(tally, capsys, line):
    env, words = _split(line)
    found = resolve("vllm", words, env)
    code, out, err = run_cli(capsys, "engine", "vllm", "--json", "--", *shlex.split(line))
    assert code == 0, err
    bad = [f"{name}: vLLM {engine!r}, epbuf {epbuf!r}" for name, engine, epbuf in compare(found, json.loads(out))
           if not tally.compare(line, name, engine, epbuf)]
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("line", UCCL_LINES)
def test_uccl_drop_in_line(tally, capsys, line):
    """The same lines with UCCL-EP's drop-in as vLLM's ``deep_ep``: vLLM's call is the same, the library's
    size hint is UCCL-EP's."""
    env, words = _split(line)
    found = resolve("vllm", words, env, uccl=True)
    code, out, err = run_cli(capsys, "engine", "vllm", "--uccl-ep", "--json", "--", *shlex.split(line))
    assert code == 0, err
    label = f"[uccl-ep] {line}"
    bad = [f"{name}: vLLM {engine!r}, epbuf {epbuf!r}" for name, engine, epbuf in compare(found, json.loads(out))
           if not tally.compare(label, name, engine, epbuf)]
    assert not bad, "; ".join(bad)


#: Lines on a per-tensor FP8 Qwen3-MoE checkpoint (``quant_method: fp8`` without ``weight_block_size``),
#: read from a local folder by both: vLLM takes ``--quantization fp8`` from it and quantizes activations
#: per tensor (MORI: one scale per token; DeepEP dispatches BF16).
PER_TENSOR_FP8 = [
    "vllm serve {qwen3_fp8} -dp 8 --enable-expert-parallel --all2all-backend deepep_low_latency",
    "vllm serve {qwen3_fp8} -dp 8 --enable-expert-parallel --all2all-backend deepep_high_throughput "
    "--max-num-batched-tokens 4096",
    "vllm serve {qwen3_fp8} -dp 8 --enable-expert-parallel --all2all-backend deepep_v2",
    "vllm serve {qwen3_fp8} -dp 8 --enable-expert-parallel --all2all-backend mori_high_throughput "
    "--max-num-batched-tokens 1024",
    "vllm serve {qwen3_fp8} -dp 16 --enable-expert-parallel --all2all-backend mori_low_latency "
    "--max-num-batched-tokens 512",
]


@pytest.fixture(scope="module")
def qwen3_fp8(tmp_path_factory) -> str:
    """A per-tensor FP8 Qwen3-30B-A3B config.json, written by transformers' own config class."""
    from transformers import Qwen3MoeConfig

    config = Qwen3MoeConfig()
    config.architectures = ["Qwen3MoeForCausalLM"]
    config.quantization_config = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    folder = tmp_path_factory.mktemp("models") / "qwen3-fp8-per-tensor"
    config.save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize("template", PER_TENSOR_FP8)
def test_per_tensor_fp8_checkpoint_line(tally, capsys, qwen3_fp8, template):
    line = template.format(qwen3_fp8=qwen3_fp8)
    env, words = _split(line)
    found = resolve("vllm", words, env)
    assert found["resolved"].get("activation_quant") == "fp8-tensor", found["resolved"]
    code, out, err = run_cli(capsys, "engine", "vllm", "--json", "--", *shlex.split(line))
    assert code == 0, err
    bad = [f"{name}: vLLM {engine!r}, epbuf {epbuf!r}" for name, engine, epbuf in compare(found, json.loads(out))
           if not tally.compare(template, name, engine, epbuf)]
    assert not bad, "; ".join(bad)


def test_corpus_size():
    assert len(LINES) + len(UCCL_LINES) >= 45


def test_option_list_is_the_release():
    """epbuf's list of vLLM 0.33.0's ``vllm serve`` options (abbreviations, flags that exist) is the
    installed parser's."""
    from epbuf.engines import _vllm_flags
    from epbuf.engines.installed import vllm as installed

    assert installed.serve_options() == _vllm_flags.OPTIONS


def test_comparison_catches_a_difference(capsys):
    """The comparison can fail: vLLM's capture of one line against epbuf's report of another."""
    env, words = _split(LINES[0])
    found = resolve("vllm", words, env)
    other = LINES[0].replace("-dp 16", "-dp 8")
    code, out, err = run_cli(capsys, "engine", "vllm", "--json", "--", *shlex.split(other))
    differ = {name for name, engine, epbuf in compare(found, json.loads(out)) if engine != epbuf}
    assert {"group size", "hint num_ranks"} <= differ


def test_from_installed_agrees_on_the_issue_line(capsys):
    code, out, err = run_cli(capsys, "engine", "vllm", "--from-installed", "--json", "--", *shlex.split(LINES[0]))
    assert code == 0, err
    rep = json.loads(out)
    codes = {f["code"] for f in rep["report"]["findings"]}
    assert rep["num_bytes"] == 4_924_115_232 and "engine.installed-agrees" in codes
    assert "engine.installed-differs" not in codes


def test_from_installed_reports_a_difference_as_a_finding(capsys):
    """epbuf's own flag (--max-num-batched-tokens before --) changes the recipe, not the engine's line."""
    code, out, err = run_cli(capsys, "engine", "vllm", "--from-installed", "--json", "--max-num-batched-tokens", "512",
                             "--", *shlex.split(LINES[0]))
    assert code == 0, err
    differs = [f for f in json.loads(out)["report"]["findings"] if f["code"] == "engine.installed-differs"]
    assert {f["data"]["argument"] for f in differs} >= {"max_num_batched_tokens", "hint T"}


def test_from_installed_with_a_model_it_cannot_stand_in_for_keeps_the_recipe(capsys):
    code, out, err = run_cli(capsys, "engine", "vllm", "--from-installed", "--json", "--model", "deepseek-v3", "--",
                             "vllm", "serve", "some/unknown-model", "-dp", "16", "--enable-expert-parallel",
                             "--all2all-backend", "deepep_low_latency")
    assert code == 0, err
    rep = json.loads(out)
    mismatch = [f for f in rep["report"]["findings"] if f["code"] == "engine.installed-unavailable"]
    assert len(mismatch) == 1 and "\n" not in mismatch[0]["message"] and rep["num_bytes"] == 4_924_115_232
    assert mismatch[0]["data"] == {"engine": "vllm", "reason": "stand-ins"} and "some/unknown-model" in \
        mismatch[0]["message"]


@pytest.mark.parametrize("device", ["b200", "a100-80gb"])
def test_from_installed_tells_vllm_the_device(capsys, device):
    """``--device`` reaches the installed vLLM's platform stand-in: its batch default follows the GPU's
    memory and name as the recipe's does (B200 16384 tokens, A100 2048)."""
    code, out, err = run_cli(capsys, "engine", "vllm", "--from-installed", "--json", "--device", device, "--",
                             "vllm", "serve", "deepseek-ai/DeepSeek-V3", "-dp", "16", "--enable-expert-parallel",
                             "--all2all-backend", "deepep_high_throughput")
    assert code == 0, err
    findings = json.loads(out)["report"]["findings"]
    codes = {f["code"] for f in findings}
    assert "engine.installed-agrees" in codes and "engine.installed-differs" not in codes, \
        [f["message"] for f in findings]


def test_from_installed_reports_vllms_own_refusal_in_one_finding(capsys):
    """vLLM 0.33.0 refuses tensor parallel 3 for DeepSeek-V3's 128 heads (a pydantic ValidationError
    from ``VllmConfig``): one ``engine.installed-refuses`` warning with vLLM's reason, no traceback."""
    code, out, err = run_cli(capsys, "engine", "vllm", "--from-installed", "--json", "--", "vllm", "serve",
                             "deepseek-ai/DeepSeek-V3", "-dp", "2", "-tp", "3", "--enable-expert-parallel",
                             "--all2all-backend", "deepep_low_latency")
    assert code == 0, err
    findings = json.loads(out)["report"]["findings"]
    (refused,) = [f for f in findings if f["code"] == "engine.installed-refuses"]
    assert "divisible by tensor parallel size (3)" in refused["message"] and "\n" not in refused["message"]
    assert "Traceback" not in err
