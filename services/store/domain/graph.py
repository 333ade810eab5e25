"""The memory graph (design §3, §7) as plain domain code: aliases, attribute
claims and relation claims, each stated by one memory; lookup by exact name
or alias, and a bounded walk over relations. Writing happens inside the
memory tools' transaction (services/store/domain/memories.py calls `GraphWriter`);
reading inside the caller's, so row-level security makes a claim visible
exactly when its memory is, and an entity only through a visible mention."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg

from recallatron import errors
from recallatron.vocabulary import (
    MAX_ALIASES,
    MAX_CARD_ITEMS,
    MAX_CLAIM_VALUE,
    MAX_CLAIMS,
    MAX_ENTITY_NAME,
    MAX_HOPS,
    MAX_LOOKUP_ENTITIES,
    MAX_NAME_WORDS,
    MAX_NEIGHBOR_EDGES,
    MAX_NEIGHBOR_NODES,
    MAX_RECALL_ENTITIES,
    MAX_RELATIONS,
)
from services.store.domain import entity_groups
from services.store.domain import graph_rules as rules
from services.store.domain import validation as v
from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import GENERIC_PLANS, Caller, caller_transaction
from services.store.sql import graph_queries as gq

# Predicates one neighbors call may filter on.
MAX_PREDICATES = 20


@dataclass(frozen=True)
class EntityIn:
    """An entity named by a write: an existing one by id, or a new one by name
    (with an optional type). The same shape as a mention."""

    entity_id: str | None = None
    name: str | None = None
    type: str | None = None


@dataclass(frozen=True)
class ClaimIn:
    entity: EntityIn
    attribute: str
    value: str
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    confidence: float | None = None


@dataclass(frozen=True)
class RelationIn:
    subject: EntityIn
    predicate: str
    object: EntityIn
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    confidence: float | None = None


@dataclass(frozen=True)
class AliasIn:
    entity: EntityIn
    alias: str


@dataclass(frozen=True)
class GraphIn:
    """What one write states about the graph."""

    claims: Sequence[ClaimIn] = ()
    relations: Sequence[RelationIn] = ()
    aliases: Sequence[AliasIn] = ()

    def __bool__(self) -> bool:
        return bool(self.claims or self.relations or self.aliases)


NO_GRAPH = GraphIn()


EntityRefView = entity_groups.EntityRef


@dataclass(frozen=True)
class AttributeView:
    entity: EntityRefView
    attribute: str
    value: str
    valid_from: datetime | None
    valid_until: datetime | None
    confidence: float
    memory_id: str
    stated_at: datetime
    retired_at: datetime | None


@dataclass(frozen=True)
class RelationView:
    subject: EntityRefView
    predicate: str
    object: EntityRefView
    valid_from: datetime | None
    valid_until: datetime | None
    confidence: float
    memory_id: str
    stated_at: datetime
    retired_at: datetime | None


@dataclass(frozen=True)
class AliasView:
    entity: EntityRefView
    alias: str
    memory_id: str
    stated_at: datetime
    retired_at: datetime | None


@dataclass(frozen=True)
class EntityRelationView:
    predicate: str
    direction: str  # outgoing | incoming
    other: EntityRefView
    valid_from: datetime | None
    valid_until: datetime | None
    confidence: float
    memory_id: str
    stated_at: datetime
    retired_at: datetime | None


@dataclass
class EntityCard:
    entity: EntityRefView
    attributes: list[AttributeView] = field(default_factory=list)
    relations: list[EntityRelationView] = field(default_factory=list)
    aliases: list[AliasView] = field(default_factory=list)
    mentioned_by: list[str] = field(default_factory=list)
    truncated: bool = False
    # The entities a person merged into this one (design §8.5), oldest first.
    merged: list[EntityRefView] = field(default_factory=list)


@dataclass(frozen=True)
class Neighborhood:
    nodes: list[tuple[EntityRefView, int]]
    edges: list[RelationView]
    truncated: bool
    # Per node id, the entities merged into it.
    merged: dict[str, list[EntityRefView]] = field(default_factory=dict)


# -- validation ------------------------------------------------------------------


def validate_entity(ref: EntityIn, where: str) -> None:
    if (ref.entity_id is None) == (ref.name is None):
        raise errors.InvalidArgument(where, "give an entity_id or a name")
    if ref.entity_id is not None:
        v.uuid_str(ref.entity_id, f"{where}.entity_id")
        if ref.type:
            raise errors.InvalidArgument(f"{where}.type", "only a new entity (a name) takes a type")
    else:
        name = v.text(ref.name or "", f"{where}.name", MAX_ENTITY_NAME)
        if not rules.name_key(name):
            raise errors.InvalidArgument(f"{where}.name", "is required")
        if ref.type:
            rules.identifier(ref.type, f"{where}.type")


def validate(graph: GraphIn) -> None:
    """Every rule a write's graph part must meet, before anything is written."""
    if len(graph.claims) > MAX_CLAIMS:
        raise errors.InvalidArgument("claims", f"at most {MAX_CLAIMS} allowed")
    if len(graph.relations) > MAX_RELATIONS:
        raise errors.InvalidArgument("relations", f"at most {MAX_RELATIONS} allowed")
    if len(graph.aliases) > MAX_ALIASES:
        raise errors.InvalidArgument("aliases", f"at most {MAX_ALIASES} allowed")
    for i, c in enumerate(graph.claims):
        where = f"claims[{i}]"
        validate_entity(c.entity, f"{where}.entity")
        rules.identifier(c.attribute, f"{where}.attribute")
        v.text(c.value, f"{where}.value", MAX_CLAIM_VALUE)
        rules.valid_span(c.valid_from, c.valid_until, where)
        _confidence(c.confidence, where)
    for i, r in enumerate(graph.relations):
        where = f"relations[{i}]"
        validate_entity(r.subject, f"{where}.subject")
        rules.identifier(r.predicate, f"{where}.predicate")
        validate_entity(r.object, f"{where}.object")
        rules.valid_span(r.valid_from, r.valid_until, where)
        _confidence(r.confidence, where)
    for i, a in enumerate(graph.aliases):
        where = f"aliases[{i}]"
        validate_entity(a.entity, f"{where}.entity")
        alias = v.text(a.alias, f"{where}.alias", MAX_ENTITY_NAME)
        if not rules.name_key(alias):
            raise errors.InvalidArgument(f"{where}.alias", "is required")


def _confidence(value: float | None, where: str) -> float:
    try:
        return v.confidence(value)
    except errors.InvalidArgument:
        raise errors.InvalidArgument(f"{where}.confidence", "must lie in [0, 1]") from None


# -- writing ---------------------------------------------------------------------


class GraphWriter:
    """Resolves the entities one write names and writes what it states, on the
    write's own connection and transaction. Within one write the same new
    name (after normalisation) is one new entity, wherever it appears, with
    the type any of its appearances gives."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self._new: dict[str, list[Any]] = {}  # key -> [id, name, type]
        self._known: set[str] = set()

    def entity(self, ref: EntityIn, where: str) -> str:
        if ref.entity_id is not None:
            entity_id = v.uuid_str(ref.entity_id, f"{where}.entity_id")
            if entity_id not in self._known:
                # Only an entity the caller may see can be named (row security).
                if self.conn.execute(gq.ENTITY_VISIBLE, (entity_id,)).fetchone() is None:
                    raise errors.InvalidArgument(f"{where}.entity_id", "no such entity")
                self._known.add(entity_id)
            return entity_id
        name = (ref.name or "").strip()
        key = rules.name_key(name)
        pending = self._new.get(key)
        if pending is None:
            pending = self._new[key] = [str(uuid.uuid4()), name, ref.type or None]
        elif ref.type:
            if pending[2] and pending[2] != ref.type:
                raise errors.InvalidArgument(
                    f"{where}.type", f"the new entity {name!r} is given two types in this call"
                )
            pending[2] = ref.type
        return str(pending[0])

    def write(self, memory_id: str, mentions: Sequence[EntityIn], graph: GraphIn) -> None:
        """Writes the mentions, claims, relations and aliases ``memory_id``
        states, the new entities they name, and a mention of every entity a
        claim names."""
        mentioned = [self.entity(m, f"mentions[{i}]") for i, m in enumerate(mentions)]
        attributes = [
            (
                str(uuid.uuid4()),
                memory_id,
                self.entity(c.entity, f"claims[{i}].entity"),
                c.attribute,
                c.value,
                c.valid_from,
                c.valid_until,
                v.confidence(c.confidence),
            )
            for i, c in enumerate(graph.claims)
        ]
        relations = [
            (
                str(uuid.uuid4()),
                memory_id,
                self.entity(r.subject, f"relations[{i}].subject"),
                r.predicate,
                self.entity(r.object, f"relations[{i}].object"),
                r.valid_from,
                r.valid_until,
                v.confidence(r.confidence),
            )
            for i, r in enumerate(graph.relations)
        ]
        aliases = [
            (
                str(uuid.uuid4()),
                memory_id,
                self.entity(a.entity, f"aliases[{i}].entity"),
                a.alias.strip(),
                rules.name_key(a.alias),
            )
            for i, a in enumerate(graph.aliases)
        ]
        # Every entity a claim names is mentioned by the memory: entity
        # visibility rests on mentions (0008_graph.sql).
        named = [r[2] for r in attributes] + [r[2] for r in relations]
        named += [r[4] for r in relations] + [r[2] for r in aliases]
        with self.conn.cursor() as cur:
            new = [(e[0], e[1], e[2], key) for key, e in self._new.items()]
            if new:
                cur.executemany(gq.INSERT_ENTITY, new)
                self._known.update(e[0] for e in new)
                self._new.clear()
            self._mention(cur, memory_id, [*mentioned, *named])
            if attributes:
                cur.executemany(gq.INSERT_ATTRIBUTE, attributes)
            if relations:
                cur.executemany(gq.INSERT_RELATION, relations)
            if aliases:
                cur.executemany(gq.INSERT_ALIAS, aliases)

    @staticmethod
    def _mention(cur: psycopg.Cursor[Any], memory_id: str, entities: Sequence[str]) -> None:
        unique = list(dict.fromkeys(entities))
        if unique:
            cur.executemany(gq.INSERT_MENTION, [(memory_id, e) for e in unique])

    def retire(self, memory_id: str) -> None:
        for statement in gq.RETIRE:
            self.conn.execute(statement, (memory_id,))

    def carry(self, old_id: str, new_id: str) -> None:
        """Supersede: the successor states the old memory's current claims."""
        params = {"old": old_id, "new": new_id}
        named = [str(r[0]) for r in self.conn.execute(gq.CARRIED_ENTITIES, params).fetchall()]
        with self.conn.cursor() as cur:
            for statement in gq.CARRY:
                cur.execute(statement, params)
            self._mention(cur, new_id, named)


# -- reading a memory's claims ---------------------------------------------------


def _ref(id_: Any, name: str, type_: str | None) -> EntityRefView:
    return EntityRefView(str(id_), name, type_)


def claims_of(
    conn: psycopg.Connection, ids: str
) -> tuple[
    dict[str, list[AttributeView]], dict[str, list[RelationView]], dict[str, list[AliasView]]
]:
    """What each memory of ``ids`` (a uuid array literal) states, keyed by memory."""
    attributes: dict[str, list[AttributeView]] = {}
    relations: dict[str, list[RelationView]] = {}
    aliases: dict[str, list[AliasView]] = {}
    with conn.pipeline():
        a_cur = conn.execute(gq.CLAIMS_OF, (ids,))
        r_cur = conn.execute(gq.RELATIONS_OF, (ids,))
        l_cur = conn.execute(gq.ALIASES_OF, (ids,))
    for mid, eid, name, type_, attr, value, vf, vu, conf, stated, retired in a_cur.fetchall():
        attributes.setdefault(str(mid), []).append(
            AttributeView(
                _ref(eid, name, type_), attr, value, vf, vu, conf, str(mid), stated, retired
            )
        )
    for row in r_cur.fetchall():
        mid = str(row[0])
        relations.setdefault(mid, []).append(
            RelationView(
                _ref(row[1], row[2], row[3]),
                row[4],
                _ref(row[5], row[6], row[7]),
                row[8],
                row[9],
                row[10],
                mid,
                row[11],
                row[12],
            )
        )
    for mid, eid, name, type_, alias, stated, retired in l_cur.fetchall():
        aliases.setdefault(str(mid), []).append(
            AliasView(_ref(eid, name, type_), alias, str(mid), stated, retired)
        )
    return attributes, relations, aliases


# -- the graph tools -------------------------------------------------------------

# Characters a query's words shed at their ends before they are compared
# with names ("Robin?" names Robin).
_PUNCTUATION = "\"'`.,;:!?()[]{}<>«»“”\u2018\u2019"
# Words of a recall query looked at for names.
_MAX_QUERY_WORDS = 64


def _cards(
    conn: psycopg.Connection, found: Sequence[Sequence[Any]], params: dict[str, Any]
) -> list[EntityCard]:
    """Each found entity (id, name, type) with its lists, as of params["at"]
    (or everything, with params["history"]), each cut at MAX_CARD_ITEMS. An
    entity merged with others answers as one card for its whole group, under
    the group's head, with every member's lists (design §8.5)."""
    if not found:
        return []
    grouped = entity_groups.groups(conn, [str(r[0]) for r in found])
    cards: dict[str, EntityCard] = {}
    card_of: dict[str, EntityCard] = {}
    for row in found:
        group = grouped.get(str(row[0]))
        if group is None or group.head.id in cards:
            continue
        card = EntityCard(group.head, merged=list(group.merged))
        cards[group.head.id] = card
        card_of.update((member, card) for member in group.ids)
    params = {**params, "ids": v.uuid_array(list(card_of)), "cap": MAX_CARD_ITEMS + 1}
    with conn.pipeline():
        attrs = conn.execute(gq.CARD_ATTRIBUTES, params)
        rels = conn.execute(gq.CARD_RELATIONS, params)
        aliases = conn.execute(gq.CARD_ALIASES, params)
        mentions = conn.execute(gq.CARD_MENTIONED_BY, params)
    for eid, attr, value, vf, vu, conf, mid, stated, retired in attrs.fetchall():
        card = card_of[str(eid)]
        card.attributes.append(
            AttributeView(card.entity, attr, value, vf, vu, conf, str(mid), stated, retired)
        )
    relation_rows = rels.fetchall()
    # The other end of a relation answers through its own group too.
    others = entity_groups.groups(conn, [str(row[2]) for row in relation_rows])
    for row in relation_rows:
        other = others.get(str(row[2]))
        card_of[str(row[0])].relations.append(
            EntityRelationView(
                row[5],
                row[1],
                other.head if other else _ref(row[2], row[3], row[4]),
                row[6],
                row[7],
                row[8],
                str(row[9]),
                row[10],
                row[11],
            )
        )
    for eid, alias, mid, stated, retired in aliases.fetchall():
        card = card_of[str(eid)]
        card.aliases.append(AliasView(card.entity, alias, str(mid), stated, retired))
    mentioned: dict[int, list[tuple[datetime, str]]] = {}
    for eid, mid, created in mentions.fetchall():
        mentioned.setdefault(id(card_of[str(eid)]), []).append((created, str(mid)))
    for card in cards.values():
        if card.merged:
            # Several members' lists: one order again, newest statement first.
            card.attributes.sort(key=lambda a: a.stated_at, reverse=True)
            card.relations.sort(key=lambda r: r.stated_at, reverse=True)
            card.aliases.sort(key=lambda a: a.stated_at, reverse=True)
        by_memory = sorted(mentioned.get(id(card), []), key=lambda m: (-m[0].timestamp(), m[1]))
        card.mentioned_by = list(dict.fromkeys(mid for _, mid in by_memory))
        for name_ in ("attributes", "relations", "aliases", "mentioned_by"):
            items = getattr(card, name_)
            if len(items) > MAX_CARD_ITEMS:
                del items[MAX_CARD_ITEMS:]
                card.truncated = True
    return list(cards.values())


def cards_by_id(conn: psycopg.Connection, ids: Sequence[str]) -> dict[str, EntityCard]:
    """The current card of each id the caller may see, keyed by that id (the
    members of one merged group share their group's card)."""
    found = conn.execute(gq.ENTITIES, (v.uuid_array(list(ids)),)).fetchall()
    cards = _cards(conn, found, {"at": datetime.now(UTC), "history": False})
    by_member = {m.id: c for c in cards for m in (c.entity, *c.merged)}
    return {i: by_member[i] for i in ids if i in by_member}


class GraphStore:
    def __init__(self, control: ControlPlane) -> None:
        self.control = control

    def lookup(
        self, caller: Caller, name: str, as_of: datetime | None, include_history: bool = False
    ) -> list[EntityCard]:
        """Every entity the caller may see whose name or current alias is
        ``name`` (normalised), with its claims current at ``as_of`` (now by
        default) or, with the history, all of them. Two claims that disagree
        are both returned, newest statement first."""
        v.text(name, "name", MAX_ENTITY_NAME)
        key = rules.name_key(name)
        if not key:
            raise errors.InvalidArgument("name", "is required")
        at = as_of or datetime.now(UTC)
        params: dict[str, Any] = {
            "key": key,
            "at": at,
            "history": include_history,
            "limit": MAX_LOOKUP_ENTITIES,
        }
        pool = self.control.caller_pool(caller)
        with caller_transaction(pool, caller, GENERIC_PLANS) as conn:
            return _cards(conn, conn.execute(gq.LOOKUP, params).fetchall(), params)

    def named_in(self, caller: Caller, text: str) -> list[EntityCard]:
        """The entities ``text`` names exactly: every run of up to
        MAX_NAME_WORDS words (ends stripped of punctuation) that is the name
        or a current alias of an entity the caller may see, as lookup gives
        it now. For recall's entity cards; a query naming nothing costs one
        indexed probe."""
        words = [w.strip(_PUNCTUATION) for w in rules.name_key(text).split(" ")]
        words = [w for w in words if w][:_MAX_QUERY_WORDS]
        keys = {
            " ".join(words[i : i + n])
            for n in range(1, MAX_NAME_WORDS + 1)
            for i in range(len(words) - n + 1)
        }
        if not keys:
            return []
        params: dict[str, Any] = {
            "keys": sorted(keys),
            "at": datetime.now(UTC),
            "history": False,
            "limit": MAX_RECALL_ENTITIES,
        }
        pool = self.control.caller_pool(caller)
        with caller_transaction(pool, caller, GENERIC_PLANS) as conn:
            return _cards(conn, conn.execute(gq.NAMED, params).fetchall(), params)

    def neighbors(
        self,
        caller: Caller,
        entity_id: str,
        hops: int,
        predicates: Sequence[str],
        as_of: datetime | None,
    ) -> Neighborhood:
        """Breadth first from ``entity_id`` over the relations the caller may
        see that are current at ``as_of``, both directions, up to ``hops``;
        at most MAX_NEIGHBOR_NODES nodes and MAX_NEIGHBOR_EDGES edges (the
        newest statements first at each hop), ``truncated`` when a cap cut."""
        start = v.uuid_str(entity_id, "entity_id")
        if not 1 <= hops <= MAX_HOPS:
            raise errors.InvalidArgument("hops", f"must lie in [1, {MAX_HOPS}]")
        if len(predicates) > MAX_PREDICATES:
            raise errors.InvalidArgument("predicates", f"at most {MAX_PREDICATES} allowed")
        wanted = [rules.identifier(p, f"predicates[{i}]") for i, p in enumerate(predicates)]
        at = as_of or datetime.now(UTC)
        # Nodes are groups (design §8.5): each keyed by its head, reached
        # through any member, and walked on from all of its members.
        group_of: dict[str, entity_groups.Group] = {}
        depth_of: dict[str, int] = {}
        seen: set[str] = set()
        raw: list[tuple[Any, ...]] = []
        truncated = False
        with caller_transaction(self.control.caller_pool(caller), caller) as conn:
            first = entity_groups.groups(conn, [start]).get(start)
            if first is None:
                raise errors.NotFound("entity_id: entity not found")
            group_of.update((m, first) for m in first.ids)
            depth_of[first.head.id] = 0
            frontier = first.ids
            for depth in range(1, hops + 1):
                room = MAX_NEIGHBOR_EDGES - len(raw)
                if not frontier or room <= 0:
                    break
                rows = conn.execute(
                    gq.NEIGHBOR_EDGES,
                    {
                        "frontier": v.uuid_array(frontier),
                        "predicates": wanted,
                        "at": at,
                        "history": False,
                        "limit": room + 1,
                    },
                ).fetchall()
                if len(rows) > room:
                    rows = rows[:room]
                    truncated = True
                unknown = {str(r[i]) for r in rows for i in (1, 3)} - group_of.keys()
                for group in entity_groups.groups(conn, sorted(unknown)).values():
                    group_of.update((m, group) for m in group.ids)
                next_frontier: list[str] = []
                for row in rows:
                    claim_id = str(row[0])
                    if claim_id in seen:
                        continue
                    ends = {group_of[str(row[1])].head.id, group_of[str(row[3])].head.id}
                    new_ends = [e for e in ends if e not in depth_of]
                    if len(depth_of) + len(new_ends) > MAX_NEIGHBOR_NODES:
                        truncated = True
                        continue
                    for e in new_ends:
                        depth_of[e] = depth
                        next_frontier.extend(group_of[e].ids)
                    seen.add(claim_id)
                    raw.append(row)
                frontier = next_frontier
        heads = {g.head.id: g for g in group_of.values()}
        names = {h: g.head for h, g in heads.items()}

        def node(entity: Any) -> EntityRefView:
            return names[group_of[str(entity)].head.id]

        views = [
            RelationView(node(r[1]), r[2], node(r[3]), r[4], r[5], r[6], str(r[7]), r[8], r[9])
            for r in raw
        ]
        nodes = sorted(
            ((names[e], d) for e, d in depth_of.items()), key=lambda n: (n[1], n[0].name, n[0].id)
        )
        merged = {h: list(heads[h].merged) for h in depth_of if heads[h].merged}
        return Neighborhood(nodes, views, truncated, merged)
