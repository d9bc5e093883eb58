"""``epbuf serve``: the calculator as a web page and a JSON API, on the standard library.

One page (``epbuf/web/index.html``, ``app.js``, ``style.css``: plain files shipped in the
package, no CDN, no build step) and the API of :mod:`epbuf.webapi`, which runs the CLI's
own commands, so every figure on the page equals the CLI's.

Safety, by construction:

* binds to ``127.0.0.1`` (this machine only) unless told otherwise, and says so;
  ``--host 0.0.0.0`` (or any non-loopback address) prints a warning: there is no
  authentication. While bound to loopback, a request whose ``Host`` is not a loopback
  name is refused (a web page elsewhere cannot reach the API through DNS rebinding).
* invalid input is a 4xx with ``{"error": "<one line>"}``; a bug answers 500 with one
  line and logs the traceback on the server's terminal, never in the response.
* request bodies (a pasted config.json) are at most :data:`epbuf.webapi.MAX_BODY_BYTES`;
  sweeps are capped by the CLI's own limit (:data:`epbuf.sweep.MAX_CONFIGURATIONS`).
* no endpoint reads or writes a file: the page's three files are read once, at start.
* every response sets a restrictive Content-Security-Policy (scripts and styles from
  this server only, no inline script, nothing framed, no other origin contacted).
* each connection has a socket timeout and a deadline for the whole request, and at most
  :data:`MAX_CONNECTIONS` are served at once, so a slow or broken client cannot stall
  the others.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .errors import EpbufError

__all__ = ["ServeError", "make_server", "serve", "announce", "url_of", "CSP", "MAX_CONNECTIONS", "REQUEST_TIMEOUT",
           "REQUEST_DEADLINE"]

#: Seconds a connection may stay silent (socket timeout) before it is closed.
REQUEST_TIMEOUT = 10.0
#: Seconds a whole request (headers, body, answer) may take before its socket is shut.
REQUEST_DEADLINE = 60.0
#: Connections served at once; more are answered 503 and closed.
MAX_CONNECTIONS = 64

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

_STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
    "/icon.svg": ("icon.svg", "image/svg+xml"),
    "/favicon.ico": ("icon.svg", "image/svg+xml"),
}
_LOOPBACK_NAMES = ("localhost", "::1")


class ServeError(EpbufError):
    """The server cannot start (address in use, bad host or port)."""


def _is_loopback(host: str) -> bool:
    import ipaddress

    name = host.strip("[]").lower()
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _load_static() -> dict[str, bytes]:
    from importlib.resources import files

    folder = files("epbuf") / "web"
    return {name: (folder / name).read_bytes() for name, _ in set(_STATIC.values())}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # IPv6 literals ("::1") need the IPv6 family; set per instance in make_server.

    def __init__(self, address, *, request_timeout: float, request_deadline: float, max_connections: int,
                 log) -> None:
        self.request_timeout = request_timeout
        self.request_deadline = request_deadline
        self.max_connections = max_connections
        self.log = log
        self.static = _load_static()
        self.loopback_only = _is_loopback(address[0])
        self._active = 0
        self._active_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request, client_address) -> None:  # type: ignore[override]
        with self._active_lock:
            busy = self._active >= self.max_connections
            if not busy:
                self._active += 1
        if busy:
            try:
                request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                b"Connection: close\r\n\r\n{\"error\": \"too many connections; try again\"}\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address) -> None:  # type: ignore[override]
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._active_lock:
                self._active -= 1

    def handle_error(self, request, client_address) -> None:  # type: ignore[override]
        # A client that vanished mid-answer is not worth a traceback.
        import traceback

        if self.log is not None:
            self.log.write(f"epbuf serve: error serving {client_address[0]}: "
                           f"{traceback.format_exc().strip().splitlines()[-1]}\n")


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "epbuf"
    sys_version = ""
    protocol_version = "HTTP/1.0"  # one request per connection: no idle keep-alive threads

    def setup(self) -> None:
        self.timeout = self.server.request_timeout  # StreamRequestHandler sets it on the socket
        super().setup()
        self._deadline = threading.Timer(self.server.request_deadline, self._expire)
        self._deadline.daemon = True
        self._deadline.start()

    def finish(self) -> None:
        self._deadline.cancel()
        try:
            super().finish()
        except OSError:
            pass

    def _expire(self) -> None:
        import socket

        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # --- logging goes to the server's terminal, never into a captured command's stderr ---
    def log_message(self, format: str, *args) -> None:  # noqa: A002 (BaseHTTPRequestHandler's name)
        if self.server.log is not None:
            self.server.log.write(f"{self.address_string()} - {format % args}\n")

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (bad request line, 414, 431 ...) as one-line JSON."""
        from .webapi import error_response

        self.close_connection = True
        self._answer(error_response(code, message or self.responses.get(code, ("error",))[0]))

    def _answer(self, response) -> None:
        body = response.body if self.command != "HEAD" else b""
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.send_header("Cache-Control", "no-store")
        for key, value in response.headers.items():
            self.send_header(key, value)
        self.send_header("Connection", "close")
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _refuse(self, status: int, message: str) -> None:
        from .webapi import error_response

        self.close_connection = True
        self._answer(error_response(status, message))

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def _other(self) -> None:
        self._refuse(405, f"{self.command} is not allowed; use GET or POST")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _other

    def _dispatch(self) -> None:
        from urllib.parse import urlsplit

        if self.server.loopback_only:
            host = self.headers.get("Host", "")
            name = host.rsplit(":", 1)[0] if not host.startswith("[") else host.split("]", 1)[0] + "]"
            if host and not _is_loopback(name):
                self._refuse(403, f"Host {host[:80]!r} is not this machine's loopback name; the server listens on "
                                  "loopback only (open it as http://127.0.0.1:PORT/)")
                return
        parts = urlsplit(self.path)
        path = parts.path
        if not path.startswith("/api/"):
            self._static(path)
            return
        body = None
        if self.command == "POST":
            body = self._read_body()
            if body is None:
                return
        from .webapi import handle

        try:
            response = handle("GET" if self.command == "HEAD" else self.command, path, parts.query, body)
        except Exception:  # a bug, not bad input: one line to the client, the traceback to the terminal
            import traceback

            if self.server.log is not None:
                self.server.log.write(f"epbuf serve: internal error on {self.path[:200]!r}\n{traceback.format_exc()}")
            self._refuse(500, "internal error (the server's terminal has the details); please report it")
            return
        self._answer(response)

    def _read_body(self) -> bytes | None:
        from .webapi import MAX_BODY_BYTES

        if self.headers.get("Transfer-Encoding"):
            self._refuse(411, "chunked bodies are not accepted; send Content-Length")
            return None
        length = self.headers.get("Content-Length")
        if length is None:
            self._refuse(411, "a POST needs Content-Length (the config.json text as the body)")
            return None
        try:
            num_bytes = int(length)
        except ValueError:
            num_bytes = -1
        if num_bytes < 0:
            self._refuse(400, f"Content-Length {length[:40]!r} is not a byte count")
            return None
        if num_bytes > MAX_BODY_BYTES:
            self._refuse(413, f"body of {num_bytes:,} B is over the limit of {MAX_BODY_BYTES:,} B "
                              "(a config.json is a few KiB)")
            return None
        body = self.rfile.read(num_bytes)
        if len(body) < num_bytes:
            self._refuse(400, f"body ended after {len(body):,} of {num_bytes:,} B")
            return None
        return body

    def _static(self, path: str) -> None:
        from .webapi import Response

        if self.command not in ("GET", "HEAD"):
            self._refuse(405, f"{self.command} is not allowed on {path[:80]}; use GET")
            return
        entry = _STATIC.get(path)
        if entry is None:
            self._refuse(404, f"nothing at {path[:80]!r}; the page is at / and the API under /api/")
            return
        name, content_type = entry
        self._answer(Response(200, content_type, self.server.static[name]))


def make_server(host: str = "127.0.0.1", port: int = 8000, *, request_timeout: float = REQUEST_TIMEOUT,
                request_deadline: float = REQUEST_DEADLINE, max_connections: int = MAX_CONNECTIONS,
                log=None) -> _Server:
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
    family = socket.AF_INET6 if ":" in host else socket.AF_INET

    class Server(_Server):
        address_family = family

    try:
        return Server((host.strip("[]"), port), request_timeout=request_timeout, request_deadline=request_deadline,
                      max_connections=max_connections, log=log)
    except OSError as error:
        raise ServeError(f"--host {host} --port {port}: cannot listen ({error.strerror or error})") from None


def url_of(server: _Server) -> str:
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    if host in ("0.0.0.0", "::"):
        shown = "127.0.0.1" if host == "0.0.0.0" else "[::1]"
    return f"http://{shown}:{port}/"


def announce(server: _Server, out, err) -> None:
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


def serve(host: str = "127.0.0.1", port: int = 8000, *, open_browser: bool = False, out=None, err=None) -> int:
    """Run ``epbuf serve`` until interrupted (Ctrl-C, SIGINT); returns the exit status 0.

    Prints :func:`announce`; the access log goes to ``err``.

    Raises:
        ServeError: as :func:`make_server`.
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    server = make_server(host, port, log=err)
    announce(server, out, err)
    if open_browser:
        import webbrowser

        threading.Timer(0.3, webbrowser.open, args=(url_of(server),)).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        out.write("epbuf serve: stopped\n")
    finally:
        server.server_close()
    return 0
