"""Operator commands stopped part way (Ctrl-C, SIGTERM) on the real stack:
each ends with one line saying what happened and how to go on, never a
traceback, with 128 + the signal's number as a shell reports a stopped
command; what it leaves lets the same command run again (docs/export.md,
docs/design.md on migrate-db)."""

from __future__ import annotations

import signal
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.domain.archive_export import Exporter
from services.store.domain.control import ControlPlane
from services.store.infrastructure import migrate
from services.store.infrastructure.db import CONTROL_DATABASE
from tests import dbutil
from tests.clirun import cli, start
from tests.conftest import WAIT_SECONDS, Team, wait_for

pytestmark = pytest.mark.integration

WAITING_ON_A_LOCK = """
SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND datname = %s AND query ILIKE %s
"""


def waiting(admin: psycopg.Connection, database: str, query: str) -> bool:
    row = admin.execute(WAITING_ON_A_LOCK, (database, query)).fetchone()
    return row is not None and row[0] > 0


def stopped(
    proc: subprocess.Popen[str], sig: int, release: ExitStack, hold: bool = False
) -> tuple[int, str]:
    """``proc`` sent ``sig``, the test's locks released then (``hold``: only
    once it has ended); its exit status and stderr."""
    proc.send_signal(sig)
    if not hold:
        release.close()
    try:
        _, err = proc.communicate(timeout=WAIT_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"the command did not end after {sig!r}: {err}") from None
    finally:
        release.close()
    return proc.returncode, err


def assert_one_line(code: int, err: str, sig: int) -> None:
    assert "Traceback" not in err, err
    assert code == 128 + sig, (code, err)
    assert err.strip().splitlines()[-1].startswith("error: "), err


@contextmanager
def locked(url: str, statement: str) -> Iterator[None]:
    """``statement`` (a lock) held in an open transaction until leaving."""
    with psycopg.connect(url) as conn:
        conn.execute(statement)
        yield
        conn.rollback()


def test_an_import_stopped_by_sigterm_removes_what_it_made_and_says_so(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    team.clients["ada"].remember("Heron count", "Twelve herons on the lake today.")
    out = tmp_path / "archive"
    assert cli(stack, "export", "--workspace", team.slug, "--out", str(out)).returncode == 0
    slug = f"stop-{uuid.uuid4().hex[:10]}"
    control = dbutil.workspace_url(stack, CONTROL_DATABASE)
    release = ExitStack()
    # The import has made the workspace and waits to make its first member.
    release.enter_context(locked(control, "LOCK TABLE member IN SHARE ROW EXCLUSIVE MODE"))
    proc = start(stack, "import", str(out), "--as", slug)
    with psycopg.connect(control, autocommit=True) as admin:
        wait_for(lambda: waiting(admin, CONTROL_DATABASE, "%INSERT INTO member%"), "the import")
        code, err = stopped(proc, signal.SIGTERM, release)
        assert_one_line(code, err, signal.SIGTERM)
        assert admin.execute("SELECT 1 FROM workspace WHERE slug = %s", (slug,)).fetchall() == []
    again = cli(stack, "import", str(out), "--as", slug)
    assert again.returncode == 0, again.stderr


def test_an_export_stopped_by_sigterm_says_so_and_runs_again_into_the_same_directory(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    team.clients["ada"].remember("Heron count", "Twelve herons on the lake today.")
    out = tmp_path / "archive"
    release = ExitStack()
    database = dbutil.workspace_url(stack, team.database_name)
    release.enter_context(locked(database, "LOCK TABLE memory IN ACCESS EXCLUSIVE MODE"))
    proc = start(stack, "export", "--workspace", team.slug, "--out", str(out))
    with psycopg.connect(database, autocommit=True) as admin:
        # Its count of each table's rows (the embedding job may wait on the lock too).
        wait_for(lambda: waiting(admin, team.database_name, "%FROM episode%"), "the export")
    code, err = stopped(proc, signal.SIGTERM, release)
    assert_one_line(code, err, signal.SIGTERM)
    again = cli(stack, "export", "--workspace", team.slug, "--out", str(out))
    assert again.returncode == 0, again.stderr


def test_an_export_stopped_after_some_files_leaves_none_of_them(
    stack: Stack, team: Team, tmp_path: Path
) -> None:
    """Stopped (the signal arriving after its first rows were written), an
    export takes back what it wrote: the directory it made is gone, so the
    same command runs again, and no partial archive is left to be mistaken
    for one."""
    team.clients["ada"].remember("Heron count", "Twelve herons on the lake today.")
    out = tmp_path / "new" / "archive"

    def interrupted(_rows: int) -> None:
        raise KeyboardInterrupt

    with dbutil.store_databases(stack) as dbs:
        exporter = Exporter(dbs, ControlPlane(dbs))
        with pytest.raises(KeyboardInterrupt):
            exporter.export(team.workspace_id, out, on_rows=interrupted)
        assert not out.exists()
        given = tmp_path / "given"
        given.mkdir()
        with pytest.raises(KeyboardInterrupt):
            exporter.export(team.workspace_id, given, on_rows=interrupted)
        # A directory given empty stays, empty again.
        assert given.is_dir() and list(given.iterdir()) == []
        exporter.export(team.workspace_id, out)
    assert (out / "manifest.json").is_file()


def test_migrate_db_stopped_while_a_migration_waits_ends_and_resumes(
    stack: Stack, operator: Client
) -> None:
    """Ctrl-C stops migrate-db at once, a migration under way included (each
    database migrates in its own transactions, so what it had not committed is
    rolled back): it used to wait for every migration queued, one of them
    waiting here for a lock, before ending with a traceback."""
    slugs = [f"mig-{uuid.uuid4().hex[:10]}" for _ in range(2)]
    for slug in slugs:
        operator.create_workspace(slug)
    control = dbutil.workspace_url(stack, CONTROL_DATABASE)
    # Only this test's two workspaces are below the current level, so the run
    # meets no other test's (the session's stack holds hundreds by now).
    with psycopg.connect(control, autocommit=True) as ctl:
        databases = [
            r[0]
            for r in ctl.execute(
                "UPDATE workspace SET schema_version = NULL WHERE slug = ANY(%s)"
                " RETURNING database_name",
                (slugs,),
            )
        ]
    assert len(databases) == 2
    release = ExitStack()
    for database in databases:
        conn = release.enter_context(
            psycopg.connect(dbutil.workspace_url(stack, database), autocommit=True)
        )
        conn.execute("SELECT pg_advisory_lock(%s)", (migrate._LOCK_KEY,))
    proc = start(stack, "migrate-db", "--parallel", "1")
    with psycopg.connect(control, autocommit=True) as admin:
        wait_for(
            lambda: (
                admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory'"
                    " AND datname = ANY(%s)",
                    (databases,),
                ).fetchone()
                == (1,)
            ),
            "a migration to wait for its lock",
        )
    # The locks are held until it has ended: it must not wait for them.
    code, err = stopped(proc, signal.SIGINT, release, hold=True)
    assert_one_line(code, err, signal.SIGINT)
    assert "again" in err.strip().splitlines()[-1], err
    done = cli(stack, "migrate-db")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_rebuild_stopped_keeps_the_old_vectors_and_says_so(stack: Stack, team: Team) -> None:
    """A rebuild stopped part way must not drop the vectors of other models
    (its last step, once every memory has one of the current model): it took
    SIGTERM as a request to stop draining, went on to drop them and ended 0,
    'done'."""
    made = team.clients["ada"].remember("Heron count", "Twelve herons on the lake today.")
    memory_id = made.memory.id
    vectors = "SELECT count(*) FROM memory_embedding WHERE memory_id = %s AND model_id = %s"
    wait_for(
        lambda: dbutil.query(stack, team.database_name, VECTORS_OF, (memory_id,))[0][0] > 0,
        "the memory's vector",
    )
    database = dbutil.workspace_url(stack, team.database_name)
    with psycopg.connect(database, autocommit=True) as admin:
        admin.execute(RETIRED_VECTOR, (memory_id,))
    release = ExitStack()
    release.enter_context(locked(database, "LOCK TABLE memory_embedding IN ACCESS EXCLUSIVE MODE"))
    proc = start(stack, "rebuild", "--workspace", team.slug)
    with psycopg.connect(database, autocommit=True) as admin:
        wait_for(lambda: waiting(admin, team.database_name, "%INSERT INTO embedding_job%"), "it")
    code, err = stopped(proc, signal.SIGTERM, release)
    assert_one_line(code, err, signal.SIGTERM)
    assert err.strip().splitlines()[-1].startswith("error: rebuild stopped"), err
    kept = dbutil.query(stack, team.database_name, vectors, (memory_id, "retired-model"))
    assert kept == [(1,)]
    again = cli(stack, "rebuild", "--workspace", team.slug)
    assert again.returncode == 0, again.stderr
    assert dbutil.query(stack, team.database_name, vectors, (memory_id, "retired-model")) == [(0,)]


VECTORS_OF = "SELECT count(*) FROM memory_embedding WHERE memory_id = %s"
# The memory's vector as a model no longer in use had made it.
RETIRED_VECTOR = """
INSERT INTO memory_embedding (memory_id, model_id, input_version, embedding)
SELECT memory_id, 'retired-model', input_version, embedding FROM memory_embedding
WHERE memory_id = %s LIMIT 1
"""
