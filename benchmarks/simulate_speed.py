"""``epbuf simulate`` speed: 1,000,000 tokens x top-8 over 256 experts on 64 ranks.

Measures, in one run on this machine:

* the vectorized routing counts (``epbuf.simulate.counts.RoutingStats``: lane comparisons
  and one ``np.bincount``) against a straightforward per-rank loop computing the same
  tables the way DeepEP's test scripts count them (``reference_counts``: for every source
  rank, ``(topk_idx == e).sum()`` per expert and ``(rank_idx == d).any(-1).sum()`` per
  destination), and checks that both agree;
* the whole ``simulate()`` (report, counts, occupancy, traffic, benchmark accounting,
  time estimate) per backend, and the routing generation on its own;
* peak memory traced by ``tracemalloc`` (numpy reports its buffers to it) during
  ``simulate()``, against the routing's own size and against a ``[tokens, experts]`` matrix.

Run: ``python benchmarks/simulate_speed.py [--repeat N]``. Figures in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import tracemalloc

import numpy as np

import epbuf
from epbuf.routing import generate
from epbuf.simulate import simulate
from epbuf.simulate.counts import RoutingStats, reference_counts
from epbuf.simulate.links import get_links

RANKS, TOKENS_PER_RANK, EXPERTS, TOPK = 64, 15_625, 256, 8  # 64 x 15,625 = 1,000,000 tokens


def timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per measurement (median; default 5)")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} cores; "
          f"{RANKS} ranks x {TOKENS_PER_RANK:,} tokens = {RANKS * TOKENS_PER_RANK:,} tokens, top-{TOPK} of {EXPERTS}")

    t_gen, routing = timed(lambda: generate("uniform", num_ranks=RANKS, num_tokens=TOKENS_PER_RANK,
                                            num_experts=EXPERTS, num_topk=TOPK, seed=0), args.repeat)
    idx = routing.topk_idx
    print(f"routing generation (uniform, Floyd + permutation table): {t_gen:.3f} s")

    t_fast, fast = timed(lambda: RoutingStats(idx, EXPERTS, 8), args.repeat)
    t_loop, ref = timed(lambda: reference_counts(idx, EXPERTS, 8), max(1, args.repeat // 2))
    for name, table in ref.items():
        assert np.array_equal(getattr(fast, name), table), name
    print(f"\n{'routing counts':<34}{'median s':>10}{'speed-up':>10}")
    print(f"{'per-rank loop (DeepEP-test style)':<34}{t_loop:>10.3f}{1.0:>10.1f}")
    print(f"{'vectorized (RoutingStats)':<34}{t_fast:>10.3f}{t_loop / t_fast:>10.1f}")

    print(f"\n{'simulate(), whole pipeline':<34}{'median s':>10}{'peak traced MiB':>17}")
    for backend in ("ascend", "deepep-v2", "deepep-v1", "deepep-ll"):
        plan = epbuf.Plan(hidden=7168, num_topk=TOPK, num_experts=EXPERTS, num_ranks=RANKS,
                          num_max_tokens_per_rank=TOKENS_PER_RANK, num_ranks_per_node=8)
        links = get_links("h800")
        t_sim, _ = timed(lambda: simulate(plan, backend, routing, links=links), args.repeat)
        tracemalloc.start()
        simulate(plan, backend, routing, links=links)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"{backend:<34}{t_sim:>10.3f}{peak / 2**20:>17.1f}")
    print(f"\nrouting topk_idx: {idx.nbytes / 2**20:.1f} MiB (int32 [ranks, tokens, top-k]); a float32 "
          f"[tokens, experts] score matrix would be {RANKS * TOKENS_PER_RANK * EXPERTS * 4 / 2**20:,.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
