"""Refused internal calls stay cheap (issue 35, item 3): an assertion over the
size bound is refused before it is decoded or its signature computed, and a
peer past its limit of failed assertions is refused before its calls reach a
handler, while another peer's calls go on. And an assertion is no bearer
credential (item 4): one made for a single call is bound to its request, so
replayed with another it is refused, and it expires seconds after its call's
deadline. Against an in-process internal server
(recallatron.grpcserver.Server with ``internal=True``)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.message_factory import GetMessageClass
from grpc_status import rpc_status

from recallatron import internal_auth, internal_channels
from recallatron.grpcserver import Server, add_methods
from recallatron.grpcserver.calls import FAILURE_BURST, PeerFailures
from recallatron.settings import CommonSettings
from recallatron.v1 import embed_pb2, embed_pb2_grpc

EMBED_SERVICE = embed_pb2.DESCRIPTOR.services_by_name["EmbedService"]
GET_MODEL_INFO = internal_auth.embed_method("GetModelInfo")


class Served:
    """An internal server whose handlers only count the calls they get."""

    def __init__(self, key: bytes) -> None:
        self.calls = 0
        self.lock = threading.Lock()
        self.server = Server(
            CommonSettings(internal_key=key.decode(), server_threads=4),
            [EMBED_SERVICE.full_name],
            internal=True,
        )

        def handler(answer: type) -> Callable[[Any, grpc.ServicerContext], Any]:
            def handle(request: Any, context: grpc.ServicerContext) -> Any:
                with self.lock:
                    self.calls += 1
                return answer()

            return handle

        add_methods(
            self.server.grpc_server,
            EMBED_SERVICE,
            {m.name: handler(GetMessageClass(m.output_type)) for m in EMBED_SERVICE.methods},
        )
        self.port = self.server.start("127.0.0.1:0")

    def channel(self) -> grpc.Channel:
        # A channel of its own is a connection of its own: another peer address.
        return grpc.insecure_channel(
            f"127.0.0.1:{self.port}", options=[("grpc.use_local_subchannel_pool", 1)]
        )


@pytest.fixture
def served() -> Iterator[Served]:
    key = internal_auth.new_key().encode()
    s = Served(key)
    yield s
    s.server.grpc_server.stop(0).wait()


@pytest.fixture
def macs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many signatures the server computed (each verification computes one)."""
    count = [0]
    real = internal_auth._mac

    def counted(key: bytes, payload: str) -> bytes:
        count[0] += 1
        return real(key, payload)

    monkeypatch.setattr(internal_auth, "_mac", counted)
    return count


def _call(channel: grpc.Channel, token: str) -> Callable[[], Any]:
    stub = embed_pb2_grpc.EmbedServiceStub(channel)
    return lambda: stub.GetModelInfo(
        embed_pb2.GetModelInfoRequest(), timeout=10, metadata=internal_auth.metadata(token)
    )


def _refusal(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def test_an_oversized_assertion_is_refused_without_being_verified(
    served: Served, macs: list[int]
) -> None:
    # 4 KB, shaped like an assertion: past the assertion's bound (2 KB), under
    # gRPC's own soft metadata limit (8 KB), past which gRPC refuses some calls
    # itself, at random, with RESOURCE_EXHAUSTED before any interceptor runs.
    garbage = "v1." + "A" * 3000 + "." + "B" * 1000
    channel = served.channel()
    try:
        before = macs[0]
        error = _refusal(_call(channel, garbage))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "too large" in (error.details() or "")
        assert macs[0] == before  # never decoded nor its signature computed
        assert served.calls == 0
    finally:
        channel.close()


def test_a_peer_past_its_failure_limit_is_refused_before_its_handler(
    served: Served, macs: list[int]
) -> None:
    key = served.server.settings.internal_signing_key()
    signer = internal_auth.Signer(key, "test")
    forged = internal_auth.Signer(os.urandom(32), "attacker").service([GET_MODEL_INFO])
    # The default burst, refilled so slowly that how fast this machine sends
    # the calls cannot matter (at the default 16/s a call slower than 62 ms,
    # as on a loaded machine, would never empty the bucket).
    served.server.interceptor.failures = PeerFailures(FAILURE_BURST, per_second=0.01)
    bad, good = served.channel(), served.channel()
    try:
        # A peer's failed assertions, up to its limit: each UNAUTHENTICATED.
        refused = []
        for _ in range(300):
            error = _refusal(_call(bad, forged))
            refused.append(error.code())
            if error.code() != grpc.StatusCode.UNAUTHENTICATED:
                break
        assert refused[0] == grpc.StatusCode.UNAUTHENTICATED
        # Past it, that peer is refused at once, even with a genuine assertion,
        # and told when to come back; its calls reach no handler.
        assert refused[-1] == grpc.StatusCode.RESOURCE_EXHAUSTED, refused[-3:]
        error = _refusal(_call(bad, signer.service([GET_MODEL_INFO])))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "failed caller assertions" in (error.details() or "")
        status = rpc_status.from_call(error)  # type: ignore[arg-type]
        assert status is not None and any(
            d.type_url.endswith("google.rpc.RetryInfo") for d in status.details
        )
        assert served.calls == 0
        # Another peer with a genuine assertion is served.
        _call(good, signer.service([GET_MODEL_INFO]))()
        assert served.calls == 1
    finally:
        bad.close()
        good.close()


class _Capture(grpc.UnaryUnaryClientInterceptor):
    """Keeps the assertion each call was sent with (what a listener on the
    wire would see)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def intercept_unary_unary(self, continuation, client_call_details, request):  # type: ignore[no-untyped-def]
        for k, v in client_call_details.metadata or ():
            if k == internal_auth.HEADER:
                self.sent.append(str(v))
        return continuation(client_call_details, request)


def test_an_assertion_replayed_with_another_request_is_refused(served: Served) -> None:
    key = served.server.settings.internal_signing_key()
    capture = _Capture()
    plain = served.channel()
    # The stack's own client side: an assertion made for this one call.
    vouched = internal_channels.member_channel(
        grpc.intercept_channel(plain, capture), internal_auth.Signer(key, "test")
    )
    stub = embed_pb2_grpc.EmbedServiceStub(plain)
    meant = embed_pb2.EmbedRequest(texts=["what the assertion was made for"])
    other = embed_pb2.EmbedRequest(texts=["something else entirely"])
    try:
        embed_pb2_grpc.EmbedServiceStub(vouched).Embed(meant, timeout=10)
        assert served.calls == 1
        [captured] = capture.sent
        replayed = internal_auth.metadata(captured)
        error = _refusal(lambda: stub.Embed(other, timeout=10, metadata=replayed))
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "another request" in (error.details() or "")
        assert served.calls == 1
        # With the request it was made for it is still good (until it expires).
        stub.Embed(meant, timeout=10, metadata=replayed)
        assert served.calls == 2
    finally:
        plain.close()


def test_an_assertion_expires_seconds_after_the_longest_deadline_of_a_hop() -> None:
    key = internal_auth.new_key().encode()
    token = internal_auth.Signer(key, "gateway").service([GET_MODEL_INFO])
    # Good through the gateway's 5 s deadline for its calls...
    assert internal_auth.verify(key, token, GET_MODEL_INFO, now=time.time() + 5.0)
    # ...and refused once that and the clock skew allowed are well past.
    later = time.time() + 5.0 + internal_auth.CLOCK_SKEW_SECONDS + 10.0
    with pytest.raises(internal_auth.errors.Unauthenticated, match="expired"):
        internal_auth.verify(key, token, GET_MODEL_INFO, now=later)


def test_open_streams_without_a_credential_cannot_take_every_thread(served: Served) -> None:
    """Reflection and health need no credential, and a stream of them held
    open (one request, then silence, no deadline) held a handler thread for
    as long as its connection lived: as many as the server has threads
    starved every real call and the health check. Open streams now have a few
    places of their own; past them, RESOURCE_EXHAUSTED at once."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    stop = threading.Event()
    held: list[tuple[grpc.Channel, Any]] = []

    def silent() -> Iterator[Any]:
        yield reflection_pb2.ServerReflectionRequest(list_services="")
        stop.wait()

    codes: list[grpc.StatusCode] = []
    try:
        for _ in range(6):  # more than the server's 4 threads
            channel = served.channel()
            call = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(silent())
            held.append((channel, call))
            try:
                next(call)
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as exc:
                codes.append(exc.code())  # type: ignore[attr-defined]
        assert grpc.StatusCode.RESOURCE_EXHAUSTED in codes
        assert codes.count(grpc.StatusCode.OK) < 4
        # Real calls and the health check are still served.
        with served.channel() as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
            # Answered (this test's server never says SERVING; it was starved).
            assert health.status == health_pb2.HealthCheckResponse.NOT_SERVING
            signer = internal_auth.Signer(served.server.interceptor.internal_key, "test")
            _call(channel, signer.service([GET_MODEL_INFO]))()
            assert served.calls == 1
    finally:
        stop.set()
        for channel, call in held:
            call.cancel()
            channel.close()
