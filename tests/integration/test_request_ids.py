"""A write's request id (design §7: a retried call never creates a second
memory): a retry of the same request, even one sent while the first is
still committing, gets the first one's answer; the same id sent with
another request is refused naming request_id, never answered with the
first request's memory (which would acknowledge a write never made)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import grpc
import psycopg
import pytest

from recallatron_devkit.stack import Stack
from tests import dbutil
from tests.conftest import Team, wait_for

pytestmark = pytest.mark.integration


def _refused(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def test_the_same_request_id_with_another_request_is_refused(team: Team) -> None:
    ada = team.clients["ada"]
    rid = str(uuid.uuid4())
    first = ada.remember("Kept text", "the first request", request_id=rid).memory
    assert ada.remember("Kept text", "the first request", request_id=rid).memory.id == first.id
    other = _refused(lambda: ada.remember("Lost text", "another request", request_id=rid))
    assert other.code() == grpc.StatusCode.INVALID_ARGUMENT and "request_id" in other.details()

    a = ada.remember("Forget me", audience_to="workspace").memory
    b = ada.remember("Keep me", audience_to="workspace").memory
    fid = str(uuid.uuid4())
    ada.forget(a.id, "withdrawn", request_id=fid)
    assert ada.forget(a.id, "withdrawn", request_id=fid).replayed
    other = _refused(lambda: ada.forget(b.id, "withdrawn", request_id=fid))
    assert other.code() == grpc.StatusCode.INVALID_ARGUMENT and "request_id" in other.details()
    assert ada.read([b.id]).memories[0].title == "Keep me"

    cid = str(uuid.uuid4())
    ada.correct(b.id, 1, "typo", body="fixed", request_id=cid)
    other = _refused(lambda: ada.correct(b.id, 1, "typo", body="fixed again", request_id=cid))
    assert other.code() == grpc.StatusCode.INVALID_ARGUMENT and "request_id" in other.details()


def _released_together(
    stack: Stack, team: Team, memory_id: str, calls: list[Callable[[], Any]]
) -> list[Any]:
    """Each call's answer (or its error), the calls sent at once while the
    memory's row is held, and let go once every one waits on it: they then
    go one after the other, each under way before the first committed."""
    answers: list[Any] = []

    def send(call: Callable[[], Any]) -> None:
        try:
            answers.append(call())
        except grpc.RpcError as exc:
            answers.append(exc)

    url = dbutil.workspace_url(stack, team.database_name)
    with psycopg.connect(url) as holder, psycopg.connect(url, autocommit=True) as watch:
        holder.execute("SELECT 1 FROM memory WHERE id = %s FOR UPDATE", (memory_id,))
        threads = [threading.Thread(target=send, args=(call,)) for call in calls]
        for t in threads:
            t.start()
        wait_for(
            lambda: watch.execute(
                "SELECT count(*) >= %s FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock'",
                (len(calls),),
            ).fetchone()[0],
            "every call waiting on the row",
        )
        holder.rollback()
        for t in threads:
            t.join()
    return answers


@pytest.mark.parametrize("tool", ["correct", "supersede", "forget"])
def test_a_retry_sent_while_the_first_commits_gets_its_answer(
    stack: Stack, team: Team, tool: str
) -> None:
    ada = team.clients["ada"]
    memory = ada.remember("Race me", "as it was", audience_to="workspace").memory
    rid = str(uuid.uuid4())
    calls = {
        "correct": lambda: ada.correct(memory.id, 1, "update", body="as it is", request_id=rid),
        "supersede": lambda: ada.supersede(memory.id, 1, "Race me, again", request_id=rid),
        "forget": lambda: ada.forget(memory.id, "withdrawn", request_id=rid),
    }
    # Both attempts wait on the memory's row, then go one after the other.
    answers = _released_together(stack, team, memory.id, [calls[tool]] * 2)
    errors = [a for a in answers if isinstance(a, grpc.RpcError)]
    assert not errors, [(e.code(), e.details()) for e in errors]
    assert sorted(bool(a.replayed) for a in answers) == [False, True]
    revisions = dbutil.query(
        stack, team.database_name,
        "SELECT count(*) FROM memory_revision WHERE memory_id = %s AND action <> 'create'",
        (memory.id,),
    )  # fmt: skip
    assert revisions == [(1,)]


def test_the_loser_of_a_supersede_race_hears_aborted(stack: Stack, team: Team) -> None:
    """Two supersedes of one revision under way at once: one wins, the other
    lost a race (ABORTED, read again), as a correct's loser does; one asked
    once the memory is superseded is refused as such (FAILED_PRECONDITION)."""
    ada = team.clients["ada"]
    memory = ada.remember("Office in Lyon", audience_to="workspace").memory
    answers = _released_together(
        stack,
        team,
        memory.id,
        [lambda i=i: ada.supersede(memory.id, 1, f"Office moved {i}") for i in range(2)],
    )
    lost = [a for a in answers if isinstance(a, grpc.RpcError)]
    assert len(lost) == 1 and lost[0].code() == grpc.StatusCode.ABORTED, lost
    late = _refused(lambda: ada.supersede(memory.id, 1, "Office moved again"))
    assert late.code() == grpc.StatusCode.FAILED_PRECONDITION, late.details()


def test_a_forget_that_waited_for_a_correct_records_the_revision_it_forgot(
    stack: Stack, team: Team
) -> None:
    """A forget read the memory's revision before the row was its own: when a
    correct held the row and committed first, the forget went on and its
    history said it forgot revision 1 of a memory at revision 2."""
    ada = team.clients["ada"]
    memory = ada.remember("Race target", "v1", audience_to="workspace").memory
    answers: dict[str, Any] = {}

    def send(name: str, call: Callable[[], Any]) -> threading.Thread:
        def run() -> None:
            try:
                answers[name] = call()
            except grpc.RpcError as exc:
                answers[name] = exc

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    url = dbutil.workspace_url(stack, team.database_name)
    waiting = (
        "SELECT count(*) >= %s FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    with psycopg.connect(url) as holder, psycopg.connect(url, autocommit=True) as watch:
        holder.execute("SELECT 1 FROM memory WHERE id = %s FOR UPDATE", (memory.id,))
        first = send("correct", lambda: ada.correct(memory.id, 1, "fix", body="v2"))
        wait_for(lambda: watch.execute(waiting, (1,)).fetchone()[0], "the correct waiting")
        then = send("forget", lambda: ada.forget(memory.id, "gone"))
        wait_for(lambda: watch.execute(waiting, (2,)).fetchone()[0], "the forget waiting")
        holder.rollback()
        first.join()
        then.join()
    assert not isinstance(answers["correct"], grpc.RpcError), answers["correct"]
    assert not isinstance(answers["forget"], grpc.RpcError), answers["forget"]
    history = dbutil.query(
        stack,
        team.database_name,
        "SELECT action, revision FROM memory_revision WHERE memory_id = %s ORDER BY id",
        (memory.id,),
    )
    assert history == [("create", 1), ("correct", 2), ("forget", 2)]


def test_a_retry_may_list_a_set_in_another_order(team: Team) -> None:
    """Purposes and `about` links are sets (stored as such, read back in an
    order of their own): a retry that lists them in another order, as one
    built from a set in another process does, is the same request and
    replays, as derive's sources already did."""
    ada = team.clients["ada"]
    # Supersede takes purposes as any field of its request (untyped here).
    supersede: Any = ada.supersede
    both, other_order = ["assist", "audit"], ["audit", "assist"]
    a = ada.remember("First", audience_to="workspace", purposes=both).memory
    b = ada.remember("Second", audience_to="workspace", purposes=both).memory
    old = ada.remember("Old", purposes=both).memory

    def twice(call: Callable[[str, list[str], list[str]], Any]) -> tuple[Any, Any]:
        rid = str(uuid.uuid4())
        return call(rid, both, [a.id, b.id]), call(rid, other_order, [b.id, a.id])

    answers = {
        "remember": twice(
            lambda rid, purposes, ids: ada.remember(
                "About both", purposes=purposes, about=ids, request_id=rid
            )
        ),
        "derive": twice(
            lambda rid, purposes, ids: ada.derive(
                ids, "From both", purposes=purposes, request_id=rid
            )
        ),
        "supersede": twice(
            lambda rid, purposes, ids: supersede(
                old.id, 1, "New", purposes=purposes, request_id=rid
            )
        ),
    }
    for tool, (first, again) in answers.items():
        assert again.replayed and again.memory.id == first.memory.id, tool
