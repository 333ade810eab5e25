"""What SCRAM's rounds cost a new Postgres backend (docs/servers.md): a
workspace just woken pays one connect per recall.

    python -m benchmarks.scram_connect [--connects 200] [--rounds 4096 1]

Starts an embedded server in a temporary directory, gives one login role per
round count the same generated password (its verifier hashed with those
rounds), then connects and disconnects over loopback TCP, the role counts
interleaved in turns so that load on the machine falls on each alike. Prints
p50 and p90 per round count and the ratio of the p50s to the first.
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg import sql

from recallatron_devkit.localpg import LocalPostgres
from recallatron_devkit.stack import free_port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connects", type=int, default=200, help="per round count")
    parser.add_argument("--rounds", type=int, nargs="+", default=[4096, 1])
    args = parser.parse_args(argv)
    password = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory(prefix="scram-") as tmp:
        pg = LocalPostgres(Path(tmp) / "pgdata", free_port(), secrets_dir=Path(tmp))
        pg.start()
        try:
            roles = {n: f"bench_scram_{n}" for n in args.rounds}
            with psycopg.connect(pg.url, autocommit=True) as conn:
                for n, role in roles.items():
                    conn.execute("SELECT set_config('scram_iterations', %s, false)", (str(n),))
                    conn.execute(
                        sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                            sql.Identifier(role), sql.Literal(password)
                        )
                    )
            times: dict[int, list[float]] = {n: [] for n in args.rounds}
            for _ in range(args.connects // 10):
                for n, role in roles.items():
                    for _ in range(10):
                        started = time.perf_counter()
                        psycopg.connect(
                            host="127.0.0.1",
                            port=pg.port,
                            user=role,
                            dbname="postgres",
                            password=password,
                        ).close()
                        times[n].append((time.perf_counter() - started) * 1000)
        finally:
            pg.stop()
    first = statistics.median(times[args.rounds[0]])
    out = {
        str(n): {
            "p50_ms": round(statistics.median(t), 2),
            "p90_ms": round(statistics.quantiles(t, n=10)[-1], 2),
            "p50_ratio_to_first": round(statistics.median(t) / first, 3),
        }
        for n, t in times.items()
    }
    print(json.dumps({"argv": sys.argv, "connects": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
