"""Speed of ``epbuf.sweep.sweep`` on 100,000 configurations, per backend, against a plain
loop over the public API (``epbuf.report(plan, backend)``) on the same configurations.

The plain loop is timed on an evenly spaced sample of the same grid (a full loop would
take minutes) and compared per configuration, so the ratio is measured in the same run.

    python benchmarks/sweep_speed.py [--backends ascend,deepep-v2] [--sample 2000]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from epbuf import EpbufError, Plan, report  # noqa: E402
from epbuf.plan import backend_names  # noqa: E402
from epbuf.sweep import sweep  # noqa: E402

GRIDS = {  # 100,000 configurations each: 10 rank counts x 10,000 token counts
    "num_ranks": [1, 2, 4, 8, 16, 24, 32, 48, 64, 128],
    "num_max_tokens_per_rank": list(range(1, 10_001)),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default=",".join(backend_names()))
    ap.add_argument("--sample", type=int, default=2000, help="configurations in the plain-loop sample")
    args = ap.parse_args(argv)
    base = Plan(hidden=7168, num_topk=8, num_experts=384, num_ranks=8, num_max_tokens_per_rank=1,
                num_ranks_per_node=None)
    combos = list(itertools.product(GRIDS["num_ranks"], GRIDS["num_max_tokens_per_rank"]))
    step = max(1, len(combos) // args.sample)
    sample = combos[::step]
    print(f"python {sys.version.split()[0]}; grid {len(combos):,} configurations (ranks x tokens), "
          f"plain-loop sample {len(sample):,}")
    print(f"{'backend':10} {'sweep 100k (s)':>15} {'us/config':>10} {'report() us/config':>19} {'speed-up':>9}")
    for backend in args.backends.split(","):
        start = time.perf_counter()
        result = sweep(base, GRIDS, [backend])
        swept = time.perf_counter() - start
        assert len(result.rows) == len(combos)
        start = time.perf_counter()
        for ranks, tokens in sample:
            try:
                report(base.replace(num_ranks=ranks, num_max_tokens_per_rank=tokens), backend)
            except EpbufError:
                pass
        looped = (time.perf_counter() - start) / len(sample)
        per = swept / len(combos)
        print(f"{backend:10} {swept:15.2f} {per * 1e6:10.1f} {looped * 1e6:19.1f} {looped / per:8.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
