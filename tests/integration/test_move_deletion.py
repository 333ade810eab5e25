"""Deleting a workspace and moving it exclude each other (docs/servers.md,
Moving; docs/reliability.md, Deleting a workspace): a deletion while a move
runs is refused, and so is a move while a deletion runs, so that neither
leaves a copy of the database on a server the control plane no longer
names. Driven in this process (the store's own ControlPlane, Mover and
WorkspaceDeletion) on two embedded Postgres servers, each ordering held by
a hook at the step where the other party came in."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from recallatron import errors
from recallatron_devkit.localpg import LocalPostgres
from services.store.domain import move_copy
from services.store.domain.control import ControlPlane
from services.store.domain.control_records import Workspace
from services.store.domain.deletion import WorkspaceDeletion
from services.store.domain.kept_copies import KeptCopies
from services.store.domain.moving import Mover
from services.store.infrastructure.db import Databases
from services.store.settings import StoreSettings
from tests.two_servers import before_step
from tests.two_servers import servers as servers  # the fixture
from tests.two_servers import store as store  # the fixture

pytestmark = pytest.mark.integration


def databases_named(servers: dict[str, LocalPostgres], database: str) -> list[str]:
    """The servers that hold a database of that name."""
    held = []
    for name, pg in servers.items():
        with psycopg.connect(pg.url) as conn:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchall():
                held.append(name)
    return held


def test_a_deletion_while_a_move_runs_is_refused(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A move past its start but with nothing recorded yet (checking the
    source's room): a deletion then found no move record and dropped the
    database under it."""
    dbs, control = store
    ws = control.create_workspace(f"moving-{uuid.uuid4().hex[:8]}", "default")
    refusals: list[errors.FailedPrecondition] = []
    original = move_copy.check_replication_room

    def delete_meanwhile(conn: psycopg.Connection, server: str) -> None:
        try:
            WorkspaceDeletion(dbs, control).delete(ws.id, ws.slug)
        except errors.FailedPrecondition as exc:
            refusals.append(exc)
        original(conn, server)

    monkeypatch.setattr(move_copy, "check_replication_room", delete_meanwhile)
    Mover(dbs, control).move(ws.id, "b")
    assert [(e.subject, "a move of it is under way" in e.message) for e in refusals] == [
        ("workspace", True)
    ], refusals
    assert control.workspace(ws.id, fresh=True).server == "b"
    assert databases_named(servers, ws.database_name) == ["b"]
    # Once the move is done, the deletion goes through, on the new server.
    monkeypatch.undo()
    WorkspaceDeletion(dbs, control).delete(ws.id, ws.slug)
    assert databases_named(servers, ws.database_name) == []


def test_a_move_while_a_deletion_runs_is_refused(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A move started as a deletion came to its drop (past its check for a
    move) ran to its end on the target; the deletion then dropped the
    source's database, already gone, and the target's copy was left, named
    by nothing."""
    dbs, control = store
    ws = control.create_workspace(f"deleting-{uuid.uuid4().hex[:8]}", "default")
    refusals: list[errors.FailedPrecondition] = []
    original = Databases.drop_database

    def move_meanwhile(self: Databases, server: str, database: str) -> None:
        try:
            Mover(dbs, control).move(ws.id, "b")
        except errors.FailedPrecondition as exc:
            refusals.append(exc)
        original(self, server, database)

    monkeypatch.setattr(Databases, "drop_database", move_meanwhile)
    WorkspaceDeletion(dbs, control).delete(ws.id, ws.slug)
    assert databases_named(servers, ws.database_name) == []
    assert [(e.subject, "being deleted" in e.message) for e in refusals] == [("workspace", True)], (
        refusals
    )


def kept_copies_of(servers: dict[str, LocalPostgres], database: str) -> list[tuple[str, str]]:
    """(server, database) of every copy a move kept of ``database``."""
    held = []
    for name, pg in servers.items():
        with psycopg.connect(pg.url) as conn:
            for (kept,) in conn.execute(
                "SELECT datname FROM pg_database WHERE datname LIKE %s ORDER BY datname",
                (f"{database}_moved_%",),
            ).fetchall():
                held.append((name, kept))
    return held


def test_a_deletion_drops_the_copies_moves_kept(
    servers: dict[str, LocalPostgres], store: tuple[Databases, ControlPlane]
) -> None:
    """A move with keep_source renamed the old database on its server, and a
    deletion dropped only the workspace's current database: the kept copy,
    its text included, outlived the deletion."""
    dbs, control = store
    ws = control.create_workspace(f"kept-{uuid.uuid4().hex[:8]}", "default")
    Mover(dbs, control).move(ws.id, "b", keep_source=True)
    Mover(dbs, control).move(ws.id, "default", keep_source=True)
    kept = kept_copies_of(servers, ws.database_name)
    assert [server for server, _ in kept] == ["default", "b"], kept
    deleted = WorkspaceDeletion(dbs, control).delete(ws.id, ws.slug)
    assert kept_copies_of(servers, ws.database_name) == []
    assert deleted.copies_left == []
    assert databases_named(servers, ws.database_name) == []


def test_a_kept_copy_whose_server_does_not_answer_is_dropped_later(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The copy's server down at the deletion: the workspace is deleted all
    the same, the answer names the copy left, and `recallatron servers
    drop-kept` drops it once the server answers."""
    dbs, control = store
    ws = control.create_workspace(f"kept-{uuid.uuid4().hex[:8]}", "default")
    Mover(dbs, control).move(ws.id, "b", keep_source=True)
    [(_, kept)] = kept_copies_of(servers, ws.database_name)
    original = Databases.drop_database

    def down(self: Databases, server: str, database: str) -> None:
        if database == kept:
            raise psycopg.OperationalError("connection refused")
        original(self, server, database)

    monkeypatch.setattr(Databases, "drop_database", down)
    deleted = WorkspaceDeletion(dbs, control).delete(ws.id, ws.slug)
    assert deleted.copies_left == [f"default/{kept}"]
    assert databases_named(servers, ws.database_name) == []
    monkeypatch.undo()

    from recallatron_cli.main import main

    monkeypatch.setenv("RECALLATRON_DATABASE_URL", servers["default"].url)
    monkeypatch.setenv("RECALLATRON_APP_PASSWORD", servers["default"].app_password)
    monkeypatch.setenv("RECALLATRON_APP_PASSWORD_SCRAM_ITERATIONS", "1")
    monkeypatch.setenv("RECALLATRON_POSTGRES_SERVERS", f"b={servers['b'].url}")
    assert main(["servers", "kept"]) == 0
    listed = capsys.readouterr().out
    assert f"default\t{kept}\tdeleted workspace {ws.id}" in listed, listed
    assert main(["servers", "drop-kept"]) == 0
    assert f"dropped default/{kept}" in capsys.readouterr().out
    assert kept_copies_of(servers, ws.database_name) == []
    assert main(["servers", "kept"]) == 0
    assert kept not in capsys.readouterr().out


def roll_back_while_the_target_does_not_answer(
    dbs: Databases, control: ControlPlane, ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A move of ``ws`` to `b` that fails before its seal as `b` stops
    answering: rolled back, the copy it made on `b` left there."""
    original = Mover._conn
    target_down = False

    def conn(mover: Mover, server: str, database: str = "postgres") -> object:
        if target_down and server == "b":
            raise psycopg.OperationalError("connection refused")
        return original(mover, server, database)

    def fail_before_the_seal() -> None:
        nonlocal target_down
        target_down = True
        raise errors.Unavailable("the target did not catch up in time")

    monkeypatch.setattr(Mover, "_conn", conn)
    before_step(monkeypatch, "copied", fail_before_the_seal)
    with pytest.raises(errors.Unavailable):
        Mover(dbs, control).move(ws.id, "b")
    monkeypatch.undo()


def test_a_deletion_drops_what_a_rolled_back_move_left_on_a_target_that_did_not_answer(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A move rolled back while its target did not answer leaves the copy it
    made there (the source serves on); the copy was named by nothing, so a
    deletion of the workspace left it, text included, on the target."""
    dbs, control = store
    ws = control.create_workspace(f"left-{uuid.uuid4().hex[:8]}", "default")
    roll_back_while_the_target_does_not_answer(dbs, control, ws, monkeypatch)
    assert control.workspace(ws.id, fresh=True).server == "default"
    assert sorted(databases_named(servers, ws.database_name)) == ["b", "default"]
    WorkspaceDeletion(dbs, control).delete(ws.id, ws.slug)
    assert databases_named(servers, ws.database_name) == []


def test_a_later_move_to_that_target_replaces_what_a_rolled_back_move_left(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The copy a rolled-back move left on a target that did not answer
    holds the workspace's own database name there: the next move to that
    target failed at its CREATE DATABASE ("already exists"), dropping the
    copy only in its own rollback."""
    dbs, control = store
    ws = control.create_workspace(f"again-{uuid.uuid4().hex[:8]}", "default")
    roll_back_while_the_target_does_not_answer(dbs, control, ws, monkeypatch)
    Mover(dbs, control).move(ws.id, "b")
    assert control.workspace(ws.id, fresh=True).server == "b"
    assert databases_named(servers, ws.database_name) == ["b"]
    assert KeptCopies(dbs).listed(ws.id) == []


@pytest.mark.parametrize("target", ["configured", "no longer configured"])
def test_a_deletion_rolls_back_a_move_whose_mover_died_before_the_seal(
    servers: dict[str, LocalPostgres],
    store: tuple[Databases, ControlPlane],
    monkeypatch: pytest.MonkeyPatch,
    target: str,
) -> None:
    """A mover killed while copying leaves its record at `copying`, the
    source serving: the deletion was refused ("a move of it is under way;
    finish it first") with no move running, until someone moved the
    workspace afresh; with the target gone from the settings not even that
    (the rerun's rollback met "unknown server 'b'"), so never."""
    dbs, control = store
    ws = control.create_workspace(f"dead-{uuid.uuid4().hex[:8]}", "default")

    def killed() -> None:
        # No rollback: a killed mover runs none.
        monkeypatch.setattr(Mover, "rollback", lambda *_args: None)
        raise KeyboardInterrupt

    before_step(monkeypatch, "copied", killed)
    with pytest.raises(KeyboardInterrupt):
        Mover(dbs, control).move(ws.id, "b")
    monkeypatch.undo()
    assert sorted(databases_named(servers, ws.database_name)) == ["b", "default"]
    if target == "configured":
        deleted = WorkspaceDeletion(dbs, control).delete(ws.id, ws.slug)
        assert deleted.copies_left == []
        assert databases_named(servers, ws.database_name) == []
        return
    only_default = Databases(
        StoreSettings(
            database_url=servers["default"].url,
            app_password=servers["default"].app_password,
            app_password_scram_iterations=1,
        )
    )
    only_default.bootstrap()
    try:
        deleted = WorkspaceDeletion(only_default, ControlPlane(only_default)).delete(ws.id, ws.slug)
    finally:
        only_default.close()
    # The copy on the server no longer configured is named, and recorded.
    assert deleted.copies_left == [f"b/{ws.database_name}"]
    assert databases_named(servers, ws.database_name) == ["b"]
    assert [str(c) for c in KeptCopies(dbs).listed(ws.id)] == [f"b/{ws.database_name}"]
    KeptCopies(dbs).drop(KeptCopies(dbs).listed(ws.id))
    assert databases_named(servers, ws.database_name) == []
