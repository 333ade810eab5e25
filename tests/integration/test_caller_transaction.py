"""`caller_transaction` on a real Postgres: BEGIN and the caller's settings
go out as one message, so these check what that must not change. Every
statement of the block runs in one transaction, the settings end with it,
an error rolls the whole block back, a nested transaction is a savepoint,
and the connection goes back to the pool as it came (not in autocommit),
to be lent again."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.infrastructure.budget import ServerBudget
from services.store.infrastructure.db import GENERIC_PLANS, with_database
from services.store.infrastructure.transactions import Caller, WorkspacePool, caller_transaction

pytestmark = pytest.mark.integration

CALLER = Caller(workspace_id=str(uuid.uuid4()), member_id=str(uuid.uuid4()), purpose="assist")
SETTINGS = "SELECT current_setting('recallatron.member_id', true), current_setting('recallatron.purpose', true), current_setting('plan_cache_mode')"  # noqa: E501


@pytest.fixture
def pool(stack: Stack) -> Iterator[WorkspacePool]:
    budget = ServerBudget("test", limit=1, idle_seconds=600)
    made = budget.pool(
        "caller-transaction",
        lambda: WorkspacePool(
            budget,
            "caller-transaction",
            with_database(stack.database_url, "postgres"),
            max_size=1,
            timeout=30,
            statement_timeout_ms=60_000,
        ),
    )
    try:
        with made.connection() as conn:
            conn.execute("CREATE TEMP TABLE kept (x int)")
        yield made  # type: ignore[misc]
    finally:
        made.close()


def one(conn: psycopg.Connection, sql: str) -> tuple:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return tuple(row)


def test_the_block_is_one_transaction_with_the_callers_settings(pool: WorkspacePool) -> None:
    with caller_transaction(pool, CALLER, GENERIC_PLANS) as conn:
        backend = conn.info.backend_pid
        first = one(conn, "SELECT pg_current_xact_id()::text, now()")
        assert one(conn, SETTINGS) == (CALLER.member_id, "assist", "force_generic_plan")
        assert one(conn, "SELECT pg_current_xact_id()::text, now()") == first
    with pool.connection() as conn:
        assert conn.info.backend_pid == backend, "the connection was not lent again"
        assert not conn.autocommit
        assert one(conn, SETTINGS) in (("", "", "auto"), (None, None, "auto"))


@pytest.mark.parametrize("failure", ["python", "statement"])
def test_an_error_rolls_the_whole_block_back(pool: WorkspacePool, failure: str) -> None:
    with (
        pytest.raises((RuntimeError, psycopg.errors.DivisionByZero)),
        caller_transaction(pool, CALLER) as conn,
    ):
        backend = conn.info.backend_pid
        conn.execute("INSERT INTO kept VALUES (1)")
        if failure == "python":
            raise RuntimeError("the domain gave up")
        conn.execute("SELECT 1 / 0")
    with caller_transaction(pool, CALLER) as conn:
        assert conn.info.backend_pid == backend, "the connection was not lent again"
        assert one(conn, "SELECT count(*) FROM kept") == (0,)


def test_a_nested_transaction_is_a_savepoint(pool: WorkspacePool) -> None:
    with caller_transaction(pool, CALLER) as conn:
        conn.execute("INSERT INTO kept VALUES (1)")
        with pytest.raises(RuntimeError), conn.transaction():
            conn.execute("INSERT INTO kept VALUES (2)")
            raise RuntimeError("undo the inner part only")
        conn.execute("INSERT INTO kept VALUES (3)")
    with pool.connection() as conn:
        assert [r[0] for r in conn.execute("SELECT x FROM kept ORDER BY x")] == [1, 3]
