"""Load on ``epbuf serve`` over loopback: a burst of concurrent requests, a request behind idle
connections, and ``/api/hint`` after abandoned maximal sweeps (issue 20's targets).

    python benchmarks/serve_load.py [--burst 500] [--idle 100] [--sweeps 4] [--baseline]

starts ``epbuf serve --port 0`` in a subprocess (``--baseline``: the stdlib
ThreadingHTTPServer + lock design it replaced, at the commit before it, when given
``--baseline-python PATH`` of a venv that has it) and prints, per scenario, what every
request got (HTTP status, reset, timeout) and the latencies. Counts and times are bounded:
every socket has a timeout, and the whole run ends by itself.

tests/test_serve_load.py runs the same functions at smaller counts.
"""

from __future__ import annotations

import asyncio
import time

SWEEP = "/api/sweep?ranks=8:200000:%2B8&tokens=4096&model=deepseek-v3&device=h200"


async def _one(host: str, port: int, target: str, timeout: float) -> tuple[str, float, bytes]:
    """``(outcome, seconds, head)``: outcome is the HTTP status, ``reset``, ``refused`` or ``timeout``."""
    start = time.monotonic()
    writer = None
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        writer.write(f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), max(0.1, timeout - (time.monotonic() - start)))
        if not data:
            return "reset", time.monotonic() - start, b""
        head = data.partition(b"\r\n\r\n")[0]
        return head.split(b" ", 2)[1].decode(), time.monotonic() - start, head
    except ConnectionResetError:
        return "reset", time.monotonic() - start, b""
    except ConnectionRefusedError:
        return "refused", time.monotonic() - start, b""
    except (asyncio.TimeoutError, TimeoutError):
        return "timeout", time.monotonic() - start, b""
    except OSError as error:
        return f"error {error.errno}", time.monotonic() - start, b""
    finally:
        if writer is not None:
            writer.close()


def _summary(results: list[tuple[str, float, bytes]]) -> dict:
    times = sorted(t for _, t, _ in results)
    counts: dict[str, int] = {}
    for outcome, _, _ in results:
        counts[outcome] = counts.get(outcome, 0) + 1
    p = lambda q: times[min(len(times) - 1, int(q * len(times)))] if times else 0.0  # noqa: E731
    with_headers = all(b"Content-Security-Policy:" in head and b"X-Content-Type-Options: nosniff" in head
                       for outcome, _, head in results if outcome == "503")
    return {"requests": len(results), "outcomes": counts, "p50_s": p(0.50), "p99_s": p(0.99), "max_s": times[-1],
            "503_with_headers": with_headers}


def burst(host: str, port: int, count: int = 500, target: str = "/api/hint?model=deepseek-v3&ranks=64&device=h200",
          timeout: float = 60.0) -> dict:
    """``count`` requests started at once; every one's outcome and the latency percentiles."""
    async def main():
        return await asyncio.gather(*[_one(host, port, target, timeout) for _ in range(count)])

    return _summary(asyncio.run(main()))


def behind_idle(host: str, port: int, idle: int = 100, target: str = "/api/hint", timeout: float = 30.0) -> dict:
    """``idle`` connections that send nothing, then one request: its outcome and seconds."""
    import socket

    sockets = []
    try:
        for _ in range(idle):
            sockets.append(socket.create_connection((host, port), timeout=10))
        time.sleep(0.2)
        outcome, seconds, _ = asyncio.run(_one(host, port, target, timeout))
    finally:
        for s in sockets:
            s.close()
    return {"idle": idle, "outcome": outcome, "seconds": seconds}


def after_abandoned_sweeps(host: str, port: int, sweeps: int = 4, target: str = SWEEP, leave_after: float = 0.2,
                           timeout: float = 60.0) -> dict:
    """``sweeps`` requests for ``target`` whose clients hang up after ``leave_after`` s, then
    ``/api/hint``: its outcome and seconds."""
    import socket

    sockets = []
    for _ in range(sweeps):
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        sockets.append(s)
    time.sleep(leave_after)
    for s in sockets:
        s.close()
    outcome, seconds, _ = asyncio.run(_one(host, port, "/api/hint", timeout))
    return {"sweeps": sweeps, "outcome": outcome, "seconds": seconds}


def _start(python: str, cwd: str | None = None):
    import subprocess

    process = subprocess.Popen([python, "-m", "epbuf", "serve", "--port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, cwd=cwd)
    line = process.stdout.readline()
    port = int(line.split()[2].rstrip("/").rsplit(":", 1)[1])
    return process, port


def main() -> None:
    import argparse
    import json
    import sys

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--burst", type=int, default=500)
    p.add_argument("--idle", type=int, default=100)
    p.add_argument("--sweeps", type=int, default=4)
    p.add_argument("--python", default=sys.executable, help="the interpreter whose epbuf serves")
    p.add_argument("--cwd", help="run the server from this folder (a checkout of another commit)")
    args = p.parse_args()
    for name, run in (("burst", lambda port: burst("127.0.0.1", port, args.burst)),
                      ("behind_idle", lambda port: behind_idle("127.0.0.1", port, args.idle)),
                      ("after_abandoned_sweeps", lambda port: after_abandoned_sweeps("127.0.0.1", port, args.sweeps))):
        process, port = _start(args.python, args.cwd)  # a fresh server per scenario
        try:
            print(name, json.dumps(run(port)), flush=True)
        finally:
            process.kill()
            process.wait()
            process.stdout.close()


if __name__ == "__main__":
    main()
