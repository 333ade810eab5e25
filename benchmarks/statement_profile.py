"""Where Postgres spends a recall: planning and execution per statement.

Not a test: prints a table. Copies a seeded state directory of
``recallatron load`` (the original stays as it is), turns on
``pg_stat_statements`` with ``track_planning`` in the copy's server, runs
``recallatron load`` against the copy (hybrid, no rerank, one client), and
prints each statement's planning and execution time per recall, the
statements that cost most first.

    python -m benchmarks.statement_profile [--memories 10000] [--state-prefix /tmp/rl]
        [--duration 30] [--tree <checkout of another revision>]

With ``--tree`` the stack runs that checkout's code (same schema): the
profile of the code before a change, on the same data.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg

from benchmarks.recall_bench import copy_state
from recallatron_devkit.load import models_dir as load_models_dir
from recallatron_devkit.localpg import LocalPostgres

REPO = Path(__file__).resolve().parent.parent

SETTINGS = """
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.track_planning = on
pg_stat_statements.max = 1000
"""

TOP = """
SELECT s.calls, s.total_plan_time, s.total_exec_time,
       left(regexp_replace(s.query, '\\s+', ' ', 'g'), 90)
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname LIKE 'ws\\_%%' AND s.calls > 0
ORDER BY s.total_plan_time + s.total_exec_time DESC
LIMIT %s
"""


def _port(state: Path) -> int:
    """The embedded server's port, from the passfile the stack writes."""
    return int((state / "pgpass").read_text().split(":")[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--state-prefix", default="/tmp/rl")
    parser.add_argument("--duration", type=float, default=30)
    parser.add_argument("--top", type=int, default=16)
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose code runs")
    args = parser.parse_args(argv)
    source = Path(f"{args.state_prefix}{args.memories}")
    if not (source / "load-creds").is_dir():
        sys.exit(f"{source} holds no seeded workspace: run `recallatron load` on it first")
    copy = Path(f"{args.state_prefix}profile-{args.memories}")
    copy_state(source, copy)
    try:
        with (copy / "pgdata" / "postgresql.conf").open("a") as conf:
            conf.write(SETTINGS)
        load = subprocess.run(
            [
                sys.executable, "-m", "recallatron_cli.main", "load",
                "--memories", str(args.memories), "--concurrency", "1",
                "--duration", str(args.duration), "--mode", "hybrid", "--no-rerank",
                "--state-dir", str(copy), "--json",
            ],
            check=False, capture_output=True, text=True, cwd=args.tree,
            env={
                **os.environ,
                "PYTHONPATH": str(args.tree.resolve()),
                # This checkout's prepared models, whichever tree runs.
                "RECALLATRON_MODELS_DIR": str(load_models_dir()),
            },
        )  # fmt: skip
        if load.returncode != 0:
            log = (copy / "pgdata" / "server.log").read_text(errors="replace")[-1500:]
            sys.exit(f"recallatron load failed:\n{load.stderr[-3000:]}\n{log}")
        recalls = json.loads(load.stdout.strip().splitlines()[-1])["requests"]
        pg = LocalPostgres(copy / "pgdata", _port(copy), secrets_dir=copy)
        pg.start()
        try:
            with psycopg.connect(pg.url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                rows = conn.execute(TOP, (args.top,)).fetchall()
        finally:
            pg.stop()
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    print(
        f"{args.memories:,} memories, {recalls} hybrid recalls (no rerank, one client, "
        f"{args.duration:g} s, warm-up included in the statements' counts)"
    )
    print("| statement | calls per recall | planning ms per recall | execution ms per recall |")
    print("| --- | --- | --- | --- |")
    plan_sum = exec_sum = 0.0
    for calls, plan, execution, text in rows:
        plan_sum += plan / recalls
        exec_sum += execution / recalls
        print(
            f"| `{text.replace('|', '/')}` | {calls / recalls:.2f} | {plan / recalls:.3f} | "
            f"{execution / recalls:.3f} |"
        )
    print(f"| these statements | | {plan_sum:.3f} | {exec_sum:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
