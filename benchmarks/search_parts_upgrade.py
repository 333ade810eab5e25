"""What workspace migration 0075 (the parts of addresses and paths in the
search vectors) costs at upgrade, and what its longer vectors cost a write
(docs/benchmarks.md, "Migration 0075: the parts of addresses, paths and camel-case words").

    python -m benchmarks.search_parts_upgrade [--memories 10000] [--state-dir DIR]

On a Postgres server of its own it builds a workspace database at 0074 and
writes twice `--memories` synthetic memories (one in five holding an email
address, a URL and a path), timing the second batch; applies 0075 as migrate-db
would (one transaction) and prints its wall time, the WAL it wrote, the
growth of `memory` and `term_stat`; then writes `--memories` again and
times that insert, for the ratio of a write's cost after to before, and
the function alone over the texts holding such tokens and over bodies of
20,000 characters made only of them (best of three)."""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from typing import Any
from unittest import mock

import psycopg

from benchmarks.own_server import empty_database
from services.store.infrastructure import migrate

MIGRATION = "0075_search_inside_compound_words"
DATABASE = "search_parts_bench"
MEMORIES = """
INSERT INTO memory (id, kind, title, body, confidence, origin, purposes, created_by)
SELECT gen_random_uuid(), 'note', 'Note ' || (%(from)s + i),
       'Synthetic note ' || (%(from)s + i) || ' about the weekly planning of team '
           || (i %% 40) || ' and what was decided for the release.'
           || CASE WHEN i %% 5 = 0
                   THEN ' Ask ops' || (i %% 97) || '@example.com, see https://wiki.example.com/'
                        || 'runbooks/step' || (i %% 13)
                        || ' and /etc/app' || (i %% 7) || '/app.conf.'
                   ELSE '' END,
       1, 'told', '{assist}', %(author)s
FROM generate_series(1, %(n)s) AS i
"""
SIZES = """
SELECT pg_total_relation_size('memory'), pg_total_relation_size('term_stat'),
       (SELECT count(*) FROM term_stat), pg_current_wal_lsn()
"""
MB = 1024 * 1024
# The function alone, over the texts holding an address, a URL and a path.
PARTS = "SELECT count(*), sum(length(search_parts(body))) FROM memory WHERE body LIKE '%@%'"


def _insert(conn: psycopg.Connection, start: int, n: int) -> float:
    started = time.perf_counter()
    conn.execute(MEMORIES, {"from": start, "n": n, "author": str(uuid.uuid4())})
    return time.perf_counter() - started


# Bodies at the size limit (20,000 characters) made only of such tokens: the
# function's work must grow with the text, not with its square.
WORST = {
    "hosts": "a.b " * 5000,
    "emails": " ".join(f"user{i}@host{i}.example.com" for i in range(800)),
    "paths": " ".join(f"/srv/app{i}/conf{i}/file{i}.yaml" for i in range(800)),
}


def _worst_ms(conn: psycopg.Connection) -> dict[str, float]:
    """Milliseconds of search_parts over each worst body (best of three)."""
    out = {}
    for name, text in WORST.items():
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            conn.execute("SELECT search_parts(%s)", (text[:20_000],)).fetchone()
            best = min(best, time.perf_counter() - started)
        out[name] = round(best * 1000, 1)
    return out


def _timed_parts(conn: psycopg.Connection) -> float:
    """Microseconds a text of search_parts over the texts holding its tokens."""
    started = time.perf_counter()
    row = conn.execute(PARTS).fetchone()
    assert row and row[0]
    return (time.perf_counter() - started) * 1e6 / row[0]


def run(url: str, memories: int) -> dict[str, Any]:
    every = migrate.migration_files("workspace")
    before_it = [f for f in every if f[0] < MIGRATION]
    with mock.patch.object(migrate, "migration_files", lambda kind: before_it):
        migrate.apply_migrations(url, "workspace")
    with psycopg.connect(url, autocommit=True) as conn:
        _insert(conn, 0, memories)
        # Timed on a table already that full, as the insert after the migration is.
        insert_before = _insert(conn, memories, memories)
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")
        before = conn.execute(SIZES).fetchone()
        started = time.perf_counter()
        with mock.patch.object(migrate, "migration_files", lambda kind: every):
            applied = migrate.apply_migrations(url, "workspace")
        seconds = time.perf_counter() - started
        assert applied == [MIGRATION], applied
        after = conn.execute(SIZES).fetchone()
        assert before and after
        wal = conn.execute("SELECT pg_wal_lsn_diff(%s, %s)", (after[3], before[3])).fetchone()
        assert wal
        insert_after = _insert(conn, 2 * memories, memories)
        parts_us = min(_timed_parts(conn) for _ in range(3))
        worst = _worst_ms(conn)
    return {
        "memories": 2 * memories,
        "migration_seconds": round(seconds, 2),
        "wal_mb": round(float(wal[0]) / MB, 1),
        "memory_mb": [round(before[0] / MB, 1), round(after[0] / MB, 1)],
        "term_stat_mb": [round(before[1] / MB, 1), round(after[1] / MB, 1)],
        "term_stat_rows": [before[2], after[2]],
        "insert_seconds": [round(insert_before, 2), round(insert_after, 2)],
        "insert_after_over_before": round(insert_after / insert_before, 2),
        "search_parts_us_per_text": round(parts_us, 1),
        "search_parts_ms_20000_characters": worst,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--state-dir", default="")
    args = parser.parse_args(argv)
    with empty_database(args.state_dir, DATABASE, "search-parts-upgrade-") as url:
        report = run(url, args.memories)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
