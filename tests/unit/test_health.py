"""The two health signals every server gives (recallatron/grpcserver):
readiness (the empty name and each service's own) follows what the process
needs, liveness (its own name) stays SERVING whatever readiness does."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from recallatron.grpcserver import LIVENESS, Server
from recallatron.settings import CommonSettings
from tests.conftest import wait_for

SERVICE = "recallatron.v1.Example"


@pytest.fixture
def served() -> Iterator[tuple[Server, grpc.Channel]]:
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    server = Server(CommonSettings(server_threads=2), [SERVICE])
    port = server.start("127.0.0.1:0")
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield server, channel
    finally:
        server.stop()
        channel.close()
        server.grpc_server.stop(0).wait()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def _status(channel: grpc.Channel, service: str) -> str:
    response = health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service=service), timeout=10
    )
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


def _all(channel: grpc.Channel) -> dict[str, str]:
    return {name: _status(channel, name) for name in ("", SERVICE, LIVENESS)}


def test_readiness_follows_its_check_and_liveness_stays_serving(
    served: tuple[Server, grpc.Channel],
) -> None:
    server, channel = served
    assert _all(channel) == {"": "NOT_SERVING", SERVICE: "NOT_SERVING", LIVENESS: "SERVING"}
    up = threading.Event()
    broken = threading.Event()

    def ready() -> bool:
        if broken.is_set():
            raise RuntimeError("the check itself failed")
        return up.is_set()

    server.follow_readiness(ready, 0.05, "a dependency")
    up.set()
    ready_state = {"": "SERVING", SERVICE: "SERVING", LIVENESS: "SERVING"}
    unready_state = {"": "NOT_SERVING", SERVICE: "NOT_SERVING", LIVENESS: "SERVING"}
    wait_for(lambda: _all(channel) == ready_state, "readiness SERVING with the dependency up")
    up.clear()
    wait_for(lambda: _all(channel) == unready_state, "readiness off with the dependency away")
    up.set()
    wait_for(lambda: _all(channel) == ready_state, "readiness SERVING again")
    # A check that fails counts as the dependency away, and the thread goes on.
    broken.set()
    wait_for(lambda: _all(channel) == unready_state, "readiness off when its check fails")
    broken.clear()
    wait_for(lambda: _all(channel) == ready_state, "readiness back after a failed check")


def test_the_drain_turns_liveness_off_too(served: tuple[Server, grpc.Channel]) -> None:
    server, channel = served
    server.set_serving()
    assert _all(channel) == {"": "SERVING", SERVICE: "SERVING", LIVENESS: "SERVING"}
    server.health.enter_graceful_shutdown()  # what wait_for_termination does first
    assert set(_all(channel).values()) == {"NOT_SERVING"}
