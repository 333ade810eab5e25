"""The bad-input corpus through the gateway: each request gets its documented
status and a message naming the field, an INVALID_ARGUMENT carries a
BadRequest naming it too, no answer mentions a row the caller may not see,
and not one row of either workspace changes. Plus what the typed client
cannot send: invalid UTF-8 in string fields, oversized messages, and
missing, malformed, unknown and revoked tokens."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest
from google.protobuf.internal import encoder

from recallatron.client import Client
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import gateway_pb2_grpc, store_pb2
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team, make_team
from tests.faults.stackutil import field_violations
from tests.security.corpus import CASES, OK, Case

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def world(stack: Stack, operator: Client) -> tuple[Team, Team, dict[str, str]]:
    team = make_team(stack, operator, ("ada", "bob"))
    other = make_team(stack, operator, ("zed",))
    ada, bob, zed = team.clients["ada"], team.clients["bob"], other.clients["zed"]
    memory = ada.remember(
        "fixture", "a shared memory", audience_to="workspace", mention_names=["thing"]
    )
    m = memory.memory
    hidden = bob.remember("bob only fixture").memory
    hidden_entity = bob.remember("bob's entity fixture", mention_names=["bob's thing"]).memory
    ada_only = ada.remember("ada only fixture").memory
    bob_shared = bob.remember("bob for ada", audience_to=team.members["ada"]).memory
    audit_only = ada.remember("audit fixture", audience_to="workspace", purposes=["audit"]).memory
    gone = ada.remember("forgotten fixture", audience_to="workspace").memory
    ada.forget(gone.id, "test")
    old = ada.remember("old fixture", audience_to="workspace").memory
    ada.supersede(old.id, 1, "new fixture")
    derive_rid = f"derive-{uuid.uuid4()}"
    ada.derive([m.id], "derived fixture", audience_to="workspace", request_id=derive_rid)
    foreign = zed.remember("foreign fixture", audience_to="workspace", mention_names=["spy"]).memory
    foreign_token = operator.create_token(other.members["zed"], "x").token_id
    ids = {
        "memory": m.id,
        "entity": m.mentions[0].entity_id,
        "hidden": hidden.id,
        "hidden_entity": hidden_entity.mentions[0].entity_id,
        "ada_only": ada_only.id,
        "bob_shared": bob_shared.id,
        "audit_only": audit_only.id,
        "forgotten": gone.id,
        "superseded": old.id,
        "derive_rid": derive_rid,
        "foreign": foreign.id,
        "foreign_entity": foreign.mentions[0].entity_id,
        "foreign_ws": other.workspace_id,
        "foreign_token": foreign_token,
        "stranger": other.members["zed"],
        "bob": team.members["bob"],
        "ada_token": team.token_ids["ada"],
        "slug": team.slug,
    }
    return team, other, ids


def _stub(client: Client, service: str) -> Any:
    return {"memory": client.memory, "admin": client.admin, "review": client.review}[service]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_answers_as_documented_and_changes_nothing(
    stack: Stack, operator: Client, world, case: Case
) -> None:
    team, other, ids = world
    client = operator if case.who == "operator" else team.clients[case.who]
    before = (
        dbutil.checksum(stack, team.database_name),
        dbutil.checksum(stack, other.database_name),
    )
    method = getattr(_stub(client, case.service), case.method)
    if case.code == OK:
        resp = client.call(method, case.build(ids))
        # Hostile text is only text: the answer is a normal one.
        assert resp.outcome.counts.admitted >= 0
        assert ids["hidden"] not in str(resp) and ids["foreign"] not in str(resp)
    else:
        with pytest.raises(grpc.RpcError) as err:
            client.call(method, case.build(ids))
        code, details = err.value.code(), err.value.details() or ""
        assert code == case.code, details
        assert case.field in details, details
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            fields = field_violations(err.value)
            assert fields and case.field in fields[0], fields
        for secret in ("hidden", "hidden_entity", "foreign", "ada_only", "bob_shared"):
            assert ids[secret] not in details or ids[secret] in str(case.build(ids)), details
    after = (
        dbutil.checksum(stack, team.database_name),
        dbutil.checksum(stack, other.database_name),
    )
    assert after == before


# -- what the typed client cannot send ------------------------------------------


def _string_field(number: int, raw: bytes) -> bytes:
    """A length-delimited field carrying arbitrary bytes."""
    return encoder.TagBytes(number, 2) + encoder._VarintBytes(len(raw)) + raw


INVALID_UTF8 = [b"\xff", b"\xc3\x28", b"ok\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80abc"]
RAW_CASES = [
    # (name, method, valid request the bad field is appended to, field number, field name)
    ("remember title", "Remember", pb.RememberRequest(request_id="u", kind=1), 3, "title"),
    ("remember body", "Remember", pb.RememberRequest(request_id="u", kind=1), 4, "body"),
    ("remember request_id", "Remember", pb.RememberRequest(kind=1, title="t"), 1, "request_id"),
    ("recall query", "Recall", pb.RecallRequest(limit=3), 1, "query"),
    ("read ids", "Read", pb.ReadRequest(), 1, "ids"),
    ("forget reason", "Forget", pb.ForgetRequest(request_id="u"), 3, "reason"),
    (
        "recall filters entity",
        "Recall",
        pb.RecallRequest(query="q"),
        5,
        "filters.mention_entity_ids",
    ),
]


def _raw_call(stack: Stack, token: str, method: str, payload: bytes) -> grpc.RpcError | None:
    channel = grpc.insecure_channel(stack.gateway)
    call = channel.unary_unary(
        f"/recallatron.v1.MemoryService/{method}",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    try:
        call(payload, metadata=[("authorization", f"Bearer {token}")], timeout=10)
        return None
    except grpc.RpcError as exc:
        return exc
    finally:
        channel.close()


@pytest.mark.parametrize("bad", INVALID_UTF8, ids=[b.hex() for b in INVALID_UTF8])
@pytest.mark.parametrize("case", RAW_CASES, ids=[c[0] for c in RAW_CASES])
def test_invalid_utf8_in_a_string_field_is_refused(stack: Stack, world, case, bad: bytes) -> None:  # type: ignore[no-untyped-def]
    team, _, _ = world
    _, method, base, number, field = case
    if field.startswith("filters."):
        payload = base.SerializeToString() + _string_field(number, _string_field(2, bad))
    else:
        payload = base.SerializeToString() + _string_field(number, bad)
    before = dbutil.checksum(stack, team.database_name)
    err = _raw_call(stack, _token(team, "ada"), method, payload)
    assert err is not None
    # The wire format is refused before any code of ours runs; what matters
    # is a client error, not a server fault, and nothing written.
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (err.code(), err.details())  # type: ignore[attr-defined]
    assert field in (err.details() or "")  # type: ignore[attr-defined]
    assert field_violations(err) == [field]
    assert dbutil.checksum(stack, team.database_name) == before


def _token(team: Team, handle: str) -> str:
    return team.clients[handle].token


def test_oversized_message_is_resource_exhausted(stack: Stack, world) -> None:  # type: ignore[no-untyped-def]
    team, _, _ = world
    before = dbutil.checksum(stack, team.database_name)
    # A channel that lets the client send it, so the server's limit answers.
    channel = grpc.insecure_channel(
        stack.gateway, options=[("grpc.max_send_message_length", 64 * 1024 * 1024)]
    )
    stub = gateway_pb2_grpc.MemoryServiceStub(channel)
    md = [("authorization", f"Bearer {_token(team, 'ada')}")]
    huge = "x" * (9 * 1024 * 1024)
    for request, method in (
        (pb.RememberRequest(request_id="big", kind=1, title="t", body=huge), stub.Remember),
        (pb.RecallRequest(query=huge), stub.Recall),
        (pb.ReadRequest(ids=[huge]), stub.Read),
    ):
        with pytest.raises(grpc.RpcError) as err:
            method(request, metadata=md, timeout=30)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    channel.close()
    assert dbutil.checksum(stack, team.database_name) == before


TOKEN_CASES = {
    "missing": None,
    "empty": "",
    "scheme only": "Bearer",
    "basic": "Basic YWRhOnB3",
    "bearer blank": "Bearer    ",
    "unknown rct": "Bearer rct_" + "A" * 43,
    "no prefix": "Bearer " + "A" * 43,
    "huge": "Bearer rct_" + "x" * 4000,
    "sql": "Bearer rct_' OR '1'='1",
    "operator token": "operator",
    "revoked": "revoked",
    "lowercase scheme, unknown": "bearer rct_nope",
}


@pytest.mark.parametrize("label", list(TOKEN_CASES))
@pytest.mark.parametrize("method", ["Recall", "Read", "Remember", "Forget"])
def test_bad_tokens_are_unauthenticated(
    stack: Stack, operator: Client, world, label: str, method: str
) -> None:
    team, _, ids = world
    value = TOKEN_CASES[label]
    if value == "operator":
        value = f"Bearer {stack.admin_token}"
    elif value == "revoked":
        made = operator.create_token(team.members["bob"], "to revoke")
        operator.revoke_token(made.token_id)
        value = f"Bearer {made.token}"
    requests = {
        "Recall": pb.RecallRequest(query="fixture"),
        "Read": pb.ReadRequest(ids=[ids["memory"]]),
        "Remember": pb.RememberRequest(request_id=str(uuid.uuid4()), kind=1, title="t"),
        "Forget": pb.ForgetRequest(request_id=str(uuid.uuid4()), id=ids["memory"], reason="r"),
    }
    before = dbutil.checksum(stack, team.database_name)
    channel = grpc.insecure_channel(stack.gateway)
    stub = gateway_pb2_grpc.MemoryServiceStub(channel)
    md = [] if value is None else [("authorization", value)]
    with pytest.raises(grpc.RpcError) as err:
        getattr(stub, method)(requests[method], metadata=md, timeout=10)
    channel.close()
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "authorization" in (err.value.details() or "")
    assert dbutil.checksum(stack, team.database_name) == before


def test_the_operators_calls_authenticate_a_token_that_is_not_the_operators(
    stack: Stack, operator: Client, world
) -> None:
    """CreateWorkspace, ListWorkspaces and DeleteWorkspace answered every token
    but the operator's PERMISSION_DENIED without looking at it: an unknown,
    expired or revoked one was not UNAUTHENTICATED as on every other call (and
    on these calls over HTTP/JSON), and a guess spent nothing of the address's
    failed-authentication allowance. A member's token is still refused
    PERMISSION_DENIED."""
    team, _, _ = world
    made = operator.create_token(team.members["bob"], "to revoke")
    operator.revoke_token(made.token_id)
    channel = grpc.insecure_channel(stack.gateway)
    stub = gateway_pb2_grpc.AdminServiceStub(channel)
    calls = (
        (stub.CreateWorkspace, pb.AdminServiceCreateWorkspaceRequest(slug="never-made")),
        (stub.ListWorkspaces, store_pb2.ListWorkspacesRequest()),
        (stub.DeleteWorkspace, pb.AdminServiceDeleteWorkspaceRequest(workspace=team.slug)),
    )
    try:
        for token, code in (
            ("rct_" + "A" * 43, grpc.StatusCode.UNAUTHENTICATED),
            (made.token, grpc.StatusCode.UNAUTHENTICATED),
            (team.clients["bob"].token, grpc.StatusCode.PERMISSION_DENIED),
        ):
            for call, request in calls:
                with pytest.raises(grpc.RpcError) as err:
                    call(request, metadata=[("authorization", f"Bearer {token}")], timeout=10)
                assert err.value.code() == code, (call, err.value.details())
    finally:
        channel.close()
    assert "never-made" not in {w.workspace.slug for w in operator.all_workspaces().workspaces}
