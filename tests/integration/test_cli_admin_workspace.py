"""The admin commands that name a workspace take its slug or its id alike:
`create-member --workspace` and `list-tokens --workspace` took an id only
(a slug was refused INVALID_ARGUMENT) while `list-members` and
`delete-workspace` took either. An owner may leave it out, as they may for
`list-members` and `list-tokens`: their own."""

from __future__ import annotations

import json
import uuid

import pytest

from recallatron.client import Client
from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from tests.conftest import Team

pytestmark = pytest.mark.integration


def _admin(stack: Stack, token: str, *argv: str) -> list[str]:
    return ["admin", "--gateway", stack.gateway, "--token", token, *argv]


def test_the_operator_names_a_workspace_by_slug_or_id(
    stack: Stack, operator: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    # A workspace with no member yet: what create-member is first used on.
    slug = f"s-{uuid.uuid4().hex[:12]}"
    ws = operator.create_workspace(slug).workspace
    for handle, named in (("dee", slug), ("eve", ws.id)):
        argv = _admin(stack, stack.admin_token, "create-member", "--workspace", named, handle)
        assert main([*argv, "--owner", "--json"]) == 0, capsys.readouterr().err
        made = json.loads(capsys.readouterr().out)["member"]
        assert (made["handle"], made["workspace_id"]) == (handle, ws.id)
    operator.create_token(made["id"], "by slug")
    assert main(_admin(stack, stack.admin_token, "list-tokens", "--workspace", slug)) == 0
    assert "by slug" in capsys.readouterr().out
    # A slug naming no workspace is refused as the gateway refuses one.
    gone = f"s-{uuid.uuid4().hex[:12]}"
    argv = _admin(stack, stack.admin_token, "create-member", "--workspace", gone, "fay")
    assert main(argv) == 1
    assert f"error: NOT_FOUND: workspace: no workspace '{gone}'" in capsys.readouterr().err
    handles = {m.handle for m in operator.list_members(ws.id).members}
    assert handles == {"dee", "eve"}


def test_an_owner_names_their_own_workspace_by_slug_and_no_other(
    stack: Stack, operator: Client, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    ada = team.clients["ada"].token
    assert main(_admin(stack, ada, "create-member", "--workspace", team.slug, "gus")) == 0
    assert "member gus" in capsys.readouterr().out
    other = f"s-{uuid.uuid4().hex[:12]}"
    elsewhere = operator.create_workspace(other).workspace
    assert main(_admin(stack, ada, "create-member", "--workspace", other, "hal")) == 1
    # Refused naming what was tried and the field, not in list-members' words
    # (the lookup of the slug it makes).
    err = capsys.readouterr().err
    assert err == (
        "error: PERMISSION_DENIED: workspace_id (--workspace): an owner adds members "
        "to their own workspace only\n"
    ), err
    assert main(_admin(stack, ada, "list-tokens", "--workspace", other)) == 1
    err = capsys.readouterr().err
    assert err == (
        "error: PERMISSION_DENIED: workspace_id (--workspace): an owner lists the tokens "
        "of their own workspace only\n"
    ), err
    assert operator.list_members(elsewhere.id).members == []
    assert "gus" in {m.handle for m in operator.list_members(team.workspace_id).members}


def test_an_owner_adds_a_member_to_their_own_workspace_without_naming_it(
    stack: Stack, operator: Client, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    """`create-member` required --workspace even of an owner, whose token acts
    in their own workspace only and whom the gateway takes without one
    (argparse: 'the following arguments are required: --workspace', exit 2);
    the operator, who must name one, is told so naming the field."""
    ada = team.clients["ada"].token
    assert main(_admin(stack, ada, "create-member", "ivy")) == 0, capsys.readouterr().err
    assert "member ivy" in capsys.readouterr().out
    assert "ivy" in {m.handle for m in operator.list_members(team.workspace_id).members}
    assert main(_admin(stack, stack.admin_token, "create-member", "jon")) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: INVALID_ARGUMENT: workspace_id: is required"), err
