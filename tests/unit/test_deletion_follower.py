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
