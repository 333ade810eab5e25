"""Moving a live workspace to another server (issue 19, docs/servers.md,
Moving), on a stack with two embedded servers: under load (8 writers
retrying with their request ids, 4 recall clients) nothing acknowledged is
lost or doubled and recall never answers wrongly; killed at each step and
run again, the move ends as one clean move would."""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import FAST_JOB, Stack, own_config, running
from services.store.infrastructure.db import CONTROL_DATABASE, with_database
from tests.conftest import operator_of
from tests.integration.test_servers import secrets_of

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory, prepared_models_dir: Path) -> Iterator[Stack]:
    config = own_config(
        tmp_path_factory.mktemp("move"), prepared_models_dir, env=FAST_JOB, extra_servers=("b",)
    )
    with running(Stack(config)) as stack:
        yield stack


@pytest.fixture(scope="module")
def operator(two: Stack) -> Iterator[Client]:
    yield from operator_of(two)


def admin_url(stack: Stack, server: str, database: str = "postgres") -> str:
    pg = stack.postgres if server == "default" else stack.extra_postgres[server]
    assert pg is not None
    return with_database(pg.url, database)


def rows(stack: Stack, server: str, database: str, query: str) -> list[tuple]:
    with psycopg.connect(admin_url(stack, server, database)) as conn:
        return conn.execute(query).fetchall()  # type: ignore[arg-type]


def recorded(stack: Stack, workspace_id: str) -> tuple[str, int]:
    """(server, moves in progress) as the control plane has them."""
    with psycopg.connect(with_database(stack.database_url, CONTROL_DATABASE)) as conn:
        server = conn.execute("SELECT server FROM workspace WHERE id = %s", (workspace_id,))
        moves = conn.execute(
            "SELECT count(*) FROM workspace_move WHERE workspace_id = %s", (workspace_id,)
        )
        return server.fetchone()[0], moves.fetchone()[0]  # type: ignore[index]


def leftovers(stack: Stack, database: str) -> dict[str, list]:
    """What a finished move must not leave: slots, publications, subscriptions,
    the old database, the marker table."""
    out = {
        "slots": rows(stack, "default", "postgres", "SELECT slot_name FROM pg_replication_slots"),
        "old database": rows(
            stack,
            "default",
            "postgres",
            f"SELECT datname FROM pg_database WHERE datname LIKE '{database}%'",
        ),
        "subscriptions": rows(stack, "b", database, "SELECT subname FROM pg_subscription"),
        "marker": rows(stack, "b", database, "SELECT to_regclass('recallatron_move_marker')::text"),
    }
    out["marker"] = [r for r in out["marker"] if r[0] is not None]
    return {k: v for k, v in out.items() if v}


def move(stack: Stack, workspace: str, pause_after: str = "") -> subprocess.Popen[str]:
    env = stack.env_for("store")
    if pause_after:
        env["RECALLATRON_MOVE_PAUSE_AFTER"] = pause_after
    return subprocess.Popen(
        [sys.executable, "-m", "recallatron_cli.main", "move-workspace", workspace, "--to", "b"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def team(stack: Stack, operator: Client) -> tuple[str, str, str, Client]:
    slug = f"m-{uuid.uuid4().hex[:10]}"
    ws = operator.create_workspace(slug, "default").workspace
    member = operator.create_member(ws.id, "ada", owner=True).member
    token = operator.create_token(member.id, "move-test").token
    return ws.id, slug, ws.database_name, Client(stack.gateway, token)


def retrying(fn, seconds: float = 30.0):  # type: ignore[no-untyped-def]
    """``fn()``, again while it answers UNAVAILABLE: store replicas follow a
    move within their workspace cache (docs/servers.md, Moving)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return fn()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


VECTORS = "SELECT memory_id::text, input_version, embedding::text FROM memory_embedding"
MEMORY_DIGEST = (
    "SELECT count(*) || ':' || md5(string_agg(id::text || title || body || revision, '|' "
    "ORDER BY id)) FROM memory"
)


def test_a_move_under_load_loses_and_doubles_nothing(two: Stack, operator: Client) -> None:
    workspace_id, slug, database, ada = team(two, operator)
    seeded = [
        ada.remember(f"Seeded note {i} about the heron ledger", f"Body {i}.").memory.id
        for i in range(200)
    ]
    marker = ada.remember("The zanzibar runbook lives in the ops wiki").memory.id
    ada.wait_embedded(timeout=180)
    vectors = rows(two, "default", database, VECTORS)
    assert len(vectors) == len(seeded) + 1
    stop = threading.Event()
    acked: list[tuple[str, str, str]] = []  # (request id, title, memory id)
    pauses: list[float] = []
    recall_ok: Counter[str] = Counter()
    failures: list[str] = []
    lock = threading.Lock()

    def writer(k: int) -> None:
        client = Client(two.gateway, ada.token)
        n = 0
        while not stop.is_set():
            request_id, title = str(uuid.uuid4()), f"Writer {k} line {n} on the heron ledger"
            began = time.monotonic()
            while True:
                try:
                    made = client.remember(title, request_id=request_id).memory.id
                    break
                except grpc.RpcError as exc:
                    if exc.code() != grpc.StatusCode.UNAVAILABLE:
                        with lock:
                            failures.append(f"write {exc.code()}: {exc.details()}")
                        return
                    time.sleep(0.05)  # and again, with the same request id
            with lock:
                acked.append((request_id, title, made))
                pauses.append(time.monotonic() - began)
            n += 1
        client.close()

    def reader() -> None:
        client = Client(two.gateway, ada.token)
        while not stop.is_set():
            try:
                outcome = client.recall(
                    "zanzibar runbook", mode="lexical", skip_rerank=True
                ).outcome
            except grpc.RpcError as exc:
                with lock:
                    if exc.code() == grpc.StatusCode.UNAVAILABLE:
                        recall_ok["unavailable"] += 1
                    else:
                        failures.append(f"recall {exc.code()}: {exc.details()}")
                continue
            ids = [r.memory.id for r in outcome.results]
            with lock:
                if ids[:1] == [marker]:
                    recall_ok["right"] += 1
                else:
                    failures.append(f"recall answered wrongly: {ids}")
        client.close()

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    threads += [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        began = time.monotonic()
        proc = move(two, slug)
        out, _ = proc.communicate(timeout=300)
        moved_in = time.monotonic() - began
        assert proc.returncode == 0, out
        # A write right after the move is acknowledged (the replicas follow
        # the switch's NOTIFY); how soon is reported below and measured by
        # benchmarks/move_bench.py, not asserted: a busy machine is slow.
        t0 = time.monotonic()
        retrying(lambda: ada.remember("Right after the move", request_id="right-after"))
        followed_in = time.monotonic() - t0
        time.sleep(2.0)  # load on the new server too
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not failures, failures[:5]
    assert recorded(two, workspace_id) == ("b", 0)
    assert not leftovers(two, database)
    # Every acknowledged write is in the new database exactly once, whole.
    written = rows(
        two, "b", database, "SELECT title, id::text FROM memory WHERE title LIKE 'Writer %'"
    )
    titles = Counter(t for t, _ in written)
    assert len(acked) > 50
    assert sorted(titles) == sorted(t for _, t, _ in acked)
    assert set(titles.values()) == {1}
    # Each acknowledgement named the row that holds its write (a retry
    # answered with the first result), and its request id is kept.
    assert dict(written) == {t: m for _, t, m in acked}
    keyed = rows(two, "b", database, "SELECT memory_id::text FROM request_key")
    assert {m for _, _, m in acked} <= {r[0] for r in keyed}
    unwhole = rows(
        two,
        "b",
        database,
        "SELECT count(*) FROM memory m WHERE NOT EXISTS (SELECT 1 FROM memory_revision r"
        " WHERE r.memory_id = m.id AND r.action = 'create')",
    )
    assert unwhole == [(0,)]
    assert set(seeded) <= {r[0] for r in rows(two, "b", database, "SELECT id::text FROM memory")}
    # Embeddings came along (the seeded ones) and the new ones are made there.
    status = retrying(lambda: ada.wait_embedded(timeout=180))
    assert status.embedded == status.memories == len(seeded) + 1 + len(acked) + 1
    assert set(vectors) <= set(rows(two, "b", database, VECTORS))  # copied, not rebuilt
    dense = retrying(lambda: ada.recall("zanzibar runbook in the wiki", mode="dense")).outcome
    assert dense.dense_available
    # New writes land on the new server.
    after = retrying(lambda: ada.remember("Written after the move", request_id="after")).memory.id
    assert rows(two, "b", database, f"SELECT count(*) FROM memory WHERE id = '{after}'") == [(1,)]
    # A write that reached a store between the seal and the switch met the
    # sealed source and waited out the pool timeout: reported, not asserted
    # (on a busy machine any write may take a second).
    slow = sum(p > 1.0 for p in pauses)
    # No URL or password reached a log meanwhile.
    logs = "\n".join(p.read_text(errors="replace") for p in two.log_dir.iterdir())
    for secret in secrets_of(two):
        assert secret not in logs and secret not in out
    print(
        f"\nmove under load: {moved_in:.1f} s; {len(acked)} writes acknowledged; "
        f"write latency p50 {statistics.median(pauses) * 1000:.0f} ms, max "
        f"{max(pauses) * 1000:.0f} ms, {slow} over 1 s; followed in "
        f"{followed_in * 1000:.0f} ms; recall {recall_ok['right']} right, "
        f"{recall_ok['unavailable']} UNAVAILABLE; {out.strip().splitlines()[-1]}"
    )
    ada.close()


STEPS = ("recorded", "copying", "copied", "fenced", "sealed", "switched")


@pytest.mark.parametrize("step", STEPS)
def test_a_move_killed_at_a_step_ends_like_a_clean_one(
    two: Stack, operator: Client, step: str
) -> None:
    workspace_id, slug, database, ada = team(two, operator)
    ids = [ada.remember(f"Note {i} before the move", f"Body {i}.").memory.id for i in range(20)]
    digest = rows(two, "default", database, MEMORY_DIGEST)
    proc = move(two, slug, pause_after=step)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == f"step: {step}":
            break
    else:
        raise AssertionError(f"the move ended before {step}: {proc.wait()}")
    if step == "copying":
        # While it runs, a second mover is refused rather than undoing it.
        second = move(two, slug)
        out, _ = second.communicate(timeout=120)
        assert second.returncode == 1
        assert "another move of this workspace is running" in out
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    # Interrupted: still served, from exactly one database.
    if step in ("recorded", "copying", "copied", "fenced"):
        assert recorded(two, workspace_id)[0] == "default"
    rerun = move(two, slug)
    out, _ = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, out
    assert recorded(two, workspace_id) == ("b", 0)
    assert not leftovers(two, database)
    assert rows(two, "b", database, MEMORY_DIGEST) == digest
    read = retrying(lambda: ada.read(ids)).memories
    assert [m.id for m in read] == ids
    assert rows(two, "b", database, "SELECT count(*) FROM memory") == [(20,)]
    ada.close()


def test_sigterm_before_the_seal_rolls_the_move_back_at_once(two: Stack, operator: Client) -> None:
    workspace_id, slug, database, ada = team(two, operator)
    ada.remember("A note that stays where it is")
    proc = move(two, slug, pause_after="copied")
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "step: copied":
            break
    proc.send_signal(signal.SIGTERM)
    out = proc.stdout.read()
    # Stopped, as a shell reports a command SIGTERM ended: one line, no traceback.
    assert proc.wait(60) == 128 + signal.SIGTERM, out
    assert "rolled back: the source serves as before" in out
    assert "Traceback" not in out and "error: move-workspace stopped" in out, out
    assert recorded(two, workspace_id) == ("default", 0)
    assert database not in {
        r[0] for r in rows(two, "b", "postgres", "SELECT datname FROM pg_database")
    }
    assert retrying(lambda: ada.remember("Written after the rollback")).memory.id
    ada.close()
