"""Calls inside the stack authenticate (design §4; issue 21). The attacks of the
issue, each against the real stack: a local process without the stack's
credential calling every method the internal services list by reflection; an
assertion forged (wrong key, altered claims), expired, or too long-lived; a
genuine one re-used for another method, workspace, member, role or purpose.
Each is UNAUTHENTICATED and changes nothing. Health and reflection stay open."""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
from collections.abc import Iterator

import grpc
import psycopg
import pytest
from google.protobuf import descriptor_pool, symbol_database
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from recallatron import internal_auth
from recallatron.grpcclient import make_channel
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import (
    rank_pb2,
    rank_pb2_grpc,
    store_pb2,
    store_pb2_grpc,
    tools_pb2,  # noqa: F401 (its ToolService in the descriptor pool)
)
from recallatron_devkit.stack import Stack
from services.store.infrastructure.db import CONTROL_DATABASE, with_database
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration

UNAUTHENTICATED = grpc.StatusCode.UNAUTHENTICATED
INTERNAL = ("store", "rank", "embed")
GET_MEMORIES = internal_auth.store_method("GetMemories")
CREATE_TOKEN = internal_auth.store_method("CreateToken")


def listed_methods(channel: grpc.Channel) -> list[tuple[str, object]]:
    """(full method name, method descriptor) of every service reflection lists."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    responses = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
    )
    names = [s.name for r in responses for s in r.list_services_response.service]
    out = []
    for name in names:
        if name.startswith(("grpc.health.", "grpc.reflection.")):
            continue
        service = descriptor_pool.Default().FindServiceByName(name)
        out.extend((f"/{name}/{m.name}", m) for m in service.methods)
    return out


def call_raw(
    channel: grpc.Channel, full: str, method: object, metadata: tuple = ()
) -> grpc.StatusCode:
    request_class = symbol_database.Default().GetSymbol(method.input_type.full_name)  # type: ignore[attr-defined]
    kwargs = {
        "request_serializer": lambda m: m.SerializeToString(),
        "response_deserializer": lambda b: b,
    }
    try:
        if method.server_streaming:  # type: ignore[attr-defined]
            for _ in channel.unary_stream(full, **kwargs)(
                request_class(), metadata=metadata, timeout=10
            ):
                pass
        else:
            channel.unary_unary(full, **kwargs)(request_class(), metadata=metadata, timeout=10)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


@pytest.fixture
def plain() -> Iterator[dict[str, grpc.Channel]]:
    channels: dict[str, grpc.Channel] = {}
    yield channels
    for channel in channels.values():
        channel.close()


def open_channel(stack: Stack, plain: dict[str, grpc.Channel], name: str) -> grpc.Channel:
    plain[name] = plain.get(name) or make_channel(stack.address(name))
    return plain[name]


def owner_caller(team: Team, **overrides: object) -> cpb.Caller:
    fields = {
        "workspace_id": team.workspace_id,
        "member_id": team.members["ada"],
        "purpose": cpb.PURPOSE_ASSIST,
        "role": cpb.ROLE_OWNER,
        **overrides,
    }
    return cpb.Caller(**fields)  # type: ignore[arg-type]


def token_count(stack: Stack) -> int:
    with psycopg.connect(with_database(stack.database_url, CONTROL_DATABASE)) as conn:
        row = conn.execute("SELECT count(*) FROM access_token").fetchone()
    return int(row[0]) if row else 0


def test_every_internal_method_refuses_a_call_without_the_credential(
    stack: Stack, team: Team, plain: dict[str, grpc.Channel]
) -> None:
    before = dbutil.checksum(stack, team.database_name), token_count(stack)
    seen = 0
    for name in INTERNAL:
        channel = open_channel(stack, plain, name)
        methods = listed_methods(channel)
        assert methods, name
        for full, method in methods:
            for metadata in ((), ((internal_auth.HEADER, "v1.e30.AAAA"),)):
                assert call_raw(channel, full, method, metadata) == UNAUTHENTICATED, full
            seen += 1
    assert seen >= 25  # store, rank and embed, every method
    assert (dbutil.checksum(stack, team.database_name), token_count(stack)) == before


def test_the_issues_attacks_without_the_credential(
    stack: Stack, team: Team, plain: dict[str, grpc.Channel]
) -> None:
    """A plain member with a local process: the owner's private memory through
    GetMemories and Rank, the owner-only history, an owner token minted."""
    ada = team.clients["ada"]
    private = ada.remember("Owner's salary review", "private to ada").memory
    store = store_pb2_grpc.StoreServiceStub(open_channel(stack, plain, "store"))
    rank = rank_pb2_grpc.RankServiceStub(open_channel(stack, plain, "rank"))
    who = owner_caller(team)
    attacks = {
        "GetMemories": lambda: store.GetMemories(
            store_pb2.GetMemoriesRequest(caller=who, ids=[private.id]), timeout=10
        ),
        "Rank": lambda: rank.Rank(rank_pb2.RankRequest(caller=who, query="salary"), timeout=10),
        "SearchHistory": lambda: store.SearchHistory(
            store_pb2.SearchHistoryRequest(caller=who, query="salary"), timeout=10
        ),
        "CreateToken": lambda: store.CreateToken(
            store_pb2.CreateTokenRequest(member_id=team.members["ada"]), timeout=10
        ),
    }
    tokens = token_count(stack)
    for name, attack in attacks.items():
        with pytest.raises(grpc.RpcError) as info:
            attack()
        assert info.value.code() == UNAUTHENTICATED, name
        assert "caller assertion" in (info.value.details() or ""), name
    assert token_count(stack) == tokens


def _claims(token: str) -> dict[str, object]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def _with_claims(token: str, **changes: object) -> str:
    """The token with its claims altered and its signature kept."""
    version, _, signature = token.split(".")
    data = {**_claims(token), **changes}
    payload = base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    return f"{version}.{payload}.{signature}"


def _refused(call, token: str) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        call(metadata=internal_auth.metadata(token))
    assert info.value.code() == UNAUTHENTICATED, info.value.details()
    return str(info.value.details())


def test_forged_expired_and_reused_assertions_are_refused(
    stack: Stack, team: Team, plain: dict[str, grpc.Channel]
) -> None:
    ada = team.clients["ada"]
    private = ada.remember("Owner's private plan", "only ada").memory
    shared = ada.remember("Shared plan", "everyone", audience_to="workspace").memory
    store = store_pb2_grpc.StoreServiceStub(open_channel(stack, plain, "store"))
    rank = rank_pb2_grpc.RankServiceStub(open_channel(stack, plain, "rank"))
    key = stack.internal_key
    signer = internal_auth.Signer(key, "test")
    bob_caller = owner_caller(team, member_id=team.members["bob"], role=cpb.ROLE_MEMBER)

    def get(caller: cpb.Caller, ids: list[str]):  # type: ignore[no-untyped-def]
        request = store_pb2.GetMemoriesRequest(caller=caller, ids=ids)
        return lambda metadata: store.GetMemories(request, timeout=10, metadata=metadata)

    # The positive control: bob's own assertion reads what bob may read.
    genuine = signer.member(bob_caller, [GET_MEMORIES])
    found = get(bob_caller, [shared.id])(internal_auth.metadata(genuine))
    assert [m.id for m in found.memories] == [shared.id]

    # Forged: another key; or bob's genuine assertion altered to say ada.
    forged = internal_auth.Signer(os.urandom(32), "attacker").member(
        owner_caller(team), [GET_MEMORIES]
    )
    assert "signature" in _refused(get(owner_caller(team), [private.id]), forged)
    altered = _with_claims(genuine, u=team.members["ada"], r=cpb.ROLE_OWNER)
    assert "signature" in _refused(get(owner_caller(team), [private.id]), altered)

    # Expired (replayed after its 30 s), or made to live longer than allowed.
    expired = internal_auth.Signer(key, "test", ttl=-40).member(bob_caller, [GET_MEMORIES])
    assert "expired" in _refused(get(bob_caller, [shared.id]), expired)
    forever = internal_auth.Signer(key, "test", ttl=3600).member(bob_caller, [GET_MEMORIES])
    assert "too long" in _refused(get(bob_caller, [shared.id]), forever)

    # Re-used: bob's genuine assertion for another member, role, purpose,
    # workspace, or another method.
    for what, caller in {
        "member": owner_caller(team, role=cpb.ROLE_MEMBER),
        "role": owner_caller(team, member_id=team.members["bob"]),
        "purpose": owner_caller(
            team, member_id=team.members["bob"], role=cpb.ROLE_MEMBER, purpose=cpb.PURPOSE_AUDIT
        ),
    }.items():
        assert what in _refused(get(caller, [private.id]), genuine), what
    elsewhere = make_other_workspace(stack)
    foreign = owner_caller(
        team, workspace_id=elsewhere, member_id=team.members["bob"], role=cpb.ROLE_MEMBER
    )
    assert "workspace" in _refused(get(foreign, [shared.id]), genuine)
    mint = store_pb2.CreateTokenRequest(
        member_id=team.members["ada"], workspace_id=team.workspace_id
    )
    assert "not good for" in _refused(
        lambda metadata: store.CreateToken(mint, timeout=10, metadata=metadata), genuine
    )
    # A member's genuine assertion for CreateToken still needs an owner's.
    bob_mint = signer.member(bob_caller, [CREATE_TOKEN])
    with pytest.raises(grpc.RpcError) as info:
        store.CreateToken(mint, timeout=10, metadata=internal_auth.metadata(bob_mint))
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    # Rank acts only for the Caller its assertion names, and passes on only that.
    recall = signer.member(bob_caller, internal_auth.RECALL_METHODS)
    as_ada = rank_pb2.RankRequest(caller=owner_caller(team), query="plan")
    assert "member" in _refused(
        lambda metadata: rank.Rank(as_ada, timeout=10, metadata=metadata), recall
    )
    answer = rank.Rank(
        rank_pb2.RankRequest(caller=bob_caller, query="plan", skip_rerank=True),
        timeout=10,
        metadata=internal_auth.metadata(recall),
    )
    assert private.id not in {r.memory.id for r in answer.outcome.results}


def make_other_workspace(stack: Stack) -> str:
    import uuid

    from recallatron.client import Client

    operator = Client(stack.gateway, stack.admin_token)
    try:
        return str(operator.create_workspace(f"o-{uuid.uuid4().hex[:10]}").workspace.id)
    finally:
        operator.close()


def test_health_and_reflection_stay_open(stack: Stack, plain: dict[str, grpc.Channel]) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    for name in INTERNAL:
        channel = open_channel(stack, plain, name)
        status = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=10
        )
        assert status.status == health_pb2.HealthCheckResponse.SERVING
        assert listed_methods(channel)


def test_the_key_is_the_stacks_alone(stack: Stack) -> None:
    path = stack.internal_key_file
    assert path.stat().st_mode & 0o777 == 0o600
    assert len(stack.internal_key) >= internal_auth.MIN_KEY_BYTES
    if os.geteuid() == 0:
        done = subprocess.run(
            ["su", "-s", "/bin/sh", "nobody", "-c", f"cat {shlex.quote(str(path))}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode != 0 and not done.stdout
