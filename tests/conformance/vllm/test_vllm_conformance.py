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
from vllm_corpus import LINES

from epbuf.engines.installed import resolve

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
    return env, words[1:]


def _buffer(rep: dict, *names: str) -> int:
    return sum(b["num_bytes"] for b in rep["report"]["buffers"] if b["name"] in names)


def _setting(rep: dict, name: str):
    return next((s["value"] for s in rep["settings"] if s["name"] == name), None)


def _compare(tally, line: str, found: dict, rep: dict) -> list[str]:
    calls = found["calls"]
    handles = [c for c in calls if c["name"] in ("Buffer", "ElasticBuffer")]
    inputs = rep["report"]["inputs"]
    bad = []

    def check(name, engine, epbuf):
        if not tally.compare(line, name, engine, epbuf):
            bad.append(f"{name}: vLLM {engine!r}, epbuf {epbuf!r}")

    check("buffer built", bool(handles), rep["num_bytes"] > 0)
    if not handles:
        check("num_bytes without a buffer", 0, rep["num_bytes"])
        return bad
    check("handles", 1, len(handles))
    check("max_num_batched_tokens", found["resolved"]["max_num_batched_tokens"],
          _setting(rep, "--max-num-batched-tokens"))
    call = handles[0]
    args = call["args"]
    if call["name"] == "Buffer":
        check("num_nvl_bytes", args["num_nvl_bytes"], _buffer(rep, "NVL buffer"))
        check("num_rdma_bytes", args["num_rdma_bytes"], _buffer(rep, "LL RDMA buffer", "RDMA buffer"))
        check("low_latency_mode", args["low_latency_mode"], "num_max_dispatch_tokens_per_rank" in inputs)
        check("group size", args["group_size"], _setting(rep, "EP size"))
    hint = next((c["args"] for c in calls if c["name"].endswith("size_hint")), None)
    if hint is not None:
        check("hint T", hint["num_max_dispatch_tokens_per_rank"], inputs.get("num_max_dispatch_tokens_per_rank"))
        check("hint hidden", hint["hidden"], inputs.get("hidden"))
        check("hint num_ranks", hint["num_ranks"], inputs.get("num_ranks"))
        check("hint num_experts", hint["num_experts"], inputs.get("num_experts"))
    if call["name"] == "ElasticBuffer":
        for key in ("num_max_tokens_per_rank", "hidden", "num_topk", "use_fp8_dispatch", "allow_hybrid_mode",
                    "allow_multiple_reduction"):
            check(f"ElasticBuffer {key}", args[key], inputs.get(key))
        check("ElasticBuffer num_experts", found["resolved"]["num_experts"], inputs.get("num_experts", 0)
              + inputs.get("num_redundant_experts", 0))
    return bad


@pytest.mark.parametrize("line", LINES)
def test_line(tally, capsys, line):
    env, words = _split(line)
    found = resolve("vllm", words, env)
    code, out, err = run_cli(capsys, "engine", "vllm", "--json", "--", *shlex.split(line))
    assert code == 0, err
    bad = _compare(tally, line, found, json.loads(out))
    assert not bad, "; ".join(bad)


def test_corpus_size():
    assert len(LINES) >= 45


def test_option_list_is_the_release():
    """epbuf's list of vLLM 0.33.0's ``vllm serve`` options (abbreviations, flags that exist) is the
    installed parser's."""
    from epbuf.engines import _vllm_flags
    from epbuf.engines.installed import vllm as installed

    assert installed.serve_options() == _vllm_flags.OPTIONS
