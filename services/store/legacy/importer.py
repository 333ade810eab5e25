"""The migration from the old store into one workspace, for one owner.

Runs against the workspace database directly, as its owner role (origin
`migrated` and the original times are not writable through the app role),
with the caller still set to the owner so row-level security checks hold.
Each batch is one transaction holding its rows and their ledger entries, and
every id is derived from the old id: an interrupted run leaves whole batches,
and a rerun skips what is there and writes the rest, ending exactly where one
clean run ends. Imported memories are queued for embedding by the insert
trigger; the embedding job does the rest.

After the turns, each entity record of graph.jsonl becomes a memory that
states the record's properties and edges as graph claims (design §3.3, §8.4), its
supersede patch a supersession; then the memory items, which mention the
same entity rows."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg

from recallatron import errors
from recallatron.vocabulary import DEFAULT_PURPOSE
from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import Caller, Databases
from services.store.legacy import plan
from services.store.legacy import queries as q
from services.store.legacy.import_run import BatchDone, ImportRun
from services.store.legacy.oldgraph import Graph, fold_graph
from services.store.legacy.oldstore import SqliteStore
from services.store.legacy.report import Report

__all__ = ["MAX_BATCH_SIZE", "BatchDone", "Importer", "Target", "resolve_target"]

MAX_BATCH_SIZE = 10_000


@dataclass(frozen=True)
class Target:
    workspace_id: str
    slug: str
    server: str
    database: str
    owner_id: str
    owner_handle: str


def resolve_target(dbs: Databases, control: ControlPlane, workspace: str, owner: str) -> Target:
    """The workspace by slug or id, and its owner by handle or id. The owner
    must hold the owner role: history is visible to that member alone and is
    searched only for owners."""
    ws = control.workspace_named(workspace, "--workspace")
    with dbs.control_conn() as conn:
        rows = conn.execute(q.MEMBER_BY_HANDLE_OR_ID, {"ws": ws.id, "m": owner}).fetchall()
    if not rows:
        raise errors.NotFound(f"--owner: no member {owner!r} in workspace {ws.slug}")
    m_row = rows[0]
    if len(rows) > 1 and not m_row[3]:
        handles = ", ".join(repr(r[1]) for r in rows)
        raise errors.InvalidArgument(
            "--owner",
            f"{owner!r} names {handles} (handles that differ only in case): give the "
            "member's id, or their handle as spelled",
        )
    if m_row[2] != "owner":
        raise errors.InvalidArgument("--owner", f"{m_row[1]} is not an owner of {ws.slug}")
    return Target(ws.id, ws.slug, ws.server, ws.database_name, m_row[0], m_row[1])


class Importer:
    def __init__(
        self,
        dbs: Databases,
        control: ControlPlane,
        batch_size: int = plan.DEFAULT_BATCH_SIZE,
        on_batch: Callable[[BatchDone], None] | None = None,
    ) -> None:
        if not 1 <= batch_size <= MAX_BATCH_SIZE:
            raise errors.InvalidArgument("--batch-size", f"must lie in [1, {MAX_BATCH_SIZE}]")
        self.dbs = dbs
        self.control = control
        self.batch_size = batch_size
        self.on_batch = on_batch

    def run(
        self,
        sqlite_path: Path,
        graph_path: Path,
        workspace: str,
        owner: str,
        dry_run: bool = False,
        report: Report | None = None,
    ) -> Report:
        """Imports (or, dry, counts) everything; returns the report. `report`
        is filled in as batches commit, so a caller still has it when the run
        is interrupted."""
        started = time.monotonic()
        report = report if report is not None else Report()
        target = resolve_target(self.dbs, self.control, workspace, owner)
        report.workspace, report.owner, report.dry_run = target.slug, target.owner_handle, dry_run
        # The history table and ledger come with migration 0003; a workspace
        # whose store has not restarted since may not have it yet.
        self.dbs.migrate_workspace(target.server, target.database)
        graph = fold_graph(graph_path)
        sqlite = SqliteStore(sqlite_path)
        pool = self.dbs.owner_pool(target.server, target.database)
        caller = Caller(target.workspace_id, target.owner_id, DEFAULT_PURPOSE)
        ids = plan.Ids(target.owner_handle)
        url = self.dbs.database_url(target.server, target.database)
        try:
            with psycopg.connect(url, autocommit=True) as lock_conn:
                lock_conn.execute(q.LOCK_TIMEOUT, (q.LOCK_WAIT,))
                try:
                    lock_conn.execute(q.LOCK, (q.IMPORT_LOCK_KEY,))
                except psycopg.errors.LockNotAvailable:
                    raise errors.FailedPrecondition(
                        "another migration into this workspace is running; try again later"
                    ) from None
                self._describe(report, sqlite, graph)
                run = ImportRun(report, pool, caller, ids, dry_run, self.batch_size, self.on_batch)
                try:
                    run.turns(sqlite)
                    run.graph_and_items(sqlite, graph)
                except errors.InvalidArgument as exc:
                    if exc.field not in q.REMOVED_MEMBER_COLUMNS:
                        raise
                    raise errors.FailedPrecondition(
                        f"--owner: {target.owner_handle} was removed from workspace "
                        f"{target.slug} while the migration ran; it stopped there, and what it "
                        "had imported for them went the way of their removal",
                        "--owner",
                    ) from None
                if not dry_run:
                    # Statistics for what was just written: until autovacuum's
                    # next visit the planner would guess (history search chose
                    # a scan of every turn over its index).
                    lock_conn.execute(q.ANALYZE)
            if not dry_run:
                # The migrated memories are queued for embedding: wake the job.
                self.control.mark_work(target.workspace_id)
            report.complete = True
        finally:
            sqlite.close()
            report.seconds = time.monotonic() - started
        return report

    @staticmethod
    def _describe(report: Report, sqlite: SqliteStore, graph: Graph) -> None:
        s = graph.stats
        report.graph = {
            "lines": s.lines,
            "records": s.records,
            "entities": len(graph.entities),
            "restated": s.restated,
            "patches": dict(sorted(s.patches.items())),
            "orphan_patches": s.orphan_patches,
            "unknown_patch_ops": s.unknown_ops,
            "malformed": s.malformed,
            "superseded": sum(1 for e in graph.entities.values() if e.superseded_by),
            "confirmed": sum(1 for e in graph.entities.values() if e.confirmed),
        }
        report.session_digests_read = sqlite.digest_count()
