"""A workspace's tokens a page at a time (ListTokens; docs/api.md): a
member holds at most 1,000 live tokens, but a workspace's members together
may hold many more, and one list of them is refused rather than cut short.
Pages list every token once, ended ones too, by member (handle in byte order,
then id), each member's oldest first; a request without a page size gets
the whole list as before paging, or that refusal; a bad page size or token
names its field."""

from __future__ import annotations

import base64
import json
from functools import partial
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from tests.conftest import Team, make_team
from tests.listings import add_ended_tokens, add_live_tokens, error, every_page, page_token

pytestmark = pytest.mark.integration

# Members beside the team's, each holding this many live tokens, and one
# revoked: 1,500 live tokens together (and the team's own three).
HANDLES = ("Zed", "a-b", "a.b", "9x", *(f"m{i:02d}" for i in range(26)))
LIVE_EACH = 50


def token_pages(
    client: Client, page_size: int, member_id: str = "", workspace_id: str = ""
) -> list[Any]:
    """Every page of a token listing, asked for one at a time."""
    return every_page(
        lambda token: client.list_tokens_page(member_id, workspace_id, page_size, token),
        "tokens",
        page_size,
    )


def listing_order(t: Any) -> tuple[bytes, str, int, int, str]:
    """By member (handle in byte order, then id), each member's oldest first."""
    at = t.created_at
    return (t.member_handle.encode(), t.member_id, at.seconds, at.nanos, t.id)


def seed(stack: Stack, operator: Client, team: Team) -> set[str]:
    """The members of HANDLES with their tokens; every token id of the workspace."""
    from services.store.infrastructure.db import CONTROL_DATABASE
    from tests import dbutil

    made = [operator.create_member(team.workspace_id, h).member.id for h in HANDLES]
    # Five at a time share a created_at: the id orders them.
    add_live_tokens(stack, made, LIVE_EACH + 1, sharing=5, first_revoked=True)
    rows = dbutil.query(
        stack,
        CONTROL_DATABASE,
        "SELECT t.id FROM access_token t JOIN member m ON m.id = t.member_id"
        " WHERE m.workspace_id = %s",
        (team.workspace_id,),
    )
    return {str(r[0]) for r in rows}


def test_a_workspaces_tokens_past_one_list_are_listed_in_pages(
    stack: Stack, team: Team, operator: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    """An owner of a team whose members hold 1,500 live tokens together was
    refused the workspace's list (RESOURCE_EXHAUSTED) and had to ask member
    by member; pages list every token once, with no refusal."""
    every = seed(stack, operator, team)
    assert len(every) == len(HANDLES) * (LIVE_EACH + 1) + 3
    ada = team.clients["ada"]
    # Without a page size: the whole list or the refusal, never one cut short.
    for whole in (
        partial(ada.list_tokens_page),
        partial(operator.list_tokens_page, workspace_id=team.workspace_id),
    ):
        refused = error(whole)
        assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, refused.details()
        assert str(refused.details()).startswith("page_size"), refused.details()
    listed = ada.list_tokens().tokens
    assert len(listed) == len(every) and {t.id for t in listed} == every
    assert list(listed) == sorted(listed, key=listing_order)
    assert [t.member_handle for t in listed][:6] == ["9x"] * 6
    assert token_pages(ada, 7) == list(listed)
    assert token_pages(operator, 1000, workspace_id=team.workspace_id) == list(listed)
    # A member's tokens page alike, and one page of them is their whole list.
    bob = team.members["bob"]
    bobs = operator.list_tokens_page(bob).tokens
    assert token_pages(ada, 1, member_id=bob) == list(bobs)
    zed = next(t.member_id for t in listed if t.member_handle == "Zed")
    zeds = token_pages(operator, 3, member_id=zed)
    assert [t.id for t in zeds] == [t.id for t in listed if t.member_id == zed]
    assert sum(t.HasField("revoked_at") for t in zeds) == 1
    base = ["admin", "--gateway", stack.gateway, "--token", ada.token]
    capsys.readouterr()
    assert main([*base, "list-tokens", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)["tokens"]
    assert [t["id"] for t in printed] == [t.id for t in listed]


def test_a_members_ended_tokens_past_one_list_are_listed_in_pages(
    stack: Stack, team: Team, operator: Client
) -> None:
    """One list leaves a member's oldest ended tokens out past 1,000; their
    pages leave nothing out."""
    from services.store.domain.tokens import MAX_LISTED_TOKENS

    bob = team.members["bob"]
    add_ended_tokens(stack, bob, MAX_LISTED_TOKENS)
    one = operator.list_tokens_page(bob)
    assert len(one.tokens) == MAX_LISTED_TOKENS and not one.next_page_token
    paged = token_pages(operator, 400, member_id=bob)
    assert len({t.id for t in paged}) == len(paged) == MAX_LISTED_TOKENS + 1
    assert team.token_ids["bob"] == paged[-1].id
    assert operator.list_tokens(bob).tokens == paged


def test_bad_token_pages_name_their_field(stack: Stack, team: Team, operator: Client) -> None:
    ada = team.clients["ada"]
    bob = team.members["bob"]
    second = operator.create_token(bob, "second").token_id
    first = ada.list_tokens_page(page_size=1)
    assert len(first.tokens) == 1 and first.next_page_token
    mine = json.loads(base64.urlsafe_b64decode(first.next_page_token))
    other = make_team(stack, operator, ("dee", "eve"))
    try:
        elsewhere = other.clients["dee"].list_tokens_page(page_size=1).next_page_token
        of_bob = operator.list_tokens_page(bob, "", 1).next_page_token
        members = operator.list_members_page(team.slug, False, 1).next_page_token
        for size, token in (
            (-1, ""),
            (1001, ""),
            (0, "bm90IG91cnM="),
            (0, elsewhere),
            (0, of_bob),
            (0, members),
            (0, page_token({**mine, "handle": "a\u0000b"})),
            (0, page_token({**mine, "member": "not-an-id"})),
            (0, page_token({**mine, "id": 7})),
            (0, page_token({**mine, "at": "yesterday"})),
            (0, page_token({**mine, "at": "2026-01-01T00:00:00"})),
            (0, page_token({k: v for k, v in mine.items() if k != "at"})),
            (0, page_token({**mine, "w": "members"})),
        ):
            field = "page_size" if size else "page_token"
            exc = error(partial(ada.list_tokens_page, "", "", size, token))
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (size, token, exc.details())
            assert str(exc.details()).startswith(field), exc.details()
        # A token of a member's listing names that member.
        bobs = operator.list_tokens_page(bob, "", 1, of_bob)
        assert (
            error(partial(operator.list_tokens_page, team.members["cy"], "", 1, of_bob)).code()
            == grpc.StatusCode.INVALID_ARGUMENT
        )
        assert [t.id for t in bobs.tokens] == [second] and not bobs.next_page_token
        # A token this listing gave goes on where it ended, for whoever may list.
        rest = operator.list_tokens_page("", team.workspace_id, 10, first.next_page_token)
        assert [t.member_handle for t in [*first.tokens, *rest.tokens]] == [
            "ada",
            "bob",
            "bob",
            "cy",
        ]
        assert not rest.next_page_token
    finally:
        for client in other.clients.values():
            client.close()
