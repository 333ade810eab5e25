"""The review page's sessions against the real stack: a session whose token
the gateway no longer accepts (revoked, expired) ends at the next page view,
rather than living on as a signed-in page of refusals. Driven through the
page's application with a real gateway client, as the HTTP server calls it."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.gateway.review_web import ReviewApp
from services.gateway.review_web.sessions import COOKIE
from tests.conftest import Team, wait_for

pytestmark = pytest.mark.integration


def _cleared(headers: list[tuple[str, str]]) -> bool:
    return any(k == "Set-Cookie" and v.startswith(f"{COOKIE}=;") for k, v in headers)


def test_a_session_ends_once_its_token_is_revoked(
    stack: Stack, team: Team, operator: Client
) -> None:
    app = ReviewApp(stack.gateway)
    signed = app.handle("POST", "/signin", {}, {"token": team.clients["bob"].token})
    assert signed.status == HTTPStatus.SEE_OTHER
    cookie = next(v for k, v in signed.headers if k == "Set-Cookie")
    sid = cookie.split(";")[0].split("=", 1)[1]
    assert app.handle("GET", "/", {COOKIE: sid}, {}).status == HTTPStatus.OK
    session = app.sessions.get(sid)
    assert session is not None

    operator.revoke_token(team.token_ids["bob"])
    wait_for(lambda: _refused(team.clients["bob"]), what="the revocation to take effect")
    page = app.handle("GET", "/", {COOKIE: sid}, {})
    # The person is told and asked to sign in again; the session and the
    # token it held are gone, and the browser's cookie is cleared.
    assert page.status == HTTPStatus.UNAUTHORIZED, page.body[-300:]
    assert b"data-testid=token" in page.body
    assert b"sign in again" in page.body
    assert _cleared(page.headers), page.headers
    assert app.sessions.get(sid) is None
    assert len(app.sessions) == 0
    # A decision posted on the gone session is not run: back to sign-in.
    form = {"csrf": session.csrf, "action": "keep", "first_id": "x", "second_id": "y"}
    again = app.handle("POST", "/decide", {COOKIE: sid}, form)
    assert again.status == HTTPStatus.SEE_OTHER and session.flash == []


def test_the_page_shows_who_is_signed_in(stack: Stack, team: Team, operator: Client) -> None:
    """The member's handle and workspace, for an unscoped token and for one
    scoped to a purpose and the read-only calls."""
    scoped = operator.create_token(
        team.members["bob"], "review", purposes=["audit"], read_only=True
    ).token
    app = ReviewApp(stack.gateway)
    for token in (team.clients["bob"].token, scoped):
        signed = app.handle("POST", "/signin", {}, {"token": token})
        assert signed.status == HTTPStatus.SEE_OTHER, signed.body[-300:]
        sid = next(v for k, v in signed.headers if k == "Set-Cookie").split(";")[0].split("=", 1)[1]
        landing = next(v for k, v in signed.headers if k == "Location")
        page = app.handle("GET", landing, {COOKIE: sid}, {})
        assert page.status == HTTPStatus.OK
        assert b"data-testid=handle>bob</b>" in page.body, page.body[:600]
        assert f"data-testid=workspace>{team.slug}</b>".encode() in page.body
    me = team.clients["bob"].who_am_i()
    assert (me.member_id, me.workspace_id) == (team.members["bob"], team.workspace_id)


def _refused(client: Client) -> bool:
    try:
        client.duplicate_pairs(limit=1)
    except Exception:
        return True
    return False


def test_an_owner_s_token_for_other_purposes_is_not_told_only_owners_decide(
    stack: Stack, team: Team, operator: Client
) -> None:
    """An owner signed in with a token scoped to audit, looking at assist: the
    page said "Only a workspace owner decides on entity merges" to the
    workspace's owner (the scope's refusal taken for the owner rule's)."""
    scoped = operator.create_token(team.members["ada"], "review", purposes=["audit"]).token
    app = ReviewApp(stack.gateway)
    signed = app.handle("POST", "/signin", {}, {"token": scoped})
    sid = next(v for k, v in signed.headers if k == "Set-Cookie").split(";")[0].split("=", 1)[1]
    page = app.handle("GET", "/?purpose=assist", {COOKIE: sid}, {}).body
    assert b"assist is outside it" in page, page[-800:]
    assert b"Only a workspace owner" not in page, page[-800:]
    # For its own purpose the owner's entity part is there; a member is told.
    page = app.handle("GET", "/?purpose=audit", {COOKIE: sid}, {}).body
    assert b"Only a workspace owner" not in page and b"Entity pairs" in page
    signed = app.handle("POST", "/signin", {}, {"token": team.clients["bob"].token})
    sid = next(v for k, v in signed.headers if k == "Set-Cookie").split(";")[0].split("=", 1)[1]
    assert b"Only a workspace owner" in app.handle("GET", "/", {COOKIE: sid}, {}).body
