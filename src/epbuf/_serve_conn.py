"""One connection of ``epbuf serve`` (:mod:`epbuf.serve`): admit it or answer 503, read the
request within its time, answer the page's files on the event loop, and run an API request
in the worker pool, watching the client: a request whose client hung up is stopped and not
answered; one that computes past the server's time limit is stopped and answered 422."""

from __future__ import annotations

import asyncio
import threading
import time

from ._serve_http import (
    _STATIC, HEAVY, Refusal, close_gracefully, echo, error_body, is_loopback, read_request, response,
)

__all__ = ["handle_connection", "Stopped"]

_JSON = "application/json"


class Stopped(Exception):
    """Raised inside a running command (through its progress check) to stop it."""


def _now() -> float:
    return time.monotonic()


async def handle_connection(server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        await _connection(server, reader, writer)
    except asyncio.CancelledError:  # the server stops: end quietly (asyncio's stream callback
        writer.close()  # would report a cancelled task as an error)


async def _connection(server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    if server.connections >= server.max_connections:
        await _busy(server, reader, writer, f"too many connections ({server.max_connections:,} open); try again")
        return
    server.connections += 1
    try:
        await _exchange(server, reader, writer)
    except (ConnectionError, OSError, asyncio.IncompleteReadError):
        pass  # the client went away
    except asyncio.CancelledError:
        raise
    except Exception:  # a bug: the traceback to the terminal, the connection closed
        import traceback

        server.write_log(f"epbuf serve: internal error\n{traceback.format_exc()}")
    finally:
        server.connections -= 1
    await close_gracefully(writer, reader)


async def _busy(server, reader, writer, message: str) -> None:
    """503 with every header, after reading what the client sent (so the answer arrives)."""
    try:
        await asyncio.wait_for(read_request(reader, 0), 1.0)
    except (Refusal, asyncio.TimeoutError, ConnectionError, OSError, asyncio.IncompleteReadError):
        pass
    try:
        writer.write(response(503, _JSON, error_body(message), {"Retry-After": "1"}))
    except (ConnectionError, OSError):
        pass
    server.write_log(f"{_peer(writer)} - busy: 503\n")
    await close_gracefully(writer, reader, linger=0.5)


def _peer(writer) -> str:
    peer = writer.get_extra_info("peername")
    return str(peer[0]) if peer else "-"


def _send(server, writer, request, status: int, content_type: str, body: bytes, headers: dict | None = None) -> None:
    head = request is not None and request.method == "HEAD"
    writer.write(response(status, content_type, body, headers, head=head))
    line = f"{request.method} {request.target[:200]}" if request is not None else "-"
    server.write_log(f"{_peer(writer)} - \"{line}\" {status} {len(body)}\n")


async def _exchange(server, reader, writer) -> None:
    from .webapi import MAX_BODY_BYTES

    try:
        request = await asyncio.wait_for(read_request(reader, MAX_BODY_BYTES), server.request_timeout)
    except asyncio.TimeoutError:
        if reader.at_eof():
            return
        _send(server, writer, None, 408, _JSON,
              error_body(f"the request did not arrive within {server.request_timeout:g} s (line, headers and body)"))
        return
    except Refusal as refusal:
        if not refusal.silent:
            _send(server, writer, None, refusal.status, _JSON, error_body(str(refusal)))
        return
    if not request.target.startswith("/api/"):
        _route(server, writer, request)
    elif _host_ok(server, writer, request):
        await _api(server, reader, writer, request)


def _host_ok(server, writer, request) -> bool:
    if not server.loopback_only:
        return True
    host = request.headers.get("host", "")
    name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]", 1)[0] + "]"
    if host and not is_loopback(name):
        _send(server, writer, request, 403, _JSON, error_body(
            f"Host {echo(host, 80)} is not this machine's loopback name; the server listens on loopback only "
            "(open it as http://127.0.0.1:PORT/)"))
        return False
    return True


def _route(server, writer, request) -> None:
    """The page's files (and refusals of anything else outside /api/)."""
    from urllib.parse import urlsplit

    if not _host_ok(server, writer, request):
        return
    path = urlsplit(request.target).path
    if request.method not in ("GET", "HEAD"):
        status = 405 if request.method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS") else 501
        _send(server, writer, request, status, _JSON,
              error_body(f"{request.method} is not allowed on {echo(path, 80)}; use GET"))
        return
    entry = _STATIC.get(path)
    if entry is None:
        _send(server, writer, request, 404, _JSON,
              error_body(f"nothing at {echo(path, 80)}; the page is at / and the API under /api/"))
        return
    name, content_type = entry
    _send(server, writer, request, 200, content_type, server.static[name])


async def _api(server, reader, writer, request) -> None:
    from urllib.parse import urlsplit

    from . import webapi

    if request.method not in ("GET", "POST", "HEAD"):
        status = 405 if request.method in ("PUT", "DELETE", "PATCH", "OPTIONS") else 501
        _send(server, writer, request, status, _JSON, error_body(f"{request.method} is not allowed; use GET or POST"))
        return
    parts = urlsplit(request.target)
    kind = "heavy" if parts.path[len("/api/"):] in HEAVY else "quick"
    if server.pending[kind] >= server.max_pending[kind]:
        _send(server, writer, request, 503, _JSON, error_body(_busy_line(server.pending[kind])), {"Retry-After": "1"})
        return
    stop = threading.Event()
    deadline = [None]
    limit = server.time_limit
    queued = _now()

    def check() -> None:
        if stop.is_set():
            raise Stopped()
        if deadline[0] is not None and _now() > deadline[0]:
            raise Stopped()

    def work():
        if stop.is_set():
            raise Stopped()
        if _now() - queued > server.max_wait:
            return webapi.error_response(503, _busy_line(server.pending[kind]), {"Retry-After": "1"})
        deadline[0] = _now() + limit
        method = "GET" if request.method == "HEAD" else request.method
        return webapi.handle(method, parts.path, parts.query, request.body, check=check)

    loop = asyncio.get_running_loop()
    server.pending[kind] += 1
    server.stops.add(stop)
    future = loop.run_in_executor(server.pools[kind], work)

    def done(_):
        server.pending[kind] -= 1
        server.stops.discard(stop)

    future.add_done_callback(done)
    watch = asyncio.ensure_future(reader.read(1))
    try:
        answer = await _wait(future, watch, deadline, stop)
    finally:
        watch.cancel()
    if answer is None:
        server.write_log(f"{_peer(writer)} - \"{request.method} {request.target[:200]}\" abandoned: the client left\n")
        return
    if answer == "late":
        _send(server, writer, request, 422, _JSON, error_body(_late(limit)))
        return
    try:
        result = future.result()
    except Stopped:
        _send(server, writer, request, 422, _JSON, error_body(_late(limit)))
        return
    except Exception:
        import traceback

        server.write_log(f"epbuf serve: internal error on {request.target[:200]!r}\n{traceback.format_exc()}")
        _send(server, writer, request, 500, _JSON,
              error_body("internal error (the server's terminal has the details); please report it"))
        return
    _send(server, writer, request, result.status, result.content_type, result.body, result.headers)


def _busy_line(pending: int) -> str:
    return f"busy: {pending:,} requests are waiting for the server's workers; try again in a moment"


def _late(limit: float) -> str:
    return (f"stopped after the server's limit of {limit:g} s of computing per request (epbuf serve --time-limit); "
            "narrow the lists or ranges, or run the command line, which has no limit")


async def _wait(future, watch, started: list, stop: threading.Event):
    """``"done"``; ``None`` when the client left first; ``"late"`` once the command has run past
    its deadline (``started[0]``, set when a worker takes it: time queued does not count)."""
    waiting = {future, watch}
    while True:
        # Woken by the answer or the client; else when the deadline passes (once a worker has
        # the request), or each second while it waits for one.
        timeout = 1.0 if started[0] is None else max(0.05, started[0] + 0.5 - _now())
        done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if future in done:
            return "done"
        if watch in done:
            waiting = {future}
            data = b""
            try:
                data = watch.result()
            except (ConnectionError, OSError):
                pass
            if not data:  # end of stream or a reset: the client left
                stop.set()
                return None
            # extra bytes after the request are ignored
        if started[0] is not None and _now() > started[0] + 0.5:
            stop.set()
            return "late"
