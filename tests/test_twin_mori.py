"""epbuf.twin.mori as ``mori``: MORI-EP's own test assertions (tests/python/ops/
dispatch_combine_test_utils.py @624002c: check_dispatch_result maps every received row back through
get_dispatch_src_token_pos and compares token, weights, scales and indices exactly;
check_combine_result compares the combine to the input times its distinct ranks, and the combined
weights) on 2 gloo ranks, BF16, FP8 (E4M3) tokens, the fp8_direct_cast combine, a receive cap and
-1 sentinels; hostile arguments raise one clear exception on every rank. Rank code:
tests/_twin_mori_cases.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent))  # the spawned ranks import _twin_mori_cases from here

from epbuf.runtime.testing import run_gloo  # noqa: E402


def _expected_received(rank: int, seed: int, sentinel: bool = False) -> int:
    """Tokens rank ``rank`` receives in MORI's test data: one per (source token, distinct rank)."""
    import torch

    import _twin_mori_cases as cases

    cfg = cases.config(rank, 2, torch.bfloat16)
    _, indices, *_ = cases.gen_test_data(cfg, seed, sentinel)
    return sum(int(((idx >= 0) & (idx // cfg.num_experts_per_rank == rank)).any(1).sum()) for idx in indices)


def test_two_ranks_pass_moris_assertions_and_refuse_on_every_rank():
    import _twin_mori_cases as cases

    results = run_gloo(cases.everything, 2, timeout=240, collective_timeout=30)
    for rank, result in enumerate(results):
        checked = result["checked"]
        assert sorted(checked) == ["bf16", "bf16 cap", "bf16 fp8_direct_cast", "bf16 sentinel", "fp8"]
        for key, value in checked.items():
            if key == "bf16 sentinel":
                assert value == [_expected_received(rank, 3, True)]
            else:
                assert value == [_expected_received(rank, 1), _expected_received(rank, 2)] and min(value) > 0, key
    untimed = [{k: v.rsplit(" [", 1)[0] for k, v in result["refusals"].items()} for result in results]
    assert untimed[0] == untimed[1]  # the same exception, word for word, on every rank
    r = untimed[0]
    assert r["accepted"] == r["combine accepted"] == "accepted"
    for name, words in {
        "combine before dispatch": "a dispatch before the combine",
        "tokens > max_num_inp_token_per_rank": "rank 1 of 2: input.size(0) <= max_num_inp_token_per_rank failed",
        "int64 indices": "indices is torch.int64",
        "expert out of range": "100 of 8 experts",
        "float16 input": "input is torch.float16",
        "hidden too wide": "4096 B > 1024 B",
        "receive cap": "total received tokens <= max_num_tokens_to_recv() failed",
        "combine int64 indices": "indices is torch.int64",
        "wrong rank": "rank 0 of 2, the group has rank 1 of 2",
        "unknown quant_type": "invalid quant_type 'int4'",
        "max_tokens differs": "the ranks disagree on world_size",
        "zero top-k": "num_experts_per_token >= 1",
    }.items():
        assert r[name].startswith("UpstreamAssertion: ") and words in r[name], (name, r[name])


def test_install_gives_moris_module_names():
    import torch

    import epbuf.twin.mori as twin

    twin.install()
    import mori
    from mori.ops.dispatch_combine import EpDispatchCombineConfig, EpDispatchCombineKernelType, EpDispatchCombineOp

    assert mori.ops.EpDispatchCombineOp is EpDispatchCombineOp
    assert str(EpDispatchCombineKernelType.IntraNode) == "IntraNode" and EpDispatchCombineKernelType.InterNodeV1 == 2
    cfg = EpDispatchCombineConfig(torch.bfloat16, 0, 1, 64, 0, 4, 2, 8, 4, 2)
    assert (cfg.warp_num_per_block, cfg.block_num, cfg.quant_type, cfg.kernel_type) == (8, 80, "none", 0)
    for name in ("mori", "mori.ops", "mori.ops.dispatch_combine"):
        sys.modules.pop(name)
