"""Workspace migration 0075 on a database that already holds memories and
history: their search vectors gain the parts of addresses and paths, and the
lexical arm's statistics are computed again from them (a part is counted in
the memories holding it, nothing else changes)."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.infrastructure import migrate
from tests.integration.test_migration_baseline import _new_database

pytestmark = pytest.mark.integration

PARTS = "0075_search_inside_compound_words"

MEMORY = """
INSERT INTO memory (id, kind, title, body, confidence, origin, purposes, created_by)
VALUES (gen_random_uuid(), 'note', %s, %s, 1, 'told', '{assist,audit}', %s)
"""
HISTORY = """
INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)
VALUES (gen_random_uuid(), %s, 'chat-1', 'user', %s, now())
"""
TERM_DOCS = """
SELECT purpose::text, sum(docs)::int FROM term_stat WHERE lexeme = %s GROUP BY 1 ORDER BY 1
"""


def _stats(conn: psycopg.Connection) -> dict[tuple[str, str], int]:
    rows = conn.execute(
        "SELECT lexeme, purpose::text, sum(docs) FROM term_stat GROUP BY 1, 2"
    ).fetchall()
    return {(r[0], r[1]): int(r[2]) for r in rows}


def test_the_migration_gives_existing_rows_their_parts(stack: Stack) -> None:
    url = _new_database(stack)
    assert PARTS in [v for v, _ in migrate.migration_files("workspace")]
    migrate.apply_migrations(url, "workspace", before=PARTS)
    author = str(uuid.uuid4())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(MEMORY, ("Proxy", "Its file is /etc/nginx/nginx.conf.", author))
        conn.execute(MEMORY, ("Access", "Mail ops@example.com, nginx admins.", author))
        conn.execute(MEMORY, ("Cats", "The cat eats kibble.", author))
        conn.execute(HISTORY, (author, "the config is in /srv/quetzal/app.yaml"))
        before = _stats(conn)
        assert ("op", "assist") not in before
        assert conn.execute(TERM_DOCS, ("nginx",)).fetchall() == [("assist", 1), ("audit", 1)]

    assert PARTS in migrate.apply_migrations(url, "workspace")
    with psycopg.connect(url, autocommit=True) as conn:
        after = _stats(conn)
        # The parts are counted in the memories holding them: "nginx" in both
        # (a word of one, a part of the other's path).
        assert conn.execute(TERM_DOCS, ("nginx",)).fetchall() == [("assist", 2), ("audit", 2)]
        assert after[("op", "assist")] == 1 and after[("exampl", "audit")] == 1
        assert after[("example.com", "assist")] == 1
        # Every count held before is held still, but for the lexemes the parts added to.
        changed = {k for k in before if before[k] != after.get(k)}
        assert {lexeme for lexeme, _ in changed} == {"nginx"}
        matched = conn.execute(
            "SELECT title FROM memory WHERE search @@ plainto_tsquery('english', 'ops')"
        ).fetchall()
        assert matched == [("Access",)]
        history = conn.execute(
            "SELECT lexeme, docs FROM history_term_stat"
            " WHERE lexeme IN ('quetzal', 'app.yaml', 'yaml') ORDER BY 1"
        ).fetchall()
        assert history == [("app.yaml", 1), ("quetzal", 1), ("yaml", 1)]
    # Applied again, nothing.
    assert migrate.apply_migrations(url, "workspace") == []
