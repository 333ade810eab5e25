"""A deleted workspace's pools close in every process (design §10; issue 34):
the deletion's notification, "<workspace id> <server> <database>", makes
each process's DeletionFollower close that database's pools and drop the
cached record; a payload it cannot read, or a server it does not know,
changes nothing."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from services.store.infrastructure.follow import DELETED_CHANNEL, DeletionFollower


class FakeDatabases:
    def __init__(self) -> None:
        self.servers = SimpleNamespace(names=["default", "second"])
        self.closed: list[tuple[str, str]] = []

    def forget_pools(self, server: str, database: str) -> None:
        self.closed.append((server, database))


def follower() -> tuple[DeletionFollower, FakeDatabases, list[str]]:
    dbs = FakeDatabases()
    forgotten: list[str] = []
    made = DeletionFollower("postgresql://unused", threading.Event(), dbs, forgotten.append)  # type: ignore[arg-type]
    return made, dbs, forgotten


def test_a_deletion_closes_that_databases_pools_and_drops_the_record() -> None:
    made, dbs, forgotten = follower()
    assert made.channel == DELETED_CHANNEL
    made.on_notify("4f1c7c52-0000-4000-8000-000000000001 second ws_4f1c7c52")
    assert forgotten == ["4f1c7c52-0000-4000-8000-000000000001"]
    assert dbs.closed == [("second", "ws_4f1c7c52")]


def test_a_payload_it_cannot_read_or_an_unknown_server_changes_no_pool() -> None:
    made, dbs, forgotten = follower()
    bad: list[Any] = ["", "only-an-id", "a b c d"]
    for payload in bad:
        made.on_notify(payload)
    assert dbs.closed == [] and forgotten == []
    made.on_notify("id elsewhere ws_x")
    assert dbs.closed == [] and forgotten == ["id"]


def test_the_embedding_job_drops_a_deleted_workspace_from_its_queue() -> None:
    """A workspace deleted while marked is not looked at again (it was backed
    off and retried for ever, logging an error each time)."""
    from recallatron import errors
    from services.embedding_job.job import EmbeddingJob
    from services.embedding_job.upkeep import Upkeep
    from services.store.infrastructure.work_marks import WorkQueue

    job = EmbeddingJob.__new__(EmbeddingJob)
    job.stop_event = threading.Event()
    job.queue = WorkQueue()
    job.upkeep = Upkeep()
    job.settings = SimpleNamespace(job_max_backoff_seconds=1.0)  # type: ignore[assignment]
    visited: list[str] = []

    def visit(workspace_id: str) -> float | None:
        visited.append(workspace_id)
        job.stop_event.set()
        raise errors.NotFound("workspace not found")

    job.beat = lambda: None  # type: ignore[method-assign]
    job.visit = visit  # type: ignore[method-assign]
    job.queue.mark("deleted")
    job.run_forever()
    assert visited == ["deleted"] and len(job.queue) == 0
