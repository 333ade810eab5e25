"""Moving a live workspace to another named server (docs/servers.md, Moving).

Postgres logical replication copies the database while it keeps serving:
a publication of every workspace table on the source, a subscription on a
new database of the same name on the target (schema from the migrations,
rows from the subscription's initial copy, then the stream). The cut-over
alone fences writes:

1. the fence: one transaction on the source takes EXCLUSIVE locks on every
   table, so writes wait (reads go on); a marker row committed after the
   lock, and seen on the target, proves every earlier commit arrived; the
   identity sequences are carried over;
2. the seal: the source database stops taking connections and every other
   session on it ends (the waiting writes fail, UNAVAILABLE, and clients
   retry them with their request ids);
3. the switch: the control plane records the target, and store replicas
   follow within their workspace cache (settings_cache_seconds); under the
   placement lock, refused when the target's drain was acknowledged first
   (the move is then rolled back: the target never served);
4. clean-up: the subscription and slot go; the source database is dropped,
   or kept renamed with ``keep_source`` (and recorded: services/store/domain/kept_copies.py).

Each step is recorded in `workspace_move`; a rerun after a kill finishes a
move that got as far as the seal and rolls back one that did not, so the
workspace is always served from exactly one database."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NoReturn

import psycopg
from psycopg import sql
from psycopg.errors import DeadlockDetected, LockNotAvailable

from recallatron import errors
from services.store.domain import move_copy
from services.store.domain.control import ControlPlane
from services.store.domain.kept_copies import KeptCopies
from services.store.domain.placement import DrainedMeanwhile, Placement
from services.store.infrastructure import migrate
from services.store.infrastructure.db import Databases
from services.store.infrastructure.servers import unknown_server, with_inline_password
from services.store.sql import move_queries as q

# Longest the cut-over waits for the target to catch up before giving up
# (the move is then rolled back, the source serving throughout).
CATCH_UP_SECONDS = 30.0
# Before the fence: markers until one arrives this fast (or this many tried).
CLOSE_ENOUGH_SECONDS = 0.2
CATCH_UP_ROUNDS = 30
# The fence takes its locks in short tries: a write may hold one table and
# want another the fence holds, and a try that gives up long before
# Postgres's deadlock check (deadlock_timeout, 1 s) means the write is never
# the one cancelled: it only waits a moment.
LOCK_TIMEOUT = "50ms"
LOCK_TRIES = 400
# For tests of interrupted moves: stop (and wait to be killed) after this step.
PAUSE_ENV = "RECALLATRON_MOVE_PAUSE_AFTER"
MARKER_TABLE = "recallatron_move_marker"


@dataclass
class MoveReport:
    workspace: str
    source: str
    target: str
    copied_seconds: float = 0.0
    fence_seconds: float = 0.0
    total_seconds: float = 0.0
    resumed_from: str = ""
    rolled_back: bool = False


def _names(workspace_id: str) -> tuple[str, str]:
    """(publication, subscription and slot) names of one workspace's move."""
    short = uuid.UUID(workspace_id).hex
    return "recallatron_move", f"recallatron_move_{short}"


class Mover:
    def __init__(
        self,
        dbs: Databases,
        control: ControlPlane,
        log: Callable[[str], None] = lambda _msg: None,
    ) -> None:
        self.dbs = dbs
        self.control = control
        self.log = log

    # -- connections -----------------------------------------------------

    @contextmanager
    def _conn(self, server: str, database: str = "postgres") -> Iterator[psycopg.Connection]:
        with psycopg.connect(self.dbs.database_url(server, database), autocommit=True) as conn:
            yield conn

    def _control(self) -> AbstractContextManager[psycopg.Connection]:
        return self.dbs.control_conn()

    def _step(self, name: str) -> None:
        self.log(f"step: {name}")
        if os.environ.get(PAUSE_ENV) == name:
            while True:  # a test kills us here
                time.sleep(1)

    # -- the move -----------------------------------------------------------

    def move(self, workspace_id: str, target: str, keep_source: bool = False) -> MoveReport:
        # A configured name (the default server too, by its name), or
        # INVALID_ARGUMENT naming `to`: '' would mean the default server.
        if target not in self.dbs.servers.names:
            raise errors.InvalidArgument("to", unknown_server(target, self.dbs.servers.names))
        # One mover per workspace: a rerun while another still runs would
        # otherwise take its move for an interrupted one. The lock is the
        # session's, so a killed mover's goes with its connection.
        with psycopg.connect(self.dbs.control_url(), autocommit=True) as guard:
            row = guard.execute(q.TRY_MOVE_LOCK, (workspace_id,)).fetchone()
            if row is None or not row[0]:
                # A deletion holds it too: it drops the database it found,
                # and a copy made meanwhile would be left, named by nothing.
                deleting = guard.execute(q.DELETION_UNDER_WAY, (workspace_id,)).fetchone()
                if deleting is not None and deleting[0]:
                    raise errors.FailedPrecondition("workspace: it is being deleted", "workspace")
                raise errors.FailedPrecondition(
                    "workspace: another move of this workspace is running", "workspace"
                )
            return self._move(workspace_id, target, keep_source)

    def _move(self, workspace_id: str, target: str, keep_source: bool) -> MoveReport:
        began = time.monotonic()
        self.control.settings(workspace_id, fresh=True)  # the record as it is now
        ws = self.control.workspace(workspace_id)
        with self._control() as conn:
            row = conn.execute(q.MOVE_OF, (workspace_id,)).fetchone()
        report = MoveReport(ws.slug, ws.server, target)
        if row is not None:
            source, recorded_target, state = row
            report.source, report.resumed_from = source, state
            if state == "copying":
                self.log(f"an interrupted move to {recorded_target} did not reach the seal")
                self.rollback(workspace_id, ws.database_name, source, recorded_target)
                report.rolled_back = True
            else:
                if recorded_target != target:
                    raise errors.FailedPrecondition(
                        f"to: the interrupted move to {recorded_target!r} is past its seal; "
                        "rerun it with that target",
                        "to",
                    )
                self.log(f"finishing the interrupted move (state {state})")
                if state == "sealed":
                    try:
                        self._switch(workspace_id, source, target)
                    except DrainedMeanwhile:
                        self._refuse_drained(workspace_id, ws.database_name, source, target)
                self._clean_up(workspace_id, ws.database_name, source, target, keep_source)
                report.total_seconds = time.monotonic() - began
                return report
        ws = self.control.workspace(workspace_id)
        if ws.server == target:
            raise errors.FailedPrecondition(f"to: the workspace is on {target!r} already", "to")
        # A draining server takes no workspace, new or moved: refused here
        # before any work, and at the switch should it drain meanwhile.
        if any(s.name == target and s.draining for s in self.control.servers()):
            raise errors.FailedPrecondition(
                f"to: {target!r} is draining; mark it open again first "
                "(recallatron servers undrain)",
                "to",
            )
        # Asked before anything is recorded: a target that does not answer
        # leaves no move to undo, and two names of one server would have the
        # "copy" meet (and its undo drop) the workspace's own database.
        self.dbs.ensure_server(target)
        if self._system_id(ws.server) == self._system_id(target):
            raise errors.FailedPrecondition(
                f"to: {ws.server!r} and {target!r} name one Postgres server; the workspace "
                "is on it already (to stop using a name, map it to the other's URL and keep "
                "the record, or move to another server)",
                "to",
            )
        with self._conn(ws.server) as conn:
            move_copy.check_replication_room(conn, ws.server)
        report.source = ws.server
        try:
            self._copy(workspace_id, ws.database_name, ws.server, target)
            report.copied_seconds = time.monotonic() - began
            report.fence_seconds = self._cut_over(workspace_id, ws.database_name, ws.server, target)
        except DrainedMeanwhile:
            self._refuse_drained(workspace_id, ws.database_name, ws.server, target)
        except BaseException:  # SIGTERM and Ctrl-C too (the CLI makes both KeyboardInterrupt)
            with self._control() as conn:
                row = conn.execute(q.MOVE_OF, (workspace_id,)).fetchone()
            if row is not None and row[2] == "copying":
                # Not sealed: the source never stopped serving; undo the copy.
                self.rollback(workspace_id, ws.database_name, ws.server, target)
            raise
        self._clean_up(workspace_id, ws.database_name, ws.server, target, keep_source)
        report.total_seconds = time.monotonic() - began
        return report

    def _system_id(self, server: str) -> int:
        """The server's own identity (its cluster's system identifier): two
        names, or two URLs, of one server answer the same."""
        with self._conn(server) as conn:
            row = conn.execute(q.SYSTEM_ID).fetchone()
        assert row is not None
        return int(row[0])

    def _copy(self, workspace_id: str, database: str, source: str, target: str) -> None:
        publication, subscription = _names(workspace_id)
        with self._control() as conn:
            conn.execute(q.INSERT_MOVE, (workspace_id, source, target))
        self._step("recorded")
        # Both sides at the same schema: the source's migrations first.
        self.dbs.migrate_workspace(source, database)
        self._replace_left_copy(workspace_id, target, database)
        with self._conn(target) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        migrate.apply_migrations(self.dbs.database_url(target, database), "workspace")
        with self._conn(source, database) as conn:
            conn.execute(q.CREATE_MARKER)
            for (table,) in conn.execute(q.NO_REPLICA_IDENTITY).fetchall():
                conn.execute(
                    sql.SQL("ALTER TABLE {} REPLICA IDENTITY FULL").format(sql.Identifier(table))
                )
            tables = [r[0] for r in conn.execute(q.PUBLISHED_TABLES).fetchall()]
            if not conn.execute(q.PUBLICATION_EXISTS, (publication,)).fetchone():
                conn.execute(
                    sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(
                        sql.Identifier(publication),
                        sql.SQL(", ").join(sql.Identifier(t) for t in tables),
                    )
                )
        with self._conn(target, database) as conn:
            conn.execute(q.CREATE_MARKER)
            # The migrations seed some rows (statistics); the copy brings
            # them. As replication applies rows: no triggers (write-once
            # tables refuse a TRUNCATE from their own triggers).
            conn.execute(q.AS_REPLICA)
            conn.execute(
                sql.SQL("TRUNCATE {} CASCADE").format(
                    sql.SQL(", ").join(sql.Identifier(t) for t in tables)
                )
            )
            source_url = with_inline_password(self.dbs.database_url(source, database))
            # The statement holds the source's password: kept out of this
            # server's log should it fail, and out of pg_stat_activity.
            move_copy.quiet(conn)
            conn.execute(
                sql.SQL(
                    "CREATE SUBSCRIPTION {} CONNECTION {} PUBLICATION {} "
                    "WITH (slot_name = {}, copy_data = true)"
                ).format(
                    sql.Identifier(subscription),
                    sql.Literal(source_url),
                    sql.Identifier(publication),
                    sql.Literal(subscription),
                )
            )
        self._step("copying")
        with self._conn(target, database) as conn:
            move_copy.wait_copied(conn, subscription, len(tables))
        self._step("copied")

    def _replace_left_copy(self, workspace_id: str, target: str, database: str) -> None:
        """What an earlier move, rolled back while this target did not answer,
        left here under the database's own name (recorded as a kept copy)
        dropped, so that the copy is made afresh rather than refused."""
        copies = KeptCopies(self.dbs)
        left = copies.drop(
            [c for c in copies.listed(workspace_id) if (c.server, c.database) == (target, database)]
        )
        if left:
            raise errors.Unavailable(f"to: a copy an earlier move left: {left[0].why}")

    def _cut_over(self, workspace_id: str, database: str, source: str, target: str) -> float:
        """Fence, catch up, seal, switch; the seconds writes were held."""
        with self._conn(source, database) as tables_conn:
            tables = [r[0] for r in tables_conn.execute(q.PUBLISHED_TABLES).fetchall()]
        # The marker is written while the fence holds the others.
        tables = [t for t in tables if t != MARKER_TABLE]
        # Close the gap first, unfenced: the fence then waits only for the
        # writes of the last round trip, not for a backlog.
        for _ in range(CATCH_UP_ROUNDS):
            if self._marker_round_trip(source, target, database) < CLOSE_ENOUGH_SECONDS:
                break
        # A drain known by now refuses before any write is held or cut off
        # (the switch asks again, under the placement lock).
        with self._control() as conn:
            if Placement.is_draining(conn, target):
                raise DrainedMeanwhile(target)
        fence = psycopg.connect(self.dbs.database_url(source, database))
        try:
            fenced_at = self._fence(fence, tables)
            self._marker_round_trip(source, target, database)
            with self._conn(target, database) as conn:
                # Identity columns go on where the source stopped.
                for name, value in fence.execute(q.SEQUENCES).fetchall():
                    conn.execute(q.SET_SEQUENCE, (name, value))
            self._step("fenced")
            self._seal(source, database, keep=[int(fence.info.backend_pid)])
            with self._control() as conn:
                conn.execute(q.SET_MOVE_STATE, ("sealed", workspace_id))
            self._step("sealed")
            self._switch(workspace_id, source, target)
            return time.monotonic() - fenced_at
        finally:
            # Before the seal this lifts the fence and the source serves on;
            # after it, nothing is left to write there.
            fence.close()

    def _marker_round_trip(self, source: str, target: str, database: str) -> float:
        """Seconds until a marker committed on the source now is applied on
        the target: every commit before it has been applied then."""
        began = time.monotonic()
        token = str(uuid.uuid4())
        with self._conn(source, database) as conn:
            conn.execute(q.WRITE_MARKER, (token,))
        with self._conn(target, database) as conn:
            while True:
                row = conn.execute(q.READ_MARKER).fetchone()
                if row is not None and row[0] == token:
                    return time.monotonic() - began
                if time.monotonic() - began > CATCH_UP_SECONDS:
                    raise errors.Unavailable("the target did not catch up in time")
                time.sleep(0.01)

    def _fence(self, fence: psycopg.Connection, tables: list[str]) -> float:
        lock = sql.SQL("LOCK TABLE {} IN EXCLUSIVE MODE").format(
            sql.SQL(", ").join(sql.Identifier(t) for t in tables)
        )
        for attempt in range(LOCK_TRIES):
            try:
                fence.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT)))
                fence.execute(lock)
                return time.monotonic()
            except (LockNotAvailable, DeadlockDetected):
                fence.rollback()
                if attempt % 20 == 19:
                    self.log(f"fence: writes hold the tables; still trying ({attempt + 1})")
        raise errors.Unavailable("fence: could not lock the workspace's tables")

    def _seal(self, source: str, database: str, keep: list[int]) -> None:
        """No new session on the source database; every other one ends."""
        with self._conn(source) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS false").format(
                    sql.Identifier(database)
                )
            )
            while True:
                conn.execute(q.TERMINATE_OTHERS, (database, keep))
                row = conn.execute(q.OTHERS_CONNECTED, (database, keep)).fetchone()
                if row is not None and row[0] == 0:
                    return
                time.sleep(0.02)

    def _switch(self, workspace_id: str, source: str, target: str) -> None:
        """DrainedMeanwhile when the target's drain was acknowledged first:
        the drain mark changes under the same lock, so none lands after it."""
        placement = Placement(self.dbs)
        with placement.locked() as conn:
            drained = placement.is_draining(conn, target)
            if drained:
                # Undone, by a rerun too ('copying' is rolled back): the
                # target never served, so the source has every write.
                conn.execute(q.SET_MOVE_STATE, ("copying", workspace_id))
            else:
                conn.execute(q.SWITCH_WORKSPACE, (target, workspace_id, source))
                row = conn.execute(q.WORKSPACE_SERVER, (workspace_id,)).fetchone()
                if row is None or row[0] != target:
                    raise errors.FailedPrecondition(
                        "the workspace's record changed during the move"
                    )
                conn.execute(q.SET_MOVE_STATE, ("switched", workspace_id))
                conn.execute(q.FORGET_KEPT_COPY_SERVING, (workspace_id,))
                conn.execute(q.NOTIFY_MOVED, (workspace_id,))
        if drained:
            raise DrainedMeanwhile(target)
        self.control.settings(workspace_id, fresh=True)
        # Rows queued at the source came along: the job looks at the new place.
        self.control.mark_work(workspace_id)
        self._step("switched")

    def _clean_up(
        self, workspace_id: str, database: str, source: str, target: str, keep_source: bool
    ) -> None:
        _, subscription = _names(workspace_id)
        self._drop_subscription(target, database, subscription)
        with self._conn(target, database) as conn:
            conn.execute(q.DROP_MARKER)
        self._drop_slot(source, subscription)
        with self._conn(source) as conn:
            if conn.execute(q.DATABASE_EXISTS, (database,)).fetchone():
                if keep_source:
                    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
                    kept = f"{database}_moved_{stamp}"
                    # Recorded first: a deletion of the workspace drops it.
                    KeptCopies(self.dbs).record(source, kept, workspace_id)
                    conn.execute(
                        sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                            sql.Identifier(database), sql.Identifier(kept)
                        )
                    )
                else:
                    conn.execute(
                        sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database))
                    )
        with self._control() as conn:
            conn.execute(q.DELETE_MOVE, (workspace_id,))
        self.dbs.forget_pools(source, database)
        self._step("done")

    # -- rolling back ------------------------------------------------------------

    def _refuse_drained(
        self, workspace_id: str, database: str, source: str, target: str
    ) -> NoReturn:
        self.log(f"{target!r} was marked draining before the move's switch; rolling back")
        self.rollback(workspace_id, database, source, target)
        raise errors.FailedPrecondition(
            f"to: {target!r} was marked draining before the move's switch; the move was rolled "
            f"back and the workspace stays on {source!r} (recallatron servers undrain {target}, "
            "then move it again)",
            "to",
        )

    def rollback(self, workspace_id: str, database: str, source: str, target: str) -> None:
        """Undoes a move that did not reach its seal: the source serves again
        and nothing of the move is left on either server."""
        publication, subscription = _names(workspace_id)
        try:
            with self._conn(target) as conn:
                on_target = conn.execute(q.DATABASE_EXISTS, (database,)).fetchone()
            if on_target and target != source:
                self._drop_subscription(target, database, subscription)
                with self._conn(target) as conn:
                    conn.execute(
                        sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(database))
                    )
                # Left there by an earlier rollback, and gone now.
                with self._control() as conn:
                    conn.execute(q.FORGET_KEPT_COPY, (target, database))
        except (psycopg.OperationalError, errors.InvalidArgument):
            # A target that no longer answers (or is no longer configured)
            # keeps what the move made there (the source serves on, and the
            # move's record goes): the workspace must not be stuck behind a
            # server that is gone. The copy is recorded, so that deleting
            # the workspace drops it (or names it left, its server unknown).
            if target != source:
                KeptCopies(self.dbs).record(target, database, workspace_id)
            self.log(
                f"rollback: {target!r} does not answer; what the move made there (database "
                f"{database}) is recorded as a kept copy: deleting the workspace or "
                "`recallatron servers drop-kept --workspace` drops it"
            )
        with self._conn(source) as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} WITH ALLOW_CONNECTIONS true").format(
                    sql.Identifier(database)
                )
            )
        self._drop_slot(source, subscription)
        with self._conn(source, database) as conn:
            conn.execute(
                sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(publication))
            )
            conn.execute(q.DROP_MARKER)
        with self._control() as conn:
            conn.execute(q.DELETE_MOVE, (workspace_id,))
        self.log("rolled back: the source serves as before")

    def _drop_subscription(self, target: str, database: str, subscription: str) -> None:
        """Without touching the source (it may be sealed): the slot is dropped
        there separately."""
        with self._conn(target) as conn:
            if not conn.execute(q.DATABASE_EXISTS, (database,)).fetchone():
                return
        with self._conn(target, database) as conn:
            if not conn.execute(q.SUBSCRIPTION_EXISTS, (subscription,)).fetchone():
                return
            name = sql.Identifier(subscription)
            conn.execute(sql.SQL("ALTER SUBSCRIPTION {} DISABLE").format(name))
            conn.execute(sql.SQL("ALTER SUBSCRIPTION {} SET (slot_name = NONE)").format(name))
            conn.execute(sql.SQL("DROP SUBSCRIPTION {}").format(name))

    def _drop_slot(self, source: str, slot: str) -> None:
        with self._conn(source) as conn:
            move_copy.drop_slot(conn, slot)
