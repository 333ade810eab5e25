"""The per-token rate limit takes one call from a token's bucket per call,
whatever checks the call makes of its caller (services/gateway/auth.py): an
owner's admin call asks whether its token is the operator's and then whose
it is, and is still one call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import grpc

from recallatron import errors
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import store_pb2
from services.gateway.auth import Auth
from services.gateway.ratelimit import RateLimiter

OWNER_TOKEN = "rct_owner"
MEMBER_TOKEN = "rct_member"


class _Store:
    def call(self, method: Any, request: store_pb2.AuthenticateRequest, assertion: str) -> Any:
        role = cpb.ROLE_OWNER if request.token == OWNER_TOKEN else cpb.ROLE_MEMBER
        return store_pb2.AuthenticateResponse(workspace_id="ws", member_id="m", role=role)


class _Peers:
    store = _Store()

    def service(self, *paths: str) -> str:
        return "assertion"


class _FakeContext:
    def __init__(self, token: str) -> None:
        self.token = token

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)

    def peer(self) -> str:
        return "ipv4:192.0.2.1:4000"


def _context(token: str) -> grpc.ServicerContext:
    return cast(grpc.ServicerContext, _FakeContext(token))


Check = Callable[[Auth, grpc.ServicerContext], Any]


def test_each_kind_of_call_takes_one_call_from_the_tokens_bucket() -> None:
    """A bucket of 3 refilled once in 1,000 s: three calls of any kind pass
    and the fourth is refused, for an owner's admin calls as for a member's
    tools (operator_or_owner asked the limiter twice per call: an owner got
    half the calls the limit names)."""
    checks: list[tuple[str, Check]] = [
        (OWNER_TOKEN, lambda auth, ctx: auth.operator_or_owner(ctx)),
        (OWNER_TOKEN, lambda auth, ctx: auth.owner(ctx, "do this")),
        (MEMBER_TOKEN, lambda auth, ctx: auth.member(ctx)),
    ]
    for token, check in checks:
        auth = Auth(_Peers(), "operator-token", limiter=RateLimiter(0.001, 3))  # type: ignore[arg-type]
        served = 0
        for _ in range(4):
            try:
                check(auth, _context(token))
                served += 1
            except errors.ResourceExhausted as exc:
                assert "rate limit" in exc.message, exc.message
        assert served == 3, (token, served)


def test_the_operators_calls_take_one_call_each() -> None:
    auth = Auth(_Peers(), "operator-token", limiter=RateLimiter(0.001, 3))  # type: ignore[arg-type]
    served = 0
    for _ in range(4):
        try:
            assert auth.operator_or_owner(_context("operator-token")) is None
            served += 1
        except errors.ResourceExhausted as exc:
            assert "rate limit" in exc.message, exc.message
    assert served == 3
