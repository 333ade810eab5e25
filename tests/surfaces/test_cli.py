"""The surfaces' CLI commands against the real stack: capture, pairs, keep-both, the
entity review."""

from __future__ import annotations

import json

import pytest

from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.surfaces.dedup_data import NEAR_DUPLICATES, wait_embedded
from tests.surfaces.entity_data import write_robins

pytestmark = pytest.mark.integration


def test_capture_pairs_and_keep_both(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    token = team.clients["ada"].token
    common = ["--gateway", stack.gateway, "--token", token]

    assert main(["capture", "Maybe remember that the bus is late.", *common]) == 0
    assert capsys.readouterr().out.startswith("not stored: hedged")
    assert main(["capture", "Remember that the bus leaves at seven.", *common]) == 0
    said = capsys.readouterr().out
    # Said once: the reason of a stored capture already says it.
    assert said.startswith("stored: an explicit request") and said.count("stored:") == 1, said

    (first, second), *_ = NEAR_DUPLICATES
    ids = []
    for title, body in (first, second):
        turn = f"Remember that {title[0].lower()}{title[1:]}. {body}"
        assert main(["capture", turn, "--at", "2026-05-04T09:30", "--json", *common]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["stored"] is True and out["memory"]["origin"] == "ORIGIN_TOLD"
        ids.append(out["memory"]["id"])
    wait_embedded(stack, team, ids)

    assert main(["pairs", "--json", *common]) == 0
    pairs = json.loads(capsys.readouterr().out)["pairs"]
    assert [{p["first"]["id"], p["second"]["id"]} for p in pairs] == [set(ids)]

    assert main(["keep-both", *ids, *common]) == 0
    assert "kept both" in capsys.readouterr().out
    assert main(["pairs", *common]) == 0
    assert capsys.readouterr().out.strip() == "no pairs to review"


def test_graph_commands(stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]) -> None:
    token = team.clients["ada"].token
    common = ["--gateway", stack.gateway, "--token", token]
    args = [
        "remember",
        "Robin leads Apollo",
        "--claim",
        "Robin Goodwin:city=Lisbon",
        "--relation",
        "Robin Goodwin:leads:Apollo",
        "--alias",
        "Robin Goodwin=Robin",
        "--entity-type",
        "Robin Goodwin=person",
        "--valid-from",
        "2026-05-01T00:00:00Z",
        "--json",
        *common,
    ]
    assert main(args) == 0
    memory = json.loads(capsys.readouterr().out)["memory"]
    assert [c["value"] for c in memory["claims"]] == ["Lisbon"]

    assert main(["lookup", "robin", *common]) == 0
    text = capsys.readouterr().out
    assert "Robin Goodwin [person]" in text and "also known as Robin" in text
    assert "city = Lisbon (valid 2026-05-01 to …)" in text and "-leads-> Apollo" in text

    assert main(["lookup", "Robin Goodwin", "--json", *common]) == 0
    card = json.loads(capsys.readouterr().out)["entities"][0]
    assert main(["neighbors", card["id"], "--hops", "2", *common]) == 0
    text = capsys.readouterr().out
    assert "Apollo" in text and "Robin Goodwin -leads-> Apollo" in text

    assert main(["lookup", "nobody here", *common]) == 0
    assert "no entity named" in capsys.readouterr().out


def test_episode_and_timeline_commands(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    token = team.clients["ada"].token
    common = ["--gateway", stack.gateway, "--token", token]
    assert (
        main(["episode", "Planning day", "--start", "2026-11-02T09:00:00Z", "--json", *common]) == 0
    )
    episode = json.loads(capsys.readouterr().out)["episode_id"]
    assert main(["remember", "Plan agreed", "--episode", episode, "--json", *common]) == 0
    memory = json.loads(capsys.readouterr().out)["memory"]
    assert memory["episode_id"] == episode
    assert main(["timeline", "--episode", episode, *common]) == 0
    text = capsys.readouterr().out
    assert "memory" in text and "Plan agreed" in text and memory["id"] in text


def test_entity_review_commands(
    stack: Stack, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    robins = write_robins(team.clients["ada"])
    common = ["--gateway", stack.gateway, "--token", team.clients["ada"].token]

    assert main(["entity-pairs", *common]) == 0
    text = capsys.readouterr().out
    assert "name_prefix" in text and "Robin Goodwin [person]" in text

    assert main(["merge", robins["goodwin"], robins["robin"], "--json", *common]) == 0
    merge = json.loads(capsys.readouterr().out)["merge"]
    assert main(["lookup", "Robin", *common]) == 0
    assert f"merged with Robin ({robins['robin']})" in capsys.readouterr().out
    assert main(["merges", *common]) == 0
    assert merge["id"] in capsys.readouterr().out

    assert main(["undo-merge", merge["id"], *common]) == 0
    assert "undone" in capsys.readouterr().out
    assert main(["keep-apart", robins["goodwin"], robins["robin"], *common]) == 0
    assert main(["entity-pairs", *common]) == 0
    assert capsys.readouterr().out.strip().endswith("no entity pairs to review")
