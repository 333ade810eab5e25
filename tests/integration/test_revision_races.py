"""Two changes of one memory at the same revision, one held open after its
change while the other runs (design §7.1): exactly one wins; the other is
refused as the loser of a race (ABORTED with the current revision), or, when
the winner forgot the memory, as not found; never a second successor, and a
loser writes nothing."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import psycopg
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from recallatron_devkit.stack import Stack
from services.store.domain import memory_writes
from services.store.domain.memories import MemoryStore, NewMemory
from services.store.infrastructure.db import Caller, caller_transaction
from services.store.sql import memory_queries as mq
from tests import dbutil
from tests.conftest import Team, wait_for

pytestmark = pytest.mark.integration


class _HeldAfter:
    """A connection that runs ``hook`` just after ``statement``: the change
    is made and its row locked, its transaction still open."""

    def __init__(self, conn: psycopg.Connection, statement: str, hook: Callable[[], None]) -> None:
        self._conn, self._statement, self._hook = conn, statement, hook

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
        cursor = self._conn.execute(query, *args, **kwargs)
        if query is self._statement:
            self._hook()
        return cursor

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class _Race:
    """The other change, run through the stack while the held one waits; it
    must be waiting for the held row (or done) before the held one commits."""

    def __init__(self, stack: Stack, team: Team, call: Callable[[], Any]) -> None:
        self.url = dbutil.workspace_url(stack, team.database_name)
        self.call = call
        self.result: Any = None
        self.error: grpc.RpcError | None = None
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        try:
            self.result = self.call()
        except grpc.RpcError as exc:
            self.error = exc

    def start_and_wait(self) -> None:
        self.thread.start()
        with psycopg.connect(self.url, autocommit=True) as watch:
            wait_for(
                lambda: (
                    not self.thread.is_alive()
                    or watch.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
                        " AND wait_event_type = 'Lock'"
                    ).fetchone()
                ),
                "the other change waiting for the held one",
            )

    def refusal(self) -> grpc.RpcError:
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        assert self.error is not None, f"the other change succeeded: {self.result}"
        return self.error


@contextlib.contextmanager
def _held(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, statement: str, race: _Race
) -> Iterator[MemoryStore]:
    """A store replica in this process whose change stops after
    ``statement`` until ``race`` waits for it."""
    from services.store.domain.control import ControlPlane

    real = caller_transaction

    @contextlib.contextmanager
    def transaction(*args: Any, **kwargs: Any) -> Iterator[Any]:
        with real(*args, **kwargs) as conn:
            yield _HeldAfter(conn, statement, once)

    # Once, after the first such statement: a change reads its memory again
    # once it is locked, and the race may run through this replica too.
    started: list[bool] = []

    def once() -> None:
        if not started:
            started.append(True)
            race.start_and_wait()

    with dbutil.store_databases(stack) as dbs:
        monkeypatch.setattr(memory_writes, "caller_transaction", transaction)
        yield MemoryStore(dbs, ControlPlane(dbs))


def _current_revision(err: grpc.RpcError) -> int:
    status = rpc_status.from_call(err)
    assert status is not None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return int(info.metadata["current_revision"])
    raise AssertionError("no ErrorInfo in the status")


def _ada(team: Team) -> Caller:
    return Caller(team.workspace_id, team.members["ada"], "assist", "owner")


def _titled(stack: Stack, team: Team, prefix: str) -> list[str]:
    rows = dbutil.query(
        stack,
        team.database_name,
        "SELECT id::text FROM memory WHERE title LIKE %s",
        (prefix + "%",),
    )
    return [str(r[0]) for r in rows]


def _actions(stack: Stack, team: Team, memory_id: str) -> list[tuple[int, str]]:
    rows = dbutil.query(
        stack,
        team.database_name,
        "SELECT revision, action::text FROM memory_revision WHERE memory_id = %s"
        " ORDER BY revision, action",
        (memory_id,),
    )
    return [(int(r[0]), str(r[1])) for r in rows]


def _aborted_at(err: grpc.RpcError, revision: int) -> None:
    assert err.code() == grpc.StatusCode.ABORTED, err.details()
    assert (err.details() or "").startswith("expected_revision:"), err.details()
    assert _current_revision(err) == revision


def test_two_supersedes_at_one_revision_make_one_successor(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    ada = team.clients["ada"]
    old = ada.remember("Office is in Lyon", audience_to="workspace").memory
    race = _Race(stack, team, lambda: ada.supersede(old.id, 1, "Office moved to Nantes"))
    with _held(stack, monkeypatch, mq.SUPERSEDE, race) as store:
        won = store.supersede(
            _ada(team),
            str(uuid.uuid4()),
            old.id,
            1,
            NewMemory("note", "Office moved to Porto", ""),
            "",
        )
    _aborted_at(race.refusal(), 2)
    assert _titled(stack, team, "Office moved") == [won.memory.id]
    assert ada.read([old.id]).memories[0].superseded_by_id == won.memory.id
    assert _actions(stack, team, old.id) == [(1, "create"), (2, "supersede")]


def test_a_forget_checked_at_the_revision_a_supersede_moved_on_loses(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    ada = team.clients["ada"]
    old = ada.remember("Office is in Lyon", audience_to="workspace").memory
    race = _Race(stack, team, lambda: ada.forget(old.id, "wrong", expected_revision=1))
    with _held(stack, monkeypatch, mq.SUPERSEDE, race) as store:
        won = store.supersede(
            _ada(team),
            str(uuid.uuid4()),
            old.id,
            1,
            NewMemory("note", "Office moved to Porto", ""),
            "",
        )
    _aborted_at(race.refusal(), 2)
    read = ada.read([old.id, won.memory.id]).memories
    assert [(m.title, m.superseded_by_id) for m in read] == [
        ("Office is in Lyon", won.memory.id),
        ("Office moved to Porto", ""),
    ]


def test_a_supersede_while_the_memory_is_forgotten_is_not_found(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    ada = team.clients["ada"]
    old = ada.remember("Office is in Lyon", audience_to="workspace").memory
    race = _Race(stack, team, lambda: ada.supersede(old.id, 1, "Office moved to Nantes"))
    with _held(stack, monkeypatch, mq.FORGET, race) as store:
        store.forget(_ada(team), str(uuid.uuid4()), old.id, "wrong")
    err = race.refusal()
    assert err.code() == grpc.StatusCode.NOT_FOUND, err.details()
    assert _titled(stack, team, "Office moved") == []
    assert _actions(stack, team, old.id) == [(1, "create"), (1, "forget")]


def test_a_correct_racing_a_supersede_loses_either_way(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    ada = team.clients["ada"]
    # The supersede holds the row; the correct waits, then finds it moved on.
    first = ada.remember("Office is in Lyon", audience_to="workspace").memory
    race = _Race(stack, team, lambda: ada.correct(first.id, 1, "typo", body="Lyon 3e"))
    with _held(stack, monkeypatch, mq.SUPERSEDE, race) as store:
        won = store.supersede(
            _ada(team),
            str(uuid.uuid4()),
            first.id,
            1,
            NewMemory("note", "Office moved to Porto", ""),
            "",
        )
    _aborted_at(race.refusal(), 2)
    assert ada.read([first.id]).memories[0].superseded_by_id == won.memory.id
    assert _actions(stack, team, first.id) == [(1, "create"), (2, "supersede")]

    # The correct holds the row; the supersede waits, then finds it moved on,
    # and its successor is not kept.
    second = ada.remember("Desk is by the window", audience_to="workspace").memory
    race = _Race(stack, team, lambda: ada.supersede(second.id, 1, "Desk moved to the hall"))
    with _held(stack, monkeypatch, mq.CORRECT, race) as store:
        store.correct(
            _ada(team), str(uuid.uuid4()), second.id, 1, None, "By the big window", None, "more"
        )
    _aborted_at(race.refusal(), 2)
    assert _titled(stack, team, "Desk moved") == []
    read = ada.read([second.id]).memories[0]
    assert (read.revision, read.body, read.superseded_by_id) == (2, "By the big window", "")
