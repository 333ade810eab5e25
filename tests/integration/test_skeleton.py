"""The walking skeleton end to end: tokens, remember -> read through the
gateway, health, and the services started in any order."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from recallatron.client import Client
from recallatron.v1 import gateway_pb2, gateway_pb2_grpc
from recallatron_devkit.localpg import LocalPostgres
from tests.conftest import Team, free_port

pytestmark = pytest.mark.integration


def test_remember_then_read_through_the_gateway(team: Team) -> None:
    ada = team.clients["ada"]
    made = ada.remember(
        "Quarterly planning is on Thursday",
        "Room 4B, bring the roadmap draft.",
        kind="decision",
        audience_to="workspace",
        purposes=["assist", "audit"],
        mention_names=["roadmap"],
        confidence=0.8,
    ).memory
    assert made.revision == 1 and made.origin == 1  # told
    got = ada.read([made.id]).memories
    assert len(got) == 1
    m = got[0]
    assert (m.title, m.body, m.kind) == (made.title, made.body, 3)
    assert m.audience.workspace
    assert sorted(m.purposes) == [1, 4]
    assert abs(m.confidence - 0.8) < 1e-9
    assert [x.name for x in m.mentions] == ["roadmap"]
    assert m.created_by == team.members["ada"]


def _code(fn) -> grpc.StatusCode:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as err:
        fn()
    return err.value.code()  # type: ignore[no-any-return, attr-defined]


def test_missing_wrong_and_revoked_tokens_are_refused(stack, operator, team: Team) -> None:  # type: ignore[no-untyped-def]
    memory_id = team.clients["ada"].remember("x", audience_to="workspace").memory.id
    channel = grpc.insecure_channel(stack.gateway)
    stub = gateway_pb2_grpc.MemoryServiceStub(channel)
    read = gateway_pb2.ReadRequest(ids=[memory_id])
    assert _code(lambda: stub.Read(read, timeout=5)) == grpc.StatusCode.UNAUTHENTICATED
    for bad in ("Bearer", "Basic abc", "Bearer rct_not-a-token", "Bearer " + "x" * 500):
        md = [("authorization", bad)]
        assert _code(lambda md=md: stub.Read(read, metadata=md, timeout=5)) == (
            grpc.StatusCode.UNAUTHENTICATED
        )
    # A revoked token stops working at once.
    bob = team.clients["bob"]
    assert bob.read([memory_id]).memories[0].id == memory_id
    operator.revoke_token(team.token_ids["bob"])
    assert _code(lambda: bob.read([memory_id])) == grpc.StatusCode.UNAUTHENTICATED
    # The operator token is not a member token.
    assert _code(lambda: operator.read([memory_id])) == grpc.StatusCode.UNAUTHENTICATED
    channel.close()


def test_admin_calls_need_the_right_token(stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    bob = team.clients["bob"]  # a member, not an owner
    assert _code(lambda: bob.create_workspace("nope-" + uuid.uuid4().hex[:6])) == (
        grpc.StatusCode.PERMISSION_DENIED
    )
    assert _code(lambda: bob.create_member(team.workspace_id, "eve")) == (
        grpc.StatusCode.PERMISSION_DENIED
    )
    # An owner adds members to their own workspace.
    ada = team.clients["ada"]
    member = ada.create_member("", "dee").member
    assert member.workspace_id == team.workspace_id
    token = ada.create_token(member.id).token
    dee = Client(stack.gateway, token)
    assert dee.remember("hello from dee").memory.created_by == member.id
    dee.close()


def test_every_server_has_health_and_reflection(stack) -> None:  # type: ignore[no-untyped-def]
    for name in ("gateway", "store", "embed", "rank"):
        channel = grpc.insecure_channel(stack.address(name))
        health = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=5
        )
        assert health.status == health_pb2.HealthCheckResponse.SERVING, name
        responses = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
        )
        services = {s.name for r in responses for s in r.list_services_response.service}
        assert "grpc.health.v1.Health" in services, name
        assert any(s.startswith("recallatron.v1.") for s in services), name
        channel.close()


def test_store_started_before_postgres_waits_then_serves(tmp_path, prepared_models_dir) -> None:  # type: ignore[no-untyped-def]
    """Services start in any order: NOT_SERVING while Postgres is missing,
    SERVING once it appears, with no manual step."""
    pg = LocalPostgres(tmp_path / "pg", free_port())
    port_file = tmp_path / "store.port"
    env = {
        "RECALLATRON_DATABASE_URL": pg.url,
        "RECALLATRON_APP_PASSWORD": pg.app_password,
        "RECALLATRON_INTERNAL_KEY": "k" * 32,
        "RECALLATRON_STORE_LISTEN": "127.0.0.1:0",
        "RECALLATRON_PORT_FILE": str(port_file),
        "PATH": "/usr/bin:/bin",
    }
    proc = subprocess.Popen([sys.executable, "-m", "services.store"], env=env)
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        channel = grpc.insecure_channel(f"127.0.0.1:{port_file.read_text()}")
        stub = health_pb2_grpc.HealthStub(channel)
        request = health_pb2.HealthCheckRequest(service="")
        time.sleep(1.0)
        assert stub.Check(request, timeout=5).status == health_pb2.HealthCheckResponse.NOT_SERVING
        pg.start()
        deadline = time.monotonic() + 30
        status = None
        while time.monotonic() < deadline:
            status = stub.Check(request, timeout=5).status
            if status == health_pb2.HealthCheckResponse.SERVING:
                break
            time.sleep(0.2)
        assert status == health_pb2.HealthCheckResponse.SERVING
        channel.close()
    finally:
        proc.terminate()
        proc.wait(30)
        pg.stop()
    # SIGTERM drains and exits cleanly.
    assert proc.returncode == 0
