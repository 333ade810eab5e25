"""The two ways of each arm's costly paths, timed against each other as the
services' role on a workspace seeded by `recallatron load` (not part of
`make test`):

    python -m benchmarks.arm_paths --state-dir /tmp/rl100000 --memories 100000

It starts only Postgres on that state directory (migrations must already be
applied: start the stack on it once), then, as `recallatron_app` with the
owner's settings, and with every query's two ways interleaved (three runs
each, the median):

- dense: the HNSW scan of the caller's purpose's graph (`recall.DENSE`, with
  the store's `hnsw.ef_search`) against all of the caller's vectors ranked
  exactly (`recall.DENSE_EXACT`), for the owner recalling for each purpose:
  the time of each, and how far the scan's 100 rows agree with the exact
  ones (recall@100, and the share of probes whose first 10 are the exact
  first 10). Probes are drawn from the stored vectors, or with `--queries`
  are the load mix's queries embedded as rank embeds them (the query graph,
  in this process), with the dense floor applied as the store applies it:
  a stored vector finds its neighbours more easily than a query does;
- lexical: for every capped query of the load mix's classes, the newest 500
  matches read from the GIN index against the created_at walk, with the
  choice `walk_is_cheaper` makes and the one the arm made before it
  (the sum of document frequencies squared against 500 x memories).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from benchmarks.explain_lexical import seeded_arguments, seeded_owner
from benchmarks.recall_bench import CLASSES, POOL
from recallatron.vocabulary import PURPOSES
from recallatron_devkit import synthetic
from recallatron_devkit.load import models_dir
from recallatron_devkit.localpg import LocalPostgres
from recallatron_devkit.stack import free_port
from services.store.domain import recall as r
from services.store.domain.control_records import WorkspaceSettings
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS, with_database
from services.store.settings import StoreSettings

RUNS = 3
# The store's default, as a store started with no settings ranks.
EXACT_ROWS = StoreSettings().dense_exact_rows


def _median_ms(run: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _caller(conn: psycopg.Connection, member: str, purpose: str, **more: str) -> None:
    keys = ["recallatron.member_id", "recallatron.purpose", *more]
    conn.execute(SET_LOCALS, (keys, [member, purpose, *more.values()]))


def query_vectors(memories: int, seed: int, count: int) -> list[np.ndarray]:
    """The load mix's queries, its classes in turn, embedded as rank has
    them embedded (the embed service's query graph)."""
    from services.embed.models import BiEncoder

    pools = synthetic.query_mix(count, memories, seed, seed + 1, CLASSES)
    texts = [pools[c][i] for i in range(count) for c in CLASSES][:count]
    encoder = BiEncoder(models_dir() / "all-MiniLM-L6-v2", threads=1)
    return list(encoder.embed_queries(texts))


def dense(
    conn: psycopg.Connection, member: str, probes: int, queries: list[np.ndarray] | None = None
) -> list[dict[str, Any]]:
    from pgvector.psycopg import register_vector

    register_vector(conn)
    with conn.transaction():  # probes among the owner's vectors
        _caller(conn, member, "assist")
        model_id, version = conn.execute(
            "SELECT model_id, input_version FROM memory_embedding LIMIT 1"
        ).fetchone()  # type: ignore[misc]
        vectors = queries or [
            np.array(json.loads(row[0]), dtype=np.float32)
            for row in conn.execute(
                "SELECT embedding::text FROM memory_embedding ORDER BY memory_id LIMIT %s",
                (probes,),
            )
        ]
    out = []
    for purpose in PURPOSES:
        hnsw, exact, overlap, top10 = [], [], [], []
        missed: list[int] = []  # exact ranks of the rows the scan did not return
        with conn.transaction():
            # As the store runs the scan (recall.RecallQueries.dense).
            _caller(
                conn,
                member,
                purpose,
                **{
                    "hnsw.iterative_scan": "relaxed_order",
                    "hnsw.ef_search": str(max(r.EF_SEARCH, 100)),
                },
            )
            visible, graph = conn.execute(r.CALLER_CORPUS).fetchone()  # type: ignore[misc]
            for vector in vectors:
                params = {
                    **r._filter_params(r.Filters(), 0),
                    "limit": 100,
                    "vector": vector,
                    "model_id": model_id,
                    "input_version": version,
                    # A query's rows as the store returns them; a stored
                    # vector's 100 nearest all.
                    "floor": WorkspaceSettings().dense_floor if queries else 0.0,
                }
                hnsw.append(
                    _median_ms(lambda p=params, q=r.DENSE[purpose]: conn.execute(q, p).fetchall())
                )
                exact.append(_median_ms(lambda p=params: conn.execute(r.DENSE_EXACT, p).fetchall()))
                # The floor as the store applies it, after the statement.
                floor = params["floor"]
                a = [row[0] for row in conn.execute(r.DENSE[purpose], params) if row[1] >= floor]
                b = [row[0] for row in conn.execute(r.DENSE_EXACT, params) if row[1] >= floor]
                # No row above the floor at all: nothing to miss.
                overlap.append(len(set(a) & set(b)) / len(b) if b else 1.0)
                top10.append(a[:10] == b[:10])
                found = set(a)
                missed.extend(i + 1 for i, row in enumerate(b) if row not in found)
        out.append(
            {
                "purpose": purpose,
                "visible": int(visible),
                "graph": float(graph or 0),
                "exact_chosen": r.dense_exact(int(visible), float(graph or 0), EXACT_ROWS),
                "hnsw_p50_ms": round(statistics.median(hnsw), 2),
                "exact_p50_ms": round(statistics.median(exact), 2),
                "recall_at_100": round(statistics.mean(overlap), 3),
                "first_10_exact": round(statistics.mean(top10), 3),
                "missed_rank_p50": statistics.median(missed) if missed else None,
            }
        )
    return out


def lexical(
    conn: psycopg.Connection, member: str, memories: int, seed: int, per_class: int
) -> list[dict[str, Any]]:
    pools = synthetic.query_mix(POOL, memories, seed, seed + 1, CLASSES)
    out = []
    for cls in CLASSES:
        for query in pools[cls][:per_class]:
            with conn.transaction():
                _caller(conn, member, "assist")
                terms = r.query_terms(conn, query)
                if terms is None or not terms.capped:
                    continue
                docs = [
                    int(row[1]) for row in conn.execute(r.TERMS, (query,)) if row[0] in terms.kept
                ]
                estimate = conn.execute(
                    "SELECT reltuples FROM pg_class WHERE oid = 'memory'::regclass"
                ).fetchone()
                rows = float(estimate[0]) if estimate else 0.0
                params = {
                    **r._filter_params(r.Filters(), 0),
                    "limit": 100,
                    **terms.params(),
                    "cap": r.CANDIDATE_CAP,
                    "prefilter": r.PREFILTER_FACTOR * 100,
                }
                times: dict[bool, list[float]] = {True: [], False: []}
                for walk in (False, True) * RUNS:
                    started = time.perf_counter()
                    conn.execute(r.LEXICAL_CAPPED, {**params, "by_index": walk}).fetchall()
                    times[walk].append((time.perf_counter() - started) * 1000)
            out.append(
                {
                    "class": cls,
                    "query": query,
                    "share": round(max(docs) * sum(docs) / (r.CANDIDATE_CAP * rows), 3),
                    "gin_ms": round(statistics.median(times[False]), 2),
                    "walk_ms": round(statistics.median(times[True]), 2),
                    "walk_chosen": terms.by_index,
                    "walk_before": sum(docs) ** 2 > r.CANDIDATE_CAP * rows,
                }
            )
    return out


def main() -> None:
    p = seeded_arguments(__doc__ or "")
    p.add_argument("--probes", type=int, default=30)
    p.add_argument("--per-class", type=int, default=60)
    p.add_argument(
        "--queries",
        action="store_true",
        help="dense probes: the load mix's queries, embedded as rank has them, not stored vectors",
    )
    args = p.parse_args()
    queries = query_vectors(args.memories, args.seed, args.probes) if args.queries else None
    pg = LocalPostgres(Path(args.state_dir) / "pgdata", free_port())
    pg.start()
    try:
        database, owner = seeded_owner(pg.url, args)
        with psycopg.connect(with_database(pg.url, database)) as conn:
            conn.execute(f"SET ROLE {APP_ROLE}")
            report = {
                "dense": dense(conn, owner, args.probes, queries),
                "lexical": lexical(conn, owner, args.memories, args.seed, args.per_class),
            }
    finally:
        pg.stop()
    for d in report["dense"]:
        print(
            f"dense {d['purpose']:12} visible {d['visible']:6} of {d['graph']:8.0f}: "
            f"graph's HNSW {d['hnsw_p50_ms']} ms (recall@100 {d['recall_at_100']}, "
            f"first 10 exact {d['first_10_exact']}, rows missed at exact rank p50 "
            f"{d['missed_rank_p50']}), "
            f"exact {d['exact_p50_ms']} ms, chosen: {'exact' if d['exact_chosen'] else 'HNSW'}"
        )
    for cls in CLASSES:
        rows = [x for x in report["lexical"] if x["class"] == cls]
        if not rows:
            continue

        def total(key: str, rows: list[dict[str, Any]] = rows) -> float:
            return float(sum(x["walk_ms"] if x[key] else x["gin_ms"] for x in rows))

        print(
            f"lexical {cls:8} {len(rows)} capped queries: total ms as chosen now "
            f"{total('walk_chosen'):.0f}, as before {total('walk_before'):.0f}"
        )
    for x in sorted(report["lexical"], key=lambda x: x["share"]):
        print(
            f"  {x['share']:6.3f} gin {x['gin_ms']:6.2f} walk {x['walk_ms']:6.2f} "
            f"{'walk' if x['walk_chosen'] else 'gin '} {x['class']:8} {x['query']}"
        )


if __name__ == "__main__":
    main()
