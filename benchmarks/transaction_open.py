"""What opening a caller's transaction costs, three ways, on one connection
to a seeded workspace (docs/benchmarks.md, "A caller's transaction: BEGIN and
its settings in one message"):

    python -m benchmarks.transaction_open --state-dir DIR [--rounds 3] [--calls 3000]

- ``begin, then settings``: the driver's BEGIN, then one statement setting
  the caller's member, purpose and an HNSW setting (the store before d4df31f);
- ``one message``: BEGIN and the settings in one simple-protocol message,
  the connection in autocommit for the block (the store's
  ``caller_transaction`` now);
- ``pipeline``: BEGIN and the settings sent in psycopg's pipeline mode.

Each opens the transaction, runs ``SELECT 1`` in it and commits. DIR is a
state directory seeded by `recallatron load` (only its embedded Postgres is
started). The ways take turns, ``--rounds`` of ``--calls`` each; it prints,
per way and round, the p50 and p90 (ms), this process's CPU and the
backend's CPU (from /proc) per transaction (ms)."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from recallatron_devkit.load import models_dir
from recallatron_devkit.stack import Stack, own_config
from services.store.infrastructure.db import CONTROL_DATABASE, SET_LOCALS, with_database
from services.store.infrastructure.transactions import begin_with_settings

LOCAL = {
    "recallatron.member_id": "00000000-0000-0000-0000-000000000000",
    "recallatron.purpose": "assist",
    "hnsw.ef_search": "100",
}


def backend_cpu(pid: int) -> float:
    """Seconds of CPU the backend ``pid`` has used (utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ways(conn: psycopg.Connection) -> dict[str, Callable[[], None]]:
    keys, values = list(LOCAL), list(LOCAL.values())
    flat = [x for kv in LOCAL.items() for x in kv]
    one_message = begin_with_settings(len(LOCAL))
    client = psycopg.ClientCursor(conn)

    def before() -> None:
        with conn.transaction():
            conn.execute(SET_LOCALS, (keys, values))
            conn.execute("SELECT 1").fetchall()

    def now() -> None:
        conn.autocommit = True
        client.execute(one_message, flat)
        conn.execute("SELECT 1").fetchall()
        conn.commit()
        conn.autocommit = False

    def pipeline() -> None:
        with conn.pipeline():
            conn.execute("BEGIN")
            conn.execute(SET_LOCALS, (keys, values))
        conn.execute("SELECT 1").fetchall()
        conn.commit()

    return {"begin, then settings": before, "one message": now, "pipeline": pipeline}


def measure(state_dir: Path, rounds: int, calls: int) -> list[dict[str, object]]:
    stack = Stack(own_config(state_dir, models_dir()))
    stack.start_postgres()
    try:
        url = stack.database_url
        with psycopg.connect(with_database(url, CONTROL_DATABASE)) as control:
            row = control.execute("SELECT database_name FROM workspace LIMIT 1").fetchone()
        if row is None:
            raise SystemExit(f"{state_dir}: no workspace; seed one with `recallatron load`")
        out = []
        with psycopg.connect(with_database(url, row[0])) as conn:
            pid = conn.info.backend_pid
            for i in range(rounds):
                for name, fn in ways(conn).items():
                    for _ in range(calls // 10):  # warm: prepared statements, caches
                        fn()
                    times = []
                    cpu, backend = time.process_time(), backend_cpu(pid)
                    for _ in range(calls):
                        t = time.perf_counter()
                        fn()
                        times.append(time.perf_counter() - t)
                    cpu, backend = time.process_time() - cpu, backend_cpu(pid) - backend
                    times.sort()
                    out.append(
                        {
                            "way": name,
                            "round": i + 1,
                            "p50_ms": round(times[len(times) // 2] * 1000, 3),
                            "p90_ms": round(times[int(len(times) * 0.9)] * 1000, 3),
                            "client_cpu_ms": round(cpu / calls * 1000, 3),
                            "backend_cpu_ms": round(backend / calls * 1000, 3),
                        }
                    )
        return out
    finally:
        stack.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args(argv)
    for row in measure(args.state_dir, args.rounds, args.calls):
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
