"""The HTTP/JSON adapter checks a call's caller before it reads the body
(services/gateway/httpjson/app.py, ``Auth.admit``): with the gateway's own
authentication, on a thread off the event loop, for the address the gRPC
path would count; the calls that need no token are the same on both paths;
a store that cannot answer is UNAVAILABLE, never a refusal of the token or
of the body."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import MutableMapping
from typing import Any

import grpc
import pytest
from google.protobuf.message_factory import GetMessageClass

from recallatron import errors, forwarding
from recallatron.settings import CommonSettings
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2, store_pb2
from services.gateway import forwarded, scopes
from services.gateway.admissions import ADMISSION_KEY, Admissions
from services.gateway.auth import Auth
from services.gateway.authcache import Identity
from services.gateway.httpjson.app import HttpJsonApp, error_body, refused_by
from services.gateway.ratelimit import FailureLimiter
from services.gateway.review import ReviewServicer
from services.gateway.server import AdminServicer, MemoryServicer

SERVICES = [
    gateway_pb2.DESCRIPTOR.services_by_name[n]
    for n in ("MemoryService", "ReviewService", "AdminService")
]
RECALL = "/recallatron.v1.MemoryService/Recall"
REMEMBER = "/recallatron.v1.MemoryService/Remember"
DESCRIBE = "/recallatron.v1.MemoryService/DescribeTools"
PEER = "ipv4:192.0.2.1:4000"
UNKNOWN = errors.Relayed(grpc.StatusCode.NOT_FOUND.value[0], "token not found")


class _Store:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked = 0

    def call(self, method: Any, request: Any, assertion: str) -> Any:
        self.asked += 1
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class _Peers:
    def __init__(self, answer: Any) -> None:
        self.store = _Store(answer)

    def service(self, *paths: str) -> str:
        return "assertion"


def _auth(answer: Any, failures: FailureLimiter | None = None) -> tuple[Auth, _Store]:
    peers = _Peers(answer)
    return Auth(peers, "operator-token", failures=failures), peers.store  # type: ignore[arg-type]


def test_admission_is_the_gateways_authentication() -> None:
    auth, store = _auth(UNKNOWN, FailureLimiter(0.001, 2))
    auth.admit(DESCRIBE, None, PEER)
    auth.admit(DESCRIBE, "Bearer rc_not_needed", PEER)
    with pytest.raises(errors.Unauthenticated):
        auth.admit(RECALL, None, PEER)
    with pytest.raises(errors.Unauthenticated):
        auth.admit(RECALL, "Basic abc", PEER)
    # The operator's token: the call itself says whether it may make it.
    auth.admit(RECALL, "Bearer operator-token", PEER)
    assert store.asked == 0
    for port in (1000, 1001):
        with pytest.raises(errors.Unauthenticated):
            auth.admit(RECALL, "Bearer rc_guess", f"ipv4:10.0.0.1:{port}")
    # The address's allowance is spent, whatever its port; another's is its own.
    with pytest.raises(errors.ResourceExhausted):
        auth.admit(RECALL, "Bearer rc_guess", "ipv4:10.0.0.1:2000")
    with pytest.raises(errors.Unauthenticated):
        auth.admit(RECALL, "Bearer rc_guess", "ipv4:10.0.0.2:1000")
    assert store.asked == 3


def test_admission_holds_a_token_to_its_scope() -> None:
    reader = store_pb2.AuthenticateResponse(
        workspace_id="w", member_id="m", role=cpb.ROLE_MEMBER, read_only=True
    )
    auth, _ = _auth(reader)
    auth.admit(RECALL, "Bearer rc_reader", PEER)
    with pytest.raises(errors.PermissionDenied):
        auth.admit(REMEMBER, "Bearer rc_reader", PEER)


@pytest.mark.parametrize(
    "down",
    [
        errors.Unavailable("store is unavailable; retry shortly", 1.0),
        errors.Relayed(grpc.StatusCode.UNAVAILABLE.value[0], "the database is unavailable"),
    ],
)
def test_a_store_that_cannot_answer_is_unavailable(down: errors.DomainError) -> None:
    """Never a refusal of the token (401), of the body (400) or a spent
    allowance: the store did not say the token is unknown."""
    auth, store = _auth(down, FailureLimiter(0.001, 1))
    for _ in range(3):
        with pytest.raises(errors.DomainError) as raised:
            auth.admit(RECALL, "Bearer rc_some_token", PEER)
        refused = refused_by(raised.value)
        assert (refused.status, refused.code, refused.counted) == (
            503,
            "unavailable",
            "UNAVAILABLE",
        )
    assert store.asked == 3
    body = json.loads(error_body(refused_by(errors.Unavailable("store is unavailable", 1.0))))
    assert body["code"] == "unavailable"
    assert [d["type"] for d in body["details"]] == ["google.rpc.RetryInfo"]
    assert body["details"][0]["debug"] == {"retryDelay": "1s"}


class _Context:
    def __init__(self, *metadata: tuple[str, str]) -> None:
        self.metadata = metadata

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    def peer(self) -> str:
        return PEER


MEMBER = store_pb2.AuthenticateResponse(workspace_id="w", member_id="m", role=cpb.ROLE_MEMBER)


def test_the_admitted_identity_is_handed_to_the_relayed_call_once() -> None:
    """Without a live cache the admission asks the store, and the call it
    relays does not ask again; a ticket is taken once, and only with its
    own token (services/gateway/admissions.py)."""
    auth, store = _auth(MEMBER)
    carried = auth.admit(RECALL, "Bearer rc_member", PEER)
    assert store.asked == 1 and [key for key, _ in carried] == [ADMISSION_KEY]
    relayed = _Context(("authorization", "Bearer rc_member"), *carried)
    assert auth.member(relayed).member_id == "m"  # type: ignore[arg-type]
    assert store.asked == 1
    # Taken: the same ticket again is no hand-over, and the token is asked.
    assert auth.member(relayed).member_id == "m"  # type: ignore[arg-type]
    assert store.asked == 2
    # A ticket is no hand-over for another token, which is asked for itself.
    other = _Context(
        ("authorization", "Bearer rc_other"), *auth.admit(RECALL, "Bearer rc_member", PEER)
    )
    auth.member(other)  # type: ignore[arg-type]
    assert store.asked == 4
    # Nor without a token, or with one the store does not know.
    carried = auth.admit(RECALL, "Bearer rc_member", PEER)
    with pytest.raises(errors.Unauthenticated):
        auth.member(_Context(*carried))  # type: ignore[arg-type]
    unknown, _ = _auth(UNKNOWN)
    forged = _Context(("authorization", "Bearer rc_guess"), (ADMISSION_KEY, "made-up"))
    with pytest.raises(errors.Unauthenticated):
        unknown.member(forged)  # type: ignore[arg-type]
    # A revocation between the admission and the relayed call: asked again.
    auth, store = _auth(MEMBER)
    carried = auth.admit(RECALL, "Bearer rc_member", PEER)
    auth.cache.flush()
    auth.member(_Context(("authorization", "Bearer rc_member"), *carried))  # type: ignore[arg-type]
    assert store.asked == 2
    # The operator's token and the open calls are handed nothing.
    assert auth.admit(RECALL, "Bearer operator-token", PEER) == ()
    assert auth.admit(DESCRIBE, None, PEER) == ()


def test_a_ticket_is_not_kept_past_its_time_a_revocation_or_the_table() -> None:
    ident = Identity("w", "m", cpb.ROLE_MEMBER)
    table = Admissions(ttl_seconds=0.0)
    assert table.redeem(table.issue("rc_a", ident), "rc_a") is None
    table = Admissions(max_tickets=2)
    tickets = [table.issue("rc_a", ident) for _ in range(3)]
    assert len(table) == 2
    assert table.redeem(tickets[0], "rc_a") is None
    assert table.redeem(tickets[2], "rc_a") == ident
    expired = Identity("w", "m", cpb.ROLE_MEMBER, expires_at=1.0)
    assert table.redeem(table.issue("rc_a", expired), "rc_a") is None
    # A revocation came since it was made (the auth cache's generation moved).
    assert table.redeem(table.issue("rc_a", ident, 7), "rc_a", 8) is None
    assert table.redeem(table.issue("rc_a", ident, 8), "rc_a", 8) == ident


def test_the_open_calls_are_those_grpc_answers_without_a_token() -> None:
    """scopes.OPEN_CALLS, which the adapter lets through without a token, is
    exactly what the gRPC handlers answer without one."""
    auth, _ = _auth(UNKNOWN)
    memory, review = MemoryServicer(None, auth), ReviewServicer(None, auth)  # type: ignore[arg-type]
    admin = AdminServicer(None, auth)  # type: ignore[arg-type]
    handlers = {
        "MemoryService": memory.handlers(SERVICES[0]),
        "ReviewService": review.handlers(SERVICES[1]),
    }
    answered = set()
    for service in SERVICES:
        for m in service.methods:
            own = handlers.get(service.name, {})
            handler = own[m.name] if m.name in own else getattr(admin, m.name)
            try:
                handler(GetMessageClass(m.input_type)(), _Context())
            except errors.Unauthenticated:
                continue
            answered.add(f"/{service.full_name}/{m.name}")
    assert answered == scopes.OPEN_CALLS


class _Refusing:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, str]] = []
        self.threads: list[int] = []

    def admit(
        self, method: str, authorization: str | None, peer: str
    ) -> tuple[tuple[str, str], ...]:
        self.calls.append((method, authorization, peer))
        self.threads.append(threading.get_ident())
        raise errors.Unauthenticated("authorization: unknown or revoked token")


def _post(
    app: HttpJsonApp, headers: list[tuple[bytes, bytes]], chunks: list[bytes]
) -> tuple[list[dict[str, Any]], int, int]:
    """The events ``app`` sent for a POST of ``chunks`` to Recall, how many
    of the chunks it took, and the event loop's thread."""
    sent: list[dict[str, Any]] = []
    left = list(chunks)

    async def receive() -> dict[str, Any]:
        if not left:
            await asyncio.sleep(3600)  # past the body: only a disconnect would come
        body = left.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(left)}

    async def send(event: MutableMapping[str, Any]) -> None:
        sent.append(dict(event))

    async def run() -> int:
        scope = {
            "type": "http",
            "method": "POST",
            "path": RECALL,
            "headers": [(b"content-type", b"application/json"), *headers],
            "client": ("192.0.2.7", 4000),
        }
        await asyncio.wait_for(app(scope, receive, send), 30)
        return threading.get_ident()

    loop_thread = asyncio.run(run())
    return sent, len(chunks) - len(left), loop_thread


def test_the_app_checks_the_token_off_the_loop_before_the_body() -> None:
    auth = _Refusing()
    app = HttpJsonApp("127.0.0.1:1", CommonSettings(), SERVICES, auth)
    # A body no parser takes: refused for its token, not for the body.
    sent, taken, loop_thread = _post(
        app, [(b"authorization", b"Bearer rc_guess")], [b"[" * 65536, b"not json"]
    )
    assert sent[0]["status"] == 401
    assert json.loads(sent[1]["body"])["code"] == "unauthenticated"
    assert auth.calls == [(RECALL, "Bearer rc_guess", "ipv4:192.0.2.7:4000")]
    assert auth.threads[0] != loop_thread
    # Read to its end all the same (a client sending it then reads the answer).
    assert taken == 2
    # A client that waits to be asked for the body is never asked.
    sent, taken, _ = _post(app, [(b"expect", b"100-continue")], [b"{}"])
    assert (sent[0]["status"], taken) == (401, 0)


def test_the_app_counts_a_forwarded_address_only_with_a_known_secret() -> None:
    """As the gRPC path does (services/gateway/forwarded.py): a front in
    another process forwards its users' addresses with the shared secret."""
    auth = _Refusing()
    app = HttpJsonApp("127.0.0.1:1", CommonSettings(), SERVICES, auth)
    sent_by_front = [
        (k.encode(), v.encode()) for k, v in forwarding.metadata("203.0.113.9:5000", "shared")
    ]
    try:
        forwarded.configure("shared")
        _post(app, sent_by_front, [b"{}"])
        forwarded.configure("")
        _post(app, sent_by_front, [b"{}"])
    finally:
        forwarded.configure("")
    assert [peer for _, _, peer in auth.calls] == ["ipv4:203.0.113.9:5000", "ipv4:192.0.2.7:4000"]
