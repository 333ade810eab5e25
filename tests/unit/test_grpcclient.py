"""A service's channels to its peers (recallatron/grpcclient.py): one thread
delivers their background calls' results for the process's life."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from google.protobuf.wrappers_pb2 import BytesValue

from recallatron import deadline, errors, grpcclient
from recallatron.grpcclient import keep_spinning, make_channel, peer_channel, unary
from recallatron.peer import Method, Peer
from recallatron.settings import CommonSettings

METHOD = "/test.Echo/Echo"


def _spinners() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "grpc-spin")


def _settle(expected: int) -> int:
    for _ in range(50):
        if _spinners() == expected:
            break
        time.sleep(0.02)
    return _spinners()


@pytest.fixture()
def address() -> Iterator[str]:
    release = threading.Event()

    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        # A raw "wait", or a message whose bytes end with it (BytesValue).
        if request.endswith(b"wait"):
            release.wait(5)
        return request

    server = grpc.server(ThreadPoolExecutor(4))
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(
                "test.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
            )
        ]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    release.set()
    server.stop(0)


def test_one_thread_serves_every_background_call(address: str) -> None:
    before = _spinners()
    # Kept for the process's life, as a service keeps its peers' channels.
    channel = peer_channel(address, CommonSettings())
    call: Any = channel.unary_unary(METHOD)
    assert _spinners() == before + 1
    for i in range(20):
        assert call.future(str(i).encode(), timeout=5).result() == str(i).encode()
    futures = [call.future(b"x", timeout=5) for _ in range(5)]
    assert [f.result() for f in futures] == [b"x"] * 5
    assert call(b"blocking", timeout=5) == b"blocking"
    # gRPC never started a thread of its own beside it.
    assert _spinners() == before + 1
    # A plain channel has gRPC's own: one per call at a time, ended after it.
    plain = make_channel(address)
    try:
        assert plain.unary_unary(METHOD).future(b"p", timeout=5).result() == b"p"
        assert _settle(before + 1) == before + 1
    finally:
        plain.close()


def test_an_abandoned_call_is_still_cancelled(address: str) -> None:
    channel = peer_channel(address, CommonSettings())
    call: Any = channel.unary_unary(METHOD)
    scope = deadline.Scope(120.0)
    leave = deadline.enter(scope)
    threading.Timer(0.2, scope.abandon).start()
    started = time.monotonic()
    try:
        with pytest.raises(errors.DeadlineExceeded):
            unary(call, b"wait", 60.0)
    finally:
        leave()
    # Ended by the abandonment, not by the call's own 60 s deadline.
    assert time.monotonic() - started < 30
    # The channel goes on serving.
    assert call.future(b"after", timeout=5).result() == b"after"


def test_a_call_started_in_the_background_is_cancelled_when_its_call_is_abandoned(
    address: str,
) -> None:
    # How rank starts the entity cards and history beside the arms
    # (recallatron/peer.py, Peer.start): the served call's abandonment must
    # stop them as it stops a call waited for at once (design §9).
    echo = Peer(peer_channel(address, CommonSettings()), 60.0, "the echo")
    method = Method(METHOD, BytesValue, BytesValue)
    scope = deadline.Scope(120.0)
    leave = deadline.enter(scope)
    try:
        pending = echo.start(method, BytesValue(value=b"wait"))
    finally:
        leave()
    scope.abandon()
    with pytest.raises(errors.DeadlineExceeded, match="abandoned"):
        pending.result()
    # A call started after the served call ended is its own, and answers.
    assert echo.start(method, BytesValue(value=b"after")).result().value == b"after"


def test_a_channel_with_calls_in_flight_is_left_as_it_came(address: str) -> None:
    channel = grpc.insecure_channel(address)
    try:
        call: Any = channel.unary_unary(METHOD)
        pending = call.future(b"wait", timeout=5)
        assert not keep_spinning(channel)
        pending.cancel()
    finally:
        channel.close()


def test_clients_for_many_tokens_share_one_channel_and_close_none() -> None:
    """The MCP server's clients, one per token a call brings: a stranger sending
    many tokens once evicted (and closed) clients with calls in flight."""
    from recallatron_mcp.server import Clients

    clients = Clients("127.0.0.1:1", "default")
    try:
        made = [clients.get(f"token-{i}") for i in range(200)]
        assert {id(c.channel) for c in made} == {id(clients.get("x").channel)}
        assert [c.token for c in made[:2]] == ["token-0", "token-1"]
        assert made[0]._md() == (("authorization", "Bearer token-0"),)
    finally:
        clients.close()


def test_the_mcp_server_forwards_each_http_client_s_address_with_the_secret() -> None:
    """With RECALLATRON_FORWARDING_SECRET the MCP server's calls carry their
    HTTP client's address and the secret (the gateway counts failed
    authentications per that address); without it, nothing is added."""
    import asyncio

    from recallatron.forwarding import PEER_KEY, PROOF_KEY
    from recallatron_mcp.server import CLIENT_ADDRESS, Clients, RememberClient

    plain = Clients("127.0.0.1:1", "default")
    shared = Clients("127.0.0.1:1", "default", "s3cret")
    try:
        assert plain.get("t", "198.51.100.4:4000")._md() == (("authorization", "Bearer t"),)
        assert dict(shared.get("t", "198.51.100.4:4000")._md()) == {
            "authorization": "Bearer t",
            PEER_KEY: "ipv4:198.51.100.4:4000",
            PROOF_KEY: "s3cret",
        }
        seen: list[str | None] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            seen.append(CLIENT_ADDRESS.get())
            seen.append(dict(shared.get("t")._md()).get(PEER_KEY))

        scope = {"type": "http", "client": ("2001:db8::7", 5000)}
        asyncio.run(RememberClient(app)(scope, None, None))
        assert seen == ["2001:db8::7:5000", "ipv6:[2001:db8::7]:5000"]
        assert CLIENT_ADDRESS.get() is None
    finally:
        plain.close()
        shared.close()


def test_the_review_page_forwards_with_the_shared_secret_when_it_has_one() -> None:
    """The review page run on its own (python -m services.gateway.review_web)
    is another process than the gateway: its calls' addresses are believed
    only with RECALLATRON_FORWARDING_SECRET, so it signs with that one."""
    from recallatron.client import Client
    from recallatron.forwarding import PROOF_KEY
    from services.gateway import forwarded

    client = Client("127.0.0.1:1", "t")
    try:
        forwarded.configure("s3cret")
        signed = dict(forwarded.for_user(client, "198.51.100.4:4000")._md())
        assert signed[PROOF_KEY] == "s3cret"
    finally:
        forwarded.configure("")
        client.close()
    # Without one, its own process's secret (the page in the gateway's process).
    unsigned = dict(forwarded.for_user(client, "198.51.100.4:4000")._md())
    assert unsigned[PROOF_KEY] and unsigned[PROOF_KEY] != "s3cret"


class _Ended(grpc.RpcError):
    """A peer's call that ended with ``code`` and no rich details."""

    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "ended"

    def trailing_metadata(self) -> tuple[()]:
        return ()


def test_a_peer_past_the_callers_own_deadline_is_that_deadline_not_an_outage() -> None:
    # The caller's deadline passed while a peer served it: the peer's
    # DEADLINE_EXCEEDED is the caller's own (504 over HTTP), not an outage to
    # retry; with time left it is the peer's fault: UNAVAILABLE.
    for left, expected in ((-0.5, errors.DeadlineExceeded), (30.0, errors.Unavailable)):
        leave = deadline.enter(deadline.Scope(left))
        try:
            got = grpcclient.relay(_Ended(grpc.StatusCode.DEADLINE_EXCEEDED), "rank")
        finally:
            leave()
        assert type(got) is expected, (left, got)
    # Outside any call, and for a peer that is down, nothing changes.
    assert type(grpcclient.relay(_Ended(grpc.StatusCode.DEADLINE_EXCEEDED))) is errors.Unavailable
    leave = deadline.enter(deadline.Scope(-0.5))
    try:
        got = grpcclient.relay(_Ended(grpc.StatusCode.UNAVAILABLE), "rank")
    finally:
        leave()
    assert type(got) is errors.Unavailable
