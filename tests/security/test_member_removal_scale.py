"""A member who leaves with many private memories and much imported history
(design §10; docs/api.md, "Removing a member"): the store's statement timeout
bounds each statement, not a removal, so the erase or hand-over of thousands
of rows finishes whole. Before, each was one statement over every row (the
per-row work of forget's triggers): past the timeout it was cancelled, the
call answered UNAVAILABLE "retry shortly", and every retry was cancelled the
same way, so the member stayed removed with their private text kept.

The store's own code runs here, in this process, with a statement timeout
far below the service's (15 s) so that a few thousand rows, not a hundred
thousand, show it; the rows are written straight into the workspace's
database (its triggers fire as for the tools' writes)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.domain.control import ControlPlane
from services.store.domain.member_removal import MemberRemoval
from services.store.infrastructure.db import Databases
from services.store.settings import StoreSettings
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration

# Each row costs a few milliseconds of trigger work: this many, in one
# statement, are cancelled by the timeout below on any machine, while a
# statement over a hundred of them finishes well within it.
MEMORIES = 5000
TURNS = 5000
TIMEOUT_MS = 3000


@pytest.fixture
def removal(stack: Stack) -> Iterator[MemberRemoval]:
    """The store's member removal, with a short statement timeout."""
    settings = StoreSettings(
        database_url=stack.database_url,
        app_password=stack.app_password,
        # As the stack's own store: reaching the server sets the app role's
        # password with this many rounds.
        app_password_scram_iterations=1,
        statement_timeout_ms=TIMEOUT_MS,
    )
    dbs = Databases(settings)
    dbs.bootstrap()
    try:
        yield MemberRemoval(dbs, ControlPlane(dbs))
    finally:
        dbs.close()


def _fill(stack: Stack, team: Team, member: str) -> None:
    """``member``'s private memories (each naming an entity of its own) and
    imported history turns."""
    with psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as conn:
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin,"
            " audience_member_id, purposes, created_by)"
            " SELECT gen_random_uuid(), 'note', 'Zqscale note ' || i,"
            " 'zqscalebody plans for project ' || i || ' this quarter', 1, 'told', %s,"
            " ARRAY['assist']::purpose[], %s FROM generate_series(1, %s) i",
            (member, member, MEMORIES),
        )
        conn.execute(
            "INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)"
            " SELECT gen_random_uuid(), %s, 'chat', 'user',"
            " 'zqscaleturn about launch number ' || i, now() - i * interval '1 minute'"
            " FROM generate_series(1, %s) i",
            (member, TURNS),
        )


def _left(stack: Stack, team: Team, member: str) -> tuple[int, int]:
    """(their memories still holding text, their history turns)."""
    rows = dbutil.query(
        stack,
        team.database_name,
        "SELECT (SELECT count(*) FROM memory WHERE audience_member_id = %s AND body <> ''),"
        " (SELECT count(*) FROM history_entry WHERE owner_member_id = %s)",
        (member, member),
    )
    return int(rows[0][0]), int(rows[0][1])


def test_erasing_thousands_of_private_memories_and_turns_finishes(
    stack: Stack, team: Team, removal: MemberRemoval
) -> None:
    bob = team.members["bob"]
    _fill(stack, team, bob)
    done = removal.remove(bob, "erase")
    assert (done.erased, done.kept) == (MEMORIES, 0)
    assert _left(stack, team, bob) == (0, 0)
    # Each erased as forget erases: a tombstone with the reason, its revision recorded.
    rows = dbutil.query(
        stack,
        team.database_name,
        "SELECT count(*) FILTER (WHERE invalidation_reason = 'member removed'),"
        " (SELECT count(*) FROM memory_revision WHERE action = 'forget'),"
        " (SELECT count(*) FROM term_stat WHERE audience = %s)"
        " FROM memory WHERE audience_member_id = %s",
        (bob, bob),
    )
    assert rows == [(MEMORIES, MEMORIES, 0)]


def test_handing_over_thousands_of_private_memories_and_turns_finishes(
    stack: Stack, team: Team, removal: MemberRemoval
) -> None:
    bob, cy = team.members["bob"], team.members["cy"]
    _fill(stack, team, bob)
    done = removal.remove(bob, "transfer", transfer_to=cy)
    assert done.transferred == MEMORIES
    assert _left(stack, team, bob) == (0, 0)
    assert _left(stack, team, cy) == (MEMORIES, TURNS)
    # Their search statistics went with them.
    rows = dbutil.query(
        stack,
        team.database_name,
        "SELECT (SELECT count(*) FROM term_stat WHERE audience = %s),"
        " (SELECT count(*) FROM history_term_stat WHERE owner_member_id = %s)",
        (bob, bob),
    )
    assert rows == [(0, 0)]
