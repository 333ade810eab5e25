"""The write commands act for a purpose the caller chooses (a memory for
audit is out of an assist call's sight, so forgetting it needs an audit
call), and a value the client cannot send is refused naming it, never a
traceback."""

from __future__ import annotations

import json

import pytest

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
