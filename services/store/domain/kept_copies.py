"""Copies of a workspace's database that a move kept (docs/servers.md,
Moving; docs/reliability.md, "Deleting a workspace").

``move-workspace --keep-source`` leaves the old database on its server,
renamed and closed to connections. It holds the workspace's text as of the
move, so each is recorded in the control plane (``kept_copy``) and dropped
when the workspace is deleted; so is what a rolled-back move left on a
target that did not answer (services/store/domain/moving.py, rollback).
A server that does not answer then (or is no longer configured) must not
keep the workspace from being deleted: its copy stays recorded under the
deleted workspace's id, and ``recallatron servers drop-kept`` drops it
later."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg import sql

from recallatron import errors
from services.store.infrastructure.db import Databases
from services.store.sql import move_queries as q

log = logging.getLogger("recallatron.store.kept_copies")


@dataclass(frozen=True)
class KeptCopy:
    server: str
    database: str
    workspace_id: str
    kept_at: datetime
    # '' once the workspace was deleted.
    workspace_slug: str

    def __str__(self) -> str:
        return f"{self.server}/{self.database}"


@dataclass(frozen=True)
class NotDropped:
    copy: KeptCopy
    why: str


class KeptCopies:
    def __init__(self, dbs: Databases) -> None:
        self.dbs = dbs

    def record(self, server: str, database: str, workspace_id: str) -> None:
        with self.dbs.control_conn() as conn:
            conn.execute(q.RECORD_KEPT_COPY, (server, database, workspace_id))

    def listed(self, workspace_id: str | None = None, deleted_only: bool = False) -> list[KeptCopy]:
        """The copies kept (of one workspace; of deleted workspaces only)."""
        with self.dbs.control_conn() as conn:
            rows = conn.execute(
                q.KEPT_COPIES, {"workspace_id": workspace_id, "deleted_only": deleted_only}
            ).fetchall()
        return [KeptCopy(r[0], r[1], r[2], r[3], r[4]) for r in rows]

    def drop(self, copies: list[KeptCopy]) -> list[NotDropped]:
        """Each copy dropped and its record with it; those whose server did
        not answer, or is not configured, are left recorded and returned."""
        left = []
        for copy in copies:
            try:
                self._drop(copy)
            except errors.InvalidArgument as exc:  # a name no longer configured
                left.append(NotDropped(copy, exc.description))
                continue
            except psycopg.Error as exc:
                # The class only: a connection error's text may name the URL.
                why = f"{copy.server!r} did not answer ({type(exc).__name__})"
                left.append(NotDropped(copy, why))
                continue
            with self.dbs.control_conn() as conn:
                conn.execute(q.FORGET_KEPT_COPY, (copy.server, copy.database))
        for not_dropped in left:
            log.warning(
                "kept copy %s of workspace %s not dropped: %s; `recallatron servers drop-kept` "
                "drops it once its server answers",
                not_dropped.copy,
                not_dropped.copy.workspace_id,
                not_dropped.why,
            )
        return left

    def _drop(self, copy: KeptCopy) -> None:
        try:
            self.dbs.drop_database(copy.server, copy.database)
        except psycopg.errors.ObjectInUse:
            # A copy a rolled-back move left still holds its subscription,
            # which a drop refuses to take along: it goes first, without its
            # slot (the rollback dropped that on the source).
            with self.dbs.admin(copy.server, copy.database) as conn:
                for (name,) in conn.execute(q.SUBSCRIPTIONS_HERE).fetchall():
                    subscription = sql.Identifier(name)
                    for statement in (
                        "ALTER SUBSCRIPTION {} DISABLE",
                        "ALTER SUBSCRIPTION {} SET (slot_name = NONE)",
                        "DROP SUBSCRIPTION {}",
                    ):
                        conn.execute(sql.SQL(statement).format(subscription))
            self.dbs.drop_database(copy.server, copy.database)
