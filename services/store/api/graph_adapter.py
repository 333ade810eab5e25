"""Graph messages to domain values and back, for the store's gRPC adapter
(services/store/api/server.py). Plain translation; the rules live in
services/store/domain/graph.py."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from recallatron import convert, errors
from recallatron.v1 import common_pb2 as cpb
from services.store.domain import entity_merge, graph


def entity_of(msg: cpb.MentionInput, where: str) -> graph.EntityIn:
    which = msg.WhichOneof("target")
    if which == "entity_id":
        return graph.EntityIn(entity_id=msg.entity_id, type=msg.type or None)
    if which == "name":
        return graph.EntityIn(name=msg.name, type=msg.type or None)
    raise errors.InvalidArgument(where, "give an entity_id or a name")


def _qualifiers(msg: Any, where: str) -> dict[str, Any]:
    """What a claim and a relation input both carry (graph.QualifiersIn's
    fields): valid_from, valid_until and confidence, each None when not given
    (``where``: the input's field)."""

    def when(name: str) -> datetime | None:
        return convert.when(getattr(msg, name), msg.HasField(name), f"{where}.{name}")

    return {
        "valid_from": when("valid_from"),
        "valid_until": when("valid_until"),
        "confidence": msg.confidence if msg.HasField("confidence") else None,
    }


def graph_of(req: Any) -> graph.GraphIn:
    """The claims, relations and aliases of a write request."""
    claims = []
    for i, c in enumerate(req.claims):
        qualifiers = _qualifiers(c, f"claims[{i}]")
        entity = entity_of(c.entity, f"claims[{i}].entity")
        claims.append(graph.ClaimIn(entity, c.attribute, c.value, **qualifiers))
    relations = []
    for i, r in enumerate(req.relations):
        qualifiers = _qualifiers(r, f"relations[{i}]")
        subject = entity_of(r.subject, f"relations[{i}].subject")
        object_ = entity_of(r.object, f"relations[{i}].object")
        relations.append(graph.RelationIn(subject, r.predicate, object_, **qualifiers))
    aliases = [
        graph.AliasIn(entity_of(a.entity, f"aliases[{i}].entity"), a.alias)
        for i, a in enumerate(req.aliases)
    ]
    return graph.GraphIn(claims, relations, aliases)


def entity_msg(e: graph.EntityRefView) -> cpb.EntityRef:
    return cpb.EntityRef(id=e.id, name=e.name, type=e.type or "")


def _stated(view: graph.Stated) -> dict[str, Any]:
    """A claim message's fields for which memory states it and when."""
    out: dict[str, Any] = {
        "memory_id": view.memory_id,
        "stated_at": convert.timestamp(view.stated_at),
    }
    if view.retired_at is not None:
        out["retired_at"] = convert.timestamp(view.retired_at)
    return out


def _qualified(view: graph.Qualified) -> dict[str, Any]:
    """The same, with when the claim holds and how sure it is."""
    out = {"confidence": view.confidence, **_stated(view)}
    if view.valid_from is not None:
        out["valid_from"] = convert.timestamp(view.valid_from)
    if view.valid_until is not None:
        out["valid_until"] = convert.timestamp(view.valid_until)
    return out


def attribute_msg(a: graph.AttributeView) -> cpb.AttributeClaim:
    return cpb.AttributeClaim(
        entity=entity_msg(a.entity),
        attribute=a.attribute,
        value=a.value,
        **_qualified(a),
    )


def relation_msg(r: graph.RelationView) -> cpb.RelationClaim:
    return cpb.RelationClaim(
        subject=entity_msg(r.subject),
        predicate=r.predicate,
        object=entity_msg(r.object),
        **_qualified(r),
    )


def alias_msg(a: graph.AliasView) -> cpb.AliasClaim:
    return cpb.AliasClaim(entity=entity_msg(a.entity), alias=a.alias, **_stated(a))


_DIRECTION = {
    "outgoing": cpb.RELATION_DIRECTION_OUTGOING,
    "incoming": cpb.RELATION_DIRECTION_INCOMING,
}


def card_msg(card: graph.EntityCard) -> cpb.EntityCard:
    aliases: list[str] = []
    for a in card.aliases:
        if a.alias not in aliases:
            aliases.append(a.alias)
    return cpb.EntityCard(
        id=card.entity.id,
        name=card.entity.name,
        type=card.entity.type or "",
        aliases=aliases,
        attributes=[attribute_msg(a) for a in card.attributes],
        relations=[
            cpb.EntityRelation(
                predicate=r.predicate,
                direction=_DIRECTION[r.direction],
                other=entity_msg(r.other),
                **_qualified(r),
            )
            for r in card.relations
        ],
        mentioned_by=card.mentioned_by,
        alias_claims=[alias_msg(a) for a in card.aliases],
        truncated=card.truncated,
        merged=[entity_msg(m) for m in card.merged],
    )


def nodes_msg(found: graph.Neighborhood) -> list[cpb.GraphNode]:
    return [
        cpb.GraphNode(
            entity=entity_msg(e),
            depth=d,
            merged=[entity_msg(m) for m in found.merged.get(e.id, ())],
        )
        for e, d in found.nodes
    ]


def pair_msg(pair: entity_merge.EntityPair) -> cpb.EntityPair:
    msg = cpb.EntityPair(
        first=card_msg(pair.first), second=card_msg(pair.second), reasons=pair.reasons
    )
    if pair.context_cosine is not None:
        msg.context_cosine = pair.context_cosine
    return msg


def merge_msg(merge: entity_merge.Merge) -> cpb.EntityMerge:
    return cpb.EntityMerge(
        id=merge.id,
        kept=entity_msg(merge.kept),
        merged=entity_msg(merge.merged),
        decided_by=merge.decided_by,
        decided_at=convert.timestamp(merge.decided_at),
    )
