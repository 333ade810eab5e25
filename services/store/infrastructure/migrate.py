"""Versioned migrations: numbered .sql files applied in order, each once, in
its own transaction, under an advisory lock so that two processes at once do
not collide. Applying twice is a no-op.

A kind's folder may hold a baseline, a folder named `<version>_baseline`:
the schema its earlier migrations built, defined once, in part files run in
the order of their names, with `replaces.txt` naming the versions it stands
for. A database with none of them recorded gets the whole baseline in one
transaction, which records every replaced version (so a store of the release
before it sees the database as fully migrated); a database with all of them
skips it; a database with only some is refused: the baseline cannot bring it
forward, an earlier release must. The numbered files after it apply as
before."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

import psycopg

from recallatron import deadline, errors
from services.store.infrastructure.budget import closing_and_waiting

log = logging.getLogger("recallatron.store.migrate")

# Arbitrary but fixed: serialises migrators of one database.
_LOCK_KEY = 7_401_001

_BASELINE_SUFFIX = "_baseline"
# A release that still holds every migration the workspace baseline replaces.
_RELEASE_BEFORE_BASELINE = "67a3533"


@dataclass(frozen=True)
class Baseline:
    """A folded run of migrations: its name, the versions it replaces, in
    order, and its parts' (name, sql), in order."""

    name: str
    replaces: tuple[str, ...]
    parts: tuple[tuple[str, str], ...]


class OlderThanBaseline(RuntimeError):
    """A database part of the way through the migrations a baseline replaces."""


def _folder(kind: str) -> Traversable:
    return resources.files("services.store.sql") / "migrations" / kind


def migration_files(kind: str) -> list[tuple[str, str]]:
    """(version, sql) of the numbered `control` or `workspace` migrations (for
    a kind with a baseline, those after it), in order."""
    files = sorted(
        (f for f in _folder(kind).iterdir() if f.is_file() and f.name.endswith(".sql")),
        key=lambda f: f.name,
    )
    return [(f.name.removesuffix(".sql"), f.read_text()) for f in files]


def baseline(kind: str) -> Baseline | None:
    """The kind's baseline, None when it has none."""
    found = [f for f in _folder(kind).iterdir() if f.is_dir() and f.name.endswith(_BASELINE_SUFFIX)]
    if not found:
        return None
    (folder,) = found  # one baseline a kind: a new one replaces the old
    replaces = tuple(
        line.strip() for line in (folder / "replaces.txt").read_text().splitlines() if line.strip()
    )
    parts = sorted((f for f in folder.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return Baseline(folder.name, replaces, tuple((f.name, f.read_text()) for f in parts))


def versions(kind: str) -> list[str]:
    """Every version a fully migrated database of this kind records, in
    order: those its baseline replaces, then the numbered files."""
    base = baseline(kind)
    return [*(base.replaces if base else ()), *(v for v, _ in migration_files(kind))]


def latest_version(kind: str) -> str:
    """The version a database of this kind is at once fully migrated: the
    last numbered file, or the last version the baseline replaces."""
    return versions(kind)[-1]


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


def _apply_baseline(conn: psycopg.Connection, kind: str, base: Baseline, done: set[str]) -> bool:
    """The baseline applied when none of what it replaces is recorded; True
    when it was. Refuses a database part of the way through."""
    held = done.intersection(base.replaces)
    if len(held) == len(base.replaces):
        return False
    if held:
        at = max(held)
        raise OlderThanBaseline(
            f"the {kind} database is at migration {at}, older than the baseline"
            f" {base.name} (which replaces {base.replaces[0]} .. {base.replaces[-1]}):"
            f" bring it up to {base.replaces[-1]} with a release from before the"
            f" baseline first (revision {_RELEASE_BEFORE_BASELINE} is one), then"
            " migrate it with this one"
        )
    with conn.transaction():
        for _, sql in base.parts:
            conn.execute(sql)  # trusted files
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO schema_migration (version) VALUES (%s)",
                [(version,) for version in base.replaces],
            )
    log.info("migration baseline applied", extra={"kind": kind, "version": base.name})
    return True


def apply_migrations(conninfo: str, kind: str, before: str | None = None) -> list[str]:
    """Applies what is missing; returns the versions applied now (every
    version a baseline replaces, when it was applied). ``before``: only the
    versions before it, a database left at an earlier level (to test or time
    the migration that follows)."""
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
            base = baseline(kind)
            if base is not None and _apply_baseline(conn, kind, base, done):
                applied_now.extend(base.replaces)
            for version, sql in migration_files(kind):
                if version in done or (before is not None and version >= before):
                    continue
                with conn.transaction():
                    conn.execute(sql)  # trusted files
                    conn.execute("INSERT INTO schema_migration (version) VALUES (%s)", (version,))
                log.info("migration applied", extra={"kind": kind, "version": version})
                applied_now.append(version)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return applied_now
