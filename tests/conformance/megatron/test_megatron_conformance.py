"""megatron-core 0.16.1's own code against ``epbuf engine megatron --engine-version 0.16.1 --json`` on a corpus
of launch lines (run by ``.ci/conformance`` in ``.conformance/megatron``, built by ``requirements.sh``).

Each line's flags build megatron-core's ``TransformerConfig``; its ``_DeepepManager`` and
``fused_a2a.get_buffer`` run with a stand-in ``deep_ep`` (:mod:`epbuf.engines.installed.megatron`), and
every captured argument is compared with epbuf's report. A difference fails unless :data:`EXCEPTIONS`
lists the line with its reason. Writes ``.conformance/results/megatron.json``.
"""

from __future__ import annotations

import json
import sys

from _cli_run import run_cli  # noqa: E402  (tests/ is on the path through tests/conftest.py)

from epbuf.engines.installed import compare, resolve

LAUNCH = ["torchrun", "--nproc-per-node", "8", "pretrain_gpt.py"]
DSV3 = "--hidden-size 7168 --num-experts 256 --moe-router-topk 8"
QWEN3 = "--hidden-size 4096 --num-experts 128 --moe-router-topk 8"

#: (id, flags after the training script)
CORPUS = [
    ("flex-ep16", f"{DSV3} --expert-model-parallel-size 16 --moe-token-dispatcher-type flex"),
    ("flex-ep8", f"{DSV3} --expert-model-parallel-size 8 --moe-token-dispatcher-type flex"),
    ("flex-ep32", f"{DSV3} --expert-model-parallel-size 32 --moe-token-dispatcher-type flex"),
    ("flex-ep64", f"{DSV3} --expert-model-parallel-size 64 --moe-token-dispatcher-type flex"),
    ("flex-tp2-ep8", f"{DSV3} --tensor-model-parallel-size 2 --expert-model-parallel-size 8 "
                     "--moe-token-dispatcher-type flex --disable-bias-linear"),
    ("flex-tp4-etp1-ep16", f"{DSV3} --tensor-model-parallel-size 4 --expert-tensor-parallel-size 1 "
                           "--expert-model-parallel-size 16 --moe-token-dispatcher-type flex"),
    ("flex-sms24", f"{DSV3} --expert-model-parallel-size 16 --moe-token-dispatcher-type flex --moe-deepep-num-sms 24"),
    ("flex-sms32-ep32", f"{DSV3} --expert-model-parallel-size 32 --moe-token-dispatcher-type flex "
                        "--moe-deepep-num-sms 32"),
    ("flex-hybridep-sms", f"{DSV3} --expert-model-parallel-size 16 --moe-token-dispatcher-type flex "
                          "--moe-hybridep-num-sms 32"),
    ("flex-qwen3-ep8", f"{QWEN3} --expert-model-parallel-size 8 --moe-token-dispatcher-type flex"),
    ("flex-qwen3-ep16-sms16", f"{QWEN3} --expert-model-parallel-size 16 --moe-token-dispatcher-type flex "
                              "--moe-deepep-num-sms 16"),
    ("flex-equals", f"{DSV3} --expert-model-parallel-size=16 --moe-token-dispatcher-type=flex "
                    "--moe-flex-dispatcher-backend=deepep"),
    ("alltoall", f"{DSV3} --expert-model-parallel-size 16 --moe-token-dispatcher-type alltoall"),
    ("default-allgather", f"{DSV3} --expert-model-parallel-size 16"),
]

#: ``(line id, argument) -> reason`` of known differences (each must still differ: a stale entry fails).
EXCEPTIONS: dict[tuple[str, str], str] = {}


def test_megatron_corpus(capsys, tally_for):
    tally, failures = tally_for("megatron", EXCEPTIONS), []
    for line_id, flags in CORPUS:
        installed = resolve("megatron", flags.split(), {})
        code, out, err = run_cli(capsys, "engine", "megatron", "--engine-version", "0.16.1", "--json", "--",
                                 *LAUNCH, *flags.split())
        assert code in (0, 1), err
        assert "refused" not in installed["resolved"], (line_id, installed["resolved"])
        failures += [f"{line_id}: {n}: megatron-core {a!r}, epbuf {b!r}"
                     for n, a, b in compare(installed, json.loads(out)) if not tally.compare(line_id, n, a, b)]
    assert not failures + tally.stale(), "\n".join(failures + tally.stale())


def test_from_installed(capsys):
    """``--from-installed``: megatron-core 0.16.1 sizes DeepEP with --moe-deepep-num-sms only, so with
    ``--moe-hybridep-num-sms 32`` the ``main`` recipe (which routes it to DeepEP) differs in num_sms and both
    byte counts, and the 0.16.1 recipe agrees."""
    line = [*LAUNCH, *DSV3.split(), "--expert-model-parallel-size", "16", "--moe-token-dispatcher-type", "flex",
            "--moe-hybridep-num-sms", "32"]
    code, out, _ = run_cli(capsys, "engine", "megatron", "--from-installed", "--json", "--", *line)
    differs = {f["data"]["argument"] for f in json.loads(out)["report"]["findings"]
               if f["code"] == "engine.installed-differs"}
    assert differs == {"num_sms", "num_nvl_bytes", "num_rdma_bytes"}
    code, out, _ = run_cli(capsys, "engine", "megatron", "--engine-version", "0.16.1", "--from-installed", "--json",
                           "--", *line)
    assert "engine.installed-agrees" in {f["code"] for f in json.loads(out)["report"]["findings"]}


def test_from_installed_when_megatron_no_longer_fits_the_stand_ins(capsys, monkeypatch):
    """A release that renamed what the resolver calls: one warning line, the recipe's answer stands."""
    line = [*LAUNCH, *DSV3.split(), "--expert-model-parallel-size", "16", "--moe-token-dispatcher-type", "flex"]
    resolve("megatron", line[4:], {})  # megatron-core imported
    monkeypatch.delattr(sys.modules["megatron.core.transformer.moe.fused_a2a"], "get_hidden_bytes")
    code, out, _ = run_cli(capsys, "engine", "megatron", "--json", "--", *line)
    plain = json.loads(out)
    code2, out, _ = run_cli(capsys, "engine", "megatron", "--from-installed", "--json", "--", *line)
    rep = json.loads(out)
    (finding,) = [f for f in rep["report"]["findings"] if f["code"].startswith("engine.installed")]
    assert code == code2 == 0 and rep["num_bytes"] == plain["num_bytes"] > 0
    assert finding["code"] == "engine.installed-unavailable" and finding["data"]["reason"] == "stand-ins"
    assert "get_hidden_bytes" in finding["message"] and "\n" not in finding["message"]
