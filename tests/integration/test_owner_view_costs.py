"""An owner's view of memories (ListMemories) costs a page's worth of rows
whatever else the workspace holds: by kind, by episode, every author's, in a
span of time, under the plans the store's statements get (custom, and generic
once prepared) and the generic plan forced; a page of its audit log
(ListAuditEvents) reads the handles of the page's members only."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from typing import Any, cast

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.domain.member_removal import OPERATOR_ID
from services.store.domain.owner_view import AuditFilter, MemoryFilter, OwnerView
from services.store.infrastructure.db import CONTROL_DATABASE, Caller, with_database
from tests.conftest import Team
from tests.integration import bulk_workspace as bulk

pytestmark = pytest.mark.integration


def every(page: Callable[..., Any], key: str, **filters: Any) -> list[Any]:
    """Every item, page after page."""
    out: list[Any] = []
    token = ""
    while True:
        got = page(page_token=token, **filters)
        out.extend(getattr(got, key))
        token = got.next_page_token
        if not token:
            return out


class _OnConnection(bulk.OneConnection, OwnerView):
    """The store's listing run on one connection, so that
    pg_stat_xact_user_tables counts the rows each page read."""


def test_a_kinds_listing_walks_each_kind_once_a_page(stack: Stack, team: Team) -> None:
    """Ada's five notes beneath 20,000 newer notes private to Bob: listed by
    kind, two to a page, each kind is walked once a page (past none of the
    notes Ada may not see), not once for each memory Ada may see, which the
    generic plan did once the statement was prepared (100,020 rows read for a
    page of two); the same through the gateway."""
    ada, bob = team.members["ada"], team.members["bob"]
    hidden = 20_000
    with bulk.writing(stack, team, "memory") as conn:
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at, audience_member_id)"
            " SELECT gen_random_uuid(), 'note', 'Item ' || i, '', 1, 'told', '{assist}',"
            "  CASE WHEN i <= 5 THEN %(ada)s ELSE %(bob)s END::uuid,"
            "  timestamptz '2025-01-01' + i * interval '1 minute',"
            "  timestamptz '2025-01-01' + i * interval '1 minute',"
            "  CASE WHEN i <= 5 THEN NULL ELSE %(bob)s END::uuid"
            " FROM generate_series(1, %(n)s) AS i",
            {"bob": bob, "ada": ada, "n": hidden + 5},
        )
    caller = Caller(team.workspace_id, ada, "assist")
    for mode in bulk.PLAN_MODES:
        with bulk.as_member(stack, team, "ada", plan_cache_mode=mode) as conn:
            notes = [str(r[0]) for r in conn.execute("SELECT id FROM memory ORDER BY id")]
            view = _OnConnection(conn)
            for kinds in (["note"], ["note", "fact"]):
                listing = partial(view.memories, caller, MemoryFilter(kinds=kinds), 2)
                # Past the driver's prepare threshold and the server's custom plans.
                for _ in range(12):
                    listed, most = bulk.every_page(conn, "memory", listing, "memories")
                    assert most <= 20, f"{mode}, {kinds}: a page read {most} rows"
                    assert sorted(listed) == notes and len(notes) == 5, (mode, kinds)
    through_gateway = every(team.clients["ada"].list_memories, "memories", kinds=["note"])
    assert sorted(m.id for m in through_gateway) == notes


def test_every_authors_memories_are_listed_reading_few_rows(stack: Stack, team: Team) -> None:
    """20,005 memories, a third private to Bob, three to an instant: Ada's
    listing of every author's, whole, within a span, from or to a time, or
    with superseded ones, two to a page, reads a few rows a page under the
    plans the store's statements get (custom, and generic once prepared) and
    the generic plan forced, where the generic plan read every memory Ada may
    see (13,337 rows) and sorted them, or walked from the newest memory to the
    span's end (15,514 rows); the pages are the listing's order."""
    ada, bob = team.members["ada"], team.members["bob"]
    with bulk.writing(stack, team, "memory") as conn:
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at, audience_member_id)"
            " SELECT gen_random_uuid(), 'note', 'Item ' || i, '', 1, 'told', '{assist}',"
            "  CASE WHEN i %% 2 = 0 THEN %(ada)s ELSE %(bob)s END::uuid,"
            "  timestamptz '2025-01-01' + (i / 3) * interval '1 minute',"
            "  timestamptz '2025-01-01' + (i / 3) * interval '1 minute',"
            "  CASE WHEN i %% 3 = 0 THEN %(bob)s END::uuid"
            " FROM generate_series(1, 20005) AS i",
            {"bob": bob, "ada": ada},
        )
    start = datetime(2025, 1, 2, tzinfo=UTC)
    end = datetime(2025, 1, 2, 1, tzinfo=UTC)
    filters = {
        "all": (MemoryFilter(), "TRUE"),
        "span": (MemoryFilter(start=start, end=end), "created_at >= %(s)s AND created_at < %(e)s"),
        "from": (MemoryFilter(start=start), "created_at >= %(s)s"),
        "to": (MemoryFilter(end=end), "created_at < %(e)s"),
        "superseded too": (MemoryFilter(include_superseded=True), "TRUE"),
    }
    caller = Caller(team.workspace_id, ada, "assist")
    for mode in bulk.PLAN_MODES:
        with bulk.as_member(stack, team, "ada", plan_cache_mode=mode) as conn:
            view = _OnConnection(conn)
            for name, (f, where) in filters.items():
                expected = [
                    str(r[0])
                    for r in conn.execute(
                        f"SELECT id FROM memory WHERE {where}"
                        " ORDER BY created_at DESC, id DESC LIMIT 8",
                        {"s": start, "e": end},
                    )
                ]
                # Past the driver's prepare threshold and the server's custom plans.
                for _ in range(8):
                    token, listed = "", []
                    for _ in range(4):
                        before = bulk.rows_read(conn, ["memory"])
                        page = view.memories(caller, f, 2, token)
                        most = bulk.rows_read(conn, ["memory"]) - before
                        assert most <= 20, f"{mode}, {name}: a page read {most} memory rows"
                        listed += [m.id for m in page.memories]
                        token = page.next_page_token
                    assert listed == expected, (mode, name)


def test_an_episodes_few_old_memories_are_listed_reading_few_rows(stack: Stack, team: Team) -> None:
    """An episode's five memories, older than 20,000 others: listed by
    episode, two to a page, each page reads a few rows under the plans the
    store's statements get (custom, and generic once prepared) and the
    generic plan forced, where it walked every newer memory of the workspace
    for each page; the same through the gateway."""
    ada = team.members["ada"]
    episode = (
        team.clients["ada"]
        .create_episode("planning", "2025-01-01T00:00:00Z", audience_to="workspace")
        .episode_id
    )
    with bulk.writing(stack, team, "memory") as conn:
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at, episode_id)"
            " SELECT gen_random_uuid(), 'note', 'Item ' || i, '', 1, 'told', '{assist}',"
            "  %(ada)s::uuid,"
            "  timestamptz '2025-01-01' + (i / 2) * interval '1 minute',"
            "  timestamptz '2025-01-01' + (i / 2) * interval '1 minute',"
            "  CASE WHEN i <= 5 THEN %(episode)s::uuid END"
            " FROM generate_series(1, 20005) AS i",
            {"ada": ada, "episode": episode},
        )
    caller = Caller(team.workspace_id, ada, "assist")
    for mode in bulk.PLAN_MODES:
        with bulk.as_member(stack, team, "ada", plan_cache_mode=mode) as conn:
            expected = [
                str(r[0])
                for r in conn.execute(
                    "SELECT id FROM memory WHERE episode_id = %s ORDER BY created_at DESC, id DESC",
                    (episode,),
                )
            ]
            f = MemoryFilter(episode_id=episode)
            listing = partial(_OnConnection(conn).memories, caller, f, 2)
            # Past the driver's prepare threshold and the server's custom plans.
            for _ in range(8):
                listed, most = bulk.every_page(conn, "memory", listing, "memories")
                assert most <= 20, f"{mode}: a page of the episode's read {most} memory rows"
                assert listed == expected and len(expected) == 5, mode
    client = team.clients["ada"]
    in_episode = every(client.list_memories, "memories", episode_id=episode, page_size=2)
    assert [m.id for m in in_episode] == expected


def test_a_page_by_kind_or_author_reads_none_of_the_rows_hidden_from_the_caller(
    stack: Stack, team: Team
) -> None:
    """Ada's five notes (two of them private to her) and two of Bob's shared
    with the workspace, beneath 20,000 newer notes private to Bob: listed by
    kind or by author, two to a page, a page reads a few rows under the plans
    the store's statements get (custom, and generic once prepared) and the
    generic plan forced, not the 20,000 Ada may not see, which the walks of
    a kind's or an author's index checked one by one (about 20,008 rows read
    a page); the pages are the listing's order, Ada's private notes and the
    workspace's merged."""
    ada, bob = team.members["ada"], team.members["bob"]
    hidden = 20_000
    with bulk.writing(stack, team, "memory") as conn:
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at, audience_member_id)"
            " SELECT gen_random_uuid(), 'note', 'Item ' || i, '', 1, 'told', '{assist}',"
            "  CASE WHEN i <= 5 THEN %(ada)s ELSE %(bob)s END::uuid,"
            "  timestamptz '2025-01-01' + (i / 2) * interval '1 minute',"
            "  timestamptz '2025-01-01' + (i / 2) * interval '1 minute',"
            "  CASE WHEN i IN (2, 4) THEN %(ada)s WHEN i > 7 THEN %(bob)s END::uuid"
            " FROM generate_series(1, %(n)s) AS i",
            {"bob": bob, "ada": ada, "n": hidden + 7},
        )
    filters = {
        "note": (MemoryFilter(kinds=["note"]), "TRUE"),
        "note, fact": (MemoryFilter(kinds=["note", "fact"]), "TRUE"),
        "by ada": (MemoryFilter(created_by=ada), f"created_by = '{ada}'"),
        "by bob": (MemoryFilter(created_by=bob), f"created_by = '{bob}'"),
        "by bob, superseded too": (
            MemoryFilter(created_by=bob, include_superseded=True),
            f"created_by = '{bob}'",
        ),
    }
    caller = Caller(team.workspace_id, ada, "assist")
    for mode in bulk.PLAN_MODES:
        with bulk.as_member(stack, team, "ada", plan_cache_mode=mode) as conn:
            view = _OnConnection(conn)
            for name, (f, where) in filters.items():
                expected = [
                    str(r[0])
                    for r in conn.execute(
                        f"SELECT id FROM memory WHERE {where} ORDER BY created_at DESC, id DESC"
                    )
                ]
                assert len(expected) == (5 if name == "by ada" else 2 if "bob" in name else 7)
                listing = partial(view.memories, caller, f, 2)
                # Past the driver's prepare threshold and the server's custom plans.
                for _ in range(8):
                    listed, most = bulk.every_page(conn, "memory", listing, "memories")
                    assert most <= 20, f"{mode}, {name}: a page read {most} memory rows"
                    assert listed == expected, (mode, name)


class _ControlOn:
    """The control plane's database as one connection, so that
    pg_stat_xact_user_tables counts the member rows a page read."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.dbs = self
        self.conn = conn

    @contextmanager
    def control_conn(self) -> Iterator[psycopg.Connection]:
        yield self.conn


class _AuditOnConnections(bulk.OneConnection, OwnerView):
    """The store's audit log run on one connection to the workspace's
    database and one to the control plane's (the members' handles)."""

    def __init__(self, conn: psycopg.Connection, control: psycopg.Connection) -> None:
        super().__init__(conn)
        self.control = cast(Any, _ControlOn(control))


def test_an_audit_page_reads_the_handles_of_its_members_only(stack: Stack, team: Team) -> None:
    """A workspace of 2,003 members, its log's newest events two of Bob's and
    one of the operator's: each page of two of them (and the rest of the log)
    reads a few member rows under the plans the store's statements get and
    the generic plan forced, where every page read every member's handle
    (2,003 rows), and names each event's member by handle."""
    ada, bob = team.members["ada"], team.members["bob"]
    control_url = with_database(stack.database_url, CONTROL_DATABASE)
    with psycopg.connect(control_url) as conn:
        conn.execute(
            "INSERT INTO member (id, workspace_id, handle, role)"
            " SELECT gen_random_uuid(), %s, 'extra-' || i, 'member'"
            " FROM generate_series(1, 2000) AS i",
            (team.workspace_id,),
        )
        conn.execute("ANALYZE member")
    with bulk.writing(stack, team, "audit_log") as conn:
        conn.execute(
            "INSERT INTO audit_log (member_id, action) VALUES (%s, 'remember'),"
            " (%s, 'update_settings'), (%s, 'remember'), (%s, 'remember')",
            (ada, OPERATOR_ID, bob, bob),
        )
    caller = Caller(team.workspace_id, ada, "assist", role="owner")
    handles = {ada: "ada", bob: "bob", OPERATOR_ID: "operator"}
    try:
        for mode in bulk.PLAN_MODES:
            with (
                bulk.as_member(stack, team, "ada", plan_cache_mode=mode) as conn,
                psycopg.connect(control_url) as control,
            ):
                control.execute("SELECT set_config('plan_cache_mode', %s, true)", (mode,))
                view = _AuditOnConnections(conn, control)
                # Past the driver's prepare threshold and the server's custom plans.
                for _ in range(8):
                    token, named = "", []
                    while True:
                        before = bulk.rows_read(control, ["member"])
                        page = view.audit(caller, AuditFilter(), 2, token)
                        most = bulk.rows_read(control, ["member"]) - before
                        assert most <= 4, f"{mode}: a page of two read {most} member rows"
                        named += [(e.member_id, e.member_handle) for e in page.events]
                        token = page.next_page_token
                        if not token:
                            break
                    assert named[:4] == [
                        (bob, "bob"),
                        (bob, "bob"),
                        (OPERATOR_ID, "operator"),
                        (ada, "ada"),
                    ], mode
                    assert all(handles.get(m, h) == h for m, h in named), mode
    finally:
        with psycopg.connect(control_url) as conn:
            conn.execute(
                "DELETE FROM member WHERE workspace_id = %s AND handle LIKE 'extra-%%'",
                (team.workspace_id,),
            )


def test_every_authors_or_an_episodes_page_reads_none_of_the_rows_hidden_from_the_caller(
    stack: Stack, team: Team
) -> None:
    """Ada's five memories (two of them private to her) and two of Bob's
    shared with the workspace, in an episode, beneath 20,000 newer memories
    of it private to Bob: every author's listing, whole or in a span, and the
    episode's, two to a page, read a few rows a page under the plans the
    store's statements get and the generic plan forced, not the 20,000 Ada
    may not see, which the walk of the created_at or the episode's index
    checked one by one; the pages are the listing's order."""
    ada, bob = team.members["ada"], team.members["bob"]
    episode = (
        team.clients["ada"]
        .create_episode("planning", "2025-01-01T00:00:00Z", audience_to="workspace")
        .episode_id
    )
    with bulk.writing(stack, team, "memory") as conn:
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at, audience_member_id, episode_id)"
            " SELECT gen_random_uuid(), 'note', 'Item ' || i, '', 1, 'told', '{assist}',"
            "  CASE WHEN i <= 5 THEN %(ada)s ELSE %(bob)s END::uuid,"
            "  timestamptz '2025-01-01' + (i / 2) * interval '1 minute',"
            "  timestamptz '2025-01-01' + (i / 2) * interval '1 minute',"
            "  CASE WHEN i IN (2, 4) THEN %(ada)s WHEN i > 7 THEN %(bob)s END::uuid,"
            "  %(episode)s::uuid"
            " FROM generate_series(1, 20007) AS i",
            {"bob": bob, "ada": ada, "episode": episode},
        )
    start = datetime(2025, 1, 1, 0, 1, tzinfo=UTC)
    end = datetime(2025, 1, 2, tzinfo=UTC)
    filters = {
        "all": (MemoryFilter(), "TRUE"),
        "span": (MemoryFilter(start=start, end=end), "created_at >= %(s)s AND created_at < %(e)s"),
        "to": (MemoryFilter(end=end), "created_at < %(e)s"),
        "episode": (MemoryFilter(episode_id=episode), "TRUE"),
        "superseded too": (MemoryFilter(include_superseded=True), "TRUE"),
    }
    caller = Caller(team.workspace_id, ada, "assist")
    for mode in bulk.PLAN_MODES:
        with bulk.as_member(stack, team, "ada", plan_cache_mode=mode) as conn:
            view = _OnConnection(conn)
            for name, (f, where) in filters.items():
                expected = [
                    str(r[0])
                    for r in conn.execute(
                        f"SELECT id FROM memory WHERE {where} ORDER BY created_at DESC, id DESC",
                        {"s": start, "e": end},
                    )
                ]
                assert len(expected) == (6 if name == "span" else 7), name
                listing = partial(view.memories, caller, f, 2)
                # Past the driver's prepare threshold and the server's custom plans.
                for _ in range(8):
                    listed, most = bulk.every_page(conn, "memory", listing, "memories")
                    assert most <= 20, f"{mode}, {name}: a page read {most} memory rows"
                    assert listed == expected, (mode, name)
