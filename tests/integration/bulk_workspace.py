"""A workspace of thousands of memories written directly in SQL, for the tests
that hold the rows a read reads against what it answers (test_timeline_pages,
test_subject_timelines, test_entity_reads, test_owner_view,
test_audit_time_filter): the memories, their numbering and the corrected,
superseded and forgotten among them alike in each, each test adding the
entities, mentions and claims it reads; and a connection as the store's app
role for a caller, with the store's timeline, listing or audit log run on
it, so that pg_stat_xact_user_tables counts the rows each read read."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

import psycopg
from psycopg import sql

from recallatron_devkit.stack import Stack
from services.store.domain import timeline as tl
from services.store.domain.owner_view import AuditFilter, OwnerView
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS, Caller
from tests.conftest import Team
from tests.dbutil import workspace_url

# The plans the store's statements get (custom, and generic once prepared),
# and the generic plan forced.
PLAN_MODES = ("auto", "force_generic_plan")


@contextmanager
def writing(stack: Stack, team: Team, table: str) -> Iterator[psycopg.Connection]:
    """A connection as the workspace database's owner (no row security) for
    a test's own rows of ``table``, analysed once they are written so that
    the planner plans for their number."""
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        yield conn
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))


def insert_memories(
    conn: psycopg.Connection, team: Team, count: int, episode: str | None = None
) -> None:
    """``count`` memories titled "Entry <i>", three to an instant (ties) from
    2025-01-01: one in ten private to bob, one in nineteen for audit only,
    the rest ada's for assist; with ``episode``, one in three in it."""
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
        {"ada": team.members["ada"], "bob": team.members["bob"], "n": count, "episode": episode},
    )


def number_by_title(conn: psycopg.Connection) -> None:
    """The temporary table ``numbered`` (id, created_at, i): each memory with
    the number its title carries."""
    conn.execute(
        "CREATE TEMP TABLE numbered AS"
        " SELECT id, created_at, substr(title, 7)::int AS i FROM memory"
    )


def insert_revisions(conn: psycopg.Connection) -> None:
    """A correction of one memory in seven of ``numbered`` (half with a
    reason) an hour on, and a supersession of one in eleven two hours on."""
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


def forget_some(conn: psycopg.Connection) -> None:
    """One memory in seventeen of ``numbered`` forgotten a day on: its text gone."""
    conn.execute(
        "UPDATE memory SET title = '', body = '',"
        " invalidated_at = created_at + interval '1 day'"
        " WHERE id IN (SELECT id FROM numbered WHERE i % 17 = 0)"
    )


@contextmanager
def as_member(
    stack: Stack,
    team: Team,
    member: str,
    purpose: str = "assist",
    plan_cache_mode: str | None = None,
) -> Iterator[psycopg.Connection]:
    """A connection as the store's app role, under row security for
    ``member`` and ``purpose``, in one open transaction (with
    ``plan_cache_mode``, one of PLAN_MODES, set for it)."""
    names = ["recallatron.member_id", "recallatron.purpose"]
    values = [team.members[member], purpose]
    if plan_cache_mode is not None:
        names.append("plan_cache_mode")
        values.append(plan_cache_mode)
    with psycopg.connect(workspace_url(stack, team.database_name), user=APP_ROLE) as conn:
        conn.execute(SET_LOCALS, (names, values))
        yield conn


class OneConnection:
    """A store's reads run on one connection, in its open transaction, with
    the call's settings set as the store sets them (first among the bases of
    a store's class: ``class X(OneConnection, OwnerView)``)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    @contextmanager
    def transaction(
        self, caller: Caller, settings: Mapping[str, str] | None = None
    ) -> Iterator[psycopg.Connection]:
        if settings:
            self.conn.execute(SET_LOCALS, (list(settings), list(settings.values())))
        yield self.conn


class OnConnection(OneConnection, tl.TimelineStore):
    """The store's timeline run on one connection."""


class AuditOnConnection(OneConnection, OwnerView):
    """The store's audit log run on one connection (handles are left out:
    they come from the control database, not the log)."""

    def _handles(self, workspace_id: str, member_ids: set[str]) -> dict[str, str]:
        return {}


def rows_read(conn: psycopg.Connection, tables: Sequence[str]) -> int:
    """The rows this transaction has read from ``tables`` so far."""
    row = conn.execute(
        "SELECT sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0))"
        " FROM pg_stat_xact_user_tables WHERE relname = ANY (%s)",
        (list(tables),),
    ).fetchone()
    return int(row[0] or 0) if row else 0


def every_page(
    conn: psycopg.Connection, table: str, listing: Callable[[str], Any], key: str
) -> tuple[list[Any], int]:
    """The ids of every item ``listing`` (a page token in, a page out) lists
    under ``key``, page after page, and the most rows of ``table`` one page
    read."""
    listed: list[Any] = []
    most = 0
    token = ""
    while True:
        before = rows_read(conn, [table])
        page = listing(token)
        most = max(most, rows_read(conn, [table]) - before)
        listed += [item.id for item in getattr(page, key)]
        token = page.next_page_token
        if not token:
            return listed, most


def audit_listings(
    stack: Stack,
    team: Team,
    caller: Caller,
    filters: Sequence[AuditFilter],
    times: int,
    page_size: int,
) -> list[tuple[str, AuditFilter, list[Any], int]]:
    """Each filter's audit log listed as Ada, ``page_size`` to a page,
    ``times`` over under each of PLAN_MODES: the mode, the filter, the event
    ids listed and the most audit rows a page read, for each listing."""
    listings: list[tuple[str, AuditFilter, list[Any], int]] = []
    for mode in PLAN_MODES:
        with as_member(stack, team, "ada", plan_cache_mode=mode) as conn:
            view = AuditOnConnection(conn)
            for _ in range(times):
                for f in filters:
                    listing = partial(view.audit, caller, f, page_size)
                    listings.append((mode, f, *every_page(conn, "audit_log", listing, "events")))
    return listings


def entity_id(conn: psycopg.Connection, name: str) -> str:
    row = conn.execute("SELECT id FROM entity WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return str(row[0])
