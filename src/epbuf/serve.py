"""``epbuf serve``: the calculator as a web page and a JSON API, on the standard library.

One page (``epbuf/web/index.html``, ``app.js``, ``style.css``: plain files shipped in the
package, no CDN, no build step) and the API of :mod:`epbuf.webapi`, which returns the
documents of :mod:`epbuf.api`, the functions the command line's ``--json`` prints.

How it holds under load (``docs/background/server.md`` has the measurements):

* one asyncio event loop owns every socket: an idle or slow connection costs a coroutine,
  not a thread; the listen backlog is :data:`BACKLOG`, so a burst waits in the kernel
  instead of being reset;
* the request (line, headers, body) must arrive within ``request_timeout`` seconds, else
  the connection gets 408 and is closed;
* the commands run in two pools of threads: ``workers`` for the quick ones and
  :data:`HEAVY_WORKERS` for ``sweep`` and ``simulate``, so a long sweep never holds up a
  ``hint``; at most ``max_pending`` requests wait or run in a pool (:data:`MAX_HEAVY_PENDING`
  for the heavy one), and one that waited :data:`MAX_WAIT` seconds for a worker is not
  started; those, and connections past ``max_connections``, are answered 503 with every
  header (never a reset);
* a command may compute for ``time_limit`` seconds: then it is stopped (a sweep or a
  simulation between two steps) and the answer is 422 naming the limit; a request whose
  client hung up is stopped the same way and not answered.

Safety, by construction:

* binds to ``127.0.0.1`` (this machine only) unless told otherwise, and says so;
  ``--host 0.0.0.0`` prints a warning: there is no authentication. While bound to
  loopback, a request whose ``Host`` is not a loopback name is refused (DNS rebinding).
* invalid input is a 4xx with ``{"error": "<one line>"}`` whose echo of the input is
  bounded; a bug answers 500 with one line and logs the traceback on the server's terminal.
* no endpoint reads or writes a file: the page's files are read once, at start.
* every response sets a restrictive Content-Security-Policy and ``nosniff``.
"""

from __future__ import annotations

import sys
import threading

from ._serve_http import _STATIC, CSP, HEAVY, is_loopback
from .errors import EpbufError

__all__ = ["ServeError", "make_server", "serve", "announce", "url_of", "CSP", "BACKLOG", "HEAVY", "HEAVY_WORKERS",
           "MAX_CONNECTIONS", "MAX_HEAVY_PENDING", "MAX_PENDING", "MAX_WAIT", "REQUEST_TIMEOUT", "TIME_LIMIT",
           "WORKERS"]

#: Seconds a request (line, headers, body) may take to arrive.
REQUEST_TIMEOUT = 10.0
#: Seconds a command may compute before it is stopped (422 naming the limit).
TIME_LIMIT = 60.0
#: Open connections served at once; more are answered 503.
MAX_CONNECTIONS = 512
#: API requests waiting for or holding a worker of the quick pool; more are answered 503.
MAX_PENDING = 1024
#: Threads that run the quick commands.
WORKERS = 4
#: Threads that run them, and how many may wait or run there.
HEAVY_WORKERS = 2
MAX_HEAVY_PENDING = 16
#: Seconds a request may wait for a worker; a request that waited longer gets 503 instead.
MAX_WAIT = 3.0
#: The listen queue (the kernel caps it at net.core.somaxconn).
BACKLOG = 1024

class ServeError(EpbufError):
    """The server cannot start (address in use, bad host or port)."""


def _load_static() -> dict[str, bytes]:
    from importlib.resources import files

    folder = files("epbuf") / "web"
    return {name: (folder / name).read_bytes() for name, _ in set(_STATIC.values())}


class Server:
    """A bound server; :meth:`serve_forever` runs it (in any one thread), :meth:`shutdown` (from
    another) stops it and waits, :meth:`server_close` frees the socket."""

    def __init__(self, sock, *, request_timeout: float, time_limit: float, max_connections: int,
                 max_pending: int, workers: int, log) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.socket = sock
        self.server_address = sock.getsockname()
        self.request_timeout = request_timeout
        self.time_limit = time_limit
        self.max_connections = max_connections
        self.max_pending = {"quick": max_pending, "heavy": MAX_HEAVY_PENDING}
        self.max_wait = MAX_WAIT
        self.log = log
        self.static = _load_static()
        self.loopback_only = is_loopback(self.server_address[0])
        self.connections = 0
        self.pending = {"quick": 0, "heavy": 0}
        self.stops: set = set()  # the cancel events of the commands running now
        self.pools = {"quick": ThreadPoolExecutor(workers, thread_name_prefix="epbuf-serve"),
                      "heavy": ThreadPoolExecutor(HEAVY_WORKERS, thread_name_prefix="epbuf-serve-heavy")}
        self._loop = None
        self._stop = None
        self._finished = threading.Event()

    def serve_forever(self, poll_interval: float | None = None) -> None:
        import asyncio

        try:
            asyncio.run(self._main())
        finally:
            self._finished.set()

    async def _main(self) -> None:
        import asyncio

        from ._serve_conn import handle_connection
        from ._serve_http import MAX_LINE

        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(lambda r, w: handle_connection(self, r, w), sock=self.socket,
                                            backlog=BACKLOG, limit=MAX_LINE)
        try:
            await self._stop.wait()
        finally:
            for stop in list(self.stops):
                stop.set()
            server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` (running commands are told to stop) and wait for it."""
        loop = self._loop
        if loop is not None and not self._finished.is_set():
            try:
                loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:  # the loop has already closed
                pass
            self._finished.wait()

    def server_close(self) -> None:
        for stop in list(self.stops):
            stop.set()
        self.socket.close()
        for pool in self.pools.values():
            pool.shutdown(wait=False, cancel_futures=True)

    def write_log(self, text: str) -> None:
        if self.log is not None:
            try:
                self.log.write(text)
                self.log.flush()
            except (OSError, ValueError):
                pass


def make_server(host: str = "127.0.0.1", port: int = 8000, *, request_timeout: float = REQUEST_TIMEOUT,
                time_limit: float = TIME_LIMIT, max_connections: int = MAX_CONNECTIONS,
                max_pending: int = MAX_PENDING, workers: int = WORKERS, log=None) -> Server:
    """A bound, not yet serving server (``server.serve_forever()`` runs it; port 0 picks a
    free one: ``server.server_address``). ``log``: a text stream for the access log, or None.

    Raises:
        ServeError: the host or port is invalid or the address cannot be bound.
    """
    import socket

    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ServeError(f"--port = {port!r}: allowed 0..65535 (0 picks a free port)")
    if not isinstance(host, str) or not host.strip():
        raise ServeError(f"--host = {host!r}: give an address to listen on, e.g. 127.0.0.1")
    name = host.strip("[]")
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
    except (OSError, UnicodeError) as error:
        raise ServeError(f"--host {host} --port {port}: cannot listen ({getattr(error, 'strerror', None) or error})") \
            from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as error:
        sock.close()
        raise ServeError(f"--host {host} --port {port}: cannot listen ({error.strerror or error})") from None
    return Server(sock, request_timeout=request_timeout, time_limit=time_limit, max_connections=max_connections,
                  max_pending=max_pending, workers=workers, log=log)


def url_of(server: Server) -> str:
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    if host in ("0.0.0.0", "::"):
        shown = "127.0.0.1" if host == "0.0.0.0" else "[::1]"
    return f"http://{shown}:{port}/"


def announce(server: Server, out, err) -> None:
    """Where the page is and who can reach it (``out``); a warning on ``err`` when the
    address is not loopback: anyone who can reach it can use the page, without authentication."""
    host, port = server.server_address[:2]
    url = url_of(server)
    if server.loopback_only:
        out.write(f"epbuf serve: {url}  (listening on {host} only: this machine; --host 0.0.0.0 shares it)\n")
    else:
        out.write(f"epbuf serve: {url}  (listening on {host}, port {port})\n")
        err.write(f"epbuf serve: warning: --host {host} makes the page and its API reachable from other machines, "
                  "without authentication; use it on a trusted network only\n")
    out.write("Ctrl-C stops it.\n")
    out.flush()


def serve(host: str = "127.0.0.1", port: int = 8000, *, open_browser: bool = False, out=None, err=None,
          **limits) -> int:
    """Run ``epbuf serve`` until interrupted (Ctrl-C, SIGINT); returns the exit status 130
    (interrupted, as every epbuf command). ``limits``: :func:`make_server`'s keywords.

    Prints :func:`announce`; the access log goes to ``err``.

    Raises:
        ServeError: as :func:`make_server`.
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    server = make_server(host, port, log=err, **limits)
    announce(server, out, err)
    if open_browser:
        import webbrowser

        threading.Timer(0.3, webbrowser.open, args=(url_of(server),)).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        out.write("epbuf serve: stopped\n")
        out.flush()
    finally:
        server.server_close()
    return 130
