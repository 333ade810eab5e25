"""The workspace baseline (services/store/sql/migrations/workspace/
0067_baseline): a new database gets it whole, in one transaction, recorded as
every version it replaces; a database that has them all skips it; one part of
the way through them is refused, nothing changed; numbered files after it
apply as before."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg import sql

from recallatron_devkit.stack import Stack
from services.store.infrastructure import migrate
from services.store.infrastructure.db import with_database

pytestmark = pytest.mark.integration


def _workspace_baseline() -> migrate.Baseline:
    found = migrate.baseline("workspace")
    assert found is not None
    return found


BASE = _workspace_baseline()
LATER = ("0068_probe", "CREATE TABLE probe_after_baseline (id integer PRIMARY KEY);")
# What a database holds: its tables, functions and policies, and the versions
# recorded with their times (a migration applied again would change them).
STATE = """
SELECT (SELECT array_agg(relname::text ORDER BY relname) FROM pg_class
         WHERE relnamespace = 'public'::regnamespace),
       (SELECT array_agg(oid::regprocedure::text ORDER BY 1) FROM pg_proc
         WHERE pronamespace = 'public'::regnamespace),
       (SELECT array_agg(polname::text ORDER BY polname) FROM pg_policy),
       (SELECT array_agg((version, applied_at)::text ORDER BY version) FROM schema_migration)
"""


def _new_database(stack: Stack) -> str:
    """A new, empty database on the stack's server (whose store made the app
    role the baseline's grants name), as a workspace's starts."""
    name = f"ws_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return with_database(stack.database_url, name)


@pytest.fixture
def url(stack: Stack) -> str:
    return _new_database(stack)


@pytest.fixture
def no_later_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """The baseline alone, whatever numbered files the folder holds now."""
    monkeypatch.setattr(migrate, "migration_files", lambda kind: [])


State = tuple[list[str], list[str], list[str] | None, list[str] | None]


def _state(url: str) -> State:
    with psycopg.connect(url) as conn:
        row = conn.execute(STATE).fetchone()
    assert row is not None
    return (row[0], row[1] or [], row[2], row[3])


def _recorded(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM schema_migration ORDER BY 1")]


def _record(url: str, versions: list[str]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE schema_migration ("
            " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version in versions:
            conn.execute("INSERT INTO schema_migration (version) VALUES (%s)", (version,))


def test_the_baseline_replaces_the_first_65_migrations() -> None:
    assert len(BASE.replaces) == 65
    assert (BASE.replaces[0], BASE.replaces[-1]) == ("0001_memory", "0067_not_embedded_by_audience")
    assert list(BASE.replaces) == sorted(BASE.replaces)
    assert [name for name, _ in BASE.parts] == sorted(name for name, _ in BASE.parts)


@pytest.mark.usefixtures("no_later_files")
def test_a_new_database_gets_the_baseline_recorded_as_every_version_it_replaces(
    url: str,
) -> None:
    assert migrate.latest_version("workspace") == "0067_not_embedded_by_audience"
    assert migrate.apply_migrations(url, "workspace") == list(BASE.replaces)
    assert _recorded(url) == list(BASE.replaces)
    tables, functions, policies, _ = _state(url)
    assert {"memory", "memory_embedding", "embedding_job_audience"} <= set(tables)
    assert "memories_not_embedded(integer)" in functions
    assert policies is not None and "memory_eligible" in policies


@pytest.mark.usefixtures("no_later_files")
def test_a_database_with_every_replaced_version_is_left_as_it_is(url: str) -> None:
    migrate.apply_migrations(url, "workspace")
    before = _state(url)
    assert migrate.apply_migrations(url, "workspace") == []
    assert _state(url) == before


@pytest.mark.usefixtures("no_later_files")
def test_a_database_part_of_the_way_is_refused_and_left_as_it_is(url: str) -> None:
    at = BASE.replaces.index("0025_removed_member")
    _record(url, list(BASE.replaces[: at + 1]))
    before = _state(url)
    with pytest.raises(migrate.OlderThanBaseline) as refused:
        migrate.apply_migrations(url, "workspace")
    said = str(refused.value)
    for named in ("0025_removed_member", BASE.name, "0067_not_embedded_by_audience", "67a3533"):
        assert named in said
    assert "release from before the baseline" in said
    assert _state(url) == before


@pytest.mark.usefixtures("no_later_files")
def test_the_baseline_is_one_transaction(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = migrate.Baseline(
        BASE.name, BASE.replaces, (*BASE.parts, ("99_fails.sql", "SELECT 1/0;"))
    )
    monkeypatch.setattr(migrate, "baseline", lambda kind: broken)
    with pytest.raises(psycopg.errors.DivisionByZero):
        migrate.apply_migrations(url, "workspace")
    tables, _, _, recorded = _state(url)
    assert tables == ["schema_migration", "schema_migration_pkey"]
    assert recorded is None


def test_a_numbered_file_after_the_baseline_is_applied_after_it(
    url: str, stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(migrate, "migration_files", lambda kind: [LATER])
    assert migrate.latest_version("workspace") == "0068_probe"
    # A new database: the baseline, then the file.
    assert migrate.apply_migrations(url, "workspace") == [*BASE.replaces, "0068_probe"]
    assert _recorded(url) == [*BASE.replaces, "0068_probe"]
    assert "probe_after_baseline" in _state(url)[0]
    # A database the previous release migrated: the file alone.
    current = _new_database(stack)
    monkeypatch.setattr(migrate, "migration_files", lambda kind: [])
    migrate.apply_migrations(current, "workspace")
    monkeypatch.setattr(migrate, "migration_files", lambda kind: [LATER])
    assert migrate.apply_migrations(current, "workspace") == ["0068_probe"]
    assert migrate.apply_migrations(current, "workspace") == []
