"""A soak with faults (issue 35; docs/reliability.md, "Soak with faults"):

    python -m benchmarks.soak --minutes 10 --out /tmp/soak.json

Starts the stack (embedded Postgres, every service and the embedding job as
processes), seeds 100 workspaces with three members each, has every member
call once and every workspace sign in to the review page (so that state kept
per token and per workspace is there at the baseline), and runs mixed
traffic over them from several threads (benchmarks/soak_traffic.py: recall,
read, every write tool, the graph tools, the review calls and the review
page). After a warm-up, the store, rank, embed, the embedding job and
Postgres are each killed with SIGKILL in turn, left down a moment and started
again, round after round until the time is up.

Reported: acknowledged writes lost or doubled (the ledger against the rows),
errors by code in each phase (while each fault lasted, and after it until the
next), each fault's recovery time (from the kill until a probe workspace
answers a write and a recall again, with the dense arm for embed and its
memories embedded for the job), and each process's resident memory, threads,
file descriptors and Postgres connections at the end of the warm-up, after
its own warm-up (a process started again: just before the next fault, or
halfway through the tail) and at the end of the run, with any figure that
grew past 10% from the second to the third (Postgres connections: only when
also past the process's designed ceiling), and each process's memory and
connections every minute from the warm-up on (``usage_series``).

The probe workspace takes no other traffic. Nothing here asserts a time:
tests/faults/test_soak.py runs two minutes and asserts the outcomes."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import grpc
import psycopg

from benchmarks import soak_resources, soak_traffic
from benchmarks.soak_traffic import Ledger, Tenant, Worker
from recallatron_devkit.load import models_dir
from recallatron_devkit.stack import FAST_JOB, SERVICES, Stack, own_config, running

FAULTS = ("store", "rank", "embed", "embedding-job", "postgres")
# How long a recovery may take before the run gives up on it (a condition's
# generous limit, not a target).
RECOVERY_LIMIT = 180.0
# Postgres's crash recovery syncs every database's files, replays the WAL and
# checkpoints before it accepts a connection: minutes on a busy machine.
POSTGRES_RECOVERY_LIMIT = 900.0
ENV = {
    **FAST_JOB,
    # Fail fast while a peer is down, so callers see UNAVAILABLE promptly.
    "RECALLATRON_STORE_TIMEOUT_SECONDS": "3",
    "RECALLATRON_POOL_TIMEOUT_SECONDS": "2",
}


def log(message: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def kill(stack: Stack, name: str) -> None:
    """SIGKILL: the process (a service, the job) or the whole Postgres
    server (postmaster and backends, one process group)."""
    if name == "postgres":
        pg = stack.postgres
        assert pg is not None and pg.process is not None
        # Every process of the server, as a crash of its machine would: the
        # backends too (they may run as another user, in another group).
        postmaster = soak_resources.postmaster(stack)
        pids = [postmaster, *soak_resources.children(postmaster)]
        os.killpg(pg.process.pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        pg.process.wait()
    else:
        stack.stop_service(name, signal.SIGKILL)


def restart(stack: Stack, name: str) -> None:
    if name == "postgres":
        assert stack.postgres is not None
        # Right after a kill its old backends may still hold shared memory.
        deadline = time.monotonic() + POSTGRES_RECOVERY_LIMIT
        said = ""
        while True:
            try:
                # Crash recovery replays the WAL first: give it time.
                stack.postgres.start(timeout=POSTGRES_RECOVERY_LIMIT)
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise
                if str(exc) != said:  # each new reason once, as it happens
                    said = str(exc)
                    log(f"postgres did not start, trying again: {said}")
                time.sleep(0.5)
    stack.start_service(name)
    if name in SERVICES:
        stack.wait_serving(name, timeout=RECOVERY_LIMIT)


def answers(probe: Tenant) -> bool:
    """The probe workspace answers a write and a hybrid recall."""
    owner = probe.clients[0]
    try:
        owner.remember(f"probe {uuid.uuid4().hex}", "harbour probe", request_id=str(uuid.uuid4()))
        owner.recall("harbour probe", timeout=10)
    except grpc.RpcError:
        return False
    return True


def caught_up(probe: Tenant, name: str) -> bool:
    """After embed, recall has its dense arm again; after the embedding job,
    the probe's memories are all embedded (no write meanwhile)."""
    owner = probe.clients[0]
    try:
        if name == "embed":
            return bool(owner.recall("harbour probe", timeout=10).outcome.dense_available)
        if name == "embedding-job":
            status = owner.status()
            return status.pending == 0 and status.embedded + status.parked >= status.memories
    except grpc.RpcError:
        return False
    return True


def wait(until: Callable[[], bool], limit: float, pause: float = 0.25) -> float:
    """Seconds until ``until()`` held; raises past ``limit``."""
    started = time.monotonic()
    while not until():
        if time.monotonic() - started > limit:
            raise TimeoutError(f"not within {limit:g} s")
        time.sleep(pause)
    return time.monotonic() - started


def fault(stack: Stack, ledger: Ledger, probe: Tenant, name: str, down: float) -> dict[str, Any]:
    with ledger.lock:
        ledger.phase = f"{name} down"
    log(f"kill -9 {name}")
    killed = time.monotonic()
    kill(stack, name)
    time.sleep(down)
    started = time.monotonic()
    restart(stack, name)
    restarted = time.monotonic()
    wait(lambda: answers(probe), RECOVERY_LIMIT)
    wait(lambda: caught_up(probe, name), RECOVERY_LIMIT)
    done = time.monotonic()
    with ledger.lock:
        ledger.phase = f"{name} after"
    log(f"{name} recovered {done - killed:.1f} s after the kill")
    return {
        "fault": name,
        "down_seconds": round(started - killed, 2),
        "restart_seconds": round(restarted - started, 2),
        "recovery_after_restart_seconds": round(done - restarted, 2),
        "recovery_from_kill_seconds": round(done - killed, 2),
    }


class Sampler:
    """Each process's resident memory and Postgres connections every
    ``every`` seconds from the end of the warm-up, beside the two points the
    growth is judged by: whether a figure levels off (state filling up to a
    bound) or keeps climbing with the calls (a leak) shows in the series."""

    def __init__(self, stack: Stack, began: float, every: float) -> None:
        self.stack = stack
        self.began = began
        self.every = every
        self.samples: list[dict[str, Any]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            try:
                now = soak_resources.snapshot(self.stack)
            except (OSError, ValueError, KeyError, AssertionError):
                continue  # a process or Postgres between a kill and its start
            self.samples.append(
                {
                    "seconds": round(time.monotonic() - self.began),
                    "rss_mb": {name: u["rss_mb"] for name, u in now.items()},
                    "pg_connections": {
                        name: u["pg_connections"] for name, u in now.items() if name != "postgres"
                    },
                }
            )


def errors_by_phase(ledger: Ledger) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (phase, code), n in sorted(ledger.errors.items()):
        out.setdefault(phase, {})[code] = n
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    total = args.minutes * 60.0
    warmup = args.warmup if args.warmup is not None else min(60.0, total * 0.15)
    tail = args.tail if args.tail is not None else min(60.0, total * 0.15)
    order = tuple(args.faults)
    interval = min(args.interval, (total - warmup - tail) / len(order))
    state = Path(tempfile.mkdtemp(prefix="recallatron-soak-"))
    stack = Stack(own_config(state, models_dir(), env=ENV))
    stop = threading.Event()
    ledger = Ledger()
    with running(stack, remove_state=not args.keep):
        log(f"stack up in {state}; seeding {args.workspaces} workspaces")
        tenants = soak_traffic.seed(stack, args.workspaces + 1, args.members, log)
        probe, tenants = tenants[-1], tenants[:-1]
        probe.clients[0].wait_embedded(timeout=RECOVERY_LIMIT)
        # Seeding wrote the 100 databases' pages to the WAL: a checkpoint now,
        # as the server makes every few minutes, so that Postgres's crash
        # recovery replays the soak's writes rather than the set-up.
        with psycopg.connect(stack.database_url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
        review = stack.review_url
        soak_traffic.prime(tenants, review, args.workers)
        log("every member has called and every workspace's review page is signed in")
        workers = [
            threading.Thread(
                target=Worker(i, tenants, ledger, stop, review).run, name=f"soak-{i}", daemon=True
            )
            for i in range(args.workers)
        ]
        began = time.monotonic()
        for w in workers:
            w.start()
        log(f"traffic from {args.workers} threads; warm-up {warmup:.0f} s")
        time.sleep(warmup)
        start_usage = soak_resources.snapshot(stack)
        sampler = Sampler(stack, began, args.sample)
        sampler.thread.start()
        # Each process's figures after its own warm-up: at the end of the
        # soak's, or for a process started again, just before the next fault
        # (or halfway through the tail), once it has served a while.
        baseline = dict(start_usage)
        restarted: set[str] = set()

        def rebase() -> None:
            now = soak_resources.snapshot(stack)
            baseline.update({name: now[name] for name in restarted if name in now})
            restarted.clear()

        faults = []
        n = 0
        # Faults in turn, one every `interval`, until the tail is all that is left.
        while n < len(order) or time.monotonic() - began + interval <= total - tail:
            slot = began + warmup + n * interval
            time.sleep(max(0.0, slot - time.monotonic()))
            rebase()
            faults.append(fault(stack, ledger, probe, order[n % len(order)], args.down))
            restarted.add(order[n % len(order)])
            n += 1
        with ledger.lock:
            ledger.phase = "tail"
        rest = max(tail, began + total - time.monotonic())
        time.sleep(rest / 2)
        rebase()
        time.sleep(rest / 2)
        end_usage = soak_resources.snapshot(stack)
        ceilings = soak_resources.connection_ceilings()
        with psycopg.connect(stack.database_url, autocommit=True) as conn:
            ceilings["postgres"] = soak_resources.server_ceiling(conn, ceilings)
        sampler.stop.set()
        sampler.thread.join()
        log("stopping the traffic; writes in flight finish")
        stop.set()
        for w in workers:
            w.join()
        elapsed = time.monotonic() - began
        result = soak_traffic.audit(stack, tenants, ledger)
        for tenant in [*tenants, probe]:
            for client in tenant.clients:
                client.close()
    documented = soak_traffic.DOCUMENTED
    unexpected = sorted({code for (_, code) in ledger.errors if code not in documented})
    return {
        "command": "python -m benchmarks.soak " + " ".join(args.argv),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "minutes": round(elapsed / 60, 2),
        "workspaces": args.workspaces,
        "members_each": args.members,
        "threads": args.workers,
        "calls_answered": dict(ledger.calls),
        "writes": {
            **asdict(result),
            "replayed": ledger.replayed,
            "unacknowledged": ledger.unacknowledged,
        },
        "errors_by_phase": errors_by_phase(ledger),
        "unexpected_codes": unexpected,
        "faults": faults,
        "usage_start": start_usage,
        "usage_baseline": baseline,
        "usage_end": end_usage,
        "grew_past_10_percent": soak_resources.growth(baseline, end_usage, ceilings),
        "usage_series": sampler.samples,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--workspaces", type=int, default=100)
    parser.add_argument("--members", type=int, default=3, help="members of each workspace")
    parser.add_argument("--workers", type=int, default=8, help="threads making calls")
    parser.add_argument("--down", type=float, default=2.0, help="seconds a killed part stays down")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds between faults")
    parser.add_argument("--warmup", type=float, help="seconds before the first fault")
    parser.add_argument("--tail", type=float, help="seconds after the last fault")
    parser.add_argument(
        "--faults", nargs="+", choices=FAULTS, default=list(FAULTS), help="what is killed, in turn"
    )
    parser.add_argument(
        "--sample", type=float, default=60.0, help="seconds between samples of the usage series"
    )
    parser.add_argument("--keep", action="store_true", help="keep the state directory (logs)")
    parser.add_argument("--out", type=Path, help="JSON results here")
    args = parser.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    report = run(args)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
