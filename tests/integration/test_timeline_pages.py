"""The whole workspace's timeline, paged, against the real stack: a page reads
about its own rows however large the workspace and however deep the page,
and paging gives exactly the events, order and page tokens of one plain
ORDER BY over every event the caller may see."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest

from recallatron.vocabulary import MAX_TIMELINE_EVENTS
from recallatron_devkit.stack import Stack
from services.store.domain import page_tokens
from services.store.domain import timeline as tl
from services.store.infrastructure.db import Caller
from tests.conftest import Team
from tests.dbutil import workspace_url
from tests.integration import bulk_workspace as bulk
from tests.integration import timeline_oracle

pytestmark = pytest.mark.integration

MEMORIES = 2_000
# The tables a page's events come from, whose rows a page may read.
TABLES = ("memory", "attribute_claim", "relation_claim", "memory_revision", "entity", "mention")
# A page shows at most MAX_TIMELINE_EVENTS events; it may read a few rows for
# each (its memory's eligibility, an entity's name, each kind's next row).
PAGE_READS = 10 * MAX_TIMELINE_EVENTS

Row = tuple[datetime, str, str, str | None, str, str]


def _seed(stack: Stack, team: Team) -> None:
    """A workspace of thousands of events, written directly: memories three to
    an instant (ties), one in ten private to bob, some forgotten, some for
    another purpose; each mentions one entity every memory mentions and one of
    a hundred others; each states a claim (some retired, some ending, half
    with no valid_from, so starting with their memory), every third a
    relation; corrections and supersessions beside them."""
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        bulk.insert_memories(conn, team, MEMORIES)
        conn.execute(
            "INSERT INTO entity (id, name, name_key)"
            " SELECT gen_random_uuid(), 'Entity ' || i, 'entity ' || i"
            " FROM generate_series(0, 100) AS i"
        )
        # Every memory mentions entity 0 and entity 1 + (its number mod 100).
        conn.execute(
            "CREATE TEMP TABLE numbered AS SELECT id, created_at,"
            " row_number() OVER (ORDER BY created_at, id) AS i FROM memory"
        )
        conn.execute(
            "INSERT INTO mention (memory_id, entity_id)"
            " SELECT n.id, e.id FROM numbered n JOIN entity e"
            " ON e.name IN ('Entity 0', 'Entity ' || (1 + n.i % 100))"
        )
        conn.execute(
            "INSERT INTO attribute_claim (id, memory_id, entity_id, attribute, value,"
            " valid_from, valid_until, stated_at, retired_at)"
            " SELECT gen_random_uuid(), n.id, e.id, 'step', 'value ' || n.i,"
            "  CASE WHEN n.i % 2 = 1 THEN n.created_at - (n.i % 7) * interval '1 day' END,"
            "  CASE WHEN n.i % 5 = 0 THEN n.created_at + interval '3 days' END,"
            "  n.created_at,"
            "  CASE WHEN n.i % 13 = 0 THEN n.created_at + interval '1 hour' END"
            " FROM numbered n JOIN entity e ON e.name = 'Entity ' || (1 + n.i % 100)"
        )
        conn.execute(
            "INSERT INTO relation_claim (id, memory_id, subject_id, predicate, object_id,"
            " valid_from, valid_until, stated_at)"
            " SELECT gen_random_uuid(), n.id, s.id, 'involves', o.id,"
            "  CASE WHEN n.i % 2 = 0 THEN n.created_at - interval '1 day' END,"
            "  CASE WHEN n.i % 4 = 0 THEN n.created_at + interval '2 days' END,"
            "  n.created_at"
            " FROM numbered n JOIN entity s ON s.name = 'Entity 0'"
            " JOIN entity o ON o.name = 'Entity ' || (1 + n.i % 100)"
            " WHERE n.i % 3 = 0"
        )
        bulk.insert_revisions(conn)
        bulk.forget_some(conn)


def _reads(conn: psycopg.Connection) -> dict[str, int]:
    rows = conn.execute(
        "SELECT relname, coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)"
        " FROM pg_stat_xact_user_tables WHERE relname = ANY (%s)",
        (list(TABLES),),
    ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def _count(conn: psycopg.Connection, table: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


def _row(at: datetime, kind: str, memory: Any, entity: Any, summary: str, key: str) -> Row:
    return (at, kind, str(memory), str(entity) if entity else None, summary, key)


def _everything(conn: psycopg.Connection) -> list[Row]:
    """Every event of the workspace the caller may see, in one plain ORDER BY:
    the statement that served every page of this timeline before, unlimited."""
    return timeline_oracle.every_event(conn)


def _pages(
    store: bulk.OnConnection,
    caller: Caller,
    start: datetime | None = None,
    end: datetime | None = None,
    token: str = "",
) -> Iterator[tuple[list[Row], dict[str, int], str]]:
    """Each page from ``token`` on: its events, the rows it read by table, its token."""
    while True:
        before = _reads(store.conn)
        page = store.timeline(caller, None, None, start, end, token)
        after = _reads(store.conn)
        read = {t: after.get(t, 0) - before.get(t, 0) for t in TABLES}
        events = [
            _row(e.at, e.kind, e.memory_id, e.entity_id, e.summary, e.key) for e in page.events
        ]
        yield events, read, page.next_page_token
        token = page.next_page_token
        if not token:
            return


def test_a_workspace_timeline_page_reads_its_own_rows_and_pages_as_one_order(
    stack: Stack, team: Team
) -> None:
    """Paged through, the whole workspace's timeline gives each caller exactly
    the sequence one ORDER BY over every event gives, a full page at a time,
    and no page reads more than a few rows per event it shows: the first, the
    last and any between alike, where each page read the whole workspace."""
    _seed(stack, team)
    with psycopg.connect(workspace_url(stack, team.database_name)) as admin:
        held = sum(_count(admin, table) for table in TABLES)
    assert held >= 10 * PAGE_READS
    seen: dict[str, list[Row]] = {}
    for member in ("ada", "bob"):
        caller = Caller(team.workspace_id, team.members[member], "assist")
        with bulk.as_member(stack, team, member) as conn:
            everything = _everything(conn)
            store = bulk.OnConnection(conn)
            paged: list[Row] = []
            for number, (events, read, token) in enumerate(_pages(store, caller)):
                assert sum(read.values()) <= PAGE_READS, (
                    f"{member}'s page {number} read {read} of {held} rows held"
                )
                assert len(events) == MAX_TIMELINE_EVENTS or not token
                paged += events
        assert len(everything) > 30 * MAX_TIMELINE_EVENTS
        assert paged == everything, member
        seen[member] = paged
    # Bob's private memories are events of his timeline, never of Ada's.
    private = {r[2] for r in seen["bob"]} - {r[2] for r in seen["ada"]}
    assert len(private) > MEMORIES // 20


def test_a_workspace_timeline_window_and_a_token_written_before_page_as_before(
    stack: Stack, team: Team
) -> None:
    """A window (from inclusive, to exclusive) pages through exactly its part
    of the one order; a page token as the timeline has always written it (the
    last event's time, its kind's place, its key, the subject) continues right
    after that event; and the gateway's first pages are the same events."""
    _seed(stack, team)
    caller = Caller(team.workspace_id, team.members["ada"], "assist")
    with bulk.as_member(stack, team, "ada") as conn:
        everything = _everything(conn)
        store = bulk.OnConnection(conn)
        start, end = everything[1_000][0], everything[3_000][0]
        window = [r for r in everything if start <= r[0] < end]
        paged = [row for events, _, _ in _pages(store, caller, start, end) for row in events]
        assert paged == window
        last = everything[249]
        token = page_tokens.encode(
            {"at": last[0].isoformat(), "kind": tl.KINDS.index(last[1]) + 1, "key": last[5],
             "s": "all"}
        )  # fmt: skip
        events, _, _ = next(_pages(store, caller, token=token))
        assert events == everything[250 : 250 + MAX_TIMELINE_EVENTS]
    ada = team.clients["ada"]
    first = ada.timeline()
    second = ada.timeline(page_token=first.next_page_token)
    shown = [
        (e.kind, e.memory_id, e.entity_id or None, e.summary)
        for e in [*first.events, *second.events]
    ]
    assert shown == [(r[1], r[2], r[3], r[4]) for r in everything[: 2 * MAX_TIMELINE_EVENTS]]
    assert page_tokens.decode(first.next_page_token).keys() == {"at", "kind", "key", "s"}


def test_the_workspace_timeline_alone_passes_row_security_with_its_path_pinned(
    stack: Stack, team: Team
) -> None:
    """The timelines' functions run as a role that bypasses row security, with
    their search_path pinned; the app role may call them and not their parts."""
    with bulk.as_member(stack, team, "ada") as conn:
        rows = conn.execute(
            "SELECT p.proname, p.prosecdef, o.rolsuper OR o.rolbypassrls, p.proconfig,"
            " has_function_privilege(p.oid, 'EXECUTE')"
            " FROM pg_proc p JOIN pg_roles o ON o.oid = p.proowner"
            " WHERE p.proname LIKE '%timeline%'"
        ).fetchall()
    by_name = {str(r[0]): r[1:] for r in rows}
    called = {"workspace_timeline", "entity_timeline", "episode_timeline"}
    parts = {
        "timeline_memory_seen",
        "timeline_entity_name",
        "timeline_in",
        "timeline_memory_of",
        "timeline_relation",
        "entity_member_timeline",
    }
    assert by_name.keys() == called | parts
    for name in called:
        definer, owner_bypasses, config, callable_ = by_name[name]
        assert definer and owner_bypasses and callable_, name
        assert "search_path=public" in config, name
    for part in parts:
        assert by_name[part][0] is False and by_name[part][3] is False, part
