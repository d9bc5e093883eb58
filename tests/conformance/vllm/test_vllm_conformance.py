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


def test_corpus_size():
    assert len(LINES) >= 45


def test_option_list_is_the_release():
    """epbuf's list of vLLM 0.33.0's ``vllm serve`` options (abbreviations, flags that exist) is the
    installed parser's."""
    from epbuf.engines import _vllm_flags
    from epbuf.engines.installed import vllm as installed

    assert installed.serve_options() == _vllm_flags.OPTIONS
