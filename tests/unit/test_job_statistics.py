"""The embedding job's rule for analyzing a workspace's database
(services/embedding_job/statistics.py): autovacuum's, counted on the memories
it embeds. A stand-in pool records the statements; no database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from services.embedding_job.statistics import ANALYZE, ESTIMATED_ROWS, Statistics
from services.store.infrastructure.db import WorkspacePool


class _Result:
    def __init__(self, row: tuple[float] | None) -> None:
        self.row = row

    def fetchone(self) -> tuple[float] | None:
        return self.row


class _Pool:
    """Answers the row estimate with ``rows``; records what ran."""

    def __init__(self, rows: float) -> None:
        self.rows = rows
        self.ran: list[str] = []

    @contextmanager
    def connection(self) -> Iterator[Any]:
        yield self

    def execute(self, sql: str) -> _Result:
        self.ran.append(sql)
        return _Result((self.rows,) if sql == ESTIMATED_ROWS else None)


def pool(rows: float) -> tuple[_Pool, WorkspacePool]:
    fake = _Pool(rows)
    return fake, cast(WorkspacePool, fake)


def test_a_few_writes_cost_no_statement() -> None:
    fake, p = pool(0)
    stats = Statistics()
    assert not stats.wrote("w", 30, p)
    assert not stats.wrote("w", 20, p)
    assert fake.ran == []


def test_a_new_table_is_analyzed_past_fifty_rows_and_the_count_starts_again() -> None:
    fake, p = pool(-1)  # never analyzed: Postgres estimates -1 rows
    stats = Statistics()
    assert not stats.wrote("w", 50, p)
    assert stats.wrote("w", 1, p)
    assert fake.ran == [ESTIMATED_ROWS, ANALYZE]
    fake.ran.clear()
    assert not stats.wrote("w", 50, p)
    assert fake.ran == []


def test_a_large_table_waits_for_a_tenth_of_its_rows() -> None:
    fake, p = pool(10_000)
    stats = Statistics()
    assert not stats.wrote("w", 1_000, p)  # 50 + 1,000 needed
    assert fake.ran == [ESTIMATED_ROWS]
    assert stats.wrote("w", 51, p)
    assert fake.ran[-1] == ANALYZE


def test_workspaces_are_counted_apart_and_a_deleted_one_is_forgotten() -> None:
    fake, p = pool(0)
    stats = Statistics()
    assert not stats.wrote("a", 40, p)
    assert not stats.wrote("b", 40, p)
    stats.forget("a")
    assert not stats.wrote("a", 40, p)
    assert stats.wrote("b", 40, p)
    assert fake.ran == [ESTIMATED_ROWS, ANALYZE]
