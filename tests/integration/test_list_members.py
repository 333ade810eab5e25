"""Who is in a workspace, and which workspaces there are (design §10; issue
34): the operator lists any workspace's members by id or slug, an owner their
own; a member who is not an owner, and an owner naming another workspace, are
refused alike whether that workspace exists or not; removed members show only
when asked for, with when they left. The operator lists every workspace by
slug, a page at a time, each once, a deleted one no more; nobody else may.
The CLI prints the same lists."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from functools import partial
from typing import Any

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from tests.conftest import Team, make_team
from tests.listings import add_ended_tokens, add_live_tokens, error, every_page, page_token

pytestmark = pytest.mark.integration


def handles(answer: Any) -> list[str]:
    return [m.handle for m in answer.members]


def test_the_operator_and_an_owner_list_the_members(team: Team, operator: Client) -> None:
    by_id = operator.list_members(team.workspace_id)
    assert handles(by_id) == ["ada", "bob", "cy"]  # oldest first
    assert [m.id for m in by_id.members] == [team.members[h] for h in ("ada", "bob", "cy")]
    assert [m.role for m in by_id.members] == [cpb.ROLE_OWNER, cpb.ROLE_MEMBER, cpb.ROLE_MEMBER]
    assert all(m.workspace_id == team.workspace_id for m in by_id.members)
    assert all(m.HasField("created_at") and not m.HasField("removed_at") for m in by_id.members)
    assert operator.list_members(team.slug) == by_id
    ada = team.clients["ada"]
    assert ada.list_members() == by_id
    assert ada.list_members(team.slug) == by_id
    assert ada.list_members(team.workspace_id) == by_id
    # An id in another spelling is the same id, as for every field that takes
    # one (CreateMember and ListTokens took it; this listing said "no workspace").
    for spelled in (team.workspace_id.upper(), uuid.UUID(team.workspace_id).hex):
        assert operator.list_members(spelled) == by_id
        assert ada.list_members(spelled) == by_id


def test_removed_members_show_only_when_asked(team: Team, operator: Client) -> None:
    operator.remove_member(team.members["cy"], "erase")
    ada = team.clients["ada"]
    assert handles(ada.list_members()) == ["ada", "bob"]
    everyone = ada.list_members(include_removed=True)
    assert handles(everyone) == ["ada", "bob", "cy"]
    cy = everyone.members[2]
    assert cy.HasField("removed_at")
    assert cy.removed_at.ToDatetime() >= cy.created_at.ToDatetime()


def test_who_may_not_list(stack: Stack, team: Team, operator: Client) -> None:
    other = make_team(stack, operator, ("dee",))
    try:
        # A member who is not an owner.
        bob = error(lambda: team.clients["bob"].list_members())
        assert bob.code() == grpc.StatusCode.PERMISSION_DENIED
        # An owner naming another workspace: the same answer for one that
        # exists and one that does not.
        ada = team.clients["ada"]
        elsewhere = error(lambda: ada.list_members(other.workspace_id))
        nowhere = error(lambda: ada.list_members(str(uuid.uuid4())))
        assert elsewhere.code() == nowhere.code() == grpc.StatusCode.PERMISSION_DENIED
        assert elsewhere.details() == nowhere.details()
        assert "workspace" in str(elsewhere.details())
        # The operator must name one, and one that exists.
        unnamed = error(lambda: operator.list_members())
        assert unnamed.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "workspace" in str(unnamed.details())
        missing = error(lambda: operator.list_members("no-such-workspace"))
        assert missing.code() == grpc.StatusCode.NOT_FOUND
        assert "workspace" in str(missing.details())
        for bad in ("a\x00b", "x" * 201):
            refused = error(lambda bad=bad: operator.list_members(bad))
            assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.details()
            assert "workspace" in str(refused.details())
        assert handles(operator.list_members(other.slug)) == ["dee"]
    finally:
        for client in other.clients.values():
            client.close()


def test_the_cli_lists_members(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["admin", "--gateway", stack.gateway, "--token", stack.admin_token]
    assert main([*base, "list-members", "--workspace", team.slug, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [m["handle"] for m in listed["members"]] == ["ada", "bob", "cy"]
    assert listed["members"][0]["role"] == "ROLE_OWNER"
    assert main([*base, "list-members", "--workspace", team.slug]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert lines[1].startswith(f"{team.members['bob']}  bob  member  since ")


def member_pages(
    client: Client, workspace: str, page_size: int, removed: bool = False
) -> list[Any]:
    """Every page of a workspace's members, asked for one at a time."""
    return every_page(
        lambda token: client.list_members_page(workspace, removed, page_size, token),
        "members",
        page_size,
    )


def test_members_are_listed_a_page_at_a_time_by_handle(team: Team, operator: Client) -> None:
    # Byte order, whatever the server's locale: upper case before lower,
    # '-' before '.' before digits.
    for handle in ("Zed", "a.b", "a-b", "9x", "ab", "A"):
        operator.create_member(team.workspace_id, handle)
    operator.remove_member(team.members["bob"], "erase")
    live = member_pages(operator, team.slug, 2)
    assert [m.handle for m in live] == ["9x", "A", "Zed", "a-b", "a.b", "ab", "ada", "cy"]
    ada = team.clients["ada"]
    for size in (1, 3, 1000):
        assert member_pages(ada, "", size) == live
    everyone = member_pages(operator, team.workspace_id, 3, removed=True)
    assert [m.handle for m in everyone] == sorted([*(m.handle for m in live), "bob"])
    assert len({m.id for m in everyone}) == len(everyone)
    # Without a page size: every member in one answer, as before paging.
    whole = operator.list_members_page(team.slug, True)
    assert list(whole.members) == everyone and whole.next_page_token == ""
    assert operator.list_members(team.slug, True) == whole


def test_a_workspace_past_one_answer_is_listed_in_pages(
    stack: Stack, operator: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    """Past ~49,000 members one answer passed the 8 MiB message limit
    (RESOURCE_EXHAUSTED): nobody could list them. Each page is bounded now;
    an answer of every member at once is refused, naming page_size, rather
    than cut short for a caller that knows no pages."""
    from services.store.infrastructure.db import CONTROL_DATABASE
    from tests import dbutil

    many = 60_000
    big = make_team(stack, operator, ("ada",))
    try:
        with psycopg.connect(dbutil.workspace_url(stack, CONTROL_DATABASE)) as conn:
            conn.execute(
                "INSERT INTO member (id, workspace_id, handle, role, removed_at)"
                " SELECT gen_random_uuid(), %s, 'm' || lpad(g::text, 62, '0'), 'member',"
                " CASE WHEN g %% 2 = 0 THEN now() END FROM generate_series(1, %s) g",
                (big.workspace_id, many),
            )
        everyone = operator.list_members(big.slug, include_removed=True).members
        expected = ["ada", *(f"m{g:062d}" for g in range(1, many + 1))]
        assert sorted(m.handle for m in everyone) == sorted(expected)
        assert [m.handle for m in everyone] == sorted(expected)
        assert len({m.id for m in everyone}) == many + 1
        assert sum(m.HasField("removed_at") for m in everyone) == many // 2
        live = big.clients["ada"].list_members().members
        assert [m.handle for m in live] == [h for h in expected if h == "ada" or int(h[1:]) % 2]
        whole = error(lambda: operator.list_members_page(big.slug, True))
        assert whole.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "page_size" in str(whole.details())
        base = ["admin", "--gateway", stack.gateway, "--token", stack.admin_token]
        capsys.readouterr()
        assert main([*base, "list-members", "--workspace", big.slug, "--removed", "--json"]) == 0
        printed = json.loads(capsys.readouterr().out)
        assert [m["handle"] for m in printed["members"]] == sorted(expected)
    finally:
        operator.delete_workspace(big.slug, big.slug)
        for client in big.clients.values():
            client.close()


def test_bad_member_pages_name_their_field(stack: Stack, team: Team, operator: Client) -> None:
    first = operator.list_members_page(team.slug, False, 1)
    assert first.next_page_token
    other = make_team(stack, operator, ("dee", "eve"))
    try:
        elsewhere = operator.list_members_page(other.slug, False, 1).next_page_token
        mine = {"w": "members", "ws": team.workspace_id, "id": team.members["ada"]}
        for size, token in (
            (-1, ""),
            (1001, ""),
            (0, "bm90IG91cnM="),
            (0, elsewhere),
            (0, every_page_token()),
            (0, page_token({**mine, "handle": "a\u0000b"})),
            (0, page_token({**mine, "handle": 7})),
            (0, page_token({**mine, "handle": "ada", "id": "not-an-id"})),
            (0, page_token({"w": "members", "ws": team.workspace_id, "handle": "ada"})),
        ):
            field = "page_size" if size else "page_token"
            exc = error(partial(operator.list_members_page, team.slug, False, size, token))
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (size, token, exc.details())
            assert field in str(exc.details()), exc.details()
        # A token this listing gave goes on where it ended, for whoever may list.
        rest = team.clients["ada"].list_members_page("", False, 10, first.next_page_token)
        assert [m.handle for m in rest.members] == ["bob", "cy"] and not rest.next_page_token
    finally:
        for client in other.clients.values():
            client.close()


def every_page_token() -> str:
    """A token of the workspaces' listing, never the members'."""
    return page_token({"w": "workspaces", "after": "a"})


def workspace_pages(operator: Client, page_size: int, server: str = "") -> list[Any]:
    """Every page of the workspaces' listing, asked for one at a time."""
    return every_page(
        lambda token: operator.list_workspaces(page_size, token, server), "workspaces", page_size
    )


def test_the_operator_lists_every_workspace_a_page_at_a_time(
    stack: Stack, team: Team, operator: Client
) -> None:
    made = [make_team(stack, operator, ("eve", "fay")) for _ in range(3)]
    try:
        listed = workspace_pages(operator, 2)
        slugs = [w.workspace.slug for w in listed]
        assert slugs == sorted(slugs) and len(slugs) == len(set(slugs))
        assert slugs == [w.workspace.slug for w in workspace_pages(operator, 1000)]
        by_slug = {w.workspace.slug: w for w in listed}
        for t in (team, *made):
            assert by_slug[t.slug].workspace.id == t.workspace_id
            assert by_slug[t.slug].workspace.server == "default"
        assert by_slug[team.slug].members == 3
        operator.remove_member(made[0].members["fay"], "erase")
        server = workspace_pages(operator, 1000, "default")
        assert {w.workspace.slug: w.members for w in server}[made[0].slug] == 1
        operator.delete_workspace(made[1].slug, made[1].slug)
        assert made[1].slug not in {w.workspace.slug for w in workspace_pages(operator, 1000)}
    finally:
        for t in made:
            for client in t.clients.values():
                client.close()


# A token of the right shape whose slug holds a NUL character.
NUL_TOKEN = page_token({"w": "workspaces", "after": "a\u0000b"})


def test_a_page_past_the_last_workspace_is_empty(operator: Client) -> None:
    past = page_token({"w": "workspaces", "after": "z" * 40})
    page = operator.list_workspaces(0, past)
    assert list(page.workspaces) == [] and page.next_page_token == ""


def test_bad_listing_requests_name_their_field(team: Team, operator: Client) -> None:
    for call, code, field in (
        (lambda: operator.list_workspaces(-1), grpc.StatusCode.INVALID_ARGUMENT, "page_size"),
        (lambda: operator.list_workspaces(1001), grpc.StatusCode.INVALID_ARGUMENT, "page_size"),
        (lambda: operator.list_workspaces(0, "bm90IG91cnM="), grpc.StatusCode.INVALID_ARGUMENT,
         "page_token"),
        (lambda: operator.list_workspaces(0, NUL_TOKEN), grpc.StatusCode.INVALID_ARGUMENT,
         "page_token"),
        (lambda: operator.list_workspaces(0, "", "nowhere"), grpc.StatusCode.INVALID_ARGUMENT,
         "server"),
        (lambda: team.clients["ada"].list_workspaces(), grpc.StatusCode.PERMISSION_DENIED,
         "operator"),
    ):  # fmt: skip
        exc = error(call)
        assert exc.code() == code, exc.details()
        assert field in str(exc.details()), exc.details()


def test_the_cli_lists_workspaces(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["admin", "--gateway", stack.gateway, "--token", stack.admin_token]
    assert main([*base, "list-workspaces", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["workspaces"]
    mine = next(w for w in listed if w["workspace"]["slug"] == team.slug)
    assert mine["workspace"]["id"] == team.workspace_id and mine["members"] == 3
    assert main([*base, "list-workspaces", "--server", "default"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if f"  {team.slug}  " in x)
    assert line.startswith(f"{team.workspace_id}  {team.slug}  server default  3 members  ")


def test_the_operator_lists_a_workspaces_tokens(stack: Stack, team: Team, operator: Client) -> None:
    tokens = operator.list_tokens(workspace_id=team.workspace_id).tokens
    assert {t.id for t in tokens} == set(team.token_ids.values())
    assert {t.member_handle for t in tokens} == {"ada", "bob", "cy"}
    ada = team.clients["ada"]
    assert {t.id for t in ada.list_tokens(workspace_id=team.workspace_id).tokens} == {
        t.id for t in tokens
    }
    other = make_team(stack, operator, ("dee",))
    try:
        refused = error(lambda: ada.list_tokens(workspace_id=other.workspace_id))
        assert refused.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "workspace_id" in str(refused.details())
        assert [
            t.member_handle for t in operator.list_tokens(workspace_id=other.workspace_id).tokens
        ] == ["dee"]
    finally:
        for client in other.clients.values():
            client.close()
    missing = error(lambda: operator.list_tokens(workspace_id=str(uuid.uuid4())))
    assert missing.code() == grpc.StatusCode.NOT_FOUND
    # Named as every refusal of a field is (it said only "workspace not found").
    assert str(missing.details()).startswith("workspace_id: "), missing.details()
    malformed = error(lambda: operator.list_tokens(workspace_id="not-an-id"))
    assert malformed.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "workspace_id" in str(malformed.details())


def test_listing_the_tokens_of_a_member_that_does_not_exist_is_not_found(
    stack: Stack, team: Team, operator: Client
) -> None:
    """The operator naming a member id nobody holds was answered an empty
    list, as if the member held no tokens; it is NOT_FOUND naming member_id,
    as ListMembers is for a workspace that does not exist. An owner naming a
    member of another workspace hears the same."""
    nobody = str(uuid.uuid4())
    for call in (
        partial(operator.list_tokens, nobody),
        partial(operator.list_tokens_page, nobody),
        partial(operator.list_tokens_page, nobody, "", 10),
        partial(operator.list_tokens, nobody, team.workspace_id),
    ):
        missing = error(call)
        assert missing.code() == grpc.StatusCode.NOT_FOUND, missing.details()
        assert str(missing.details()).startswith("member_id"), missing.details()
    other = make_team(stack, operator, ("dee",))
    try:
        ada = team.clients["ada"]
        elsewhere = error(partial(ada.list_tokens, other.members["dee"]))
        nowhere = error(partial(ada.list_tokens, nobody))
        assert elsewhere.code() == nowhere.code() == grpc.StatusCode.NOT_FOUND
        assert str(elsewhere.details()).startswith("member_id"), elsewhere.details()
    finally:
        for client in other.clients.values():
            client.close()
    # A removed member's tokens are still theirs to list.
    operator.remove_member(team.members["cy"], "erase")
    assert [t.id for t in operator.list_tokens(team.members["cy"]).tokens] == [team.token_ids["cy"]]


def test_the_token_list_keeps_every_live_token_past_its_cap(
    stack: Stack, team: Team, operator: Client
) -> None:
    """Ended tokens pile up (an MCP grant makes an hour's token at a time);
    the list's cap cuts the oldest ended ones, never a live one."""
    from services.store.domain.tokens import MAX_LISTED_TOKENS

    bob = team.members["bob"]
    add_ended_tokens(stack, bob, MAX_LISTED_TOKENS)
    listed = operator.list_tokens_page(bob).tokens  # one list, as before paging
    assert len(listed) == MAX_LISTED_TOKENS
    # bob's live token from the team's making: newer than every ended one
    # here, it was the one an oldest-first list cut.
    assert team.token_ids["bob"] in {t.id for t in listed}
    assert [t.created_at.ToDatetime() for t in listed] == sorted(
        t.created_at.ToDatetime() for t in listed
    )


def test_no_live_token_is_left_out_of_a_token_list(
    stack: Stack, team: Team, operator: Client
) -> None:
    """A token list past its cap left live tokens out, looking whole: nothing
    bounded how many live tokens a member holds, so a member with 1,001 had
    the oldest one missing from their list and from their workspace's. A
    member holds at most MAX_LISTED_TOKENS live tokens (one more, made or
    rotated with a grace, is refused and nothing is made), and a workspace
    whose live tokens pass the cap is refused its whole list, never cut."""
    from services.store.domain.tokens import MAX_LISTED_TOKENS
    from services.store.infrastructure.db import CONTROL_DATABASE
    from tests import dbutil

    bob = team.members["bob"]
    live = (
        "SELECT count(*) FROM access_token WHERE member_id = %s AND revoked_at IS NULL"
        " AND (expires_at IS NULL OR expires_at > now())"
    )
    # bob holds the team's token: these make the cap's worth of live ones.
    add_live_tokens(stack, [bob], MAX_LISTED_TOKENS - 1)
    for call in (
        partial(operator.create_token, bob, "one too many"),
        partial(team.clients["ada"].create_token, bob, "one too many"),
        partial(operator.rotate_token, team.token_ids["bob"]),
    ):
        refused = error(call)
        assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION, refused.details()
        assert str(refused.details()).startswith("member_id"), refused.details()
    assert dbutil.query(stack, CONTROL_DATABASE, live, (bob,)) == [(MAX_LISTED_TOKENS,)]
    listed = {t.id for t in operator.list_tokens_page(bob).tokens}
    assert len(listed) == MAX_LISTED_TOKENS and team.token_ids["bob"] in listed
    # ada's and cy's live tokens beside bob's pass the cap: never one list
    # that leaves one of them out (pages list them all).
    for whole in (
        partial(team.clients["ada"].list_tokens_page),
        partial(operator.list_tokens_page, workspace_id=team.workspace_id),
    ):
        exc = error(whole)
        assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, exc.details()
        assert "member_id" in str(exc.details()), exc.details()
    # A rotation that ends the old token at once holds no more; a revocation
    # makes room for a new one.
    rotated = operator.rotate_token(team.token_ids["bob"], grace=timedelta(0))
    assert dbutil.query(stack, CONTROL_DATABASE, live, (bob,)) == [(MAX_LISTED_TOKENS,)]
    operator.revoke_token(rotated.token_id)
    operator.create_token(bob, "room again")
    assert dbutil.query(stack, CONTROL_DATABASE, live, (bob,)) == [(MAX_LISTED_TOKENS,)]
