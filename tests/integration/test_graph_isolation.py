"""Graph eligibility (design §4) over random members, audiences, purposes,
claims, relations and aliases: for every member x purpose, lookup and
neighbors return exactly what an oracle over the eligible stating memories
says, including whether an entity exists at all, its aliases and its counts."""

from __future__ import annotations

import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallatron.v1 import common_pb2 as cpb
from recallatron.vocabulary import PURPOSES
from services.store.domain.trust import Trust, eligible
from tests.conftest import make_team

pytestmark = pytest.mark.integration

HANDLES = ("ada", "bob", "cy")
NAMES = ("Alpha", "Beta", "Gamma")
PREDICATES = ("knows", "owns")

memory_specs = st.lists(
    st.tuples(
        st.sampled_from(HANDLES),  # creator
        st.sampled_from(("workspace", *HANDLES)),  # audience
        st.frozensets(st.sampled_from(PURPOSES), min_size=1),
        st.lists(st.sampled_from(NAMES), max_size=2),  # attribute claims about these
        st.lists(
            st.tuples(st.sampled_from(NAMES), st.sampled_from(PREDICATES), st.sampled_from(NAMES)),
            max_size=2,
            unique=True,  # a write states each relation once (a repeat is refused)
        ),
        st.lists(st.sampled_from(NAMES), max_size=1),  # aliases of these
    ),
    min_size=1,
    max_size=6,
)


@dataclass
class Oracle:
    trust: dict[str, tuple[Trust, bool]] = field(default_factory=dict)  # memory -> trust, gone
    names: dict[str, str] = field(default_factory=dict)  # entity -> name
    mentions: dict[str, set[str]] = field(default_factory=dict)  # entity -> memories
    attributes: list[tuple[str, str, str, str]] = field(default_factory=list)  # e, a, v, m
    relations: list[tuple[str, str, str, str]] = field(default_factory=list)  # s, p, o, m
    aliases: list[tuple[str, str, str]] = field(default_factory=list)  # e, alias, m

    def sees(self, memory: str, member: str, purpose: str) -> bool:
        trust, gone = self.trust[memory]
        return eligible(trust, gone, member, purpose)

    def entity_visible(self, entity: str, member: str, purpose: str) -> bool:
        return any(self.sees(m, member, purpose) for m in self.mentions.get(entity, ()))

    def lookup(self, name: str, member: str, purpose: str) -> dict[str, dict[str, object]]:
        key = name.casefold()
        hits = {e for e, n in self.names.items() if n.casefold() == key} | {
            e for e, a, m in self.aliases if a.casefold() == key and self.sees(m, member, purpose)
        }
        out: dict[str, dict[str, object]] = {}
        for e in hits:
            if not self.entity_visible(e, member, purpose):
                continue
            out[e] = {
                "attributes": sorted(
                    (a, v, m)
                    for x, a, v, m in self.attributes
                    if x == e and self.sees(m, member, purpose)
                ),
                "relations": sorted(
                    [
                        (p, cpb.RELATION_DIRECTION_OUTGOING, o, m)
                        for s, p, o, m in self.relations
                        if s == e and self.sees(m, member, purpose)
                    ]
                    + [
                        # A relation to itself is listed once, as outgoing.
                        (p, cpb.RELATION_DIRECTION_INCOMING, s, m)
                        for s, p, o, m in self.relations
                        if o == e and s != e and self.sees(m, member, purpose)
                    ]
                ),
                "aliases": sorted(
                    {a for x, a, m in self.aliases if x == e and self.sees(m, member, purpose)}
                ),
                "mentioned_by": sorted(
                    m for m in self.mentions.get(e, ()) if self.sees(m, member, purpose)
                ),
            }
        return out

    def neighbors(self, start: str, hops: int, member: str, purpose: str) -> dict[str, int]:
        depth = {start: 0}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            if depth[node] == hops:
                continue
            for s, _p, o, m in self.relations:
                if not self.sees(m, member, purpose) or node not in (s, o):
                    continue
                other = o if node == s else s
                if other not in depth:
                    depth[other] = depth[node] + 1
                    queue.append(other)
        return depth


def _card(c: cpb.EntityCard) -> dict[str, object]:
    return {
        "attributes": sorted((a.attribute, a.value, a.memory_id) for a in c.attributes),
        "relations": sorted(
            (r.predicate, r.direction, r.other.id, r.memory_id) for r in c.relations
        ),
        "aliases": sorted(c.aliases),
        "mentioned_by": sorted(c.mentioned_by),
    }


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(memories=memory_specs, forget_index=st.one_of(st.none(), st.integers(0, 5)))
def test_lookup_and_neighbors_match_the_oracle(stack, operator, memories, forget_index) -> None:  # type: ignore[no-untyped-def]
    team = make_team(stack, operator, HANDLES)
    oracle = Oracle()
    order: list[str] = []
    for creator, audience, purposes, attr_names, rels, alias_names in memories:
        member = team.members[creator]
        purpose = sorted(purposes)[0]

        def ref(name: str, creator_id: str = member, purpose: str = purpose) -> dict[str, str]:
            # An entity of that name the creator can see is named by id; else a new one.
            for e, n in oracle.names.items():
                if n == name and oracle.entity_visible(e, creator_id, purpose):
                    return {"entity_id": e}
            return {"name": name}

        claims: list[dict[str, Any]] = [
            {"entity": ref(n), "attribute": "note", "value": f"v-{uuid.uuid4().hex[:6]}"}
            for n in attr_names
        ]
        relations = [{"subject": ref(s), "predicate": p, "object": ref(o)} for s, p, o in rels]
        aliases: list[dict[str, Any]] = [
            {"entity": ref(n), "alias": f"aka {n}"} for n in alias_names
        ]
        aud = "workspace" if audience == "workspace" else team.members[audience]
        m = (
            team.clients[creator]
            .remember(
                "graph memory",
                audience_to=aud,
                purposes=sorted(purposes),
                purpose=purpose,
                claims=claims,
                relations=relations,
                aliases=aliases,
            )
            .memory
        )
        oracle.trust[m.id] = (Trust(None if audience == "workspace" else aud, purposes), False)
        order.append(m.id)
        if audience not in ("workspace", creator):
            # Written for another member: only that member reads it back whole.
            m = team.clients[audience].read([m.id], purpose=purpose).memories[0]
        ids = {x.name: x.entity_id for x in m.mentions}
        for x in m.mentions:
            oracle.names[x.entity_id] = x.name
            oracle.mentions.setdefault(x.entity_id, set()).add(m.id)
        for c in claims:
            oracle.attributes.append(
                (ids[_name(c["entity"], oracle)], "note", str(c["value"]), m.id)
            )
        for r in relations:
            oracle.relations.append(
                (
                    ids[_name(r["subject"], oracle)],
                    str(r["predicate"]),
                    ids[_name(r["object"], oracle)],
                    m.id,
                )
            )
        for a in aliases:
            oracle.aliases.append((ids[_name(a["entity"], oracle)], str(a["alias"]), m.id))
    if forget_index is not None and forget_index < len(order):
        gone = order[forget_index]
        owner = team.clients[HANDLES[0]]  # the workspace owner may forget anything it sees
        for purpose in PURPOSES:
            if oracle.sees(gone, team.members[HANDLES[0]], purpose):
                owner.forget(gone, "test", purpose=purpose)
                oracle.trust[gone] = (oracle.trust[gone][0], True)
                for e in oracle.mentions:
                    oracle.mentions[e].discard(gone)
                oracle.attributes = [x for x in oracle.attributes if x[3] != gone]
                oracle.relations = [x for x in oracle.relations if x[3] != gone]
                oracle.aliases = [x for x in oracle.aliases if x[2] != gone]
                break
    for handle in HANDLES:
        member = team.members[handle]
        client = team.clients[handle]
        for purpose in PURPOSES:
            for name in (*NAMES, *(f"aka {n}" for n in NAMES)):
                expected = oracle.lookup(name, member, purpose)
                got = {c.id: _card(c) for c in client.lookup(name, purpose=purpose).entities}
                assert got == expected, (handle, purpose, name)
            for entity in oracle.names:
                if not oracle.entity_visible(entity, member, purpose):
                    with pytest.raises(grpc.RpcError) as err:
                        client.neighbors(entity, hops=2, purpose=purpose)
                    assert err.value.code() == grpc.StatusCode.NOT_FOUND
                    assert err.value.details() == "entity_id: entity not found"
                    continue
                walked = client.neighbors(entity, hops=2, purpose=purpose)
                assert {n.entity.id: n.depth for n in walked.nodes} == oracle.neighbors(
                    entity, 2, member, purpose
                ), (handle, purpose, entity)
                for edge in walked.edges:
                    assert oracle.sees(edge.memory_id, member, purpose)
    for client in team.clients.values():
        client.close()


def _name(entity: dict[str, str], oracle: Oracle) -> str:
    return entity.get("name") or oracle.names[entity["entity_id"]]
