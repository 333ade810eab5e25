"""Start order and degraded dependencies (design §5.9, §9), on a stack of its own
whose services start before Postgres exists: they wait, answer UNAVAILABLE,
then serve with no manual step. Then the embed service dies or hangs under
a recall load (recall keeps answering, dense_available=false), and rank or
the store hang or die (the gateway answers UNAVAILABLE within its deadlines)."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from recallatron.client import Client
from recallatron.v1 import gateway_pb2 as pb
from recallatron_devkit.localpg import LocalPostgres
from recallatron_devkit.stack import SERVICES, Stack
from tests.faults.stackutil import new_stack, owner_client, plain_client, record, until_ok

pytestmark = pytest.mark.integration

STORE_TIMEOUT = 2.0
RANK_TIMEOUT = 3.0
# A caller's own deadline, far above the gateway's: an UNAVAILABLE well before it
# is the gateway's deadline at work (a timing of the bound itself is recorded,
# not asserted, since a busy machine stretches it).
CALLER_TIMEOUT = 60.0
ENV = {
    "RECALLATRON_SHUTDOWN_GRACE_SECONDS": "1",
    "RECALLATRON_STORE_TIMEOUT_SECONDS": str(STORE_TIMEOUT),
    "RECALLATRON_RANK_TIMEOUT_SECONDS": str(RANK_TIMEOUT),
    "RECALLATRON_POOL_TIMEOUT_SECONDS": "1",
    # The recall load's 4 threads (one workspace) all run at once, so a hung
    # peer is felt by 4 calls in parallel (the gateway's fair share is 2).
    "RECALLATRON_WORKSPACE_CONCURRENCY": "4",
}
TOPICS = ("harbour", "glacier", "orchard", "lantern", "compass", "meadow")


@pytest.fixture(scope="module")
def started(prepared_models_dir: Path) -> Iterator[tuple[Stack, dict[str, object]]]:
    """Every service and the embedding job first, Postgres last."""
    import shutil

    stack = new_stack(prepared_models_dir, ENV)
    facts: dict[str, object] = {}
    try:
        stack.postgres = LocalPostgres(stack.state_dir / "pgdata", stack.config.pg_port)
        stack.database_url = stack.postgres.url
        for name in (*SERVICES, "embedding-job"):
            stack.start_service(name)
        # No Postgres yet: a call gets UNAVAILABLE, fast.
        operator = plain_client(stack.gateway, stack.admin_token, timeout=CALLER_TIMEOUT)
        started_at = time.monotonic()
        with pytest.raises(grpc.RpcError) as err:
            operator.create_workspace("early")
        facts["code_without_postgres"] = err.value.code()
        facts["seconds_without_postgres"] = time.monotonic() - started_at
        time.sleep(2.0)  # the services keep waiting, they do not exit
        for name in (*SERVICES, "embedding-job"):
            assert stack.processes[name].poll() is None, name
        stack.postgres.start()
        for name in SERVICES:
            stack.wait_serving(name, timeout=60)
        facts["workspace"] = until_ok(lambda: operator.create_workspace("late")).workspace.id
        operator.close()
        yield stack, facts
    finally:
        stack.stop()
        shutil.rmtree(stack.state_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def owner(started: tuple[Stack, dict[str, object]]) -> Iterator[Client]:
    stack, _ = started
    client, _, _ = owner_client(stack, "degrade")
    for i in range(24):
        topic = TOPICS[i % len(TOPICS)]
        client.remember(f"{topic} note {i}", f"All about the {topic}, entry {i}.", "fact")
    client.wait_embedded(timeout=120, poll=0.2)
    yield client
    client.close()


def test_services_started_before_postgres_serve_without_a_manual_step(started, owner) -> None:  # type: ignore[no-untyped-def]
    _, facts = started
    record(
        "services before postgres",
        code_without_postgres=facts["code_without_postgres"].name,  # type: ignore[attr-defined]
        seconds=round(facts["seconds_without_postgres"], 2),  # type: ignore[arg-type]
    )
    assert facts["code_without_postgres"] == grpc.StatusCode.UNAVAILABLE
    assert facts["seconds_without_postgres"] < CALLER_TIMEOUT / 2  # type: ignore[operator]
    outcome = owner.recall("harbour note", mode="hybrid").outcome
    assert outcome.results and outcome.dense_available


def _recall_load(client: Client, fault: threading.Event, stop: threading.Event) -> list[tuple]:
    """Hybrid recalls on 4 threads: (started after the fault, code, dense_available)."""
    seen: list[tuple] = []
    lock = threading.Lock()

    def loop(i: int) -> None:
        n = 0
        while not stop.is_set():
            after = fault.is_set()
            try:
                out = client.recall(f"{TOPICS[(i + n) % len(TOPICS)]} entry", mode="hybrid")
                row = (after, grpc.StatusCode.OK, out.outcome.dense_available)
            except grpc.RpcError as exc:
                row = (after, exc.code(), None)  # type: ignore[attr-defined]
            with lock:
                seen.append(row)
            n += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    return seen, threads  # type: ignore[return-value]


@pytest.mark.parametrize("how", ["kill", "hang"])
def test_embed_down_during_recall_load_degrades_without_errors(started, owner, how: str) -> None:  # type: ignore[no-untyped-def]
    stack, _ = started
    fault, stop = threading.Event(), threading.Event()
    seen, threads = _recall_load(owner, fault, stop)  # type: ignore[misc]
    try:
        time.sleep(1.5)
        fault.set()
        if how == "kill":
            stack.stop_service("embed", signal.SIGKILL)
        else:
            stack.processes["embed"].send_signal(signal.SIGSTOP)
        time.sleep(4.0)
    finally:
        stop.set()
        for t in threads:
            t.join()
        if how == "hang":
            stack.processes["embed"].send_signal(signal.SIGCONT)
        else:
            stack.start_service("embed")
        stack.wait_serving("embed", timeout=60)
    before = [r for r in seen if not r[0]]
    after = [r for r in seen if r[0]]
    errors = [r for r in seen if r[1] != grpc.StatusCode.OK]
    record(
        f"embed {how} during recall load",
        recalls=len(seen),
        errors=len(errors),
        after_fault=len(after),
        dense_false_before=sum(1 for r in before if r[2] is False),
        dense_false_after=sum(1 for r in after if r[2] is False),
    )
    assert errors == []
    # Before the fault the dense arm answers (under this load on two cores
    # an embed call may itself miss rank's 0.5 s deadline now and then).
    assert sum(1 for r in before if r[2]) > len(before) // 2
    assert len(after) >= 4 and all(r[2] is False for r in after)
    # Back to dense once embed serves again (rank reconnects with backoff).
    deadline = time.monotonic() + 30
    while not owner.recall("glacier entry", mode="hybrid").outcome.dense_available:
        assert time.monotonic() < deadline, "dense arm did not come back"
        time.sleep(0.5)


@pytest.mark.parametrize("how", ["kill", "hang"])
def test_rank_down_answers_unavailable_within_the_deadline(started, owner, how: str) -> None:  # type: ignore[no-untyped-def]
    stack, _ = started
    if how == "kill":
        stack.stop_service("rank", signal.SIGKILL)
    else:
        stack.processes["rank"].send_signal(signal.SIGSTOP)
    timings = []
    try:
        for _ in range(3):
            begun = time.monotonic()
            with pytest.raises(grpc.RpcError) as err:
                owner.recall("orchard entry", mode="hybrid", timeout=CALLER_TIMEOUT)
            timings.append(time.monotonic() - begun)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        # The tools that do not need rank still work.
        assert owner.remember("written while rank is down", request_id=f"rank-{how}").memory.id
    finally:
        if how == "hang":
            stack.processes["rank"].send_signal(signal.SIGCONT)
        else:
            stack.start_service("rank")
        stack.wait_serving("rank", timeout=60)
    record(f"rank {how}", slowest_seconds=round(max(timings), 2), bound=RANK_TIMEOUT + 1)
    assert max(timings) < CALLER_TIMEOUT / 2
    assert until_ok(lambda: owner.recall("orchard entry")).outcome.results


def test_store_hung_answers_unavailable_within_the_deadline(started, owner) -> None:  # type: ignore[no-untyped-def]
    stack, _ = started
    stack.processes["store"].send_signal(signal.SIGSTOP)
    try:
        begun = time.monotonic()
        with pytest.raises(grpc.RpcError) as err:
            owner.call(
                owner.memory.Read, pb.ReadRequest(ids=[str(uuid.uuid4())]), timeout=CALLER_TIMEOUT
            )
        elapsed = time.monotonic() - begun
    finally:
        stack.processes["store"].send_signal(signal.SIGCONT)
    record("store hang", seconds=round(elapsed, 2), bound=STORE_TIMEOUT + 1)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert elapsed < CALLER_TIMEOUT / 2
    assert until_ok(lambda: owner.recall("meadow entry")).outcome.results
