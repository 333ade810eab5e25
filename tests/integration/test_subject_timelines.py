"""One entity's and one episode's timeline, paged, against the real stack: a
page reads about its own rows however many events its subject has had, and
paging gives exactly the events, order and page tokens of one plain ORDER BY
over every event of the subject the caller may see (tests/integration/
timeline_oracle.py), for several callers and purposes, forgotten memories and
a merged group among them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest

from recallatron.vocabulary import MAX_TIMELINE_EVENTS
from recallatron_devkit.stack import Stack
from services.store.domain import entity_groups
from services.store.domain import timeline as tl
from services.store.infrastructure.db import Caller
from tests.conftest import Team
from tests.dbutil import workspace_url
from tests.integration import bulk_workspace as bulk
from tests.integration import timeline_oracle
from tests.integration.timeline_oracle import Row

pytestmark = pytest.mark.integration

MEMORIES = 3_000
EPISODE = "00000000-0000-4000-8000-00000000e901"
# The tables a page's events come from, whose rows a page may read.
TABLES = (
    "memory",
    "attribute_claim",
    "relation_claim",
    "memory_revision",
    "mention_change",
    "entity",
    "mention",
    "episode",
)
# A page shows at most MAX_TIMELINE_EVENTS events; it may read a few rows for
# each (its memory's eligibility, an entity's name, each kind's next row), for
# each entity of a group.
PAGE_READS = 10 * MAX_TIMELINE_EVENTS
# (member, purpose): who sees most memories, and who sees few.
CALLERS = (("ada", "assist"), ("bob", "assist"), ("ada", "audit"))


def _seed(stack: Stack, team: Team) -> None:
    """Thousands of memories written directly, three to an instant (ties): one
    in ten private to bob, one in nineteen for audit only, one in seventeen
    forgotten, one in three in one episode. Every memory mentions the entity
    Hub or (one in five) Hub Two, which a person merged into Hub, some both,
    and one of fifty others; each states a claim about the one it mentions
    (some retired, some ending, half from their memory's time) and one about
    its other; relations from and to Hub, between Hub and Hub Two and from Hub
    to itself; corrections and supersessions beside them; some mentions
    from after their memory (a correction's), of one or both of Hub's group."""
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        conn.execute(
            "INSERT INTO episode (id, title, started_at, ended_at, purposes, created_by)"
            " VALUES (%s, 'The long meeting', '2025-01-01', '2025-02-01', '{assist,audit}', %s)",
            (EPISODE, team.members["ada"]),
        )
        bulk.insert_memories(conn, team, MEMORIES, EPISODE)
        conn.execute(
            "INSERT INTO entity (id, name, name_key, created_at)"
            " SELECT gen_random_uuid(), n, lower(n), timestamptz '2024-12-01' + i * interval '1s'"
            " FROM unnest(ARRAY['Hub', 'Hub Two']) WITH ORDINALITY AS t(n, i)"
            " UNION ALL SELECT gen_random_uuid(), 'Entity ' || i, 'entity ' || i, now()"
            " FROM generate_series(1, 50) AS i"
        )
        bulk.number_by_title(conn)
        conn.execute(
            "CREATE TEMP TABLE named AS SELECT n.id AS memory_id, n.i, n.created_at,"
            " (SELECT id FROM entity WHERE name = CASE WHEN n.i % 5 = 0 THEN 'Hub Two'"
            "  ELSE 'Hub' END) AS hub,"
            " (SELECT id FROM entity WHERE name = 'Entity ' || (1 + n.i % 50)) AS other"
            " FROM numbered n"
        )
        conn.execute(
            "INSERT INTO mention (memory_id, entity_id)"
            " SELECT memory_id, hub FROM named UNION SELECT memory_id, other FROM named"
            " UNION SELECT memory_id, (SELECT id FROM entity WHERE name = 'Hub') FROM named"
            " WHERE i % 15 = 0"
        )
        # Some mentions a later correction made (mentioned_at): all of one in
        # eleven memories'; of a memory naming Hub and Hub Two, one of them or
        # each at its own time.
        conn.execute(
            "UPDATE mention mn SET mentioned_at = n.created_at + (1 + n.i % 4) * interval '1 hour'"
            " FROM named n WHERE n.memory_id = mn.memory_id AND (n.i % 11 = 3"
            "  OR (n.i % 30 = 0 AND mn.entity_id = n.hub)"
            "  OR (n.i % 30 = 15 AND mn.entity_id <> n.hub))"
        )
        conn.execute(
            "UPDATE mention mn SET mentioned_at = n.created_at + interval '30 minutes'"
            " FROM named n WHERE n.memory_id = mn.memory_id AND n.i % 30 = 15"
            " AND mn.entity_id = n.hub"
        )
        conn.execute(
            "INSERT INTO attribute_claim (id, memory_id, entity_id, attribute, value,"
            " valid_from, valid_until, stated_at, retired_at)"
            " SELECT gen_random_uuid(), memory_id, e, 'step', 'value ' || i,"
            "  CASE WHEN i % 2 = 1 THEN created_at - (i % 7) * interval '1 day' END,"
            "  CASE WHEN i % 5 = 0 THEN created_at + interval '3 days' END, created_at,"
            "  CASE WHEN i % 13 = 0 THEN created_at + interval '1 hour' END"
            " FROM named, LATERAL (VALUES (hub), (other)) AS t(e)"
        )
        conn.execute(
            "INSERT INTO relation_claim (id, memory_id, subject_id, predicate, object_id,"
            " valid_from, valid_until, stated_at)"
            " SELECT gen_random_uuid(), memory_id, s, 'involves', o,"
            "  CASE WHEN i % 2 = 0 THEN created_at - interval '1 day' END,"
            "  CASE WHEN i % 4 = 0 THEN created_at + interval '2 days' END, created_at"
            " FROM named, LATERAL (VALUES (hub, other, i % 3 = 0), (other, hub, i % 4 = 1),"
            "  ((SELECT id FROM entity WHERE name = 'Hub'), hub, i % 15 = 0),"
            "  (hub, hub, i % 97 = 0)) AS t(s, o, stated) WHERE stated"
        )
        bulk.insert_revisions(conn)
        bulk.forget_some(conn)
        conn.execute(
            "INSERT INTO entity_merge (id, kept_id, merged_id, decided_by)"
            " SELECT gen_random_uuid(), k.id, m.id, %s FROM entity k, entity m"
            " WHERE k.name = 'Hub' AND m.name = 'Hub Two'",
            (team.members["ada"],),
        )
        conn.execute("ANALYZE")


def _paged(
    store: bulk.OnConnection,
    caller: Caller,
    entity: str | None,
    episode: str | None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> Iterator[tuple[list[Row], int, str]]:
    """Each page: its events, the rows it read, its token."""
    token = ""
    while True:
        before = bulk.rows_read(store.conn, TABLES)
        page = store.timeline(caller, entity, episode, start, end, token)
        read = bulk.rows_read(store.conn, TABLES) - before
        events = [
            timeline_oracle.row(e.at, e.kind, e.memory_id, e.entity_id, e.summary, e.key)
            for e in page.events
        ]
        yield events, read, page.next_page_token
        token = page.next_page_token
        if not token:
            return


def _entity(stack: Stack, team: Team, name: str) -> str:
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        return bulk.entity_id(conn, name)


@pytest.mark.parametrize("subject", ["entity", "episode"])
def test_a_subject_timeline_page_reads_its_own_rows_and_pages_as_one_order(
    stack: Stack, team: Team, subject: str
) -> None:
    """Paged through, an entity's timeline (its merged group's) and an
    episode's give each caller exactly the sequence one ORDER BY over every
    event of the subject gives, a full page at a time; no page of a caller
    who sees most of it reads more than a few rows per event it shows (per
    member of a group), where each page read every event of the subject."""
    _seed(stack, team)
    hub = _entity(stack, team, "Hub")
    for member, purpose in CALLERS:
        caller = Caller(team.workspace_id, team.members[member], purpose)
        with bulk.as_member(stack, team, member, purpose) as conn:
            store = bulk.OnConnection(conn)
            if subject == "entity":
                group = entity_groups.groups(store.conn, [hub])[hub]
                assert len(group.ids) == 2
                everything = timeline_oracle.every_event(store.conn, group.ids, hub)
                bound = PAGE_READS * len(group.ids)
            else:
                everything = timeline_oracle.every_event(store.conn, episode=EPISODE)
                bound = PAGE_READS
            entity, episode = (hub, None) if subject == "entity" else (None, EPISODE)
            paged: list[Row] = []
            for number, (events, read, token) in enumerate(_paged(store, caller, entity, episode)):
                if purpose == "assist":
                    assert read <= bound, (
                        f"{member}'s page {number} of {subject} read {read} rows"
                        f" for {len(events)} events of {len(everything)}"
                    )
                assert len(events) == MAX_TIMELINE_EVENTS or not token
                paged += events
        assert len(everything) > (10 if purpose == "assist" else 1) * MAX_TIMELINE_EVENTS
        assert paged == everything, (member, purpose)
        if member == "ada" and purpose == "assist":
            assert {r[1] for r in everything} == set(tl.KINDS)


def test_a_window_of_an_entity_timeline_pages_as_its_part_of_the_order(
    stack: Stack, team: Team
) -> None:
    """From (inclusive) and to (exclusive) page through exactly their part of
    the one order, and the gateway answers the same first pages."""
    _seed(stack, team)
    hub = _entity(stack, team, "Hub")
    caller = Caller(team.workspace_id, team.members["ada"], "assist")
    with bulk.as_member(stack, team, "ada") as conn:
        store = bulk.OnConnection(conn)
        group = entity_groups.groups(store.conn, [hub])[hub]
        everything = timeline_oracle.every_event(store.conn, group.ids, hub)
        start, end = everything[1_000][0], everything[4_000][0]
        window = timeline_oracle.every_event(store.conn, group.ids, hub, None, start, end)
        assert window == [r for r in everything if start <= r[0] < end]
        paged = [r for events, _, _ in _paged(store, caller, hub, None, start, end) for r in events]
        assert paged == window
    ada = team.clients["ada"]
    first = ada.timeline(entity_id=hub)
    second = ada.timeline(entity_id=hub, page_token=first.next_page_token)
    shown = [
        (e.kind, e.memory_id, e.entity_id or None, e.summary)
        for e in [*first.events, *second.events]
    ]
    assert shown == [(r[1], r[2], r[3], r[4]) for r in everything[: 2 * MAX_TIMELINE_EVENTS]]


def test_a_mention_a_later_correction_added_is_on_the_timeline_from_the_correction(
    team: Team,
) -> None:
    """A correct whose claims name a known entity in an older memory makes
    that memory mention it from then (mention.mentioned_at): the entity's
    timeline shows the memory's event at the correction, not at the memory's
    creation, before which the memory did not mention it; a window from the
    correction holds it."""
    ada = team.clients["ada"]
    kai = ada.remember("Kai", "Kai is here.", audience_to="workspace", mention_names=["Kai"]).memory
    plain = ada.remember("A note", "Nothing named yet.", audience_to="workspace").memory
    kai_id = ada.lookup("Kai").entities[0].id
    time.sleep(0.05)
    ada.correct(
        plain.id,
        plain.revision,
        "named Kai",
        claims=[{"entity": {"entity_id": kai_id}, "attribute": "role", "value": "host"}],
    )
    events = ada.timeline(entity_id=kai_id).events
    shown = [(e.kind, e.memory_id) for e in events]
    correction = next(e for e in events if e.kind == "correction")
    noted = next(e for e in events if e.kind == "memory" and e.memory_id == plain.id)
    assert noted.at.ToDatetime() == correction.at.ToDatetime(), (
        f"the note's memory event at {noted.at.ToDatetime()}, its mention since the correction"
        f" at {correction.at.ToDatetime()}: {shown}"
    )
    assert shown[:2] == [("memory", kai.id), ("memory", plain.id)]
    since = correction.at.ToDatetime().replace(tzinfo=UTC).isoformat()
    later = [(e.kind, e.memory_id) for e in ada.timeline(entity_id=kai_id, start=since).events]
    assert ("memory", plain.id) in later


def test_a_change_before_a_memory_mentioned_an_entity_is_not_on_its_timeline(
    team: Team,
) -> None:
    """A note corrected once, then corrected to name Kai: Kai's timeline
    holds the memory from the second correction on, so the first, made
    before the note named Kai, is not among Kai's events (the note's own
    timeline, the workspace's, keeps both)."""
    ada = team.clients["ada"]
    ada.remember("Kai", "Kai is here.", audience_to="workspace", mention_names=["Kai"])
    plain = ada.remember("A note", "Nothing named yet.", audience_to="workspace").memory
    kai_id = ada.lookup("Kai").entities[0].id
    typo = ada.correct(plain.id, plain.revision, "a typo", body="Nothing named, yet.").memory
    ada.correct(
        plain.id,
        typo.revision,
        "named Kai",
        claims=[{"entity": {"entity_id": kai_id}, "attribute": "role", "value": "host"}],
    )
    shown = [(e.kind, e.summary) for e in ada.timeline(entity_id=kai_id).events]
    assert ("correction", "corrected to revision 2: a typo") not in shown, shown
    assert ("correction", "corrected to revision 3: named Kai") in shown
    everything = [(e.kind, e.summary) for e in ada.timeline().events]
    assert ("correction", "corrected to revision 2: a typo") in everything
