"""The review page's sign-in, one browser at a time: signing in again from a
browser that holds a session ends that session (its id is rotated, never
kept alive beside the new one). Checked on the page's application with a
stand-in gateway client; nothing here reaches a gateway."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus
from typing import ClassVar

import grpc
import pytest

from recallatron.v1 import gateway_pb2 as pb
from services.gateway.review_web import ReviewApp
from services.gateway.review_web.pages import Response
from services.gateway.review_web.sessions import COOKIE


class _Client:
    """A gateway client that accepts every token and records its closing."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.closed = False

    def for_address(self, client_address: str | None, secret: str) -> _Client:
        return self

    def duplicate_pairs(self, **_: object) -> pb.ListDuplicatePairsResponse:
        return pb.ListDuplicatePairsResponse()

    def entity_pairs(self, **_: object) -> pb.ListEntityPairsResponse:
        return pb.ListEntityPairsResponse()

    def entity_merges(self, **_: object) -> pb.ListEntityMergesResponse:
        return pb.ListEntityMergesResponse()

    def who_am_i(self) -> object:
        return type("Me", (), {"member_handle": "alice", "workspace_slug": "team"})()

    def close(self) -> None:
        self.closed = True


def _app() -> ReviewApp:
    return ReviewApp("127.0.0.1:1", client_factory=_Client)  # type: ignore[arg-type]


def _sid(answer: Response) -> str:
    (cookie,) = [v for k, v in answer.headers if k == "Set-Cookie"]
    return cookie.split(";", 1)[0].split("=", 1)[1]


def _signin(app: ReviewApp, token: str, cookies: dict[str, str] | None = None) -> Response:
    answer = app.handle("POST", "/signin", cookies or {}, {"token": token})
    assert answer.status == HTTPStatus.SEE_OTHER, answer.body[-300:]
    return answer


def test_signing_in_again_ends_the_session_the_browser_held() -> None:
    app = _app()
    for first_token, second_token in (("rct_alice", "rct_bob"), ("rct_carol", "rct_carol")):
        old = _sid(_signin(app, first_token))
        old_session = app.sessions.get(old)
        assert old_session is not None
        new = _sid(_signin(app, second_token, {COOKIE: old}))
        assert new != old
        # The old id signs nothing in any more: its session and client are gone.
        assert app.sessions.get(old) is None, (first_token, second_token)
        assert old_session.client.closed  # type: ignore[attr-defined]
        stale = app.handle("GET", "/", {COOKIE: old}, {})
        assert b"data-testid=token" in stale.body
        form = {"csrf": old_session.csrf, "action": "keep", "first_id": "a", "second_id": "b"}
        assert app.handle("POST", "/decide", {COOKIE: old}, form).status == HTTPStatus.SEE_OTHER
        assert old_session.flash == []
        # The new one is signed in.
        assert b"data-testid=signout" in app.handle("GET", "/", {COOKIE: new}, {}).body
    assert len(app.sessions) == 2


def test_a_refused_signin_leaves_the_session_as_it_was() -> None:
    """Only a sign-in that succeeds replaces the browser's session: a mistyped
    token neither signs the person out nor in as anyone else."""
    app = _app()
    held = _sid(_signin(app, "rct_alice"))
    refused = app.handle("POST", "/signin", {COOKIE: held}, {"token": "not a token"})
    assert refused.status == HTTPStatus.BAD_REQUEST
    assert app.sessions.get(held) is not None


class _Unescaped(_Client):
    def who_am_i(self) -> object:
        return type("Me", (), {"member_handle": "<b>al&ice</b>", "workspace_slug": 't"><script>'})()


class _OldGateway(_Client):
    def who_am_i(self) -> object:
        raise _Unimplemented()


class _Unimplemented(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNIMPLEMENTED

    def details(self) -> str:
        return "Method not found!"


def test_the_page_shows_who_is_signed_in_escaped() -> None:
    app = ReviewApp("127.0.0.1:1", client_factory=_Unescaped)  # type: ignore[arg-type]
    sid = _sid(_signin(app, "rct_alice"))
    body = app.handle("GET", "/", {COOKIE: sid}, {}).body
    assert b"data-testid=handle>&lt;b&gt;al&amp;ice&lt;/b&gt;</b>" in body, body[:600]
    assert b"data-testid=workspace>t&quot;&gt;&lt;script&gt;</b>" in body
    assert b"<script>" not in body


def test_a_gateway_that_cannot_say_who_still_signs_in() -> None:
    """A gateway from before WhoAmI: the page signs in and shows no name."""
    app = ReviewApp("127.0.0.1:1", client_factory=_OldGateway)  # type: ignore[arg-type]
    sid = _sid(_signin(app, "rct_alice"))
    body = app.handle("GET", "/", {COOKIE: sid}, {}).body
    assert b"data-testid=signout" in body and b"data-testid=signed-in" not in body


class _ClosingClient(_Client):
    """Refuses calls once closed, as a gRPC channel does (ValueError); its
    second pair listing (the view after sign-in) first runs ``during``:
    another tab's request."""

    during: ClassVar[list[Callable[[], object]]] = []

    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.listings = 0

    def _open(self) -> None:
        if self.closed:
            raise ValueError("Cannot invoke RPC on closed channel!")

    def duplicate_pairs(self, **_: object) -> pb.ListDuplicatePairsResponse:
        self._open()
        self.listings += 1
        if self.listings == 2 and self.during:
            self.during.pop()()
        return pb.ListDuplicatePairsResponse()

    def entity_pairs(self, **_: object) -> pb.ListEntityPairsResponse:
        self._open()
        return pb.ListEntityPairsResponse()

    def entity_merges(self, **_: object) -> pb.ListEntityMergesResponse:
        self._open()
        return pb.ListEntityMergesResponse()


@pytest.mark.parametrize("other_tab", ["signout", "signin"])
def test_a_view_under_way_when_its_session_ends_is_answered(other_tab: str) -> None:
    """Signing out (or in again) in one tab while another tab's page is being
    drawn: the view under way had its gateway client closed mid-page, and its
    next call answered 500 (ValueError: Cannot invoke RPC on closed channel!).
    The client is closed once no request uses it."""
    app = ReviewApp("127.0.0.1:1", client_factory=_ClosingClient)  # type: ignore[arg-type]
    sid = _sid(_signin(app, "rct_alice"))
    session = app.sessions.get(sid)
    assert session is not None
    others: list[Response] = []
    form = {"csrf": session.csrf}
    signout = lambda: others.append(app.handle("POST", "/signout", {COOKIE: sid}, form))  # noqa: E731
    signin = lambda: others.append(_signin(app, "rct_alice", {COOKIE: sid}))  # noqa: E731
    _ClosingClient.during = [signout if other_tab == "signout" else signin]
    view = app.handle("GET", "/", {COOKIE: sid}, {})
    assert others and others[0].status == HTTPStatus.SEE_OTHER
    assert view.status == HTTPStatus.OK, view.body[-300:]
    # Ended for whatever comes next, and its client closed once unused.
    assert app.sessions.get(sid) is None
    assert session.client.closed  # type: ignore[attr-defined]
    assert b"data-testid=token" in app.handle("GET", "/", {COOKIE: sid}, {}).body
