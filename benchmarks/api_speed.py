"""Speed of the upstream-named size functions against the bare formula written as plain Python.

Each case is ``(name, epbuf callable, bare-formula callable, args)``: both are called with
``*args`` alternately in the same run, their results must be the same integer, and the
figure is ``speed ratio = bare time / epbuf time`` (target: >= 0.3, i.e. validation and
version handling cost at most ~3x the arithmetic itself).

    python benchmarks/api_speed.py [--repeat 7] [--number 20000]
"""

from __future__ import annotations

import argparse
import sys
import timeit

from epbuf.backends import deepep_v1


# --- bare formulas: upstream's lines at main (dd758ca) transcribed to Python, nothing else ----
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

CASES = [
    ("deepep_v1.Config.get_nvl_buffer_size_hint", _CONFIG.get_nvl_buffer_size_hint,
     lambda hb, r: bare_nvl_hint(24, 512, hb, r), (7168, 16)),
    ("deepep_v1.Config.get_rdma_buffer_size_hint", _CONFIG.get_rdma_buffer_size_hint,
     lambda hb, r: bare_rdma_hint(24, 128, hb, r), (7168, 16)),
    ("deepep_v1.get_low_latency_rdma_size_hint", deepep_v1.get_low_latency_rdma_size_hint, bare_ll_hint,
     (128, 7168, 16, 288)),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="timing rounds per function (best is kept)")
    ap.add_argument("--number", type=int, default=20000, help="calls per round")
    args = ap.parse_args(argv)
    print(f"python {sys.version.split()[0]}; best of {args.repeat} x {args.number:,} calls, alternating")
    print(f"{'function':48} {'epbuf ns':>9} {'bare ns':>8} {'speed ratio':>11}")
    worst = float("inf")
    for name, fn, bare, fn_args in CASES:
        got, want = fn(*fn_args), bare(*fn_args)
        if got != want or type(got) is not int:
            raise SystemExit(f"{name}{fn_args}: epbuf {got!r} != bare formula {want!r}")
        epbuf_t, bare_t = [], []
        for _ in range(args.repeat):
            epbuf_t.append(timeit.timeit(lambda: fn(*fn_args), number=args.number))
            bare_t.append(timeit.timeit(lambda: bare(*fn_args), number=args.number))
        e, b = min(epbuf_t) / args.number * 1e9, min(bare_t) / args.number * 1e9
        worst = min(worst, b / e)
        print(f"{name:48} {e:9.0f} {b:8.0f} {b / e:11.2f}")
    print(f"lowest speed ratio {worst:.2f} (target >= 0.30)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
