"""Speed of the upstream-named size functions against the bare formula written as plain Python.

Each case pairs an epbuf function with the same arithmetic written out without checks, no
records, no layouts (what a user would paste from upstream into a script), and calls both
with the same arguments in the same run. The figure is the speed ratio
``time(bare) / time(epbuf)``: 1.0 means epbuf costs nothing extra, the target is >= 0.3
(issue 8: validation must not dominate). Both must return the same integer.

    python benchmarks/api_speed.py            # all cases
    python benchmarks/api_speed.py --quick    # fewer repeats

To add a case, append ``(name, epbuf callable, bare callable, args)`` to ``CASES``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from epbuf.backends import ascend
from epbuf.backends import deepep_v1
from epbuf.backends import deepep_v2 as v2

MiB2 = 2 * 1024 * 1024


def _a(x: int, b: int) -> int:
    return (x + b - 1) // b * b


# --- bare formulas (plain Python, no checks) --------------------------------------------------------
def bare_ascend_record(hidden_bytes, sf_bytes, topk, with_metadata=True):
    meta = topk * 4 + ((_a(topk * 8, 32) + 4) if with_metadata else 0)
    return hidden_bytes + (_a(sf_bytes, 32) if sf_bytes else 0) + _a(meta, 32)


def bare_ascend_dispatch(tokens, hidden, packs, topk, elem, ranks):
    return ranks * tokens * bare_ascend_record(hidden * elem, packs * 2, topk)


def bare_ascend_combine(ranks, tokens, hidden, topk):
    return min(topk, ranks) * tokens * bare_ascend_record(hidden * 2, 0, topk, False)


def bare_ascend_hint(ranks, tokens, hidden, topk, fp8):
    topk = topk or 32
    dispatch = ranks * tokens * bare_ascend_record(hidden * (1 if fp8 else 2), (hidden + 31) // 32 * 2 if fp8 else 0,
                                                   topk)
    combine = min(topk, ranks) * tokens * bare_ascend_record(hidden * 2, 0, topk, False)
    return _a(max(dispatch, combine), MiB2)


def bare_v2_record(hidden_bytes, sf_bytes, topk, with_metadata, rdma=64):
    meta = topk * 8 + ((4 + 4 * topk) if with_metadata else 0)
    return _a(_a(hidden_bytes, 32) + _a(sf_bytes, 32) + _a(meta, 32), rdma)


def bare_v2_dispatch(tokens, hidden, packs, topk, elem, so, su, nvlink):
    d = bare_v2_record(hidden * elem, packs * 4, topk, True)
    if so == 1:
        return ((0 if nvlink else 1) + so * su) * tokens * d
    return (su * so * tokens + tokens + so * (tokens + 1280)) * d


def bare_v2_combine(tokens, hidden, topk, so, su, nvlink, amr):
    c = bare_v2_record(hidden * 2, 0, topk, False)
    if so == 1:
        n = so * su
        return ((0 if nvlink else n) * tokens * (1 if amr else topk) + (min(n, topk) if amr else topk) * tokens) * c
    return ((min(su, topk) if amr else topk) * so * tokens + (min(so, topk) if amr else topk) * tokens
            + (1 if amr else topk) * so * (tokens + 1280)) * c


def bare_v2_logical(so, su, nvlink, tokens, hidden, topk, fp8, amr):
    topk = topk or 32
    elem, packs = (1, (hidden + 31) // 32) if fp8 else (2, 0)
    return _a(max(bare_v2_dispatch(tokens, hidden, packs, topk, elem, so, su, nvlink),
                  bare_v2_combine(tokens, hidden, topk, so, su, nvlink, amr)), MiB2)


def bare_v2_hint(num_ranks, nvl, tokens, hidden, topk, fp8, hybrid, amr):
    so, su = (num_ranks // nvl, nvl) if hybrid else (1, num_ranks)
    return bare_v2_logical(so, su, su == nvl, tokens, hidden, topk, fp8, amr)


def bare_v2_group_hint(group, tokens, hidden, topk=0, fp8=False, hybrid=True, amr=True):
    nodes, nvl = group if isinstance(group, tuple) else (1, group)
    return bare_v2_hint(nodes * nvl, nvl, tokens, hidden, topk, fp8, hybrid, amr)


# --- DeepEP V1 bare formulas: upstream's lines at main (dd758ca) transcribed to Python, nothing else ----
def bare_nvl_hint(num_sms, num_max_nvl_chunked_recv_tokens, hidden_bytes, num_ranks):
    """csrc/legacy/config.hpp:53-73 (kNumMaxTopK = kNumMaxScales = 128, topk_idx_t int64)."""
    num_rdma_ranks = max(num_ranks // 8, 1)
    num_nvl_ranks = min(num_ranks, 8)
    num_channels = num_sms // 2
    num_bytes = 0
    num_bytes += num_channels * num_nvl_ranks * (2 * num_rdma_ranks + 3) * 4
    num_bytes += num_channels * num_nvl_ranks * num_max_nvl_chunked_recv_tokens * hidden_bytes
    num_bytes += num_channels * num_nvl_ranks * num_max_nvl_chunked_recv_tokens * 8
    num_bytes += num_channels * num_nvl_ranks * num_max_nvl_chunked_recv_tokens * 128 * 8
    num_bytes += num_channels * num_nvl_ranks * num_max_nvl_chunked_recv_tokens * 128 * 4
    num_bytes += num_channels * num_nvl_ranks * num_max_nvl_chunked_recv_tokens * 128 * 4
    return ((num_bytes + 127) // 128) * 128


def bare_rdma_hint(num_sms, num_max_rdma_chunked_recv_tokens, hidden_bytes, num_ranks):
    """csrc/legacy/config.hpp:75-99."""
    if num_ranks <= 8:
        return 0
    num_rdma_ranks = num_ranks // 8
    num_channels = num_sms // 2
    num_bytes = 0
    num_bytes += num_channels * num_rdma_ranks * (8 * 2 + 2) * 2 * 4
    num_bytes += num_channels * num_rdma_ranks * num_max_rdma_chunked_recv_tokens * hidden_bytes * 2
    num_bytes += num_channels * num_rdma_ranks * num_max_rdma_chunked_recv_tokens * 8 * 2
    num_bytes += num_channels * num_rdma_ranks * num_max_rdma_chunked_recv_tokens * 128 * 8 * 2
    num_bytes += num_channels * num_rdma_ranks * num_max_rdma_chunked_recv_tokens * 128 * 4 * 2
    num_bytes += num_channels * num_rdma_ranks * num_max_rdma_chunked_recv_tokens * 128 * 4 * 2
    num_bytes += num_channels * num_rdma_ranks * num_max_rdma_chunked_recv_tokens * 16 * 2
    return ((num_bytes + 127) // 128) * 128


def bare_ll_hint(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts):
    """csrc/legacy/config.hpp:131-188 (LL5)."""
    num_scales = hidden // 128
    num_bytes_per_dispatch_msg = 16 + max(hidden * 2, hidden + num_scales * 4)
    num_bytes_per_combine_msg = num_scales * 4 + hidden * 2
    total_bytes = 0
    dispatch_send_buffer_bytes = num_max_dispatch_tokens_per_rank * num_bytes_per_dispatch_msg
    combine_send_buffer_bytes = num_experts * num_max_dispatch_tokens_per_rank * num_bytes_per_combine_msg
    send_buffer_bytes = max(dispatch_send_buffer_bytes, combine_send_buffer_bytes)
    total_bytes += send_buffer_bytes * 2
    dispatch_recv_data_buffer_bytes = num_experts * num_max_dispatch_tokens_per_rank * num_bytes_per_dispatch_msg
    combine_recv_buffer_bytes = num_experts * num_max_dispatch_tokens_per_rank * num_bytes_per_combine_msg
    recv_buffer_bytes = max(dispatch_recv_data_buffer_bytes, combine_recv_buffer_bytes)
    total_bytes += recv_buffer_bytes * 2
    signaling_buffer_bytes = num_experts * 4
    signaling_buffer_bytes_aligned = (signaling_buffer_bytes + 127) // 128 * 128
    total_bytes += signaling_buffer_bytes_aligned * 2
    return ((total_bytes + 128) // 128) * 128


_CONFIG = deepep_v1.Config(24, 8, 512, 16, 128)

# (name, epbuf callable, bare-formula callable, args)
CASES = [
    ("ascend.calculate_buffer_size", ascend.calculate_buffer_size, bare_ascend_hint, (8, 4096, 7168, 6, True)),
    ("ascend.get_dispatch_buffer_size", ascend.get_dispatch_buffer_size, bare_ascend_dispatch,
     (4096, 7168, 112, 6, 1, 8)),
    ("ascend.get_combine_buffer_size", ascend.get_combine_buffer_size, bare_ascend_combine, (8, 4096, 7168, 6)),
    ("deepep_v2.calculate_buffer_size", v2.calculate_buffer_size, bare_v2_hint, (32, 8, 4096, 7168, 8, True, True, True)),
    ("deepep_v2.calculate_buffer_size_logical", v2.calculate_buffer_size_logical, bare_v2_logical,
     (4, 8, True, 4096, 7168, 8, True, True)),
    ("deepep_v2.get_buffer_size_hint", v2.get_buffer_size_hint, bare_v2_group_hint, ((4, 8), 4096, 7168, 8, True)),
    ("deepep_v2.get_dispatch_buffer_size", v2.get_dispatch_buffer_size, bare_v2_dispatch,
     (4096, 7168, 224, 8, 1, 4, 8, True)),
    ("deepep_v2.get_combine_buffer_size", v2.get_combine_buffer_size, bare_v2_combine, (4096, 7168, 8, 4, 8, True, True)),
    ("deepep_v1.Config.get_nvl_buffer_size_hint", _CONFIG.get_nvl_buffer_size_hint,
     lambda hb, r: bare_nvl_hint(24, 512, hb, r), (7168, 16)),
    ("deepep_v1.Config.get_rdma_buffer_size_hint", _CONFIG.get_rdma_buffer_size_hint,
     lambda hb, r: bare_rdma_hint(24, 128, hb, r), (7168, 16)),
    ("deepep_v1.get_low_latency_rdma_size_hint", deepep_v1.get_low_latency_rdma_size_hint, bare_ll_hint,
     (128, 7168, 16, 288)),
]


def per_call_seconds(fn, args, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn(*args)
    return (time.perf_counter() - start) / number


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 repeats of 20,000 calls instead of 7 of 50,000")
    args = ap.parse_args(argv)
    repeats, number = (3, 20_000) if args.quick else (7, 50_000)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; best of {repeats} x {number:,} calls, "
          "alternating; ratio = bare time / epbuf time (target >= 0.30)")
    print(f"{'function':42} {'epbuf ns':>9} {'bare ns':>8} {'ratio':>6}")
    worst = 1.0
    for name, fn, bare, call_args in CASES:
        expected = bare(*call_args)
        if fn(*call_args) != expected:
            print(f"{name}: epbuf {fn(*call_args)} != bare {expected}", file=sys.stderr)
            return 1
        epbuf_times, bare_times = [], []
        for _ in range(repeats):
            epbuf_times.append(per_call_seconds(fn, call_args, number))
            bare_times.append(per_call_seconds(bare, call_args, number))
        t_epbuf, t_bare = min(epbuf_times), min(bare_times)
        ratio = t_bare / t_epbuf
        worst = min(worst, ratio)
        print(f"{name:42} {t_epbuf * 1e9:9.0f} {t_bare * 1e9:8.0f} {ratio:6.2f}")
    print(f"worst ratio {worst:.2f} ({'meets' if worst >= 0.3 else 'MISSES'} the 0.30 target)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
