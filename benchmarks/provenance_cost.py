"""What the walk's condition costs the recall arms (docs/recall.md, step 1;
migration 0045): each arm's statement as it was before 0045 against the
store's now, interleaved call by call in one database, as the services' role.

    python -m benchmarks.provenance_cost [--memories 10000] [--queries 100] [--rounds 3]

For each corpus size it starts a stack of its own, writes the synthetic
memories of `recallatron load` into its database (benchmarks.bm25_cost's
seed, vacuumed), gives every memory a random vector of a model of its own
(the purpose's HNSW graph built once over them, as an import builds it) and
recreates the functions of before 0045 under names of their own (their
bodies read from migrations 0021, 0036 and 0029, renamed). Then, for the
load tool's queries and rare words, it times the lexical arm (every match
ranked, or the capped path), the HNSW statement and the exact dense plan,
both forms per call, alternating which goes first; the owner acts, whom the
walk admits everywhere, so both forms must give the same rows (counted).
It also prints the app role's plans: the lexical function's nested
statement (auto_explain) and the HNSW statement, which must read the GIN
index and the purpose's HNSW index."""

from __future__ import annotations

import json
import re
import sys
from importlib import resources
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from benchmarks.bm25_cost import arm_params, as_the_services, compared, each_size, sizes_parser
from benchmarks.bm25_cost import timed as timed_ms
from benchmarks.explain_lexical import explained_as_app_role
from recallatron_devkit import synthetic
from services.store.domain import recall as r
from services.store.infrastructure.db import SET_LOCALS

_BEFORE = "_pre48"
_FUNCTIONS = {
    "0021_lexical_one_purpose.sql": "lexical_candidates_bm25(",
    "0036_lexical_rare_terms.sql": "lexical_candidates_bm25_capped(",
    "0029_dense_exact_once.sql": "dense_candidates_exact(",
}
_DENSE_FILTER = re.compile(r"\n\s*AND vector_provenance_admits\([^)]*\)")


def _before_functions() -> str:
    """The three functions as migrations before 0045 defined them, renamed."""
    folder = resources.files("services.store.sql") / "migrations" / "workspace"
    out = []
    for file, head in _FUNCTIONS.items():
        text = (folder / file).read_text()
        start = re.search(r"CREATE (OR REPLACE )?FUNCTION " + re.escape(head), text)
        assert start is not None, file
        end = text.index("END $$;", start.start()) + len("END $$;")
        body = text[start.start() : end]
        out.append(body.replace(head, head[:-1] + _BEFORE + "(", 1))
    return "\n".join(out)


def _renamed(sql: str, function: str) -> str:
    return sql.replace(function + "(", function + _BEFORE + "(", 1)


def random_vectors(conn: psycopg.Connection[Any], rng: np.random.Generator) -> None:
    """Every memory given a random unit vector, the HNSW index built once after
    them (far faster than entry by entry); ``conn`` autocommit, the
    migrations' owner."""
    register_vector(conn)
    ids = [row[0] for row in conn.execute("SELECT id FROM memory ORDER BY id")]
    conn.execute("DROP INDEX memory_embedding_assist_hnsw_idx")
    with conn.cursor().copy(
        "COPY memory_embedding (memory_id, model_id, input_version, embedding) FROM STDIN"
    ) as copy:
        for memory_id in ids:
            vector = rng.normal(size=384).astype(np.float32)
            copy.write_row((memory_id, "m", "v", vector / np.linalg.norm(vector)))
    conn.execute("SET maintenance_work_mem = '256MB'")
    conn.execute(
        "CREATE INDEX memory_embedding_assist_hnsw_idx ON memory_embedding"
        " USING hnsw (embedding vector_cosine_ops) WHERE purposes @> '{assist}'::purpose[]"
    )


def _vectors(url: str, rng: np.random.Generator) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        random_vectors(conn, rng)
        conn.execute(_before_functions())
        conn.execute("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO recallatron_app")
        conn.execute("VACUUM ANALYZE memory_embedding")


def _plans(url: str, owner: str, query: str, dense: dict[str, Any]) -> dict[str, Any]:
    notices: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        explained_as_app_role(conn, notices)
        with conn.transaction():
            conn.execute(
                SET_LOCALS,
                (["recallatron.member_id", "recallatron.purpose"], [owner, "assist"]),
            )
            terms = r.query_terms(conn, query)
            assert terms is not None
            conn.execute(r.LEXICAL, arm_params(terms)).fetchall()
            conn.execute(SET_LOCALS, (["hnsw.iterative_scan"], ["relaxed_order"]))
            hnsw = "\n".join(row[0] for row in conn.execute("EXPLAIN " + r.DENSE["assist"], dense))

    def scans(plan: str) -> list[str]:
        return [line.strip() for line in plan.splitlines() if "Scan" in line]

    nested = [line for n in notices for line in scans(n)]
    return {
        "lexical_reads_gin_index": any(
            "Index Scan on memory_search_assist_idx" in x for x in nested
        ),
        "lexical_scans": nested,
        "dense_reads_hnsw_index": "memory_embedding_assist_hnsw_idx" in hnsw,
        "dense_scans": scans(hnsw),
    }


def measure(url: str, owner: str, queries: list[str], rounds: int) -> dict[str, Any]:
    rng = np.random.default_rng(48)
    _vectors(url, rng)
    names = ("before", "after")
    times: dict[str, dict[str, list[float]]] = {
        arm: {n: [] for n in names} for arm in ("lexical", "capped", "hnsw", "exact")
    }
    same: dict[str, int] = {arm: 0 for arm in times}
    dense_base = {**r._filter_params(r.Filters(), 0), "limit": 100, "model_id": "m"}
    dense_base["input_version"] = "v"
    with as_the_services(url, owner) as conn:
        register_vector(conn)
        keys = ["hnsw.iterative_scan", "hnsw.ef_search"]
        conn.execute(SET_LOCALS, (keys, ["relaxed_order", str(r.EF_SEARCH)]))
        for i, query in enumerate(queries * rounds):
            terms = r.query_terms(conn, query)
            vector = rng.normal(size=384).astype(np.float32)
            dense = {**dense_base, "vector": vector / np.linalg.norm(vector)}
            pairs: dict[str, tuple[str, str, dict[str, Any]]] = {
                "hnsw": (_DENSE_FILTER.sub("", r.DENSE["assist"]), r.DENSE["assist"], dense),
                "exact": (_renamed(r.DENSE_EXACT, "dense_candidates_exact"), r.DENSE_EXACT, dense),
            }
            if terms is not None:
                params = arm_params(terms)
                arm, sql, fn = (
                    ("capped", r.LEXICAL_CAPPED, "lexical_candidates_bm25_capped")
                    if terms.capped
                    else ("lexical", r.LEXICAL, "lexical_candidates_bm25")
                )
                pairs[arm] = (_renamed(sql, fn), sql, params)
            for arm, (before, after, params) in pairs.items():
                order = [("before", before), ("after", after)]
                for name, sql in order if i % 2 else order[::-1]:
                    times[arm][name].append(timed_ms(conn, sql, params))
                if i < len(queries):
                    rows = [conn.execute(s, params).fetchall() for s in (before, after)]
                    same[arm] += rows[0] == rows[1]
        out: dict[str, Any] = {}
        for arm, by_name in times.items():
            if by_name["after"]:
                out[arm] = {"calls": len(by_name["after"]), "same_answers": same[arm]}
                out[arm] |= compared(by_name, "before", "after")
    out["plans"] = _plans(url, owner, queries[0], dense_base | {"vector": dense["vector"]})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = sizes_parser(__doc__, vacuum=True)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args(argv)

    def run(n: int, url: str, owner: str) -> dict[str, Any]:
        rare = synthetic.rare_words_used(n)[: args.queries // 2]
        queries = synthetic.queries(args.queries - len(rare)) + rare
        return measure(url, owner, queries, args.rounds)

    report = each_size(args.memories, run, args.vacuum)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
