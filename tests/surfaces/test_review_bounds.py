"""The review page reads within bounds: a body is refused by its declared
length (negative, not a number, too large) before any of it is read; the
request head is capped; connections are capped and closed when idle;
sign-in sessions are capped per token and in all. The page's HTTP server
runs in this process, in front of a gateway address nothing listens on
(nothing here gets as far as a gateway call); sessions are checked on the
page's application with a stand-in client."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest

from services.gateway.review_web import ReviewApp, ReviewWeb
from services.gateway.review_web import http as review_http
from services.gateway.review_web import sessions as review_sessions

# Generous: a refusal comes at once; this only bounds a test that would hang.
WAIT = 10.0


@pytest.fixture
def page(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReviewWeb]:
    monkeypatch.setattr(review_http, "IDLE_SECONDS", 0.5)
    monkeypatch.setattr(review_http, "MAX_CONNECTIONS", 4)
    web = ReviewWeb("127.0.0.1:0", "127.0.0.1:1")
    web.start()
    yield web
    web.stop()


def _connect(web: ReviewWeb) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", web.port), timeout=WAIT)
    return conn


def _answer(conn: socket.socket) -> bytes:
    """What the server sent until it closed (or WAIT passed: socket.timeout)."""
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    return data


def _post_head(length: str) -> bytes:
    return (
        "POST /decide HTTP/1.1\r\nHost: x\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


@pytest.mark.parametrize(
    ("length", "status"),
    [("-1", b"400"), ("abc", b"400"), ("1e3", b"400"), (str(10**9), b"413")],
)
def test_a_bad_content_length_is_refused_unread(
    page: ReviewWeb, length: str, status: bytes
) -> None:
    with _connect(page) as conn:
        # The head and a little of a body that never ends: the answer must
        # not wait for the rest.
        conn.sendall(_post_head(length) + b"csrf=x&" * 100)
        answer = _answer(conn)
    assert answer.split(b" ", 2)[1] == status, answer[:200]
    assert b"Content-Length" in answer


def test_a_chunked_body_is_refused_unread(page: ReviewWeb) -> None:
    with _connect(page) as conn:
        conn.sendall(
            b"POST /decide HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"ffffff\r\n" + b"a" * 1000
        )
        answer = _answer(conn)
    assert answer.startswith(b"HTTP/1.0 411"), answer[:200]


def test_an_oversized_request_head_is_refused(page: ReviewWeb) -> None:
    with _connect(page) as conn:
        headers = "".join(f"X-Filler-{i}: {'v' * 4000}\r\n" for i in range(40))
        # The server may close before taking it all.
        with contextlib.suppress(OSError):
            conn.sendall(f"GET / HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
        answer = _answer(conn)
    assert answer.startswith(b"HTTP/1.0 431"), answer[:200]


def test_an_idle_connection_is_closed(page: ReviewWeb) -> None:
    with _connect(page) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\n")  # and nothing more
        assert _answer(conn) == b""  # closed by the server, not timed out here


def test_connections_are_capped(page: ReviewWeb) -> None:
    held = [_connect(page) for _ in range(4)]
    try:
        for conn in held:
            conn.sendall(b"GET / HTTP/1.1\r\n")  # each holds a thread
        with _connect(page) as extra:
            answer = _answer(extra)
        assert answer.startswith(b"HTTP/1.0 503"), answer[:200]
    finally:
        for conn in held:
            conn.close()


class _Client:
    closed = 0

    def __init__(self, token: str) -> None:
        self.token = token

    def duplicate_pairs(self, **_: object) -> None:
        return None

    def close(self) -> None:
        _Client.closed += 1


def test_sessions_are_capped_per_token_and_in_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(review_sessions, "MAX_SESSIONS", 12)
    app = ReviewApp("127.0.0.1:1", client_factory=_Client)  # type: ignore[arg-type]
    for _ in range(20):
        assert app.signin("rc_same_token").status == 303
    # One token keeps at most its share; its oldest sessions were closed.
    assert len(app.sessions._items) == getattr(review_sessions, "MAX_SESSIONS_PER_TOKEN", 8)
    for i in range(12 - getattr(review_sessions, "MAX_SESSIONS_PER_TOKEN", 8)):
        assert app.signin(f"rc_other_{i}").status == 303
    refused = app.signin("rc_one_too_many")
    assert refused.status == 503 and len(app.sessions._items) == 12
