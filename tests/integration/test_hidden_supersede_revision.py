"""A memory's revision counts the versions of its text (create, each
correct); a supersede moves it to no one, as a forget does not: the revision
it records is the one it superseded. So a supersede by a successor Bob may
not see, after which M reads to him as current, changes nothing he reads of
M (read, recall, the list): its revision stays the one he read, which his
correct names as of any current memory.

Bob writes a workspace memory M; Ada, an owner, supersedes it by S, which
only she may see."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.clirun import cli
from tests.conftest import Team, remember_robin

pytestmark = pytest.mark.integration


def _seen_by(client: Client, memory_id: str) -> tuple[int, int, int]:
    """M's revision as read, recalled and listed by ``client``."""
    (read,) = client.read([memory_id]).memories
    recalled = client.recall(
        "Robin leads Apollo", mode="lexical", skip_rerank=True, include_superseded=True
    ).outcome.results
    listed = client.list_memories(include_superseded=True).memories
    return (
        read.revision,
        next(x.memory.revision for x in recalled if x.memory.id == memory_id),
        next(x.revision for x in listed if x.id == memory_id),
    )


def _history(client: Client, memory_id: str) -> list[tuple[int, str]]:
    (read,) = client.read([memory_id]).memories
    return [
        (r.revision, cpb.RevisionAction.Name(r.action).removeprefix("REVISION_ACTION_").lower())
        for r in read.revisions
    ]


def _corrected(team: Team) -> Any:
    """M, written by Bob and corrected once (revision 2)."""
    bob = team.clients["bob"]
    m = remember_robin(bob, "From the kickoff.", audience_to="workspace").memory
    return bob.correct(m.id, m.revision, "typo", body="From the kickoff call.").memory


def test_a_hidden_supersede_leaves_the_revision_others_read(stack: Stack, team: Team) -> None:
    ada, bob, cy = (team.clients[h] for h in ("ada", "bob", "cy"))
    m = _corrected(team)
    before = {who: _seen_by(c, m.id) for who, c in (("bob", bob), ("cy", cy))}
    assert before == {"bob": (2, 2, 2), "cy": (2, 2, 2)}

    s = ada.supersede(
        m.id, m.revision, "Robin leads Apollo, says Ada", audience_to=team.members["ada"]
    ).memory
    for who, reader in (("bob", bob), ("cy", cy)):
        assert _seen_by(reader, m.id) == before[who], who
        assert _history(reader, m.id) == [(1, "create"), (2, "correct")], who

    # Ada sees S: M was superseded for her, at the revision it had.
    (for_ada,) = ada.read([m.id]).memories
    assert (for_ada.superseded_by_id, for_ada.revision) == (s.id, 2)
    assert _history(ada, m.id) == [(1, "create"), (2, "correct"), (2, "supersede")]

    # Bob's correct names the revision he read, as of any current memory.
    corrected = bob.correct(m.id, 2, "moved", body="From the kickoff, in Porto.").memory
    assert (corrected.revision, corrected.superseded_by_id) == (3, "")
    assert _seen_by(cy, m.id) == (3, 3, 3)
    assert _history(ada, m.id)[-1] == (3, "correct")
    # And a forget checked against it.
    assert bob.forget(m.id, "wrong meeting", expected_revision=3).id == m.id


def test_a_visible_supersede_keeps_the_revision_it_superseded(stack: Stack, team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    m = _corrected(team)
    s = ada.supersede(m.id, m.revision, "Robin leads Apollo, says Ada").memory
    for reader in (ada, bob):
        (read,) = reader.read([m.id]).memories
        assert (read.superseded_by_id, read.revision) == (s.id, 2)
        assert _history(reader, m.id) == [(1, "create"), (2, "correct"), (2, "supersede")]


def test_supersedes_written_before_are_restated(stack: Stack, team: Team) -> None:
    """A supersede written by a release that moved the revision on (as
    restated here) is restated as one now leaves it, once: run again, the
    restatement changes nothing."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    m = _corrected(team)
    ada.supersede(m.id, m.revision, "Robin leads Apollo, says Ada", audience_to=team.members["ada"])

    def owner(sql: str) -> list[tuple[Any, ...]]:
        return dbutil.query(stack, team.database_name, sql, (m.id,))

    owner(
        "UPDATE memory_revision SET revision = 3 WHERE memory_id = %s AND action = 'supersede'"
        " RETURNING 1"
    )
    owner("UPDATE memory SET revision = 3 WHERE id = %s RETURNING 1")
    owner(
        "UPDATE mention_change SET key = memory_id || ':3:supersede' WHERE memory_id = %s"
        " AND action = 'supersede' RETURNING 1"
    )
    assert bob.read([m.id]).memories[0].revision == 3
    for _ in range(2):
        owner("SELECT restate_supersede_revisions(), %s")
        assert _seen_by(bob, m.id) == (2, 2, 2)
        assert _history(bob, m.id) == [(1, "create"), (2, "correct")]
        assert _history(ada, m.id) == [(1, "create"), (2, "correct"), (2, "supersede")]
        # The entity's timeline keys of the changes (its mentions came
        # with the correct).
        keys = owner("SELECT DISTINCT key FROM mention_change WHERE memory_id = %s")
        assert {k for (k,) in keys} == {f"{m.id}:{r}" for r in ("2:correct", "2:supersede")}


def test_two_supersedes_of_one_revision_export_and_import(
    stack: Stack, operator: Client, team: Team, tmp_path: Path
) -> None:
    """M superseded, its successor forgotten (M current again), superseded
    again: two supersedes of one revision, each its own change."""
    bob = team.clients["bob"]
    m = remember_robin(bob, "From the kickoff.", audience_to="workspace").memory
    s = bob.supersede(m.id, m.revision, "Robin leads Apollo, says Bob").memory
    bob.forget(s.id, "wrong")
    bob.supersede(m.id, m.revision, "Robin leads Apollo, says Bob again")
    history = [(1, "create"), (1, "supersede"), (1, "supersede")]
    assert _history(bob, m.id) == history

    out = tmp_path / "archive"
    done = cli(stack, "export", "--workspace", team.slug, "--out", str(out))
    assert done.returncode == 0, done.stderr
    done = cli(stack, "import", str(out), "--as", f"copy-{uuid.uuid4().hex[:10]}", "--json")
    assert done.returncode == 0, done.stderr
    bob_id = next(x["id"] for x in json.loads(done.stdout)["members"] if x["handle"] == "bob")
    copy = Client(stack.gateway, operator.create_token(bob_id, "t").token)
    try:
        assert _history(copy, m.id) == history
    finally:
        copy.close()
