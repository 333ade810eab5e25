"""Readiness follows what a process cannot work without, liveness only the
process (docs/kubernetes.md, 'Probes and termination'): with the stack's
Postgres stopped the store (its control database gone) and the gateway (its
store not serving) go NOT_SERVING and come back to SERVING once it is back,
rank and embed stay SERVING, and every server's liveness stays SERVING
throughout, so a long outage takes pods out of their Services without
restarting them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from recallatron.grpcclient import make_channel
from recallatron.grpcserver import LIVENESS
from recallatron_devkit.stack import SERVICES, Stack
from tests.conftest import wait_for
from tests.faults.stackutil import new_stack, record, restart_postgres, running

pytestmark = pytest.mark.integration

ENV = {"RECALLATRON_SHUTDOWN_GRACE_SECONDS": "1", "RECALLATRON_STORE_TIMEOUT_SECONDS": "3"}
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture(scope="module")
def fault_stack(prepared_models_dir: Path) -> Iterator[Stack]:
    with running(new_stack(prepared_models_dir, ENV)) as stack:
        yield stack


def _status(stack: Stack, name: str, service: str = "") -> str:
    """The server's answer for ``service`` (the empty name: readiness, as the
    manifests' readiness probes ask), or the refusal's code."""
    channel = make_channel(
        stack.address(name), ca_file=stack.env_for(name).get("RECALLATRON_TLS_CA_FILE", "")
    )
    try:
        response = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=5
        )
    except grpc.RpcError as exc:
        return str(exc.code())
    finally:
        channel.close()
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


def _all(stack: Stack, service: str = "") -> dict[str, str]:
    return {name: _status(stack, name, service) for name in SERVICES}


def test_readiness_follows_postgres_and_liveness_stays(fault_stack: Stack) -> None:
    assert _all(fault_stack) == dict.fromkeys(SERVICES, "SERVING")
    assert _all(fault_stack, LIVENESS) == dict.fromkeys(SERVICES, "SERVING")
    pg = fault_stack.postgres
    assert pg is not None
    stopped = time.monotonic()
    pg.stop()
    try:
        seen: dict[str, str] = {}

        def unready() -> bool:
            seen.update(_all(fault_stack))
            return seen["store"] == "NOT_SERVING" and seen["gateway"] == "NOT_SERVING"

        wait_for(unready, "store and gateway NOT_SERVING with Postgres stopped")
        unready_after = time.monotonic() - stopped
        # Rank fails each call fast without the store and embed needs nothing:
        # both stay in their Services.
        assert seen["rank"] == "SERVING" and seen["embed"] == "SERVING", seen
        assert _all(fault_stack, LIVENESS) == dict.fromkeys(SERVICES, "SERVING")
    finally:
        restart_postgres(fault_stack)
    started = time.monotonic()
    wait_for(
        lambda: _all(fault_stack) == dict.fromkeys(SERVICES, "SERVING"),
        "every server SERVING again with Postgres back",
    )
    record(
        "readiness across a Postgres stop",
        unready_seconds=round(unready_after, 1),
        ready_again_seconds=round(time.monotonic() - started, 1),
    )
    assert _all(fault_stack, LIVENESS) == dict.fromkeys(SERVICES, "SERVING")
