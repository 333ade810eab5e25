"""What counting the memories not embedded yet (RecallOutcome.not_embedded,
migration 0059, the dense arm's transaction) reads: the caller's share of the
embedding job's outbox, not the whole backlog; and what it counts: every
memory the caller may see that waits for its vector, a superseded one they
read as current (its successor hidden from them) among them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.domain.recall import NOT_EMBEDDED
from tests.conftest import Team
from tests.integration import bulk_workspace as bulk

pytestmark = pytest.mark.integration

HIDDEN = 10_000
TABLES = ["embedding_job", "embedding_job_audience", "memory"]


def _memories(
    conn: psycopg.Connection, author: str, count: int, audience: str | None, purposes: str
) -> list[str]:
    """``count`` memories by ``author`` for ``audience`` (None: the
    workspace) and ``purposes``, their ids."""
    rows = conn.execute(
        "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
        " created_by, created_at, updated_at, audience_member_id)"
        " SELECT gen_random_uuid(), 'note', 'Waiting ' || i, '', 1, 'told', %s::purpose[],"
        "  %s, now(), now(), %s FROM generate_series(1, %s) AS i RETURNING id",
        (purposes, author, audience, count),
    ).fetchall()
    return [str(r[0]) for r in rows]


@contextmanager
def _backlog(stack: Stack, team: Team) -> Iterator[dict[str, list[str]]]:
    """HIDDEN of the workspace's memories embedded (out of the outbox), and
    waiting: Bob's HIDDEN private memories, Ada's four private ones, three of the
    workspace's, one of the workspace's for audit only, and two of the
    workspace's superseded: one by Bob's private memory (current to Ada),
    one by another of the workspace's; all waiting in the outbox, parked so
    that the stack's job leaves them, and taken out of it afterwards."""
    ada, bob = team.members["ada"], team.members["bob"]
    with bulk.writing(stack, team, "embedding_job") as conn:
        embedded = _memories(conn, ada, HIDDEN, None, "{assist}")
        conn.execute("DELETE FROM embedding_job WHERE memory_id = ANY (%s::uuid[])", (embedded,))
        made = {
            "hidden": _memories(conn, bob, HIDDEN, bob, "{assist}"),
            "own": _memories(conn, ada, 4, ada, "{assist}"),
            "shared": _memories(conn, ada, 3, None, "{assist}"),
            "audit": _memories(conn, ada, 1, None, "{audit}"),
            "old": _memories(conn, ada, 2, None, "{assist}"),
            "new_hidden": _memories(conn, bob, 1, bob, "{assist}"),
            "new_shared": _memories(conn, ada, 1, None, "{assist}"),
        }
        for old, new in zip(made["old"], made["new_hidden"] + made["new_shared"], strict=True):
            conn.execute("UPDATE memory SET superseded_by_id = %s WHERE id = %s", (new, old))
        conn.execute("UPDATE embedding_job SET next_attempt_at = 'infinity'")
        conn.execute("ANALYZE memory")
    try:
        yield made
    finally:
        with bulk.writing(stack, team, "embedding_job") as conn:
            conn.execute("DELETE FROM embedding_job")


def _count(conn: psycopg.Connection, cap: int) -> tuple[int, int]:
    """The count up to ``cap`` and the rows it read."""
    before = bulk.rows_read(conn, TABLES)
    row = conn.execute(NOT_EMBEDDED, (cap,)).fetchone()
    assert row is not None
    return int(row[0]), bulk.rows_read(conn, TABLES) - before


def test_the_count_reads_the_callers_share_of_the_backlog(stack: Stack, team: Team) -> None:
    """Ada may see 9 of 10,000 + 12 waiting memories and 10,000 embedded:
    counting the 9 reads about those rows, neither Bob's 10,000 private ones
    nor her embedded ones; Bob, who may see 10,000 of them, reads about the
    cap's worth."""
    with _backlog(stack, team):
        for mode in bulk.PLAN_MODES:
            with bulk.as_member(stack, team, "ada", plan_cache_mode=mode) as conn:
                for _ in range(3):
                    counted, read = _count(conn, 1_000)
                    assert read <= 40, f"{mode}: {read} rows read to count {counted}"
            with bulk.as_member(stack, team, "bob", plan_cache_mode=mode) as conn:
                counted, read = _count(conn, 1_000)
                assert counted == 1_000
                assert read <= 2_100, f"{mode}: {read} rows read to count {counted}"


def test_a_superseded_memory_the_caller_reads_as_current_is_counted(
    stack: Stack, team: Team
) -> None:
    """Ada's four own, the workspace's three, the one superseded by Bob's
    private memory (current to her, its vector kept since migration 0062) and
    the workspace's successor of the other: 9; neither Bob's private ones nor
    the audit-only one nor the memory superseded by one she sees."""
    with _backlog(stack, team):
        with bulk.as_member(stack, team, "ada") as conn:
            assert [_count(conn, cap)[0] for cap in (1, 5, 1_000)] == [1, 5, 9]
        with bulk.as_member(stack, team, "cy") as conn:
            # The workspace's three, the one superseded by Bob's private memory
            # and the successor of the other.
            assert _count(conn, 1_000)[0] == 5
        with bulk.as_member(stack, team, "ada", purpose="audit") as conn:
            assert _count(conn, 1_000)[0] == 1


def test_the_count_follows_a_memory_handed_to_another_member(stack: Stack, team: Team) -> None:
    """Ada's four private memories handed to Cy while they wait (as a
    removed member's are): Ada no longer counts them, Cy does; and the
    workspace's three given the audit purpose alone leave assist's count."""
    with _backlog(stack, team) as made:
        with bulk.writing(stack, team, "embedding_job") as conn:
            conn.execute(
                "UPDATE memory SET audience_member_id = %s WHERE id = ANY (%s::uuid[])",
                (team.members["cy"], made["own"]),
            )
            conn.execute(
                "UPDATE memory SET purposes = '{audit}' WHERE id = ANY (%s::uuid[])",
                (made["shared"],),
            )
        with bulk.as_member(stack, team, "ada") as conn:
            assert _count(conn, 1_000)[0] == 2
        with bulk.as_member(stack, team, "cy") as conn:
            assert _count(conn, 1_000)[0] == 6
        with bulk.as_member(stack, team, "cy", purpose="audit") as conn:
            assert _count(conn, 1_000)[0] == 4
