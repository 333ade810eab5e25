"""The connection budget (design §10, docs/servers.md): sixteen workspaces, all
busy at once, through a store whose budget is six connections. What must hold
whatever the machine's speed: the server never holds more connections than
the start-up check counts for these settings, every refusal is the documented
one (UNAVAILABLE with a retry hint), and every acknowledged write is kept,
once. How many calls a second get through is the benchmark's business
(benchmarks/tenants.py), not this test's."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack, own_config, running
from services.store.infrastructure.servers import demand
from tests.faults.stackutil import retry_delay

pytestmark = pytest.mark.integration

BUDGET = 6
JOB_BUDGET = 2
CONTROL_POOL = 2
SMALL = {
    "RECALLATRON_CONNECTION_BUDGET": str(BUDGET),
    "RECALLATRON_JOB_CONNECTION_BUDGET": str(JOB_BUDGET),
    "RECALLATRON_CONTROL_POOL_MAX_SIZE": str(CONTROL_POOL),
    "RECALLATRON_POOL_MAX_SIZE": "2",
    "RECALLATRON_OWNER_POOL_MAX_SIZE": "1",
    # Short waits, so that refusals happen and are seen.
    "RECALLATRON_POOL_TIMEOUT_SECONDS": "0.1",
    "RECALLATRON_JOB_WORKERS": "2",
}
WORKSPACES = 16
THREADS = 16
WRITES_PER_THREAD = 6
# A write refused with UNAVAILABLE is retried (same request id) after its
# hint, for at most this long: generous, for a slow machine.
RETRY_FOR_SECONDS = 240.0

# Client backends on the server, this sampler's own session left out.
BACKENDS = """
SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
"""
# What they were doing, kept at the peak so that a failure says whose they were.
WHO = """
SELECT datname, usename, state, left(query, 50) FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory, prepared_models_dir: Path) -> Iterator[Stack]:
    config = own_config(tmp_path_factory.mktemp("budget"), prepared_models_dir, env=SMALL)
    with running(Stack(config)) as stack:
        yield stack


def test_sixteen_busy_workspaces_keep_the_bound_and_every_write(small: Stack) -> None:
    # The start-up check's own count for these settings (services/store/infrastructure/servers.py).
    bound = (
        demand("store", BUDGET, CONTROL_POOL, True).total
        + demand("embedding job", JOB_BUDGET, CONTROL_POOL, True).total
    )
    operator = Client(small.gateway, small.admin_token)
    clients = []
    for _ in range(WORKSPACES):
        ws = operator.create_workspace(f"c-{uuid.uuid4().hex[:10]}").workspace
        member = operator.create_member(ws.id, "ada", owner=True).member
        clients.append(Client(small.gateway, operator.create_token(member.id).token))
    stop = threading.Event()
    peak = [0]
    at_peak: list[tuple[object, ...]] = []
    acknowledged: list[tuple[int, str, str]] = []  # workspace, word, memory id
    refusals: list[str] = []  # codes other than the documented one
    hints: list[float] = []
    unavailable = [0]
    lock = threading.Lock()

    def sample() -> None:
        assert small.postgres is not None
        with psycopg.connect(small.postgres.url, autocommit=True) as conn:
            while not stop.is_set():
                row = conn.execute(BACKENDS).fetchone()
                if row and row[0] > peak[0]:
                    peak[0] = row[0]
                    at_peak[:] = conn.execute(WHO).fetchall()
                time.sleep(0.01)

    def refused(exc: grpc.RpcError) -> None:
        with lock:
            if exc.code() == grpc.StatusCode.UNAVAILABLE:
                unavailable[0] += 1
                hints.append(retry_delay(exc))
            else:
                refusals.append(f"{exc.code().name}: {exc.details()}")

    def work(k: int) -> None:
        for n in range(WRITES_PER_THREAD):
            w = (k + n) % WORKSPACES
            client = clients[w]
            word = f"ledger{k}x{n}q{uuid.uuid4().hex[:6]}"
            request_id = str(uuid.uuid4())
            end = time.monotonic() + RETRY_FOR_SECONDS
            while time.monotonic() < end:
                try:
                    made = client.remember(
                        f"Busy note {word}", f"Budget ledger entry {word}", request_id=request_id
                    )
                except grpc.RpcError as exc:
                    refused(exc)
                    time.sleep(max(retry_delay(exc), 0.05))
                    continue
                with lock:
                    acknowledged.append((w, word, made.memory.id))
                break
            try:  # a read between writes: refused or answered, never worse
                client.recall("budget ledger", mode="lexical", skip_rerank=True)
            except grpc.RpcError as exc:
                refused(exc)

    threads = [threading.Thread(target=sample)]
    workers = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
    for t in [*threads, *workers]:
        t.start()
    for t in workers:
        t.join(RETRY_FOR_SECONDS * WRITES_PER_THREAD + 60)
    stop.set()
    threads[0].join(30)
    print(
        f"\nbound {bound}: peak {peak[0]}; {len(acknowledged)} writes acknowledged, "
        f"{unavailable[0]} UNAVAILABLE (hints {sorted(set(hints))})"
    )
    assert refusals == []
    # Every refusal carried its retry hint.
    assert all(h > 0 for h in hints)
    # Enough workspaces that the budget matters: their pools at full size
    # would pass it.
    assert WORKSPACES * (2 + 1) > BUDGET
    assert 0 < peak[0] <= bound, "\n".join(map(str, sorted(at_peak, key=str)))
    # Every write acknowledged, kept, and kept once (retries replayed).
    assert len(acknowledged) == THREADS * WRITES_PER_THREAD
    for w, word, memory_id in acknowledged:
        client = clients[w]
        assert [m.id for m in client.read([memory_id]).memories] == [memory_id]
        found = client.recall(word, mode="lexical", skip_rerank=True).outcome.results
        assert [r.memory.id for r in found] == [memory_id], word
    for client in clients:
        client.close()
    operator.close()


def test_idle_workspaces_hold_no_connections(small: Stack) -> None:
    """After the load, with nobody calling, the workspaces' connections close
    within seconds: what stays is the control pool and the listeners."""
    assert small.postgres is not None
    fixed = (
        demand("store", 0, CONTROL_POOL, True).total
        + demand("embedding job", 0, CONTROL_POOL, True).total
    )
    with psycopg.connect(small.postgres.url, autocommit=True) as conn:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            workspace = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
                " AND datname LIKE 'ws\\_%%' AND pid <> pg_backend_pid()"
            ).fetchone()
            if workspace and workspace[0] == 0:
                break
            time.sleep(0.2)
        else:
            pytest.fail("connections to idle workspace databases stayed open")
        row = conn.execute(BACKENDS).fetchone()
        assert row is not None and row[0] <= fixed
