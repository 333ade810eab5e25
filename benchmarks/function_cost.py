"""What a recall arm's statement costs with a database function as an earlier
migration defined it against the migration that replaced it, in one
database, as the services' role, in turns, the same queries each round
(docs/benchmarks.md, "The vectors' eligibility, evaluated cheaply" and "The
lexical arm's plan, for one purpose").

    python -m benchmarks.function_cost vector-policy --state-dir DIR [--queries 300] [--rounds 4]
    python -m benchmarks.function_cost lexical-plan --state-dir DIR [--queries 300] [--rounds 4]

- vector-policy: the dense arm's statement with the vectors' policy function
  of migration 0005 (a SQL wrapper, not inlined) against 0020's PL/pgSQL one.
  Queries are stored vectors of the workspace, each moved a little (Gaussian
  noise, then normalised), so each has near neighbours as a real query does.
- lexical-plan: the lexical arm's statement (both paths, as the store picks
  them) with the BM25 functions of migration 0017 (eight branches planned)
  against 0021's (the caller's purpose only). Queries are `recallatron load`'s
  mix and rare words.

DIR is a state directory seeded by `recallatron load` (for example the
`--state-prefix` of `benchmarks.recall_bench`, /tmp/rl10000). Only its
embedded Postgres is started. Each variant runs in a transaction of its own
that is rolled back, so the database is left as it was. It prints each
variant's p50 and p90 (ms), their ratio, and how many answers were the
same."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg.types import TypeInfo

from benchmarks.bm25_cost import compared
from recallatron.vocabulary import DEFAULT_PURPOSE
from recallatron_devkit import synthetic
from recallatron_devkit.load import models_dir
from recallatron_devkit.stack import Stack, own_config
from services.store.domain.recall import DENSE, EF_SEARCH, Filters, _filter_params, lexical_arm
from services.store.infrastructure.db import APP_ROLE, CONTROL_DATABASE, SET_LOCALS, with_database
from services.store.infrastructure.transactions import configure_workspace_connection

MIGRATIONS = Path(__file__).resolve().parent.parent / "services/store/sql/migrations/workspace"
# The vectors' policy function as migration 0005 defined it, verbatim.
VECTOR_POLICY_0005 = """
CREATE OR REPLACE FUNCTION vector_is_eligible(audience_member_id uuid, purposes purpose[])
    RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE SET search_path = public
    AS $$ SELECT is_eligible(NULL, audience_member_id, purposes) $$
"""


def bm25_functions_0017() -> str:
    """Migration 0017's two BM25 functions, as it created them."""
    text = (MIGRATIONS / "0017_bm25.sql").read_text()
    start = text.index("CREATE FUNCTION lexical_candidates_bm25(")
    end = text.index("REVOKE ALL ON FUNCTION")
    return text[start:end].replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")


WORKSPACE = """
SELECT w.database_name, m.id::text FROM workspace w JOIN member m ON m.workspace_id = w.id
WHERE m.role = 'owner' AND m.removed_at IS NULL
ORDER BY (SELECT count(*) FROM member x WHERE x.workspace_id = w.id) DESC LIMIT 1
"""
SAMPLE = """
SELECT embedding, model_id, input_version FROM memory_embedding ORDER BY random() LIMIT %s
"""
MEMORIES = "SELECT count(*) FROM memory"
Query = Callable[[psycopg.Connection], list[str]]


def dense_queries(conn: psycopg.Connection, n: int) -> list[Query]:
    rng = np.random.default_rng(3)
    out: list[Query] = []
    for vector, model_id, version in conn.execute(SAMPLE, (n,)).fetchall():
        q = np.asarray(vector.to_numpy(), dtype=np.float32)
        q = q + rng.normal(0, 0.03, q.shape).astype(np.float32)
        params = {
            **_filter_params(Filters(), 0),
            "vector": q / np.linalg.norm(q),
            "model_id": model_id,
            "input_version": version,
            "limit": EF_SEARCH,
            "floor": 0.3,
        }

        def dense(c: psycopg.Connection, p: dict[str, Any] = params) -> list[str]:
            rows = c.execute(DENSE[DEFAULT_PURPOSE], p, prepare=True).fetchall()
            return [str(r[0]) for r in rows]

        out.append(dense)
    return out


def lexical_queries(conn: psycopg.Connection, n: int) -> list[Query]:
    row = conn.execute(MEMORIES).fetchone()
    rare = synthetic.rare_words_used(int(row[0]) if row else 0)[: n // 3]
    params: dict[str, object] = {**_filter_params(Filters(), 0), "limit": EF_SEARCH}
    out: list[Query] = []
    for text in synthetic.queries(n - len(rare)) + rare:

        def lexical(c: psycopg.Connection, q: str = text) -> list[str]:
            return [x.id for x in lexical_arm(c, q, params).candidates]

        out.append(lexical)
    return out


CASES: dict[str, tuple[str, Callable[[], str], str, Callable[..., list[Query]]]] = {
    "vector-policy": (
        "sql wrapper (0005)",
        lambda: VECTOR_POLICY_0005,
        "0020_vector_eligibility_plpgsql.sql",
        dense_queries,
    ),
    "lexical-plan": (
        "eight branches (0017)",
        bm25_functions_0017,
        "0021_lexical_one_purpose.sql",
        lexical_queries,
    ),
}


def run(
    conn: psycopg.Connection, definition: str, owner: str, qs: list[Query]
) -> tuple[list[float], list[list[str]]]:
    times: list[float] = []
    answers: list[list[str]] = []
    with conn.transaction(force_rollback=True):
        conn.execute(definition.encode())
        conn.execute(f"SET LOCAL ROLE {APP_ROLE}")
        keys = ["recallatron.member_id", "recallatron.purpose", "hnsw.iterative_scan"]
        keys += ["hnsw.ef_search", "plan_cache_mode"]
        values = [owner, DEFAULT_PURPOSE, "relaxed_order", str(EF_SEARCH), "force_generic_plan"]
        conn.execute(SET_LOCALS, (keys, values))
        for query in qs:
            started = time.perf_counter()
            answers.append(query(conn))
            times.append((time.perf_counter() - started) * 1000)
    return times, answers


def measure(case: str, state_dir: Path, n: int, rounds: int) -> dict[str, Any]:
    before, before_sql, migration, make_queries = CASES[case]
    words = migration.split("_", 1)[1].removesuffix(".sql").replace("_", " ")
    after = f"{words} ({migration[:4]})"
    definitions = {before: before_sql(), after: (MIGRATIONS / migration).read_text()}
    stack = Stack(own_config(state_dir, models_dir()))
    stack.start_postgres()
    try:
        url = stack.database_url
        with psycopg.connect(with_database(url, CONTROL_DATABASE)) as control:
            row = control.execute(WORKSPACE).fetchone()
        if row is None:
            raise SystemExit(f"{state_dir}: no workspace; seed one with `recallatron load`")
        database, owner = row
        with psycopg.connect(with_database(url, database)) as conn:
            vector = TypeInfo.fetch(conn, "vector")
            assert vector is not None
            configure_workspace_connection(conn, vector)
            qs = make_queries(conn, n)
            conn.commit()
            times: dict[str, list[float]] = {before: [], after: []}
            same = rows = 0
            for i in range(rounds):
                got = {}
                for name in [before, after] if i % 2 == 0 else [after, before]:
                    t, got[name] = run(conn, definitions[name], owner, qs)
                    times[name] += t[len(t) // 10 :]  # the first tenth warms the caches
                same += sum(a == b for a, b in zip(got[before], got[after], strict=True))
                rows += sum(len(a) for a in got[after])
    finally:
        stack.stop()
    report = compared(times, before, after)
    report["same_answers"] = f"{same}/{rounds * len(qs)}"
    report["rows_per_query"] = round(rows / (rounds * len(qs)), 1)
    report["database"] = database
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.case, args.state_dir, args.queries, args.rounds), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
