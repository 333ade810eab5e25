"""The write commands act for a purpose the caller chooses (a memory for
audit is out of an assist call's sight, so forgetting it needs an audit
call), and a value the client cannot send is refused naming it, never a
traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from recallatron.client import Client
from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from tests.conftest import Team

pytestmark = pytest.mark.integration


def test_writes_act_for_the_purpose_chosen(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--gateway", stack.gateway, "--token", team.clients["ada"].token]
    assert main(["remember", *common, "Audit trail kept", "--purpose", "audit", "--json"]) == 0
    made = json.loads(capsys.readouterr().out)["memory"]
    # An assist call cannot see it: not found, as for anyone it is hidden from.
    assert main(["forget", *common, made["id"], "--reason", "done"]) == 1
    assert "NOT_FOUND" in capsys.readouterr().err
    revision = ["--revision", "1"]
    assert main(["correct", *common, made["id"], *revision, "--reason", "r", "--body", "b",
                 "--purpose", "audit"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["forget", *common, made["id"], "--reason", "done", "--purpose", "audit"]) == 0
    assert made["id"] in capsys.readouterr().out
    # --as-purpose for remember when the call's purpose is not the memory's first.
    assert main(["remember", *common, "Both", "--purpose", "audit", "--purpose", "assist",
                 "--as-purpose", "assist", "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["memory"]["title"] == "Both"


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["lookup", "Bob", "--as-of", "2026-01-01"], "as_of"),
        (["remember", "T", "--graph", "/nonexistent/graph.json"], "/nonexistent/graph.json"),
        (["neighbors", "00000000-0000-0000-0000-000000000001", "--hops", "99999999999"], ""),
    ],
)
def test_a_value_the_client_cannot_send_is_refused_by_name(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    common = ["--gateway", stack.gateway, "--token", team.clients["ada"].token]
    assert main([argv[0], *common, *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert named in err


def test_supersede_keeps_the_old_kind_and_episode_acts_for_its_purpose(
    stack: Stack, operator: Client, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    """`supersede` without --kind made every successor a note (a decision
    superseded became a note); `episode --purpose audit` still acted for
    assist, so a token scoped to audit was refused."""
    common = ["--gateway", stack.gateway, "--token", team.clients["ada"].token]
    assert main(["remember", *common, "Launch is on May 4", "--kind", "decision",
                 "--audience", "workspace", "--json"]) == 0  # fmt: skip
    made = json.loads(capsys.readouterr().out)["memory"]
    assert main(["supersede", *common, made["id"], "--revision", "1", "Launch is on May 11",
                 "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["memory"]["kind"] == "KIND_DECISION"
    audit = operator.create_token(team.members["ada"], "audit only", purposes=["audit"]).token
    scoped = ["--gateway", stack.gateway, "--token", audit]
    assert main(["episode", *scoped, "Audit review", "--start", "2026-05-04T09:00:00Z",
                 "--purpose", "audit", "--json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out)["episode_id"]


def test_supersede_narrows_the_audience_and_derives_from_sources(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    """The API's supersede takes an audience (narrowing) and sources; the
    command took neither, so a private successor or a derived one needed
    another client."""
    common = ["--gateway", stack.gateway, "--token", team.clients["ada"].token]
    ada = team.members["ada"]

    def made(*argv: str) -> dict[str, Any]:
        assert main([*argv, *common, "--json"]) == 0
        return dict(json.loads(capsys.readouterr().out)["memory"])

    old = made("remember", "Coffee machine on floor 3", "--audience", "workspace")
    mine = made("supersede", old["id"], "--revision", "1", "I bring my own", "--audience", ada)
    assert mine["audience"] == {"member_id": ada}
    source = made("remember", "The kitchen moved to floor 4", "--audience", "workspace")
    tea = made("remember", "Tea in the kitchen", "--audience", "workspace")
    moved = made(
        "supersede", tea["id"], "--revision", "1", "Tea on floor 4", "--source", source["id"]
    )
    assert moved["origin"] == "ORIGIN_DERIVED"
    assert [(link["kind"], link["target"]["id"]) for link in moved["links"]] == [
        ("LINK_KIND_DERIVED_FROM", source["id"])
    ]
    # Derived from a private source, the new memory may not be wider than it.
    assert main(["supersede", *common, moved["id"], "--revision", "1", "x", "--source",
                 mine["id"], "--audience", "workspace"]) == 1  # fmt: skip
    assert "INVALID_ARGUMENT: audience" in capsys.readouterr().err


def test_derive_keeps_the_confidence_given(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    """`derive --confidence` was taken and then left out of the call, so the
    derived memory had none."""
    common = ["--gateway", stack.gateway, "--token", team.clients["ada"].token]
    assert main(["remember", *common, "Apollo ships in May", "--json"]) == 0
    source = json.loads(capsys.readouterr().out)["memory"]["id"]
    assert main(["derive", *common, "--source", source, "Apollo ships this spring",
                 "--confidence", "0.7", "--json"]) == 0  # fmt: skip
    derived = json.loads(capsys.readouterr().out)["memory"]
    assert derived["confidence"] == pytest.approx(0.7)


def test_json_answers_carry_every_field_and_every_command_speaks_json(
    stack: Stack, operator: Client, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    """--json left out false, zero and empty fields (a lexical recall had no
    dense_available, an empty one no results, `pairs` printed {}); `admin
    revoke-token` printed text whatever --json said."""
    common = ["--gateway", stack.gateway, "--token", team.clients["ada"].token]
    assert main(["recall", *common, "zebra quantum banana", "--mode", "lexical", "--json"]) == 0
    outcome = json.loads(capsys.readouterr().out)["outcome"]
    assert outcome["dense_available"] is False and outcome["reranked"] is False
    assert outcome["results"] == []
    assert main(["pairs", *common, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"pairs": [], "more": False}
    token = operator.create_token(team.members["bob"], "to revoke")
    admin = ["--gateway", stack.gateway, "--token", stack.admin_token]
    assert main(["admin", *admin, "revoke-token", token.token_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"revoked": token.token_id}
    # The text answer says when nothing was judged relevant.
    assert main(["recall", *common, "zebra quantum banana", "--mode", "lexical"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert head.startswith("nothing_relevant=")


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["capture", "Remember that the bus leaves at 7.", "--at", "yesterday"], "--at"),
        (["remember", "T", "--graph", "ARRAY"], "--graph"),
        (["remember", "T", "--graph", "BROKEN"], "--graph"),
    ],
)
def test_a_bad_option_value_is_refused_naming_the_option(
    stack: Stack,
    team: Team,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    named: str,
) -> None:
    (tmp_path / "array.json").write_text("[]")
    (tmp_path / "broken.json").write_text("{not json")
    files = {"ARRAY": str(tmp_path / "array.json"), "BROKEN": str(tmp_path / "broken.json")}
    common = ["--gateway", stack.gateway, "--token", team.clients["ada"].token]
    code = main([argv[0], *common, *(files.get(a, a) for a in argv[1:])])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert err.startswith("error: ") and f" {named}: " in err, err


def test_me_names_the_callers_own_member(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    """A member who is not an owner may not list members, so their own id,
    which --audience (supersede's narrowing to themselves) and list --author
    take, was nowhere to be read from the shell. `whoami` shows it, and "me"
    (any case) names it wherever a member id is asked for."""
    common = ["--gateway", stack.gateway, "--token", team.clients["bob"].token]
    bob = team.members["bob"]

    def out(*argv: str) -> dict[str, Any]:
        assert main([*argv, *common, "--json"]) == 0
        return dict(json.loads(capsys.readouterr().out))

    me = out("whoami")
    assert (me["member_id"], me["member_handle"], me["workspace_id"]) == (
        bob,
        "bob",
        team.workspace_id,
    )
    assert main(["whoami", *common]) == 0
    shown = capsys.readouterr().out
    assert bob in shown and "bob" in shown and team.workspace_id in shown

    old = out("remember", "Parking spots", "--audience", "workspace")["memory"]
    mine = out("supersede", old["id"], "--revision", "1", "Mine is 12", "--audience", "Me")
    assert mine["memory"]["audience"] == {"member_id": bob}
    note = out("remember", "My desk is by the window", "--audience", "me")["memory"]
    assert note["audience"] == {"member_id": bob}
    adas = team.clients["ada"].remember("Ada's note", audience_to="workspace").memory.id
    listed = out("list", "--author", "me")["memories"]
    ids = {m["id"] for m in listed}
    assert {mine["memory"]["id"], note["id"]} <= ids
    assert adas not in ids and old["id"] not in ids  # old: superseded for bob
    assert {m["created_by"] for m in listed} == {bob}
