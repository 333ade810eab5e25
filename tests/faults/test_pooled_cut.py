"""A pooled connection that died while it sat idle (a firewall or NAT that
forgot it, a backend ended, a server restarted) while its server is fine: the
next call to borrow it is served on a fresh connection, not answered
UNAVAILABLE. Found broken when lent (the socket says so), it is replaced;
found broken by the call's first message (BEGIN and its settings, before any
statement of the call), the call goes again once on another. Never after a
statement may have run. Through tests/faults/tcp_proxy.py, which ends one
idle connection and carries new ones, on an embedded Postgres of its own."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from recallatron import deadline, errors
from recallatron_devkit.localpg import SUPERUSER, LocalPostgres
from recallatron_devkit.stack import free_port
from services.store.infrastructure import budget as budget_module
from services.store.infrastructure.budget import ServerBudget
from services.store.infrastructure.db import Databases
from services.store.infrastructure.transactions import Caller, WorkspacePool, caller_transaction
from services.store.settings import StoreSettings
from tests.conftest import wait_for
from tests.faults.tcp_proxy import TcpProxy
from tests.faults.test_vanished_server import _through

pytestmark = pytest.mark.integration

CALLER = Caller(workspace_id=str(uuid.uuid4()), member_id=str(uuid.uuid4()), purpose="assist")


@pytest.fixture(scope="module")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPostgres]:
    base: Path = tmp_path_factory.mktemp("pooled-cut")
    pg = LocalPostgres(base / "pg", free_port(), secrets_dir=base / "secrets")
    pg.start()
    try:
        with psycopg.connect(pg.url, autocommit=True) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS written (id serial PRIMARY KEY, v text)")
        yield pg
    finally:
        pg.stop()


@pytest.fixture
def proxy(postgres: LocalPostgres) -> Iterator[TcpProxy]:
    with TcpProxy("127.0.0.1", postgres.port) as made:
        yield made


@pytest.fixture
def pool(postgres: LocalPostgres, proxy: TcpProxy) -> Iterator[WorkspacePool]:
    budget = ServerBudget("test", limit=2, idle_seconds=600)
    made = budget.pool(
        "app:test",
        lambda: WorkspacePool(
            budget,
            "app:test",
            _through(proxy, postgres),
            max_size=2,
            timeout=10.0,
            statement_timeout_ms=10_000,
        ),
    )
    assert isinstance(made, WorkspacePool)
    try:
        yield made
    finally:
        budget.close()


def _backend(pool: WorkspacePool) -> int:
    """A call's backend: the pid of the session that served it."""
    with caller_transaction(pool, CALLER) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return int(row[0])


def _lent_backend(pool: WorkspacePool) -> int:
    """The same, on a connection borrowed outside any caller's transaction
    (as the owner's work and the upkeep borrow them): nothing goes again."""
    with pool.connection() as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return int(row[0])


def _count(postgres: LocalPostgres, value: str) -> int:
    with psycopg.connect(postgres.url) as conn:
        row = conn.execute("SELECT count(*) FROM written WHERE v = %s", (value,)).fetchone()
        assert row is not None
        return int(row[0])


def test_a_connection_cut_while_idle_is_replaced_when_lent(
    pool: WorkspacePool, proxy: TcpProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The socket already says the connection ended: the pool opens another
    in its place, and the borrower never sees the dead one."""
    monkeypatch.setattr(budget_module, "CHECK_IDLE_AFTER_SECONDS", 0.0)
    first = _lent_backend(pool)
    assert proxy.reset() == 1
    second = _lent_backend(pool)
    assert second != first
    assert pool.get_stats()["pool_size"] == 1


def test_a_connection_found_dead_by_begin_is_replaced_once(
    pool: WorkspacePool, proxy: TcpProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lent without a look (idle for less than the check's age), the dead
    connection fails the call's BEGIN, before any of its statements: the call
    goes again on a fresh connection."""
    monkeypatch.setattr(budget_module, "CHECK_IDLE_AFTER_SECONDS", 3600.0)
    first = _backend(pool)
    assert proxy.reset() == 1
    second = _backend(pool)
    assert second != first
    assert pool.get_stats()["pool_size"] == 1


def test_a_call_cut_after_a_statement_ran_is_not_run_again(
    pool: WorkspacePool, proxy: TcpProxy, postgres: LocalPostgres
) -> None:
    """A write may have run: the call answers UNAVAILABLE, its block ran
    once, and nothing was written twice (nor, uncommitted, at all)."""
    value = str(uuid.uuid4())
    runs = 0
    with pytest.raises(errors.Unavailable), caller_transaction(pool, CALLER) as conn:
        runs += 1
        conn.execute("INSERT INTO written (v) VALUES (%s)", (value,))
        assert proxy.reset() == 1
        conn.execute("SELECT 1")
    assert runs == 1
    assert _count(postgres, value) == 0
    # The pool serves the next call on a fresh connection.
    _backend(pool)


def test_the_control_pools_connection_cut_while_idle_is_replaced_when_lent(
    postgres: LocalPostgres, proxy: TcpProxy
) -> None:
    """The control plane's pool (psycopg_pool's) as well: its idle
    connection ended, the next call is served on another."""
    url = f"postgresql://{SUPERUSER}:{postgres.superuser_password}@127.0.0.1:{proxy.port}/postgres"
    dbs = Databases(StoreSettings(database_url=url, app_password=postgres.app_password))
    try:
        dbs.bootstrap()
        assert dbs.control is not None
        dbs.control.wait()
        with dbs.control_conn() as conn:
            first = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert proxy.reset() >= 1
        with dbs.control_conn() as conn:
            second = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert second != first
    finally:
        dbs.close()


def test_an_abandoned_call_on_a_connection_that_went_silent_ends(
    pool: WorkspacePool, proxy: TcpProxy
) -> None:
    """A proxy or balancer between that still acknowledges what is sent (so
    no keepalive or user timeout ever fires) while nothing reaches the
    server: the call's first message is never answered and a cancel reaches
    a backend that runs nothing. Abandoned at its deadline, the call must
    still end (its thread and connection freed), not wait for ever."""
    _backend(pool)
    assert proxy.blackhole() == 1
    scope = deadline.Scope(60.0)
    outcome: list[BaseException | None] = []

    def call() -> None:
        leave = deadline.enter(scope)
        try:
            _backend(pool)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)
        finally:
            leave()

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(1.0)
    assert thread.is_alive(), outcome
    scope.abandon()
    wait_for(lambda: outcome or None, "the abandoned call ended", timeout=30.0)
    assert isinstance(outcome[0], errors.DeadlineExceeded | errors.Unavailable), outcome
    # Its place in the pool is free again: the next call is served.
    assert _backend(pool)
