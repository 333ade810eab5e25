"""The review page's HTTP answers, whatever was asked: every answer (pages,
refusals, errors http.server makes itself, the busy answer) carries the
security headers; HEAD answers as GET without a body; OPTIONS answers 204
with Allow; a method a path does not take is 405 with Allow. The page's
server runs in this process in front of a gateway address nothing listens
on (nothing here gets as far as a gateway call)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from recallatron.settings import SettingsInvalid
from services.gateway.review_web import ReviewApp, ReviewWeb
from services.gateway.review_web import http as review_http
from services.gateway.review_web.sessions import COOKIE
from services.gateway.settings import GatewaySettings
from tests.surfaces.test_review_signin import _Client, _sid

# Generous: each answer comes at once; this only bounds a test that would hang.
WAIT = 10.0
# What every answer must say, by header name (lower case).
REQUIRED = {
    "content-security-policy": "frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


@pytest.fixture
def web(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReviewWeb]:
    monkeypatch.setattr(review_http, "IDLE_SECONDS", 2.0)
    server = ReviewWeb("127.0.0.1:0", "127.0.0.1:1")
    server.start()
    yield server
    server.stop()


def _exchange(web: ReviewWeb, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of the one answer."""
    with socket.create_connection(("127.0.0.1", web.port), timeout=WAIT) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("iso-8859-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split(" ")[1]), headers, body


def _request(method: str, target: str, extra: str = "") -> bytes:
    return f"{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}\r\n".encode()


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (_request("GET", "/"), 200),
        (_request("GET", "/nowhere"), 404),
        (_request("HEAD", "/"), 200),
        (_request("HEAD", "/review.css"), 200),
        (_request("HEAD", "/nowhere"), 404),
        (_request("OPTIONS", "/"), 204),
        (_request("OPTIONS", "*"), 204),
        (_request("PUT", "/"), 405),
        (_request("DELETE", "/decide"), 405),
        (_request("POST", "/", "Content-Length: 0\r\n"), 405),
        (_request("GET", "/signin"), 405),
        (_request("BREW", "/"), 501),
        (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        (b"GET / HTTP/x.y\r\nHost: x\r\n\r\n", 400),
        (b"NONSENSE\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 101 + b"\r\n", 431),
    ],
    ids=lambda v: v.split(b"\r\n")[0].decode()[:30] if isinstance(v, bytes) else str(v),
)
def test_every_answer_carries_the_security_headers(
    web: ReviewWeb, request_bytes: bytes, status: int
) -> None:
    got, headers, _ = _exchange(web, request_bytes)
    assert got == status, headers
    for name, part in REQUIRED.items():
        assert part in headers.get(name, ""), (name, headers)


def test_head_answers_as_get_without_a_body(web: ReviewWeb) -> None:
    for target in ("/", "/review.css"):
        _, got, body = _exchange(web, _request("GET", target))
        status, head, nothing = _exchange(web, _request("HEAD", target))
        assert status == 200 and nothing == b"", nothing[:100]
        assert head["content-type"] == got["content-type"]
        assert int(head["content-length"]) == len(body) > 0


def test_options_and_refused_methods_say_what_is_allowed(web: ReviewWeb) -> None:
    for target, allowed in (
        ("/", {"GET", "HEAD", "OPTIONS"}),
        ("/review.css", {"GET", "HEAD", "OPTIONS"}),
        ("/decide", {"POST", "OPTIONS"}),
        ("*", {"GET", "HEAD", "POST", "OPTIONS"}),
    ):
        status, headers, body = _exchange(web, _request("OPTIONS", target))
        assert status == 204 and body == b"", (target, status)
        assert "content-length" not in headers
        assert set(headers["allow"].replace(" ", "").split(",")) == allowed, target
    status, headers, _ = _exchange(web, _request("PUT", "/decide"))
    assert status == 405
    assert set(headers["allow"].replace(" ", "").split(",")) == {"POST", "OPTIONS"}


def test_the_busy_answer_carries_the_security_headers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(review_http, "MAX_CONNECTIONS", 1)
    server = ReviewWeb("127.0.0.1:0", "127.0.0.1:1")
    server.start()
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT) as held:
            held.sendall(b"GET / HTTP/1.1\r\n")  # holds the one slot
            status, headers, _ = _exchange(server, _request("GET", "/"))
        assert status == 503
        for name, part in REQUIRED.items():
            assert part in headers.get(name, ""), (name, headers)
    finally:
        server.stop()


def test_head_leaves_the_messages_for_the_next_view() -> None:
    app = ReviewApp("127.0.0.1:1", client_factory=_Client)  # type: ignore[arg-type]
    sid = _sid(app.handle("POST", "/signin", {}, {"token": "rct_alice"}))
    session = app.sessions.get(sid)
    assert session is not None
    session.flash.append(("ok", "Kept both."))
    assert app.handle("HEAD", "/", {COOKIE: sid}, {}).status == 200
    assert b"Kept both." in app.handle("GET", "/", {COOKIE: sid}, {}).body
    assert session.flash == []


@pytest.mark.parametrize(
    "other",
    ['prefs={"theme":"dark"}', "greeting=hello world", 'quoted="a\\"'],
    ids=["json", "space", "quote"],
)
def test_another_sites_cookie_does_not_sign_the_person_out(web: ReviewWeb, other: str) -> None:
    """Cookies are kept per host, not per port: another application on the
    same host sets its own, in whatever shape it likes. One that Python's
    cookie parser refuses took ours down with it (signed out, and every
    sign-in landed on the sign-in form again)."""
    web.app.client_factory = _Client  # type: ignore[assignment]
    form = b"token=rct_alice"
    _, headers, _ = _exchange(
        web,
        _request("POST", "/signin", f"Content-Length: {len(form)}\r\n").removesuffix(b"\r\n")
        + b"\r\n"
        + form,
    )
    sid = headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
    for cookie in (f"{other}; {COOKIE}={sid}", f"{COOKIE}={sid}; {other}"):
        status, _, body = _exchange(web, _request("GET", "/", f"Cookie: {cookie}\r\n"))
        assert status == 200 and b"data-testid=signout" in body, cookie


def _signin(web: ReviewWeb, extra: str = "") -> dict[str, str]:
    """The headers of a sign-in posted over HTTP with ``extra`` headers."""
    web.app.client_factory = _Client  # type: ignore[assignment]
    form = b"token=rct_alice"
    head = _request("POST", "/signin", f"Content-Length: {len(form)}\r\n{extra}")
    _, headers, _ = _exchange(web, head + form)
    return headers


@pytest.mark.parametrize(
    "proxy",
    [
        "X-Forwarded-Proto: https",
        "X-Forwarded-Proto: HTTPS, http",
        "Forwarded: for=1.2.3.4;proto=https",
    ],
    ids=["x-forwarded-proto", "chained", "forwarded"],
)
def test_behind_a_tls_proxy_the_session_cookie_is_secure(web: ReviewWeb, proxy: str) -> None:
    """The page speaks plain HTTP; a TLS-terminating proxy in front says the
    browser came over TLS. Without Secure the browser would send the session
    cookie to http:// on the same host, in the clear, to anyone on the path."""
    cookie = _signin(web, proxy + "\r\n")["set-cookie"]
    assert "; Secure" in cookie, cookie
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    sid = cookie.split(";", 1)[0].split("=", 1)[1]
    session = web.app.sessions.get(sid)
    assert session is not None
    form = f"csrf={session.csrf}".encode()
    head = _request(
        "POST",
        "/signout",
        f"Content-Length: {len(form)}\r\nCookie: {COOKIE}={sid}\r\n{proxy}\r\n",
    )
    status, headers, _ = _exchange(web, head + form)
    assert status == 303 and headers["set-cookie"].startswith(f"{COOKIE}=;"), headers
    assert "; Secure" in headers["set-cookie"], headers
    # Loopback over plain HTTP (no proxy, or one that says http) keeps a
    # cookie the browser stores over http://.
    for plain in ("", "X-Forwarded-Proto: http\r\n"):
        assert "Secure" not in _signin(web, plain)["set-cookie"], plain


def _post_signin(web: ReviewWeb, host: str, extra: str) -> int:
    """The status of a sign-in posted with ``host`` and ``extra`` headers."""
    web.app.client_factory = _Client  # type: ignore[assignment]
    form = b"token=rct_alice"
    head = (
        f"POST /signin HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
        f"Content-Length: {len(form)}\r\n{extra}\r\n"
    ).encode()
    status, _, _ = _exchange(web, head + form)
    return status


def test_behind_a_proxy_that_rewrites_host_the_public_origin_may_post(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An ingress sends the Service's name as Host while the browser says the
    public address as Origin: every form was refused 403. The operator names
    the public origin(s) (RECALLATRON_REVIEW_PUBLIC_ORIGINS); then those, and
    only those, may post. X-Forwarded-Host is never believed."""
    internal = "gateway.recallatron.svc:7410"
    public = "Origin: https://review.example.com\r\n"
    foreign = "Origin: https://evil.example\r\n"
    monkeypatch.setenv(
        "RECALLATRON_REVIEW_PUBLIC_ORIGINS",
        "https://Review.example.com:443/, http://127.0.0.1:7410",
    )
    settings = GatewaySettings()
    configured = ReviewWeb("127.0.0.1:0", "127.0.0.1:1", settings.review_public_origins)
    configured.start()
    plain = ReviewWeb("127.0.0.1:0", "127.0.0.1:1")
    plain.start()
    try:
        assert _post_signin(configured, internal, public) == 303
        assert _post_signin(configured, internal, "Origin: http://127.0.0.1:7410\r\n") == 303
        # Unset, the Host check stands: the public origin is not the Host.
        assert _post_signin(plain, internal, public) == 403
        assert _post_signin(plain, "x", "Origin: http://x\r\n") == 303
        for web in (configured, plain):
            assert _post_signin(web, internal, foreign) == 403
            assert (
                _post_signin(web, internal, foreign + "X-Forwarded-Host: evil.example\r\n") == 403
            )
            assert _post_signin(web, internal, "Origin: null\r\n") == 403
        # Set, only its origins: one naming the (rewritten) Host is not one.
        assert _post_signin(configured, "x", "Origin: http://x\r\n") == 403
    finally:
        configured.stop()
        plain.stop()


@pytest.mark.parametrize(
    "bad", ["review.example.com", "https://review.example.com/path", "ftp://x", "https://x:99999"]
)
def test_a_public_origin_that_is_no_origin_stops_the_start(
    monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    """A mistyped origin stops the gateway at start, naming the variable,
    rather than refusing every form later."""
    monkeypatch.setenv("RECALLATRON_REVIEW_PUBLIC_ORIGINS", bad)
    with pytest.raises(SettingsInvalid, match="RECALLATRON_REVIEW_PUBLIC_ORIGINS"):
        GatewaySettings()
