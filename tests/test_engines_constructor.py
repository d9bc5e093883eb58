"""The engines that construct a DeepEP V1 ``Buffer`` count what its constructor allocates besides the
hinted bytes (DeepEP ``csrc/legacy/buffer.hpp:132-135, 148-150 @dd758ca``): the NVL metadata when
``num_nvl_bytes > 0`` and the 32 MiB workspace — the rows :mod:`epbuf.backends.deepep_v1.memory`
gives, once per Buffer (vLLM, SGLang and Megatron-LM construct one each). With ``--uccl-ep`` the same
engines differ from the plain DeepEP path only by UCCL-EP's own allocations."""

from __future__ import annotations

import pytest

import epbuf
from epbuf.backends import deepep_v1
from epbuf.engines import report
from epbuf.units import MiB

WORKSPACE = 33_554_432  # NUM_WORKSPACE_BYTES, 32 MiB (buffer.hpp:148-150)

VLLM_HT = {"--all2all-backend": "deepep_high_throughput"}
VLLM_LL = {"--all2all-backend": "deepep_low_latency", "--max-num-batched-tokens": 256}
PLAIN = [
    ("vllm", {"num_ranks": 16, "flags": VLLM_HT}),
    ("vllm", {"num_ranks": 8, "flags": VLLM_HT}),
    ("vllm", {"num_ranks": 16, "flags": VLLM_LL}),
    ("sglang", {"flags": {"--tp-size": 16, "--deepep-mode": "auto"}}),
    ("sglang", {"flags": {"--tp-size": 16, "--deepep-mode": "low_latency"}}),
    ("sglang", {"flags": {"--tp-size": 8, "--deepep-mode": "normal"}}),
    ("megatron", {"flags": {"--expert-model-parallel-size": 16}}),
]
HINT_ROWS = ("NVL buffer", "RDMA buffer", "LL RDMA buffer", "RDMA buffer (low-latency)")


def _plain(engine, kw, version=None):
    return report(engine, model="deepseek-v3", backend_version=version, **kw)


@pytest.mark.parametrize("version", ["main", "v1.1.0", "ll3"])
@pytest.mark.parametrize("engine, kw", PLAIN)
def test_added_rows_are_deepep_v1_memory(engine, kw, version):
    """The rows each engine adds are ``deepep_v1.memory``'s, for the DeepEP version the recipe
    resolves (``ll3``: the task FIFO before 8da2d7b, 131,200 B); the total is the hint rows plus them."""
    v = deepep_v1.get_version(version)
    rep = _plain(engine, kw, version)
    names = [b.name for b in rep.report.buffers]
    nvl_bytes = rep.report.quantity("num_nvl_bytes")
    assert rep.report.buffer("workspace") == deepep_v1.workspace_allocation(v)
    if nvl_bytes > 0:
        meta = rep.report.buffer("NVL metadata")
        assert list(meta.regions) == deepep_v1.nvl_metadata(v)
        assert meta.num_bytes == deepep_v1.nvl_metadata_num_bytes(v) == (160 if v.nvl_barrier_signals else 131_200)
    else:
        assert "NVL metadata" not in names  # DeepEP appends it only to a non-zero NVL allocation (buffer.hpp:132)
    assert names.count("workspace") == 1 and names.count("NVL metadata") <= 1  # one Buffer per engine
    hints = sum(b.num_bytes for b in rep.report.buffers if b.name in HINT_ROWS)
    assert hints == nvl_bytes + rep.report.quantity("num_rdma_bytes")  # the hint rows are the request, unchanged
    extra = WORKSPACE + (deepep_v1.nvl_metadata_num_bytes(v) if nvl_bytes else 0)
    assert rep.num_bytes == hints + extra


def test_megatron_total_is_the_deepep_v1_backend_total():
    """Megatron's Buffer(group, num_nvl_bytes, num_rdma_bytes) at 16 ranks, BF16 hidden 7168, 20 SMs is
    the deepep-v1 backend's default plan: 469,561,728 B of hints + 160 + 33,554,432 = 503,116,320 B."""
    rep = _plain("megatron", {"flags": {"--expert-model-parallel-size": 16}})
    plan = epbuf.Plan(hidden=7168, num_topk=8, num_experts=256, num_ranks=16, num_max_tokens_per_rank=4096)
    backend = epbuf.report(plan, "deepep-v1")
    assert rep.num_bytes == backend.num_bytes == 377_673_984 + 91_887_744 + 33_554_432 + 160 == 503_116_320


# (engine, arguments, whether the RDMA request is the same: fixed by vLLM, or DeepEP's normal-mode hints)
UCCL = [
    ("vllm", {"num_ranks": 16, "flags": VLLM_HT}, True),  # internode: NVL + RDMA
    ("vllm", {"num_ranks": 8, "flags": VLLM_HT}, True),   # intranode: UCCL-EP allocates a 1-byte RDMA placeholder
    ("vllm", {"num_ranks": 16, "version": "dp-chunk", "flags": VLLM_LL}, False),
    ("sglang", {"flags": {"--tp-size": 16, "--deepep-mode": "auto"}}, False),
    ("sglang", {"flags": {"--tp-size": 16, "--deepep-mode": "low_latency"}}, False),
    ("sglang", {"flags": {"--tp-size": 16, "--deepep-mode": "normal"}}, True),
    ("sglang", {"flags": {"--tp-size": 8, "--deepep-mode": "normal"}}, True),
]


@pytest.mark.parametrize("engine, kw, same_rdma", UCCL)
def test_uccl_ep_differs_from_deepep_only_by_uccl_allocations(engine, kw, same_rdma):
    """``--uccl-ep`` and the plain DeepEP path: the same NVL allocation (UCCL-EP's NVL row holds the
    metadata DeepEP's path lists apart; 8 GPUs per node, so max_nvl_peers = 8 both ways) and workspace;
    the device totals differ by UCCL's proxies and runtime, its RDMA placeholder (``max(num_rdma_bytes,
    1)``) and, in low-latency mode, by its own RDMA hint (UCCL-EP's layout, not DeepEP's)."""
    plain = _plain(engine, kw)
    uccl = _plain(engine, {**kw, "flags": {**kw["flags"], "--uccl-ep": True}})
    p, u = plain.report, uccl.report
    assert u.quantity("num_nvl_bytes") == p.quantity("num_nvl_bytes")
    if p.quantity("num_nvl_bytes"):
        assert u.buffer("NVL buffer").num_bytes == p.buffer("NVL buffer").num_bytes + p.buffer("NVL metadata").num_bytes
    assert u.buffer("workspace").num_bytes == p.buffer("workspace").num_bytes == WORKSPACE
    runtime = u.buffer("UCCL proxies and runtime").num_bytes
    assert runtime == 84_072  # docs/derivations/uccl_ep.md §4.1
    rdma_rows = [b for b in u.buffers if b.name.startswith("RDMA buffer")]
    placeholder = sum(b.num_bytes for b in rdma_rows) - u.quantity("num_rdma_bytes")
    assert placeholder == (1 if u.quantity("num_rdma_bytes") == 0 else 0)
    hint_difference = u.quantity("num_rdma_bytes") - p.quantity("num_rdma_bytes")
    assert (hint_difference == 0) is same_rdma
    assert uccl.num_bytes - plain.num_bytes == runtime + placeholder + hint_difference


@pytest.mark.parametrize("budget_mib", [1024, 2100, 2200, 4096])
def test_vllm_ht_budget_value_fits_with_the_workspace(budget_mib):
    """``VLLM_DEEPEP_BUFFER_SIZE_MB`` goal=budget: the engine run with the recommended value fits the
    budget, and one MiB more does not (the constructor's 32 MiB workspace and metadata included)."""
    budget = budget_mib * MiB
    flags = dict(VLLM_HT)
    rec = report("vllm", model="deepseek-v3", num_ranks=16, flags=flags, budget=budget).recommendation(
        "VLLM_DEEPEP_BUFFER_SIZE_MB", "budget")
    at = lambda mb: report("vllm", model="deepseek-v3", num_ranks=16, flags=flags,  # noqa: E731
                           env={"VLLM_DEEPEP_BUFFER_SIZE_MB": str(mb)}).num_bytes
    if rec.value is None:
        assert at(0) > budget
        return
    assert at(rec.value) == rec.num_bytes <= budget < at(rec.value + 1)
    fits = report("vllm", model="deepseek-v3", num_ranks=16, budget=budget, flags=flags,
                  env={"VLLM_DEEPEP_BUFFER_SIZE_MB": str(rec.value)})
    over = report("vllm", model="deepseek-v3", num_ranks=16, budget=budget, flags=flags,
                  env={"VLLM_DEEPEP_BUFFER_SIZE_MB": str(rec.value + 1)})
    assert "vllm.over-budget" not in {f.code for f in fits.findings}
    assert "vllm.over-budget" in {f.code for f in over.findings}
