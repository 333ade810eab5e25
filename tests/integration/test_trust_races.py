"""What forget and member removal promise holds against writes made beside
them (design §4, §10): a memory derived, at the moment its ancestor is
forgotten, from a memory derived from that ancestor is forgotten with it; no
memory is written for a member who was removed; and two owners removed at
once leave one of them."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import psycopg
import pytest

from recallatron import errors
from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.sql import memory_queries as mq
from services.store.sql import queries as q
from tests import dbutil
from tests.conftest import Team, wait_for

pytestmark = pytest.mark.integration


def test_a_memory_derived_beside_a_forget_two_links_away_is_forgotten_too(
    stack: Stack, team: Team
) -> None:
    ada = team.clients["ada"]
    a = ada.remember("Quarry plan A", "The quarry opens in May.", audience_to="workspace")
    b = ada.derive([a.memory.id], "Quarry summary", "From plan A: May.")
    url = dbutil.workspace_url(stack, team.database_name)
    c_id = str(uuid.uuid4())
    # A derive from b, open: its link's fold holds b FOR SHARE.
    with psycopg.connect(url) as deriving:
        deriving.execute(
            mq.INSERT_MEMORY,
            (c_id, "note", "Quarry digest", "From the summary.", 1.0, "derived", None,
             ["assist"], team.members["ada"], None),
        )  # fmt: skip
        deriving.execute(mq.INSERT_LINKS, (c_id, ["derived_from"], [b.memory.id]))
        forgot: list[BaseException] = []

        def forget() -> None:
            try:
                ada.forget(a.memory.id, "withdrawn")
            except BaseException as exc:  # reported below
                forgot.append(exc)

        thread = threading.Thread(target=forget)
        thread.start()
        with psycopg.connect(url, autocommit=True) as watch:
            # The forget's walk has run and waits for b, held by the derive.
            wait_for(
                lambda: watch.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock'"
                ).fetchone(),
                "the forget waiting for the open derive",
            )
        deriving.commit()
        thread.join()
    assert not forgot, forgot
    with psycopg.connect(url) as conn:
        rows = dict(
            conn.execute(
                "SELECT id::text, provenance_forgotten FROM memory WHERE id = ANY(%s::uuid[])",
                ([b.memory.id, c_id],),
            ).fetchall()
        )
    assert rows == {b.memory.id: True, c_id: True}
    assert c_id not in {r.memory.id for r in ada.recall("quarry", mode="lexical").outcome.results}


def test_no_memory_is_written_for_a_removed_member(team: Team, operator: Client) -> None:
    ada, cy = team.clients["ada"], team.members["cy"]
    operator.remove_member(cy, "erase")
    with pytest.raises(grpc.RpcError) as info:
        ada.remember("For cy", "A note addressed to a member who left.", audience_to=cy)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "audience.member_id" in (info.value.details() or "")


class _PausedAfterCounting:
    """A control-plane connection that, once it has counted a workspace's
    other owners, waits for the other removal to have counted too (or for
    the barrier's limit: the other may be waiting its turn)."""

    def __init__(self, conn: Any, barrier: threading.Barrier) -> None:
        self.conn, self.barrier = conn, barrier

    def execute(self, statement: str, params: Any = None) -> Any:
        cursor = self.conn.execute(statement, params)
        if statement is q.OTHER_OWNERS:
            with contextlib.suppress(threading.BrokenBarrierError):
                self.barrier.wait(timeout=5)
        return cursor


def test_two_owners_removed_at_once_leave_one(
    stack: Stack, team: Team, operator: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from services.store.domain.control import ControlPlane
    from services.store.domain.member_removal import MemberRemoval

    eve = operator.create_member(team.workspace_id, "eve", owner=True).member.id
    owners = [team.members["ada"], eve]
    with dbutil.store_databases(stack) as dbs:
        control, barrier = ControlPlane(dbs), threading.Barrier(2)
        real = dbs.control_conn

        @contextlib.contextmanager
        def paused() -> Iterator[Any]:
            with real() as conn:
                yield _PausedAfterCounting(conn, barrier)

        monkeypatch.setattr(dbs, "control_conn", paused)
        removal = MemberRemoval(dbs, control)
        outcomes: dict[str, str] = {}

        def remove(member: str) -> None:
            try:
                removal.remove(member, "erase")
                outcomes[member] = "removed"
            except errors.FailedPrecondition:
                outcomes[member] = "refused: the last owner"

        threads = [threading.Thread(target=remove, args=(m,)) for m in owners]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        left = [m.id for m in control.members(team.workspace_id) if m.role == "owner"]
    assert sorted(outcomes.values()) == ["refused: the last owner", "removed"]
    assert len(left) == 1 and outcomes[left[0]] == "refused: the last owner"


@contextlib.contextmanager
def _in_process_memories(stack: Stack) -> Iterator[Any]:
    """The store's memory tools in this process (the stack's own store runs
    the removal), so a test can hold a write at a chosen step."""
    from services.store.domain.control import ControlPlane
    from services.store.domain.memories import MemoryStore

    with dbutil.store_databases(stack) as dbs:
        yield MemoryStore(dbs, ControlPlane(dbs))


def _write_for(memories: Any, team: Team, member: str, outcome: list[Any]) -> threading.Thread:
    from services.store.domain.memories import NewMemory
    from services.store.infrastructure.db import Caller

    caller = Caller(team.workspace_id, team.members["ada"], "assist", "owner")
    new = NewMemory("note", "For cy alone", "Written while cy leaves.", audience=member)

    def write() -> None:
        try:
            outcome.append(memories.remember(caller, str(uuid.uuid4()), new).memory)
        except BaseException as exc:  # reported by the test
            outcome.append(exc)

    return threading.Thread(target=write)


def _live_memories_for(stack: Stack, team: Team, member: str) -> list[str]:
    url = dbutil.workspace_url(stack, team.database_name)
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT title FROM memory WHERE audience_member_id = %s AND invalidated_at IS NULL",
            (member,),
        ).fetchall()
    return [str(r[0]) for r in rows]


def test_a_write_checked_before_a_member_is_removed_is_refused_after(
    stack: Stack, team: Team, operator: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    cy = team.members["cy"]
    checked, go = threading.Event(), threading.Event()
    with _in_process_memories(stack) as memories:
        real = memories.control.member_in_workspace

        def check_then_wait(*args: Any, **kwargs: Any) -> bool:
            answer = real(*args, **kwargs)
            checked.set()
            go.wait(timeout=60)
            return bool(answer)

        monkeypatch.setattr(memories.control, "member_in_workspace", check_then_wait)
        outcome: list[Any] = []
        writer = _write_for(memories, team, cy, outcome)
        writer.start()
        assert checked.wait(timeout=60), "the write never checked its audience"
        operator.remove_member(cy, "erase")  # while the write's check has passed
        go.set()
        writer.join()
    assert _live_memories_for(stack, team, cy) == []
    assert len(outcome) == 1 and isinstance(outcome[0], errors.InvalidArgument), outcome
    assert "audience.member_id" in str(outcome[0])


def test_a_write_open_when_a_member_is_removed_is_erased_with_their_memories(
    stack: Stack, team: Team, operator: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    cy = team.members["cy"]
    inserted, go = threading.Event(), threading.Event()
    url = dbutil.workspace_url(stack, team.database_name)
    with _in_process_memories(stack) as memories:
        real = memories._insert

        def insert_then_wait(*args: Any, **kwargs: Any) -> Any:
            made = real(*args, **kwargs)
            inserted.set()
            go.wait(timeout=60)
            return made

        monkeypatch.setattr(memories, "_insert", insert_then_wait)
        outcome: list[Any] = []
        writer = _write_for(memories, team, cy, outcome)
        writer.start()
        assert inserted.wait(timeout=60), "the write never inserted"
        removal = threading.Thread(target=operator.remove_member, args=(cy, "erase"))
        removal.start()
        with psycopg.connect(url, autocommit=True) as watch:
            # Either the removal waits for the open write, or (as it did) it
            # has finished beside it; then the write commits.
            wait_for(
                lambda: (
                    not removal.is_alive()
                    or watch.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
                        " AND wait_event_type = 'Lock'"
                    ).fetchone()
                ),
                "the removal finished or waiting for the open write",
            )
        go.set()
        writer.join()
        removal.join()
    # Committed first, then erased by the removal: its author reads back the
    # memory, or its tombstone if the erase came before the read.
    assert len(outcome) == 1 and not isinstance(outcome[0], BaseException), outcome
    assert outcome[0].title in ("For cy alone", "")
    assert _live_memories_for(stack, team, cy) == []
