"""Supersede and the derive rule (design §4): a derived memory's successor is
never wider than the memory it replaces, so a supersede cannot republish what
was derived from private sources to more readers or for more purposes; a told
memory's successor is its author's new claim and follows remember's rules."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from recallatron.v1 import gateway_pb2 as pb
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.dbutil import query

pytestmark = pytest.mark.integration


def _supersede(
    client: Client,
    memory_id: str,
    title: str,
    audience: str | None = None,
    purposes: Sequence[str] = (),
    source_ids: Sequence[str] = (),
) -> pb.SupersedeResponse:
    return client.ask(
        client.memory.Supersede,
        pb.SupersedeRequest,
        request_id=str(uuid.uuid4()),
        id=memory_id,
        expected_revision=1,
        kind="note",
        title=title,
        audience=audience,
        purposes=list(purposes),
        source_ids=list(source_ids),
    )


def _refusal(fn) -> grpc.RpcError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as err:
        fn()
    return err.value


def _unchanged(client: Client, memory_id: str) -> None:
    old = client.read([memory_id]).memories[0]
    assert (old.revision, old.superseded_by_id) == (1, "")


def test_a_derived_memory_is_never_superseded_wider(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    ada_id = team.members["ada"]
    private = ada.remember("Ada's salary is 90k", purposes=["assist", "personalize"]).memory
    shared = ada.remember("Salaries are reviewed in March", audience_to="workspace").memory
    derived = ada.derive([private.id, shared.id], "Ada's review: 90k in March").memory
    assert (derived.audience.member_id, list(derived.purposes)) == (ada_id, [1])

    # To the whole workspace, or for a purpose its sources do not share: refused,
    # naming the field, and nothing changes.
    wider = _refusal(lambda: _supersede(ada, derived.id, "Ada: 95k", audience="workspace"))
    assert wider.code() == grpc.StatusCode.INVALID_ARGUMENT, wider.details()
    assert (wider.details() or "").startswith("audience:"), wider.details()
    more = _refusal(lambda: _supersede(ada, derived.id, "Ada: 95k", purposes=["assist", "audit"]))
    assert more.code() == grpc.StatusCode.INVALID_ARGUMENT, more.details()
    assert (more.details() or "").startswith("purposes:"), more.details()
    other = _refusal(lambda: _supersede(ada, derived.id, "Ada: 95k", audience=team.members["bob"]))
    assert other.code() == grpc.StatusCode.INVALID_ARGUMENT, other.details()
    _unchanged(ada, derived.id)
    assert not bob.recall("95k", mode="lexical").outcome.results

    # Left as it was, the successor keeps the memory's trust and stays derived,
    # so its own successor is held to the same bound.
    successor = _supersede(ada, derived.id, "Ada: 95k in March").memory
    assert (successor.audience.member_id, list(successor.purposes)) == (ada_id, [1])
    assert successor.origin == derived.origin
    again = _refusal(lambda: _supersede(ada, successor.id, "Ada: 95k", audience="workspace"))
    assert again.code() == grpc.StatusCode.INVALID_ARGUMENT, again.details()
    _unchanged(ada, successor.id)


def test_a_derived_memory_may_be_superseded_narrower(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    first = ada.remember("Standup at 9", audience_to="workspace", purposes=["assist", "audit"])
    second = ada.remember("Standup in room 4", audience_to="workspace", purposes=["assist"])
    derived = ada.derive([first.memory.id, second.memory.id], "Standup at 9 in room 4").memory
    assert derived.audience.workspace and list(derived.purposes) == [1]
    more = _refusal(lambda: _supersede(ada, derived.id, "Standup at 10", purposes=["audit"]))
    assert more.code() == grpc.StatusCode.INVALID_ARGUMENT, more.details()
    _unchanged(ada, derived.id)
    narrowed = _supersede(ada, derived.id, "Standup at 10", audience=team.members["bob"]).memory
    assert narrowed.audience.member_id == team.members["bob"]
    assert bob.read([narrowed.id]).memories[0].title == "Standup at 10"


def test_a_told_memory_is_superseded_as_a_new_claim(team: Team) -> None:
    ada = team.clients["ada"]
    told = ada.remember("Ada's draft plan", purposes=["assist"]).memory
    published = _supersede(
        ada, told.id, "The plan", audience="workspace", purposes=["assist", "audit"]
    ).memory
    assert published.audience.workspace
    assert sorted(published.purposes) == [1, 4]
    assert published.origin == told.origin


def test_correct_has_no_way_to_change_trust() -> None:
    # Audience and purposes are set when a memory is written and never edited
    # in place; a wider successor is supersede's to refuse.
    fields = set(pb.CorrectRequest.DESCRIPTOR.fields_by_name)
    assert not fields & {"audience", "purposes", "source_ids"}


def test_forgetting_a_source_takes_a_derived_memory_s_successor_out_of_recall(
    team: Team,
) -> None:
    """The successor restates what was derived: it keeps the derived memory's
    sources, so forgetting one takes it out of recall as it does the memory
    it replaced, and read names them."""
    ada = team.clients["ada"]
    source = ada.remember("Ada's Quetzal password hint is her cat").memory
    derived = ada.derive([source.id], "Quetzal hint: a cat").memory
    successor = _supersede(ada, derived.id, "Quetzal hint: the cat Miso").memory
    read = ada.read([successor.id]).memories[0]
    assert [(link.kind, link.target.id) for link in read.links] == [
        (derived.links[0].kind, source.id)
    ]
    assert [r.memory.id for r in ada.recall("Miso", mode="lexical").outcome.results] == [
        successor.id
    ]
    ada.forget(source.id, "no longer wanted")
    assert not ada.recall("Miso", mode="lexical").outcome.results


def test_a_derived_memory_superseded_with_another_s_text_keeps_its_sources(team: Team) -> None:
    """The review page's "supersede A with B's text": the successor is derived
    from B and, as any derived memory's successor, from A's sources (its
    trust is capped by A's, which they gave), so forgetting one of A's
    sources takes the successor out of recall as it does A, while B stays."""
    ada = team.clients["ada"]
    source = ada.remember("Ada's Quetzal password hint is her cat").memory
    derived = ada.derive([source.id], "Quetzal hint: a cat").memory
    other = ada.remember("Quetzal hint: the cat Miso", audience_to="workspace").memory
    successor = _supersede(
        ada, derived.id, "Quetzal hint: the cat Miso", source_ids=[other.id]
    ).memory
    assert successor.audience.member_id == team.members["ada"]
    read = ada.read([successor.id]).memories[0]
    assert sorted((link.kind, link.target.id) for link in read.links) == sorted(
        [(derived.links[0].kind, source.id), (derived.links[0].kind, other.id)]
    )
    recalled = {r.memory.id for r in ada.recall("Miso", mode="lexical").outcome.results}
    assert recalled == {successor.id, other.id}
    ada.forget(source.id, "no longer wanted")
    recalled = {r.memory.id for r in ada.recall("Miso", mode="lexical").outcome.results}
    assert recalled == {other.id}


def _derive_refusal(client: Client, sources: list[str], **more: Any) -> tuple[object, str]:
    err = _refusal(lambda: client.derive(sources, "Lunch plan", **more))
    return err.code(), err.details() or ""


def test_deriving_from_a_memory_superseded_out_of_sight_reveals_nothing(team: Team) -> None:
    """Bob may see a memory whose successor is Ada's alone: he derives from it
    as from any memory he sees (its own trust, intersected; a link to it),
    and every refusal reads as for a memory never superseded."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    shared = ["assist", "audit"]
    old = ada.remember("Lunch is at noon", audience_to="workspace", purposes=shared).memory
    hidden = _supersede(ada, old.id, "Lunch is at one", audience=team.members["ada"]).memory
    never = ada.remember("Dinner is at eight", audience_to="workspace", purposes=shared).memory
    assert bob.read([old.id]).memories[0].superseded_by_id == ""
    own = bob.remember("Bob eats at the canteen", purposes=["assist"]).memory

    derived = bob.derive([old.id, own.id], "Bob: lunch at noon, canteen").memory
    assert (derived.audience.member_id, list(derived.purposes)) == (team.members["bob"], [1])
    read = bob.read([derived.id]).memories[0]
    assert sorted((link.target.id, link.target.visible) for link in read.links) == sorted(
        [(old.id, True), (own.id, True)]
    )
    recalled = {r.memory.id for r in bob.recall("canteen", mode="lexical").outcome.results}
    assert recalled == {own.id, derived.id}

    # The successor is not found, as an id that never was; the other
    # refusals answer as for a memory never superseded.
    assert _derive_refusal(bob, [old.id, hidden.id]) == _derive_refusal(
        bob, [old.id, str(uuid.uuid4())]
    )
    for sources, more in (
        ([], {"purposes": ["personalize"]}),
        ([own.id], {"audience_to": "workspace"}),
        ([own.id], {"purposes": ["audit"]}),
    ):
        assert _derive_refusal(bob, [old.id, *sources], **more) == _derive_refusal(
            bob, [never.id, *sources], **more
        ), more


def test_deriving_from_a_memory_whose_successor_was_forgotten(team: Team) -> None:
    """A memory whose successor was forgotten is current again: a derivation
    from it takes its trust, links to it alone and stays in recall until one
    of its own sources is forgotten; the forgotten successor is not found."""
    ada = team.clients["ada"]
    source = ada.remember("Ada's Quetzal password hint is her cat").memory
    old = ada.derive([source.id], "Quetzal hint: a cat").memory
    successor = _supersede(ada, old.id, "Quetzal hint: the cat Miso").memory
    ada.forget(successor.id, "wrong cat")
    assert ada.read([old.id]).memories[0].superseded_by_id == ""

    derived = ada.derive([old.id], "Quetzal hint: a pet").memory
    assert (derived.audience.member_id, list(derived.purposes)) == (team.members["ada"], [1])
    read = ada.read([derived.id]).memories[0]
    assert [(link.target.id, link.target.visible) for link in read.links] == [(old.id, True)]
    assert [r.memory.id for r in ada.recall("pet", mode="lexical").outcome.results] == [derived.id]
    assert _derive_refusal(ada, [old.id, successor.id]) == _derive_refusal(
        ada, [old.id, str(uuid.uuid4())]
    )
    ada.forget(source.id, "no longer wanted")
    assert not ada.recall("pet", mode="lexical").outcome.results


def test_the_successor_of_a_memory_whose_source_was_forgotten_stays_out_of_recall(
    team: Team,
) -> None:
    """Forgetting a source took the derived memory out of recall; superseding
    it (with its own text or another's) must not bring what was derived back."""
    ada = team.clients["ada"]
    source = ada.remember("Ada's Quetzal password hint is her cat").memory
    first = ada.derive([source.id], "Quetzal hint: a cat").memory
    second = ada.derive([source.id], "Quetzal hint: a pet cat").memory
    other = ada.remember("Quetzal hint: the cat Miso", audience_to="workspace").memory
    ada.forget(source.id, "no longer wanted")
    own = _supersede(ada, first.id, "Quetzal hint: the cat Tigger").memory
    taken = _supersede(ada, second.id, "Quetzal hint: the cat Miso", source_ids=[other.id])
    recalled = {r.memory.id for r in ada.recall("Quetzal", mode="lexical").outcome.results}
    assert recalled == {other.id}, (own.id, taken.memory.id)


def test_a_chain_of_supersedes_of_a_derived_memory_keeps_its_links_bounded(
    stack: Stack, team: Team
) -> None:
    """Each successor restates the same two sources (given again on some hops,
    carried on the others): it is derived from exactly those two, once each,
    whatever the chain's length, and the chain's link rows grow by two a hop."""
    ada = team.clients["ada"]
    sources = [ada.remember(f"Quetzal fact {i}").memory.id for i in range(2)]
    current = ada.derive(sources, "Quetzal facts, together").memory
    chain = [current.id]
    for hop in range(30):
        given = sources if hop % 2 == 0 else []
        current = _supersede(ada, current.id, f"Quetzal facts, take {hop}", source_ids=given).memory
        chain.append(current.id)
    rows = query(
        stack,
        team.database_name,
        "SELECT memory_id::text, kind::text, target_id::text FROM memory_link"
        " WHERE memory_id = ANY(%s::uuid[])",
        (chain,),
    )
    per_memory: dict[str, list[tuple[str, str]]] = {m: [] for m in chain}
    for memory_id, kind, target in rows:
        per_memory[memory_id].append((kind, target))
    expected = sorted(("derived_from", s) for s in sources)
    assert {m: sorted(links) for m, links in per_memory.items()} == dict.fromkeys(chain, expected)
    read = ada.read([current.id]).memories[0]
    assert sorted(link.target.id for link in read.links) == sorted(sources)


def test_a_successor_is_never_derived_from_what_it_replaces(team: Team) -> None:
    """A successor whose sources name the memory it supersedes, or one that
    memory replaced along its chain (past one the caller may not see), would
    be hidden from recall when that old version is forgotten (the walk
    refuses what reaches a forgotten memory), where forgetting an old version
    leaves the current one current (design §7.1): refused, naming source_ids,
    and nothing changes."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    lyon = bob.remember("Quetzal office in Lyon", audience_to="workspace").memory
    draft = _supersede(bob, lyon.id, "Quetzal office in Paris", audience=team.members["bob"])
    nice = _supersede(bob, draft.memory.id, "Quetzal office in Nice", audience="workspace").memory
    other = ada.remember("Quetzal office hours", audience_to="workspace").memory
    for sources in ([nice.id], [other.id, nice.id], [lyon.id]):
        refused = _refusal(
            lambda s=sources: _supersede(ada, nice.id, "Quetzal office in Nice", source_ids=s)
        )
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, (sources, refused.details())
        assert (refused.details() or "").startswith("source_ids:"), refused.details()
        _unchanged(ada, nice.id)
    # Another memory's text is taken as before; forgetting an old version
    # leaves the successor current.
    taken = _supersede(ada, nice.id, "Quetzal office hours", source_ids=[other.id]).memory
    bob.forget(lyon.id, "an old version")
    recalled = [r.memory.id for r in ada.recall("Quetzal office", mode="lexical").outcome.results]
    assert taken.id in recalled and nice.id not in recalled
