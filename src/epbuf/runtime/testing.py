"""Run a function on N gloo ranks on this machine: for tests of MoE code and benchmarks.

:func:`run_gloo` spawns ``num_ranks`` fresh processes, joins them into one gloo process
group, calls ``fn(rank, num_ranks, *args)`` in each and returns the results in rank
order. No TCP port is chosen by the caller, so parallel runs cannot collide: the
rendezvous is a ``FileStore`` in a private temporary directory and gloo connects its
pairs on ports the OS assigns, over the loopback interface (``GLOO_SOCKET_IFNAME``,
unless set), each with ``cpu_count // num_ranks`` torch threads. The whole run is bounded
by ``timeout``; every collective by ``collective_timeout``. A rank that raises makes :func:`run_gloo` raise
:class:`RankFailure` with that rank's traceback; ranks still running are killed.

``fn`` must be importable by the spawned processes (a module-level function).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
import traceback

from ..errors import EpbufError

__all__ = ["run_gloo", "RankFailure", "check_seconds"]


class RankFailure(EpbufError):
    """A rank raised, exited without a result, or did not finish within the deadline."""


def _loopback() -> str | None:
    return {"linux": "lo", "darwin": "lo0"}.get(sys.platform)


#: The longest timeout accepted, in seconds (one day): every wait is bounded, so a dead peer
#: never hangs the caller; beyond ``datetime.timedelta``'s range a timeout would not convert.
MAX_TIMEOUT_SECONDS = 86_400


def check_seconds(argument: str, value: object) -> float:
    """``value`` as float seconds when it is a real number in ``(0, MAX_TIMEOUT_SECONDS]``,
    else :class:`~epbuf.errors.InvalidArgumentError` naming ``argument`` (an audit found
    ``timeout=inf`` raising a bare ``OverflowError``)."""
    from ..errors import ArgumentProblem, InvalidArgumentError

    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= MAX_TIMEOUT_SECONDS:
        return float(value)
    raise InvalidArgumentError([ArgumentProblem(argument, value, f"seconds, > 0 and <= {MAX_TIMEOUT_SECONDS:,} "
                                                                 "(every wait is bounded)")])


def _worker(fn, rank: int, num_ranks: int, store: str, queue, args: tuple, collective_timeout: float) -> None:
    if _loopback() and "GLOO_SOCKET_IFNAME" not in os.environ:
        os.environ["GLOO_SOCKET_IFNAME"] = _loopback()
    try:
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        # The ranks share the machine's cores: more intra-op threads than cores per rank makes
        # OpenMP threads spin against each other (a 2-core run went 60x slower).
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // num_ranks))
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=num_ranks,
                                timeout=timedelta(seconds=collective_timeout))
        try:
            result = fn(rank, num_ranks, *args)
        finally:
            dist.destroy_process_group()
        queue.put((rank, True, result))
    except BaseException:  # report everything, then exit
        queue.put((rank, False, traceback.format_exc()))


def run_gloo(fn, num_ranks: int, *args, timeout: float = 120.0, collective_timeout: float = 60.0,
             may_exit: tuple = ()) -> list:
    """``[fn(0, num_ranks, *args), ..., fn(num_ranks - 1, num_ranks, *args)]``, each in its own
    process of one gloo group.

    Args:
        may_exit: ranks allowed to end without a result (their entry is ``None``), for
            tests of a peer that dies.

    Raises:
        RankFailure: a rank raised (its traceback is in the message), exited without a
            result, or the run outlasted ``timeout`` seconds.
    """
    from ..errors import check_int

    check_int("num_ranks", num_ranks, 1)
    timeout, collective_timeout = check_seconds("timeout", timeout), check_seconds("collective_timeout",
                                                                                   collective_timeout)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    results: dict[int, tuple[bool, object]] = {}
    with tempfile.TemporaryDirectory(prefix="epbuf-gloo-") as tmp:
        store = os.path.join(tmp, "rendezvous")
        processes = [context.Process(target=_worker, args=(fn, r, num_ranks, store, queue, args, collective_timeout),
                                     daemon=True) for r in range(num_ranks)]
        for p in processes:
            p.start()
        deadline = time.monotonic() + timeout
        try:
            while len(results) < num_ranks and time.monotonic() < deadline:
                try:
                    rank, ok, payload = queue.get(timeout=0.1)
                    results[rank] = (ok, payload)
                    if not ok:  # the others will fail or time out too: give them 2 s to report
                        deadline = min(deadline, time.monotonic() + 2.0)
                except Exception:  # queue.Empty: see who is still alive
                    dead = [r for r, p in enumerate(processes) if r not in results and p.exitcode is not None]
                    if dead and all(r in may_exit for r in dead):
                        for r in dead:
                            results[r] = (True, None)
                    elif dead:
                        time.sleep(0.2)  # a result may still be in the pipe
                        while not queue.empty():
                            rank, ok, payload = queue.get()
                            results[rank] = (ok, payload)
                        missing = [r for r in dead if r not in results]
                        if missing:
                            raise RankFailure(f"rank(s) {missing} exited (codes "
                                              f"{[processes[r].exitcode for r in missing]}) without a result")
        finally:
            for p in processes:
                if p.is_alive() and (len(results) < num_ranks):
                    p.kill()
            for p in processes:
                p.join(timeout=10)
    failures = [f"rank {r}:\n{payload}" for r, (ok, payload) in sorted(results.items()) if not ok]
    if failures:
        raise RankFailure("\n".join(failures))
    if len(results) < num_ranks:
        missing = sorted(set(range(num_ranks)) - set(results))
        raise RankFailure(f"rank(s) {missing} did not finish within {timeout:g} s")
    return [results[r][1] for r in range(num_ranks)]
