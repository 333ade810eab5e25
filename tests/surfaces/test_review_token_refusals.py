"""Signing in to the review page with a token the gateway refuses: the page
says why as every other surface does (gRPC and HTTP/JSON say "token expired"
for an expired token, docs/api.md), never "revoked" for a token that only
expired, and never shows the token. Against the real stack."""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus

import grpc
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.gateway.review_web import ReviewApp
from tests.conftest import Team, wait_for

pytestmark = pytest.mark.integration


def _expired(client: Client) -> bool:
    try:
        client.who_am_i()
    except grpc.RpcError as exc:
        return exc.code() == grpc.StatusCode.UNAUTHENTICATED and "expired" in str(exc.details())
    return False


def test_a_refused_sign_in_says_why_as_the_api_does(
    stack: Stack, team: Team, operator: Client
) -> None:
    expiring = operator.create_token(
        team.members["bob"], "review", expires_in=timedelta(seconds=1)
    ).token
    client = Client(stack.gateway, expiring)
    try:
        wait_for(lambda: _expired(client), "the token to expire")
    finally:
        client.close()
    app = ReviewApp(stack.gateway)
    for token, said in (
        (expiring, b"token expired"),
        (stack.admin_token, b"operator token is not a member&#x27;s token"),
        ("rct_" + "x" * 43, b"unknown or revoked"),
    ):
        page = app.handle("POST", "/signin", {}, {"token": token})
        assert page.status == HTTPStatus.UNAUTHORIZED, page.body[-300:]
        flash = page.body.split(b"role=alert>", 1)[-1].split(b"</p>", 1)[0]
        assert said in flash, flash
        assert b"revoked" not in flash or token != expiring, flash
        assert token.encode() not in page.body
        assert b"data-testid=token" in page.body
    assert len(app.sessions) == 0
