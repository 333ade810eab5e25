"""What a history search costs (docs/migration.md, "History in recall"): the
store's statement before migration 0019 (the GIN index unusable beneath the
owner-only policy, every turn of the owner's history matched) against the
statement on history_matches, interleaved query by query in one database, as
the services' role.

    python -m benchmarks.history_cost [--turns 10000 100000] [--rounds 20]

For each history size it starts a stack of its own (no embedding job),
creates a workspace with its owner, writes the turns straight into the
history table as the migration would (20 words each from a vocabulary of
5,000, one turn in 5,000 holding a rare word), vacuums and analyses, and
times both statements for a rare word, a word of about 0.4% of the turns and
a word in none, alternating which goes first. It prints the medians and 90th
percentiles of each and the ratio."""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.bm25_cost import compared
from recallatron.client import Client
from recallatron_devkit.load import models_dir
from recallatron_devkit.stack import Stack, own_config, running
from services.store.domain.history import SEARCH_HISTORY
from services.store.infrastructure.db import APP_ROLE, SET_LOCALS, with_database

# The statement before migration 0019, verbatim.
BEFORE = """
SELECT h.id::text, h.chat_id, h.role, h.text, h.occurred_at, ts_rank_cd(h.search, q.query) AS score
FROM history_entry h, (SELECT %(tsquery)s::tsquery AS query) q
WHERE h.search @@ q.query
ORDER BY score DESC, h.occurred_at DESC, h.id
LIMIT %(limit)s
"""
INSERT = """
INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)
VALUES (gen_random_uuid(), %s, %s, 'user', %s, now())
"""
WORDS = {"rare": "zanzibar", "common": "w17", "absent": "quillfeather"}


def seed(stack: Stack, turns: int) -> tuple[str, str]:
    """A workspace whose owner has `turns` history turns: (database url, owner id)."""
    admin = Client(stack.gateway, stack.admin_token, timeout=60)
    ws = admin.create_workspace(f"history-{turns}").workspace
    owner = admin.create_member(ws.id, "owner", owner=True).member
    admin.close()
    url = with_database(stack.database_url, ws.database_name)
    vocabulary = [f"w{i}" for i in range(5000)]
    rng = random.Random(7)
    rows = [
        (
            owner.id,
            f"chat-{i // 50}",
            " ".join(rng.choice(vocabulary) for _ in range(20))
            + (f" {WORDS['rare']}" if i % 5000 == 0 else ""),
        )
        for i in range(turns)
    ]
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.executemany(INSERT, rows)
        conn.execute("VACUUM (ANALYZE) history_entry")
    return url, owner.id


def timed(conn: psycopg.Connection, sql: str, word: str) -> float:
    started = time.perf_counter()
    conn.execute(sql, {"tsquery": word, "limit": 10}).fetchall()
    return (time.perf_counter() - started) * 1000


def measure(url: str, owner: str, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with psycopg.connect(url, user=APP_ROLE) as conn:
        conn.execute(SET_LOCALS, (["recallatron.member_id"], [owner]))
        for kind, word in WORDS.items():
            times: dict[str, list[float]] = {"before": [], "after": []}
            order = [("before", BEFORE), ("after", SEARCH_HISTORY)]
            for i in range(rounds):
                for name, sql in order if i % 2 else order[::-1]:
                    times[name].append(timed(conn, sql, word))
            same = [r[0] for r in conn.execute(BEFORE, {"tsquery": word, "limit": 10})] == [
                r[0] for r in conn.execute(SEARCH_HISTORY, {"tsquery": word, "limit": 10})
            ]
            out[kind] = {"same_rows": same} | compared(times, "before", "after")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    report = {}
    for n in args.turns:
        state = Path(tempfile.mkdtemp(prefix="history-cost-"))
        config = own_config(state, models_dir(), embedding_job=False)
        with running(Stack(config), remove_state=True) as stack:
            url, owner = seed(stack, n)
            report[str(n)] = measure(url, owner, args.rounds)
        print(json.dumps({str(n): report[str(n)]}), file=sys.stderr, flush=True)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
