"""Cold start of the installed ``epbuf hint`` versus the floor of any argparse CLI.

The commands run alternately in the same clean virtual environment, so machine noise
hits them alike; the figure is the ratio of their medians to the floor ``python -c 'import
argparse'`` (target: ``epbuf hint`` <= 1.5, aim <= 1.3); the ratio of the fastest runs is
printed too, as it moves less when other jobs share the machine, and the ratio of median CPU
times (user + system of the child), which moves least. A one-parser argparse CLI is listed for
context: building any ``ArgumentParser`` calls gettext, which imports ``locale``.

    python benchmarks/cold_start.py                # builds a fresh venv with epbuf installed
    python benchmarks/cold_start.py --venv .venv   # or reuse one that has epbuf installed
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    py = where / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(ROOT)], check=True)
    return where


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def cpu_timed(cmd: list[str]) -> tuple[float, float]:
    """``(wall seconds, CPU seconds)`` of one run: the child's user + system time, which other
    jobs on a shared machine change far less than the wall time they delay it by."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = timed(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=Path, help="a venv with epbuf installed (default: build a fresh one)")
    ap.add_argument("--runs", type=int, default=60, help="runs of each command (default 60)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        venv = args.venv or make_venv(Path(tmp) / "venv")
        bin_dir = venv / "bin"
        commands = {
            "epbuf hint": [str(bin_dir / "epbuf"), "hint"],
            "epbuf hint --json": [str(bin_dir / "epbuf"), "hint", "--json"],
            "argparse CLI (one parser)": [str(bin_dir / "python"), "-c",
                                          "import argparse; argparse.ArgumentParser(prog='x').parse_args([])"],
            "python -c 'import argparse'": [str(bin_dir / "python"), "-c", "import argparse"],
        }
        for cmd in commands.values():  # warm the page cache and write .pyc files
            timed(cmd)
        samples: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, cmd in commands.items():
                wall, used = cpu_timed(cmd)
                samples[name].append(wall)
                cpu[name].append(used)

    base = "python -c 'import argparse'"
    floor, floor_min, floor_cpu = statistics.median(samples[base]), min(samples[base]), statistics.median(cpu[base])
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, {args.runs} alternating runs each"
          f"; load average {os.getloadavg()[0]:.1f}")
    print(f"{'command':32} {'median ms':>10} {'ratio':>6} {'min ms':>7} {'ratio':>6} {'CPU ms':>7} {'ratio':>6}")
    for name, values in samples.items():
        median, fastest, used = statistics.median(values), min(values), statistics.median(cpu[name])
        print(f"{name:32} {median * 1000:10.1f} {median / floor:6.2f} {fastest * 1000:7.1f} {fastest / floor_min:6.2f}"
              f" {used * 1000:7.1f} {used / floor_cpu:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
