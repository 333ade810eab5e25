"""A memory superseded by one the caller may not see reads to them as current
(design §4), and so it changes for them as any current memory does: Bob, its
author, corrects, supersedes and forgets it without an answer that reveals
the successor (errors never reveal rows the caller may not see).
Whoever sees the successor is refused as before: for them it was superseded.

Bob writes a workspace memory M; Ada, an owner, supersedes it by S, which
only she may see."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.clirun import cli
from tests.conftest import Team, remember_robin
from tests.integration.test_claims_hidden_successor import _MARKS, Stated, _lookup

pytestmark = pytest.mark.integration

SUPERSEDED = "id: the memory was superseded and can no longer change"


def _hidden(team: Team) -> tuple[Any, Any]:
    """M (Bob's, the workspace's) as Bob reads it, and S (Ada's alone)."""
    bob, ada = team.clients["bob"], team.clients["ada"]
    m = remember_robin(bob, "From the kickoff.", audience_to="workspace").memory
    s = ada.supersede(
        m.id, m.revision, "Robin leads Apollo, says Ada", audience_to=team.members["ada"]
    ).memory
    (seen,) = bob.read([m.id]).memories
    assert seen.superseded_by_id == ""
    assert [(x.id, x.visible) for x in seen.superseded_by] == []
    return seen, s


def _porto(m: Any) -> list[dict[str, Any]]:
    """The claim that Robin's city is Porto, of the Robin M mentions."""
    robin = next(x.entity_id for x in m.mentions if x.name == "Robin Goodwin")
    return [{"entity": {"entity_id": robin}, "attribute": "city", "value": "Porto"}]


def _refused(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value


def _statements(memory_id: str) -> tuple[Stated, Stated, Stated, list[str]]:
    """What remember_robin states, by ``memory_id``."""
    return (
        {("city=Lisbon", memory_id)},
        {("leads:Apollo", memory_id)},
        {("Robin", memory_id)},
        [memory_id],
    )


def _recalled(client: Client) -> set[str]:
    outcome = client.recall("Robin leads Apollo", mode="lexical", skip_rerank=True).outcome
    return {x.memory.id for x in outcome.results}


def _retired(memory: Any) -> list[tuple[str, bool]]:
    return sorted(
        [(c.value, c.HasField("retired_at")) for c in memory.claims]
        + [(r.predicate, r.HasField("retired_at")) for r in memory.relations]
        + [(a.alias, a.HasField("retired_at")) for a in memory.aliases]
    )


def _refusals_for_whoever_sees_the_successor(team: Team, m_id: str) -> None:
    """Ada sees S: M was superseded for her, and she is told so, as before."""
    ada = team.clients["ada"]
    (m,) = ada.read([m_id]).memories
    for call in (
        lambda: ada.correct(m.id, m.revision, "typo", title="Robin leads Apollo!"),
        lambda: ada.supersede(m.id, m.revision, "Robin leads Apollo?"),
    ):
        err = _refused(call)
        assert err.code() == grpc.StatusCode.FAILED_PRECONDITION, err.details()
        assert err.details() == SUPERSEDED


def test_the_author_corrects_a_memory_whose_successor_he_may_not_see(
    stack: Stack, team: Team
) -> None:
    ada, bob, cy = (team.clients[h] for h in ("ada", "bob", "cy"))
    m, s = _hidden(team)
    corrected = bob.correct(
        m.id, m.revision, "moved", title="Robin leads Apollo from Porto", claims=_porto(m)
    ).memory
    assert corrected.revision == m.revision + 1
    assert corrected.superseded_by_id == ""
    (read,) = bob.read([m.id]).memories
    assert read.title == "Robin leads Apollo from Porto"
    last = read.revisions[-1]
    assert (last.revision, last.changed_by, last.reason) == (
        m.revision + 1,
        team.members["bob"],
        "moved",
    )
    # The correct retired M's old statements for everyone and states Porto
    # for whoever reads M as current.
    assert _retired(read) == [("Lisbon", True), ("Porto", False), ("Robin", True), ("leads", True)]
    for reader in (bob, cy):
        assert _lookup(reader) == ({("city=Porto", m.id)}, set(), set(), [m.id])
        assert m.id in _recalled(reader)

    # Ada reads M as superseded by S, whose copies are untouched.
    (for_ada,) = ada.read([m.id]).memories
    assert for_ada.superseded_by_id == s.id
    assert _retired(for_ada) == [
        ("Lisbon", True),
        ("Porto", True),
        ("Robin", True),
        ("leads", True),
    ]
    assert _lookup(ada) == _statements(s.id)
    assert _recalled(ada) == {s.id}
    _refusals_for_whoever_sees_the_successor(team, m.id)

    # A lost race says so, as on any current memory: nothing of S.
    err = _refused(lambda: bob.correct(m.id, m.revision, "again", title="Robin, from Porto"))
    assert err.code() == grpc.StatusCode.ABORTED, err.details()
    assert "superseded" not in (err.details() or "")

    # The new text is embedded again.
    ada.wait_embedded(timeout=120, poll=0.2)
    fresh = dbutil.query(
        stack,
        team.database_name,
        "SELECT e.created_at >= m.updated_at FROM memory_embedding e"
        " JOIN memory m ON m.id = e.memory_id WHERE m.id = %s",
        (m.id,),
    )
    assert fresh == [(True,)]


def test_the_author_supersedes_it_before_the_successor_he_may_not_see(team: Team) -> None:
    """Bob's new memory S2 goes where his view of the chain ends: M, S2, S.
    For him (and Cy) S2 is current and states what M did; for Ada, S is."""
    ada, bob, cy = (team.clients[h] for h in ("ada", "bob", "cy"))
    m, s = _hidden(team)
    s2 = bob.supersede(m.id, m.revision, "Robin leads Apollo still", reason="again").memory
    assert s2.superseded_by_id == ""

    for reader in (bob, cy):
        m_read, s2_read = reader.read([m.id, s2.id]).memories
        assert (m_read.superseded_by_id, s2_read.superseded_by_id) == (s2.id, "")
        # The chain as they read it ends at S2, with no trace of S.
        assert [(x.id, x.visible) for x in m_read.superseded_by] == [(s2.id, True)]
        assert list(s2_read.superseded_by) == []
        assert _lookup(reader) == _statements(s2.id)
        assert _recalled(reader) == {s2.id}
        assert _retired(s2_read) == [("Lisbon", False), ("Robin", False), ("leads", False)]

    m_ada, s2_ada, s_ada = ada.read([m.id, s2.id, s.id]).memories
    assert (m_ada.superseded_by_id, s2_ada.superseded_by_id) == (s2.id, s.id)
    assert [x.id for x in s_ada.supersedes] == [s2.id, m.id]
    assert [x.id for x in m_ada.superseded_by] == [s2.id, s.id]
    assert _retired(s2_ada) == [("Lisbon", True), ("Robin", True), ("leads", True)]
    assert _lookup(ada) == _statements(s.id)
    assert _recalled(ada) == {s.id}
    _refusals_for_whoever_sees_the_successor(team, s2.id)

    # Ada forgets S: S2 is current for everyone, stating what it carried.
    ada.forget(s.id, "mine was wrong")
    for reader in (ada, bob, cy):
        assert reader.read([s2.id]).memories[0].superseded_by_id == ""
        assert _lookup(reader) == _statements(s2.id)


def test_forgetting_the_new_memory_mends_the_chain(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    m, s = _hidden(team)
    s2 = bob.supersede(m.id, m.revision, "Robin leads Apollo still").memory
    bob.forget(s2.id, "said twice")
    (for_bob,) = bob.read([m.id]).memories
    assert for_bob.superseded_by_id == ""
    assert _lookup(bob) == _statements(m.id)
    assert ada.read([m.id]).memories[0].superseded_by_id == s.id
    assert _lookup(ada) == _statements(s.id)


def test_the_author_forgets_it_and_learns_nothing_of_the_successor(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    m, s = _hidden(team)
    forgotten = bob.forget(m.id, "not true", expected_revision=m.revision)
    assert forgotten.id == m.id
    err = _refused(lambda: bob.read([m.id]))
    assert err.code() == grpc.StatusCode.NOT_FOUND, err.details()
    (s_ada,) = ada.read([s.id]).memories
    assert (s_ada.superseded_by_id, list(s_ada.supersedes)) == ("", [])
    assert _lookup(ada) == _statements(s.id)


def _corrected_then_superseded(team: Team) -> tuple[Any, Any, Any]:
    """M, S, and S2: Bob corrects M (Lisbon to Porto), then supersedes it."""
    bob = team.clients["bob"]
    m, s = _hidden(team)
    corrected = bob.correct(m.id, m.revision, "moved", claims=_porto(m)).memory
    return m, s, bob.supersede(m.id, corrected.revision, "Robin in Porto").memory


def test_the_import_marks_what_these_changes_marked(stack: Stack, team: Team) -> None:
    """An archive holds retired_at, stated_at and the revisions, not the
    marks: mark_supersede_retirements (migration 0069) tells them as the
    correct and the supersede above wrote them."""
    m, _, s2 = _corrected_then_superseded(team)

    written = dbutil.query(stack, team.database_name, _MARKS)
    marked = {(r[1], r[2]) for r in written if r[3]}
    assert (m.id, "Porto") in marked and (s2.id, "Porto") in marked
    assert (m.id, "Lisbon") not in marked
    with psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as conn:
        for table in ("attribute_claim", "relation_claim", "entity_alias"):
            conn.execute(f"UPDATE {table} SET retired_by_supersede = false")
        conn.execute("SELECT mark_supersede_retirements()")
    assert dbutil.query(stack, team.database_name, _MARKS) == written


def test_the_chain_and_what_it_states_survive_an_export_and_import(
    stack: Stack, operator: Client, team: Team, tmp_path: Path
) -> None:
    m, s, s2 = _corrected_then_superseded(team)
    out = tmp_path / "archive"
    done = cli(stack, "export", "--workspace", team.slug, "--out", str(out))
    assert done.returncode == 0, done.stderr
    done = cli(stack, "import", str(out), "--as", f"copy-{uuid.uuid4().hex[:10]}", "--json")
    assert done.returncode == 0, done.stderr
    made = {m["handle"]: m["id"] for m in json.loads(done.stdout)["members"]}
    for handle, successors in (("ada", (s2.id, s.id)), ("bob", (s2.id, ""))):
        original = team.clients[handle]
        copy = Client(stack.gateway, operator.create_token(made[handle], "t").token)
        m_read, s2_read = copy.read([m.id, s2.id]).memories
        assert (m_read.superseded_by_id, s2_read.superseded_by_id) == successors, handle
        assert _lookup(copy) == _lookup(original), handle
        assert _retired(s2_read) == _retired(original.read([s2.id]).memories[0]), handle
