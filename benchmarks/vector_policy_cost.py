"""What the vectors' eligibility rule costs the dense arm (docs/benchmarks.md,
"The vectors' eligibility, evaluated cheaply"): the arm's statement with the
policy's function as migration 0005 wrote it (a SQL wrapper that is not
inlined) against migration 0020's PL/pgSQL one, in one database, as the
services' role, in turns, the same queries each round.

    python -m benchmarks.vector_policy_cost --state-dir DIR [--queries 300] [--rounds 4]

DIR is a state directory seeded by `recallatron load` (for example the
`--state-prefix` of `benchmarks.recall_bench`, /tmp/rl10000). Only its
embedded Postgres is started. The queries are stored vectors of the
workspace, each moved a little (Gaussian noise, then normalised), so each
has near neighbours as a real query does. Each variant runs in a transaction
of its own that is rolled back, so the database is left as it was. It prints
each variant's p50 and p90 (ms), their ratio, and how many answers were the
same."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg.types import TypeInfo

from benchmarks.bm25_cost import compared
from recallatron.vocabulary import DEFAULT_PURPOSE
from recallatron_devkit.load import models_dir
from recallatron_devkit.stack import Stack, own_config
from services.store.domain.recall import DENSE, EF_SEARCH
from services.store.infrastructure.db import APP_ROLE, CONTROL_DATABASE, SET_LOCALS, with_database
from services.store.infrastructure.transactions import configure_workspace_connection

# The function as migration 0005 defined it, verbatim.
BEFORE = """
CREATE OR REPLACE FUNCTION vector_is_eligible(audience_member_id uuid, purposes purpose[])
    RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE SET search_path = public
    AS $$ SELECT is_eligible(NULL, audience_member_id, purposes) $$
"""
AFTER = (
    Path(__file__).resolve().parent.parent
    / "services/store/sql/migrations/workspace/0020_vector_eligibility_plpgsql.sql"
).read_text()
WORKSPACE = """
SELECT w.database_name, m.id::text FROM workspace w JOIN member m ON m.workspace_id = w.id
WHERE m.role = 'owner' AND m.removed_at IS NULL
ORDER BY (SELECT count(*) FROM member x WHERE x.workspace_id = w.id) DESC LIMIT 1
"""
SAMPLE = """
SELECT embedding, model_id, input_version FROM memory_embedding ORDER BY random() LIMIT %s
"""


def queries(conn: psycopg.Connection, n: int) -> list[tuple[np.ndarray, str, str]]:
    rng = np.random.default_rng(3)
    out = []
    for vector, model_id, version in conn.execute(SAMPLE, (n,)).fetchall():
        q = np.asarray(vector.to_numpy(), dtype=np.float32)
        q = q + rng.normal(0, 0.03, q.shape).astype(np.float32)
        out.append((q / np.linalg.norm(q), model_id, version))
    return out


def run(
    conn: psycopg.Connection, definition: str, owner: str, qs: list[tuple[np.ndarray, str, str]]
) -> tuple[list[float], list[list[str]]]:
    times: list[float] = []
    answers: list[list[str]] = []
    with conn.transaction(force_rollback=True):
        conn.execute(definition)
        conn.execute(f"SET LOCAL ROLE {APP_ROLE}")
        keys = ["recallatron.member_id", "recallatron.purpose", "hnsw.iterative_scan"]
        keys += ["hnsw.ef_search", "plan_cache_mode"]
        values = [owner, DEFAULT_PURPOSE, "relaxed_order", str(EF_SEARCH), "force_generic_plan"]
        conn.execute(SET_LOCALS, (keys, values))
        for vector, model_id, version in qs:
            params = {
                "vector": vector,
                "model_id": model_id,
                "input_version": version,
                "limit": EF_SEARCH,
                "kinds": [],
                "expiry_days": 0,
                "entities": [],
                "floor": 0.3,
            }
            started = time.perf_counter()
            rows = conn.execute(DENSE[DEFAULT_PURPOSE], params, prepare=True).fetchall()
            times.append((time.perf_counter() - started) * 1000)
            answers.append([r[0] for r in rows])
    return times, answers


def measure(state_dir: Path, n: int, rounds: int) -> dict[str, Any]:
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
            qs = queries(conn, n)
            conn.commit()
            times: dict[str, list[float]] = {"sql wrapper": [], "plpgsql": []}
            same = rows = 0
            for i in range(rounds):
                order = [("sql wrapper", BEFORE), ("plpgsql", AFTER)]
                got = {}
                for name, definition in order if i % 2 == 0 else order[::-1]:
                    t, got[name] = run(conn, definition, owner, qs)
                    times[name] += t[len(t) // 10 :]  # the first tenth warms the plan
                same += sum(a == b for a, b in zip(got["sql wrapper"], got["plpgsql"], strict=True))
                rows += sum(len(a) for a in got["plpgsql"])
    finally:
        stack.stop()
    report = compared(times, "sql wrapper", "plpgsql")
    report["same_answers"] = f"{same}/{rounds * len(qs)}"
    report["rows_per_query"] = round(rows / (rounds * len(qs)), 1)
    report["vectors"] = "sampled from " + database
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.state_dir, args.queries, args.rounds), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
