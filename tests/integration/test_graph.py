"""The memory graph through the gateway on real Postgres: claims and relations
stated by memories, lookup by name or alias, neighbors, time (as_of,
history), correct and supersede, forget down to pg_dump, bad input."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb
from recallatron.vocabulary import (
    MAX_CARD_ITEMS,
    MAX_NEIGHBOR_EDGES,
    MAX_NEIGHBOR_NODES,
    MAX_RELATIONS,
)
from tests import dbutil
from tests.conftest import Team

pytestmark = pytest.mark.integration

OUTGOING, INCOMING = cpb.RELATION_DIRECTION_OUTGOING, cpb.RELATION_DIRECTION_INCOMING


def rpc_error(fn) -> grpc.RpcError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as err:
        fn()
    return err.value


def now_rfc3339() -> str:
    return datetime.now(UTC).isoformat()


def robin_memory(client: Client, **kwargs) -> cpb.Memory:  # type: ignore[no-untyped-def]
    return client.remember(
        "Robin leads Apollo",
        "Robin Goodwin leads the Apollo project from Lisbon.",
        kind="fact",
        mention_names=["Robin Goodwin"],
        claims=[
            {
                "entity": {"name": "Robin Goodwin", "type": "person"},
                "attribute": "city",
                "value": "Lisbon",
                "valid_from": "2024-01-01T00:00:00Z",
            },
            {
                "entity": {"name": "Apollo", "type": "project"},
                "attribute": "status",
                "value": "active",
                "confidence": 0.8,
            },
        ],
        relations=[
            {
                "subject": {"name": "robin goodwin"},
                "predicate": "leads",
                "object": {"name": "Apollo"},
            },
        ],
        aliases=[{"entity": {"name": "Robin Goodwin"}, "alias": "Robin"}],
        **kwargs,
    ).memory


def test_remember_with_claims_then_lookup_by_name_and_alias(team: Team) -> None:
    ada = team.clients["ada"]
    memory = robin_memory(ada)
    # One new entity per normalised name within the write, each mentioned.
    assert sorted(m.name for m in memory.mentions) == ["Apollo", "Robin Goodwin"]
    assert len(memory.claims) == 2 and len(memory.relations) == 1 and len(memory.aliases) == 1

    for name in ("Robin Goodwin", "  robin   GOODWIN ", "Robin", "róbin"):
        found = ada.lookup(name).entities
        assert len(found) == 1, name
        card = found[0]
        assert card.name == "Robin Goodwin" and card.type == "person"
        assert list(card.aliases) == ["Robin"]
        assert [(a.attribute, a.value, a.memory_id) for a in card.attributes] == [
            ("city", "Lisbon", memory.id)
        ]
        assert [(r.predicate, r.direction, r.other.name) for r in card.relations] == [
            ("leads", OUTGOING, "Apollo")
        ]
        assert list(card.mentioned_by) == [memory.id]
    apollo = ada.lookup("apollo").entities[0]
    assert apollo.type == "project"
    assert [(r.predicate, r.direction, r.other.name) for r in apollo.relations] == [
        ("leads", INCOMING, "Robin Goodwin")
    ]
    assert apollo.attributes[0].confidence == pytest.approx(0.8)
    # Part of a name is matched only when asked for (partial; see
    # tests/integration/test_lookup_partial.py).
    assert ada.lookup("Rob").entities == []
    assert ada.lookup("Apoll").entities == []
    assert [c.name for c in ada.lookup("Apoll", partial=True).entities] == ["Apollo"]


def test_two_entities_may_share_a_name_and_disagreeing_claims_both_return(team: Team) -> None:
    ada = team.clients["ada"]
    first = ada.remember(
        "Sam in Oslo",
        claims=[{"entity": {"name": "Sam"}, "attribute": "city", "value": "Oslo"}],
        audience_to="workspace",
    ).memory
    second = ada.remember(
        "Another Sam",
        claims=[{"entity": {"name": "Sam"}, "attribute": "city", "value": "Rome"}],
        audience_to="workspace",
    ).memory
    cards = ada.lookup("sam").entities
    assert len(cards) == 2 and cards[0].id != cards[1].id  # nothing merges them
    sam = cards[0].id
    time.sleep(0.01)
    third = ada.remember(
        "Sam moved",
        mention_ids=[sam],
        claims=[{"entity": {"entity_id": sam}, "attribute": "city", "value": "Bergen"}],
        audience_to="workspace",
    ).memory
    card = next(c for c in ada.lookup("Sam").entities if c.id == sam)
    # Both statements stand, newest first, each with its memory: nothing is
    # invalidated automatically.
    assert [(a.value, a.memory_id) for a in card.attributes] == [
        ("Bergen", third.id),
        ("Oslo", first.id),
    ]
    assert second.id not in card.mentioned_by


def test_claims_are_visible_exactly_when_their_memory_is(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    private = ada.remember(
        "Ada's doctor",
        claims=[{"entity": {"name": "Dr Quill"}, "attribute": "phone", "value": "555-0101"}],
    ).memory
    entity_id = private.claims[0].entity.id
    # Bob sees no entity at all: not by name, not by id, not through neighbors.
    assert bob.lookup("Dr Quill").entities == []
    err = rpc_error(lambda: bob.neighbors(entity_id, hops=1))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    unknown = rpc_error(lambda: bob.neighbors(str(uuid.uuid4()), hops=1))
    assert (unknown.code(), unknown.details()) == (err.code(), err.details())
    # Nor can he name it on a write (it answers like an unknown id:
    # tests/integration/test_entity_id_writes.py).
    err = rpc_error(lambda: bob.remember("x", mention_ids=[entity_id]))
    assert err.code() == grpc.StatusCode.NOT_FOUND and "mentions[0].entity_id" in (
        err.details() or ""
    )
    # A purpose the memory was not stored for sees nothing either.
    assert ada.lookup("Dr Quill", purpose="audit").entities == []
    assert len(ada.lookup("Dr Quill").entities) == 1
    # Shared for the workspace, Bob sees the shared claim and not the private one.
    ada.remember(
        "Dr Quill's office",
        mention_ids=[entity_id],
        claims=[{"entity": {"entity_id": entity_id}, "attribute": "office", "value": "Room 4"}],
        audience_to="workspace",
    )
    card = bob.lookup("dr quill").entities[0]
    assert [(a.attribute, a.value) for a in card.attributes] == [("office", "Room 4")]
    assert len(card.mentioned_by) == 1


def test_neighbors_walks_visible_relations_within_hops(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    chain = ada.remember(
        "Org chart",
        audience_to="workspace",
        relations=[
            {"subject": {"name": "A"}, "predicate": "reports_to", "object": {"name": "B"}},
            {"subject": {"name": "B"}, "predicate": "reports_to", "object": {"name": "C"}},
            {"subject": {"name": "C"}, "predicate": "member_of", "object": {"name": "D"}},
        ],
    ).memory
    ids = {m.name: m.entity_id for m in chain.mentions}
    ada.remember(
        "Private link",
        relations=[
            {"subject": {"entity_id": ids["A"]}, "predicate": "knows", "object": {"name": "Secret"}}
        ],
        mention_ids=[ids["A"]],
    )
    one = bob.neighbors(ids["A"], hops=1)
    assert [(n.entity.name, n.depth) for n in one.nodes] == [("A", 0), ("B", 1)]
    three = bob.neighbors(ids["A"], hops=3)
    assert [(n.entity.name, n.depth) for n in three.nodes] == [
        ("A", 0),
        ("B", 1),
        ("C", 2),
        ("D", 3),
    ]
    assert len(three.edges) == 3 and not three.truncated
    only = bob.neighbors(ids["A"], hops=3, predicates=["reports_to"])
    assert [n.entity.name for n in only.nodes] == ["A", "B", "C"]
    # Ada also walks her private edge; Bob never does.
    assert "Secret" in [n.entity.name for n in ada.neighbors(ids["A"], hops=1).nodes]
    assert "Secret" not in [n.entity.name for n in bob.neighbors(ids["A"], hops=3).nodes]


def test_correct_replaces_claims_and_keeps_history_and_as_of(team: Team) -> None:
    ada = team.clients["ada"]
    memory = ada.remember(
        "Kim's role",
        claims=[{"entity": {"name": "Kim"}, "attribute": "role", "value": "engineer"}],
    ).memory
    kim = memory.claims[0].entity.id
    time.sleep(0.05)
    before = now_rfc3339()
    time.sleep(0.05)
    corrected = ada.correct(
        memory.id,
        memory.revision,
        "promoted",
        claims=[{"entity": {"entity_id": kim}, "attribute": "role", "value": "lead"}],
    ).memory
    assert corrected.revision == 2
    assert [(c.attribute, c.value, c.HasField("retired_at")) for c in corrected.claims] == [
        ("role", "lead", False),
        ("role", "engineer", True),
    ]
    now = ada.lookup("Kim").entities[0]
    assert [a.value for a in now.attributes] == ["lead"]
    past = ada.lookup("Kim", as_of=before).entities[0]
    assert [a.value for a in past.attributes] == ["engineer"]
    history = ada.lookup("Kim", include_history=True).entities[0]
    assert sorted(a.value for a in history.attributes) == ["engineer", "lead"]
    # replace_claims with none given drops them (they stay in the history).
    dropped = ada.correct(corrected.id, corrected.revision, "unsure", replace_claims=True).memory
    assert all(c.HasField("retired_at") for c in dropped.claims)
    assert ada.lookup("Kim").entities[0].attributes == []


def test_as_of_names_the_memory_current_then_when_its_successor_is_hidden(team: Team) -> None:
    """The memory that stated a claim at as_of is among those naming its entity
    for a reader who cannot see its successor (written for its author alone)."""
    from recallatron.v1 import gateway_pb2 as gpb

    ada, bob = team.clients["ada"], team.clients["bob"]
    old = ada.remember(
        "Noor lives in Oslo",
        audience_to="workspace",
        mention_names=["Noor Haddad"],
        claims=[{"entity": {"name": "Noor Haddad"}, "attribute": "city", "value": "Oslo"}],
    ).memory
    time.sleep(0.05)
    between = now_rfc3339()
    time.sleep(0.05)
    ada.call(
        ada.memory.Supersede,
        gpb.SupersedeRequest(
            request_id=str(uuid.uuid4()), id=old.id, expected_revision=old.revision,
            kind=cpb.KIND_NOTE, title="Noor's move, for me",
            audience=cpb.Audience(member_id=team.members["ada"]),
        ),
    )  # fmt: skip
    then = bob.lookup("Noor Haddad", as_of=between).entities[0]
    assert [a.memory_id for a in then.attributes] == [old.id]
    assert list(then.mentioned_by) == [old.id]


def test_supersede_carries_claims_and_the_old_ones_retire(team: Team) -> None:
    ada = team.clients["ada"]
    old = ada.remember(
        "Lee lives in Paris",
        claims=[{"entity": {"name": "Lee"}, "attribute": "city", "value": "Paris"}],
    ).memory
    time.sleep(0.05)
    between = now_rfc3339()
    time.sleep(0.05)
    carried = ada.supersede(old.id, old.revision, "Lee lives in Paris (confirmed)").memory
    assert [(c.value, c.memory_id) for c in carried.claims] == [("Paris", carried.id)]
    card = ada.lookup("Lee").entities[0]
    assert [(a.value, a.memory_id) for a in card.attributes] == [("Paris", carried.id)]
    then = ada.lookup("Lee", as_of=between).entities[0]
    assert [a.memory_id for a in then.attributes] == [old.id]
    # The memory that stated it then is among those naming Lee then (it was
    # left out as superseded now, its successor as written later).
    assert list(then.mentioned_by) == [old.id]
    assert list(card.mentioned_by) == [carried.id]
    lee = card.id
    moved = ada.supersede(
        carried.id,
        carried.revision,
        "Lee moved to Berlin",
        claims=[{"entity": {"entity_id": lee}, "attribute": "city", "value": "Berlin"}],
    )
    card = ada.lookup("Lee").entities[0]
    assert [a.value for a in card.attributes] == ["Berlin"]
    assert moved.superseded.claims[0].HasField("retired_at")
    history = ada.lookup("Lee", include_history=True).entities[0]
    assert sorted(a.value for a in history.attributes) == ["Berlin", "Paris", "Paris"]


def test_valid_time_is_as_stated(team: Team) -> None:
    ada = team.clients["ada"]
    ada.remember(
        "Term of office",
        claims=[
            {
                "entity": {"name": "Mayor Vale"},
                "attribute": "office",
                "value": "mayor",
                "valid_from": "2020-01-01T00:00:00Z",
                "valid_until": "2024-01-01T00:00:00Z",
            },
        ],
    )
    assert ada.lookup("Mayor Vale").entities[0].attributes == []
    # Record time is now, so a past as_of sees nothing either: it was not yet said.
    assert ada.lookup("Mayor Vale", as_of="2022-06-01T00:00:00Z").entities == []
    history = ada.lookup("Mayor Vale", include_history=True).entities[0]
    assert [a.value for a in history.attributes] == ["mayor"]


def test_forget_purges_claims_down_to_pg_dump(stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    ada, bob = team.clients["ada"], team.clients["bob"]
    canary_value = f"canary-value-{uuid.uuid4().hex[:8]}"
    canary_name = f"Canary Person {uuid.uuid4().hex[:6]}"
    canary_predicate = f"canary_rel_{uuid.uuid4().hex[:6]}"
    memory = ada.remember(
        "About the canary",
        audience_to="workspace",
        claims=[{"entity": {"name": canary_name}, "attribute": "secret", "value": canary_value}],
        relations=[
            {
                "subject": {"name": canary_name},
                "predicate": canary_predicate,
                "object": {"name": "Apollo"},
            }
        ],
        aliases=[{"entity": {"name": canary_name}, "alias": "Canary Alias"}],
    ).memory
    assert len(bob.lookup(canary_name).entities) == 1
    ada.forget(memory.id, "asked to")
    for client in (ada, bob):
        assert client.lookup(canary_name).entities == []
        assert client.lookup("Canary Alias").entities == []
        assert client.lookup("Apollo").entities == []
    dump = dbutil.pg_dump(stack, team.database_name)
    for secret in (canary_value, canary_name, canary_predicate, "Canary Alias"):
        assert secret not in dump


@pytest.mark.parametrize(
    ("claims", "relations", "field"),
    [
        (
            [{"entity": {"name": "X"}, "attribute": "Bad Name", "value": "v"}],
            [],
            "claims[0].attribute",
        ),
        ([{"entity": {"name": "X"}, "attribute": "a", "value": "v" * 2001}], [], "claims[0].value"),
        ([{"entity": {"name": "X"}, "attribute": "a", "value": ""}], [], "claims[0].value"),
        (
            [{"entity": {"entity_id": "not-a-uuid"}, "attribute": "a", "value": "v"}],
            [],
            "claims[0].entity.entity_id",
        ),
        (
            [
                {
                    "entity": {"name": "X"},
                    "attribute": "a",
                    "value": "v",
                    "valid_from": "2024-02-01T00:00:00Z",
                    "valid_until": "2024-01-01T00:00:00Z",
                }
            ],
            [],
            "claims[0].valid_until",
        ),
        (
            [{"entity": {"name": "X"}, "attribute": "a", "value": "v", "confidence": 1.5}],
            [],
            "claims[0].confidence",
        ),
        (
            [],
            [{"subject": {"name": "X"}, "predicate": "9lives", "object": {"name": "Y"}}],
            "relations[0].predicate",
        ),
        ([], [{"subject": {"name": "X"}, "predicate": "p", "object": {}}], "relations[0].object"),
        (
            [{"entity": {"name": "X", "type": "Person!"}, "attribute": "a", "value": "v"}],
            [],
            "claims[0].entity.type",
        ),
    ],
)
def test_bad_graph_input_is_refused_naming_the_field_and_changes_nothing(
    stack: Any,
    team: Team,
    claims: list[dict[str, Any]],
    relations: list[dict[str, Any]],
    field: str,
) -> None:
    ada = team.clients["ada"]
    before = dbutil.checksum(stack, team.database_name)
    err = rpc_error(lambda: ada.remember("bad", claims=claims, relations=relations))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in (err.details() or "")
    assert dbutil.checksum(stack, team.database_name) == before


@pytest.mark.parametrize("hops", [4, -1])
def test_hops_out_of_range(team: Team, hops: int) -> None:
    ada = team.clients["ada"]
    memory = ada.remember("n", mention_names=["Node"])
    err = rpc_error(lambda: ada.neighbors(memory.memory.mentions[0].entity_id, hops=hops))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "hops" in (err.details() or "")


def test_hops_not_given_is_one_hop(team: Team) -> None:
    """A request leaving hops out (0 on the wire: a JSON body without it)
    walks one hop, the default the tool schema and the clients state; it was
    refused 'hops: must lie in [1, 3]'."""
    ada = team.clients["ada"]
    chain = ada.remember(
        "Org chart",
        relations=[
            {"subject": {"name": "A"}, "predicate": "reports_to", "object": {"name": "B"}},
            {"subject": {"name": "B"}, "predicate": "reports_to", "object": {"name": "C"}},
        ],
    ).memory
    start = next(m.entity_id for m in chain.mentions if m.name == "A")
    given = ada.neighbors(start, hops=0)
    assert [(n.entity.name, n.depth) for n in given.nodes] == [("A", 0), ("B", 1)]
    assert given == ada.neighbors(start, hops=1)


def test_an_identifier_ending_in_a_newline_is_refused(stack, team: Team) -> None:  # type: ignore[no-untyped-def]
    """Attribute names, predicates and types are the whole of
    ^[a-z][a-z0-9_]*$: "leads\\n" is not "leads" (a regular expression's $
    also matches before a final newline)."""
    ada = team.clients["ada"]
    node = ada.remember("n", mention_names=["Node"], audience_to="workspace").memory
    node_id = node.mentions[0].entity_id
    before = dbutil.checksum(stack, team.database_name)
    writes: list[tuple[dict[str, Any], str]] = [
        (
            {"claims": [{"entity": {"entity_id": node_id}, "attribute": "city\n", "value": "v"}]},
            "claims[0].attribute",
        ),
        (
            {"relations": [{"subject": {"entity_id": node_id}, "predicate": "leads\n",
                            "object": {"name": "Apollo"}}]},
            "relations[0].predicate",
        ),
        (
            {"claims": [{"entity": {"name": "Nia", "type": "person\n"}, "attribute": "a",
                         "value": "v"}]},
            "claims[0].entity.type",
        ),
    ]  # fmt: skip
    for graph_part, field in writes:
        err = rpc_error(lambda g=graph_part: ada.remember("bad", **g))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (field, err.code())
        assert field in (err.details() or ""), err.details()
    err = rpc_error(lambda: ada.neighbors(node_id, predicates=["leads\n"]))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.code()
    assert "predicates[0]" in (err.details() or "")
    assert dbutil.checksum(stack, team.database_name) == before


def test_traversal_from_a_hub_of_10000_relations_stays_within_caps_and_deadline(
    team: Team,
) -> None:
    ada = team.clients["ada"]
    hub = ada.remember("The hub", mention_names=["Hub"], audience_to="workspace").memory
    hub_id = hub.mentions[0].entity_id
    for batch in range(10_000 // MAX_RELATIONS):
        ada.remember(
            f"Spokes {batch}",
            audience_to="workspace",
            mention_ids=[hub_id],
            relations=[
                {
                    "subject": {"entity_id": hub_id},
                    "predicate": "links",
                    "object": {"name": f"Spoke {batch}-{k}"},
                }
                for k in range(MAX_RELATIONS)
            ],
        )
    # Three hops from a spoke cross the hub and fan out again: the caps hold,
    # within the call's deadline.
    spoke = ada.lookup("Spoke 0-0").entities[0].id
    for start, hops in ((hub_id, 1), (hub_id, 3), (spoke, 3)):
        walked = ada.neighbors(start, hops=hops, timeout=5.0)
        assert walked.truncated
        assert len(walked.nodes) <= MAX_NEIGHBOR_NODES
        assert len(walked.edges) <= MAX_NEIGHBOR_EDGES
        ids = {n.entity.id for n in walked.nodes}
        assert all({e.subject.id, e.object.id} <= ids for e in walked.edges)
    card = ada.lookup("Hub").entities[0]
    assert card.truncated and len(card.relations) == MAX_CARD_ITEMS


def test_claims_written_for_another_member_reach_that_member(team: Team) -> None:
    """The writer cannot read the memory back once it is another member's; its
    claims' entities are still mentioned, so the addressee sees them."""
    ada, bob = team.clients["ada"], team.clients["bob"]
    memory = ada.remember(
        "For Bob",
        audience_to=team.members["bob"],
        claims=[{"entity": {"name": "Bob's dentist"}, "attribute": "day", "value": "Tuesday"}],
        relations=[
            {
                "subject": {"name": "Bob's dentist"},
                "predicate": "near",
                "object": {"name": "The station"},
            }
        ],
    ).memory
    read = bob.read([memory.id]).memories[0]
    assert sorted(m.name for m in read.mentions) == ["Bob's dentist", "The station"]
    card = bob.lookup("bob's dentist").entities[0]
    assert [a.value for a in card.attributes] == ["Tuesday"]
    assert [r.other.name for r in card.relations] == ["The station"]
    assert ada.lookup("Bob's dentist").entities == []
    # Superseded by Bob: the successor carries the claims.
    moved = bob.supersede(read.id, read.revision, "For Cy now")
    assert moved.memory.claims and bob.lookup("Bob's dentist").entities


def test_recall_carries_the_card_of_an_entity_the_query_names(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    shared = ada.remember(
        "Apollo launch plan",
        "The Apollo launch is planned for June.",
        audience_to="workspace",
        claims=[
            {
                "entity": {"name": "Apollo Launch", "type": "project"},
                "attribute": "month",
                "value": "June",
            }
        ],
    ).memory
    other = ada.remember("Launch checklist", "A launch needs a checklist.", audience_to="workspace")
    ada.remember(
        "Ada's private contact",
        claims=[{"entity": {"name": "Quentin Marsh"}, "attribute": "phone", "value": "555"}],
    )
    outcome = bob.recall("when is the apollo launch?", mode="lexical").outcome
    assert [c.name for c in outcome.entities] == ["Apollo Launch"]
    assert outcome.entities[0].attributes[0].value == "June"
    # Cards sit beside the ranked memories; the filter narrows to mentions.
    entity_id = outcome.entities[0].id
    assert {r.memory.id for r in outcome.results} >= {shared.id, other.memory.id}
    only = bob.recall("launch", mode="lexical", mention_ids=[entity_id]).outcome
    assert [r.memory.id for r in only.results] == [shared.id]
    # A name known only from another member's private memory has no card,
    # and answers exactly as a name nobody used.
    hidden = bob.recall("what is Quentin Marsh's number", mode="lexical").outcome
    assert list(hidden.entities) == []
    assert [c.name for c in ada.recall("Quentin Marsh", mode="lexical").outcome.entities] == [
        "Quentin Marsh"
    ]
    # Part of a name is not the name.
    assert list(bob.recall("apollo", mode="lexical").outcome.entities) == []


def test_timeline_of_an_entity_in_valid_time_order_with_paging(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    first = ada.remember(
        "Vale elected",
        audience_to="workspace",
        claims=[
            {
                "entity": {"name": "Mayor Vale"},
                "attribute": "office",
                "value": "mayor",
                "valid_from": "2020-01-01T00:00:00Z",
                "valid_until": "2024-01-01T00:00:00Z",
            }
        ],
    ).memory
    vale = first.claims[0].entity.id
    second = ada.remember(
        "Vale's party",
        audience_to="workspace",
        mention_ids=[vale],
        relations=[
            {
                "subject": {"entity_id": vale},
                "predicate": "member_of",
                "object": {"name": "Civic Party"},
                "valid_from": "2019-05-01T00:00:00Z",
            }
        ],
    ).memory
    private = ada.remember(
        "Vale's health",
        mention_ids=[vale],
        claims=[
            {
                "entity": {"entity_id": vale},
                "attribute": "health",
                "value": "private",
                "valid_from": "2021-01-01T00:00:00Z",
            }
        ],
    ).memory
    fixed = ada.correct(second.id, second.revision, "typo", title="Vale's party (fixed)").memory
    got = bob.timeline(entity_id=vale).events
    kinds = [(e.kind, e.memory_id) for e in got]
    assert kinds[:3] == [
        ("relation_start", second.id),
        ("claim_start", first.id),
        ("claim_end", first.id),
    ]
    assert ("memory", first.id) in kinds and ("memory", second.id) in kinds
    assert ("correction", fixed.id) in kinds
    # Only what Bob may see: nothing of Ada's private memory.
    assert all(e.memory_id != private.id for e in got)
    assert any(e.memory_id == private.id for e in ada.timeline(entity_id=vale).events)
    ats = [e.at.ToDatetime() for e in got]
    assert ats == sorted(ats)
    # A window, and a forgotten memory's events vanish.
    window = bob.timeline(entity_id=vale, start="2019-01-01T00:00:00Z", end="2023-01-01T00:00:00Z")
    assert [e.kind for e in window.events] == ["relation_start", "claim_start"]
    ada.forget(first.id, "gone")
    assert all(e.memory_id != first.id for e in bob.timeline(entity_id=vale).events)
    err = rpc_error(lambda: bob.timeline(entity_id=str(uuid.uuid4())))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    err = rpc_error(lambda: bob.timeline(page_token="not-a-token"))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "page_token" in (err.details() or "")


def test_a_timeline_holds_the_claims_held_now_once(team: Team) -> None:
    """A claim a correction replaced, or a supersession carried to its
    successor, is one event of what is held now, not two (the correction or
    supersession event marks the change; lookup's history keeps the old)."""
    ada = team.clients["ada"]
    memory = ada.remember(
        "Rhea's team",
        audience_to="workspace",
        claims=[
            {"entity": {"name": "Rhea Stone"}, "attribute": "team", "value": "search",
             "valid_from": "2020-01-01T00:00:00Z"}
        ],
        relations=[
            {"subject": {"name": "Rhea Stone"}, "predicate": "works_with",
             "object": {"name": "Ivo Brandt"}, "valid_from": "2020-01-01T00:00:00Z"}
        ],
    ).memory  # fmt: skip
    rhea = memory.claims[0].entity.id
    corrected = ada.correct(
        memory.id,
        memory.revision,
        "she moved teams",
        claims=[
            {"entity": {"entity_id": rhea}, "attribute": "team", "value": "ranking",
             "valid_from": "2021-01-01T00:00:00Z"}
        ],
    ).memory  # fmt: skip
    carried = ada.supersede(corrected.id, corrected.revision, "Rhea's team, confirmed").memory

    def starts() -> list[tuple[str, str, str]]:
        events = ada.timeline(entity_id=rhea).events
        return [(e.kind, e.summary, e.memory_id) for e in events if e.kind.endswith("_start")]

    assert starts() == [("claim_start", "Rhea Stone: team = ranking", carried.id)]
    kinds = [e.kind for e in ada.timeline(entity_id=rhea).events]
    assert kinds.count("correction") == 1 and kinds.count("supersession") == 1
    history = ada.lookup("Rhea Stone", include_history=True).entities[0]
    assert sorted(a.value for a in history.attributes) == ["ranking", "ranking", "search"]


def test_timeline_pages_through_the_workspace(team: Team) -> None:
    from recallatron.vocabulary import MAX_TIMELINE_EVENTS

    ada = team.clients["ada"]
    made = {ada.remember(f"note {i}", audience_to="workspace").memory.id for i in range(130)}
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        page = ada.timeline(page_token=token)
        assert len(page.events) <= MAX_TIMELINE_EVENTS
        seen += [e.memory_id for e in page.events if e.kind == "memory"]
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert pages == 2 and set(seen) == made and len(seen) == len(made)


def test_episodes_hold_their_memories_and_their_own_trust(team: Team) -> None:
    ada, bob = team.clients["ada"], team.clients["bob"]
    mine = ada.create_episode("Ada's 1:1", "2026-11-30T10:00:00Z", "2026-11-30T11:00:00Z")
    shared = ada.create_episode(
        "Team retro",
        "2026-11-30T14:00:00Z",
        audience_to="workspace",
        member_ids=[team.members["bob"]],
    )
    a = ada.remember("Retro point", audience_to="workspace", episode_id=shared.episode_id).memory
    b = ada.remember("Private point", episode_id=mine.episode_id).memory
    assert a.episode_id == shared.episode_id and b.episode_id == mine.episode_id
    assert [e.memory_id for e in bob.timeline(episode_id=shared.episode_id).events] == [a.id]
    # Bob may not see Ada's private episode: not in a timeline, not on a write.
    err = rpc_error(lambda: bob.timeline(episode_id=mine.episode_id))
    assert err.code() == grpc.StatusCode.NOT_FOUND
    err = rpc_error(lambda: bob.remember("x", episode_id=mine.episode_id))
    assert err.code() == grpc.StatusCode.NOT_FOUND and "episode_id" in (err.details() or "")
    # A workspace memory in a private episode: Bob reads it, not its episode.
    c = ada.remember("Shared, from the 1:1", audience_to="workspace", episode_id=mine.episode_id)
    assert bob.read([c.memory.id]).memories[0].episode_id == ""


@pytest.mark.parametrize(
    ("gap_minutes", "same"), [(0, True), (119, True), (120, True), (121, False), (600, False)]
)
def test_captured_turns_share_an_episode_until_a_two_hour_gap(
    team: Team, gap_minutes: int, same: bool
) -> None:
    from datetime import timedelta

    ada = team.clients["ada"]
    start = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
    first = ada.capture("Remember that the standup moves to 9:15.", occurred_at=start)
    second = ada.capture(
        "Remember that the retro is on Fridays.",
        occurred_at=start + timedelta(minutes=gap_minutes),
    )
    assert first.stored and second.stored
    assert first.memory.episode_id
    assert (first.memory.episode_id == second.memory.episode_id) is same


def test_forget_removes_an_entity_that_took_part_in_an_episode(team: Team) -> None:
    ada = team.clients["ada"]
    memory = ada.remember("Met Noor", mention_names=["Noor Haddad"]).memory
    noor = memory.mentions[0].entity_id
    episode = ada.create_episode("Coffee", "2026-11-03T08:00:00Z", entity_ids=[noor])
    ada.forget(memory.id, "asked to")
    assert ada.lookup("Noor Haddad").entities == []
    assert [e.memory_id for e in ada.timeline(episode_id=episode.episode_id).events] == []


def test_a_crafted_timeline_page_token_is_refused_by_name(team: Team) -> None:
    """A page token is this service's own: one whose kind lies past the event
    kinds, or whose key holds NUL or a lone surrogate (JSON's "\\ud800", no
    character at all), reached the database (INTERNAL)."""
    from recallatron.vocabulary import MAX_TIMELINE_EVENTS
    from services.store.domain import page_tokens

    ada = team.clients["ada"]
    for i in range(MAX_TIMELINE_EVENTS + 1):
        ada.remember(f"entry {i}", audience_to="workspace")
    real = page_tokens.decode(ada.timeline().next_page_token)
    for change in ({"kind": 1099511627776}, {"kind": 0}, {"key": "a\x00b"}, {"key": "\ud800"}):
        token = page_tokens.encode({**real, **change})
        err = rpc_error(lambda t=token: ada.timeline(page_token=t))
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (change, err.details())
        assert "page_token" in (err.details() or "")
    assert ada.timeline(page_token=page_tokens.encode(real)).events


def test_a_page_token_nested_past_the_json_parsers_depth_is_refused_by_name(team: Team) -> None:
    """A token of JSON nested deeper than the parser recurses (well within a
    request's size) raised RecursionError past the token check: INTERNAL."""
    import base64

    ada = team.clients["ada"]
    for nested in (b"[" * 100_000, b'{"a":' * 50_000):
        token = base64.urlsafe_b64encode(nested).decode()
        for call in (
            lambda t=token: ada.lookup("Robin", page_token=t),
            lambda t=token: ada.timeline(page_token=t),
        ):
            err = rpc_error(call)
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
            assert "page_token" in (err.details() or "")
