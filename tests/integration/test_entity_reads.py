"""Reading an entity mentioned by thousands of memories, against the real
stack: whether it exists, its card (lookup, recall's cards) and a neighbors
walk from it read about what they answer, not every memory the caller may see
nor the entity's whole life, and answer exactly what each caller may see
(checked against the eligibility rule applied by hand, for several callers,
purposes and times, with forgotten, private and superseded memories)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from recallatron.vocabulary import ANSWER_BUDGET_BYTES, MAX_CARD_ITEMS, MAX_NEIGHBOR_EDGES
from recallatron_devkit.stack import Stack
from services.store.domain import graph, graph_cards, graph_traversal
from services.store.infrastructure.db import GENERIC_PLANS, Caller
from services.store.sql import graph_queries as gq
from tests import dbutil
from tests.conftest import Team
from tests.integration import bulk_workspace as bulk

pytestmark = pytest.mark.integration

MEMORIES = 6_000
AS_OF = datetime(2025, 1, 1, 12, tzinfo=UTC)
TABLES = ("memory", "mention", "entity", "entity_alias", "attribute_claim", "relation_claim")
# A card shows at most MAX_CARD_ITEMS of each of its four lists; it may read a
# few rows for each (the row, its memory's eligibility, the other end of a
# relation) and each list's next one.
CARD_READS = 4 * 4 * MAX_CARD_ITEMS
# A hop walks both ends of the frontier's relations to the edge cap.
NEIGHBOR_READS = 8 * MAX_NEIGHBOR_EDGES
# (member, purpose): who sees most, who sees few, who sees nothing.
CALLERS = (("ada", "assist"), ("bob", "assist"), ("ada", "audit"), ("bob", "personalize"))
# The eligibility rule (design §4) by hand, for memory m.
_ELIGIBLE = """
m.invalidated_at IS NULL AND (m.audience_member_id IS NULL OR m.audience_member_id = %(member)s)
AND %(purpose)s::purpose = ANY (m.purposes)"""
_CURRENT = """
(%(history)s OR (x.stated_at <= %(at)s AND (x.retired_at IS NULL OR x.retired_at > %(at)s)
                 AND (x.valid_from IS NULL OR x.valid_from <= %(at)s)
                 AND (x.valid_until IS NULL OR x.valid_until > %(at)s)))"""
# A memory along m's chain of successors that the caller may see: m is then
# superseded for them, else it reads to them as current (design §4).
_SUCCESSOR_SEEN = f"""
WITH RECURSIVE chain (id) AS (
    SELECT m.superseded_by_id
    UNION ALL
    SELECT s.superseded_by_id FROM chain c JOIN memory s ON s.id = c.id
    WHERE s.superseded_by_id IS NOT NULL
)
SELECT 1 FROM chain c JOIN memory s ON s.id = c.id WHERE {_ELIGIBLE.replace("m.", "s.")}"""
_BY_HAND = {
    "entities": f"""
SELECT DISTINCT mn.entity_id FROM mention mn JOIN memory m ON m.id = mn.memory_id
WHERE {_ELIGIBLE}""",
    "attributes": f"""
SELECT x.attribute, x.value, x.memory_id::text, x.stated_at FROM attribute_claim x
JOIN memory m ON m.id = x.memory_id
WHERE x.entity_id = %(entity)s AND {_ELIGIBLE} AND {_CURRENT}
ORDER BY x.stated_at DESC, x.attribute, x.id""",
    "relations": f"""
SELECT x.predicate, x.direction, x.other::text, x.memory_id::text, x.stated_at FROM (
    SELECT r.*, 'outgoing' AS direction, r.object_id AS other FROM relation_claim r
    WHERE r.subject_id = %(entity)s
    UNION ALL
    SELECT r.*, 'incoming', r.subject_id FROM relation_claim r WHERE r.object_id = %(entity)s
) x JOIN memory m ON m.id = x.memory_id
WHERE {_ELIGIBLE} AND {_CURRENT}
ORDER BY x.stated_at DESC, x.predicate, x.id""",
    "aliases": f"""
SELECT x.alias FROM entity_alias x JOIN memory m ON m.id = x.memory_id
WHERE x.entity_id = %(entity)s AND {_ELIGIBLE}
  AND (%(history)s OR (x.stated_at <= %(at)s AND (x.retired_at IS NULL OR x.retired_at > %(at)s)))
ORDER BY x.stated_at DESC, x.alias, x.id""",
    "mentioned_by": f"""
SELECT m.id::text FROM mention mn JOIN memory m ON m.id = mn.memory_id
WHERE mn.entity_id = %(entity)s AND {_ELIGIBLE}
  AND (%(history)s OR (m.created_at <= %(at)s
       AND (m.superseded_by_id IS NULL
            OR (SELECT max(r.changed_at) FROM memory_revision r
                WHERE r.memory_id = m.id AND r.action = 'supersede') > %(at)s
            OR NOT EXISTS ({_SUCCESSOR_SEEN}))))
ORDER BY m.created_at DESC, m.id""",
}
# Each hop as neighbors asked for it before its walks: every relation of the
# frontier, sorted.
_EDGES_BEFORE = """
    SELECT r.id, r.subject_id, r.predicate, r.object_id, r.valid_from, r.valid_until,
           r.confidence, r.memory_id, r.stated_at, r.retired_at
    FROM relation_claim r
    WHERE r.{end} = ANY(%(frontier)s::uuid[])
      AND (cardinality(%(predicates)s::text[]) = 0 OR r.predicate = ANY(%(predicates)s::text[]))
      AND (%(history)s OR (r.stated_at <= %(at)s AND (r.retired_at IS NULL OR r.retired_at > %(at)s)
           AND (r.valid_from IS NULL OR r.valid_from <= %(at)s)
           AND (r.valid_until IS NULL OR r.valid_until > %(at)s)))"""
NEIGHBOR_EDGES_BEFORE = f"""
SELECT * FROM ({_EDGES_BEFORE.format(end="subject_id")}
    UNION{_EDGES_BEFORE.format(end="object_id")}
) edges
WHERE NOT (id = ANY(%(seen)s::uuid[]))
ORDER BY stated_at DESC, id
LIMIT %(limit)s
"""


def _seed(stack: Stack, team: Team) -> None:
    """Thousands of memories written directly, three to an instant: one in
    ten private to bob, one in nineteen for audit only, one in seventeen
    forgotten, one in eleven superseded two hours on. Three in four mention
    Hub, each stating a claim about it (some retired, some ending, some
    starting before), every second a relation from it, every third one to it,
    every fifth an alias of it (some retired); every memory mentions one of
    fifty others and states a claim about it; bob's private ones mention a
    secret of his."""
    with psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as conn:
        bulk.insert_memories(conn, team, MEMORIES)
        conn.execute(
            "INSERT INTO entity (id, name, name_key)"
            " SELECT gen_random_uuid(), n, lower(n)"
            " FROM unnest(ARRAY['Hub', 'Bob''s secret']) AS n"
            " UNION ALL SELECT gen_random_uuid(), 'Entity ' || i, 'entity ' || i"
            " FROM generate_series(1, 50) AS i"
        )
        bulk.number_by_title(conn)
        conn.execute(
            "CREATE TEMP TABLE named AS SELECT n.id AS memory_id, n.created_at, n.i,"
            " (SELECT id FROM entity WHERE name = 'Hub') AS hub,"
            " (SELECT id FROM entity WHERE name = 'Entity ' || (1 + n.i % 50)) AS other"
            " FROM numbered n"
        )
        conn.execute(
            "INSERT INTO mention (memory_id, entity_id)"
            " SELECT memory_id, hub FROM named WHERE i % 4 <> 0"
            " UNION ALL SELECT memory_id, other FROM named"
            " UNION ALL SELECT memory_id, (SELECT id FROM entity WHERE name = 'Bob''s secret')"
            " FROM named WHERE i % 10 = 0"
        )
        conn.execute(
            "INSERT INTO attribute_claim (id, memory_id, entity_id, attribute, value,"
            " valid_from, valid_until, stated_at, retired_at)"
            " SELECT gen_random_uuid(), memory_id, e, 'step', 'value ' || i,"
            "  CASE WHEN i % 2 = 1 THEN created_at - (i % 7) * interval '1 day' END,"
            "  CASE WHEN i % 5 = 0 THEN created_at + interval '3 hours' END, created_at,"
            "  CASE WHEN i % 13 = 0 THEN created_at + interval '1 hour' END"
            " FROM named, LATERAL (VALUES (hub, i % 4 <> 0), (other, true)) AS t(e, stated)"
            " WHERE stated"
        )
        conn.execute(
            "INSERT INTO relation_claim (id, memory_id, subject_id, predicate, object_id,"
            " valid_from, valid_until, stated_at, retired_at)"
            " SELECT gen_random_uuid(), memory_id, s, p, o,"
            "  CASE WHEN i % 2 = 0 THEN created_at - interval '1 day' END,"
            "  CASE WHEN i % 8 = 0 THEN created_at + interval '2 hours' END, created_at,"
            "  CASE WHEN i % 23 = 0 THEN created_at + interval '1 hour' END"
            " FROM named, LATERAL (VALUES (hub, 'leads', other, i % 2 = 0),"
            "  (other, 'reports_to', hub, i % 3 = 0)) AS t(s, p, o, stated)"
            " WHERE stated AND i % 4 <> 0"
        )
        conn.execute(
            "INSERT INTO entity_alias (id, memory_id, entity_id, alias, alias_key, stated_at,"
            " retired_at)"
            " SELECT gen_random_uuid(), memory_id, hub, 'Hub ' || i, 'hub ' || i, created_at,"
            "  CASE WHEN i % 15 = 0 THEN created_at + interval '1 hour' END"
            " FROM named WHERE i % 5 = 0 AND i % 4 <> 0"
        )
        conn.execute(
            "UPDATE memory m SET superseded_by_id = n.memory_id, revision = 2"
            " FROM named o JOIN named n ON n.i = o.i + 1"
            " WHERE m.id = o.memory_id AND o.i % 11 = 0"
        )
        conn.execute(
            "INSERT INTO memory_revision (memory_id, revision, action, changed_by, reason,"
            " changed_at)"
            " SELECT m.id, 2, 'supersede', m.created_by, 'replaced',"
            "  m.created_at + interval '2 hours'"
            " FROM memory m WHERE m.superseded_by_id IS NOT NULL"
        )
        bulk.forget_some(conn)
        conn.execute("ANALYZE")


def _store_transaction(
    stack: Stack, team: Team, member: str, purpose: str, generic: bool
) -> AbstractContextManager[psycopg.Connection]:
    """A transaction as the store opens one for the caller: lookup and
    recall's cards with generic plans, neighbors without."""
    caller = Caller(team.workspace_id, team.members[member], purpose)
    return dbutil.store_transaction(stack, caller, GENERIC_PLANS if generic else None)


def _hub(stack: Stack, team: Team) -> str:
    with psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as conn:
        return bulk.entity_id(conn, "Hub")


def _shown(card: graph.EntityCard) -> int:
    return len(card.attributes) + len(card.relations) + len(card.aliases) + len(card.mentioned_by)


def test_an_often_mentioned_entity_costs_a_read_what_it_answers(stack: Stack, team: Team) -> None:
    """Whether the entity exists reads a few rows; its card, as lookup and
    recall read it, a few per item it shows; a neighbors walk from it a few
    per edge: before, each of them read every memory the caller may see, and
    a card every claim, relation and mention the entity ever had."""
    _seed(stack, team)
    hub = _hub(stack, team)
    held = sum(
        int(dbutil.query(stack, team.database_name, f"SELECT count(*) FROM {t}")[0][0])
        for t in TABLES
    )
    read: dict[str, int] = {}
    with _store_transaction(stack, team, "ada", "assist", generic=True) as conn:
        before = bulk.rows_read(conn, TABLES)
        assert conn.execute(gq.ENTITY_VISIBLE, (hub,)).fetchone() is not None
        read["exists"] = bulk.rows_read(conn, TABLES) - before

        before = bulk.rows_read(conn, TABLES)
        statement, params = graph.lookup_statement("hub", None, False, False)
        found = conn.execute(statement, params).fetchall()
        (card,), more = graph_cards.card_page(conn, found, params, 0, ANSWER_BUDGET_BYTES)
        read["lookup"] = bulk.rows_read(conn, TABLES) - before
        assert not more and card.truncated and _shown(card) == 4 * MAX_CARD_ITEMS

        before = bulk.rows_read(conn, TABLES)
        named = {"keys": ["about", "hub", "tell"], "at": datetime.now(UTC), "history": False}
        cards = graph_cards.entity_cards(
            conn, conn.execute(gq.NAMED, {**named, "limit": 5}).fetchall(), named
        )
        read["recall's card"] = bulk.rows_read(conn, TABLES) - before
        assert cards == [card]
    with _store_transaction(stack, team, "ada", "assist", generic=False) as conn:
        before = bulk.rows_read(conn, TABLES)
        walked = graph_traversal.neighborhood(conn, hub, 2, [], datetime.now(UTC))
        read["neighbors"] = bulk.rows_read(conn, TABLES) - before
        assert walked.truncated and len(walked.edges) == MAX_NEIGHBOR_EDGES
    bounds = {"exists": 10, "lookup": CARD_READS, "recall's card": CARD_READS}
    bounds["neighbors"] = NEIGHBOR_READS
    assert all(read[k] <= bounds[k] for k in read), f"rows read {read} of {held} held"
    assert held > 8 * CARD_READS


def _by_hand(conn: psycopg.Connection, list_: str, **params: Any) -> list[Any]:
    rows = conn.execute(_BY_HAND[list_], params).fetchall()
    return [r[0] if len(r) == 1 else tuple(r) for r in rows]


def test_cards_and_neighbors_answer_exactly_what_each_caller_may_see(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For each caller, purpose and time (now, a time past, the history):
    the entities it may see are those a memory it may see mentions; each card
    lists the claims, relations, aliases and mentioning memories the rule
    admits, in the card's order, cut at the cap; a neighbors walk answers as
    the statement it ran before, reading every relation of each hop."""
    _seed(stack, team)
    hub = _hub(stack, team)
    times = ((datetime.now(UTC), False), (AS_OF, False), (datetime.now(UTC), True))
    allowed: dict[tuple[str, str], set[str]] = {}
    with psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as admin:
        secret = bulk.entity_id(admin, "Bob's secret")
        for member, purpose in CALLERS:
            who = {"member": team.members[member], "purpose": purpose}
            allowed[member, purpose] = {str(i) for i in _by_hand(admin, "entities", **who)}
            with _store_transaction(stack, team, member, purpose, generic=True) as conn:
                visible = {str(r[0]) for r in conn.execute("SELECT id FROM entity").fetchall()}
                assert visible == allowed[member, purpose], (member, purpose)
                found = conn.execute(gq.ENTITIES, (sorted(visible),)).fetchall()
                for at, history in times:
                    when = {"at": at, "history": history}
                    for card in graph_cards.entity_cards(conn, found, when):
                        lists = {
                            name: _by_hand(admin, name, entity=card.entity.id, **who, **when)
                            for name in ("attributes", "relations", "aliases", "mentioned_by")
                        }
                        shown = {
                            "attributes": [
                                (a.attribute, a.value, a.memory_id, a.stated_at)
                                for a in card.attributes
                            ],
                            "relations": [
                                (r.predicate, r.direction, r.other.id, r.memory_id, r.stated_at)
                                for r in card.relations
                            ],
                            "aliases": [a.alias for a in card.aliases],
                            "mentioned_by": card.mentioned_by,
                        }
                        for name, rows in lists.items():
                            assert shown[name] == rows[:MAX_CARD_ITEMS], (
                                member, purpose, at, history, card.entity.name, name
                            )  # fmt: skip
                        cut = any(len(rows) > MAX_CARD_ITEMS for rows in lists.values())
                        assert card.truncated == cut
            if hub not in visible:
                continue
            for hops in (1, 2):
                with _store_transaction(stack, team, member, purpose, generic=False) as conn:
                    now = datetime.now(UTC)
                    walked = graph_traversal.neighborhood(conn, hub, hops, [], now)
                    with monkeypatch.context() as patched:
                        patched.setattr(gq, "NEIGHBOR_EDGES", NEIGHBOR_EDGES_BEFORE)
                        before = graph_traversal.neighborhood(conn, hub, hops, [], now)
                    assert walked == before, (member, purpose, hops)
    # Bob's secret is his alone; a purpose no memory has sees nothing.
    assert secret in allowed["bob", "assist"] and secret not in allowed["ada", "assist"]
    assert not allowed["bob", "personalize"] and hub in allowed["ada", "audit"]
