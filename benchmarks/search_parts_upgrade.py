"""What a workspace migration that rewrites the search vectors costs at
upgrade, and what its vectors cost a write: 0075 (the parts of addresses and
paths; docs/benchmarks.md, "Migration 0075: the parts of addresses, paths and
camel-case words") or, with `--migration 0077`, accents folded and hyphenated
words joined (docs/benchmarks.md, "Migration 0077: words found however typed").

    python -m benchmarks.search_parts_upgrade [--memories 10000] [--migration 0075|0077]
        [--state-dir DIR]

On a Postgres server of its own it builds a workspace database at the level
before the migration and writes twice `--memories` synthetic memories (one in
five holding an email address, a URL and a path; for 0077, another one in five
holding accented words and a hyphenated one), timing the second batch; applies the migration as
migrate-db would (one transaction) and prints its wall time, the WAL it wrote, the
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

import psycopg

from benchmarks.own_server import empty_database
from services.store.infrastructure import migrate

MIGRATION = "0075_search_inside_compound_words"
ACCENT_FOLD = "0077_words_found_however_typed"
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
                   ELSE '' END
           || CASE WHEN %(accented)s AND i %% 5 = 1
                   THEN ' Zoë and José ' || (i %% 31)
                        || ' met at the Café Nero in São Paulo for the follow-up.'
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


def _insert(conn: psycopg.Connection, start: int, n: int, accented: bool) -> float:
    started = time.perf_counter()
    params = {"from": start, "n": n, "author": str(uuid.uuid4()), "accented": accented}
    conn.execute(MEMORIES, params)
    return time.perf_counter() - started


# Bodies at the size limit (20,000 characters) made only of such tokens: the
# function's work must grow with the text, not with its square.
WORST = {
    "hosts": "a.b " * 5000,
    "emails": " ".join(f"user{i}@host{i}.example.com" for i in range(800)),
    "paths": " ".join(f"/srv/app{i}/conf{i}/file{i}.yaml" for i in range(800)),
}
# And for 0077's functions, a body of accented words only, composed and
# decomposed, and one of hyphenated words only.
WORST_FOLD = {
    "composed": "Zoë café São " * 1700,
    "decomposed": "Zoe\u0308 cafe\u0301 Sa\u0303o " * 1500,
    "hyphenated": "on-call e-mail " * 1400,
}


def _worst_ms(conn: psycopg.Connection, function: str) -> dict[str, float]:
    """Milliseconds of ``function`` over each worst body (best of three)."""
    out = {}
    bodies = WORST if function == "search_parts" else WORST_FOLD
    # 0077's two functions as its vectors call them, one on the other.
    call = "search_joined(search_fold(%s))" if function != "search_parts" else f"{function}(%s)"
    for name, text in bodies.items():
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            conn.execute(f"SELECT {call}", (text[:20_000],)).fetchone()
            best = min(best, time.perf_counter() - started)
        out[name] = round(best * 1000, 1)
    return out


# And 0077's functions over the texts holding accents and a hyphenated word.
FOLD = (
    "SELECT count(*), sum(length(search_joined(search_fold(body))))"
    " FROM memory WHERE body LIKE '%ë%'"
)


def _timed_parts(conn: psycopg.Connection, query: str) -> float:
    """Microseconds a text of the function in ``query`` over the texts it works on."""
    started = time.perf_counter()
    row = conn.execute(query).fetchone()
    assert row and row[0]
    return float((time.perf_counter() - started) * 1e6 / row[0])


def run(url: str, memories: int, migration: str = MIGRATION) -> dict[str, Any]:
    every = [v for v, _ in migrate.migration_files("workspace")]
    after_it = every[every.index(migration) + 1] if migration != every[-1] else None
    accented = migration == ACCENT_FOLD
    migrate.apply_migrations(url, "workspace", before=migration)
    with psycopg.connect(url, autocommit=True) as conn:
        _insert(conn, 0, memories, accented)
        # Timed on a table already that full, as the insert after the migration is.
        insert_before = _insert(conn, memories, memories, accented)
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")
        before = conn.execute(SIZES).fetchone()
        started = time.perf_counter()
        applied = migrate.apply_migrations(url, "workspace", before=after_it)
        seconds = time.perf_counter() - started
        assert applied == [migration], applied
        after = conn.execute(SIZES).fetchone()
        assert before and after
        wal = conn.execute("SELECT pg_wal_lsn_diff(%s, %s)", (after[3], before[3])).fetchone()
        assert wal
        insert_after = _insert(conn, 2 * memories, memories, accented)
        function, query = ("search_fold_joined", FOLD) if accented else ("search_parts", PARTS)
        parts_us = min(_timed_parts(conn, query) for _ in range(3))
        worst = _worst_ms(conn, function)
    return {
        "migration": migration,
        "memories": 2 * memories,
        "migration_seconds": round(seconds, 2),
        "wal_mb": round(float(wal[0]) / MB, 1),
        "memory_mb": [round(before[0] / MB, 1), round(after[0] / MB, 1)],
        "term_stat_mb": [round(before[1] / MB, 1), round(after[1] / MB, 1)],
        "term_stat_rows": [before[2], after[2]],
        "insert_seconds": [round(insert_before, 2), round(insert_after, 2)],
        "insert_after_over_before": round(insert_after / insert_before, 2),
        f"{function}_us_per_text": round(parts_us, 1),
        f"{function}_ms_20000_characters": worst,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--migration", choices=("0075", "0077"), default="0075")
    parser.add_argument("--state-dir", default="")
    args = parser.parse_args(argv)
    migration = MIGRATION if args.migration == "0075" else ACCENT_FOLD
    with empty_database(args.state_dir, DATABASE, "search-parts-upgrade-") as url:
        report = run(url, args.memories, migration)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
