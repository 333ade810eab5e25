"""CreateWorkspace and CreateMember with a client's request id (docs/api.md):
a retry whose first answer was lost gets the first answer (the
same workspace or member, OK) and nothing is made twice; the same id with
other arguments is INVALID_ARGUMENT naming request_id, nothing made; without
an id a second call is refused ALREADY_EXISTS as before."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from recallatron.client import Client
from recallatron.v1 import common_pb2
from recallatron.v1 import control_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from services.store.infrastructure.db import CONTROL_DATABASE
from tests import dbutil
from tests.conftest import Team
from tests.security.test_member_removal import error

pytestmark = pytest.mark.integration


def _databases(stack: Stack) -> int:
    """The workspace databases on the server (not its templates)."""
    rows = dbutil.query(
        stack, "postgres", "SELECT count(*) FROM pg_database WHERE datname LIKE %s", (r"ws\_%",)
    )
    return int(str(rows[0][0]))


def _workspaces(stack: Stack, slug: str) -> list[str]:
    rows = dbutil.query(
        stack, CONTROL_DATABASE, "SELECT id::text FROM workspace WHERE slug = %s", (slug,)
    )
    return [str(r[0]) for r in rows]


def _create_workspace(client: Client, slug: str, request_id: str) -> cpb.Workspace:
    """One attempt, as sent: no resend (a lost answer is what is retried here)."""
    return client.admin.CreateWorkspace(
        pb.AdminServiceCreateWorkspaceRequest(slug=slug, request_id=request_id),
        metadata=(("authorization", f"Bearer {client.token}"),),
        timeout=60,
    ).workspace


def _create_member(
    client: Client, workspace_id: str, handle: str, request_id: str, role: str = "member"
) -> cpb.Member:
    return client.admin.CreateMember(
        pb.AdminServiceCreateMemberRequest(
            workspace_id=workspace_id,
            handle=handle,
            role=common_pb2.Role.Value(f"ROLE_{role.upper()}"),
            request_id=request_id,
        ),
        metadata=(("authorization", f"Bearer {client.token}"),),
        timeout=30,
    ).member


def test_a_create_workspace_retried_with_its_request_id_answers_the_first(
    stack: Stack, operator: Client
) -> None:
    slug = f"t-{uuid.uuid4().hex[:12]}"
    request_id = str(uuid.uuid4())
    databases = _databases(stack)
    first = _create_workspace(operator, slug, request_id)
    assert _create_workspace(operator, slug, request_id) == first
    # An id that is a UUID is the same id in any spelling.
    assert _create_workspace(operator, slug, request_id.upper()) == first
    assert _workspaces(stack, slug) == [first.id]
    assert _databases(stack) == databases + 1


def test_a_create_workspace_id_with_other_arguments_iserror(stack: Stack, operator: Client) -> None:
    slug, other = f"t-{uuid.uuid4().hex[:12]}", f"t-{uuid.uuid4().hex[:12]}"
    request_id = f"ws-{uuid.uuid4()}"
    first = _create_workspace(operator, slug, request_id)
    databases = _databases(stack)
    exc = error(lambda: _create_workspace(operator, other, request_id))
    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
    assert str(exc.details()).startswith("request_id: already used for another create_workspace")
    assert _workspaces(stack, other) == [] and _workspaces(stack, slug) == [first.id]
    assert _databases(stack) == databases


def test_a_create_workspace_without_a_request_id_is_refused_the_second_time(
    stack: Stack, operator: Client
) -> None:
    slug = f"t-{uuid.uuid4().hex[:12]}"
    first = _create_workspace(operator, slug, "")
    exc = error(lambda: _create_workspace(operator, slug, ""))
    assert exc.code() == grpc.StatusCode.ALREADY_EXISTS, exc.details()
    assert str(exc.details()).startswith("slug:"), exc.details()
    # Nor does a request id make a slug taken by another request its own.
    exc = error(lambda: _create_workspace(operator, slug, f"ws-{uuid.uuid4()}"))
    assert exc.code() == grpc.StatusCode.ALREADY_EXISTS, exc.details()
    assert _workspaces(stack, slug) == [first.id]


def test_concurrent_attempts_of_one_create_workspace_make_one(
    stack: Stack, operator: Client
) -> None:
    slug = f"t-{uuid.uuid4().hex[:12]}"
    request_id = f"ws-{uuid.uuid4()}"
    with ThreadPoolExecutor(3) as pool:
        made = list(pool.map(lambda _: _create_workspace(operator, slug, request_id), range(3)))
    assert {w.id for w in made} == set(_workspaces(stack, slug))
    assert len(set(_workspaces(stack, slug))) == 1


def _members(client: Client, team: Team) -> list[str]:
    return [m.id for m in client.list_members(team.workspace_id, include_removed=True).members]


def test_a_create_member_retried_with_its_request_id_answers_the_first(
    operator: Client, team: Team
) -> None:
    before = _members(operator, team)
    request_id = f"m-{uuid.uuid4()}"
    first = _create_member(operator, team.workspace_id, "dee", request_id)
    assert _create_member(operator, team.workspace_id, "dee", request_id) == first
    # An owner's retry too (their own ids: the operator's is another request).
    ada = team.clients["ada"]
    own = _create_member(ada, team.workspace_id, "eve", request_id)
    assert _create_member(ada, team.workspace_id, "eve", request_id) == own
    assert own.id != first.id
    assert sorted(_members(operator, team)) == sorted([*before, first.id, own.id])
    # One audit entry each, not one per attempt.
    made = ada.audit_events(actions=["create_member"]).events
    handles = [json.loads(e.detail_json)["handle"] for e in made]
    assert handles.count("dee") == 1 and handles.count("eve") == 1


def test_a_create_member_id_with_other_arguments_iserror(operator: Client, team: Team) -> None:
    request_id = f"m-{uuid.uuid4()}"
    first = _create_member(operator, team.workspace_id, "dee", request_id)
    before = _members(operator, team)
    for handle, role in (("eve", "member"), ("dee", "owner"), ("Dee", "member")):
        exc = error(
            lambda h=handle, r=role: _create_member(operator, team.workspace_id, h, request_id, r)  # type: ignore[misc]
        )
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
        assert str(exc.details()).startswith("request_id: already used for another create_member")
    # An id used for a token is not a member's, nor the other way round.
    operator.create_token(first.id, "ci", request_id="shared-id")
    exc = error(lambda: _create_member(operator, team.workspace_id, "fay", "shared-id"))
    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
    assert "different call (create_token)" in str(exc.details())
    exc = error(lambda: operator.create_token(first.id, "ci", request_id=request_id))
    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
    assert "different call (create_member)" in str(exc.details())
    assert _members(operator, team) == before


def test_a_create_member_without_a_request_id_is_refused_the_second_time(
    operator: Client, team: Team
) -> None:
    before = _members(operator, team)
    first = _create_member(operator, team.workspace_id, "dee", "")
    exc = error(lambda: _create_member(operator, team.workspace_id, "dee", ""))
    assert exc.code() == grpc.StatusCode.ALREADY_EXISTS, exc.details()
    assert str(exc.details()).startswith("handle:"), exc.details()
    exc = error(lambda: _create_member(operator, team.workspace_id, "dee", f"m-{uuid.uuid4()}"))
    assert exc.code() == grpc.StatusCode.ALREADY_EXISTS, exc.details()
    assert sorted(_members(operator, team)) == sorted([*before, first.id])


def test_the_cli_retried_with_its_request_id_prints_the_first_answer(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["admin", "--gateway", stack.gateway, "--token", stack.admin_token]
    slug = f"t-{uuid.uuid4().hex[:12]}"
    answers = []
    for _ in range(2):
        argv = [*common, "create-workspace", slug, "--request-id", "cli-ws", "--json"]
        assert main(argv) == 0, capsys.readouterr().err
        answers.append(json.loads(capsys.readouterr().out)["workspace"])
    assert answers[0] == answers[1]
    members = []
    for _ in range(2):
        argv = [*common, "create-member", "--workspace", slug, "ann", "--request-id", "cli-m"]
        assert main([*argv, "--json"]) == 0, capsys.readouterr().err
        members.append(json.loads(capsys.readouterr().out)["member"])
    assert members[0] == members[1]
    # Without --request-id the client makes a new id each time: a second call
    # is another request, refused as the slug is taken.
    assert main([*common, "create-workspace", slug]) == 1
    assert "ALREADY_EXISTS: slug:" in capsys.readouterr().err
