"""One entity's and one episode's timeline, paged, against the real stack: a
page reads about its own rows however many events its subject has had, and
paging gives exactly the events, order and page tokens of one plain ORDER BY
over every event of the subject the caller may see (tests/integration/
timeline_oracle.py), for several callers and purposes, forgotten memories and
a merged group among them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime

import psycopg
import pytest

from recallatron.vocabulary import MAX_TIMELINE_EVENTS
from recallatron_devkit.stack import Stack
from services.store.domain import entity_groups
from services.store.domain import timeline as tl
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS, Caller
from tests.conftest import Team
from tests.dbutil import workspace_url
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
    to itself; corrections and supersessions beside them."""
    ada, bob = team.members["ada"], team.members["bob"]
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        conn.execute(
            "INSERT INTO episode (id, title, started_at, ended_at, purposes, created_by)"
            " VALUES (%s, 'The long meeting', '2025-01-01', '2025-02-01', '{assist,audit}', %s)",
            (EPISODE, ada),
        )
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at, audience_member_id, episode_id)"
            " SELECT gen_random_uuid(), 'note', 'Entry ' || i, 'Nothing here.', 1, 'told',"
            "  CASE WHEN i %% 19 = 0 THEN '{audit}' ELSE '{assist}' END::purpose[],"
            "  CASE WHEN i %% 10 = 0 THEN %(bob)s ELSE %(ada)s END::uuid,"
            "  timestamptz '2025-01-01' + (i / 3) * interval '1 minute',"
            "  timestamptz '2025-01-01' + (i / 3) * interval '1 minute',"
            "  CASE WHEN i %% 10 = 0 THEN %(bob)s::uuid END,"
            "  CASE WHEN i %% 3 = 1 THEN %(episode)s::uuid END"
            " FROM generate_series(1, %(n)s) AS i",
            {"ada": ada, "bob": bob, "n": MEMORIES, "episode": EPISODE},
        )
        conn.execute(
            "INSERT INTO entity (id, name, name_key, created_at)"
            " SELECT gen_random_uuid(), n, lower(n), timestamptz '2024-12-01' + i * interval '1s'"
            " FROM unnest(ARRAY['Hub', 'Hub Two']) WITH ORDINALITY AS t(n, i)"
            " UNION ALL SELECT gen_random_uuid(), 'Entity ' || i, 'entity ' || i, now()"
            " FROM generate_series(1, 50) AS i"
        )
        conn.execute(
            "CREATE TEMP TABLE numbered AS"
            " SELECT id, created_at, substr(title, 7)::int AS i FROM memory"
        )
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
        conn.execute(
            "INSERT INTO memory_revision (memory_id, revision, action, changed_by, reason,"
            " changed_at)"
            " SELECT n.id, 2, 'correct', m.created_by,"
            "  CASE WHEN n.i % 2 = 0 THEN 'a typo' ELSE '' END, n.created_at + interval '1 hour'"
            " FROM numbered n JOIN memory m ON m.id = n.id WHERE n.i % 7 = 0"
            " UNION ALL"
            " SELECT n.id, 3, 'supersede', m.created_by, 'replaced',"
            "  n.created_at + interval '2 hours'"
            " FROM numbered n JOIN memory m ON m.id = n.id WHERE n.i % 11 = 0"
        )
        conn.execute(
            "UPDATE memory SET title = '', body = '',"
            " invalidated_at = created_at + interval '1 day'"
            " WHERE id IN (SELECT id FROM numbered WHERE i % 17 = 0)"
        )
        conn.execute(
            "INSERT INTO entity_merge (id, kept_id, merged_id, decided_by)"
            " SELECT gen_random_uuid(), k.id, m.id, %s FROM entity k, entity m"
            " WHERE k.name = 'Hub' AND m.name = 'Hub Two'",
            (ada,),
        )
        conn.execute("ANALYZE")


class _OnConnection(tl.TimelineStore):
    """The store's timeline run on one connection, in one open transaction set
    for the caller as the store sets it, so that pg_stat_xact_user_tables
    counts the rows each page read."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    @contextmanager
    def transaction(
        self, caller: Caller, settings: Mapping[str, str] | None = None
    ) -> Iterator[psycopg.Connection]:
        if settings:
            self.conn.execute(SET_LOCALS, (list(settings), list(settings.values())))
        yield self.conn


@contextmanager
def _as(stack: Stack, team: Team, member: str, purpose: str) -> Iterator[_OnConnection]:
    with psycopg.connect(workspace_url(stack, team.database_name), user=APP_ROLE) as conn:
        conn.execute(
            SET_LOCALS,
            (["recallatron.member_id", "recallatron.purpose"], [team.members[member], purpose]),
        )
        yield _OnConnection(conn)


def _reads(conn: psycopg.Connection) -> int:
    row = conn.execute(
        "SELECT sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))"
        " FROM pg_stat_xact_user_tables WHERE relname = ANY (%s)",
        (list(TABLES),),
    ).fetchone()
    return int(row[0] or 0) if row else 0


def _paged(
    store: _OnConnection,
    caller: Caller,
    entity: str | None,
    episode: str | None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> Iterator[tuple[list[Row], int, str]]:
    """Each page: its events, the rows it read, its token."""
    token = ""
    while True:
        before = _reads(store.conn)
        page = store.timeline(caller, entity, episode, start, end, token)
        read = _reads(store.conn) - before
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
        row = conn.execute("SELECT id FROM entity WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return str(row[0])


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
        with _as(stack, team, member, purpose) as store:
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
    with _as(stack, team, "ada", "assist") as store:
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
