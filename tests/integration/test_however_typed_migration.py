"""Workspace migration 0077 on a database that already holds memories and
history: their search vectors hold each word with its accents folded and a
hyphenated word's joined form, and the lexical arm's statistics are computed
again from them (a folded word counted in the memories holding it either way,
a joined form in those holding it hyphenated, every other count as it was)."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.infrastructure import migrate
from tests.integration.test_migration_baseline import _new_database
from tests.integration.test_search_parts_migration import HISTORY, MEMORY, TERM_DOCS, _stats

pytestmark = pytest.mark.integration

FOLD = "0077_words_found_however_typed"


def test_the_migration_reads_existing_rows_however_typed(stack: Stack) -> None:
    url = _new_database(stack)
    assert FOLD in [v for v, _ in migrate.migration_files("workspace")]
    migrate.apply_migrations(url, "workspace", before=FOLD)
    author = str(uuid.uuid4())
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(MEMORY, ("Tea", "Zoë drinks green tea.", author))
        conn.execute(MEMORY, ("Visitors", "Zoe from sales visits in May.", author))
        conn.execute(MEMORY, ("Lunch", "We meet at the Café Nero.", author))
        conn.execute(MEMORY, ("Cats", "The cat eats kibble.", author))
        conn.execute(MEMORY, ("Pager", "Priya is on-call.", author))
        conn.execute(HISTORY, (author, "Chloë booked the chalet, e-mail to follow"))
        before = _stats(conn)
        assert conn.execute(TERM_DOCS, ("zoe",)).fetchall() == [("assist", 1), ("audit", 1)]
        assert ("zoë", "assist") in before

    assert FOLD in migrate.apply_migrations(url, "workspace")
    with psycopg.connect(url, autocommit=True) as conn:
        after = _stats(conn)
        assert conn.execute(TERM_DOCS, ("zoe",)).fetchall() == [("assist", 2), ("audit", 2)]
        assert ("zoë", "assist") not in after and ("café", "assist") not in after
        assert after[("cafe", "assist")] == 1
        assert after[("oncal", "audit")] == 1 and ("oncal", "audit") not in before
        # Every other count as it was.
        changed = {lexeme for lexeme, _ in set(before) ^ set(after)}
        changed |= {lexeme for lexeme, p in before if before[lexeme, p] != after.get((lexeme, p))}
        assert changed == {"zoë", "zoe", "café", "cafe", "oncal"}
        matched = conn.execute(
            "SELECT title FROM memory WHERE search @@ plainto_tsquery('english', 'zoe')"
            " ORDER BY title"
        ).fetchall()
        assert matched == [("Tea",), ("Visitors",)]
        history = conn.execute(
            "SELECT lexeme, docs FROM history_term_stat"
            " WHERE lexeme LIKE 'chlo%' OR lexeme LIKE '%mail' ORDER BY 1"
        ).fetchall()
        assert history == [("chloe", 1), ("e-mail", 1), ("email", 1), ("mail", 1)]
    # Applied again, nothing.
    assert migrate.apply_migrations(url, "workspace") == []
