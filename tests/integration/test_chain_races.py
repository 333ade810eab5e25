"""Two changes along one chain of successors at once, one held open just
after its change while the other runs: every order ends in a chain with no
link to a forgotten memory, and neither change fails for the other.

Bob writes a workspace memory M; Ada supersedes it by S, which Bob may not
see (only Ada, or only Cy, may). Bob reads M as current, and his supersede of
it puts his S2 before S: M, S2, S. The calls held here run in this process
(a store replica's code), and so does the other change where a refusal of it
would matter: through the client, UNAVAILABLE is sent again and would hide a
deadlock the database broke by failing one of them."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import grpc
import psycopg
import pytest

from recallatron_devkit.stack import Stack
from services.store.domain import graph_claims, member_removal
from services.store.domain.control import ControlPlane
from services.store.domain.memories import MemoryStore, NewMemory
from services.store.infrastructure.db import Caller
from services.store.sql import leaving_queries as lq
from services.store.sql import memory_queries as mq
from tests import dbutil
from tests.conftest import Team, remember_robin, wait_for
from tests.integration.test_change_hidden_successor import _porto, _statements
from tests.integration.test_claims_hidden_successor import Stated, _lookup
from tests.integration.test_revision_races import _aborted_at, _held, _Race
from tests.integration.test_successor_chain import _waiting

pytestmark = pytest.mark.integration


class _Other(_Race):
    """The other change, on a thread; any failure kept, a domain refusal of
    a call made in this process as well as a client's."""

    def _run(self) -> None:
        try:
            self.result = self.call()
        except Exception as exc:  # reported by outcome()
            self.error = exc  # type: ignore[assignment]

    def outcome(self) -> Any:
        """Its answer, once done (a store it uses must still be open)."""
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        error = self.error
        assert error is None, f"the other change failed: {error!r}, {error.__cause__!r}"
        return self.result


def _caller(team: Team, handle: str) -> Caller:
    role = "owner" if handle == "ada" else "member"
    return Caller(team.workspace_id, team.members[handle], "assist", role)


def _chain(team: Team, for_whom: str = "ada") -> tuple[Any, Any]:
    """M (Bob's, the workspace's) as Bob reads it, and S, Ada's supersede of
    it, which only ``for_whom`` may see."""
    bob, ada = team.clients["bob"], team.clients["ada"]
    m = remember_robin(bob, "From the kickoff.", audience_to="workspace").memory
    s = ada.supersede(
        m.id, m.revision, "Robin leads Apollo, says Ada", audience_to=team.members[for_whom]
    ).memory
    (seen,) = bob.read([m.id]).memories
    assert seen.superseded_by_id == ""
    return seen, s


def _links(stack: Stack, team: Team, *ids: str) -> list[tuple[str, str | None]]:
    """Each memory's successor as stored, whoever may see it."""
    rows = dbutil.query(
        stack, team.database_name,
        "SELECT id::text, superseded_by_id::text FROM memory WHERE id = ANY(%s::uuid[])"
        " ORDER BY array_position(%s::uuid[], id)",
        (list(ids), list(ids)),
    )  # fmt: skip
    return [(str(r[0]), r[1] and str(r[1])) for r in rows]


def _no_link_to_a_tombstone(stack: Stack, team: Team) -> None:
    """No memory not forgotten has a forgotten successor (a tombstone keeps
    its own link, which no chain follows)."""
    rows = dbutil.query(
        stack, team.database_name,
        "SELECT m.id::text, s.id::text FROM memory m JOIN memory s ON s.id = m.superseded_by_id"
        " WHERE m.invalidated_at IS NULL AND s.invalidated_at IS NOT NULL",
    )  # fmt: skip
    assert rows == []


def _supersede_by_bob(store: list[MemoryStore], team: Team, m: Any) -> Callable[[], Any]:
    return lambda: store[0].supersede(
        _caller(team, "bob"), str(uuid.uuid4()), m.id, m.revision,
        NewMemory("note", "Robin leads Apollo still", ""), "again",
    )  # fmt: skip


def _forget(store: list[MemoryStore], team: Team, handle: str, memory_id: str) -> Callable[[], Any]:
    return lambda: store[0].forget(_caller(team, handle), str(uuid.uuid4()), memory_id, "wrong")


def _superseding_while(
    stack: Stack,
    team: Team,
    monkeypatch: pytest.MonkeyPatch,
    m: Any,
    other: Callable[[list[MemoryStore]], Callable[[], Any]],
) -> tuple[Any, _Other]:
    """Bob's supersede of M, held once it has made M's successor S2 (before
    S), not committed, while ``other`` (given the store) runs: S2, and
    ``other`` done."""
    store: list[MemoryStore] = []
    race = _Other(stack, team, other(store))
    with _held(stack, monkeypatch, mq.SUPERSEDE, race) as held:
        store.append(held)
        s2 = _supersede_by_bob(store, team, m)().memory
        race.thread.join(60)
    return s2, race


def _s2_current_for_everyone(stack: Stack, team: Team, m: Any, s2: str) -> None:
    """S gone: M, then S2, current for all, stating what M did."""
    assert _links(stack, team, m.id, s2) == [(m.id, s2), (s2, None)]
    _no_link_to_a_tombstone(stack, team)
    for handle in ("ada", "bob", "cy"):
        reader = team.clients[handle]
        m_read, s2_read = reader.read([m.id, s2]).memories
        assert (m_read.superseded_by_id, s2_read.superseded_by_id) == (s2, ""), handle
        assert _lookup(reader) == _statements(s2), handle


def test_forgetting_the_hidden_successor_while_a_supersede_puts_one_before_it(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bob's supersede has made M's successor S2 (S2 then S), not committed;
    Ada forgets S meanwhile. Her forget waits for his supersede, then takes S
    out of the chain: M, S2."""
    m, s = _chain(team)
    s2, race = _superseding_while(
        stack, team, monkeypatch, m, lambda store: _forget(store, team, "ada", s.id)
    )
    race.outcome()
    _s2_current_for_everyone(stack, team, m, s2.id)


def test_a_supersede_while_the_hidden_successor_is_forgotten_ends_the_chain_at_its_own(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other order: Ada's forget of S has taken it out of the chain, not
    committed; Bob's supersede waits for it, then finds M with no successor."""
    m, s = _chain(team)
    store: list[MemoryStore] = []
    race = _Other(stack, team, _supersede_by_bob(store, team, m))
    with _held(stack, monkeypatch, mq.FORGET, race) as held:
        store.append(held)
        _forget(store, team, "ada", s.id)()
        s2 = race.outcome().memory
    _s2_current_for_everyone(stack, team, m, s2.id)


def test_erasing_a_removed_members_hidden_successor_while_a_supersede_puts_one_before_it(
    stack: Stack, operator: Any, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S is Cy's alone, and Cy is removed with his memories erased while
    Bob's supersede has made M's successor S2 (S2 then S), not committed: the
    erase, as a forget, leaves M, S2, with nothing linked to S's tombstone."""
    m, _ = _chain(team, for_whom="cy")
    s2, race = _superseding_while(
        stack, team, monkeypatch, m,
        lambda _: lambda: operator.remove_member(team.members["cy"], "erase"),
    )  # fmt: skip
    race.outcome()
    assert _links(stack, team, m.id, s2.id) == [(m.id, s2.id), (s2.id, None)]
    _no_link_to_a_tombstone(stack, team)
    for handle in ("ada", "bob"):
        reader = team.clients[handle]
        assert reader.read([s2.id]).memories[0].superseded_by_id == "", handle
        assert _lookup(reader) == _statements(s2.id), handle


def test_a_correct_while_the_hidden_successor_is_forgotten_states_its_claims_for_all(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bob's correct of M has read it (superseded by S, hidden from him) and
    Ada's forget of S commits before its change: what the correct states is
    M's, current, and carried by M's next supersede like any current claim."""
    ada, bob, cy = (team.clients[h] for h in ("ada", "bob", "cy"))
    m, s = _chain(team)
    store: list[MemoryStore] = []
    race = _Other(stack, team, _forget(store, team, "ada", s.id))
    with _held(stack, monkeypatch, mq.CHANGE_SUBJECT, race) as held:
        store.append(held)
        held.correct(
            _caller(team, "bob"), str(uuid.uuid4()), m.id, m.revision, None, None, None,
            "moved", graph=_graph_porto(m),
        )  # fmt: skip
        race.outcome()
    assert _links(stack, team, m.id) == [(m.id, None)]
    for reader in (ada, bob, cy):
        assert _lookup(reader) == _stating_porto(m.id)
    s2 = bob.supersede(m.id, m.revision + 1, "Robin leads Apollo from Porto").memory
    for reader in (ada, bob, cy):
        assert _lookup(reader) == _stating_porto(s2.id)


def _stating_porto(memory_id: str) -> tuple[Stated, Stated, Stated, list[str]]:
    """Robin's card when ``memory_id`` alone states his city, Porto."""
    return ({("city=Porto", memory_id)}, set(), set(), [memory_id])


def _graph_porto(m: Any) -> graph_claims.GraphIn:
    """_porto's claim as the store takes it."""
    robin = _porto(m)[0]["entity"]["entity_id"]
    claim = graph_claims.ClaimIn(graph_claims.EntityIn(robin), "city", "Porto")
    return graph_claims.GraphIn(claims=[claim])


def test_two_supersedes_of_a_memory_read_as_current_past_a_hidden_successor(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bob supersedes M twice at once: one new memory goes before S, the
    other call loses the race as on any memory."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    m, s = _chain(team)
    s2, race = _superseding_while(
        stack, team, monkeypatch, m,
        lambda _: lambda: bob.supersede(m.id, m.revision, "Robin leads Apollo, yes"),
    )  # fmt: skip
    assert isinstance(race.error, grpc.RpcError), race.result
    _aborted_at(race.error, m.revision + 1)
    assert _links(stack, team, m.id, s2.id) == [(m.id, s2.id), (s2.id, s.id)]
    assert [x.id for x in ada.read([m.id]).memories[0].superseded_by] == [s2.id, s.id]


def test_forgetting_the_memory_a_supersede_is_replacing_past_a_hidden_successor(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bob forgets M while his supersede of it is not committed: the forget
    waits, then forgets M; S2 stays before S. The other order: the supersede
    finds M forgotten, and writes nothing."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    m, s = _chain(team)
    s2, race = _superseding_while(
        stack, team, monkeypatch, m, lambda store: _forget(store, team, "bob", m.id)
    )
    race.outcome()
    assert _links(stack, team, s2.id) == [(s2.id, s.id)]
    _no_link_to_a_tombstone(stack, team)
    assert ada.read([s2.id]).memories[0].superseded_by_id == s.id
    assert bob.read([s2.id]).memories[0].superseded_by_id == ""

    m, s = _chain(team)
    race = _Other(stack, team, lambda: bob.supersede(m.id, m.revision, "Robin leads Apollo, yes"))
    with _held(stack, monkeypatch, mq.FORGET, race) as held:
        held.forget(_caller(team, "bob"), str(uuid.uuid4()), m.id, "wrong")
    race.thread.join(60)
    assert isinstance(race.error, grpc.RpcError), race.result
    assert race.error.code() == grpc.StatusCode.NOT_FOUND, race.error.details()
    assert _links(stack, team, s.id) == [(s.id, None)]
    _no_link_to_a_tombstone(stack, team)


def test_two_forgets_along_a_chain_at_once_neither_fails(stack: Stack, team: Team) -> None:
    """Lyon, Paris, Nice: Paris's forget stops at Lyon (held here), linking it
    past Paris, while Nice's forget runs. Nice's waits for Paris's, which
    holds Nice, its successor, and both go through: Lyon ends current."""
    ada = team.clients["ada"]
    lyon = ada.remember("Office in Lyon", audience_to="workspace").memory
    paris = ada.supersede(lyon.id, 1, "Office in Paris").memory
    nice = ada.supersede(paris.id, 1, "Office in Nice").memory
    with (
        dbutil.store_databases(stack) as dbs,
        psycopg.connect(dbutil.workspace_url(stack, team.database_name)) as holder,
    ):
        store = [MemoryStore(dbs, ControlPlane(dbs))]
        holder.execute("SELECT 1 FROM memory WHERE id = %s FOR UPDATE", (lyon.id,))
        first = _Other(stack, team, _forget(store, team, "ada", paris.id))
        first.start_and_wait()
        second = _Other(stack, team, _forget(store, team, "ada", nice.id))
        second.thread.start()
        wait_for(lambda: _waiting(stack, team.database_name) >= 2, "Nice's forget waiting")
        holder.rollback()
        first.outcome()
        second.outcome()
    assert _links(stack, team, lyon.id) == [(lyon.id, None)]
    _no_link_to_a_tombstone(stack, team)
    assert ada.read([lyon.id]).memories[0].superseded_by_id == ""


@pytest.mark.parametrize("held_after", ["lock", "forget"])
@pytest.mark.parametrize("mode", ["erase", "transfer"])
def test_a_removed_members_memory_leaves_while_its_successor_is_forgotten(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch, mode: str, held_after: str
) -> None:
    """M, then S (Cy's alone), then T (Cy's supersede of S, the workspace's).
    Ada's forget of T is held once it has locked T (or once it has forgotten
    T and linked S past it) while Cy is removed, S erased or handed to Bob.
    The erase changed S and then, linking M past S to T, waited for T, which
    the forget held while it waited for S to link it past T: the database
    failed one of them. The hand-over likewise: it changes S twice (its
    audience, then its provenance's), and Postgres checks the second change's
    key to T. Now the removal holds S's successor first, as the tools do: it
    waits for the forget, and both go through."""
    m, s = _chain(team, for_whom="cy")
    t = team.clients["cy"].supersede(s.id, s.revision, "Robin leads Apollo, says Cy",
                                     audience_to="workspace").memory  # fmt: skip
    store: list[MemoryStore] = []
    to = team.members["bob"] if mode == "transfer" else ""

    def remove_cy() -> Any:
        removal = member_removal.MemberRemoval(store[0].dbs, store[0].control)
        return removal.remove(team.members["cy"], mode, to)

    race = _Other(stack, team, remove_cy)
    statement = mq.LOCK_MEMORY if held_after == "lock" else mq.FORGET
    with _held(stack, monkeypatch, statement, race) as held:
        store.append(held)
        _forget(store, team, "ada", t.id)()
        removal = race.outcome()
    assert (removal.erased, removal.transferred) == ((1, 0) if mode == "erase" else (0, 1))
    _no_link_to_a_tombstone(stack, team)
    if mode == "erase":
        # T and S gone: M current for everyone, stating what it did.
        assert _links(stack, team, m.id) == [(m.id, None)]
        for handle in ("ada", "bob"):
            reader = team.clients[handle]
            assert reader.read([m.id]).memories[0].superseded_by_id == "", handle
            assert _lookup(reader) == _statements(m.id), handle
    else:
        # S is Bob's now, current: T gone, and M superseded by S for Bob only.
        assert _links(stack, team, m.id, s.id) == [(m.id, s.id), (s.id, None)]
        bob = team.clients["bob"]
        assert bob.read([m.id]).memories[0].superseded_by_id == s.id
        assert bob.read([s.id]).memories[0].superseded_by_id == ""
        assert team.clients["ada"].read([m.id]).memories[0].superseded_by_id == ""


def test_a_removed_members_chain_is_erased_later_memory_first(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cy's own chain X, Y, Z (and W alone): the removal reads them later
    first (Z, Y, X), so a batch never changes a memory before its successor's
    batch; erased one a batch, nothing is left linked to a tombstone."""
    cy = team.clients["cy"]
    alone: dict[str, Any] = {"audience_to": team.members["cy"]}
    x = cy.remember("Office in Lyon", **alone).memory
    y = cy.supersede(x.id, x.revision, "Office in Paris", **alone).memory
    w = cy.remember("Lunch at noon", **alone).memory
    z = cy.supersede(y.id, y.revision, "Office in Nice", **alone).memory
    rows = dbutil.query(
        stack, team.database_name,
        lq.PRIVATE_LIVE.replace("%(member)s", "%s"), (team.members["cy"],),
    )  # fmt: skip
    order = [str(r[0]) for r in rows]
    assert [i for i in order if i != w.id] == [z.id, y.id, x.id], order
    monkeypatch.setattr(member_removal, "BATCH", 1)
    with dbutil.store_databases(stack) as dbs:
        removal = member_removal.MemberRemoval(dbs, ControlPlane(dbs))
        assert removal.remove(team.members["cy"], "erase").erased == 4
    _no_link_to_a_tombstone(stack, team)


def _alternating_chain(team: Team) -> list[str]:
    """C1, B1, C2, B2 along one chain, each memory Cy's or Bob's alone in turn."""
    bob, cy = team.clients["bob"], team.clients["cy"]
    c1 = cy.remember("Office in Lyon").memory
    b1 = cy.supersede(c1.id, c1.revision, "Office in Paris", audience_to=team.members["bob"])
    c2 = bob.supersede(b1.memory.id, 1, "Office in Nice", audience_to=team.members["cy"])
    b2 = cy.supersede(c2.memory.id, 1, "Office in Porto", audience_to=team.members["bob"])
    return [c1.id, b1.memory.id, c2.memory.id, b2.memory.id]


@pytest.mark.parametrize("mode", ["erase", "transfer"])
def test_two_removals_whose_memories_alternate_along_a_chain_both_finish(
    stack: Stack, team: Team, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Cy and Bob removed at once, their memories C1, B1, C2, B2 along one
    chain. Cy's removal is held once it has held its batch's successors (B2,
    B1) while Bob's runs: Bob's held C2, Cy's memory's successor, then waited
    for B2, while Cy's, going on, waited for C2: the database failed one of
    them. Now removals of one workspace take turns: both finish."""
    chain = _alternating_chain(team)
    to = team.members["ada"] if mode == "transfer" else ""
    real = member_removal._hold_successors
    with dbutil.store_databases(stack) as dbs:
        removal = member_removal.MemberRemoval(dbs, ControlPlane(dbs))
        race = _Other(stack, team, lambda: removal.remove(team.members["bob"], mode, to))

        def held_once(conn: psycopg.Connection[Any], batch: list[Any]) -> None:
            real(conn, batch)
            if not race.thread.ident:  # Cy's first batch; Bob's not yet started
                race.start_and_wait()

        monkeypatch.setattr(member_removal, "_hold_successors", held_once)
        cys = removal.remove(team.members["cy"], mode, to)
        bobs = race.outcome()
    changed = [(r.erased, r.transferred) for r in (cys, bobs)]
    assert changed == ([(2, 0)] * 2 if mode == "erase" else [(0, 2)] * 2)
    _no_link_to_a_tombstone(stack, team)
    rows = dbutil.query(
        stack, team.database_name,
        "SELECT invalidated_at IS NULL, audience_member_id::text FROM memory"
        " WHERE id = ANY(%s::uuid[])",
        (chain,),
    )  # fmt: skip
    if mode == "erase":
        assert [r[0] for r in rows] == [False] * 4
    else:
        assert [(r[0], r[1]) for r in rows] == [(True, team.members["ada"])] * 4
