"""Moving a 10,000-memory workspace between two embedded servers while 8
writers keep writing (each retrying UNAVAILABLE with its request id): the
move's duration, the fence, and the write latency p50/max during the move.

    python -m benchmarks.move_bench [--memories 10000] [--state-dir DIR]

Prints one JSON line (docs/servers.md, Moving, quotes it)."""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import grpc

from recallatron.client import Client
from recallatron_devkit.seeding import seed_workspace
from recallatron_devkit.stack import Stack, own_config, running


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument(
        "--state-dir", default=str(Path(tempfile.gettempdir()) / "recallatron-move-bench")
    )
    args = parser.parse_args()
    stack = Stack(own_config(Path(args.state_dir), extra_servers=("b",)))
    with running(stack):
        admin = Client(stack.gateway, stack.admin_token, timeout=60)
        clients = seed_workspace(
            admin,
            stack.gateway,
            args.memories,
            7,
            Path(args.state_dir) / "creds",
            lambda m: print(m, file=sys.stderr),
            members=1,
        )
        owner = clients[0]
        owner.wait_embedded(timeout=3600)
        slug = f"load-{args.memories}-7"
        listed = subprocess.run(
            [sys.executable, "-m", "recallatron_cli.main", "servers", "list"],
            env=stack.env_for("store"),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        print(listed, file=sys.stderr)
        source = _server_of(stack, slug)
        target = "b" if source == "default" else "default"
        stop = threading.Event()
        pauses: list[float] = []
        lock = threading.Lock()

        def writer(k: int) -> None:
            client = Client(stack.gateway, owner.token)
            while not stop.is_set():
                rid, began = str(uuid.uuid4()), time.monotonic()
                while True:
                    try:
                        client.remember(f"bench writer {k}", request_id=rid)
                        break
                    except grpc.RpcError as exc:
                        if exc.code() != grpc.StatusCode.UNAVAILABLE:
                            raise
                        time.sleep(0.05)
                with lock:
                    pauses.append(time.monotonic() - began)
            client.close()

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(args.writers)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        began = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "recallatron_cli.main", "move-workspace", slug, "--to", target],
            env=stack.env_for("store"),
            capture_output=True,
            text=True,
        )
        duration = time.monotonic() - began
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(60)
        if done.returncode != 0:
            sys.exit(done.stdout + done.stderr)
        last = done.stdout.strip().splitlines()[-1]
        fence = re.search(r"writes held (\d+) ms", last)
        print(
            json.dumps(
                {
                    "memories": args.memories,
                    "from": source,
                    "to": target,
                    "move_seconds": round(duration, 1),
                    "fence_ms": int(fence.group(1)) if fence else None,
                    "writes": len(pauses),
                    "write_p50_ms": round(statistics.median(pauses) * 1000, 1) if pauses else None,
                    "write_max_ms": round(max(pauses) * 1000, 1) if pauses else None,
                    "move_output": last,
                }
            )
        )


def _server_of(stack: Stack, slug: str) -> str:
    import psycopg

    from services.store.infrastructure.db import CONTROL_DATABASE, with_database

    with psycopg.connect(with_database(stack.database_url, CONTROL_DATABASE)) as conn:
        row = conn.execute("SELECT server FROM workspace WHERE slug = %s", (slug,)).fetchone()
    assert row is not None
    return str(row[0])


if __name__ == "__main__":
    main()
