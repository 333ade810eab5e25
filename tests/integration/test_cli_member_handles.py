"""The admin commands that take a member find one by handle too (in any
case, as the control plane does), not by id alone: create-token, list-tokens
--member, remove-member and its transfer-to."""

from __future__ import annotations

import json

import pytest

from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from tests.conftest import Team

pytestmark = pytest.mark.integration


def test_members_are_named_by_handle_or_id(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    ada = ["--gateway", stack.gateway, "--token", team.clients["ada"].token]
    bob_id = team.members["bob"]

    assert main(["admin", *ada, "create-token", "BOB", "--label", "by handle", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert main(["admin", *ada, "list-tokens", "--member", "bob", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["tokens"]
    assert made["token_id"] in {t["id"] for t in listed}
    assert {t["member_id"] for t in listed} == {bob_id}
    # By id as before.
    assert main(["admin", *ada, "list-tokens", "--member", bob_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == listed

    # A handle no member has: refused naming the field, nothing made.
    assert main(["admin", *ada, "create-token", "nobody"]) == 1
    err = capsys.readouterr().err
    assert "INVALID_ARGUMENT: member_id (member): no member has the handle 'nobody'" in err
    assert main(["admin", *ada, "list-tokens", "--member", "bob", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == listed

    # Removed by handle, private memories handed to a member named by handle.
    kept = team.clients["cy"].remember(
        "Cy's own", "Only cy sees this.", audience_to=team.members["cy"]
    )
    argv = ["admin", *ada, "remove-member", "Cy", "--private-memories", "transfer-to", "ada"]
    assert main([*argv, "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["member_id"] == team.members["cy"]
    assert int(done["memories_transferred"]) == 1
    assert team.clients["ada"].read([kept.memory.id]).memories[0].title == "Cy's own"

    # The audit log by a removed member's handle: what cy did.
    assert main(["audit", *ada, "--member", "cy", "--json"]) == 0
    events = json.loads(capsys.readouterr().out)["events"]
    assert events and {e["member_id"] for e in events} == {team.members["cy"]}
    assert "remember" in {e["action"] for e in events}
