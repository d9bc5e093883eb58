"""``epbuf serve``'s JSON API, through a live server and the standard library's HTTP client:
every answer equals the CLI's ``--json`` for the same options, bad input is a 4xx with one
line, and the limits (body size, sweep size, timeouts, connections, files, hosts) hold."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from _cli_run import run_cli_whole  # tests/_cli_run.py (conftest puts tests/ on the path)
import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epbuf import webapi
from epbuf.cli import main
from epbuf.serve import CSP, ServeError, announce, make_server
from epbuf.sweep import MAX_CONFIGURATIONS



def epbuf_command() -> list[str]:
    import shutil

    script = shutil.which("epbuf", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    return [script] if script else [sys.executable, "-m", "epbuf"]

DEEPSEEK_V3_CONFIG = {"model_type": "deepseek_v3", "_name_or_path": "deepseek-ai/DeepSeek-V3", "hidden_size": 7168,
                      "n_routed_experts": 256, "num_experts_per_tok": 8, "n_shared_experts": 1,
                      "num_hidden_layers": 61}


@pytest.fixture(scope="module")
def server():
    srv = make_server("127.0.0.1", 0, request_timeout=1.0, max_connections=8)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def request(server, method: str, target: str, body: bytes | None = None, headers: dict | None = None):
    """``(status, headers, body bytes)`` of one request."""
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    try:
        conn.request(method, target, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def cli_json(capsys, *argv: str) -> tuple[int, str, str]:
    """``epbuf ARGV`` through main(): (status, stdout, stderr), error lines whole: the API answers
    the library's whole line, where a terminal gets it cut to 100 columns (tests/test_columns.py)."""
    return run_cli_whole(capsys, *argv)


# --- every endpoint answers what the CLI prints --------------------------------------------
SAME_AS_CLI = [
    ("/api/hint", "model=deepseek-v3&ranks=64&device=h200", ["hint", "--model", "deepseek-v3", "--ranks", "64",
                                                             "--device", "h200"]),
    ("/api/hint", "backend=deepep-v2&model=deepseek-v3&nodes=8&tokens=1024&bf16=1",
     ["hint", "--backend", "deepep-v2", "--model", "deepseek-v3", "--nodes", "8", "--tokens", "1024", "--bf16"]),
    ("/api/hint", "backend=deepep-ll&model=kimi-k2&ranks=16&tokens=256&redundant-experts=32&backend-version=ll3",
     ["hint", "--backend", "deepep-ll", "--model", "kimi-k2", "--ranks", "16", "--tokens", "256",
      "--redundant-experts", "32", "--backend-version", "ll3"]),
    ("/api/hint", "backend=deepep-v2&no-hybrid&single-reduction=yes&no-nvlink=on&ranks=32&gpus-per-node=8",
     ["hint", "--backend", "deepep-v2", "--no-hybrid", "--single-reduction", "--no-nvlink", "--ranks", "32",
      "--gpus-per-node", "8"]),
    ("/api/hint", "backend=deepep-v1&num-sms=24&hbm=80GB&fp8", ["hint", "--backend", "deepep-v1", "--num-sms", "24",
                                                                "--hbm", "80GB", "--fp8"]),
    ("/api/hint", "hidden=7000&sf-packs=100&bf16=0", ["hint", "--hidden", "7000", "--sf-packs", "100"]),
    ("/api/hint", "model=deepseek-v3&ranks=64&device=h200&budget=10%25",
     ["hint", "--model", "deepseek-v3", "--ranks", "64", "--device", "h200", "--budget", "10%"]),
    ("/api/hint", "backend=uccl-ll&ranks=16&nic=efa&per-expert-batching&platform=cuda",
     ["hint", "--backend", "uccl-ll", "--ranks", "16", "--nic", "efa", "--per-expert-batching", "--platform", "cuda"]),
    ("/api/layout", "backend=deepep-v2&topk-idx-bits=32", ["layout", "--backend", "deepep-v2", "--topk-idx-bits", "32"]),
    ("/api/hint", "backend=mori-ep&model=deepseek-v3&ranks=16&kernel-type=InterNodeV1&max-token-type-size=2"
                  "&env=MORI_SHMEM_HEAP_SIZE=6G&quant-type=none",
     ["hint", "--backend", "mori-ep", "--model", "deepseek-v3", "--ranks", "16", "--kernel-type", "InterNodeV1",
      "--max-token-type-size", "2", "--env", "MORI_SHMEM_HEAP_SIZE=6G", "--quant-type", "none"]),
    ("/api/compare", "model=deepseek-v3&ranks=16&dp-group-size=2&num-scale-bytes=0&max-total-recv-tokens=0",
     ["compare", "--model", "deepseek-v3", "--ranks", "16", "--dp-group-size", "2", "--num-scale-bytes", "0",
      "--max-total-recv-tokens", "0"]),
    ("/api/fit", "model=deepseek-v3&budget=8GiB&backends=mori-ep,pplx,deepep-ll&env=MORI_SHMEM_HEAP_SIZE=6G",
     ["fit", "--model", "deepseek-v3", "--budget", "8GiB", "--backends", "mori-ep,pplx,deepep-ll",
      "--env", "MORI_SHMEM_HEAP_SIZE=6G"]),
    ("/api/layout", "hidden=7000", ["layout", "--hidden", "7000"]),
    ("/api/compare", "model=deepseek-v3&ranks=16&tokens=256&device=h200",
     ["compare", "--model", "deepseek-v3", "--ranks", "16", "--tokens", "256", "--device", "h200"]),
    ("/api/fit", "model=qwen3-235b-a22b&budget=4GiB&ranks=32", ["fit", "--model", "qwen3-235b-a22b", "--budget", "4GiB",
                                                               "--ranks", "32"]),
    ("/api/fit", "model=deepseek-v3&budget=8GiB&tokens=4096&backends=deepep-v2,ascend",
     ["fit", "--model", "deepseek-v3", "--budget", "8GiB", "--tokens", "4096", "--backends", "deepep-v2,ascend"]),
    ("/api/sweep", "model=deepseek-v3&ranks=8,16&tokens=64:8192:*2&dtype=fp8,bf16&device=h200",
     ["sweep", "--model", "deepseek-v3", "--ranks", "8,16", "--tokens", "64:8192:*2", "--dtype", "fp8,bf16",
      "--device", "h200"]),
    ("/api/engine/vllm", "model=glm-4.5&ranks=16&all2all-backend=deepep_low_latency&enable-eplb&"
                         "eplb-config=%7B%22num_redundant_experts%22%3A288%7D&max-num-batched-tokens=2048",
     ["engine", "vllm", "--model", "glm-4.5", "--ranks", "16", "--all2all-backend", "deepep_low_latency",
      "--enable-eplb", "--eplb-config", '{"num_redundant_experts":288}', "--max-num-batched-tokens", "2048"]),
    ("/api/engine/sglang", "model=deepseek-v3&ranks=16&env=SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK=256",
     ["engine", "sglang", "--model", "deepseek-v3", "--ranks", "16",
      "--env", "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK=256"]),
    ("/api/models", "", ["models"]),
    ("/api/devices", "", ["devices"]),
    ("/api/versions", "", ["versions"]),
]


@pytest.mark.parametrize("path, query, argv", SAME_AS_CLI, ids=[f"{p}?{q}"[:60] for p, q, _ in SAME_AS_CLI])
def test_api_answers_exactly_what_the_cli_prints(server, capsys, path, query, argv):
    code, out, err = cli_json(capsys, *argv, "--json")
    assert code == 0, err
    status, headers, body = request(server, "GET", f"{path}?{query}")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert body.decode() == out  # byte for byte: the CLI's own JSON
    assert headers["X-Epbuf-Exit-Status"] == "0"
    schema = json.loads(body)["schema"]
    expected = {"hint": "epbuf.report/1", "layout": "epbuf.report/1", "compare": "epbuf.compare/1",
                "fit": "epbuf.fit/1", "sweep": "epbuf.sweep/1", "engine": "epbuf.engine/1",
                "models": "epbuf.models/1", "devices": "epbuf.devices/1", "versions": "epbuf.versions/1"}
    assert schema == expected[path.split("/")[2]]


def test_the_command_header_reproduces_the_answer(server):
    """X-Epbuf-Command, pasted into a shell (here: the installed console script), prints the same JSON."""
    import shlex

    status, headers, body = request(server, "GET", "/api/hint?model=deepseek-v3&ranks=64&device=h200&backend=deepep-v2")
    assert status == 200
    words = shlex.split(headers["X-Epbuf-Command"])
    assert words[:2] == ["epbuf", "hint"] and words[-1] == "--json"
    run = subprocess.run(epbuf_command() + words[1:], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout == body.decode()


def test_hint_json_fields(server, capsys):
    status, _, body = request(server, "GET", "/api/hint?model=deepseek-v3&ranks=64&device=h200")
    data = json.loads(body)
    assert status == 200
    # With an NVIDIA device the backend is DeepEP V2 (issue 12); the answer is the CLI's.
    _, out, _ = cli_json(capsys, "hint", "--model", "deepseek-v3", "--ranks", "64", "--device", "h200", "--json")
    assert data == json.loads(out) and data["backend"] == "deepep-v2" and data["num_bytes"] == 4884267008
    assert data["device"]["name"] == "NVIDIA H200 (SXM)" and data["device"]["share"] == 4884267008 / data["device"]["num_bytes"]


def test_backend_omitted_lets_the_cli_choose(server, capsys):
    """The page's "auto (from device)" omits backend: whatever the CLI defaults to with
    that device is what the API answers."""
    _, out, _ = cli_json(capsys, "hint", "--device", "h200", "--json")
    status, _, body = request(server, "GET", "/api/hint?device=h200")
    assert status == 200 and json.loads(body)["backend"] == json.loads(out)["backend"]


# --- the byte map ---------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["--hidden", "7000"], ["--backend", "deepep-v2", "--model", "deepseek-v3", "--ranks", "64"],
                                  ["--backend", "deepep-ll", "--tokens", "128"], ["--backend", "deepep-v1", "--bf16"]])
def test_layout_svg_is_the_file_layout_writes(server, capsys, tmp_path, argv):
    target = tmp_path / "map.svg"
    code, _, err = cli_json(capsys, "layout", *argv, "--svg", str(target))
    assert code == 0, err
    query = urllib.parse.urlencode([(a[2:], b) for a, b in zip(argv[::2], argv[1::2])] if argv[-1] != "--bf16"
                                   else [("backend", "deepep-v1"), ("bf16", "1")])
    status, headers, body = request(server, "GET", f"/api/layout?format=svg&{query}")
    assert status == 200 and headers["Content-Type"] == "image/svg+xml; charset=utf-8"
    assert body.decode() == target.read_text()
    import xml.dom.minidom

    assert xml.dom.minidom.parseString(body).documentElement.tagName == "svg"
    assert "--svg byte-map.svg" in headers["X-Epbuf-Command"]


def test_layout_format_is_checked(server):
    status, _, body = request(server, "GET", "/api/layout?format=png")
    assert status == 400 and "format = 'png'" in json.loads(body)["error"]
    status, _, body = request(server, "GET", "/api/layout?format=svg&ranks=0")
    assert status == 400 and "--ranks" in json.loads(body)["error"]


# --- errors: one line, the CLI's own ----------------------------------------------------------
CLI_ERRORS = [
    ("/api/hint", "ranks=0", ["hint", "--ranks", "0"]),
    ("/api/hint", "model=deepseek-v4", ["hint", "--model", "deepseek-v4"]),
    ("/api/hint", "device=h999", ["hint", "--device", "h999"]),
    ("/api/hint", "hbm=lots", ["hint", "--hbm", "lots"]),
    ("/api/hint", "backend=nccl", ["hint", "--backend", "nccl"]),
    ("/api/hint", "nodes=4&ranks=16&gpus-per-node=8", ["hint", "--nodes", "4", "--ranks", "16", "--gpus-per-node", "8"]),
    ("/api/hint", "tokens=1e99999", ["hint", "--tokens", "1e99999"]),
    ("/api/hint", "backend=deepep-v1&backend-version=nope", ["hint", "--backend", "deepep-v1", "--backend-version", "nope"]),
    ("/api/fit", "budget=-1GiB", ["fit", "--budget=-1GiB"]),
    ("/api/fit", "ranks=8", ["fit", "--ranks", "8"]),
    ("/api/compare", "backends=ascend,x", ["compare", "--backends", "ascend,x"]),
    ("/api/sweep", "dtype=fp16", ["sweep", "--dtype", "fp16"]),
    ("/api/engine/vllm", "max-num-batched-tokens=0", ["engine", "vllm", "--max-num-batched-tokens", "0"]),
    ("/api/engine/vllm", "env=NOPE=1", ["engine", "vllm", "--env", "NOPE=1"]),
]


@pytest.mark.parametrize("path, query, argv", CLI_ERRORS, ids=[f"{p}?{q}"[:60] for p, q, _ in CLI_ERRORS])
def test_invalid_input_is_400_with_the_clis_line(server, capsys, path, query, argv):
    code, _, err = cli_json(capsys, *argv, "--json")
    assert code == 2
    status, headers, body = request(server, "GET", f"{path}?{query}")
    assert status == 400 and headers["X-Epbuf-Exit-Status"] == "2"
    assert json.loads(body) == {"error": err.strip()}
    assert "\n" not in err.strip() and "Traceback" not in body.decode()


def test_sweep_cap_is_the_clis(server):
    status, _, body = request(server, "GET", "/api/sweep?ranks=1:1000&tokens=1:1000")
    error = json.loads(body)["error"]
    assert status == 400 and f"{MAX_CONFIGURATIONS:,}" in error and "\n" not in error


def test_strict_is_422_with_the_report(server, capsys):
    """hint --strict exits 1 on an error finding: 422 and the report itself."""
    code, out, _ = cli_json(capsys, "hint", "--hidden", "7000", "--strict", "--json")
    assert code == 1
    status, headers, body = request(server, "GET", "/api/hint?hidden=7000&strict")
    assert status == 422 and headers["X-Epbuf-Exit-Status"] == "1" and body.decode() == out
    status, _, _ = request(server, "GET", "/api/hint?strict")
    assert status == 200


@pytest.mark.parametrize("query, words", [
    ("foo=1", ["unknown parameter 'foo'"]),
    ("model-config=/etc/passwd", ["unknown parameter 'model-config'"]),
    ("json=1", ["unknown parameter 'json'"]),
    ("help", ["unknown parameter 'help'"]),
    ("verbose&svg=/tmp/x.svg", ["unknown parameter 'svg'"]),
    ("h=1", ["unknown parameter 'h'"]),  # no argparse abbreviation reaches the CLI
    ("ranks=1&ranks=2", ["ranks is given twice"]),
    ("bf16=maybe", ["bf16 = 'maybe'", "a switch"]),
])
def test_parameters_outside_the_whitelist_are_refused(server, query, words):
    status, _, body = request(server, "GET", f"/api/hint?{query}")
    error = json.loads(body)["error"]
    assert status == 400 and all(w in error for w in words), error


@pytest.mark.parametrize("name", sorted(webapi.ENDPOINTS))
def test_every_cli_option_that_reads_no_file_is_a_parameter(name):
    """The API's parameter names are the CLI's options (issue 13): all of them, but for the ones
    that name a file, --json (always on) and the text-only --wide."""
    from epbuf.cli import command_parser

    command, values, switches, _ = webapi.ENDPOINTS[name]
    options = {o[2:] for a in command_parser(command)._actions for o in a.option_strings if o.startswith("--")}
    file_or_text = {"help", "json", "wide", "model-config", "svg", "csv", "plot", "quiet", "routing-file", "save-routing"}
    assert options - file_or_text == (set(values) | set(switches)) - {"format"}


def test_a_misspelt_parameter_gets_the_nearest_name(server):
    status, _, body = request(server, "GET", "/api/hint?modle=deepseek-v3")
    error = json.loads(body)["error"]
    assert status == 400 and "unknown parameter 'modle' for /api/hint; did you mean model?; allowed:" in error


@pytest.mark.parametrize("path, name", [("/api/sweep", "csv"), ("/api/sweep", "plot"), ("/api/sweep", "quiet"),
                                        ("/api/layout", "svg"), ("/api/engine/vllm", "model-config"),
                                        ("/api/engine/vllm", "json"), ("/api/models", "json")])
def test_no_option_names_a_file(server, path, name):
    status, _, body = request(server, "GET", f"{path}?{name}=/tmp/epbuf-serve-test")
    assert status == 400 and f"unknown parameter '{name}'" in json.loads(body)["error"]
    assert not os.path.exists("/tmp/epbuf-serve-test")


@pytest.mark.parametrize("engine, query", [("sglang", "deepep-config=/etc/hostname"),
                                           ("sglang", "deepep-config=%20config.json"),
                                           ("vllm", "eplb-config=eplb.json"),
                                           ("vllm-ascend", "additional-config=/tmp/a.json"),
                                           ("vllm-ascend", "speculative-config=spec")])
def test_engine_json_settings_must_be_json_not_paths(server, engine, query):
    """An engine reads a JSON setting from a file when it does not look like JSON; the API
    accepts only the JSON itself."""
    status, _, body = request(server, "GET", f"/api/engine/{engine}?{query}")
    assert status == 400 and "the server reads no files" in json.loads(body)["error"]


def test_engine_json_environment_variables_must_be_json(monkeypatch):
    """The same for an environment variable holding JSON (none today; the check reads the knob table)."""
    values, switches, options, _ = webapi._engine_options("sglang")
    monkeypatch.setattr(webapi, "_engine_options", lambda name: (values, switches, options, {"SOME_JSON"}))
    response = webapi.handle("GET", "/api/engine/sglang", "env=SOME_JSON=/etc/hostname")
    assert response.status == 400 and "env SOME_JSON = '/etc/hostname'" in response.json()["error"]
    response = webapi.handle("GET", "/api/engine/sglang", "env=OTHER=/etc/hostname")
    assert response.status == 400 and "the server reads no files" not in response.json()["error"]


def test_engine_json_setting_given_inline_passes(server, capsys):
    kwargs = ('{"num_sms": 24, "num_max_nvl_chunked_send_tokens": 8, "num_max_nvl_chunked_recv_tokens": 256, '
              '"num_max_rdma_chunked_send_tokens": 16, "num_max_rdma_chunked_recv_tokens": 128}')
    config = f'{{"normal_dispatch": {kwargs}, "normal_combine": {kwargs}}}'
    code, out, err = cli_json(capsys, "engine", "sglang", "--model", "deepseek-v3", "--ranks", "16",
                              "--deepep-config", config, "--json")
    assert code == 0, err
    query = urllib.parse.urlencode({"model": "deepseek-v3", "ranks": "16", "deepep-config": config})
    status, _, body = request(server, "GET", f"/api/engine/sglang?{query}")
    assert status == 200 and body.decode() == out
    # A config the engine refuses: the CLI's line.
    code, _, err = cli_json(capsys, "engine", "sglang", "--deepep-config", '{"normal_dispatch": {}}', "--json")
    status, _, body = request(server, "GET", "/api/engine/sglang?" + urllib.parse.urlencode(
        {"deepep-config": '{"normal_dispatch": {}}'}))
    assert code == 2 and status == 400 and json.loads(body)["error"] == err.strip()


def test_posted_config_reaches_engines(server, capsys):
    config = {"hidden_size": 4096, "num_experts": 128, "num_experts_per_tok": 8}
    status, headers, body = request(server, "POST", "/api/engine/vllm?ranks=16", json.dumps(config).encode())
    _, out, _ = cli_json(capsys, "engine", "vllm", "--hidden", "4096", "--topk", "8", "--experts", "128", "--ranks",
                         "16", "--json")
    assert status == 200 and json.loads(body)["num_bytes"] == json.loads(out)["num_bytes"]
    assert headers["X-Epbuf-Command"].startswith("epbuf engine vllm --hidden=4096 --topk=8 --experts=128")


def test_unknown_engine_and_api_paths_are_404(server):
    status, _, body = request(server, "GET", "/api/engine/trt-llm")
    assert status == 404 and "trt-llm" in json.loads(body)["error"]
    status, _, body = request(server, "GET", "/api/nothing")
    assert status == 404 and "/api/hint" in json.loads(body)["error"]
    status, _, body = request(server, "GET", "/etc/passwd")
    assert status == 404 and json.loads(body)["error"].startswith("nothing at")
    status, _, body = request(server, "GET", "/../../etc/passwd")
    assert status == 404


def test_models_by_name_only_never_from_a_local_cache(server, capsys, tmp_path, monkeypatch):
    """The CLI reads a cached Hugging Face config for org/name; the server never does (the
    same link means the same on every server, and no file is read)."""
    snapshot = tmp_path / "hub" / "models--acme--tiny-moe" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"hidden_size": 1024, "num_experts": 16, "num_experts_per_tok": 2}))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    code, _, _ = cli_json(capsys, "hint", "--model", "acme/tiny-moe", "--json")
    assert code == 0
    status, _, body = request(server, "GET", "/api/hint?model=acme/tiny-moe")
    error = json.loads(body)["error"]
    assert status == 400 and "never reads a local Hugging Face cache" in error and "\n" not in error
    # A released variant of a preset still resolves, by name.
    code, out, _ = cli_json(capsys, "hint", "--model", "DeepSeek-R1-0528", "--json")
    status, _, body = request(server, "GET", "/api/hint?model=deepseek-ai/DeepSeek-R1-0528")
    assert status == 200 and body.decode() == out


# --- a pasted config.json ----------------------------------------------------------------
def test_posted_config_equals_model_config_file(server, capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(DEEPSEEK_V3_CONFIG))
    code, out, _ = cli_json(capsys, "hint", "--model-config", str(path), "--ranks", "64", "--device", "h200", "--json")
    assert code == 0
    status, headers, body = request(server, "POST", "/api/hint?ranks=64&device=h200", path.read_bytes())
    assert status == 200
    cli, api = json.loads(out), json.loads(body)
    assert api["model_config"]["title"] == "deepseek-ai/DeepSeek-V3" and api["model_config"]["hidden"] == 7168
    assert api["num_bytes"] == cli["num_bytes"] and api["buffers"] == cli["buffers"]
    assert {k: v for k, v in api["inputs"].items()} == {k: v for k, v in cli["inputs"].items() if k != "model"}
    assert "--hidden=7168 --topk=8 --experts=256" in headers["X-Epbuf-Command"]


def test_posted_config_with_flags_that_fill_and_override(server, capsys):
    partial = {"hidden_size": 2048, "num_experts": 128}
    status, _, body = request(server, "POST", "/api/fit?topk=8&budget=2GiB&backends=deepep-v2",
                              json.dumps(partial).encode())
    assert status == 200
    _, out, _ = cli_json(capsys, "fit", "--hidden", "2048", "--experts", "128", "--topk", "8", "--budget", "2GiB",
                         "--backends", "deepep-v2", "--json")
    data = json.loads(body)
    assert data["results"] == json.loads(out)["results"] and "--topk=8" in data["model_config"]["notes"]
    status, _, body = request(server, "POST", "/api/hint?hidden=4096", json.dumps(DEEPSEEK_V3_CONFIG).encode())
    assert status == 200 and json.loads(body)["inputs"]["hidden"] == 4096  # explicit wins, as on the CLI


def test_posted_config_to_models_is_one_model(server):
    status, _, body = request(server, "POST", "/api/models", json.dumps(DEEPSEEK_V3_CONFIG).encode())
    data = json.loads(body)
    assert status == 200 and data["schema"] == "epbuf.models/1"
    [model] = data["models"]
    assert (model["title"], model["hidden"], model["num_experts"], model["num_topk"], model["num_shared_experts"]) == \
        ("deepseek-ai/DeepSeek-V3", 7168, 256, 8, 1)


@pytest.mark.parametrize("body, words", [
    (b"", "empty"),
    (b"{not json", "not JSON (line 1"),
    (b"[1, 2]", "top level is an array"),
    (b'{"hidden_size": 2048}', "no routed expert count"),
    (b'{"hidden_size": -1, "num_experts": 8, "num_experts_per_tok": 2}', "hidden_size = -1"),
    (b"\xff\xfe", "not UTF-8"),
    (b"[" * 100_000, "nested too deeply"),
])
def test_bad_config_bodies_are_one_line(server, body, words):
    status, _, answer = request(server, "POST", "/api/hint", body)
    error = json.loads(answer)["error"]
    assert status == 400 and words in error and "\n" not in error and error.startswith(
        "config.json (request body)"), error


def test_model_and_body_together_are_refused(server):
    status, _, body = request(server, "POST", "/api/hint?model=deepseek-v3", json.dumps(DEEPSEEK_V3_CONFIG).encode())
    assert status == 400 and "give one of them" in json.loads(body)["error"]


def test_body_limits(server):
    # Over the limit: refused from Content-Length, before a byte of the body is read.
    for length in (webapi.MAX_BODY_BYTES + 1, 10**12):
        head, body = raw_exchange(server, f"POST /api/hint HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                          f"Content-Length: {length}\r\n\r\n".encode())
        assert head.startswith("HTTP/1.0 413") and "limit of 1,048,576 B" in json.loads(body)["error"]
    # At the limit: read, and judged as a config.json.
    status, _, body = request(server, "POST", "/api/hint", b" " * webapi.MAX_BODY_BYTES)
    assert status == 400 and "not JSON" in json.loads(body)["error"]
    head, body = raw_exchange(server, b"POST /api/hint HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert head.startswith("HTTP/1.0 411")
    head, body = raw_exchange(server, b"POST /api/hint HTTP/1.1\r\nContent-Length: -5\r\n\r\n")
    assert head.startswith("HTTP/1.0 400") and "not a byte count" in json.loads(body)["error"]
    head, body = raw_exchange(server, b"POST /api/hint HTTP/1.1\r\nContent-Length: 100\r\n\r\n{}")
    assert head.startswith("HTTP/1.0 400") and "body ended after 2 of 100 B" in json.loads(body)["error"]
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    conn.putrequest("POST", "/api/hint")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    conn.send(b"2\r\n{}\r\n0\r\n\r\n")
    response = conn.getresponse()
    assert response.status == 411 and "Content-Length" in json.loads(response.read())["error"]
    conn.close()


def test_methods(server):
    for method in ("PUT", "DELETE", "PATCH", "OPTIONS"):
        status, headers, body = request(server, method, "/api/hint")
        assert status == 405 and "use GET or POST" in json.loads(body)["error"] and headers["Content-Security-Policy"] == CSP
    status, _, body = request(server, "POST", "/api/devices", b"{}")
    assert status == 405 and json.loads(body)["error"] == "POST is not allowed on /api/devices; use GET"
    status, _, body = request(server, "POST", "/", b"{}")
    assert status == 405
    status, headers, body = request(server, "HEAD", "/api/hint")
    assert status == 200 and body == b"" and int(headers["Content-Length"]) > 1000


# --- the page and the headers ---------------------------------------------------------------
@pytest.mark.parametrize("path, kind", [("/", "text/html"), ("/app.js", "text/javascript"), ("/style.css", "text/css"),
                                        ("/icon.svg", "image/svg+xml")])
def test_page_files(server, path, kind):
    status, headers, body = request(server, "GET", path)
    assert status == 200 and headers["Content-Type"].startswith(kind) and body


def test_every_response_sets_the_security_headers(server):
    for method, target in (("GET", "/"), ("GET", "/app.js"), ("GET", "/api/hint"), ("GET", "/api/hint?ranks=0"),
                           ("GET", "/nothing"), ("POST", "/api/hint"), ("GET", "/api/layout?format=svg")):
        _, headers, _ = request(server, method, target)
        assert headers["Content-Security-Policy"] == CSP
        assert headers["X-Content-Type-Options"] == "nosniff" and headers["Cache-Control"] == "no-store"
    assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP and "unsafe-eval" not in CSP
    assert "frame-ancestors 'none'" in CSP and "default-src 'none'" in CSP


def test_the_page_has_no_inline_script_or_style():
    from importlib.resources import files

    html = (files("epbuf") / "web" / "index.html").read_text()
    import re

    assert re.findall(r"<script\b[^>]*>", html) == ['<script src="app.js" defer>', '<script src="views.js" defer>']
    assert not re.search(r"\sstyle\s*=|<style|\son[a-z]+\s*=|javascript:", html)  # CSP: no inline style or handler
    assert "http://" not in html and "https://" not in html  # no CDN


def test_loopback_server_refuses_foreign_host_names(server):
    status, _, body = request(server, "GET", "/api/versions", headers={"Host": "evil.example:8000"})
    assert status == 403 and "loopback" in json.loads(body)["error"]
    for host in ("localhost:8000", "127.0.0.1", "[::1]:1234", "app.localhost"):
        status, _, _ = request(server, "GET", "/api/versions", headers={"Host": host})
        assert status == 200, host


def raw_exchange(server, data: bytes) -> tuple[str, str]:
    """Send raw bytes, end the sending side, read until the server closes: (head, body)."""
    with socket.create_connection(server.server_address, timeout=10) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).decode("latin-1").partition("\r\n\r\n")
    return head, body


def test_http_level_errors_are_json(server):
    head, body = raw_exchange(server, b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n")
    assert head.startswith("HTTP/1.0 414") and "error" in json.loads(body)
    for line in (b"GET / HTTP/1.1 extra", b"GET /", b"get / HTTP/1.1", b"\x16\x03\x01\x02\x00\x01\x00"):
        head, body = raw_exchange(server, line + b"\r\n\r\n")
        assert head.startswith("HTTP/1.0 400 Bad Request") and f"Content-Security-Policy: {CSP}" in head, head
        assert json.loads(body)["error"].startswith("malformed request line")
    head, body = raw_exchange(server, b"GET / HTTP/2.0\r\n\r\n")
    assert head.startswith("HTTP/1.0 505") and "use HTTP/1.0 or HTTP/1.1" in json.loads(body)["error"]
    head, body = raw_exchange(server, b"GET / HTTP/1.1\r\n" + b"X-Big: " + b"b" * 30000 + b"\r\n"
                              + b"X-Big2: " + b"b" * 40000 + b"\r\n\r\n")
    assert head.startswith("HTTP/1.0 431") and "in all" in json.loads(body)["error"]
    head, body = raw_exchange(server, b"GET / HTTP/1.1\r\nno colon here\r\n\r\n")
    assert head.startswith("HTTP/1.0 400") and "malformed header line" in json.loads(body)["error"]
    head, body = raw_exchange(server, b"GET / HTTP/1.1\r\n" + b"X-A: b\r\n" * 200 + b"\r\n")
    assert head.startswith("HTTP/1.0 431") and "error" in json.loads(body)


def test_too_many_query_parameters(server):
    status, _, body = request(server, "GET", "/api/hint?" + "&".join(f"a{i}=1" for i in range(webapi.MAX_PARAMS + 1)))
    assert status == 400 and "more than 100 query parameters" in json.loads(body)["error"]


# --- slow and broken clients ---------------------------------------------------------------
def test_a_silent_client_stalls_nobody_and_is_dropped(server):
    silent = socket.create_connection(server.server_address, timeout=10)
    silent.sendall(b"GET /api/hint HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never ends its headers
    start = time.monotonic()
    status, _, _ = request(server, "GET", "/api/hint?ranks=16")
    assert status == 200 and time.monotonic() - start < 5
    silent.settimeout(5)
    answer = silent.recv(4096).decode()  # after the 1 s request timeout: 408, with every header
    assert answer.startswith("HTTP/1.0 408") and f"Content-Security-Policy: {CSP}" in answer
    assert "did not arrive within 1 s" in answer
    silent.close()


def test_a_trickling_client_hits_the_deadline(server):
    """One byte every 0.2 s: the request must arrive within 1 s, so it ends there (408)."""
    trickle = socket.create_connection(server.server_address, timeout=10)
    start = time.monotonic()
    closed = False
    for byte in b"GET /api/hint?" + b"x" * 100:
        try:
            trickle.sendall(bytes([byte]))
        except OSError:
            closed = True
            break
        trickle.settimeout(0.2)
        try:
            data = trickle.recv(100)
            if data == b"" or data.startswith(b"HTTP/1.0 408"):
                closed = True
                break
        except socket.timeout:
            pass
        if time.monotonic() - start > 8:
            break
    trickle.close()
    assert closed and time.monotonic() - start < 4


def test_connection_limit_answers_503(capsys):
    srv = make_server("127.0.0.1", 0, request_timeout=5, max_connections=2)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        idle = [socket.create_connection(srv.server_address, timeout=10) for _ in range(2)]
        time.sleep(0.2)
        status, headers, body = request(srv, "GET", "/api/versions")
        assert status == 503 and "too many connections" in json.loads(body)["error"]
        assert headers["Content-Security-Policy"] == CSP and headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Retry-After"] == "1"
        for s in idle:
            s.close()
        for _ in range(50):  # the idle ones are dropped; the server answers again
            time.sleep(0.1)
            if request(srv, "GET", "/api/versions")[0] == 200:
                break
        else:
            pytest.fail("the server did not recover after the idle connections closed")
    finally:
        srv.shutdown()
        srv.server_close()


def test_concurrent_requests_each_get_their_own_answer(server, capsys):
    """Requests run concurrently, each command in its own call: answers never mix."""
    expected = {}
    for ranks in (8, 16, 32, 64):
        _, out, _ = cli_json(capsys, "hint", "--backend", "deepep-v2", "--ranks", str(ranks), "--json")
        expected[ranks] = out
    results = {}

    def get(ranks):
        results[ranks] = request(server, "GET", f"/api/hint?backend=deepep-v2&ranks={ranks}")[2].decode()

    threads = [threading.Thread(target=get, args=(r,)) for r in (8, 16, 32, 64) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == expected


# --- hostile values never produce a 500 --------------------------------------------------------
PLAN_KEYS = ["model", "hidden", "topk", "experts", "ranks", "nodes", "gpus-per-node", "tokens", "redundant-experts",
             "sf-packs", "backend-version", "num-sms", "device", "hbm", "backend"]
values = st.one_of(st.text(max_size=30), st.integers(-10**20, 10**20).map(str),
                   st.sampled_from(["0", "1", "-1", "1e9", "9" * 40, "8GiB", "nan", "--json", "=", "h200", "ll0"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(["/api/hint", "/api/layout", "/api/compare", "/api/fit", "/api/sweep"]),
       params=st.dictionaries(st.sampled_from(PLAN_KEYS + ["budget", "backends", "dtype", "format"]), values, max_size=4))
def test_hostile_values_get_4xx_or_an_answer(path, params):
    response = webapi.handle("GET", path, urllib.parse.urlencode(params))
    assert response.status in (200, 400, 422), (response.status, response.body[:300])
    if response.content_type == "application/json":
        data = response.json()
        if response.status == 400:
            assert "\n" not in data["error"] and "Traceback" not in data["error"]


# --- the command ---------------------------------------------------------------------------
def test_serve_command_prints_where_and_stops_on_ctrl_c():
    process = subprocess.Popen(epbuf_command() + ["serve", "--port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("epbuf serve: http://127.0.0.1:") and "this machine" in line
        url = line.split()[2]
        conn = http.client.HTTPConnection(urllib.parse.urlsplit(url).netloc, timeout=30)
        conn.request("GET", "/api/hint?ranks=16")
        assert conn.getresponse().status == 200
        conn.close()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=20)
    finally:
        process.kill() if process.poll() is None else None
    assert process.returncode == 130 and "stopped" in out and "Traceback" not in err


def test_all_interfaces_print_a_warning():
    import io

    srv = make_server("0.0.0.0", 0)
    try:
        out, err = io.StringIO(), io.StringIO()
        announce(srv, out, err)
    finally:
        srv.server_close()
    assert "epbuf serve: http://127.0.0.1:" in out.getvalue()
    assert "warning: --host 0.0.0.0" in err.getvalue() and "without authentication" in err.getvalue()
    assert not srv.loopback_only


@pytest.mark.parametrize("argv, words", [
    (["serve", "--port", "70000"], "--port = 70000: allowed 0..65535"),
    (["serve", "--port", "-1"], "argument --port"),
    (["serve", "--host", "no such host.invalid", "--port", "0"], "cannot listen"),
    (["serve", "--workers", "65", "--port", "0"], "--workers (workers) = 65: allowed 1..64"),
    (["serve", "--time-limit", "0"], "argument --time-limit: 0 is out of range"),
])
def test_serve_refuses_bad_addresses_in_one_line(capsys, argv, words):
    code, out, err = cli_json(capsys, *argv)
    assert code == 2 and words in err and err.count("\n") == 1 and out == ""


def test_port_in_use_is_one_line(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = cli_json(capsys, "serve", "--port", str(port))
    assert code == 2 and f"--port {port}: cannot listen" in err and err.count("\n") == 1
    with pytest.raises(ServeError):
        make_server("127.0.0.1", True)


def test_serve_is_not_imported_by_other_commands():
    code = ("import sys, epbuf.cli; epbuf.cli.main(['hint', '--json']) ; "
            "print(sorted(m for m in sys.modules if m in ('epbuf.serve', 'epbuf.webapi', 'http.server')))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip().splitlines()[-1] == "[]"


@settings(max_examples=80, deadline=None)
@given(body=st.one_of(
    st.binary(max_size=200),
    st.dictionaries(st.sampled_from(["hidden_size", "num_experts", "n_routed_experts", "num_experts_per_tok", "moe_k",
                                     "n_shared_experts", "num_hidden_layers", "text_config", "_name_or_path",
                                     "model_type", "torch_dtype"]),
                    st.one_of(st.integers(-5, 10**30), st.none(), st.booleans(), st.text(max_size=20), st.floats(),
                              st.dictionaries(st.sampled_from(["hidden_size", "num_experts"]), st.integers(-2, 10**4))),
                    max_size=8).map(lambda d: json.dumps(d).encode())))
def test_hostile_config_bodies_get_4xx_or_an_answer(body):
    response = webapi.handle("POST", "/api/hint", "ranks=16", body)
    assert response.status in (200, 400, 422), (response.status, response.body[:300])
    if response.status == 400:
        assert "\n" not in response.json()["error"]


def test_a_bug_is_500_with_one_line_and_the_traceback_in_the_log(monkeypatch):
    import io

    log = io.StringIO()
    srv = make_server("127.0.0.1", 0, log=log)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        import epbuf.api

        monkeypatch.setattr(epbuf.api, "document", lambda *a, **k: {"not": object()})
        status, headers, body = request(srv, "GET", "/api/hint?ranks=16")
        assert status == 500 and headers["Content-Security-Policy"] == CSP
        assert json.loads(body) == {"error": "internal error (the server's terminal has the details); please report it"}
        assert "Traceback" in log.getvalue() and "is not JSON serializable" in log.getvalue()

        def broken(*args, **kwargs):
            raise ZeroDivisionError("a bug")

        monkeypatch.setattr(epbuf.api, "document", broken)
        status, _, body = request(srv, "GET", "/api/layout?format=svg")
        assert status == 500 and b"ZeroDivisionError" not in body and "ZeroDivisionError: a bug" in log.getvalue()
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_pages_engine_list_is_the_packages():
    """views.js lists every engine with the example launch line `epbuf engine NAME --help` gives."""
    import re
    from importlib.resources import files

    from epbuf.cli._engine_launch import EXAMPLES
    from epbuf.engines import ENGINES

    text = (files("epbuf") / "web" / "views.js").read_text()
    block = text[text.index("const ENGINE_EXAMPLES = {"):text.index("};", text.index("const ENGINE_EXAMPLES"))]
    found = dict(re.findall(r"^\s*'?([a-z-]+)'?: '([^']*)',?$", block, re.M))
    assert found == {name: EXAMPLES[name] for name in ENGINES}


@pytest.mark.parametrize("path, query", [("/api/simulate", "ranks=16&tokens=64"), ("/api/replay", "hidden=2048&topk=8"),
                                         ("/api/engine/vllm", "launch=vllm%20serve%20deepseek-ai/DeepSeek-V3%20-dp%2016"
                                                              "%20--enable-expert-parallel&device=h200")])
def test_simulate_replay_and_launch_lines_answer_what_the_cli_prints(server, capsys, path, query):
    pytest.importorskip("numpy")
    params = dict(urllib.parse.parse_qsl(query))
    launch = params.pop("launch", None)
    argv = path[len("/api/"):].split("/") + [f"--{k}={v}" for k, v in params.items()] + ["--json"]
    if launch:
        argv += ["--", *launch.split()]
    code, out, err = cli_json(capsys, *argv)
    assert code == 0, err
    status, headers, body = request(server, "GET", f"{path}?{query}")
    assert status == 200 and body.decode() == out
    assert headers["X-Epbuf-Command"] == "epbuf " + " ".join(argv)


def test_a_long_request_is_stopped_at_the_time_limit(capsys):
    srv = make_server("127.0.0.1", 0, time_limit=1)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        start = time.monotonic()
        status, headers, body = request(srv, "GET", "/api/sweep?ranks=1:200000&backends=ascend")
        assert status == 422 and time.monotonic() - start < 15
        assert "stopped after the server's limit of 1 s of computing per request" in json.loads(body)["error"]
        assert headers["Content-Security-Policy"] == CSP
        assert request(srv, "GET", "/api/hint")[0] == 200
    finally:
        srv.shutdown()
        srv.server_close()


def test_errors_echo_a_bounded_part_of_the_input(server):
    for target in ("/api/hint?model=" + "x" * 60000, "/api/hint?" + "y" * 60000 + "=1",
                   "/" + "z" * 60000, "/api/engine/" + "w" * 60000):
        status, _, body = request(server, "GET", target)
        assert 400 <= status < 500 and len(body) < 2500, (status, len(body))


def test_a_short_body_is_answered_at_once(server):
    with socket.create_connection(server.server_address, timeout=10) as s:
        s.sendall(b"POST /api/hint HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{\"hidden_size\"")
        s.shutdown(socket.SHUT_WR)
        start = time.monotonic()
        answer = s.recv(4096).decode()
    assert answer.startswith("HTTP/1.0 400") and "body ended after 14 of 100 B" in answer
    assert time.monotonic() - start < 2


def test_a_request_whose_client_left_is_stopped():
    """A maximal sweep whose client hangs up is stopped (its worker freed) and not answered."""
    import io

    log = io.StringIO()
    srv = make_server("127.0.0.1", 0, log=log)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        client = socket.create_connection(srv.server_address, timeout=10)
        client.sendall(b"GET /api/sweep?ranks=8:200000:%2B8&model=deepseek-v3 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        time.sleep(0.3)
        assert srv.pending["heavy"] == 1
        client.close()
        for _ in range(300):  # the sweep stops at its next 10,000-row step
            if srv.pending["heavy"] == 0:
                break
            time.sleep(0.1)
        assert srv.pending["heavy"] == 0 and not srv.stops
        assert "abandoned: the client left" in log.getvalue()
        assert request(srv, "GET", "/api/hint")[0] == 200
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_page_intro_names_every_library_and_engine():
    from importlib.resources import files

    html = (files("epbuf") / "web" / "index.html").read_text()
    intro = html[html.index('<p class="lead">'):html.index("</p>", html.index('<p class="lead">'))]
    for name in ("DeepEP (V2, V1, low-latency)", "DeepEP-Ascend", "UCCL-EP", "MORI-EP", "pplx-kernels", "vLLM",
                 "SGLang", "Megatron-LM", "sgl-kernel-npu", "MindSpeed", "vllm-ascend"):
        assert name in intro
