"""The embedding job's rules for analyzing and vacuuming a workspace's
database (services/embedding_job/upkeep.py): autovacuum's, counted on the
memories it embeds. A stand-in pool records the statements; no database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from services.embedding_job.upkeep import ANALYZE, ESTIMATED_ROWS, VACUUM, Upkeep
from services.store.infrastructure.db import WorkspacePool


class _Result:
    def __init__(self, row: tuple[float] | None) -> None:
        self.row = row

    def fetchone(self) -> tuple[float] | None:
        return self.row


class _Pool:
    """Answers the row estimate with ``rows``; records what ran, and whether
    outside a transaction."""

    def __init__(self, rows: float) -> None:
        self.rows = rows
        self.ran: list[tuple[str, bool]] = []
        self.autocommit = False
        self.in_transaction = False

    @contextmanager
    def connection(self) -> Iterator[Any]:
        yield self

    def commit(self) -> None:
        self.in_transaction = False

    def execute(self, sql: str) -> _Result:
        if sql == VACUUM:
            assert not self.in_transaction and self.autocommit
        self.in_transaction = not self.autocommit
        if sql != ESTIMATED_ROWS:
            self.ran.append((sql, self.autocommit))
        return _Result((self.rows,) if sql == ESTIMATED_ROWS else None)


def pool(rows: float) -> tuple[_Pool, WorkspacePool]:
    fake = _Pool(rows)
    return fake, cast(WorkspacePool, fake)


def test_a_few_writes_run_nothing() -> None:
    fake, p = pool(0)
    upkeep = Upkeep()
    assert upkeep.wrote("w", 30, p) is None
    assert upkeep.wrote("w", 20, p) is None
    assert fake.ran == []


def test_a_new_table_is_analyzed_past_fifty_rows_and_the_count_starts_again() -> None:
    fake, p = pool(-1)  # never analyzed: Postgres estimates -1 rows
    upkeep = Upkeep()
    assert upkeep.wrote("w", 50, p) is None
    assert upkeep.wrote("w", 1, p) == "analyze"
    assert fake.ran == [(ANALYZE, False)]
    assert upkeep.wrote("w", 50, p) is None
    assert fake.ran == [(ANALYZE, False)]


def test_a_large_table_waits_for_a_tenth_of_its_rows() -> None:
    fake, p = pool(10_000)
    upkeep = Upkeep()
    assert upkeep.wrote("w", 1_000, p) is None  # 50 + 1,000 needed
    assert upkeep.wrote("w", 51, p) == "analyze"
    assert fake.ran == [(ANALYZE, False)]


def test_past_a_thousand_and_a_fifth_it_vacuums_outside_a_transaction() -> None:
    fake, p = pool(1_000)
    upkeep = Upkeep()
    for _ in range(7):
        upkeep.wrote("w", 170, p)  # 1,190 written: analyzed on the way
    assert [sql for sql, _ in fake.ran].count(ANALYZE) == 7
    assert upkeep.wrote("w", 20, p) == "vacuum"  # 1,210 > 1,000 + 200
    assert fake.ran[-1] == (VACUUM, True)
    assert fake.autocommit is False  # the pooled connection is as it was
    assert upkeep.wrote("w", 170, p) == "analyze"  # both counts started again


def test_workspaces_are_counted_apart_and_a_deleted_one_is_forgotten() -> None:
    fake, p = pool(0)
    upkeep = Upkeep()
    assert upkeep.wrote("a", 40, p) is None
    assert upkeep.wrote("b", 40, p) is None
    upkeep.forget("a")
    assert upkeep.wrote("a", 40, p) is None
    assert upkeep.wrote("b", 40, p) == "analyze"
    assert fake.ran == [(ANALYZE, False)]
