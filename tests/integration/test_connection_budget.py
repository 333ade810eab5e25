"""The connection budget (issue 19, docs/servers.md): many workspaces on one
server, all busy at once, never hold more connections on it than the
documented bound for the settings, here made small so that the pools must
be evicted and reopened all the time."""

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
from recallatron_cli.stack import Stack, own_config, running
from services.store.servers import connection_budget

pytestmark = pytest.mark.integration

SMALL = {
    "RECALLATRON_POOL_MAX_SIZE": "2",
    "RECALLATRON_OWNER_POOL_MAX_SIZE": "1",
    "RECALLATRON_MAX_OPEN_POOLS": "3",
    "RECALLATRON_SERVER_THREADS": "8",
    "RECALLATRON_JOB_WORKERS": "2",
    "RECALLATRON_JOB_POLL_SECONDS": "0.2",
}
WORKSPACES = 16

# Client backends on the server, this sampler's own session left out.
BACKENDS = """
SELECT count(*) FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory, prepared_models_dir: Path) -> Iterator[Stack]:
    config = own_config(tmp_path_factory.mktemp("budget"), prepared_models_dir, env=SMALL)
    with running(Stack(config)) as stack:
        yield stack


def test_many_busy_workspaces_stay_within_the_budget(small: Stack) -> None:
    bound = connection_budget(
        max_open_pools=3,
        pool_max_size=2,
        owner_pool_max_size=1,
        server_threads=8,
        job_workers=2,
        store_replicas=1,
        job_replicas=1,
        default_server=True,
    )
    operator = Client(small.gateway, small.admin_token)
    clients = []
    for _ in range(WORKSPACES):
        ws = operator.create_workspace(f"c-{uuid.uuid4().hex[:10]}").workspace
        member = operator.create_member(ws.id, "ada", owner=True).member
        clients.append(Client(small.gateway, operator.create_token(member.id).token))
    stop = threading.Event()
    peak = [0]
    calls = [0, 0]  # answered, UNAVAILABLE (a pool busy past its timeout)
    lock = threading.Lock()

    def sample() -> None:
        assert small.postgres is not None
        with psycopg.connect(small.postgres.url, autocommit=True) as conn:
            while not stop.is_set():
                row = conn.execute(BACKENDS).fetchone()
                peak[0] = max(peak[0], row[0] if row else 0)
                time.sleep(0.02)

    def work(k: int) -> None:
        n = 0
        while not stop.is_set():
            client = clients[(k + n) % WORKSPACES]
            try:
                if n % 2:
                    client.remember(f"Busy note {k}-{n} on the budget ledger")
                else:
                    client.recall("budget ledger", mode="lexical", skip_rerank=True)
                outcome = 0
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAVAILABLE, exc.details()
                outcome = 1
            with lock:
                calls[outcome] += 1
            n += 1

    threads = [threading.Thread(target=sample)]
    threads += [threading.Thread(target=work, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    # At least 12 s of load, and on until 200 calls were answered (a busy
    # machine answers fewer per second; the bound must hold all the same).
    started = time.monotonic()
    while time.monotonic() - started < 12.0 or (
        calls[0] <= 200 and time.monotonic() - started < 90.0
    ):
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(60)
    print(
        f"\nconnection budget {bound}: peak {peak[0]}; "
        f"calls {calls[0]} answered, {calls[1]} UNAVAILABLE"
    )
    assert calls[0] > 200
    # Enough workspaces that the cap matters: their pools at full size,
    # uncapped, would pass the bound.
    uncapped = WORKSPACES * (2 + 1) + 2 + 1 + WORKSPACES * 1 + 2
    assert uncapped > 2 * bound
    assert 0 < peak[0] <= bound
    for client in clients:
        client.close()
    operator.close()
