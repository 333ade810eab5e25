"""Token scopes (design §3; issue 21): a token may be limited to some purposes
and to the read-only calls. A call outside its scope is PERMISSION_DENIED,
names the scope, and changes nothing; every gateway method is either a
read-only call or refused to a read-only token; a scoped token cannot manage
members, tokens or settings (so it cannot mint itself a wider one)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from services.gateway.scopes import READ_ONLY_CALLS
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration

DENIED = grpc.StatusCode.PERMISSION_DENIED
OTHER_PURPOSES = ("automate", "personalize", "audit")


def denied(call: Callable[[], Any]) -> str:
    with pytest.raises(grpc.RpcError) as info:
        call()
    assert info.value.code() == DENIED, info.value.details()
    return str(info.value.details())


def scoped(stack: Stack, operator: Client, member_id: str, **scope: Any) -> Client:
    token = operator.create_token(member_id, "scoped", **scope).token
    return Client(stack.gateway, token)


def every_tool(c: Client, memory_id: str, purpose: str) -> dict[str, Callable[[], Any]]:
    """One call of every tool (and review call) for ``purpose``."""
    return {
        "recall": lambda: c.recall("budget", purpose=purpose),
        "read": lambda: c.read([memory_id], purpose=purpose),
        "remember": lambda: c.remember("new", purposes=[purpose], purpose=purpose),
        "derive": lambda: c.derive([memory_id], "derived", purpose=purpose),
        "correct": lambda: c.correct(memory_id, 1, "why", body="x", purpose=purpose),
        "supersede": lambda: c.supersede(memory_id, 1, "t", "", "note", "why", purpose=purpose),
        "forget": lambda: c.forget(memory_id, "why", purpose=purpose),
        "capture": lambda: c.capture("Remember that the office opens at 9.", purpose=purpose),
        "pairs": lambda: c.duplicate_pairs(purpose=purpose),
        "dismiss": lambda: c.dismiss_pair(memory_id, memory_id, purpose),
    }


def test_a_purpose_scoped_token_is_refused_every_other_purpose(
    stack: Stack, operator: Client, team: Team
) -> None:
    bob_id = team.members["bob"]
    owned = (
        team.clients["bob"]
        .remember(
            "Bob's budget",
            "all purposes",
            audience_to="workspace",
            purposes=["assist", "automate", "personalize", "audit"],
        )
        .memory
    )
    assist_only = scoped(stack, operator, bob_id, purposes=["assist"])
    before = dbutil.checksum(stack, team.database_name)
    for purpose in OTHER_PURPOSES:
        for name, call in every_tool(assist_only, owned.id, purpose).items():
            message = denied(call)
            assert "token scope" in message and "assist" in message, (name, message)
            assert purpose in message, (name, message)
    assert dbutil.checksum(stack, team.database_name) == before
    # Inside its scope the token works as the member's own.
    assert assist_only.read([owned.id], purpose="assist").memories[0].id == owned.id
    made = assist_only.remember("assist note", purpose="assist").memory
    assert made.created_by == bob_id
    # The default purpose (assist) is inside; an audit-only token refuses it.
    audit_only = scoped(stack, operator, bob_id, purposes=["audit"])
    assert "audit" in denied(lambda: audit_only.read([owned.id]))
    assert audit_only.read([owned.id], purpose="audit").memories[0].id == owned.id


def test_a_read_only_token_reads_and_writes_nothing(
    stack: Stack, operator: Client, team: Team
) -> None:
    ada_id = team.members["ada"]
    memory = team.clients["ada"].remember("Owner budget", "$10k", audience_to="workspace").memory
    reader = scoped(stack, operator, ada_id, read_only=True)
    before = dbutil.checksum(stack, team.database_name)
    tools = every_tool(reader, memory.id, "assist")
    for name in ("remember", "derive", "correct", "supersede", "forget", "capture", "dismiss"):
        assert "read-only" in denied(tools[name]), name
    for name in ("recall", "read", "pairs"):
        tools[name]()
    reader.status()
    assert reader.call(reader.admin.GetSettings, pb.GetSettingsRequest()).settings
    assert dbutil.checksum(stack, team.database_name) == before


def test_every_gateway_method_is_read_only_or_refused_to_a_read_only_token(
    stack: Stack, operator: Client, team: Team
) -> None:
    """Listed from the service descriptors, so a new method cannot slip by."""
    reader = scoped(stack, operator, team.members["ada"], read_only=True)
    before = dbutil.checksum(stack, team.database_name)
    seen = set()
    for service in pb.DESCRIPTOR.services_by_name.values():
        for method in service.methods:
            full = f"/{service.full_name}/{method.name}"
            seen.add(full)
            if full in READ_ONLY_CALLS:
                continue
            request_class = _message_class(method.input_type.full_name)
            call = reader.channel.unary_unary(
                full,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=lambda b: b,
            )
            with pytest.raises(grpc.RpcError) as info:
                call(request_class(), metadata=reader._md(), timeout=10)
            assert info.value.code() == DENIED, (full, info.value.details())
    assert seen > READ_ONLY_CALLS
    assert dbutil.checksum(stack, team.database_name) == before


def test_every_call_that_names_a_purpose_refuses_one_outside_the_scope(
    stack: Stack, operator: Client, team: Team
) -> None:
    """Listed from the service descriptors: the graph, the timeline, the
    owner's view and the entity review as well as the tools, for an owner's
    token (which may call them all) scoped to assist."""
    assist_only = scoped(stack, operator, team.members["ada"], purposes=["assist"])
    before = dbutil.checksum(stack, team.database_name)
    asked = []
    for service in pb.DESCRIPTOR.services_by_name.values():
        for method in service.methods:
            if "purpose" not in method.input_type.fields_by_name:
                continue
            full = f"/{service.full_name}/{method.name}"
            request = _message_class(method.input_type.full_name)(purpose=cpb.PURPOSE_AUDIT)
            if "query" in method.input_type.fields_by_name:
                request.query = "budget"  # an empty one is refused first
            call: Any = assist_only.channel.unary_unary(
                full,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=lambda b: b,
            )
            with pytest.raises(grpc.RpcError) as info:
                call(request, metadata=assist_only._md(), timeout=10)
            assert info.value.code() == DENIED, (full, info.value.details())
            assert "token scope" in str(info.value.details()), (full, info.value.details())
            asked.append(method.name)
    assert {"Lookup", "Timeline", "ListAuditEvents", "MergeEntities"} <= set(asked)
    assert dbutil.checksum(stack, team.database_name) == before


def test_a_scoped_token_cannot_manage_members_tokens_or_settings(
    stack: Stack, operator: Client, team: Team
) -> None:
    ada_id = team.members["ada"]
    for scope in ({"purposes": ["assist"]}, {"read_only": True}):
        owner = scoped(stack, operator, ada_id, **scope)
        assert "token scope" in denied(lambda o=owner: o.create_token(ada_id, "wider"))
        assert "token scope" in denied(lambda o=owner: o.create_member(team.workspace_id, "eve"))
        assert "token scope" in denied(lambda o=owner: o.revoke_token(team.token_ids["bob"]))
        assert "token scope" in denied(lambda o=owner: o.update_settings(rerank_depth=5))
    # Bob's unscoped token still works: the revoke was refused.
    assert team.clients["bob"].recall("anything").outcome is not None


def test_create_token_from_the_command_line_with_a_scope(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--gateway", stack.gateway, "--token", stack.admin_token]
    member = team.members["cy"]
    scope = ["create-token", member, "--purposes", "assist", "--read-only"]
    assert main(["admin", *common, "--json", *scope]) == 0
    token = json.loads(capsys.readouterr().out)["token"]
    cy = Client(stack.gateway, token)
    cy.recall("anything")
    assert "read-only" in denied(lambda: cy.remember("no"))
    assert "assist" in denied(lambda: cy.recall("anything", purpose="audit"))
    assert main(["admin", *common, *scope]) == 0
    assert "scope: purposes assist, read-only" in capsys.readouterr().out


def _message_class(full_name: str) -> type:
    from google.protobuf import symbol_database

    return symbol_database.Default().GetSymbol(full_name)  # type: ignore[no-any-return]


def test_a_purpose_scoped_token_writes_only_for_its_purposes(
    stack: Stack, operator: Client, team: Team
) -> None:
    """A write whose memory purposes reach past the token's scope is refused and
    writes nothing, whatever purpose the call itself names; inherited purposes
    are kept within the scope; an unscoped token is unaffected."""
    bob_id = team.members["bob"]
    wide = (
        team.clients["bob"]
        .remember("Bob's wide note", "assist and audit", purposes=["assist", "audit"])
        .memory
    )
    assist_only = scoped(stack, operator, bob_id, purposes=["assist"])
    audit_only = scoped(stack, operator, bob_id, purposes=["audit"])
    when = "2024-05-01T10:00:00Z"
    refused = {
        "remember": lambda: assist_only.remember("n", purposes=["assist", "audit"]),
        "remember audit only": lambda: assist_only.remember("n", purposes=["audit"]),
        "derive": lambda: assist_only.derive([wide.id], "d", purposes=["assist", "audit"]),
        "supersede": lambda: assist_only.ask(
            assist_only.memory.Supersede,
            pb.SupersedeRequest,
            request_id="scope-supersede",
            id=wide.id,
            expected_revision=1,
            kind="note",
            title="t",
            reason="why",
            purposes=["assist", "audit"],
        ),
        "episode": lambda: assist_only.create_episode("e", when, purposes=["audit"]),
        # The default purposes ({assist}) are outside an audit-only scope,
        # though the call's own purpose (audit) is inside it.
        "remember default": lambda: audit_only.remember("n", purpose="audit"),
        "episode default": lambda: audit_only.create_episode("e", when, purpose="audit"),
    }
    before = dbutil.checksum(stack, team.database_name)
    for name, call in refused.items():
        message = denied(call)
        assert "purposes" in message and "token scope" in message, (name, message)
    assert dbutil.checksum(stack, team.database_name) == before
    # Inside the scope: written, and readable back by the token that wrote it.
    made = assist_only.remember("assist note", purposes=["assist"]).memory
    assert assist_only.read([made.id]).memories[0].id == made.id
    # Inherited purposes (the source's assist and audit) stay within the scope.
    derived = assist_only.derive([wide.id], "derived").memory
    assert set(derived.purposes) <= {cpb.PURPOSE_ASSIST}, derived.purposes
    newer = assist_only.supersede(wide.id, 1, "newer", reason="why").memory
    assert set(newer.purposes) <= {cpb.PURPOSE_ASSIST}, newer.purposes
    # An unscoped token writes for any purposes.
    free = team.clients["bob"].remember("free", purposes=["assist", "audit"]).memory
    assert set(free.purposes) == {cpb.PURPOSE_ASSIST, cpb.PURPOSE_AUDIT}


def test_an_unspecified_purpose_is_refused_not_taken_for_the_default(
    stack: Stack, operator: Client, team: Team
) -> None:
    """A write naming PURPOSE_UNSPECIFIED among its purposes is refused naming
    the field, for an episode as for a memory: taken for the default
    (assist), it let an audit-only token write an assist episode."""
    audit_only = scoped(stack, operator, team.members["bob"], purposes=["audit"])
    when = Timestamp()
    when.FromJsonString("2024-05-01T10:00:00Z")
    before = dbutil.checksum(stack, team.database_name)
    for client in (audit_only, team.clients["bob"]):
        for call in (
            lambda c=client: c.call(
                c.memory.CreateEpisode,
                pb.CreateEpisodeRequest(
                    title="e", started_at=when, purposes=[cpb.PURPOSE_UNSPECIFIED],
                    purpose=cpb.PURPOSE_AUDIT,
                ),
            ),
            lambda c=client: c.call(
                c.memory.Remember,
                pb.RememberRequest(
                    request_id=str(uuid.uuid4()), kind=cpb.KIND_NOTE, title="n",
                    purposes=[cpb.PURPOSE_UNSPECIFIED], purpose=cpb.PURPOSE_AUDIT,
                ),
            ),
        ):  # fmt: skip
            with pytest.raises(grpc.RpcError) as info:
                call()
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
            assert "purposes" in (info.value.details() or ""), info.value.details()
    assert dbutil.checksum(stack, team.database_name) == before


def test_a_token_scoped_to_more_purposes_than_exist_is_refused(
    operator: Client, team: Team
) -> None:
    """A scope names each purpose once at most: more entries than the closed
    set can only repeat one, and two million of them cost the services behind
    a check and a copy each (as every other list of enum values is bounded)."""
    listed = len(operator.list_tokens(workspace_id=team.workspace_id).tokens)
    for purposes in (["assist"] * 5, ["audit"] * 2_000_000):
        request = pb.AdminServiceCreateTokenRequest(
            member_id=team.members["bob"],
            label="many",
            purposes=[cpb.Purpose.Value(f"PURPOSE_{p.upper()}") for p in purposes],
        )
        with pytest.raises(grpc.RpcError) as info:
            operator.call(operator.admin.CreateToken, request)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
        assert (info.value.details() or "").startswith("purposes"), info.value.details()
    assert len(operator.list_tokens(workspace_id=team.workspace_id).tokens) == listed
