"""Workspace migration 0073_timelines_restated states the three timeline walks
whole, as the in-place patches of 0068 and 0072 left them, and changes
nothing: a database migrated through 0072 and one through 0073 hold the same
functions and dump the same schema."""

from __future__ import annotations

import subprocess
import uuid

import psycopg
import pytest
from psycopg import sql

from recallatron_devkit.localpg import _commands  # type: ignore[attr-defined]
from recallatron_devkit.stack import Stack
from services.store.infrastructure import migrate
from services.store.infrastructure.db import with_database

pytestmark = pytest.mark.integration

RESTATED = "0073_timelines_restated"
BEFORE = "0072_supersedes_seen_by_readers"
FUNCTIONS = ("workspace_timeline", "entity_member_timeline", "episode_timeline")
# Everything the catalog holds of a function that a restatement could change.
CATALOG = """
SELECT p.oid::regprocedure::text, p.prosrc, p.proconfig, p.proacl::text, p.prosecdef,
       p.provolatile, p.proparallel, p.prorettype::regtype::text, p.proargtypes::text,
       p.proargnames, p.proargmodes::text, p.prolang::regproc::text, p.proowner::regrole::text,
       obj_description(p.oid, 'pg_proc')
FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace AND p.proname = ANY(%s)
ORDER BY 1
"""


def _migrated_through(stack: Stack, last: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new database on the stack's server, migrated by the store's runner up
    to and including `last` (later files, whoever adds them, left out)."""
    name = f"ws_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = with_database(stack.database_url, name)
    files = [(v, text) for v, text in migrate.migration_files("workspace") if v <= last]
    with monkeypatch.context() as patched:
        patched.setattr(migrate, "migration_files", lambda kind: files)
        applied = migrate.apply_migrations(url, "workspace")
    assert applied[-1] == last
    return url


def _catalog(url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(CATALOG, (list(FUNCTIONS),)).fetchall()


def _schema(url: str) -> str:
    # A fixed \restrict key: pg_dump otherwise draws a new one for each dump.
    return subprocess.run(
        [
            str(_commands.POSTGRES_BIN_PATH / "pg_dump"),
            "--schema-only",
            "--restrict-key=recallatron",
            url,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def test_the_migration_restates_each_timeline_function_by_name() -> None:
    files = dict(migrate.migration_files("workspace"))
    assert RESTATED in files
    for name in FUNCTIONS:
        assert f"CREATE OR REPLACE FUNCTION {name}(" in files[RESTATED]
    # Stated whole: no definition rewritten from the catalog.
    assert "pg_get_functiondef" not in files[RESTATED]


def test_the_restated_timelines_change_nothing(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _migrated_through(stack, BEFORE, monkeypatch)
    after = _migrated_through(stack, RESTATED, monkeypatch)
    catalog = _catalog(before)
    assert [str(row[0]).split("(")[0] for row in catalog] == sorted(FUNCTIONS)
    assert _catalog(after) == catalog
    assert _schema(after) == _schema(before)
