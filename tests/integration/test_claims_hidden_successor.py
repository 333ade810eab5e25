"""A memory superseded by one the caller may not see reads to them as current
(design §4, migrations 0044, 0063), and so does what it states in the graph:
its claims, relations and aliases, which the supersede retired, are current
for exactly the callers who read the memory as current (migration 0068), in
lookup (by name and by alias), neighbors, timelines, recall's cards and read,
now and as of a time. Whoever sees the successor sees its carried copies
instead, once; a claim a correct replaced stays retired for everyone."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team, remember_robin

pytestmark = pytest.mark.integration

Stated = set[tuple[str, str]]


def _now() -> str:
    """A time strictly between the writes around it."""
    time.sleep(0.05)
    at = datetime.now(UTC).isoformat()
    time.sleep(0.05)
    return at


def _card(card: Any) -> tuple[Stated, Stated, Stated, list[str]]:
    """A card's attributes, relations and aliases, each with the memory that
    states it, and the memories that mention the entity."""
    return (
        {(f"{a.attribute}={a.value}", a.memory_id) for a in card.attributes},
        {(f"{r.predicate}:{r.other.name}", r.memory_id) for r in card.relations},
        {(a.alias, a.memory_id) for a in card.alias_claims},
        list(card.mentioned_by),
    )


def _lookup(client: Client, as_of: str | None = None) -> tuple[Stated, Stated, Stated, list[str]]:
    (card,) = client.lookup("Robin Goodwin", as_of=as_of).entities
    return _card(card)


def _by_alias(client: Client) -> list[str]:
    return [c.name for c in client.lookup("Robin").entities]


def _neighbors(client: Client, robin: str, as_of: str | None = None) -> Stated:
    edges = client.neighbors(robin, as_of=as_of).edges
    return {(f"{e.predicate}", e.memory_id) for e in edges}


def _timeline_claims(client: Client, robin: str = "") -> Stated:
    """The claim and relation events of Robin's timeline (of the whole
    workspace's, without an entity), with the memory that states each."""
    events = client.timeline(entity_id=robin).events
    return {(e.summary, e.memory_id) for e in events if e.kind in ("claim_start", "relation_start")}


def _recall_card(client: Client) -> tuple[Stated, Stated, Stated, list[str]]:
    (card,) = client.recall("Robin Goodwin", mode="lexical", skip_rerank=True).outcome.entities
    return _card(card)


def _statements(memory_id: str) -> tuple[Stated, Stated, Stated]:
    return (
        {("city=Lisbon", memory_id)},
        {("leads:Apollo", memory_id)},
        {("Robin", memory_id)},
    )


def test_a_superseded_memorys_claims_are_current_for_whoever_reads_it_as_current(
    team: Team,
) -> None:
    """Bob supersedes his workspace memory by one only he may see: Ada (the
    owner, who sees no member's private memory) and Cy read the old one as
    current, and the graph tells them what it states; Bob sees his
    successor's copies, never both."""
    bob = team.clients["bob"]
    old = remember_robin(bob, "From the kickoff.", audience_to="workspace").memory
    robin = next(m.entity_id for m in old.mentions if m.name == "Robin Goodwin")
    before = _now()
    new = bob.supersede(
        old.id, old.revision, "Robin leads Apollo", reason="kept to myself",
        audience_to=team.members["bob"],
    ).memory  # fmt: skip
    after = _now()

    city = ("Robin Goodwin: city = Lisbon", "Robin Goodwin leads Apollo")
    for handle in ("ada", "cy"):
        reader = team.clients[handle]
        assert reader.read([old.id]).memories[0].superseded_by_id == ""
        want = (*_statements(old.id), [old.id])
        assert _lookup(reader) == want, handle
        assert _lookup(reader, as_of=before) == want, handle
        assert _lookup(reader, as_of=after) == want, handle
        assert _by_alias(reader) == ["Robin Goodwin"], handle
        assert _neighbors(reader, robin) == {("leads", old.id)}, handle
        assert _neighbors(reader, robin, as_of=after) == {("leads", old.id)}, handle
        assert _timeline_claims(reader, robin) == {(c, old.id) for c in city}, handle
        assert _timeline_claims(reader) == {(c, old.id) for c in city}, handle
        assert _recall_card(reader) == want, handle
        # Read says the same of the memory's own claims: none retired.
        read = reader.read([old.id]).memories[0]
        retired = [c.HasField("retired_at") for c in (*read.claims, *read.relations, *read.aliases)]
        assert retired == [False, False, False], handle

    # Bob sees the successor: its copies are current, the old memory's
    # retired since the supersede (current before it).
    assert _lookup(bob) == (*_statements(new.id), [new.id])
    assert _lookup(bob, as_of=before) == (*_statements(old.id), [old.id])
    assert _lookup(bob, as_of=after) == (*_statements(new.id), [new.id])
    assert _by_alias(bob) == ["Robin Goodwin"]
    assert _neighbors(bob, robin) == {("leads", new.id)}
    assert _neighbors(bob, robin, as_of=before) == {("leads", old.id)}
    assert _timeline_claims(bob, robin) == {(c, new.id) for c in city}
    assert _timeline_claims(bob) == {(c, new.id) for c in city}
    assert _recall_card(bob) == (*_statements(new.id), [new.id])
    read = bob.read([old.id]).memories[0]
    retired = [c.HasField("retired_at") for c in (*read.claims, *read.relations, *read.aliases)]
    assert retired == [True, True, True]


def test_a_claim_a_correct_replaced_stays_retired_for_everyone(team: Team) -> None:
    """Lisbon was corrected to Porto before Bob's private supersede: Ada reads
    the memory as current and sees Porto, never Lisbon again; as of a time
    before the correct, Lisbon."""
    bob = team.clients["bob"]
    old = remember_robin(bob, "From the kickoff.", audience_to="workspace").memory
    robin = next(m.entity_id for m in old.mentions if m.name == "Robin Goodwin")
    before = _now()
    porto = [{"entity": {"entity_id": robin}, "attribute": "city", "value": "Porto"}]
    corrected = bob.correct(old.id, old.revision, "moved", claims=porto).memory
    new = bob.supersede(
        old.id, corrected.revision, "Robin in Porto", audience_to=team.members["bob"]
    ).memory

    for handle in ("ada", "cy"):
        reader = team.clients[handle]
        attributes, relations, aliases, _ = _lookup(reader)
        assert (attributes, relations, aliases) == ({("city=Porto", old.id)}, set(), set())
        assert _by_alias(reader) == []
        assert _neighbors(reader, robin) == set()
        assert _timeline_claims(reader, robin) == {("Robin Goodwin: city = Porto", old.id)}
        assert _lookup(reader, as_of=before)[0] == {("city=Lisbon", old.id)}
        claims = reader.read([old.id]).memories[0].claims
        assert sorted((c.value, c.HasField("retired_at")) for c in claims) == [
            ("Lisbon", True),
            ("Porto", False),
        ]
    assert _lookup(bob)[0] == {("city=Porto", new.id)}
    assert _timeline_claims(bob, robin) == {("Robin Goodwin: city = Porto", new.id)}


_MARKS = """
SELECT 'attribute_claim', memory_id::text, value, retired_by_supersede FROM attribute_claim
UNION ALL SELECT 'relation_claim', memory_id::text, predicate, retired_by_supersede
FROM relation_claim
UNION ALL SELECT 'entity_alias', memory_id::text, alias, retired_by_supersede FROM entity_alias
ORDER BY 1, 2, 3
"""


def test_rows_written_before_the_column_are_marked_as_the_supersede_marks_them(
    stack: Stack, team: Team
) -> None:
    """Migration 0068 (and the import, whose archive holds no column) tells
    what a supersede retired from the times: a superseded memory's statements
    retired at its latest supersede; one a correct retired before stays
    unmarked, and so does every statement of a memory current again."""
    bob = team.clients["bob"]
    kept = remember_robin(bob, "Kept.", audience_to="workspace").memory
    robin = next(m.entity_id for m in kept.mentions if m.name == "Robin Goodwin")
    porto = [{"entity": {"entity_id": robin}, "attribute": "city", "value": "Porto"}]
    corrected = bob.correct(kept.id, kept.revision, "moved", claims=porto).memory
    bob.supersede(kept.id, corrected.revision, "Robin in Porto", audience_to=team.members["bob"])
    revived = remember_robin(bob, "Revived.", audience_to="workspace").memory
    gone = bob.supersede(revived.id, revived.revision, "Robin, again").memory
    bob.forget(gone.id, "said in error")

    written = dbutil.query(stack, team.database_name, _MARKS)
    assert {(r[1], r[2]) for r in written if r[3]} == {(kept.id, "Porto")}
    with psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as conn:
        for table in ("attribute_claim", "relation_claim", "entity_alias"):
            conn.execute(f"UPDATE {table} SET retired_by_supersede = false")
        conn.execute("SELECT mark_supersede_retirements()")
    assert dbutil.query(stack, team.database_name, _MARKS) == written
