"""The HTTP side of ``epbuf serve`` (:mod:`epbuf.serve`), on asyncio streams: reading one
request within its limits, and every response's bytes with the security headers.

One request per connection (HTTP/1.0 answers, ``Connection: close``). Every refusal is
HTTP-correct and JSON: a status line, the security headers, ``{"error": "<one line>"}`` with
any echoed input cut to :data:`ECHO_LIMIT` characters. A connection is closed gracefully
(half-close, then what the client still sends is read and dropped for a moment), so a client
sees its answer and never a reset.
"""

from __future__ import annotations

import asyncio
import json

__all__ = ["CSP", "HEAVY", "Request", "is_loopback", "Refusal", "ECHO_LIMIT", "MAX_LINE", "MAX_HEADERS", "read_request", "response",
           "error_body", "close_gracefully"]

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
#: The longest request line (as http.server: 65,536 bytes) and header line.
MAX_LINE = 65536
#: The most header lines one request may have.
MAX_HEADERS = 100
#: The most characters of a client's input any error message repeats.
ECHO_LIMIT = 200

#: The commands that may compute for seconds: they have their own pool (:mod:`epbuf.serve`).
HEAVY = ("sweep", "simulate")
#: The page's files: path -> (file in epbuf/web, Content-Type).
_STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/views.js": ("views.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
    "/icon.svg": ("icon.svg", "image/svg+xml"),
    "/favicon.ico": ("icon.svg", "image/svg+xml"),
}
_LOOPBACK_NAMES = ("localhost", "::1")

_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 411: "Length Required", 413: "Content Too Large", 414: "URI Too Long",
            422: "Unprocessable Content", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
            501: "Not Implemented", 503: "Service Unavailable", 505: "HTTP Version Not Supported"}
_SECURITY = (("Content-Security-Policy", CSP), ("X-Content-Type-Options", "nosniff"),
             ("Referrer-Policy", "no-referrer"), ("Cross-Origin-Resource-Policy", "same-origin"),
             ("Cache-Control", "no-store"))


class Refusal(Exception):
    """A request answered with ``status`` and one line (``silent``: close without an answer, for a
    connection that sent nothing at all)."""

    def __init__(self, status: int, message: str, silent: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.silent = silent


class Request:
    """One request: ``method``, ``target`` (path and query as sent), ``version``, ``headers``
    (lower-case names), ``body`` (bytes or None)."""

    __slots__ = ("method", "target", "version", "headers", "body")

    def __init__(self, method: str, target: str, version: str, headers: dict, body: bytes | None) -> None:
        self.method, self.target, self.version, self.headers, self.body = method, target, version, headers, body


def is_loopback(host: str) -> bool:
    import ipaddress

    name = host.strip("[]").lower()
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def echo(text: str, limit: int = ECHO_LIMIT) -> str:
    """``repr(text)`` cut to ``limit`` characters, saying how much was cut."""
    shown = repr(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(text):,} characters)"


def error_body(message: str) -> bytes:
    """``{"error": message}`` as one line: whitespace folded, at most 2,000 characters."""
    line = " ".join(str(message).split())
    if len(line) > 2000:
        line = line[:2000] + f"... ({len(line):,} characters; cut)"
    return (json.dumps({"error": line}) + "\n").encode()


def response(status: int, content_type: str, body: bytes, headers: dict | None = None, head: bool = False) -> bytes:
    """The bytes of a whole answer: status line, security headers, ``headers``, ``body`` (not
    sent for HEAD, but counted in Content-Length)."""
    lines = [f"HTTP/1.0 {status} {_REASONS.get(status, 'Error')}", "Server: epbuf",
             f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in _SECURITY]
    for key, value in (headers or {}).items():
        lines.append(f"{key}: {_header_value(str(value))}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else body)


def _header_value(value: str) -> str:
    text = "".join(c if " " <= c <= "~" else "?" for c in value)
    return text if len(text) <= 4096 else text[:4096] + "..."


async def _line(reader: asyncio.StreamReader, what: str, status: int) -> bytes:
    try:
        return await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        raise Refusal(status, f"{what} is longer than {MAX_LINE:,} B") from None
    except asyncio.IncompleteReadError as error:
        if not error.partial and what == "the request line":
            raise Refusal(400, "", silent=True) from None
        raise Refusal(400, f"the request ended within {what} (no line end)") from None


async def read_request(reader: asyncio.StreamReader, max_body: int) -> Request:
    """The request ``reader`` carries; :class:`Refusal` for anything malformed or over a limit.
    (The caller bounds the time it may take.)"""
    raw = await _line(reader, "the request line", 414)
    while raw in (b"\r\n", b"\n"):  # RFC 9112 2.2: ignore empty lines before the request line
        raw = await _line(reader, "the request line", 414)
    text = raw.decode("latin-1").rstrip("\r\n")
    parts = text.split(" ")
    if len(parts) != 3 or not all(parts) or not parts[0].isalpha() or not parts[0].isupper():
        raise Refusal(400, f"malformed request line {echo(text, 80)}; expected METHOD /path HTTP/1.1")
    method, target, version = parts
    if not version.startswith("HTTP/1."):
        raise Refusal(505, f"{echo(version, 40)} is not supported; use HTTP/1.0 or HTTP/1.1")
    headers: dict[str, str] = {}
    size = 0
    for count in range(MAX_HEADERS + 1):
        raw = await _line(reader, "a header line", 431)
        size += len(raw)
        if size > MAX_LINE:
            raise Refusal(431, f"the header lines are longer than {MAX_LINE:,} B in all")
        line = raw.decode("latin-1").rstrip("\r\n")
        if not line:
            break
        if count == MAX_HEADERS:
            raise Refusal(431, f"more than {MAX_HEADERS} header lines")
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or " " in name:
            raise Refusal(400, f"malformed header line {echo(line, 80)}")
        headers[name.lower()] = value.strip()
    body = None
    if method == "POST":
        body = await _read_body(reader, headers, max_body)
    return Request(method, target, version, headers, body)


async def _read_body(reader: asyncio.StreamReader, headers: dict, max_body: int) -> bytes:
    if "transfer-encoding" in headers:
        raise Refusal(411, "chunked bodies are not accepted; send Content-Length")
    length = headers.get("content-length")
    if length is None:
        raise Refusal(411, "a POST needs Content-Length (the config.json text as the body)")
    num_bytes = int(length) if length.isascii() and length.isdigit() and len(length) < 20 else -1
    if num_bytes < 0:
        raise Refusal(400, f"Content-Length {echo(length, 40)} is not a byte count")
    if num_bytes > max_body:
        raise Refusal(413, f"body of {num_bytes:,} B is over the limit of {max_body:,} B (a config.json is a few KiB)")
    try:
        return await reader.readexactly(num_bytes)
    except asyncio.IncompleteReadError as error:
        raise Refusal(400, f"body ended after {len(error.partial):,} of {num_bytes:,} B (Content-Length)") from None


async def close_gracefully(writer: asyncio.StreamWriter, reader: asyncio.StreamReader, linger: float = 1.0) -> None:
    """Half-close, read and drop what the client still sends (up to ``linger`` seconds), close:
    closing with unread input would send a reset that can destroy the answer in flight."""
    try:
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
        loop = asyncio.get_running_loop()
        end = loop.time() + linger
        dropped = 0
        while dropped < (1 << 20):
            left = end - loop.time()
            if left <= 0:
                break
            chunk = await asyncio.wait_for(reader.read(65536), left)
            if not chunk:
                break
            dropped += len(chunk)
    except (OSError, asyncio.TimeoutError, RuntimeError):
        pass
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (OSError, RuntimeError):
            pass
