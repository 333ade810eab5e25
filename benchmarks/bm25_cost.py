"""What BM25 costs the lexical arm (docs/recall.md, "Finding more"): the
arm's statement with `ts_rank_cd` (migration 0006's functions, dropped by
0048 and created again here by benchmarks.old_arms) against the same with
BM25 (migration 0017's), interleaved query by query in one database, as the
services' role.

    python -m benchmarks.bm25_cost [--memories 10000 100000] [--queries 200] [--rounds 5]

For each corpus size it starts a stack of its own, creates a workspace,
writes the synthetic memories of `recallatron load` straight into its
database (the triggers keep the statistics), and times both statements for a
mix of the load tool's queries and rare-word queries, alternating which goes
first. It prints the medians and the 90th percentiles of each, per path
(every match ranked, or the capped path), and the ratio."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from benchmarks import old_arms
from recallatron.client import Client
from recallatron_devkit import synthetic
from recallatron_devkit.load import models_dir
from recallatron_devkit.stack import Stack, own_config, running
from services.store.domain import recall as r
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS, with_database

# The arm before migration 0017, verbatim.
TS_RANK_CD = """
SELECT id::text, score FROM lexical_candidates(
    %(tsquery)s::tsquery, %(limit)s, %(include_superseded)s, %(kinds)s::memory_kind[],
    %(expiry_days)s, %(entities)s::uuid[])
"""
TS_RANK_CD_CAPPED = """
SELECT id::text, score FROM lexical_candidates_newest(
    %(tsquery)s::tsquery, %(limit)s, %(cap)s, %(prefilter)s, %(include_superseded)s,
    %(kinds)s::memory_kind[], %(expiry_days)s, %(entities)s::uuid[], %(by_index)s)
"""
INSERT = """
INSERT INTO memory (id, kind, title, body, confidence, origin, purposes, created_by)
VALUES (gen_random_uuid(), %s, %s, %s, 1, 'told', '{assist}', %s)
"""


def seed(stack: Stack, memories: int, vacuum: bool = False) -> tuple[str, str]:
    """A workspace holding `memories` synthetic memories: (database url, owner id).
    Analyzed; with `vacuum` also vacuumed, as the embedding job's upkeep
    leaves a workspace (docs/benchmarks.md, "A workspace just filled"):
    without it the GIN index's pending list holds the newest writes."""
    admin = Client(stack.gateway, stack.admin_token, timeout=60)
    ws = admin.create_workspace(f"bm25-{memories}").workspace
    owner = admin.create_member(ws.id, "owner", owner=True).member
    admin.close()
    with psycopg.connect(with_database(stack.database_url, "recallatron")) as conn:
        row = conn.execute("SELECT database_name FROM workspace WHERE id = %s", (ws.id,)).fetchone()
    assert row is not None
    url = with_database(stack.database_url, row[0])
    with psycopg.connect(url) as conn:
        rows = [(m.kind, m.title, m.body, owner.id) for m in synthetic.memories(memories)]
        with conn.cursor() as cur:
            cur.executemany(INSERT, rows[:memories])
        conn.commit()
        conn.execute("ANALYZE memory")
        conn.commit()
        if vacuum:
            conn.autocommit = True
            conn.execute("VACUUM ANALYZE memory")
    return url, owner.id


@contextmanager
def seeded(memories: int, vacuum: bool = False) -> Iterator[tuple[str, str]]:
    """A stack of its own, for the block, holding a workspace of `memories`
    synthetic memories: (database url, owner id)."""
    state = Path(tempfile.mkdtemp(prefix="bm25-cost-"))
    config = own_config(state, models_dir(), embedding_job=False)
    with running(Stack(config), remove_state=True) as stack:
        yield seed(stack, memories, vacuum)


@contextmanager
def as_the_services(url: str, owner: str) -> Iterator[psycopg.Connection]:
    """A connection as the services' role, acting for `owner` for assist."""
    with psycopg.connect(url, user=APP_ROLE) as conn:
        conn.execute(
            SET_LOCALS, (["recallatron.member_id", "recallatron.purpose"], [owner, "assist"])
        )
        yield conn


def arm_params(terms: r.QueryTerms) -> dict[str, Any]:
    """The lexical arm's parameters for these terms, no filter, as the store
    sets them (``lexical_arm``) for an arm limit of 100."""
    params: dict[str, Any] = {**r._filter_params(r.Filters(), 0), "limit": 100, **terms.params()}
    if terms.capped:
        params.update(
            cap=r.CANDIDATE_CAP,
            prefilter=r.PREFILTER_FACTOR * 100,
            by_index=terms.by_index and params["walks"] is True,
        )
    return params


def timed(conn: psycopg.Connection, sql: str, params: dict[str, Any]) -> float:
    started = time.perf_counter()
    conn.execute(sql, params).fetchall()
    return (time.perf_counter() - started) * 1000


def measure(url: str, owner: str, queries: list[str], rounds: int) -> dict[str, Any]:
    times: dict[str, dict[str, list[float]]] = {
        path: {"ts_rank_cd": [], "bm25": []} for path in ("all", "capped")
    }
    same_top = 0
    with as_the_services(url, owner) as conn:
        for i, query in enumerate(queries * rounds):
            terms = r.query_terms(conn, query)
            if terms is None:
                continue
            params = arm_params(terms)
            path = "capped" if terms.capped else "all"
            old = TS_RANK_CD_CAPPED if terms.capped else TS_RANK_CD
            new = r.LEXICAL_CAPPED if terms.capped else r.LEXICAL
            order = [("ts_rank_cd", old), ("bm25", new)]
            for name, sql in order if i % 2 else order[::-1]:
                times[path][name].append(timed(conn, sql, params))
            if i < len(queries):
                a = {row[0] for row in conn.execute(old, params)}
                b = {row[0] for row in conn.execute(new, params)}
                same_top += a == b
    out: dict[str, Any] = {"same_rows_of_100": f"{same_top} of {len(queries)} queries"}
    for path, by_name in times.items():
        if not by_name["bm25"]:
            continue
        entry: dict[str, Any] = {"calls": len(by_name["bm25"])}
        out[path] = entry | compared(by_name, "ts_rank_cd", "bm25")
    return out


def compared(times: dict[str, list[float]], before: str, after: str) -> dict[str, Any]:
    """Each statement's p50 and p90 (ms) of its interleaved timings, and the
    p50 of ``after`` over that of ``before``."""
    out: dict[str, Any] = {}
    for name, values in times.items():
        values = sorted(values)
        out[name] = {
            "p50_ms": round(statistics.median(values), 3),
            "p90_ms": round(values[int(0.9 * (len(values) - 1))], 3),
        }
    out["p50_ratio"] = round(out[after]["p50_ms"] / out[before]["p50_ms"], 3)
    return out


def sizes_parser(description: str | None, vacuum: bool = False) -> argparse.ArgumentParser:
    """The options of a benchmark run at each corpus size: --memories,
    --rounds, --vacuum (``seed``'s; `vacuum` its default)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--memories", type=int, nargs="+", default=[10_000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--vacuum", action=argparse.BooleanOptionalAction, default=vacuum)
    return parser


def each_size(
    sizes: list[int], run: Callable[[int, str, str], Any], vacuum: bool = False
) -> dict[str, Any]:
    """``run(memories, url, owner)`` on a stack seeded with each size in
    turn, each size's report printed to stderr as it ends."""
    report = {}
    for n in sizes:
        with seeded(n, vacuum) as (url, owner):
            report[str(n)] = run(n, url, owner)
        print(json.dumps({str(n): report[str(n)]}), file=sys.stderr, flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = sizes_parser(__doc__)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)

    def run(n: int, url: str, owner: str) -> dict[str, Any]:
        rare = synthetic.rare_words_used(n)[: args.queries // 2]
        queries = synthetic.queries(args.queries - len(rare)) + rare
        old_arms.restore(url, "lexical_candidates", "lexical_candidates_newest")
        return measure(url, owner, queries, args.rounds)

    report = each_size(args.memories, run, args.vacuum)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
