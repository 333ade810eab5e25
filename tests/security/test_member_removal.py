"""Members who leave (design §10; issue 34): `admin remove-member` refuses the
member's tokens on the next call at every gateway (two here), erases their
private memories as forget does (text, claims and entities nothing else
names purged) or hands them to another member, keeps what they shared with
their attribution, and keeps each claim with the memory that states it; their
imported conversation history goes the way of their private memories. Bad
input is INVALID_ARGUMENT naming the field and changes nothing; the last
owner cannot be removed; a removed member can hold no new token; a hand-over
to a member removed meanwhile is refused and moves nothing."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import grpc
import psycopg
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from recallatron import errors
from recallatron.client import Client
from recallatron_cli.main import main
from recallatron_devkit.stack import Stack
from services.store.domain import member_removal
from services.store.domain.control import ControlPlane
from services.store.sql import leaving_queries as lq
from tests import dbutil
from tests.conftest import Team, wait_for
from tests.replicas import second_gateway as second_gateway  # the fixture

pytestmark = pytest.mark.integration


def error(call: Callable[[], Any]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value


def refused(client: Client, memory_id: str) -> bool:
    """True once a call is UNAUTHENTICATED; False while it works."""
    try:
        client.read([memory_id])
    except grpc.RpcError as exc:
        assert exc.code() == grpc.StatusCode.UNAUTHENTICATED, exc.details()
        return True
    return False


def shared_and_private(team: Team, tag: str) -> tuple[str, str, str]:
    """Bob's shared memory, and two private ones (one stating a claim about an
    entity nothing else names). Returns (shared, private, private_claim)."""
    bob = team.clients["bob"]
    shared = bob.remember(f"Shared {tag}", "Kept for the team", audience_to="workspace").memory
    private = bob.remember(f"Private {tag}", f"zqprivate{tag} only Bob knows").memory
    claim = bob.remember(
        f"Private claim {tag}",
        "Bob's note on a secret project",
        mention_names=[f"Zqproject {tag}"],
        claims=[
            {"entity": {"name": f"Zqproject {tag}"}, "attribute": "codename", "value": "zq" + tag}
        ],
    ).memory
    return shared.id, private.id, claim.id


def test_erase_refuses_tokens_at_every_gateway_and_leaves_no_private_text(
    stack: Stack, team: Team, second_gateway: str
) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    tag = uuid.uuid4().hex[:10]
    shared, private, claim = shared_and_private(team, tag)
    elsewhere = Client(second_gateway, bob.token)
    # Both gateways have bob's identity cached before he is removed.
    for client in (bob, elsewhere, bob, elsewhere):
        assert client.read([private]).memories[0].id == private
    done = ada.remove_member(team.members["bob"], "erase")
    assert (done.tokens_revoked, done.memories_erased, done.memories_kept) == (1, 2, 1)
    # This gateway on the next call; the other as soon as the store's stream
    # tells it (a generous limit: nothing here is a timing check).
    assert refused(bob, shared)
    wait_for(lambda: refused(elsewhere, shared), "the other gateway refusing bob", 30)
    # What he shared stays, still his; what only he could see is a tombstone.
    kept = ada.read([shared]).memories[0]
    assert kept.created_by == team.members["bob"] and kept.title == f"Shared {tag}"
    rows = dbutil.query(
        stack,
        team.database_name,
        "SELECT title, body, invalidated_at IS NOT NULL, invalidation_reason FROM memory"
        " WHERE id = ANY(%s::uuid[]) ORDER BY title",
        ([private, claim],),
    )
    assert rows == [("", "", True, "member removed")] * 2
    # The claim went with its memory, and the entity nothing else names.
    dump = dbutil.pg_dump(stack, team.database_name)
    for text in (f"zqprivate{tag}", f"Zqproject {tag}", "zq" + tag, f"Private {tag}"):
        assert text not in dump
    assert ada.lookup(f"Zqproject {tag}").entities == []
    elsewhere.close()


def test_transfer_hands_private_memories_and_their_claims_to_another_member(
    stack: Stack, team: Team
) -> None:
    ada, bob, cy = team.clients["ada"], team.clients["bob"], team.clients["cy"]
    tag = uuid.uuid4().hex[:10]
    shared, private, claim = shared_and_private(team, tag)
    # Found by its words and its entity before: bob's alone.
    assert error(lambda: cy.read([private])).code() == grpc.StatusCode.NOT_FOUND
    assert cy.lookup(f"Zqproject {tag}").entities == []
    done = ada.remove_member(team.members["bob"], "transfer", transfer_to=team.members["cy"])
    assert (done.memories_transferred, done.memories_erased, done.memories_kept) == (2, 0, 1)
    assert refused(bob, shared)
    got = {m.id: m for m in cy.read([private, claim, shared]).memories}
    assert got[private].audience.member_id == team.members["cy"]
    # Attribution stays: bob wrote it.
    assert got[private].created_by == team.members["bob"]
    # The claim follows the memory that states it.
    cards = cy.lookup(f"Zqproject {tag}").entities
    assert [c.attributes[0].value for c in cards] == ["zq" + tag]
    # Recall finds it for its new reader, by its words.
    found = cy.recall(f"zqprivate{tag}", mode="lexical").outcome.results
    assert private in [r.memory.id for r in found]
    # Ada (an owner, not the receiver) still may not see it.
    assert error(lambda: ada.read([private])).code() == grpc.StatusCode.NOT_FOUND


def test_transfer_hands_over_their_vectors_for_the_receivers_dense_recall(
    stack: Stack, team: Team
) -> None:
    bob, cy = team.members["bob"], team.members["cy"]
    writer = team.clients["bob"]
    ids = [writer.remember(f"Harbour note {i}", "the tides").memory.id for i in range(3)]

    def vectors() -> list[tuple[object, ...]]:
        return dbutil.query(
            stack,
            team.database_name,
            "SELECT audience_member_id::text, count(*) FROM memory_embedding GROUP BY 1",
        )

    wait_for(lambda: vectors() == [(bob, 3)], "bob's memories embedded", 120)
    done = team.clients["ada"].remove_member(bob, "transfer", transfer_to=cy)
    assert done.memories_transferred == 3
    # Every vector's copy of the audience is the receiver's; their dense arm finds them.
    assert vectors() == [(cy, 3)]
    found = team.clients["cy"].recall("harbour tides", mode="dense").outcome
    assert not found.dense_unavailable_reason
    assert set(ids) <= {r.memory.id for r in found.results}


def test_bad_input_names_the_field_and_changes_nothing(
    stack: Stack, operator: Client, team: Team
) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    memory = bob.remember("still bob's").memory.id
    before = dbutil.checksum(stack, team.database_name)
    cases = [
        (lambda: operator.remove_member("not-a-uuid", "erase"), "member_id"),
        (lambda: operator.remove_member(team.members["bob"], "transfer"), "transfer_to"),
        (
            lambda: operator.remove_member(team.members["bob"], "transfer", "nope"),
            "transfer_to",
        ),
        (
            lambda: operator.remove_member(team.members["bob"], "transfer", team.members["bob"]),
            "transfer_to",
        ),
        (
            lambda: operator.remove_member(team.members["bob"], "transfer", str(uuid.uuid4())),
            "transfer_to",
        ),
        (
            lambda: operator.remove_member(team.members["bob"], "erase", team.members["cy"]),
            "transfer_to",
        ),
        (lambda: ada.remove_member(team.members["ada"], "erase"), "member_id"),
    ]
    for call, field in cases:
        exc = error(call)
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (field, exc.details())
        assert field in str(exc.details()), exc.details()
    # No choice made for the private memories.
    from recallatron.v1 import gateway_pb2 as pb

    exc = error(
        lambda: operator.call(
            operator.admin.RemoveMember,
            pb.AdminServiceRemoveMemberRequest(member_id=team.members["bob"]),
        )
    )
    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "private_memories" in str(exc.details())
    # Members may not remove anyone.
    assert (
        error(lambda: bob.remove_member(team.members["cy"], "erase")).code()
        == grpc.StatusCode.PERMISSION_DENIED
    )
    # The last owner stays.
    exc = error(lambda: operator.remove_member(team.members["ada"], "erase"))
    assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION and "owner" in str(exc.details())
    assert dbutil.checksum(stack, team.database_name) == before
    assert bob.read([memory]).memories[0].id == memory


def test_a_removed_member_holds_no_new_token_and_the_cli_says_so(
    stack: Stack, operator: Client, team: Team, capsys: pytest.CaptureFixture[str]
) -> None:
    bob_id = team.members["bob"]
    common = ["--gateway", stack.gateway, "--token", stack.admin_token]
    assert main(["admin", *common, "remove-member", bob_id, "--private-memories", "erase",
                 "--json"]) == 0  # fmt: skip
    answer = json.loads(capsys.readouterr().out)
    assert answer["member_id"] == bob_id and answer["tokens_revoked"] == "1"
    exc = error(lambda: operator.create_token(bob_id, "again"))
    assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION and "removed" in str(exc.details())
    # Removing again finishes nothing new and says so.
    again = operator.remove_member(bob_id, "erase")
    assert (again.tokens_revoked, again.memories_erased) == (0, 0)
    # A bad choice is refused before anything is sent, naming the field.
    with pytest.raises(SystemExit) as stop:
        main(["admin", *common, "remove-member", team.members["cy"], "--private-memories",
              "keep"])  # fmt: skip
    assert stop.value.code == 2
    assert "private_memories" in capsys.readouterr().err
    # The audit log names who removed whom.
    events = team.clients["ada"].audit_events(actions=["remove_member"]).events
    # (twice: the second removal is an operator's action too).
    assert [(e.member_handle, json.loads(e.detail_json)["removed_member_id"]) for e in events] == [
        ("operator", bob_id)
    ] * 2
    # With the answer's counts, the tokens it refused too (newest first): the
    # log records no revoke_token for them, and it said nothing of them.
    assert [json.loads(e.detail_json)["tokens_revoked"] for e in events] == [0, 1]


def test_an_owner_cannot_remove_themselves_by_any_spelling_of_their_id(
    operator: Client, team: Team
) -> None:
    ada = team.clients["ada"]
    operator.create_member(team.workspace_id, "eve", owner=True)
    own = team.members["ada"]
    for spelling in (own.upper(), uuid.UUID(own).hex, "{" + own + "}"):
        exc = error(partial(ada.remove_member, spelling, "erase"))
        assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (spelling, exc.details())
        assert "member_id" in str(exc.details())
    assert ada.read([ada.remember("ada is still here").memory.id]).memories


# Old conversation turns, as the migration from the old store writes them.
IMPORT_HISTORY = """
INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)
SELECT gen_random_uuid(), %s, 'chat-1', 'user', t, now() - make_interval(secs => n)
FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n)
"""


def import_history(stack: Stack, team: Team, handle: str, texts: list[str]) -> None:
    with psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as conn:
        conn.execute(IMPORT_HISTORY, (team.members[handle], texts))


def history_of(stack: Stack, team: Team, member: str) -> list[tuple[Any, ...]]:
    return dbutil.query(
        stack,
        team.database_name,
        "SELECT id::text, chat_id, role, text, occurred_at FROM history_entry"
        " WHERE owner_member_id = %s ORDER BY occurred_at",
        (member,),
    )


def history_stats_of(stack: Stack, team: Team, member: str) -> list[tuple[Any, ...]]:
    return dbutil.query(
        stack,
        team.database_name,
        "SELECT (SELECT count(*) FROM history_term_stat WHERE owner_member_id = %s),"
        " (SELECT count(*) FROM history_corpus_stat WHERE owner_member_id = %s)",
        (member, member),
    )


def test_erase_takes_their_imported_history_with_their_private_memories(
    stack: Stack, team: Team
) -> None:
    ada, bob = team.clients["ada"], team.members["bob"]
    tag = uuid.uuid4().hex[:10]
    import_history(stack, team, "bob", [f"zqturn{tag} zqsecret{tag}", f"Bob asked zqask{tag}"])
    import_history(stack, team, "ada", [f"zqturn{tag} Ada's own turn"])
    ada.remove_member(bob, "erase")
    assert history_of(stack, team, bob) == []
    assert history_stats_of(stack, team, bob) == [(0, 0)]
    # The text is gone from the database: rows, search vectors, term statistics.
    dump = dbutil.pg_dump(stack, team.database_name)
    for text in (f"zqsecret{tag}", f"zqask{tag}", "Bob asked"):
        assert text not in dump
    # Another member's history stays, and is still found.
    found = ada.recall(f"zqturn{tag}", include_history=True).outcome.history
    assert [h.text for h in found] == [f"zqturn{tag} Ada's own turn"]
    detail = json.loads(ada.audit_events(actions=["remove_member"]).events[-1].detail_json)
    assert detail["history_erased"] == 2


def test_transfer_hands_their_imported_history_to_the_receiver(stack: Stack, team: Team) -> None:
    ada, bob = team.clients["ada"], team.members["bob"]
    tag = uuid.uuid4().hex[:10]
    import_history(stack, team, "bob", [f"zqturn{tag} the vendor shortlist", f"zqturn{tag} two"])
    before = history_of(stack, team, bob)
    ada.remove_member(bob, "transfer", transfer_to=team.members["ada"])
    assert history_of(stack, team, bob) == [] and history_stats_of(stack, team, bob) == [(0, 0)]
    # The same turns, as they were said, now the receiver's: found by her words.
    assert history_of(stack, team, team.members["ada"]) == before
    found = ada.recall(f"zqturn{tag}", include_history=True).outcome.history
    assert sorted(h.id for h in found) == sorted(r[0] for r in before)
    detail = json.loads(ada.audit_events(actions=["remove_member"]).events[-1].detail_json)
    assert detail["history_transferred"] == 2


def waiting_for(watch: psycopg.Connection[Any], holder: psycopg.Connection[Any]) -> int:
    """How many sessions wait for a lock ``holder`` holds."""
    row = watch.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
        (holder.info.backend_pid,),
    ).fetchone()
    return int(row[0]) if row else 0


def lock_waits(watch: psycopg.Connection[Any]) -> int:
    """How many sessions of ``watch``'s database wait for a lock."""
    row = watch.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock'"
    ).fetchone()
    return int(row[0]) if row else 0


def bobs_private_memory_and_history(stack: Stack, team: Team, tag: str) -> str:
    import_history(stack, team, "bob", [f"zqturn{tag} for Bob alone"])
    return team.clients["bob"].remember(f"Private {tag}", f"zqprivate{tag}").memory.id


def assert_refused_and_nothing_moved(
    stack: Stack, team: Team, outcome: list[Any], private: str, tag: str
) -> None:
    cy = team.members["cy"]
    assert len(outcome) == 1 and isinstance(outcome[0], grpc.RpcError), outcome
    exc = outcome[0]
    assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, exc.details()
    assert "transfer_to" in str(exc.details()) and cy in str(exc.details())
    status = rpc_status.from_call(exc)
    assert status is not None
    failure = error_details_pb2.PreconditionFailure()
    assert any(d.Unpack(failure) for d in status.details)
    assert [v.type for v in failure.violations] == ["RECEIVER_REMOVED"]
    assert_nothing_moved(stack, team, private, tag)


def assert_nothing_moved(stack: Stack, team: Team, private: str, tag: str) -> None:
    bob, cy = team.members["bob"], team.members["cy"]
    # Nothing of bob's went to cy, who left.
    live_for_cy = dbutil.query(
        stack,
        team.database_name,
        "SELECT title FROM memory WHERE audience_member_id = %s AND invalidated_at IS NULL",
        (cy,),
    )
    assert live_for_cy == []
    assert history_of(stack, team, cy) == []
    # Bob's private memory and history are as they were, still his; removing
    # him again (erase) finishes what was left.
    kept = dbutil.query(
        stack,
        team.database_name,
        "SELECT audience_member_id::text, title FROM memory WHERE id = %s",
        (private,),
    )
    assert kept == [(bob, f"Private {tag}")]
    assert [r[3] for r in history_of(stack, team, bob)] == [f"zqturn{tag} for Bob alone"]
    # (Bob's own removal stays: his tokens were revoked before the hand-over.)
    again = team.clients["ada"].remove_member(bob, "erase")
    assert (again.tokens_revoked, again.memories_erased) == (0, 1)
    assert history_of(stack, team, bob) == []


@dataclass
class HandOver:
    """Bob's removal handing his private memory and history to cy, under way in
    a thread of its own and waiting for a write lock held in ``holder``."""

    tag: str
    private: str
    outcome: list[Any]
    holder: psycopg.Connection[Any]
    watch: psycopg.Connection[Any]


@contextmanager
def hand_over_waiting(stack: Stack, operator: Client, team: Team, held: str) -> Iterator[HandOver]:
    """Bob removed with his private memory and history handed to cy, the
    hand-over held at ``held``'s write lock (taken here as a write for them
    takes it) while the body runs; then the lock is let go and the hand-over
    finishes (its answer or error in ``outcome``)."""
    bob, cy = team.members["bob"], team.members["cy"]
    tag = uuid.uuid4().hex[:10]
    private = bobs_private_memory_and_history(stack, team, tag)
    outcome: list[Any] = []

    def hand_over() -> None:
        try:
            outcome.append(operator.remove_member(bob, "transfer", transfer_to=cy))
        except grpc.RpcError as exc:
            outcome.append(exc)

    url = dbutil.workspace_url(stack, team.database_name)
    with psycopg.connect(url) as holder, psycopg.connect(url, autocommit=True) as watch:
        holder.execute(lq.HOLD_MEMBER_ALONE, {"member": team.members[held]})
        handing = threading.Thread(target=hand_over)
        handing.start()
        wait_for(lambda: waiting_for(watch, holder) == 1, f"the hand-over waiting for {held}", 60)
        yield HandOver(tag, private, outcome, holder, watch)
        holder.rollback()
        handing.join(timeout=120)
    assert not handing.is_alive()


def test_a_hand_over_to_a_member_removed_after_its_check_is_refused_and_moves_nothing(
    stack: Stack, operator: Client, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The receiver is checked, then removed wholly (erase) by another call,
    then the hand-over reaches the workspace: it was handed to them after
    their erase. Bob's removal runs in this process (a store replica's code),
    stopped between its control plane's step and the workspace's (removals of
    a workspace take turns there, so Cy's cannot run while Bob's waits within
    it)."""
    tag = uuid.uuid4().hex[:10]
    private = bobs_private_memory_and_history(stack, team, tag)
    real = member_removal.MemberRemoval._workspace_step

    def after_cys_removal(removal: member_removal.MemberRemoval, *args: Any) -> Any:
        operator.remove_member(team.members["cy"], "erase")
        return real(removal, *args)

    monkeypatch.setattr(member_removal.MemberRemoval, "_workspace_step", after_cys_removal)
    with dbutil.store_databases(stack) as dbs:
        removal = member_removal.MemberRemoval(dbs, ControlPlane(dbs))
        with pytest.raises(errors.FailedPrecondition) as refusal:
            removal.remove(team.members["bob"], "transfer", team.members["cy"])
    assert (refusal.value.subject, refusal.value.reason) == ("transfer_to", "RECEIVER_REMOVED")
    assert team.members["cy"] in str(refusal.value)
    assert_nothing_moved(stack, team, private, tag)


def test_a_receiver_removed_while_a_hand_over_waits_for_them_refuses_it(
    stack: Stack, operator: Client, team: Team
) -> None:
    """The hand-over takes the receiver's write lock before it hands
    anything over; the receiver's removal, under way meanwhile, is seen."""
    removed: list[Any] = []
    with hand_over_waiting(stack, operator, team, "cy") as waiting:
        leaving = threading.Thread(
            target=lambda: removed.append(operator.remove_member(team.members["cy"], "erase"))
        )
        leaving.start()
        # Cy's removal has passed the control plane and waits for its turn in
        # the workspace, which the hand-over holds.
        wait_for(lambda: lock_waits(waiting.watch) == 2, "cy's removal waiting too", 60)
    leaving.join(timeout=120)
    assert not leaving.is_alive()
    assert len(removed) == 1
    assert_refused_and_nothing_moved(stack, team, waiting.outcome, waiting.private, waiting.tag)
