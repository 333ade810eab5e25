"""What migration 0045 costs at upgrade (docs/benchmarks.md, "Migration
0045 at upgrade"): it copies each memory's provenance onto every vector row
(one UPDATE over memory_embedding), rewriting each row once, its HNSW index
entries too.

    python -m benchmarks.provenance_upgrade [--vectors 100000] [--state-dir DIR]

On a Postgres server of its own it builds a workspace database at 0044,
writes `--vectors` synthetic memories each with a random unit 384-d vector
(the purpose's HNSW index built once over them, as an import builds it),
then applies 0045 as migrate-db would (one transaction) and prints its wall
time, the WAL it wrote and the database's and memory_embedding's growth."""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from typing import Any

import numpy as np
import psycopg

from benchmarks.before_baseline import migration_files
from benchmarks.own_server import empty_database
from benchmarks.provenance_cost import random_vectors

BEFORE, MIGRATION = "0044", "0045"
DATABASE = "upgrade_bench"
MEMORIES = """
INSERT INTO memory (id, kind, title, body, confidence, origin, purposes, created_by)
SELECT gen_random_uuid(), 'fact', 'Note ' || i, 'Synthetic note number ' || i, 1, 'told',
       '{assist}', %s
FROM generate_series(1, %s) AS i
"""
SIZES = """
SELECT pg_database_size(current_database()), pg_total_relation_size('memory_embedding'),
       pg_current_wal_lsn()
"""


def build(url: str, vectors: int) -> None:
    """A workspace database at 0044 holding `vectors` memories, each embedded."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_migration (version text PRIMARY KEY, applied_at"
                     " timestamptz NOT NULL DEFAULT now())")  # fmt: skip
        for version, sql in migration_files():
            if version[:4] > BEFORE:
                break
            with conn.transaction():
                conn.execute(sql.encode())
                conn.execute("INSERT INTO schema_migration (version) VALUES (%s)", (version,))
        conn.execute(MEMORIES, (str(uuid.uuid4()), vectors))
        random_vectors(conn, np.random.default_rng(7))
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


def upgrade(url: str) -> dict[str, Any]:
    """Applies 0045 as migrate-db does and measures it."""
    (sql,) = [s for v, s in migration_files() if v.startswith(MIGRATION)]
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT count(*) FROM memory_embedding").fetchone()
        before = conn.execute(SIZES).fetchone()
        started = time.perf_counter()
        with conn.transaction():
            conn.execute(sql.encode())
            conn.execute("INSERT INTO schema_migration (version) VALUES (%s)", (MIGRATION,))
        seconds = time.perf_counter() - started
        after = conn.execute(SIZES).fetchone()
        assert rows and before and after
        wal = conn.execute("SELECT pg_wal_lsn_diff(%s, %s)", (after[2], before[2])).fetchone()
    assert wal
    mb = 1024 * 1024
    return {
        "vectors": rows[0],
        "seconds": round(seconds, 1),
        "wal_mb": round(float(wal[0]) / mb, 1),
        "database_mb": [round(before[0] / mb, 1), round(after[0] / mb, 1)],
        "memory_embedding_mb": [round(before[1] / mb, 1), round(after[1] / mb, 1)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", type=int, default=100_000)
    parser.add_argument("--state-dir", default="")
    args = parser.parse_args(argv)
    with empty_database(args.state_dir, DATABASE, "provenance-upgrade-") as url:
        started = time.perf_counter()
        build(url, args.vectors)
        report = {"build_seconds": round(time.perf_counter() - started, 1), **upgrade(url)}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
