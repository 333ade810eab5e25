"""Crashes under write load (design §9): kill -9 the store, then Postgres, while
8 clients write 500 memories and retry with the same request id; afterwards
every acknowledged memory exists exactly once and no write is half applied.
Then Postgres restarted under load: calls fail fast with UNAVAILABLE while it
is down and succeed after, with no manual step."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests.faults.load import WriteLoad, audit, run_writes
from tests.faults.stackutil import (
    new_stack,
    owner_client,
    record,
    restart_postgres,
    running,
    until_ok,
)

pytestmark = pytest.mark.integration

STORE_TIMEOUT = 3.0
RANK_TIMEOUT = 5.0
ENV = {
    "RECALLATRON_SHUTDOWN_GRACE_SECONDS": "1",
    "RECALLATRON_STORE_TIMEOUT_SECONDS": str(STORE_TIMEOUT),
    "RECALLATRON_RANK_TIMEOUT_SECONDS": str(RANK_TIMEOUT),
    "RECALLATRON_POOL_TIMEOUT_SECONDS": "2",
}


@pytest.fixture(scope="module")
def fault_stack(prepared_models_dir: Path) -> Iterator[Stack]:
    with running(new_stack(prepared_models_dir, ENV)) as stack:
        yield stack


@pytest.fixture(scope="module")
def workspace(fault_stack: Stack) -> Iterator[tuple[Client, str, str]]:
    client, _, database = owner_client(fault_stack, "crash")
    seed = client.remember("crash seed", "the memory every write links to", audience_to="workspace")
    yield client, database, seed.memory.id
    client.close()


def _check(stack: Stack, database: str, load: WriteLoad, name: str, total: int = 500) -> None:
    result = audit(stack, database, load)
    record(
        name,
        acknowledged=result.acknowledged,
        lost=result.lost,
        doubled=result.doubled,
        mismatched=result.mismatched,
        half_written=result.half_written,
        orphans=result.orphans,
        retries=load.retries,
        replayed=load.replayed,
        unacked=len(load.unacked),
    )
    assert load.errors == []
    assert load.unacked == []
    assert result.acknowledged == total
    assert (result.lost, result.doubled, result.mismatched) == (0, 0, 0)
    assert (result.half_written, result.orphans) == (0, 0)
    assert result.rows == total


def test_store_killed_twice_under_writes(fault_stack: Stack, workspace) -> None:  # type: ignore[no-untyped-def]
    client, database, seed = workspace
    kills = 0

    def crash(load: WriteLoad) -> None:
        nonlocal kills
        for threshold in (100, 300):
            load.wait_acked(threshold)
            fault_stack.stop_service("store", signal.SIGKILL)
            kills += 1
            time.sleep(0.5)
            fault_stack.start_service("store")
            fault_stack.wait_serving("store", timeout=60)

    load = run_writes(client, "sk-", seed, fault=crash)
    assert kills == 2
    # The writers really met the crash: some attempts failed and were retried.
    assert load.retries > 0
    _check(fault_stack, database, load, "store kill -9 x2, 8 writers x 500")


def test_postgres_killed_under_writes(fault_stack: Stack, workspace) -> None:  # type: ignore[no-untyped-def]
    client, database, seed = workspace
    assert fault_stack.postgres is not None and fault_stack.postgres.process is not None

    def crash(load: WriteLoad) -> None:
        load.wait_acked(150)
        pg = fault_stack.postgres
        assert pg is not None and pg.process is not None
        # The whole server at once (postmaster and every backend, one process
        # group), as a crash of its machine would.
        os.killpg(pg.process.pid, signal.SIGKILL)
        pg.process.wait()
        # Down long enough that the channels' own retries give up too.
        time.sleep(4.0)
        restart_postgres(fault_stack)

    load = run_writes(client, "pk-", seed, fault=crash)
    assert load.retries > 0
    log = (fault_stack.postgres.data_dir / "server.log").read_text(errors="replace")
    assert "not properly shut down" in log  # it really crashed and recovered
    _check(fault_stack, database, load, "postgres kill -9, 8 writers x 500")
    # Every acknowledged memory also reads back through the gateway.
    ids = list(load.acked.values())
    for start in range(0, len(ids), 100):
        got = until_ok(lambda s=start: client.read(ids[s : s + 100]))
        assert len(got.memories) == len(ids[start : start + 100])


def test_postgres_restarted_under_load_fails_fast_then_recovers(
    fault_stack: Stack,
    workspace,  # type: ignore[no-untyped-def]
) -> None:
    client, database, seed = workspace
    down = threading.Event()
    # (code, seconds) of recalls made while Postgres was down.
    outage: list[tuple[grpc.StatusCode, float]] = []
    after: list[grpc.StatusCode] = []
    stop_readers = threading.Event()

    def reader() -> None:
        while not stop_readers.is_set():
            started = time.monotonic()
            try:
                client.recall("crash seed memory", mode="lexical", timeout=30)
                code = grpc.StatusCode.OK
            except grpc.RpcError as exc:
                code = exc.code()  # type: ignore[attr-defined]
            elapsed = time.monotonic() - started
            if down.is_set():
                outage.append((code, elapsed))
            elif outage:
                after.append(code)
            time.sleep(0.05)

    def outage_window(load: WriteLoad) -> None:
        load.wait_acked(60)
        pg = fault_stack.postgres
        assert pg is not None
        down.set()
        pg.stop()
        time.sleep(6.0)
        pg.start()
        down.clear()

    readers = [threading.Thread(target=reader) for _ in range(2)]
    for r in readers:
        r.start()
    try:
        load = run_writes(client, "pr-", seed, total=200, fault=outage_window)
        # Readers keep going until recall answers again, with no manual step.
        deadline = time.monotonic() + 60
        while grpc.StatusCode.OK not in after and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        stop_readers.set()
        for r in readers:
            r.join()
    _check(fault_stack, database, load, "postgres stop/start under load, 200 writes", total=200)
    codes = {code for code, _ in outage}
    # A recall makes two hops (authenticate at the store, rank); each has its
    # own deadline, so it answers within their sum plus a second of slack.
    bound = STORE_TIMEOUT + RANK_TIMEOUT + 1.0
    slowest = max(seconds for _, seconds in outage)
    write_slowest = max(s for c, s in load.failed_attempts if c == grpc.StatusCode.UNAVAILABLE)
    record(
        "postgres stop/start under load: fail fast",
        recalls_during_outage=len(outage),
        codes=sorted(c.name for c in codes),
        slowest_recall_seconds=round(slowest, 2),
        slowest_failed_write_seconds=round(write_slowest, 2),
        bound_seconds=bound,
    )
    assert grpc.StatusCode.UNAVAILABLE in codes
    assert codes <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.OK}
    assert slowest <= bound
    # A write is two store hops (authenticate, the write), each within its
    # deadline; the slack covers the channel's retry backoff on both (up to
    # 0.5 s each) and a shared machine (7.3 and 8.3 s seen against 5.2 s
    # typical); still under the client's own 10 s, where a hung write ends
    # (as DEADLINE_EXCEEDED, which the next line refuses too).
    assert write_slowest <= 2 * STORE_TIMEOUT + 3.0
    assert {c for c, _ in load.failed_attempts} <= {grpc.StatusCode.UNAVAILABLE}
    assert grpc.StatusCode.OK in after
