"""What the expiry gate costs the dense arm (docs/recall.md, "The expiry
gate's cost"): with few of a large workspace's memories inside the gate, a
dense recall reads about the rows inside it, not every vector the caller may
see, and answers exactly their cosine order."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from recallatron_devkit.stack import Stack
from services.store.domain import recall as r
from services.store.domain.control_records import WorkspaceSettings
from services.store.infrastructure.db import Caller
from services.store.settings import StoreSettings
from tests.conftest import Team
from tests.dbutil import workspace_url
from tests.integration import bulk_workspace as bulk

pytestmark = pytest.mark.integration

OLD = 20_000
INSIDE = 50
GATE_DAYS = 30


class _Settings:
    """The control plane as the arm asks it: the workspace's settings."""

    def __init__(self, settings: WorkspaceSettings) -> None:
        self._settings = settings

    def settings(self, workspace_id: str, fresh: bool = False) -> WorkspaceSettings:
        return self._settings


class _OnConnection(bulk.OneConnection, r.RecallQueries):
    """The store's dense arm on one connection, so that
    pg_stat_xact_user_tables counts the rows each recall read."""

    def __init__(self, conn: psycopg.Connection, settings: Mapping[str, Any]) -> None:
        super().__init__(conn)
        self.control: Any = _Settings(WorkspaceSettings(**settings))
        self.exact_rows = StoreSettings().dense_exact_rows


def _seed(stack: Stack, team: Team) -> None:
    """20,050 of ada's memories with random vectors (written directly, so
    nothing waits for the embedding job), all last changed in 2025 but 50
    changed a day ago."""
    with psycopg.connect(workspace_url(stack, team.database_name)) as conn:
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at)"
            " SELECT gen_random_uuid(), 'note', 'Entry ' || i, '', 1, 'told', '{assist}',"
            "  %(ada)s, timestamptz '2025-01-01' + i * interval '1 minute',"
            "  CASE WHEN i %% 401 = 0 THEN now() - interval '1 day'"
            "   ELSE timestamptz '2025-01-01' + i * interval '1 minute' END"
            " FROM generate_series(1, %(n)s) AS i",
            {"ada": team.members["ada"], "n": OLD + INSIDE},
        )
        conn.execute("DELETE FROM embedding_job")
        conn.execute(
            "INSERT INTO memory_embedding (memory_id, model_id, input_version, embedding)"
            " SELECT m.id, 'm', 'v', (SELECT array_agg(random() - 0.5)::real[]"
            "  FROM generate_series(1, 384) WHERE m.id IS NOT NULL)::vector FROM memory m"
        )
        conn.execute("ANALYZE")


def test_few_memories_inside_the_gate_cost_a_dense_recall_those_rows(
    stack: Stack, team: Team
) -> None:
    """50 of 20,050 memories inside a 30-day gate: each dense recall (100
    asked) answers exactly the cosine order of those 50 and reads about them,
    under the plans the store's statements get and the generic plan forced,
    where it walked the graph to the scan's limit and then ranked every
    vector of the caller's exactly."""
    _seed(stack, team)
    rng = np.random.default_rng(5)
    caller = Caller(team.workspace_id, team.members["ada"], "assist")
    for mode in bulk.PLAN_MODES:
        with bulk.as_member(stack, team, "ada", plan_cache_mode=mode) as conn:
            register_vector(conn)
            arm = _OnConnection(conn, {"expiry_days": GATE_DAYS})
            for _ in range(8):
                query = rng.normal(size=384).astype(np.float32)
                expected = [
                    str(row[0])
                    for row in conn.execute(
                        "SELECT memory_id FROM memory_embedding"
                        " WHERE memory_updated_at >= now() - make_interval(days => %s)"
                        " ORDER BY embedding <=> %s, memory_id",
                        (GATE_DAYS, query),
                    )
                ]
                before = bulk.rows_read(conn, ["memory_embedding"])
                found = arm.dense(caller, list(query), "m", "v", 100, r.Filters(), floor=-1.0)
                read = bulk.rows_read(conn, ["memory_embedding"]) - before
                assert [c.id for c in found.candidates] == expected and len(expected) == INSIDE
                assert read <= 10 * INSIDE, f"{mode}: a dense recall read {read} vectors"
