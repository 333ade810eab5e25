"""The review page's HTTP server: bounded heads, bodies, connections and idle
time, security headers; run inside the gateway process or on its own."""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
import threading
from collections import Counter
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from services.gateway.listening import split, write_port
from services.gateway.review_web import origins
from services.gateway.review_web.app import ReviewApp
from services.gateway.review_web.pages import Response, page

MAX_FORM_BYTES = 64 * 1024
# The request line and headers together (a browser sends well under 8 KiB).
MAX_HEAD_BYTES = 16 * 1024
# Open connections (one thread each), and how long one may sit idle.
MAX_CONNECTIONS = 64
IDLE_SECONDS = 30.0
# From one client address: a few tabs of one person, so that one address
# holding connections open cannot take every slot (behind a proxy, the proxy
# is the address: its own limits apply).
MAX_CONNECTIONS_PER_ADDRESS = 8
# A request's head and body must arrive within this long of its first line,
# however slowly each read trickles in (the idle limit is per read).
REQUEST_SECONDS = 10.0


log = logging.getLogger("recallatron.gateway.review_web")


# -- HTTP ------------------------------------------------------------------------

SECURITY_HEADERS = [
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; "
        "base-uri 'none'",
    ),
    # For browsers that predate CSP's frame-ancestors.
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    # Not no-referrer: with it, browsers send "Origin: null" on our own forms.
    ("Referrer-Policy", "same-origin"),
    ("Cache-Control", "no-store"),
]


# Methods the page knows but takes on no path (405 with Allow, not 501).
KNOWN_METHODS = ("PUT", "DELETE", "PATCH", "TRACE", "CONNECT")


class HeadTooLarge(Exception):
    pass


class _Deadline:
    """Ends a connection whose request has not fully arrived REQUEST_SECONDS
    after its first line: a timer shuts the socket, which ends any read in
    progress, however it trickles. Disarmed once the request is read, so a
    slow answer (the gateway's calls) is never cut."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.timer: threading.Timer | None = None
        self.expired = False

    def arm(self) -> None:
        self.disarm()
        self.timer = threading.Timer(REQUEST_SECONDS, self._expire)
        self.timer.daemon = True
        self.timer.start()

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expire(self) -> None:
        self.expired = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


class _HeadLimit:
    """The connection's reader, counting what the request line and headers
    take (http.server reads both with readline) against MAX_HEAD_BYTES; the
    count starts again with each request, and its first line arms the
    request's deadline. Bodies are read with read()."""

    def __init__(self, raw: Any, deadline: _Deadline) -> None:
        self.raw = raw
        self.deadline = deadline
        self.left = MAX_HEAD_BYTES

    def readline(self, size: int = -1) -> bytes:
        first = self.left == MAX_HEAD_BYTES
        cap = self.left + 1 if size < 0 else min(size, self.left + 1)
        line: bytes = self.raw.readline(cap)
        if first and line:
            self.deadline.arm()
        self.left -= len(line)
        if self.left < 0:
            raise HeadTooLarge()
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def content_length(value: str | None) -> int | Response:
    """The declared body length, or the answer that refuses it unread."""
    if value is None or not value.strip():
        return 0
    if not (value.strip().isascii() and value.strip().isdigit()):
        return Response(HTTPStatus.BAD_REQUEST, b"Content-Length: not a length", "text/plain")
    length = int(value)
    if length > MAX_FORM_BYTES:
        return Response(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            f"Content-Length: at most {MAX_FORM_BYTES} bytes".encode(),
            "text/plain",
        )
    return length


def cookies_of(headers: list[str]) -> dict[str, str]:
    """The request's cookies by name, the first of each name. Read pair by
    pair: cookies are kept per host, not per port, so another application on
    the same host adds its own in any shape (JSON, spaces, stray quotes),
    and http.cookies drops every cookie of a header it cannot parse whole."""
    found: dict[str, str] = {}
    for header in headers:
        for pair in header.split(";"):
            name, sep, value = pair.partition("=")
            name, value = name.strip(), value.strip()
            if sep and name and name not in found:
                found[name] = value
    return found


def over_tls(forwarded_proto: str | None, forwarded: str | None) -> bool:
    """Whether the browser reached the page over TLS, as a TLS-terminating
    proxy in front says (X-Forwarded-Proto, or Forwarded's proto=; the first
    hop is the browser's). Believed from anyone: a client claiming it over
    plain HTTP only gets a Secure cookie its own browser will not keep."""
    if forwarded_proto:
        return forwarded_proto.split(",")[0].strip().lower() == "https"
    if forwarded:
        for part in forwarded.split(",")[0].split(";"):
            name, _, value = part.partition("=")
            if name.strip().lower() == "proto":
                return value.strip().strip('"').lower() == "https"
    return False


def _secure(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``headers`` with every cookie the page sets marked Secure: sent back
    over TLS only, never in the clear to http:// on the same host."""
    return [(k, f"{v}; Secure" if k == "Set-Cookie" else v) for k, v in headers]


def _handler(app: ReviewApp, public: frozenset[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "recallatron-review"
        sys_version = ""
        # Each read waits at most this long: an idle connection is closed.
        timeout = IDLE_SECONDS

        def setup(self) -> None:
            super().setup()
            self.deadline = _Deadline(self.connection)
            self.rfile = _HeadLimit(self.rfile, self.deadline)  # type: ignore[assignment]

        def handle_one_request(self) -> None:
            self.rfile.left = MAX_HEAD_BYTES  # type: ignore[attr-defined]
            try:
                super().handle_one_request()
            except OSError:
                if not self.deadline.expired:
                    raise
                # The deadline shut the socket: nothing to answer on it.
                self.close_connection = True
            except HeadTooLarge:
                self.close_connection = True
                self.requestline = getattr(self, "requestline", "")
                self.request_version = getattr(self, "request_version", "HTTP/1.0")
                self.command = getattr(self, "command", None) or "GET"
                self._send(
                    Response(
                        HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                        f"request head: at most {MAX_HEAD_BYTES} bytes".encode(),
                        "text/plain",
                    )
                )
            finally:
                self.deadline.disarm()

        def parse_request(self) -> bool:
            if not super().parse_request():
                return False
            if self.request_version == "HTTP/0.9":
                # An HTTP/0.9 answer has no status line and no headers, so
                # none of the security headers: not spoken here.
                self.send_error(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, "HTTP/0.9 is not spoken")
                return False
            return True

        def send_error(
            self, code: int, message: str | None = None, explain: str | None = None
        ) -> None:
            """The errors http.server finds itself (a request line it cannot
            read, an unknown method, too many headers), answered as every other
            answer is: with the security headers."""
            self.close_connection = True
            if not self.request_version.startswith("HTTP/1."):
                # The line was not read as HTTP/1.x: answer in HTTP/1.0, which
                # carries headers (the default, HTTP/0.9, carries none).
                self.request_version = "HTTP/1.0"
            phrase = self.responses.get(code, ("Error", ""))[0]
            text = f"{code} {phrase}" + (f": {message}" if message else "")
            self._send(
                Response(
                    code, text.encode(), "text/plain; charset=utf-8", [("Connection", "close")]
                )
            )

        def do_GET(self) -> None:
            self._serve("GET", {})

        def do_HEAD(self) -> None:
            self._serve("HEAD", {})

        def do_OPTIONS(self) -> None:
            self._serve("OPTIONS", {})

        def do_POST(self) -> None:
            if self.headers.get("Transfer-Encoding"):
                # Only a declared length is read (and bounded before reading).
                self._refuse(Response(HTTPStatus.LENGTH_REQUIRED, b"send Content-Length"))
                return
            length = content_length(self.headers.get("Content-Length"))
            if isinstance(length, Response):
                self._refuse(length)
                return
            origin, host = self.headers.get("Origin"), self.headers.get("Host", "")
            if not origins.allowed(origin, host, public):
                # A form posted from another site: refused before anything runs.
                self._refuse(Response(HTTPStatus.FORBIDDEN, b"cross-site form refused"))
                return
            raw = self.rfile.read(length).decode("utf-8", errors="replace")
            form = {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}
            self._serve("POST", form)

        def _serve(self, method: str, form: dict[str, str]) -> None:
            self.deadline.disarm()
            if self.deadline.expired:
                # Whatever arrived before the deadline shut the socket is cut short.
                self.close_connection = True
                return
            if method != "POST" and (
                self.headers.get("Transfer-Encoding")
                or self.headers.get("Content-Length", "0").strip() not in ("", "0")
            ):
                # A body no method here reads: left unread, it must not be
                # taken for the next request.
                self.close_connection = True
            cookies = cookies_of(self.headers.get_all("Cookie") or [])
            try:
                host, port = self.client_address[:2]
                response = app.handle(method, self.path, cookies, form, f"{host}:{port}")
                if over_tls(self.headers.get("X-Forwarded-Proto"), self.headers.get("Forwarded")):
                    response.headers = _secure(response.headers)
            except Exception:
                log.exception("review page error")
                response = Response(
                    HTTPStatus.INTERNAL_SERVER_ERROR, page("Error", "<p>Error.</p>")
                )
            self._send(response)

        def _refuse(self, response: Response) -> None:
            """Answers without reading the body; the connection then closes, as
            the unread body must not be taken for the next request."""
            self.close_connection = True
            response.headers.append(("Connection", "close"))
            self._send(response)

        def _send(self, response: Response) -> None:
            self.send_response(response.status)
            # A 204 has no body and must not say a length; HEAD says GET's.
            bodiless = response.status == HTTPStatus.NO_CONTENT
            if not bodiless:
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(response.body)))
            own = {k for k, _ in response.headers}
            for key, value in [*SECURITY_HEADERS, *response.headers]:
                if (key, value) in SECURITY_HEADERS and key in own:
                    continue  # the response sets its own (say, caching of the stylesheet)
                self.send_header(key, value)
            self.end_headers()
            if not bodiless and self.command != "HEAD":
                self.wfile.write(response.body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("http " + format, *args)

    for name in KNOWN_METHODS:
        # Routed like any request: the app answers 405 with Allow.
        setattr(Handler, f"do_{name}", lambda self, name=name: self._serve(name, {}))
    return Handler


# Answered without reading the request, security headers and all.
BUSY = (
    "HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n"
    "Retry-After: 1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in SECURITY_HEADERS) + "\r\n"
).encode()


class BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most MAX_CONNECTIONS of them: one more is
    answered 503 and closed at once."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.per_address_cap = MAX_CONNECTIONS_PER_ADDRESS
        self.per_address: Counter[str] = Counter()
        self.per_address_lock = threading.Lock()

    def _take_address(self, host: str) -> bool:
        with self.per_address_lock:
            if self.per_address[host] >= self.per_address_cap:
                return False
            self.per_address[host] += 1
            return True

    def _release_address(self, host: str) -> None:
        with self.per_address_lock:
            self.per_address[host] -= 1
            if self.per_address[host] <= 0:
                del self.per_address[host]

    def _busy(self, request: Any) -> None:
        with contextlib.suppress(OSError):
            request.sendall(BUSY)
        self.shutdown_request(request)

    def process_request(self, request: Any, client_address: Any) -> None:
        # The address's own cap first: one address at its cap takes no slot.
        if not self._take_address(client_address[0]):
            self._busy(request)
            return
        if not self.slots.acquire(blocking=False):
            self._release_address(client_address[0])
            self._busy(request)
            return
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A peer gone mid-answer is routine; anything else is logged, not printed.
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            log.debug("review page: connection ended early")
        else:
            log.exception("review page: connection failed")

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()
            self._release_address(client_address[0])


class ReviewWeb:
    """The page's HTTP server, in a daemon thread of the gateway process."""

    def __init__(self, listen: str, gateway_target: str, public_origins: str = "") -> None:
        """``public_origins``: RECALLATRON_REVIEW_PUBLIC_ORIGINS (origins.py)."""
        self.app = ReviewApp(gateway_target)
        host, port = split(listen)
        public = origins.parse(public_origins)
        # Binding a port in use fails here, at start-up, not silently later.
        self.httpd = BoundedHTTPServer((host, port), _handler(self.app, public))
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, name="review-web", daemon=True
        )

    def start(self, port_file: str = "") -> int:
        self.thread.start()
        if port_file:
            write_port(port_file, self.port)
        return self.port

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.app.sessions.close()


def gateway_target(gateway_listen: str, port: int) -> str:
    """The gateway's own gRPC address as seen from inside its process."""
    host, _ = split(gateway_listen)
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
