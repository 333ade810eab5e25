"""The planner's statistics of a workspace's database, kept up with its writes
(design §10: background work follows the writes). Autovacuum analyzes a table
once enough of it changed, but reaches each database only once per
`autovacuum_naptime` (1,200 s on the embedded server, so that a thousand idle
databases cost nothing); a workspace filled in the meantime was planned from
default estimates, which made recall 2.7 times as slow at 10,000 memories.
The job sees every write as the memory it embeds, and applies autovacuum's own
rule to those: a database is analyzed once the memories written since its last
analysis pass 50 plus a tenth of the memory table's estimated rows."""

from __future__ import annotations

import threading

from prometheus_client import Counter

from services.store.infrastructure.db import WorkspacePool

# autovacuum_analyze_threshold and autovacuum_analyze_scale_factor, as shipped.
BASE_ROWS = 50
SCALE = 0.1

ESTIMATED_ROWS = "SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'memory'::regclass"
# Every table of the workspace; a table another worker is analyzing is skipped.
ANALYZE = "ANALYZE (SKIP_LOCKED)"

ANALYZED = Counter(
    "recallatron_embedding_job_analyzed_total",
    "Workspace databases analyzed because enough memories were written since the last time.",
)


class Statistics:
    """Memories written per workspace since its database was last analyzed here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._written: dict[str, int] = {}

    def wrote(self, workspace_id: str, rows: int, pool: WorkspacePool) -> bool:
        """Counts ``rows`` written; analyzes the database when they pass the
        rule. Returns whether it did."""
        with self._lock:
            written = self._written.get(workspace_id, 0) + rows
            self._written[workspace_id] = written
        if written <= BASE_ROWS:
            return False
        with pool.connection() as conn:
            row = conn.execute(ESTIMATED_ROWS).fetchone()
            if row is None or written <= BASE_ROWS + SCALE * float(row[0]):
                return False
            conn.execute(ANALYZE)
        with self._lock:
            left = self._written.get(workspace_id, 0) - written
            if left > 0:
                self._written[workspace_id] = left
            else:
                self._written.pop(workspace_id, None)
        ANALYZED.inc()
        return True

    def forget(self, workspace_id: str) -> None:
        """A deleted or moved workspace: its count goes."""
        with self._lock:
            self._written.pop(workspace_id, None)
