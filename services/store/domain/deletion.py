"""Deleting a workspace (design §10; docs/reliability.md, "Deleting a
workspace"). Three steps, each safe to run again:

1. its tokens are revoked and published in one control-plane transaction:
   every gateway refuses them on the next call (the revocation feed empties
   each gateway's cache);
2. its database is dropped (``WITH (FORCE)``: sessions on it end), after
   this process closed its own pools of it, and so are the copies moves
   kept of it (services/store/domain/kept_copies.py; one whose server does
   not answer is left recorded, and named in the log);
3. its control-plane rows (tokens, members, settings, work marks, the move
   record, the workspace) are deleted and a tombstone of its id, slug and
   the time is written, with a notification on which every store process and
   embedding job closes its pools of that database and drops its record.

An interrupted deletion is finished by deleting again: the workspace is
found until step 3 commits, and the drop of a database already gone is a
no-op. Two deletions of one workspace (a retried call) run one after the
other: the second then finds the tombstone (NOT_FOUND, "deleted at ..."),
by id or by a slug no live workspace holds (the latest deletion of it).

A workspace an import is still making is deleted only once its importer is
gone (the import's lock on the slug is free): what a killed import left is
removed so (docs/export.md), one under way is not touched.

A deletion and a move of the workspace exclude each other: the deletion
holds the move's lock for its whole course, so it is refused while a move
runs (one started before its record was written too), and a move is refused
while it runs; otherwise a move could copy the database to a server the
deletion never drops. A move recorded short of its seal whose mover is gone
is rolled back by the deletion; one past its seal must be finished first."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime

import psycopg

from recallatron import errors
from services.store.domain.control_names import spelled_id
from services.store.domain.control_records import Workspace
from services.store.domain.kept_copies import KeptCopies
from services.store.domain.moving import Mover
from services.store.domain.workspace_services import OnWorkspaces
from services.store.infrastructure.transactions import translate_db_errors
from services.store.sql import move_queries
from services.store.sql import queries as q

# How long a deletion waits for another one of the same workspace.
LOCK_MS = 120_000


@dataclass(frozen=True)
class Deleted:
    workspace_id: str
    slug: str
    deleted_at: datetime
    tokens_revoked: int
    # Copies a move kept whose server did not answer ("<server>/<database>").
    copies_left: list[str] = field(default_factory=list)


def deleted_payload(ws: Workspace) -> str:
    """The notification's payload (DeletionFollower in
    services/store/infrastructure/follow.py reads it)."""
    return f"{ws.id} {ws.server} {ws.database_name}"


def _hold_off_moves(guard: psycopg.Connection, ws: Workspace) -> None:
    """The move lock taken on the guard's session, held to its end (no move
    of ``ws`` starts meanwhile); refused while a mover holds it."""
    row = guard.execute(move_queries.TRY_MOVE_LOCK, (ws.id,)).fetchone()
    if row is None or not row[0]:
        raise errors.FailedPrecondition(
            "workspace: a move of it is under way; delete it once the move has ended",
            "workspace",
        )


class WorkspaceDeletion(OnWorkspaces):
    def _roll_back_unsealed_move(self, ws: Workspace) -> None:
        """A move recorded short of its seal is one whose mover is gone (the
        guard holds the move lock): its source still serves, so it is rolled
        back as a rerun would, rather than keep the workspace from being
        deleted until someone moves it afresh (or forever, its target no
        longer configured). One past its seal must be finished first."""
        with self.dbs.control_conn() as conn:
            row = conn.execute(move_queries.MOVE_OF, (ws.id,)).fetchone()
        if row is not None and row[2] == "copying":
            Mover(self.dbs, self.control).rollback(ws.id, ws.database_name, row[0], row[1])

    def find(self, given: str) -> Workspace:
        """The workspace ``given`` names by id or slug (checked as every call
        naming one is, ControlPlane.workspace_named); NOT_FOUND, saying so
        when it was deleted, otherwise."""
        try:
            return self.control.workspace_named(given, importing=True)
        except errors.NotFound:
            with self.dbs.control_conn() as conn:
                gone = conn.execute(
                    q.TOMBSTONE_BY_TEXT, {"given": spelled_id(given) or given}
                ).fetchone()
            if gone is not None:
                raise errors.NotFound(f"workspace: deleted at {gone[0].isoformat()}") from None
            raise

    def delete(self, given: str, confirm: str) -> Deleted:
        ws = self.find(given)
        if confirm != ws.slug and spelled_id(confirm) != ws.id:
            raise errors.InvalidArgument(
                "confirm", "must repeat the workspace's slug or id (nothing was deleted)"
            )
        with self._guarded(ws) as (guard, ws):
            if ws.importing:
                # Held to the guard's end: no import of the slug starts meanwhile.
                free = guard.execute(q.TRY_IMPORT_LOCK, (ws.slug,)).fetchone()
                if free is None or not free[0]:
                    raise errors.FailedPrecondition(
                        "workspace: an import of it is under way; it is removed by itself "
                        "if the import fails, or can be deleted once its process is gone",
                        "workspace",
                    )
            return self._delete(ws)

    def delete_unfinished_import(self, ws: Workspace) -> Deleted:
        """What an import that did not end left of ``ws``, removed; the
        caller holds that import's lock on the slug (its importer is gone)."""
        with self._guarded(ws) as (_, ws):
            return self._delete(ws)

    @contextmanager
    def _guarded(self, ws: Workspace) -> Iterator[tuple[psycopg.Connection, Workspace]]:
        """The guard a deletion holds to its end, and ``ws`` read again under
        it. One deletion of a workspace at a time, and no move meanwhile; the
        locks are the session's, so a killed deleter's go with its connection."""
        with psycopg.connect(
            self.dbs.control_url(), autocommit=True, options=f"-c statement_timeout={LOCK_MS}"
        ) as guard:
            guard.execute(q.DELETION_LOCK, (ws.id,))
            ws = self.find(ws.id)
            _hold_off_moves(guard, ws)
            yield guard, ws

    def _delete(self, ws: Workspace) -> Deleted:
        self._roll_back_unsealed_move(ws)
        with self.dbs.control_conn() as conn:
            if conn.execute(q.MOVE_PENDING, (ws.id,)).fetchone():
                raise errors.FailedPrecondition(
                    "workspace: a move of it is under way; finish it first "
                    "(recallatron move-workspace)",
                    "workspace",
                )
            conn.execute(q.LOCK_WORKSPACE, (ws.id,))
            revoked = [str(r[0]) for r in conn.execute(q.REVOKE_WORKSPACE_TOKENS, (ws.id,))]
            for token_id in revoked:
                conn.execute(q.NOTIFY_REVOKED, (token_id,))
        # This process's own connections first: the drop ends the others'.
        self.dbs.forget_pools(ws.server, ws.database_name)
        self.control.forget_workspace(ws.id)
        # A server that does not answer is UNAVAILABLE: deleting again finishes it.
        with translate_db_errors():
            self.dbs.drop_database(ws.server, ws.database_name)
        # The copies moves kept; one whose server does not answer stays
        # recorded (under the tombstone's id) for `servers drop-kept`.
        copies = KeptCopies(self.dbs)
        left = copies.drop(copies.listed(ws.id))
        with self.dbs.control_conn() as conn:
            conn.execute(q.LOCK_WORKSPACE, (ws.id,))
            for statement in (
                q.RETIRE_WORKSPACE_TOKENS,
                q.DELETE_WORKSPACE_TOKENS,
                q.DELETE_WORKSPACE_MEMBERS,
                q.DELETE_WORKSPACE_MOVE,
                q.DELETE_WORKSPACE,
            ):
                conn.execute(statement, (ws.id,))
            row = conn.execute(q.INSERT_TOMBSTONE, (ws.id, ws.slug)).fetchone()
            assert row is not None
            conn.execute(q.NOTIFY_DELETED, (deleted_payload(ws),))
        self.dbs.forget_pools(ws.server, ws.database_name)
        self.control.forget_workspace(ws.id)
        return Deleted(ws.id, ws.slug, row[0], len(revoked), [str(n.copy) for n in left])
