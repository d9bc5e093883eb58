"""SGLang 0.5.23's own code against ``epbuf engine sglang --engine-version 0.5.23 --json`` on a corpus of
launch lines (run by ``.ci/conformance`` in ``.conformance/sglang``, built by ``requirements.sh``).

Each line goes through SGLang's parser, resolution pipeline and MoE dispatcher down to the EP library
(:mod:`epbuf.engines.installed.sglang`, one subprocess per device) and through epbuf's recipe; every
captured argument is compared with the report. A difference fails unless :data:`EXCEPTIONS` lists the
line with its reason. Writes ``.conformance/results/sglang.json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


from _cli_run import run_cli  # noqa: E402  (tests/ is on the path through tests/conftest.py)

from epbuf.engines.installed import compare

LAUNCH = ["python", "-m", "sglang.launch_server"]
V2_TOKENS = "SGLANG_DEEPEP_V2_NUM_MAX_DISPATCH_TOKENS_PER_RANK"
#: UCCL's SGLang scripts' DeepEP config (``ep/bench/sglang/common_deepep_config.sh``), as one word.
DEEPEP_CONFIG = json.dumps({k: {"num_sms": 24, "num_max_nvl_chunked_send_tokens": 16,
                                "num_max_nvl_chunked_recv_tokens": 512, "num_max_rdma_chunked_send_tokens": 16,
                                "num_max_rdma_chunked_recv_tokens": 512} for k in ("normal_dispatch", "normal_combine")},
                           separators=(",", ":"))

#: (id, device, launch words after the program with {dsv3} / {dsv3_bf16} / {qwen3} / {qwen3_fp8} for the
#: model folders, environment)
CORPUS = [
    ("deepep-auto-tp16", "h100", "--model-path {dsv3} --tp 16 --moe-a2a-backend deepep", {}),
    ("deepep-auto-tp8", "h100", "--model-path {dsv3} --tp 8 --moe-a2a-backend deepep", {}),
    ("deepep-normal-tp16", "h100", "--model-path {dsv3} --tp 16 --moe-a2a-backend deepep --deepep-mode normal", {}),
    ("deepep-normal-tp8", "h100", "--model-path {dsv3} --tp-size 8 --moe-a2a-backend=deepep --deepep-mode=normal", {}),
    ("deepep-ll-tp16", "h100", "--model-path {dsv3} --tp 16 --moe-a2a-backend deepep --deepep-mode low_latency", {}),
    ("deepep-ll-tp32", "h100", "--model-path {dsv3} --tp 32 --moe-a2a-backend deepep --deepep-mode low_latency", {}),
    ("deepep-ll-env-t256", "h100", "--model-path {dsv3} --tp 16 --moe-a2a-backend deepep --deepep-mode low_latency",
     {"SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "256"}),
    ("deepep-auto-env-t64", "h100", "--model-path {dsv3} --tp 8 --moe-a2a-backend deepep",
     {"SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "64"}),
    ("deepep-dp-attention", "h100", "--model-path {dsv3} --tp 16 --dp 16 --enable-dp-attention --moe-a2a-backend deepep", {}),
    ("deepep-dp8-tp8", "h100", "--model-path {dsv3} --tp 8 --dp-size 8 --enable-dp-attention --moe-a2a-backend deepep", {}),
    ("deepep-redundant", "h100", "--model-path {dsv3} --tp 16 --moe-a2a-backend deepep --ep-num-redundant-experts 32", {}),
    ("deepep-tbo", "h100", "--model-path {dsv3} --tp 16 --moe-a2a-backend deepep --enable-two-batch-overlap", {}),
    ("deepep-bf16-model", "h100", "--model-path {dsv3_bf16} --tp 16 --moe-a2a-backend deepep", {}),
    ("deepep-qwen3-tp8", "h100", "--model-path {qwen3} --tp 8 --moe-a2a-backend deepep", {}),
    ("deepep-qwen3-ll", "h100", "--model-path {qwen3} --tp 8 --moe-a2a-backend deepep --deepep-mode low_latency", {}),
    ("deepep-qwen3-fp8-per-tensor", "h100", "--model-path {qwen3_fp8} --tp 8 --moe-a2a-backend deepep", {}),
    ("deepep-int8", "h100", "--model-path {dsv3_bf16} --tp 16 --moe-a2a-backend deepep --quantization w8a8_int8", {}),
    ("deepep-abbrev", "h100", "--model-path {dsv3} --tp 16 --moe-a2a deepep --deepep-mo normal", {}),
    ("none-default", "h100", "--model-path {dsv3} --tp 16", {}),
    ("deepep-ep-size-overridden", "h100", "--model-path {dsv3} --tp 16 --ep-size 8 --moe-a2a-backend deepep", {}),
    ("deepep-equals-tp", "h100", "--model-path={dsv3} --tp-size=32 --moe-a2a-backend=deepep --deepep-mode=low_latency", {}),
    ("deepep-config-json", "h100", "--model-path {dsv3} --tp 16 --moe-a2a-backend deepep --deepep-mode normal "
     "--deepep-config {deepep_config}", {}),
    ("deepep-enforce-fusion", "h100", "--model-path {dsv3} --tp 16 --moe-a2a-backend deepep --enforce-shared-experts-fusion", {}),
    ("deepep-online-fp8", "h100", "--model-path {dsv3_bf16} --tp 8 --moe-a2a-backend deepep --quantization fp8", {}),
    ("v2-default-refused", "h100", "--model-path {dsv3} --tp 8 --moe-a2a-backend deepep_v2", {}),
    ("v2-t1024", "h100", "--model-path {dsv3} --tp 8 --moe-a2a-backend deepep_v2", {V2_TOKENS: "1024"}),
    ("v2-bf16-hybrid", "h100", "--model-path {dsv3_bf16} --tp 16 --moe-a2a-backend deepep_v2 --deepep-v2-mode hybrid",
     {V2_TOKENS: "512"}),
    ("v2-decode-graph-refused", "h100", "--model-path {dsv3} --tp 8 --moe-a2a-backend deepep_v2 "
     "--chunked-prefill-size 2048", {V2_TOKENS: "256"}),
    ("v2-no-cuda-graph", "h100", "--model-path {dsv3} --tp 8 --moe-a2a-backend deepep_v2 --chunked-prefill-size 2048 "
     "--disable-cuda-graph", {V2_TOKENS: "256"}),
    ("v2-dp-attention", "h100", "--model-path {dsv3} --tp 16 --dp 16 --enable-dp-attention --moe-a2a-backend deepep_v2 "
     "--chunked-prefill-size 1024", {V2_TOKENS: "1024"}),
    ("v2-qwen3-fp8-per-tensor", "h100", "--model-path {qwen3_fp8} --tp 8 --moe-a2a-backend deepep_v2",
     {V2_TOKENS: "1024"}),
    ("v2-online-fp8", "h100", "--model-path {dsv3_bf16} --tp 8 --moe-a2a-backend deepep_v2 --quantization fp8",
     {V2_TOKENS: "1024"}),
    ("v2-int8", "h100", "--model-path {dsv3_bf16} --tp 8 --moe-a2a-backend deepep_v2 --quantization w8a8_int8",
     {V2_TOKENS: "1024"}),
    ("v2-dtype-contradicts", "h100", "--model-path {dsv3} --tp 8 --moe-a2a-backend deepep_v2 "
     "--deepep-dispatcher-output-dtype bf16", {V2_TOKENS: "1024"}),
    ("mori-auto-mi300x-refused", "mi300x", "--model-path {dsv3} --tp 8 --moe-a2a-backend mori", {}),
    ("mori-auto-tp8", "mi300x", "--model-path {dsv3} --tp 8 --moe-a2a-backend mori --chunked-prefill-size 4096", {}),
    ("mori-auto-tbo", "mi300x", "--model-path {dsv3} --tp 8 --moe-a2a-backend mori --chunked-prefill-size 4096 "
     "--enable-two-batch-overlap", {}),
    ("mori-normal-tp16", "mi300x", "--model-path {dsv3} --tp 16 --moe-a2a-backend mori --deepep-mode normal "
     "--chunked-prefill-size 4096", {}),
    ("mori-normal-tp16-ll-kernel", "mi300x", "--model-path {dsv3} --tp 16 --moe-a2a-backend mori "
     "--chunked-prefill-size 256", {"SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "256"}),
    ("mori-ll", "mi300x", "--model-path {dsv3} --tp 8 --moe-a2a-backend mori --deepep-mode low_latency "
     "--chunked-prefill-size 4096", {}),
    ("mori-ll-tbo", "mi300x", "--model-path {dsv3} --tp 8 --moe-a2a-backend mori --deepep-mode low_latency "
     "--chunked-prefill-size=2048 --enable-two-batch-overlap", {}),
    ("mori-bf16-model", "mi300x", "--model-path {dsv3_bf16} --tp 8 --moe-a2a-backend mori --chunked-prefill-size 4096", {}),
    ("mori-env-dispatch-bf16", "mi300x", "--model-path {dsv3} --tp 8 --moe-a2a-backend mori --chunked-prefill-size 4096",
     {"SGLANG_MORI_DISPATCH_DTYPE": "bf16"}),
    ("mori-env-combine-fp8", "mi300x", "--model-path {dsv3} --tp 8 --moe-a2a-backend mori --chunked-prefill-size 4096",
     {"SGLANG_MORI_COMBINE_DTYPE": "fp8"}),
    ("mori-sdma", "mi300x", "--model-path {dsv3} --tp 8 --moe-a2a-backend mori --chunked-prefill-size 4096",
     {"MORI_ENABLE_SDMA": "1"}),
    ("mori-recv-cap", "mi300x", "--model-path {dsv3} --tp 16 --moe-a2a-backend mori --deepep-mode normal "
     "--chunked-prefill-size 4096", {"SGLANG_MORI_PREALLOC_MAX_RECV_TOKENS": "8192"}),
    ("mori-decode-skips-check", "mi300x", "--model-path {dsv3} --tp 8 --moe-a2a-backend mori "
     "--disaggregation-mode decode", {}),
    ("mori-qwen3-fp8-per-tensor", "mi300x", "--model-path {qwen3_fp8} --tp 8 --moe-a2a-backend mori "
     "--chunked-prefill-size 4096", {}),
]

#: Known differences, with the reason (each must still differ: a stale entry fails, Tally.stale).
EXCEPTIONS: dict[tuple[str, str], str] = {}  # (line id, argument) -> reason


def _models(folder: Path) -> dict:
    """config.json of the corpus' models, written by transformers' own config classes (no downloads)."""
    from transformers import DeepseekV3Config, Qwen3MoeConfig

    block = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    per_tensor = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    out = {"deepep_config": DEEPEP_CONFIG}
    for name, cls, arch, quant in (("dsv3", DeepseekV3Config, "DeepseekV3ForCausalLM", block),
                                   ("dsv3_bf16", DeepseekV3Config, "DeepseekV3ForCausalLM", None),
                                   ("qwen3", Qwen3MoeConfig, "Qwen3MoeForCausalLM", None),
                                   ("qwen3_fp8", Qwen3MoeConfig, "Qwen3MoeForCausalLM", per_tensor)):
        config = cls()
        config.architectures = [arch]
        if quant is not None:
            config.quantization_config = quant
        config.save_pretrained(folder / name)
        out[name] = str(folder / name)
    return out


def _installed(lines: list[tuple], models: dict) -> dict:
    """``{id: resolved}`` from the installed SGLang, one subprocess per device."""
    out = {}
    for device in sorted({d for _, d, _, _ in lines}):
        batch = [(i, w, e) for i, d, w, e in lines if d == device]
        payload = json.dumps([{"argv": w.format(**models).split(), "env": e} for _, w, e in batch])
        proc = subprocess.run([sys.executable, str(Path(__file__).with_name("_drive.py")), device], input=payload,
                              capture_output=True, text=True, timeout=600)
        marker = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@RESULT@@")]
        assert marker, proc.stderr[-3000:]
        for (line_id, _, _), result in zip(batch, json.loads(marker[0][len("@@RESULT@@"):])):
            out[line_id] = result
    return out


def _epbuf(capsys, words: str, env: dict, device: str, models: dict) -> dict:
    argv = ["engine", "sglang", "--engine-version", "0.5.23", "--json", "--device", device, "--",
            *[f"{k}={v}" for k, v in env.items()], *LAUNCH, *words.format(**models).split()]
    code, out, err = run_cli(capsys, *argv)
    assert code in (0, 1), err
    return json.loads(out)


def test_sglang_corpus(tmp_path, capsys, tally_for):
    models = _models(tmp_path)
    installed = _installed(CORPUS, models)
    tally, failures = tally_for("sglang", EXCEPTIONS), []
    for line_id, device, words, env in CORPUS:
        pairs = compare(installed[line_id], _epbuf(capsys, words, env, device, models))
        failures += [f"{line_id}: {n}: SGLang {a!r}, epbuf {b!r}" for n, a, b in pairs
                     if not tally.compare(line_id, n, a, b)]
    assert not failures + tally.stale(), "\n".join(failures + tally.stale())


def test_launch_options_are_sglangs():
    """epbuf's table of SGLang's options (for the abbreviations its parser takes) is the installed parser's."""
    import argparse

    from epbuf.engines import _sglang_launch
    from epbuf.engines.installed import resolve as _resolve  # noqa: F401  (the stand-ins: SGLang imports on CPU)
    from epbuf.engines.installed._sglang_standins import Device, Recorder, install, patch_torch

    patch_torch(Device("NVIDIA H100", 80 * 2**30))
    install(Recorder())
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    assert _sglang_launch.OPTIONS == {s[2:] for s in parser._option_string_actions if s.startswith("--")}


def test_from_installed(tmp_path, capsys):
    """``--from-installed`` runs this line through the installed SGLang: with the 0.5.23 recipe it agrees;
    with ``main`` (param_bytes 1) it reports the NVL bytes that differ and names the matching release."""
    models = _models(tmp_path)
    line = [*LAUNCH, "--model-path", models["dsv3"], "--tp", "8", "--moe-a2a-backend", "deepep",
            "--deepep-mode", "normal"]
    code, out, _ = run_cli(capsys, "engine", "sglang", "--engine-version", "0.5.23", "--from-installed", "--json",
                           "--", *line)
    codes = {f["code"]: f for f in json.loads(out)["report"]["findings"]}
    assert code == 0 and codes["engine.installed-agrees"]["data"]["engine_version"] == "0.5.23"
    code, out, _ = run_cli(capsys, "engine", "sglang", "--from-installed", "--json", "--", *line)
    findings = json.loads(out)["report"]["findings"]
    differs = [f["data"] for f in findings if f["code"] == "engine.installed-differs"]
    assert [d["argument"] for d in differs] == ["num_nvl_bytes"] and differs[0]["installed"] > differs[0]["recipe"]
    assert any(f["code"] == "engine.installed-version" for f in findings)


def test_from_installed_when_sglang_no_longer_fits_the_stand_ins(tmp_path, capsys, monkeypatch):
    """A release that renamed what the resolver calls: one warning line, the recipe's answer stands."""
    models = _models(tmp_path)
    line = [*LAUNCH, "--model-path", models["dsv3"], "--tp", "8", "--moe-a2a-backend", "deepep"]
    code, out, _ = run_cli(capsys, "engine", "sglang", "--json", "--", *line)
    plain = json.loads(out)
    run_cli(capsys, "engine", "sglang", "--from-installed", "--json", "--", *line)  # SGLang imported
    monkeypatch.delattr(sys.modules["sglang.srt.server_args"], "prepare_server_args")
    code2, out, _ = run_cli(capsys, "engine", "sglang", "--from-installed", "--json", "--", *line)
    rep = json.loads(out)
    (finding,) = [f for f in rep["report"]["findings"] if f["code"].startswith("engine.installed")]
    assert code == code2 == 0 and rep["num_bytes"] == plain["num_bytes"] > 0
    assert finding["code"] == "engine.installed-unavailable" and finding["data"]["reason"] == "stand-ins"
    assert "prepare_server_args" in finding["message"] and "\n" not in finding["message"]
