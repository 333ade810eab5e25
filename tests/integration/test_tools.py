"""The six non-recall tools against real Postgres through the gateway:
derivation, compare-and-set, supersession, forget, idempotency, provenance,
write-once links, audit."""

from __future__ import annotations

import threading
import uuid

import grpc
import psycopg
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import gateway_pb2 as pb
from services.store.domain.erasure import request_key
from tests import dbutil
from tests.conftest import Team, make_team, wait_for

pytestmark = pytest.mark.integration

KIND_SUMMARY = 4


def rpc_error(fn) -> grpc.RpcError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as err:
        fn()
    return err.value


def test_derive_intersects_audience_and_purposes(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    shared = ada.remember(
        "Release train leaves Friday", audience_to="workspace", purposes=["assist", "audit"]
    ).memory
    private = ada.remember("Ada prefers async reviews", purposes=["assist", "personalize"]).memory
    derived = ada.derive([shared.id, private.id], "Ada reviews the Friday release async").memory
    # workspace ∩ ada = ada; {assist, audit} ∩ {assist, personalize} = {assist}
    assert derived.audience.member_id == team.members["ada"]
    assert list(derived.purposes) == [1]
    assert derived.origin == 2 and derived.kind == KIND_SUMMARY
    assert {link.target.id for link in derived.links} == {shared.id, private.id}
    # Bob may see the shared source but not the derivation.
    assert rpc_error(lambda: bob.read([derived.id])).code() == grpc.StatusCode.NOT_FOUND


def test_derive_from_sources_the_caller_cannot_see_is_not_found(stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    """Deriving needs eligibility for every source. (Because of that, the
    sources a caller may derive from always share the caller's purpose and
    audience, so the empty-intersection refusal is proven on the rule itself
    in tests/unit/test_trust.py.)"""
    ada = team.clients["ada"]
    visible = ada.remember("Uses vim", audience_to="workspace", purposes=["assist"]).memory
    audit_only = ada.remember(
        "Deploys on Tuesdays", audience_to="workspace", purposes=["audit"]
    ).memory
    for_bob = ada.remember("For bob's eyes", audience_to=team.members["bob"]).memory
    before = dbutil.checksum(stack, team.database_name)
    for hidden in (audit_only.id, for_bob.id, str(uuid.uuid4())):
        err = rpc_error(lambda h=hidden: ada.derive([visible.id, h], "mixed"))
        assert err.code() == grpc.StatusCode.NOT_FOUND
        assert hidden not in err.details()
    assert dbutil.checksum(stack, team.database_name) == before


def test_derive_narrowing_allowed_widening_refused(stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    ada = team.clients["ada"]
    src = ada.remember("team fact", audience_to="workspace", purposes=["assist", "audit"]).memory
    narrowed = ada.derive(
        [src.id], "narrow", audience_to=team.members["bob"], purposes=["audit"]
    ).memory
    assert narrowed.audience.member_id == team.members["bob"]
    assert list(narrowed.purposes) == [4]
    private = ada.remember("private", purposes=["assist"]).memory
    before = dbutil.checksum(stack, team.database_name)
    err = rpc_error(lambda: ada.derive([private.id], "widen", audience_to="workspace"))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "audience" in err.details()
    err = rpc_error(lambda: ada.derive([private.id], "widen", purposes=["assist", "audit"]))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "purposes" in err.details()
    assert dbutil.checksum(stack, team.database_name) == before


def _race(n: int, fn) -> list[object]:  # type: ignore[no-untyped-def]
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fn(i)
        except grpc.RpcError as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def _current_revision(err: grpc.RpcError) -> int:
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return int(info.metadata["current_revision"])
    raise AssertionError("no ErrorInfo in ABORTED status")


def test_twenty_concurrent_corrects_one_wins(stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    ada = team.clients["ada"]
    m = ada.remember("Budget is 10k", audience_to="workspace").memory
    clients = [Client(stack.gateway, ada.token) for _ in range(20)]
    results = _race(20, lambda i: clients[i].correct(m.id, 1, f"update {i}", body=f"v{i}"))
    wins = [r for r in results if not isinstance(r, grpc.RpcError)]
    losses = [r for r in results if isinstance(r, grpc.RpcError)]
    assert len(wins) == 1 and len(losses) == 19
    assert all(e.code() == grpc.StatusCode.ABORTED for e in losses)
    assert all(_current_revision(e) == 2 for e in losses)
    assert ada.read([m.id]).memories[0].revision == 2
    for c in clients:
        c.close()


def test_twenty_concurrent_supersedes_one_wins(stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    ada = team.clients["ada"]
    m = ada.remember("Office is in Lyon", audience_to="workspace").memory
    clients = [Client(stack.gateway, ada.token) for _ in range(20)]
    results = _race(20, lambda i: clients[i].supersede(m.id, 1, f"Office moved {i}"))
    wins = [r for r in results if not isinstance(r, grpc.RpcError)]
    losses = [r for r in results if isinstance(r, grpc.RpcError)]
    assert len(wins) == 1 and len(losses) == 19
    # Losers lost the compare-and-set (ABORTED: the revision moved on while
    # they ran) or began once it was superseded (FAILED_PRECONDITION): never
    # a second successor.
    assert all(
        e.code() in (grpc.StatusCode.ABORTED, grpc.StatusCode.FAILED_PRECONDITION) for e in losses
    )
    old = ada.read([m.id]).memories[0]
    assert old.superseded_by_id == wins[0].memory.id  # type: ignore[attr-defined]
    # Asked of its current revision, a superseded memory refuses to change.
    again = rpc_error(lambda: ada.supersede(m.id, old.revision, "Office moved again"))
    assert again.code() == grpc.StatusCode.FAILED_PRECONDITION, again.details()
    rows = dbutil.query(
        stack, team.database_name, "SELECT count(*) FROM memory WHERE title LIKE 'Office moved%%'"
    )
    assert rows[0][0] == 1  # the losers' replacements were rolled back
    for c in clients:
        c.close()


def test_superseded_or_forgotten_cannot_change_again(team: Team) -> None:
    ada = team.clients["ada"]
    m = ada.remember("v1", audience_to="workspace").memory
    new = ada.supersede(m.id, 1, "v2", reason="newer")
    assert new.superseded.superseded_by_id == new.memory.id
    assert new.superseded.revision == 2
    err = rpc_error(lambda: ada.correct(m.id, 2, "late", body="x"))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    err = rpc_error(lambda: ada.supersede(m.id, 2, "v3"))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION
    f = ada.remember("to forget", audience_to="workspace").memory
    ada.forget(f.id, "asked to")
    assert rpc_error(lambda: ada.correct(f.id, 1, "x", body="y")).code() == (
        grpc.StatusCode.NOT_FOUND
    )
    assert rpc_error(lambda: ada.supersede(f.id, 1, "y")).code() == grpc.StatusCode.NOT_FOUND
    assert rpc_error(lambda: ada.forget(f.id, "again")).code() == grpc.StatusCode.NOT_FOUND


def test_a_memory_whose_successor_is_forgotten_is_current_again(stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    """Forgetting the memory that replaced another leaves that one reading as
    current (no successor, recalled as current): it must also change as a
    current memory does and be embedded again, not refuse every correct and
    supersede as superseded by a successor nobody can see."""
    ada = team.clients["ada"]
    old = ada.remember("Office in Lyon", audience_to="workspace").memory
    new = ada.supersede(old.id, 1, "Office in Paris", reason="moved").memory
    ada.forget(new.id, "it never moved")
    current = ada.read([old.id]).memories[0]
    assert current.superseded_by_id == "" and current.revision == 2
    corrected = ada.correct(old.id, 2, "the street too", body="Rue de la Paix").memory
    assert corrected.revision == 3 and corrected.body == "Rue de la Paix"
    wait_for(
        lambda: dbutil.query(
            stack,
            team.database_name,
            "SELECT count(*) FROM memory_embedding WHERE memory_id = %s",
            (old.id,),
        )[0][0],
        "the memory embedded again",
    )
    again = ada.supersede(old.id, 3, "Office in Lyon, Rue de la Paix").memory
    assert ada.read([old.id]).memories[0].superseded_by_id == again.id


def test_a_successor_stays_in_the_episode_of_the_memory_it_replaces(team: Team) -> None:
    """Supersede keeps the old memory's audience, purposes and claims, and
    left its episode behind: the trip's hotel superseded, the trip listed no
    memory at all (the old one superseded, the new one in no episode), and
    supersede has no field to say otherwise. The successor is filed where
    the old one was, when its writer may see that episode (as remember
    asks); a caller who may not is answered no episode, as a read gives."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    trip = ada.create_episode(
        "Trip to Rome", "2026-05-04T09:00:00Z", audience_to="workspace"
    ).episode_id
    hotel = ada.remember("Hotel booked", "Albergo Roma", audience_to="workspace", episode_id=trip)
    moved = ada.supersede(hotel.memory.id, 1, "Hotel booked", "Albergo Milano").memory
    assert moved.episode_id == trip
    listed = ada.call(ada.memory.ListMemories, pb.ListMemoriesRequest(episode_id=trip))
    assert [m.id for m in listed.memories] == [moved.id]
    # Ada's own episode, which Bob may not see, holding a memory she wrote for him.
    own = ada.create_episode("Ada's notes", "2026-05-04T09:00:00Z").episode_id
    for_bob = ada.remember("For Bob", "v1", audience_to=team.members["bob"], episode_id=own)
    (as_bob_reads,) = bob.read([for_bob.memory.id]).memories
    assert as_bob_reads.episode_id == ""
    successor = bob.supersede(for_bob.memory.id, 1, "For Bob", "v2").memory
    assert successor.episode_id == ""


def test_read_shows_provenance(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    base = ada.remember("Kickoff notes", audience_to="workspace", mention_names=["Atlas"]).memory
    entity = base.mentions[0].entity_id
    private = ada.remember("Ada's private aside").memory
    about = ada.remember(
        "Follow-up on kickoff", audience_to="workspace", about=[base.id], mention_ids=[entity]
    ).memory
    derived = ada.derive([base.id, private.id], "Summary", audience_to=team.members["ada"]).memory
    v2 = ada.supersede(about.id, 1, "Follow-up, revised").memory
    v3 = ada.supersede(v2.id, 1, "Follow-up, final").memory

    got = ada.read([about.id, derived.id, v3.id]).memories
    by_id = {m.id: m for m in got}
    a = by_id[about.id]
    assert [(link.kind, link.target.id, link.target.title) for link in a.links] == [
        (2, base.id, "Kickoff notes")
    ]
    assert [m.entity_id for m in a.mentions] == [entity]  # same entity, not merged by name
    assert [r.id for r in a.superseded_by] == [v2.id, v3.id]
    assert [r.id for r in by_id[v3.id].supersedes] == [v2.id, about.id]
    assert {link.target.title for link in by_id[derived.id].links} == {
        "Kickoff notes",
        "Ada's private aside",
    }
    # Bob sees the follow-up but not the private source's title or id.
    bob_view = bob.read([about.id]).memories[0]
    assert bob_view.links[0].target.title == "Kickoff notes"
    bob.remember("bob's", audience_to="workspace")
    d2 = ada.derive([base.id], "shared summary", audience_to="workspace").memory
    assert bob.read([d2.id]).memories[0].links[0].target.visible


def test_hidden_link_targets_stay_anonymous(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    secret = ada.remember("Salary bands draft", audience_to="workspace", purposes=["audit"]).memory
    note = ada.remember(
        "About the bands", audience_to="workspace", about=[secret.id], purpose="audit"
    ).memory
    link = bob.read([note.id]).memories[0].links[0]
    assert not link.target.visible and link.target.id == "" and link.target.title == ""


def test_same_request_id_after_success_returns_the_first(stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    ada = team.clients["ada"]
    rid = str(uuid.uuid4())
    first = ada.remember("Retry me", "body", request_id=rid)
    again = ada.remember("Retry me", "body", request_id=rid)
    assert not first.replayed and again.replayed
    assert again.memory.id == first.memory.id
    rows = dbutil.query(
        stack, team.database_name, "SELECT count(*) FROM memory WHERE title = 'Retry me'"
    )
    assert rows[0][0] == 1
    # A different tool with a used id is refused, not confused.
    err = rpc_error(lambda: ada.forget(first.memory.id, "x", request_id=rid))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "request_id" in err.details()
    # Concurrent duplicates: one memory.
    rid2 = str(uuid.uuid4())
    results = _race(8, lambda i: ada.remember("Concurrent retry", request_id=rid2))
    ids = {r.memory.id for r in results}  # type: ignore[attr-defined]
    assert len(ids) == 1


def test_links_are_write_once_in_the_database(stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    ada = team.clients["ada"]
    a = ada.remember("a", audience_to="workspace").memory
    b = ada.remember("b", audience_to="workspace", about=[a.id]).memory
    c = ada.remember("c", audience_to="workspace").memory
    admin_url = dbutil.workspace_url(stack, team.database_name)
    with psycopg.connect(admin_url) as conn:
        with pytest.raises(psycopg.Error, match="write-once"):
            conn.execute("UPDATE memory_link SET target_id = %s WHERE memory_id = %s", (c.id, b.id))
        conn.rollback()
        with pytest.raises(psycopg.Error, match="write-once"):
            conn.execute("DELETE FROM memory_link WHERE memory_id = %s", (b.id,))
        conn.rollback()
    # As the app role, even a new link on an existing memory is refused.
    app_url = dbutil.workspace_url(stack, team.database_name).replace(
        "user=postgres", "user=recallatron_app"
    )
    with psycopg.connect(app_url) as conn:
        conn.execute(
            "SELECT set_config('recallatron.member_id', %s, false),"
            " set_config('recallatron.purpose', 'assist', false)",
            (team.members["ada"],),
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("INSERT INTO memory_link VALUES (%s, 'about', %s)", (c.id, a.id))
        conn.rollback()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM memory_link WHERE memory_id = %s", (b.id,))


def test_forget_leaves_no_trace_of_the_text(stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    import time

    ada, bob = team.clients["ada"], team.clients["bob"]
    title = f"Zanzibar-{uuid.uuid4().hex[:10]}"
    body = f"The vault code is {uuid.uuid4().hex}"
    m = ada.remember(title, body, audience_to="workspace", mention_names=["vault"]).memory
    child = ada.derive([m.id], "Derived from the vault note", audience_to="workspace").memory
    ada.correct(m.id, 1, "typo", body=body + " (checked)")
    # Let the embedding job write a vector, so there is one to purge.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = dbutil.query(
            stack,
            team.database_name,
            "SELECT count(*) FROM memory_embedding WHERE memory_id = %s",
            (m.id,),
        )
        if rows[0][0]:
            break
        time.sleep(0.2)
    assert rows[0][0] == 1
    assert title in dbutil.pg_dump(stack, team.database_name)
    forgotten = ada.forget(m.id, "asked by the owner")
    assert forgotten.id == m.id
    dump = dbutil.pg_dump(stack, team.database_name)
    assert title not in dump
    assert body not in dump
    assert body.split()[-1] not in dump
    # The tombstone stays: id, kind, times, reason, who.
    row = dbutil.query(
        stack,
        team.database_name,
        "SELECT title, body, invalidation_reason, invalidated_by, invalidated_at IS NOT NULL,"
        " (SELECT count(*) FROM memory_embedding WHERE memory_id = m.id)"
        " FROM memory m WHERE id = %s",
        (m.id,),
    )[0]
    assert row[:2] == ("", "") and row[2] == "asked by the owner"
    assert str(row[3]) == team.members["ada"] and row[4] and row[5] == 0
    # Read of the id by anyone: not found, exactly like an unknown id.
    for c in (ada, bob):
        e1 = rpc_error(lambda c=c: c.read([m.id]))
        e2 = rpc_error(lambda c=c: c.read([str(uuid.uuid4())]))
        assert e1.code() == e2.code() == grpc.StatusCode.NOT_FOUND
    # The link from the derived memory stays valid but shows nothing.
    link = ada.read([child.id]).memories[0].links[0]
    assert not link.target.visible and link.target.title == ""


def test_writes_leave_an_audit_trail(stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    ada = team.clients["ada"]
    rid = str(uuid.uuid4())
    m = ada.remember("audited", audience_to="workspace", request_id=rid).memory
    ada.correct(m.id, 1, "fix", title="audited!")
    ada.forget(m.id, "done")
    rows = dbutil.query(
        stack,
        team.database_name,
        "SELECT action, member_id::text, request_id FROM audit_log"
        " WHERE memory_id = %s ORDER BY id",
        (m.id,),
    )
    assert [r[0] for r in rows] == ["remember", "correct", "forget"]
    assert {r[1] for r in rows} == {team.members["ada"]}
    # The request id as its hash only (design §8.6).
    assert rows[0][2] == request_key(team.members["ada"], rid) != rid


def test_two_workspaces_share_nothing(stack, operator) -> None:  # type: ignore[no-untyped-def]
    one = make_team(stack, operator, ("ada", "bob"))
    two = make_team(stack, operator, ("ada", "bob"))
    m = one.clients["ada"].remember("Workspace one only", audience_to="workspace").memory
    for client in two.clients.values():
        assert rpc_error(lambda c=client: c.read([m.id])).code() == grpc.StatusCode.NOT_FOUND
        err = rpc_error(lambda c=client: c.derive([m.id], "steal"))
        assert err.code() == grpc.StatusCode.NOT_FOUND
        err = rpc_error(lambda c=client: c.correct(m.id, 1, "x", body="y"))
        assert err.code() == grpc.StatusCode.NOT_FOUND
        err = rpc_error(lambda c=client: c.forget(m.id, "x"))
        assert err.code() == grpc.StatusCode.NOT_FOUND
        err = rpc_error(lambda c=client: c.remember("x", about=[m.id]))
        assert err.code() == grpc.StatusCode.NOT_FOUND
    # Owner calls stay within their workspace too.
    err = rpc_error(lambda: two.clients["ada"].create_token(one.members["bob"]))
    assert err.code() == grpc.StatusCode.NOT_FOUND


def test_remember_defaults_and_entities_never_merged(team: Team) -> None:
    ada = team.clients["ada"]
    first = ada.remember("Met Sam at the fair", mention_names=["Sam"]).memory
    # Default audience: only the caller; default purposes: {assist}; origin told.
    assert first.audience.member_id == team.members["ada"]
    assert list(first.purposes) == [1]
    assert first.origin == 1 and first.revision == 1 and first.confidence == 1.0
    second = ada.remember("Sam sent the invoice", mention_names=["Sam"]).memory
    # Two mentions by the same name are two entities: names are never merged.
    assert first.mentions[0].name == second.mentions[0].name == "Sam"
    assert first.mentions[0].entity_id != second.mentions[0].entity_id
    # Mentioning by id links to that very entity.
    third = ada.remember("Sam paid", mention_ids=[first.mentions[0].entity_id]).memory
    assert third.mentions[0].entity_id == first.mentions[0].entity_id


def test_superseded_memories_leave_recall_unless_asked(team: Team) -> None:
    ada = team.clients["ada"]
    old = ada.remember("Quokka offsite in Perth", audience_to="workspace").memory
    new = ada.supersede(old.id, 1, "Quokka offsite moved to Fremantle").memory
    plain = {r.memory.id for r in ada.recall("quokka offsite", mode="lexical").outcome.results}
    assert new.id in plain and old.id not in plain
    asked = ada.recall("quokka offsite", mode="lexical", include_superseded=True).outcome
    assert {old.id, new.id} <= {r.memory.id for r in asked.results}
    # The superseded memory stays readable, pointing at its successor.
    assert ada.read([old.id]).memories[0].superseded_by_id == new.id


def test_read_takes_any_spelling_of_an_id(team: Team) -> None:
    ada = team.clients["ada"]
    memory = ada.remember("Spelled any way", "The id in capitals reads the same.").memory
    spellings = [memory.id.upper(), uuid.UUID(memory.id).hex, "{" + memory.id + "}"]
    for spelling in spellings:
        assert [m.id for m in ada.read([spelling]).memories] == [memory.id], spelling


def test_an_audience_takes_any_spelling_of_its_member_id(team: Team) -> None:
    """An audience names its member by any spelling of a UUID, as every id
    does: each write then holds the member's id as any other write would."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    ada_id, bob_id = team.members["ada"], team.members["bob"]
    urn = "urn:uuid:" + bob_id
    for_bob = ada.remember("For Bob, spelled as a URN", audience_to=urn).memory
    assert for_bob.audience.member_id == bob_id
    assert bob.read([for_bob.id]).memories[0].id == for_bob.id
    # Derived from Ada's own memory for Ada again: the same audience, not a
    # wider one, however her id is spelled.
    private = ada.remember("Ada's own").memory
    for spelling in (ada_id.upper(), "urn:uuid:" + ada_id):
        derived = ada.derive([private.id], "Ada's own, derived", audience_to=spelling).memory
        assert derived.audience.member_id == ada_id, spelling
    shared = ada.remember("For everyone", audience_to="workspace").memory
    successor = ada.call(
        ada.memory.Supersede,
        pb.SupersedeRequest(
            request_id=str(uuid.uuid4()),
            id=shared.id,
            expected_revision=1,
            kind=cpb.KIND_NOTE,
            title="For Bob now",
            reason="narrowed",
            audience=cpb.Audience(member_id=urn),
        ),
    )
    assert successor.memory.audience.member_id == bob_id
    episode = ada.create_episode("Bob's standup", "2026-01-05T09:00:00Z", audience_to=urn)
    assert episode.episode_id
    filed = bob.remember("In Bob's standup", episode_id=episode.episode_id).memory
    assert filed.episode_id == episode.episode_id
