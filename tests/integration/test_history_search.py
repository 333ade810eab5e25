"""History search (design §3.2, §8.4) on its index: beneath the owner-only
policy `@@` is not leakproof, so a search could not use the GIN index and
matched every turn of the owner's history, its cost growing with the history
rather than with what it finds (migration 0019)."""

from __future__ import annotations

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.domain.history import SEARCH_HISTORY
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS
from tests.conftest import Team
from tests.dbutil import workspace_url

pytestmark = pytest.mark.integration

TURNS = 20_000
# Imported history, as the migration writes it: the owner's turns, one in
# 5,000 holding a rare word.
HISTORY = """
INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)
SELECT gen_random_uuid(), %s, 'chat-' || (i / 50), 'user',
       'turn ' || i || ' about the weekly sync'
           || CASE WHEN i %% 5000 = 0 THEN ' quetzal' ELSE '' END,
       now() - make_interval(secs => i)
FROM generate_series(1, %s) AS i
"""
# Rows of history_entry this transaction read (pg_stat_xact_* counts the
# backend's own work, SECURITY DEFINER functions included).
ROWS_READ = """
SELECT seq_scan, seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables
WHERE relname = 'history_entry'
"""


def search(stack: Stack, team: Team, member: str, word: str) -> tuple[list[str], tuple[int, int]]:
    """The store's search as the services' role for ``member``, sequential
    scans off: the texts found and (sequential scans, rows read)."""
    with psycopg.connect(workspace_url(stack, team.database_name), user=APP_ROLE) as conn:
        conn.execute(
            SET_LOCALS,
            (["recallatron.member_id", "enable_seqscan"], [team.members[member], "off"]),
        )
        rows = conn.execute(SEARCH_HISTORY, {"tsquery": word, "limit": 10}).fetchall()
        read = conn.execute(ROWS_READ).fetchone()
    assert read is not None
    return [r[3] for r in rows], (int(read[0]), int(read[1]))


def test_history_search_reads_its_matches_not_the_whole_history(stack: Stack, team: Team) -> None:
    with psycopg.connect(workspace_url(stack, team.database_name), autocommit=True) as conn:
        conn.execute(HISTORY, (team.members["ada"], TURNS))
        conn.execute("ANALYZE history_entry")
    found, (scans, read) = search(stack, team, "ada", "quetzal")
    assert len(found) == TURNS // 5000 and all("quetzal" in text for text in found)
    assert (scans, read) == (0, len(found))
    # The policy's rule holds inside the search: another member finds nothing.
    assert search(stack, team, "bob", "quetzal")[0] == []
