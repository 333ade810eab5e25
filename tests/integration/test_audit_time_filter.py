"""The owner's audit log filtered by time (docs/api.md, ListAuditEvents
`from`/`to`): a page reads about a page of rows however far back the window
lies, and lists exactly the events whose time is in it, newest (highest id)
first, when events share a time and when a later event has an earlier time
(a clock gone back, or a long transaction: `at` is its start)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.domain.owner_view import AuditFilter
from services.store.infrastructure.db import Caller
from tests.conftest import Team
from tests.integration import bulk_workspace as bulk

pytestmark = pytest.mark.integration

BASE = datetime(2026, 1, 1, tzinfo=UTC)


def _insert(conn: psycopg.Connection, events: list[tuple[str, str, datetime]]) -> None:
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO audit_log (member_id, action, at, detail) VALUES (%s, %s, %s, '{}')",
            events,
        )


def _expected(conn: psycopg.Connection, f: AuditFilter) -> list[int]:
    """The events the filter names, newest first, found the plain way."""
    rows = conn.execute(
        "SELECT id FROM audit_log"
        " WHERE (%(m)s::uuid IS NULL OR member_id = %(m)s::uuid)"
        "   AND (%(a)s::text[] IS NULL OR action = ANY (%(a)s::text[]))"
        "   AND (%(f)s::timestamptz IS NULL OR at >= %(f)s::timestamptz)"
        "   AND (%(t)s::timestamptz IS NULL OR at < %(t)s::timestamptz)"
        " ORDER BY id DESC",
        {"m": f.member_id or None, "a": list(f.actions) or None, "f": f.start, "t": f.end},
    ).fetchall()
    return [int(r[0]) for r in rows]


def test_a_time_windows_few_old_events_are_listed_reading_few_rows(
    stack: Stack, team: Team
) -> None:
    """20,005 events a minute apart, Bob's five forgets the oldest: a window
    ending before all but those, alone or with a member or actions filter,
    two to a page, reads a few rows a page under the plans the store's
    statements get and the generic plan forced (each page walked the log
    from its newest event)."""
    bob, ada = team.members["bob"], team.members["ada"]
    events = [
        (bob if i <= 5 else ada, "forget" if i <= 5 else "remember", BASE + timedelta(minutes=i))
        for i in range(1, 20006)
    ]
    end = BASE + timedelta(minutes=5, seconds=30)
    with bulk.writing(stack, team, "audit_log") as conn:
        _insert(conn, events)
        filters = [
            AuditFilter(end=end),
            AuditFilter(start=BASE + timedelta(minutes=2), end=end),
            AuditFilter(member_id=bob, end=end),
            AuditFilter(actions=["forget", "correct"], end=end),
            AuditFilter(member_id=bob, actions=["forget"], start=BASE, end=end),
        ]
        expected = {repr(f): _expected(conn, f) for f in filters}
    caller = Caller(team.workspace_id, ada, "assist", "owner")
    # Seven times: past the driver's prepare threshold and the server's custom plans.
    for mode, f, listed, most in bulk.audit_listings(stack, team, caller, filters, 7, 2):
        assert most <= 20, f"{mode}, {f}: a page read {most} audit rows"
        assert listed == expected[repr(f)] and listed, (mode, f)


def test_a_time_window_lists_exactly_its_events_when_times_tie_or_go_back(
    stack: Stack, team: Team
) -> None:
    """4,000 events whose times mostly rise, in runs that share a time, with
    some a later event an hour earlier than the one before (a clock gone
    back): each window, with and without a member or actions filter, pages
    through exactly the events in it, by id."""
    members = [team.members["ada"], team.members["bob"], team.members["cy"]]
    actions = ["remember", "forget", "correct"]
    rng = random.Random(7)
    events = []
    at = BASE
    for i in range(4000):
        if i % 3 == 0:  # three events share each time
            at += timedelta(seconds=rng.randint(0, 60))
        when = at - timedelta(hours=1) if rng.random() < 0.02 else at
        events.append((rng.choice(members), rng.choice(actions), when))
    times = sorted({e[2] for e in events})
    with bulk.writing(stack, team, "audit_log") as conn:
        _insert(conn, events)
        filters = []
        for lo, hi in [(0.1, 0.12), (0.5, 0.6), (0.0, 0.02), (0.97, 1.0)]:
            start, end = times[int(lo * (len(times) - 1))], times[int(hi * (len(times) - 1))]
            filters += [
                AuditFilter(start=start, end=end),
                AuditFilter(end=end),
                AuditFilter(start=start),
                AuditFilter(member_id=members[1], start=start, end=end),
                AuditFilter(actions=["forget", "correct"], start=start, end=end),
                AuditFilter(member_id=members[2], actions=["remember"], end=end),
            ]
        expected = {repr(f): _expected(conn, f) for f in filters}
    caller = Caller(team.workspace_id, members[0], "assist", "owner")
    for mode, f, listed, _ in bulk.audit_listings(stack, team, caller, filters, 1, 200):
        assert listed == expected[repr(f)], (mode, f)
