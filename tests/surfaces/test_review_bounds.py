"""The review page reads within bounds: a body is refused by its declared
length (negative, not a number, too large) before any of it is read; the
request head is capped; connections are capped and closed when idle;
sign-in sessions are capped per token and in all. The page's HTTP server
runs in this process, in front of a gateway address nothing listens on
(nothing here gets as far as a gateway call); sessions are checked on the
page's application with a stand-in client."""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Iterator

import grpc
import pytest

from services.gateway.review_web import ReviewApp, ReviewWeb
from services.gateway.review_web import http as review_http
from services.gateway.review_web import sessions as review_sessions
from services.gateway.review_web.pages import Response

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


def _trickle_head(conn: socket.socket, lines: int, pause: float) -> int:
    """Sends a request head one header line at a time, each well inside the
    idle limit; returns how many lines went out before the server ended the
    connection (``lines`` if it never did)."""
    conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
    for sent in range(lines):
        time.sleep(pause)
        try:
            conn.sendall(f"X-Slow-{sent}: v\r\n".encode())
        except OSError:
            return sent
        # A closed connection shows as readable with nothing (or an answer) in it.
        readable, _, _ = select.select([conn], [], [], 0)
        if readable:
            return sent
    return lines


def test_a_request_head_must_arrive_within_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each line arrives well inside the idle limit, so only a deadline for the
    # whole head can end it: one header line every 0.3 s for up to 30 s
    # against a 1 s deadline.
    monkeypatch.setattr(review_http, "IDLE_SECONDS", 5.0)
    monkeypatch.setattr(review_http, "REQUEST_SECONDS", 1.0, raising=False)
    web = ReviewWeb("127.0.0.1:0", "127.0.0.1:1")
    web.start()
    try:
        with _connect(web) as conn:
            sent = _trickle_head(conn, lines=100, pause=0.3)
        assert sent < 100, "a head trickled in for 30 s and the server kept waiting"
    finally:
        web.stop()


def _connect_from(web: ReviewWeb, source: str) -> socket.socket:
    conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    conn.settimeout(WAIT)
    conn.bind((source, 0))
    conn.connect(("127.0.0.1", web.port))
    return conn


def test_one_address_cannot_take_every_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    # 127.0.0.2 opens as many connections as the server takes in all and
    # holds them with half a request head; a page load from another address
    # is still answered, and the holder's own extra connections are refused.
    monkeypatch.setattr(review_http, "IDLE_SECONDS", 30.0)
    monkeypatch.setattr(review_http, "MAX_CONNECTIONS", 8)
    monkeypatch.setattr(review_http, "MAX_CONNECTIONS_PER_ADDRESS", 2, raising=False)
    web = ReviewWeb("127.0.0.1:0", "127.0.0.1:1")
    web.start()
    held: list[socket.socket] = []
    try:
        for _ in range(8):
            conn = _connect_from(web, "127.0.0.2")
            conn.sendall(b"GET / HTTP/1.1\r\n")
            held.append(conn)
        with _connect_from(web, "127.0.0.1") as other:
            other.sendall(b"GET /review.css HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = _answer(other)
        assert not answer.startswith(b"HTTP/1.0 503"), answer[:200]
        assert answer.startswith(b"HTTP/1.0 200"), answer[:200]
        refused = _answer(held[-1])
        assert refused.startswith(b"HTTP/1.0 503"), refused[:200]
    finally:
        for conn in held:
            conn.close()
        web.stop()


class _Client:
    closed = 0

    def __init__(self, token: str) -> None:
        self.token = token

    def for_address(self, client_address: str | None, secret: str) -> _Client:
        return self  # the person's address: not what these tests look at

    def duplicate_pairs(self, **_: object) -> None:
        return None

    def who_am_i(self) -> object:
        return type("Me", (), {"member_handle": "someone", "workspace_slug": "somewhere"})()

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
    # The page is full: the least recently seen session makes way, none is refused.
    assert app.signin("rc_one_more").status == 303 and len(app.sessions._items) == 12


def _sid(answer: Response) -> str:
    """The session id a sign-in set in its cookie."""
    (cookie,) = [v for k, v in answer.headers if k == "Set-Cookie"]
    return cookie.split(";", 1)[0].split("=", 1)[1]


def test_a_full_page_makes_way_for_a_new_signin(monkeypatch: pytest.MonkeyPatch) -> None:
    """When every session is taken, the one seen least recently makes way: one
    owner minting tokens and signing in with each kept every person of every
    workspace out (503) once the page was full."""
    monkeypatch.setattr(review_sessions, "MAX_SESSIONS", 4)
    app = ReviewApp("127.0.0.1:1", client_factory=_Client)  # type: ignore[arg-type]
    sids = [_sid(app.signin(f"rc_member_{i}")) for i in range(4)]
    # The first person keeps using the page; the second signed in and left.
    app.handle("GET", "/review.css", {review_sessions.COOKIE: sids[0]}, {})
    closed = _Client.closed
    newcomer = app.signin("rc_newcomer")
    assert newcomer.status == 303
    assert len(app.sessions) == 4
    assert app.sessions.get(sids[1]) is None and _Client.closed == closed + 1
    for kept in (sids[0], sids[2], sids[3], _sid(newcomer)):
        assert app.sessions.get(kept) is not None
    # Signing in again and again still leaves the one in use signed in.
    for i in range(12):
        app.handle("GET", "/review.css", {review_sessions.COOKIE: sids[0]}, {})
        assert app.signin(f"rc_minted_{i}").status == 303
    assert app.sessions.get(sids[0]) is not None and len(app.sessions) == 4


class _AuditOnly(_Client):
    """A token scoped to the audit purpose: any other is refused."""

    def duplicate_pairs(self, **args: object) -> None:
        if args.get("purpose", "assist") != "audit":
            raise _Denied()


class _Denied(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.PERMISSION_DENIED

    def details(self) -> str:
        return "purpose: outside the token's scope"


def test_a_token_scoped_to_one_purpose_signs_in() -> None:
    app = ReviewApp("127.0.0.1:1", client_factory=_AuditOnly)  # type: ignore[arg-type]
    assert app.signin("rc_audit_only").status == 303


def _raw(web: ReviewWeb, request: bytes) -> bytes:
    with _connect(web) as conn:
        conn.sendall(request)
        return _answer(conn)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        # A digit Python's int() does not read (latin-1 superscript two).
        (_post_head("\xb2").replace(b"\xc2\xb2", b"\xb2") + b"csrf=x", b"400"),
        # An Origin no URL parser reads: not this page's.
        (
            b"POST /decide HTTP/1.1\r\nHost: x\r\nOrigin: http://[\r\n"
            b"Content-Length: 6\r\n\r\ncsrf=x",
            b"403",
        ),
        # A request target no URL parser reads.
        (b"GET http://[x/ HTTP/1.1\r\nHost: x\r\n\r\n", b"400"),
    ],
    ids=["content-length", "origin", "target"],
)
def test_a_malformed_request_is_answered_not_dropped(
    page: ReviewWeb, request_bytes: bytes, status: bytes
) -> None:
    answer = _raw(page, request_bytes)
    assert answer.split(b" ", 2)[1:2] == [status], answer[:200]


class _Refused(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "refused"


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (grpc.StatusCode.RESOURCE_EXHAUSTED, 429),
        (grpc.StatusCode.UNAVAILABLE, 502),
    ],
)
def test_a_refused_signin_answers_what_went_wrong(code: grpc.StatusCode, status: int) -> None:
    class Refusing(_Client):
        def duplicate_pairs(self, **_: object) -> None:
            raise _Refused(code)

    app = ReviewApp("127.0.0.1:1", client_factory=Refusing)  # type: ignore[arg-type]
    assert app.signin("rct_x").status == status


@pytest.mark.parametrize("token", ["é", "rct_a\nb", "rct a", "rct_\x00"])
def test_what_is_no_token_is_refused_before_any_call(token: str) -> None:
    class Unused(_Client):
        def duplicate_pairs(self, **_: object) -> None:
            raise AssertionError("no call for what is no token")

    app = ReviewApp("127.0.0.1:1", client_factory=Unused)  # type: ignore[arg-type]
    answer = app.signin(token)
    assert answer.status == 400 and b"not a token" in answer.body


def test_a_token_scoped_to_one_purpose_lands_on_its_purpose() -> None:
    app = ReviewApp("127.0.0.1:1", client_factory=_AuditOnly)  # type: ignore[arg-type]
    answer = app.signin("rc_audit_only")
    assert ("Location", "/?purpose=audit") in answer.headers


def test_a_revision_out_of_range_is_an_incomplete_form() -> None:
    from recallatron.v1 import common_pb2 as cpb

    class Reading(_Client):
        def read(self, ids: list[str], **_: object) -> object:
            return type("R", (), {"memories": [cpb.Memory(id=ids[0], revision=1)]})()

    app = ReviewApp("127.0.0.1:1", client_factory=Reading)  # type: ignore[arg-type]
    assert app.signin("rct_owner").status == 303
    (session,) = app.sessions._items.values()
    form = {
        "action": "supersede",
        "retire_id": "a",
        "keep_id": "b",
        "retire_revision": str(2**63),
        "keep_revision": "1",
    }
    app.decide(session, form, "assist")
    assert session.flash == [("error", "The form was incomplete; look again.")]


def test_a_memory_never_supersedes_itself_and_revisions_are_ascii_digits() -> None:
    """Only a hand-made form sends these: the same memory to retire and to
    keep (it superseded a memory with a copy of itself), or a revision in
    other digits than 0-9 (int() read U+0661, Arabic-Indic one, as 1)."""
    from recallatron.v1 import common_pb2 as cpb

    written: list[object] = []

    class Reading(_Client):
        memory = type("Stubs", (), {"Supersede": "Supersede"})()

        def read(self, ids: list[str], **_: object) -> object:
            return type("R", (), {"memories": [cpb.Memory(id=ids[0], revision=1)]})()

        def call(self, *args: object, **_: object) -> object:
            written.append(args)
            raise AssertionError("nothing may be written")

    app = ReviewApp("127.0.0.1:1", client_factory=Reading)  # type: ignore[arg-type]
    assert app.signin("rct_owner").status == 303
    (session,) = app.sessions._items.values()
    same = "0b8f7a52-9a43-4c1e-9d3b-1f6a2f1e3a11"
    for form, said in (
        (
            {"retire_id": same, "keep_id": same.upper()}
            | {"retire_revision": "1", "keep_revision": "1"},
            "A memory cannot replace itself; look again.",
        ),
        (
            {"retire_id": "a", "keep_id": "b", "retire_revision": "\u0661", "keep_revision": "1"},
            "The form was incomplete; look again.",
        ),
    ):
        session.flash.clear()
        app.decide(session, {"action": "supersede", **form}, "assist")
        assert session.flash == [("error", said)], form
    assert written == []


def test_a_session_keeps_only_its_latest_messages() -> None:
    """Each decision leaves a message for the next view; posting decisions
    without ever viewing the page grew the session's list without end."""
    from services.gateway.review_web.sessions import MAX_FLASH

    app = ReviewApp("127.0.0.1:1", client_factory=_Client)  # type: ignore[arg-type]
    assert app.signin("rct_owner").status == 303
    (session,) = app.sessions._items.values()
    for i in range(5 * MAX_FLASH):
        app.decide(session, {"action": f"nothing-{i}"}, "assist")
    assert len(session.flash) == MAX_FLASH
    assert session.flash[-1] == ("error", "Unknown decision.")
