"""The lexical arm's plan under the services' role, before and after migration
0006, on a workspace seeded by `recallatron load` (not part of `make test`):

    python -m benchmarks.explain_lexical --state-dir /tmp/rl100000 --memories 100000

It starts the stack on that state directory (which applies any pending
migration), then, as `recallatron_app` with a caller's settings, prints
`EXPLAIN ANALYZE` of the arm as it was (the query beneath row-level security)
and the plan of the statement inside `lexical_candidates` (auto_explain of the
nested statement), for a rare term and for a rare term OR-ed with a common one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import psycopg

from recallatron_cli import common
from recallatron_devkit import synthetic
from recallatron_devkit.load import models_dir
from recallatron_devkit.stack import Stack, own_config, running
from services.store.domain import recall as r
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS, with_database

# The arm before migration 0006, verbatim: the match beneath the policy.
BEFORE = """
SELECT m.id::text, ts_rank_cd(m.search, q.query) AS score
FROM memory m, (SELECT %(tsquery)s::tsquery AS query) q
WHERE m.search @@ q.query
  AND (%(include_superseded)s OR m.superseded_by_id IS NULL)
  AND (cardinality(%(kinds)s::memory_kind[]) = 0 OR m.kind = ANY(%(kinds)s::memory_kind[]))
  AND (%(expiry_days)s = 0 OR m.updated_at >= now() - make_interval(days => %(expiry_days)s))
  AND (cardinality(%(entities)s::uuid[]) = 0 OR EXISTS (
        SELECT 1 FROM mention mn
        WHERE mn.memory_id = m.id AND mn.entity_id = ANY(%(entities)s::uuid[])))
ORDER BY score DESC, m.created_at DESC, m.id
LIMIT %(limit)s
"""


def explained_as_app_role(conn: psycopg.Connection, plans: list[str]) -> None:
    """Turns a superuser connection into one acting as the services' role whose
    every statement's plan, nested ones included (the statement inside a
    function), arrives as a notice appended to `plans` (auto_explain)."""
    conn.add_notice_handler(lambda diag: plans.append(diag.message_primary or ""))
    conn.execute("LOAD 'auto_explain'")
    for name, value in [
        ("auto_explain.log_min_duration", "0"),
        ("auto_explain.log_nested_statements", "on"),
        ("auto_explain.log_analyze", "on"),
        ("auto_explain.log_level", "notice"),
    ]:
        conn.execute("SELECT set_config(%s, %s, false)", (name, value))
    conn.execute(f"SET ROLE {APP_ROLE}")


def _plans(url: str, member: str, purpose: str, lexemes: list[str]) -> dict[str, str]:
    params = {
        **r._filter_params(r.Filters(), 0),
        "limit": 100,
        "tsquery": r.tsquery_text(lexemes),
    }
    notices: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn:
        explained_as_app_role(conn, notices)
        with conn.transaction():
            keys = ["recallatron.member_id", "recallatron.purpose", "enable_seqscan"]
            conn.execute(SET_LOCALS, (keys, [member, purpose, "off"]))
            before = "\n".join(
                row[0]
                for row in conn.execute("EXPLAIN ANALYZE " + BEFORE, params)  # type: ignore[operator]
            )
        with conn.transaction():
            conn.execute(SET_LOCALS, (keys[:2], [member, purpose]))
            # The arm's own choice of path, from the caller's statistics.
            terms = r.query_terms(conn, " ".join(lexemes))
            assert terms is not None
            capped = terms.capped
            params["terms"], params["idfs"] = terms.kept, terms.idfs
            params["rare"] = terms.params()["rare"]
            params["prefilter"] = r.PREFILTER_FACTOR * 100
            params["cap"] = r.CANDIDATE_CAP
            params["by_index"] = terms.by_index
            notices.clear()
            conn.execute(r.LEXICAL_CAPPED if capped else r.LEXICAL, params).fetchall()
    inner = next((n for n in notices if "FROM memory x" in n), "\n".join(notices))
    after = inner.split("\n", 1)[1] if "\n" in inner else inner
    return {"before": before, "after": after, "capped": str(capped)}


def seeded_owner(server_url: str, args: argparse.Namespace) -> tuple[str, str]:
    """The database of the workspace `recallatron load` seeded for
    --memories/--seed/--members, and its owner's member id."""
    slug = f"load-{args.memories}-{args.seed}" + (f"-m{args.members}" if args.members > 1 else "")
    with psycopg.connect(with_database(server_url, "recallatron")) as conn:
        row = conn.execute(
            "SELECT w.database_name, m.id FROM workspace w JOIN member m"
            " ON m.workspace_id = w.id WHERE w.slug = %s ORDER BY m.handle LIMIT 1",
            (slug,),
        ).fetchone()
    if row is None:
        sys.exit(f"no seeded workspace {slug} in {args.state_dir}")
    return str(row[0]), str(row[1])


def seeded_arguments(doc: str) -> argparse.ArgumentParser:
    """A parser with the options that name a seeded workspace (seeded_owner)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--state-dir", required=True)
    p.add_argument("--memories", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--members", type=int, default=8)
    return p


def main() -> None:
    p = seeded_arguments(__doc__ or "")
    common.purpose_option(p)
    args = p.parse_args()
    state = Path(args.state_dir)
    stack = Stack(own_config(state, models_dir()))
    with running(stack):
        database, member = seeded_owner(stack.database_url, args)
        url = with_database(stack.database_url, database)
        rare = synthetic.rare_word(0)
        with psycopg.connect(url) as conn:
            stem = conn.execute("SELECT tsvector_to_array(to_tsvector('english', %s))", (rare,))
            rare_lexeme = stem.fetchone()[0][0]  # type: ignore[index]
        out = {
            "rare": _plans(url, member, args.purpose, [rare_lexeme]),
            "rare | common": _plans(url, member, args.purpose, [rare_lexeme, "follow"]),
        }
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
