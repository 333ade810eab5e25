"""What keeping superseded memories' vectors costs the dense arm (docs/recall.md,
step 3; migration 0062): the arm's two statements as they were before 0062,
on a copy of the workspace without the superseded memories' vectors, against
the store's now, on the workspace with them, interleaved call by call, as the
services' role.

    python -m benchmarks.superseded_cost [--memories 10000] [--share 0.2]
        [--queries 200] [--rounds 3]

For each corpus size it starts a stack of its own, writes the synthetic
memories of `recallatron load` into its database (benchmarks.bm25_cost's
seed), supersedes ``share`` of them (half by a successor private to the
owner, half by one for the whole workspace) and gives every memory a random
vector (the purpose's HNSW graph built once over them, as an import builds
it). The "before" database is a copy of it (``CREATE DATABASE ... TEMPLATE``)
whose superseded memories' vectors are deleted and its HNSW graph built
again, as before 0062 (a supersede deleted the vector), with the exact plan
of 0045 under a name of its own; its HNSW statement is the store's without
the successor's condition. Then, for random query vectors, it times the HNSW
statement and the exact plan in both databases, alternating which goes first,
for the owner (who sees every successor: each superseded vector is refused)
and a member (for whom the private successors are hidden: those superseded
memories are current, and admitted). It also prints the app role's plan of
the HNSW statement, which must read the purpose's HNSW index."""

from __future__ import annotations

import json
import re
import sys
import uuid
from contextlib import ExitStack
from importlib import resources
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from benchmarks.bm25_cost import compared, each_size, sizes_parser
from benchmarks.bm25_cost import timed as timed_ms
from benchmarks.provenance_cost import random_vectors
from services.store.domain import recall as r
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS, with_database

_BEFORE = "_pre62"
_SUCCESSOR_CONDITION = re.compile(
    r"\n\s*AND \(%\(include_superseded\)s OR e\.superseded_by_id IS NULL\n"
    r"\s*OR \(\(SELECT s\.id FROM memory s WHERE s\.id = e\.superseded_by_id\) IS NULL\n"
    r"\s*AND NOT successor_seen\(e\.superseded_by_id\)\)\)"
)
_HNSW_AFTER = r.DENSE["assist"]
_HNSW_BEFORE = _SUCCESSOR_CONDITION.sub("", _HNSW_AFTER)
_EXACT_BEFORE = """
SELECT id::text, cosine FROM dense_candidates_exact_pre62(
    %(vector)b, %(model_id)s, %(input_version)s, %(limit)s, %(kinds)s::memory_kind[],
    %(expiry_days)s, %(entities)s::uuid[])
ORDER BY cosine DESC, id
"""
SUCCESSOR = """
INSERT INTO memory (id, kind, title, body, confidence, origin, audience_member_id, purposes,
                    created_by)
SELECT gen_random_uuid(), m.kind, m.title, m.body || ' (newer)', 1, 'told', %s, '{assist}', %s
FROM memory m WHERE m.id = %s
RETURNING id
"""


def _exact_before() -> str:
    """dense_candidates_exact as migration 0045 defined it, renamed."""
    folder = resources.files("services.store.sql") / "migrations" / "workspace"
    text = (folder / "0045_recall_provenance_in_arms.sql").read_text()
    head = "dense_candidates_exact("
    start = text.index("CREATE OR REPLACE FUNCTION " + head)
    end = text.index("END $$;", start) + len("END $$;")
    return text[start:end].replace(head, head[:-1] + _BEFORE + "(", 1)


def _supersede(conn: psycopg.Connection[Any], owner: str, share: float) -> int:
    """``share`` of the memories superseded, alternately by a successor private
    to the owner and by one for the whole workspace."""
    ids = [row[0] for row in conn.execute("SELECT id FROM memory ORDER BY id")]
    chosen = ids[:: max(1, round(1 / share))] if share > 0 else []
    for i, old in enumerate(chosen):
        row = conn.execute(SUCCESSOR, (owner if i % 2 == 0 else None, owner, old)).fetchone()
        assert row is not None
        conn.execute("UPDATE memory SET superseded_by_id = %s WHERE id = %s", (row[0], old))
    return len(chosen)


def _databases(url: str, owner: str, share: float) -> tuple[str, dict[str, int]]:
    """The workspace superseded and embedded (``url``, after) and its copy as
    before 0062 (the database's name returned)."""
    rng = np.random.default_rng(62)
    with psycopg.connect(url, autocommit=True) as conn:
        superseded = _supersede(conn, owner, share)
        random_vectors(conn, rng)
        conn.execute("VACUUM ANALYZE")
        database = conn.info.dbname
        vectors = conn.execute("SELECT count(*) FROM memory_embedding").fetchone()
    before = f"{database}_before"
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        # A template may have no other session: the stack's own store's.
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{before}"')
        conn.execute(f'CREATE DATABASE "{before}" TEMPLATE "{database}"')
        conn.execute(f'GRANT CONNECT ON DATABASE "{before}" TO {APP_ROLE}')
    before_url = with_database(url, before)
    with psycopg.connect(before_url, autocommit=True) as conn:
        conn.execute("DELETE FROM memory_embedding WHERE superseded_by_id IS NOT NULL")
        conn.execute("REINDEX INDEX memory_embedding_assist_hnsw_idx")
        conn.execute(_exact_before())
        conn.execute(
            f"GRANT EXECUTE ON FUNCTION dense_candidates_exact{_BEFORE}("
            f"vector, text, text, integer, memory_kind[], integer, uuid[]) TO {APP_ROLE}"
        )
        conn.execute("VACUUM ANALYZE")
        kept = conn.execute("SELECT count(*) FROM memory_embedding").fetchone()
    assert vectors is not None and kept is not None
    return before, {
        "superseded": superseded,
        "vectors_after": int(vectors[0]),
        "vectors_before": int(kept[0]),
    }


def _plan(url: str, member: str, params: dict[str, Any]) -> list[str]:
    with psycopg.connect(url, user=APP_ROLE) as conn:
        register_vector(conn)
        conn.execute(
            SET_LOCALS,
            (
                ["recallatron.member_id", "recallatron.purpose", "hnsw.iterative_scan"],
                [member, "assist", "relaxed_order"],
            ),
        )
        plan = [row[0] for row in conn.execute("EXPLAIN " + _HNSW_AFTER, params)]
    return [line.strip() for line in plan if "Scan" in line]


def measure(url: str, owner: str, queries: int, rounds: int, share: float) -> dict[str, Any]:
    before, sizes = _databases(url, owner, share)
    before_url = with_database(url, before)
    rng = np.random.default_rng(7)
    vectors = [rng.normal(size=384).astype(np.float32) for _ in range(queries)]
    base = {**r._filter_params(r.Filters(), 0), "limit": 100, "model_id": "m"}
    base["input_version"] = "v"
    member = str(uuid.uuid4())
    out: dict[str, Any] = {"workspace": sizes}
    for who, caller in (("owner", owner), ("member", member)):
        times: dict[str, dict[str, list[float]]] = {
            arm: {"before": [], "after": []} for arm in ("hnsw", "exact")
        }
        same = {"hnsw": 0, "exact": 0}
        with ExitStack() as stack:
            conns = {}
            for name, db in (("before", before_url), ("after", url)):
                conn = stack.enter_context(psycopg.connect(db, user=APP_ROLE))
                register_vector(conn)
                conn.execute(
                    SET_LOCALS,
                    (
                        [
                            "recallatron.member_id",
                            "recallatron.purpose",
                            "hnsw.iterative_scan",
                            "hnsw.ef_search",
                        ],
                        [caller, "assist", "relaxed_order", str(r.EF_SEARCH)],
                    ),
                )
                conns[name] = conn
            statements = {
                "hnsw": {"before": _HNSW_BEFORE, "after": _HNSW_AFTER},
                "exact": {"before": _EXACT_BEFORE, "after": r.DENSE_EXACT},
            }
            for i, vector in enumerate(vectors * rounds):
                params = {**base, "vector": vector / np.linalg.norm(vector)}
                for arm, by_name in statements.items():
                    order = ["before", "after"] if i % 2 else ["after", "before"]
                    for name in order:
                        times[arm][name].append(timed_ms(conns[name], by_name[name], params))
                    if i < queries:
                        rows = [conns[n].execute(by_name[n], params).fetchall() for n in order]
                        same[arm] += rows[0] == rows[1]
        out[who] = {
            arm: {"calls": len(t["after"]), "same_answers": same[arm]}
            | compared(t, "before", "after")
            for arm, t in times.items()
        }
    params = {**base, "vector": vectors[0] / np.linalg.norm(vectors[0])}
    out["hnsw_plan_as_app_role"] = _plan(url, owner, params)
    with psycopg.connect(with_database(url, "postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{before}"')
    return out


def main(argv: list[str] | None = None) -> int:
    parser = sizes_parser(__doc__, vacuum=True)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--share", type=float, default=0.2)
    args = parser.parse_args(argv)

    def run(n: int, url: str, owner: str) -> dict[str, Any]:
        return measure(url, owner, args.queries, args.rounds, args.share)

    report = each_size(args.memories, run, args.vacuum)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
