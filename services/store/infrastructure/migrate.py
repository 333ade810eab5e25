"""Versioned migrations: numbered .sql files applied in order, each once, in
its own transaction, under an advisory lock so that two processes at once do
not collide. Applying twice is a no-op."""

from __future__ import annotations

import logging
from importlib import resources

import psycopg

from recallatron import deadline, errors
from services.store.infrastructure.budget import closing_and_waiting

log = logging.getLogger("recallatron.store.migrate")

# Arbitrary but fixed: serialises migrators of one database.
_LOCK_KEY = 7_401_001


def migration_files(kind: str) -> list[tuple[str, str]]:
    """(version, sql) of the `control` or `workspace` migrations, in order."""
    folder = resources.files("services.store.sql") / "migrations" / kind
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [(f.name.removesuffix(".sql"), f.read_text()) for f in files]


def latest_version(kind: str) -> str:
    """The version a database of this kind is at once fully migrated."""
    return migration_files(kind)[-1][0]


def _take_lock(conn: psycopg.Connection) -> None:
    """The migrators' lock. Inside a call (a workspace migrated on its first
    use) waited for no longer than the call's deadline, then UNAVAILABLE with
    a retry hint; elsewhere (migrate-db, start-up) for as long as it takes."""
    left = deadline.remaining()
    if left is None:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        return
    conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{max(1, int(left * 1000))}ms",))
    try:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
    except psycopg.errors.LockNotAvailable:
        raise errors.Unavailable("workspace database being migrated by another process") from None
    # The migrations themselves run to their end once begun.
    conn.execute("SELECT set_config('lock_timeout', '0', false)")


def apply_migrations(conninfo: str, kind: str) -> list[str]:
    """Applies what is missing; returns the versions applied now."""
    applied_now: list[str] = []
    # Closed only once the server ended its backend: the next admin connection
    # must not meet this one still on the server (the start-up check's count).
    with closing_and_waiting(psycopg.connect(conninfo, autocommit=True)) as conn:
        _take_lock(conn)
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migration ("
                " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migration")}
            for version, sql in migration_files(kind):
                if version in done:
                    continue
                with conn.transaction():
                    conn.execute(sql)  # trusted files
                    conn.execute("INSERT INTO schema_migration (version) VALUES (%s)", (version,))
                log.info("migration applied", extra={"kind": kind, "version": version})
                applied_now.append(version)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return applied_now
