"""Concurrent writers that retry with the same request id, and the SQL check
that every acknowledged write exists exactly once and nothing is half-written."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.faults.stackutil import RETRYABLE


@dataclass
class WriteLoad:
    prefix: str
    acked: dict[str, str] = field(default_factory=dict)  # request id -> memory id
    replayed: int = 0
    retries: int = 0
    unacked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # non-retryable statuses
    # (status, seconds) of every failed attempt, to bound how fast failure is.
    failed_attempts: list[tuple[grpc.StatusCode, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    progress: threading.Condition = field(default_factory=threading.Condition)

    def wait_acked(self, count: int, timeout: float = 120.0) -> None:
        with self.progress:
            if not self.progress.wait_for(lambda: len(self.acked) >= count, timeout):
                raise TimeoutError(f"only {len(self.acked)} writes acknowledged")


def run_writes(
    client: Client,
    prefix: str,
    about_id: str,
    total: int = 500,
    threads: int = 8,
    give_up_after: float = 180.0,
    fault: Callable[[WriteLoad], None] | None = None,
) -> WriteLoad:
    """`threads` writers remember `total` memories, each with one `about`
    link and one new mention, retrying a failed call with its SAME request id;
    `fault` runs alongside, on the calling thread."""
    load = WriteLoad(prefix)
    # One deadline for the whole load, so a stack that never recovers fails
    # the test instead of hanging it.
    deadline = time.monotonic() + give_up_after

    def writer(index: int) -> None:
        for n in range(index, total, threads):
            rid = f"{prefix}{n:04d}"
            while True:
                started = time.monotonic()
                try:
                    resp = client.remember(
                        f"{prefix}{rid}",
                        f"body of {rid}",
                        audience_to="workspace",
                        mention_names=[f"e-{rid}"],
                        about=[about_id],
                        request_id=rid,
                    )
                except grpc.RpcError as exc:
                    code = exc.code()  # type: ignore[attr-defined]
                    with load.lock:
                        load.failed_attempts.append((code, time.monotonic() - started))
                        if code not in RETRYABLE:
                            load.errors.append(f"{rid}: {code.name} {exc.details()}")  # type: ignore[attr-defined]
                            return
                        load.retries += 1
                    if time.monotonic() > deadline:
                        with load.lock:
                            load.unacked.append(rid)
                        break
                    time.sleep(0.1)
                    continue
                with load.progress:
                    load.acked[rid] = resp.memory.id
                    load.replayed += int(resp.replayed)
                    load.progress.notify_all()
                break

    workers = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    try:
        # On this (the main) thread: a service restarted from a thread that
        # then exits would get SIGTERM from PR_SET_PDEATHSIG, which follows the
        # thread that started the child, not the process.
        if fault is not None:
            fault(load)
    finally:
        for w in workers:
            w.join()
    return load


@dataclass
class Audit:
    acknowledged: int
    lost: int
    # An acknowledged id that is not the row stored under its request id.
    mismatched: int
    doubled: int
    half_written: int
    orphans: int
    rows: int


# One row per memory of the load with the count of each row that must be
# written in its transaction.
_PARTS = """
SELECT m.title, m.id::text,
  (SELECT count(*) FROM memory_link l WHERE l.memory_id = m.id),
  (SELECT count(*) FROM mention x WHERE x.memory_id = m.id),
  (SELECT count(*) FROM audit_log a WHERE a.memory_id = m.id),
  (SELECT count(*) FROM request_key k WHERE k.memory_id = m.id)
FROM memory m WHERE starts_with(m.title, %s)
"""
# Rows of the load that point at no memory of the load (a write half applied).
# Request ids are stored as hashes (services/store/domain/erasure.py): the audit rows
# of the load are those of its writes' actions.
_ORPHANS = """
SELECT
  (SELECT count(*) FROM audit_log a WHERE a.action = ANY (%s)
     AND NOT EXISTS (SELECT 1 FROM memory m WHERE m.id = a.memory_id))
+ (SELECT count(*) FROM entity e WHERE starts_with(e.name, %s)
     AND NOT EXISTS (SELECT 1 FROM mention x WHERE x.entity_id = e.id))
"""


def audit(stack: Stack, database: str, load: WriteLoad) -> Audit:
    rows = dbutil.query(stack, database, _PARTS, (load.prefix,))
    by_title: dict[str, list[tuple]] = {}
    for row in rows:
        by_title.setdefault(row[0], []).append(row)
    lost = mismatched = 0
    for rid, memory_id in load.acked.items():
        found = by_title.get(f"{load.prefix}{rid}", [])
        if not found:
            lost += 1
        elif all(row[1] != memory_id for row in found):
            mismatched += 1
    doubled = sum(len(found) - 1 for found in by_title.values())
    half = sum(1 for row in rows if tuple(row[2:]) != (1, 1, 1, 1))
    orphans = dbutil.query(stack, database, _ORPHANS, (["remember"], f"e-{load.prefix}"))[0][0]
    return Audit(len(load.acked), lost, mismatched, doubled, half, int(orphans), len(rows))
