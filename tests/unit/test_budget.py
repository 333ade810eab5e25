"""The connection budget's rules (services/store/infrastructure/budget.py), on stand-in
connections: the bound, the order of waiters, an idle workspace giving way to
a busy one, the timeout with its retry hint, idle connections closing, a
closed pool failing its waiters. The real thing, on a real server:
tests/integration/test_connection_budget.py and test_many_workspaces.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.pq import TransactionStatus

from services.store.infrastructure.budget import (
    BudgetTimeout,
    DatabasePool,
    PoolClosed,
    ServerBudget,
)


class FakeConn:
    def __init__(self, key: str, opened: list[str]) -> None:
        self.key = key
        self.closed = False
        self.broken = False
        self.autocommit = False
        self.opened = opened

        class Info:
            transaction_status = TransactionStatus.IDLE

        self.info = Info()

        class PgConn:
            @property
            def socket(self) -> int:
                raise OSError("no socket")

        self.pgconn = PgConn()

    def close(self) -> None:
        self.closed = True

    def commit(self) -> None:
        pass

    def rollback(self) -> None:
        pass


class FakePool(DatabasePool):
    def __init__(
        self, budget: ServerBudget, key: str, opened: list[str], max_size: int = 2, **more: Any
    ):
        super().__init__(
            budget, key, "", max_size=max_size, timeout=5.0, statement_timeout_ms=1, **more
        )
        self.opened = opened
        self.gate: threading.Event | None = None

    def _connect(self) -> Any:
        self.opened.append(self.key)
        return FakeConn(self.key, self.opened)


def make(budget: ServerBudget, key: str, opened: list[str], max_size: int = 2) -> FakePool:
    """Through the budget, as the store makes its pools."""
    pool = budget.pool(key, lambda: FakePool(budget, key, opened, max_size))
    assert isinstance(pool, FakePool)
    return pool


def wait_until(condition: Callable[[], bool], limit: float = 10.0) -> None:
    """Until ``condition`` holds (a generous limit, then the test fails)."""
    end = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < end, "the condition never held"
        time.sleep(0.005)


def _open_count(budget: ServerBudget) -> int:
    return int(budget.stats()["open"])


def test_never_more_open_than_the_budget() -> None:
    budget = ServerBudget("s", limit=3, idle_seconds=60)
    opened: list[str] = []
    pools = [make(budget, f"db{i}", opened) for i in range(6)]
    peak = [0]
    lock = threading.Lock()

    def use(pool: FakePool) -> None:
        for _ in range(20):
            with pool.connection(timeout=10):
                with lock:
                    peak[0] = max(peak[0], _open_count(budget))
                time.sleep(0.001)

    threads = [threading.Thread(target=use, args=(p,)) for p in pools for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert 0 < peak[0] <= 3
    assert _open_count(budget) <= 3
    # Busy databases took the places of idle ones: more opened than fit at once.
    assert len(opened) > 3


def test_an_idle_database_gives_way_to_a_busy_one() -> None:
    budget = ServerBudget("s", limit=1, idle_seconds=60)
    opened: list[str] = []
    quiet, busy = make(budget, "quiet", opened), make(budget, "busy", opened)
    with quiet.connection():
        pass
    assert quiet.get_stats()["pool_available"] == 1
    with busy.connection() as conn:
        assert conn.key == "busy"
        assert quiet.get_stats()["pool_available"] == 0
    assert _open_count(budget) == 1


def test_waiters_are_served_in_order_of_arrival() -> None:
    budget = ServerBudget("s", limit=1, idle_seconds=60)
    opened: list[str] = []
    holder = make(budget, "holder", opened)
    pools = [make(budget, f"w{i}", opened) for i in range(4)]
    served: list[str] = []
    release = threading.Event()

    def hold() -> None:
        with holder.connection():
            release.wait(10)

    def wait_for(pool: FakePool) -> None:
        with pool.connection(timeout=10):
            served.append(pool.key)

    first = threading.Thread(target=hold)
    first.start()
    while holder.get_stats()["pool_size"] == 0:
        time.sleep(0.001)
    threads = []
    for pool in pools:
        t = threading.Thread(target=wait_for, args=(pool,))
        t.start()
        threads.append(t)
        # Arrived: waiting in the queue before the next one starts.
        while pool.get_stats()["requests_waiting"] == 0:
            time.sleep(0.001)
    release.set()
    for t in [first, *threads]:
        t.join(10)
    assert served == ["w0", "w1", "w2", "w3"]


def test_a_wait_past_the_timeout_is_refused_with_a_hint() -> None:
    budget = ServerBudget("s", limit=1, idle_seconds=60)
    opened: list[str] = []
    a, b = make(budget, "a", opened), make(budget, "b", opened)
    with a.connection(), pytest.raises(BudgetTimeout) as refused:
        b.budget.acquire(b, 0.05)
    assert refused.value.retry_after > 0
    assert b.get_stats()["requests_errors"] == 1
    assert budget.stats()["waiting"] == 0
    # And the budget is whole again afterwards.
    with b.connection(timeout=1) as conn:
        assert conn.key == "b"


def test_a_database_never_takes_more_than_its_cap() -> None:
    budget = ServerBudget("s", limit=10, idle_seconds=60)
    opened: list[str] = []
    pool = make(budget, "one", opened, max_size=2)
    with pool.connection(), pool.connection(), pytest.raises(BudgetTimeout):
        budget.acquire(pool, 0.05)


def test_idle_connections_close_and_empty_pools_are_forgotten() -> None:
    budget = ServerBudget("s", limit=4, idle_seconds=0.05)
    opened: list[str] = []
    pool = make(budget, "db", opened)
    with pool.connection() as conn:
        pass
    assert _open_count(budget) == 1
    time.sleep(0.06)
    assert budget.close_idle() == 1
    assert conn.closed and _open_count(budget) == 0
    time.sleep(0.06)
    budget.close_idle()
    assert "db" not in budget.pools


def test_a_pool_forgotten_while_its_holder_kept_it_is_reaped_again() -> None:
    """A holder that keeps a pool past idle_seconds (unused meanwhile) and uses
    it again: its connection is counted and closed by the upkeep as any other
    (it was not, once the pool was forgotten: its place stayed taken)."""
    budget = ServerBudget("s", limit=4, idle_seconds=60)
    opened: list[str] = []
    kept = make(budget, "db", opened)
    budget.close_idle(now=time.monotonic() + 120)  # nothing open, unused: forgotten
    assert "db" not in budget.pools
    with kept.connection() as conn:
        pass
    assert budget.pools.get("db") is kept and _open_count(budget) == 1
    budget.close_idle(now=time.monotonic() + 120)
    assert conn.closed and _open_count(budget) == 0


# A broken connection, or one left in autocommit (which would change what the
# next borrower's statements mean), is closed and frees its place.
@pytest.mark.parametrize("state", ["broken", "autocommit"])
def test_a_connection_the_pool_cannot_lend_again_frees_its_place(state: str) -> None:
    budget = ServerBudget("s", limit=1, idle_seconds=60)
    opened: list[str] = []
    pool = make(budget, "db", opened)
    with pool.connection() as conn:
        setattr(conn, state, True)
    assert conn.closed and _open_count(budget) == 0 and pool.get_stats()["pool_size"] == 0


def test_closing_a_pool_fails_its_waiters_at_once() -> None:
    budget = ServerBudget("s", limit=1, idle_seconds=60)
    opened: list[str] = []
    a = make(budget, "a", opened)
    b = make(budget, "b", opened)
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            budget.acquire(b, 10)
        except PoolClosed as exc:
            errors.append(exc)

    with a.connection():
        t = threading.Thread(target=wait)
        t.start()
        while b.get_stats()["requests_waiting"] == 0:
            time.sleep(0.001)
        b.close()
        t.join(5)
    assert len(errors) == 1


def test_a_second_caller_waits_for_a_busy_connection_before_opening_another() -> None:
    budget = ServerBudget("s", limit=4, idle_seconds=60, grow_after=10.0)
    opened: list[str] = []
    pool = make(budget, "db", opened)
    got: list[Any] = []
    with pool.connection() as first:
        t = threading.Thread(target=lambda: got.append(budget.acquire(pool, 30)))
        t.start()
        while pool.get_stats()["requests_waiting"] == 0:
            time.sleep(0.001)
    t.join(10)
    # The second caller had the first's connection back: one backend, not two.
    assert got == [first] and opened == ["db"]
    budget.release(pool, got[0])


def test_a_caller_opens_its_own_once_the_busy_one_stays_busy() -> None:
    budget = ServerBudget("s", limit=4, idle_seconds=60, grow_after=0.02)
    opened: list[str] = []
    pool = make(budget, "db", opened)
    with pool.connection(), pool.connection(timeout=5):
        pass
    assert opened == ["db", "db"]


def test_a_spent_budget_answers_unavailable_with_a_retry_hint() -> None:
    """The one place pool errors become statuses (services/store/infrastructure/transactions.py):
    a wait past the budget is UNAVAILABLE with google.rpc.RetryInfo."""
    from google.rpc import code_pb2, error_details_pb2

    from recallatron import errors
    from recallatron.grpcserver import status_for
    from services.store.infrastructure.db import translate_db_errors

    with pytest.raises(errors.Unavailable) as mapped, translate_db_errors():
        raise BudgetTimeout("server 'default'", "all in use", 5.0, 1.0)
    status = status_for(mapped.value)
    assert status.code == code_pb2.UNAVAILABLE
    hints = []
    for detail in status.details:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            detail.Unpack(info)
            hints.append(info.retry_delay.ToTimedelta().total_seconds())
    assert hints == [1.0]


def test_a_workspace_awake_for_a_while_grows_at_once() -> None:
    """Only a workspace that has just woken shares its first connection; one
    in use for longer than grow_after opens more as its callers need them."""
    budget = ServerBudget("s", limit=4, idle_seconds=60, grow_after=10.0)
    opened: list[str] = []
    pool = make(budget, "db", opened)
    with pool.connection():
        pool.woke_at -= 20.0  # as if its first connection came 20 s ago
        with pool.connection(timeout=0.5):  # far below grow_after: no wait
            pass
    assert opened == ["db", "db"]


def test_a_full_budget_closes_its_oldest_idle_connection_ahead_of_need() -> None:
    """Once the last place is taken, the connection idle longest is closed by
    the budget's own thread: the next workspace to wake opens at once instead
    of closing one on its own critical path. The place counts until closed."""
    budget = ServerBudget("s", limit=2, idle_seconds=60, close_ahead_after=0.0)
    opened: list[str] = []
    closed_by: dict[str, str] = {}

    class Recorded(FakeConn):
        def close(self) -> None:
            closed_by[self.key] = threading.current_thread().name
            super().close()

    pools = [make(budget, name, opened) for name in ("a", "b", "c")]
    for pool in pools:
        pool._connect = lambda p=pool: (opened.append(p.key), Recorded(p.key, opened))[1]  # type: ignore[method-assign]
    with pools[0].connection():
        pass
    with pools[1].connection():
        # The budget is full: a's idle connection goes, on the closer thread.
        deadline = time.monotonic() + 30
        while "a" not in closed_by and time.monotonic() < deadline:
            time.sleep(0.01)
        assert closed_by.get("a", "").startswith("budget-closer")
        assert _open_count(budget) <= 2
    deadline = time.monotonic() + 30
    while _open_count(budget) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _open_count(budget) == 1
    with pools[2].connection() as conn:
        assert conn.key == "c"
    # c took the free place; b's idle connection was then closed ahead too,
    # never by the caller's thread.
    deadline = time.monotonic() + 30
    while "b" not in closed_by and time.monotonic() < deadline:
        time.sleep(0.01)
    assert all(name.startswith("budget-closer") for name in closed_by.values()), closed_by
    assert opened == ["a", "b", "c"]


def _connect_timeout_given(
    monkeypatch: pytest.MonkeyPatch, conninfo: str, left: float | None
) -> int:
    """The connect_timeout a new connection of a pool (its wait 5 s) was
    opened with, as the driver reads it (its arguments over the URL's),
    inside a call with ``left`` seconds to go (None: outside any call)."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from recallatron import deadline

    given: list[int] = []

    def connect(url: str, **kwargs: Any) -> FakeConn:
        given.append(int(conninfo_to_dict(make_conninfo(url, **kwargs))["connect_timeout"]))
        return FakeConn("db", [])

    monkeypatch.setattr(psycopg, "connect", connect)
    budget = ServerBudget("s", limit=2, idle_seconds=60)
    pool = DatabasePool(budget, "db", conninfo, max_size=2, timeout=5.0, statement_timeout_ms=1)
    leave = deadline.enter(deadline.Scope(left)) if left is not None else lambda: None
    try:
        with pool.connection():
            pass
    finally:
        leave()
    return given[0]


def test_a_new_connection_gives_up_by_the_calls_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The connect waited the pool's whole wait (5 s) whatever was left of
    the call it was opened for; the driver counts whole seconds."""
    assert _connect_timeout_given(monkeypatch, "host=db.invalid", None) == 5
    assert _connect_timeout_given(monkeypatch, "host=db.invalid", 1.2) <= 2


def test_a_new_connection_keeps_the_servers_own_connect_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server's URL saying connect_timeout=2 was overridden by the pool's 5 s."""
    assert _connect_timeout_given(monkeypatch, "host=db.invalid connect_timeout=2", None) == 2
    # A larger one is capped by the pool's wait as before.
    assert _connect_timeout_given(monkeypatch, "host=db.invalid connect_timeout=30", None) == 5


def test_a_call_abandoned_while_it_waits_leaves_the_queue() -> None:
    """A call cancelled by its client while it waited for a connection kept
    its place for the whole wait and, its turn come, opened a connection
    (closing another workspace's idle one) for nobody."""
    from recallatron import deadline, errors

    budget = ServerBudget("s", limit=1, idle_seconds=60)
    opened: list[str] = []
    a, b = make(budget, "a", opened), make(budget, "b", opened)
    call = deadline.Scope(60.0)
    outcome: list[BaseException] = []

    def wait_in_call() -> None:
        leave = deadline.enter(call)
        try:
            with b.connection(timeout=60):
                pass
        except BaseException as exc:
            outcome.append(exc)
        finally:
            leave()

    with a.connection():
        waiter = threading.Thread(target=wait_in_call)
        waiter.start()
        wait_until(lambda: budget.stats()["waiting"] == 1)
        call.abandon()
        waiter.join(10)
        assert not waiter.is_alive(), "the abandoned call still waits"
        assert budget.stats()["waiting"] == 0
    assert len(outcome) == 1 and isinstance(outcome[0], errors.DeadlineExceeded), outcome
    assert opened == ["a"]
    # The budget is whole: the place went to nobody.
    with b.connection(timeout=1) as conn:
        assert conn.key == "b"


def test_a_wait_refused_names_the_limit_that_held_it() -> None:
    """A call held back by its own workspace's cap was told that every
    connection of the process's budget was in use, the budget nearly empty;
    each refusal names its setting (the store's, unless told another)."""
    from recallatron import errors
    from services.store.infrastructure.db import translate_db_errors

    budget = ServerBudget("s", limit=10, idle_seconds=60)
    pool = make(budget, "db", [], max_size=1)
    with pool.connection(), pytest.raises(errors.Unavailable) as capped, translate_db_errors():
        budget.acquire(pool, 0.05)
    said = f"{capped.value.__cause__} / {capped.value}"
    assert "RECALLATRON_POOL_MAX_SIZE" in str(capped.value.__cause__), said
    assert "RECALLATRON_POOL_MAX_SIZE" in str(capped.value), said
    assert "budget" not in said, said

    full = ServerBudget("s", limit=1, idle_seconds=60)
    opened: list[str] = []
    a, b = make(full, "a", opened), make(full, "b", opened)
    with a.connection(), pytest.raises(errors.Unavailable) as spent, translate_db_errors():
        full.acquire(b, 0.05)
    assert "RECALLATRON_CONNECTION_BUDGET" in str(spent.value.__cause__), spent.value.__cause__
    assert "RECALLATRON_CONNECTION_BUDGET" in str(spent.value), spent.value
    # Another process's settings, named as it was told.
    job = ServerBudget("s", limit=1, idle_seconds=60, setting="RECALLATRON_JOB_CONNECTION_BUDGET")
    owner = job.pool(
        "o", lambda: FakePool(job, "o", [], max_size=1, setting="RECALLATRON_OWNER_POOL_MAX_SIZE")
    )
    with owner.connection(), pytest.raises(BudgetTimeout) as held:
        job.acquire(owner, 0.05)
    assert "RECALLATRON_OWNER_POOL_MAX_SIZE" in str(held.value), held.value
