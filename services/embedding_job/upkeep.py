"""A workspace database's upkeep, kept up with its writes (design §10:
background work follows the writes). Autovacuum analyzes and vacuums a table
once enough of it changed, but reaches each database only once per
`autovacuum_naptime` (1,200 s on the embedded server, so that a thousand idle
databases cost nothing). A workspace filled in the meantime was planned from
default estimates and read without a visibility map: recall at 10,000 memories
just written took 55 ms at p50, 23 ms once analyzed and 17 ms once vacuumed.

The job sees every write as the memory it embeds, and applies autovacuum's own
rules, as shipped, to those counts: the database is analyzed once the memories
written since its last analysis pass 50 plus a tenth of the memory table's
estimated rows, and vacuumed (and analyzed) once those written since its last
vacuum pass 1,000 plus a fifth."""

from __future__ import annotations

import threading

from prometheus_client import Counter

from services.store.infrastructure.db import WorkspacePool

# autovacuum_analyze_threshold and _scale_factor; autovacuum_vacuum_insert_threshold
# and _scale_factor: Postgres's defaults.
ANALYZE_BASE, ANALYZE_SCALE = 50, 0.1
VACUUM_BASE, VACUUM_SCALE = 1_000, 0.2

ESTIMATED_ROWS = "SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'memory'::regclass"
# Every table of the workspace; one another worker holds is skipped.
ANALYZE = "ANALYZE (SKIP_LOCKED)"
VACUUM = "VACUUM (ANALYZE, SKIP_LOCKED)"

UPKEEP = Counter(
    "recallatron_embedding_job_upkeep_total",
    "Workspace databases analyzed or vacuumed because enough memories were written since.",
    ["action"],
)


class Upkeep:
    """Memories written per workspace since its database was last analyzed,
    and last vacuumed, here."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: dict[str, tuple[int, int]] = {}  # (analyze, vacuum)

    def wrote(self, workspace_id: str, rows: int, pool: WorkspacePool) -> str | None:
        """Counts ``rows`` written; analyzes or vacuums the database when they
        pass the rules. Returns what it ran ("analyze", "vacuum") or None."""
        with self._lock:
            analyze, vacuum = self._since.get(workspace_id, (0, 0))
            analyze, vacuum = analyze + rows, vacuum + rows
            self._since[workspace_id] = (analyze, vacuum)
        if analyze <= ANALYZE_BASE and vacuum <= VACUUM_BASE:
            return None  # below both rules whatever the table's size: no statement
        with pool.connection() as conn:
            row = conn.execute(ESTIMATED_ROWS).fetchone()
            estimate = float(row[0]) if row else 0.0
            conn.commit()  # the read's transaction ends: VACUUM may not run in one
            if vacuum > VACUUM_BASE + VACUUM_SCALE * estimate:
                action = "vacuum"
                conn.autocommit = True
                try:
                    conn.execute(VACUUM)
                finally:
                    conn.autocommit = False
            elif analyze > ANALYZE_BASE + ANALYZE_SCALE * estimate:
                action = "analyze"
                conn.execute(ANALYZE)
            else:
                return None
        with self._lock:
            # Writes counted meanwhile stay counted.
            now_analyze, now_vacuum = self._since.get(workspace_id, (0, 0))
            left = (now_analyze - analyze, now_vacuum - (vacuum if action == "vacuum" else 0))
            if left[0] > 0 or left[1] > 0:
                self._since[workspace_id] = (max(left[0], 0), max(left[1], 0))
            else:
                self._since.pop(workspace_id, None)
        UPKEEP.labels(action).inc()
        return action

    def forget(self, workspace_id: str) -> None:
        """A deleted workspace: its counts go."""
        with self._lock:
            self._since.pop(workspace_id, None)
