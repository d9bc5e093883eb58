"""``epbuf.api``: every command's document equals what ``--json`` prints, byte for byte, over a
corpus of options; options are checked by the command's own parser (one line, EpbufError)."""

from __future__ import annotations

import json

import pytest
from _cli_run import run_cli

from epbuf import api
from epbuf.errors import EpbufError

# (api function, positional args, keyword options, the command line's words)
CORPUS = [
    ("hint", (), {}, ["hint"]),
    ("hint", (), {"model": "deepseek-v3", "ranks": 64, "device": "h200"},
     ["hint", "--model", "deepseek-v3", "--ranks", "64", "--device", "h200"]),
    ("hint", (), {"backend": "deepep-v2", "model": "deepseek-v3", "nodes": 8, "tokens": 1024, "bf16": True},
     ["hint", "--backend", "deepep-v2", "--model", "deepseek-v3", "--nodes", "8", "--tokens", "1024", "--bf16"]),
    ("hint", (), {"backend": "deepep-ll", "model": "kimi-k2", "ranks": 16, "tokens": 256, "redundant_experts": 32,
                  "backend_version": "ll3"},
     ["hint", "--backend", "deepep-ll", "--model", "kimi-k2", "--ranks", "16", "--tokens", "256",
      "--redundant-experts", "32", "--backend-version", "ll3"]),
    ("hint", (), {"backend": "deepep-v2", "no_hybrid": True, "single_reduction": True, "no_nvlink": True,
                  "ranks": 32, "gpus_per_node": 8},
     ["hint", "--backend", "deepep-v2", "--no-hybrid", "--single-reduction", "--no-nvlink", "--ranks", "32",
      "--gpus-per-node", "8"]),
    ("hint", (), {"model": "deepseek-v3", "ranks": 64, "device": "h200", "budget": "10%", "strict": True},
     ["hint", "--model", "deepseek-v3", "--ranks", "64", "--device", "h200", "--budget", "10%", "--strict"]),
    ("hint", (), {"backend": "uccl-ll", "ranks": 16, "nic": "efa", "per_expert_batching": True},
     ["hint", "--backend", "uccl-ll", "--ranks", "16", "--nic", "efa", "--per-expert-batching"]),
    ("hint", (), {"backend": "mori-ep", "model": "deepseek-v3", "ranks": 16, "kernel_type": "InterNodeV1",
                  "env": ["MORI_SHMEM_HEAP_SIZE=6G"]},
     ["hint", "--backend", "mori-ep", "--model", "deepseek-v3", "--ranks", "16", "--kernel-type", "InterNodeV1",
      "--env", "MORI_SHMEM_HEAP_SIZE=6G"]),
    ("hint", (), {"backend": "pplx", "ranks": 32, "dp_group_size": 2, "hbm": "80GB"},
     ["hint", "--backend", "pplx", "--ranks", "32", "--dp-group-size", "2", "--hbm", "80GB"]),
    ("hint", (), {"device": "mi355x", "model": "qwen3-235b-a22b"}, ["hint", "--device", "mi355x", "--model",
                                                                    "qwen3-235b-a22b"]),
    ("layout", (), {"backend": "deepep-v2", "topk_idx_bits": 32}, ["layout", "--backend", "deepep-v2",
                                                                   "--topk-idx-bits", "32"]),
    ("layout", (), {"hidden": 7000, "sf_packs": 100}, ["layout", "--hidden", "7000", "--sf-packs", "100"]),
    ("compare", (), {}, ["compare"]),
    ("compare", (), {"model": "deepseek-v3", "ranks": 16, "tokens": 256, "device": "h200"},
     ["compare", "--model", "deepseek-v3", "--ranks", "16", "--tokens", "256", "--device", "h200"]),
    ("compare", (), {"backends": "ascend,pplx", "ranks": 1024}, ["compare", "--backends", "ascend,pplx", "--ranks",
                                                                "1024"]),
    ("fit", (), {"model": "deepseek-v3", "budget": "8GiB"}, ["fit", "--model", "deepseek-v3", "--budget", "8GiB"]),
    ("fit", (), {"model": "deepseek-v3", "device": "h200", "tokens": 4096, "backends": "deepep-v2,ascend"},
     ["fit", "--model", "deepseek-v3", "--device", "h200", "--tokens", "4096", "--backends", "deepep-v2,ascend"]),
    ("fit", (), {"device": "mi355x", "backends": "mori-ep"}, ["fit", "--device", "mi355x", "--backends", "mori-ep"]),
    ("sweep", (), {}, ["sweep"]),
    ("sweep", (), {"model": "deepseek-v3", "ranks": "8,16", "tokens": "64:8192:*2", "dtype": "fp8,bf16",
                   "device": "h200"},
     ["sweep", "--model", "deepseek-v3", "--ranks", "8,16", "--tokens", "64:8192:*2", "--dtype", "fp8,bf16",
      "--device", "h200"]),
    ("engine", ("vllm",), {"model": "glm-4.5", "ranks": 16, "all2all_backend": "deepep_low_latency",
                           "enable_eplb": True, "eplb_config": '{"num_redundant_experts": 288}',
                           "max_num_batched_tokens": 2048},
     ["engine", "vllm", "--model", "glm-4.5", "--ranks", "16", "--all2all-backend", "deepep_low_latency",
      "--enable-eplb", "--eplb-config", '{"num_redundant_experts": 288}', "--max-num-batched-tokens", "2048"]),
    ("engine", ("sglang",), {"model": "deepseek-v3", "ranks": 16, "device": "h200",
                             "env": ["SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK=256"]},
     ["engine", "sglang", "--model", "deepseek-v3", "--ranks", "16", "--device", "h200",
      "--env", "SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK=256"]),
    ("engine", ("vllm",), {"device": "h200", "launch": "vllm serve deepseek-ai/DeepSeek-V3 -dp 16 "
                                                       "--enable-expert-parallel --all2all-backend deepep_low_latency "
                                                       "--trust-remote-code"},
     ["engine", "vllm", "--device", "h200", "--", "vllm", "serve", "deepseek-ai/DeepSeek-V3", "-dp", "16",
      "--enable-expert-parallel", "--all2all-backend", "deepep_low_latency", "--trust-remote-code"]),
    ("engine", ("megatron",), {"launch": ["torchrun", "--nproc-per-node", "8", "pretrain_gpt.py",
                                          "--expert-model-parallel-size", "16", "--moe-token-dispatcher-type", "flex"]},
     ["engine", "megatron", "--", "torchrun", "--nproc-per-node", "8", "pretrain_gpt.py",
      "--expert-model-parallel-size", "16", "--moe-token-dispatcher-type", "flex"]),
    ("engine", ("mindspeed",), {"ranks": 16, "device": "ascend-910b"}, ["engine", "mindspeed", "--ranks", "16",
                                                                       "--device", "ascend-910b"]),
    ("engine", ("vllm-ascend",), {"model": "deepseek-v3", "ranks": 16}, ["engine", "vllm-ascend", "--model",
                                                                        "deepseek-v3", "--ranks", "16"]),
    ("engine", ("sgl-kernel-npu",), {"ranks": 16}, ["engine", "sgl-kernel-npu", "--ranks", "16"]),
    ("simulate", (), {"ranks": 16, "tokens": 256}, ["simulate", "--ranks", "16", "--tokens", "256"]),
    ("simulate", (), {"backend": "deepep-ll", "ranks": 16, "tokens": 128, "routing": "zipf:1.2", "seed": 3,
                      "device": "h800"},
     ["simulate", "--backend", "deepep-ll", "--ranks", "16", "--tokens", "128", "--routing", "zipf:1.2", "--seed",
      "3", "--device", "h800"]),
    ("simulate", (), {"backend": "deepep-v2", "ranks": 16, "tokens": 64, "routing": "all-to-one"},
     ["simulate", "--backend", "deepep-v2", "--ranks", "16", "--tokens", "64", "--routing", "all-to-one"]),
    ("replay", (), {}, ["replay"]),
    ("replay", (), {"hidden": 2048, "topk": 8, "bf16": True}, ["replay", "--hidden", "2048", "--topk", "8", "--bf16"]),
    ("models", (), {}, ["models"]),
    ("devices", (), {}, ["devices"]),
    ("versions", (), {}, ["versions"]),
]


@pytest.mark.parametrize("name, args, options, argv", CORPUS, ids=[" ".join(c[3])[:70] for c in CORPUS])
def test_the_document_is_what_json_prints(capsys, name, args, options, argv):
    if name == "simulate":
        pytest.importorskip("numpy")
    code, out, err = run_cli(capsys, *[*argv[:argv.index("--")], "--json", *argv[argv.index("--"):]]
                             if "--" in argv else [*argv, "--json"])
    assert code in (0, 1), err
    doc = getattr(api, name)(*args, **options)
    assert json.dumps(doc, indent=2) + "\n" == out
    strict = bool(options.get("strict"))
    assert api.exit_status(name.split(".")[0], doc, strict=strict) == code


def test_every_command_with_a_document_is_covered():
    covered = {name for name, *_ in CORPUS}
    assert covered == set(api.COMMANDS)


@pytest.mark.parametrize("call, words", [
    (lambda: api.hint(ranks="x"), "argument --ranks: 'x' is not an integer; allowed >= 1"),
    (lambda: api.hint(ranks=0), "argument --ranks: 0 is out of range; allowed >= 1"),
    (lambda: api.hint(rnks=3), "rnks is not an option; did you mean ranks?"),
    (lambda: api.hint(bf16="yes"), "bf16 = 'yes': a switch; give True or False"),
    (lambda: api.hint(json=True), "json is an output option of the command line"),
    (lambda: api.sweep(csv="rows.csv"), "csv is an output option of the command line"),
    (lambda: api.hint(fp8=True, bf16=True), "argument --bf16: not allowed with argument --fp8"),
    (lambda: api.hint(backend="nope"), "invalid choice: 'nope'"),
    (lambda: api.hint(model="no-such-model"), "no-such-model"),
    (lambda: api.hint(ranks=[8, 16]), "ranks = [8, 16]: give a number"),
    (lambda: api.engine("vllm", launch="vllm serve 'unclosed"), "launch line: No closing quotation"),
    (lambda: api.engine("nope"), "nope"),
    (lambda: api.document("serve"), "command 'serve': one of hint"),
    (lambda: api.sweep(ranks="1:300000"), "more than 200,000 values"),
])
def test_bad_options_raise_one_line(call, words):
    with pytest.raises(EpbufError) as caught:
        call()
    message = str(caught.value)
    assert words in message and "\n" not in message, message


def test_a_check_that_raises_stops_a_sweep():
    class Stop(Exception):
        pass

    calls = []

    def check():
        calls.append(1)
        raise Stop

    with pytest.raises(Stop):
        api.sweep(ranks="1:20000", check=check)
    assert calls == [1]


def test_concurrent_first_calls_in_threads_give_the_sequential_documents():
    """What ``epbuf serve`` does: many commands at once in threads, from a fresh interpreter (the
    lazy imports happen concurrently; once they returned a half-imported module)."""
    import subprocess
    import sys

    pytest.importorskip("numpy")
    code = (
        "import json, random\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from epbuf import api\n"
        "cases = [('hint', b, r) for b in ('ascend', 'deepep-v2', 'deepep-v1', 'deepep-ll', 'uccl-ep', 'uccl-ll',\n"
        "         'mori-ep', 'pplx') for r in (8, 16)]\n"
        "cases += [('engine', n, 16) for n in ('vllm', 'sglang', 'megatron', 'sgl-kernel-npu', 'mindspeed',\n"
        "          'vllm-ascend')]\n"
        "cases += [('compare', None, 16), ('fit', None, 16), ('simulate', 'deepep-ll', 8), ('replay', None, 8)]\n"
        "def run(case):\n"
        "    name, which, ranks = case\n"
        "    if name == 'engine':\n"
        "        return json.dumps(api.engine(which, ranks=ranks))\n"
        "    options = {'ranks': ranks, **({'backend': which} if which else {})}\n"
        "    if name == 'fit':\n"
        "        options['budget'] = '8GiB'\n"
        "    if name == 'simulate':\n"
        "        options['tokens'] = 64\n"
        "    return json.dumps(getattr(api, name)(**options))\n"
        "work = cases * 3\n"
        "random.Random(0).shuffle(work)\n"
        "with ThreadPoolExecutor(8) as pool:\n"
        "    results = list(pool.map(run, work))\n"
        "print(sum(r != run(c) for c, r in zip(work, results)), len(work))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", "78"]  # no document differs, of 26 cases x 3
