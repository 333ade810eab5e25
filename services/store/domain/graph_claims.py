"""What a memory states about the graph (design §3.3): the entities a write
names, its attribute claims, relation claims and aliases; their validation,
their writing inside the memory tools' transaction (`GraphWriter`, called by
services/store/domain/memory_writes.py) and the claims each memory states,
read inside the caller's, so row-level security makes a claim visible exactly
when its memory is."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from recallatron import errors
from recallatron.vocabulary import (
    MAX_ALIASES,
    MAX_CLAIM_VALUE,
    MAX_CLAIMS,
    MAX_ENTITY_NAME,
    MAX_PROVENANCE_ITEMS,
    MAX_RELATIONS,
)
from services.store.domain import entity_groups
from services.store.domain import graph_rules as rules
from services.store.domain import validation as v
from services.store.sql import graph_queries as gq


@dataclass(frozen=True)
class EntityIn:
    """An entity named by a write: an existing one by id, or a new one by name
    (with an optional type). The same shape as a mention."""

    entity_id: str | None = None
    name: str | None = None
    type: str | None = None


# Keyword-only, so a claim's own fields come first when it is made.
@dataclass(frozen=True, kw_only=True)
class QualifiersIn:
    """When a claim or a relation holds and how sure its writer is (each None
    when not given: always, and the default confidence)."""

    valid_from: datetime | None = None
    valid_until: datetime | None = None
    confidence: float | None = None


@dataclass(frozen=True)
class ClaimIn(QualifiersIn):
    entity: EntityIn
    attribute: str
    value: str


@dataclass(frozen=True)
class RelationIn(QualifiersIn):
    subject: EntityIn
    predicate: str
    object: EntityIn


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


@dataclass(frozen=True, kw_only=True)
class Stated:
    """Which memory states a claim, when, and when it was retired (None while
    it stands)."""

    memory_id: str
    stated_at: datetime
    retired_at: datetime | None


@dataclass(frozen=True, kw_only=True)
class Qualified(Stated):
    """A stated claim or relation with when it holds and how sure it is."""

    valid_from: datetime | None
    valid_until: datetime | None
    confidence: float


@dataclass(frozen=True)
class AttributeView(Qualified):
    entity: EntityRefView
    attribute: str
    value: str


@dataclass(frozen=True)
class RelationView(Qualified):
    subject: EntityRefView
    predicate: str
    object: EntityRefView


@dataclass(frozen=True)
class AliasView(Stated):
    entity: EntityRefView
    alias: str


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
        rules.given_name_key(name, f"{where}.name")
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
        _qualifiers(c, where)
    for i, r in enumerate(graph.relations):
        where = f"relations[{i}]"
        validate_entity(r.subject, f"{where}.subject")
        rules.identifier(r.predicate, f"{where}.predicate")
        validate_entity(r.object, f"{where}.object")
        _qualifiers(r, where)
    for i, a in enumerate(graph.aliases):
        where = f"aliases[{i}]"
        validate_entity(a.entity, f"{where}.entity")
        alias = v.text(a.alias, f"{where}.alias", MAX_ENTITY_NAME)
        rules.given_name_key(alias, f"{where}.alias")
    _once("claims", [(_key(c.entity), c.attribute, c.value, *_span(c)) for c in graph.claims])
    _once(
        "relations",
        [(_key(r.subject), r.predicate, _key(r.object), *_span(r)) for r in graph.relations],
    )
    _once("aliases", [(_key(a.entity), rules.name_key(a.alias)) for a in graph.aliases])


def _key(ref: EntityIn) -> tuple[str, str]:
    """The entity a (valid) reference names within one write: any spelling of
    its id, or one new entity per folded name (as GraphWriter resolves it)."""
    if ref.entity_id is not None:
        return ("id", v.uuid_str(ref.entity_id, "entity_id"))
    return ("name", rules.name_key(ref.name or ""))


def _span(q: QualifiersIn) -> tuple[datetime | None, datetime | None]:
    return (q.valid_from, q.valid_until)


def _once(part: str, keys: Sequence[tuple[Any, ...]]) -> None:
    """One write states each claim, relation or alias once, as it mentions
    each entity once: a repeat (at any confidence) would be stored twice and
    counted twice, so the first repeat is refused by its index."""
    first: dict[tuple[Any, ...], int] = {}
    for i, key in enumerate(keys):
        j = first.setdefault(key, i)
        if j != i:
            raise errors.InvalidArgument(f"{part}[{i}]", f"states the same as {part}[{j}]")


def _qualifiers(q: QualifiersIn, where: str) -> None:
    rules.valid_span(q.valid_from, q.valid_until, where)
    try:
        v.confidence(q.confidence)
    except errors.InvalidArgument:
        raise errors.InvalidArgument(f"{where}.confidence", "must lie in [0, 1]") from None


# -- writing ---------------------------------------------------------------------


def check_visible(conn: psycopg.Connection, entity_id: str, field: str) -> None:
    """NOT_FOUND unless the caller may see ``entity_id`` (canonical): one they
    may not see answers exactly as one that does not exist, as neighbors,
    timeline and a write naming an episode or a memory answer."""
    if conn.execute(gq.ENTITY_VISIBLE, (entity_id,)).fetchone() is None:
        raise errors.NotFound(f"{field}: entity not found")


def _qualifier_columns(q: QualifiersIn) -> tuple[datetime | None, datetime | None, float]:
    """A claim's or a relation's last columns as written (valid_from,
    valid_until, confidence), an unset confidence given its default."""
    return (q.valid_from, q.valid_until, v.confidence(q.confidence))


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
                # Only an entity the caller may see can be named (row security);
                # one they may not see answers as one that does not exist.
                check_visible(self.conn, entity_id, f"{where}.entity_id")
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
                *_qualifier_columns(c),
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
                *_qualifier_columns(r),
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
            cur.executemany(gq.INSERT_MENTION, [(memory_id, e, memory_id) for e in unique])

    def retire(self, memory_id: str, *, superseded: bool = False, kept: bool = False) -> None:
        """A correct's retirement (for everyone), or the supersede's of
        ``memory_id`` (for whoever sees a successor of it). ``kept``: the
        caller reads the memory as current past a successor hidden from them,
        and what its supersede retired is current for them, so retired too."""
        params = {"memory": memory_id, "superseded": superseded, "kept": kept}
        for statement in gq.RETIRE:
            self.conn.execute(statement, params)

    def carry(self, old_id: str, new_id: str, *, kept: bool = False) -> None:
        """Supersede: the successor states the old memory's current claims
        (``kept``: as ``retire`` says)."""
        params = {"old": old_id, "new": new_id, "kept": kept}
        named = [str(r[0]) for r in self.conn.execute(gq.CARRIED_ENTITIES, params).fetchall()]
        with self.conn.cursor() as cur:
            for statement in gq.CARRY:
                cur.execute(statement, params)
            self._mention(cur, new_id, named)


# -- reading a memory's claims ---------------------------------------------------


def entity_ref(id_: Any, name: str, type_: str | None) -> EntityRefView:
    return EntityRefView(str(id_), name, type_)


def stated_fields(memory_id: Any, stated_at: Any, retired_at: Any) -> dict[str, Any]:
    """A ``Stated`` view's fields from its columns, in the graph queries' order."""
    return {"memory_id": str(memory_id), "stated_at": stated_at, "retired_at": retired_at}


def qualified_fields(
    valid_from: Any, valid_until: Any, confidence: Any, *stated: Any
) -> dict[str, Any]:
    """A ``Qualified`` view's fields from its columns, in the graph queries'
    order: valid_from, valid_until, confidence, then the ``Stated`` ones."""
    return {
        "valid_from": valid_from,
        "valid_until": valid_until,
        "confidence": confidence,
        **stated_fields(*stated),
    }


@dataclass
class StatedBy:
    """What memories state, keyed by memory: at most ``cap`` of each kind per
    memory, current ones first, and how many of each kind were left out."""

    attributes: dict[str, list[AttributeView]] = field(default_factory=dict)
    relations: dict[str, list[RelationView]] = field(default_factory=dict)
    aliases: dict[str, list[AliasView]] = field(default_factory=dict)
    # memory id -> {"claims" | "relations" | "aliases": items left out}
    omitted: dict[str, dict[str, int]] = field(default_factory=dict)

    def _count(self, memory_id: str, part: str, total: int, shown: int) -> None:
        if total > shown:
            self.omitted.setdefault(memory_id, {})[part] = total - shown


def claims_of(conn: psycopg.Connection, ids: str, cap: int = MAX_PROVENANCE_ITEMS) -> StatedBy:
    """What each memory of ``ids`` (a uuid array literal) states."""
    out = StatedBy()
    params = {"ids": ids, "cap": cap}
    with conn.pipeline():
        a_cur = conn.execute(gq.CLAIMS_OF, params)
        r_cur = conn.execute(gq.RELATIONS_OF, params)
        l_cur = conn.execute(gq.ALIASES_OF, params)
    totals: dict[tuple[str, str], int] = {}
    for (
        mid,
        eid,
        name,
        type_,
        attr,
        value,
        vf,
        vu,
        conf,
        stated,
        retired,
        total,
        _,
    ) in a_cur.fetchall():
        totals[str(mid), "claims"] = total
        out.attributes.setdefault(str(mid), []).append(
            AttributeView(
                entity_ref(eid, name, type_),
                attr,
                value,
                **qualified_fields(vf, vu, conf, mid, stated, retired),
            )
        )
    for row in r_cur.fetchall():
        mid = str(row[0])
        totals[mid, "relations"] = row[13]
        out.relations.setdefault(mid, []).append(
            RelationView(
                entity_ref(row[1], row[2], row[3]),
                row[4],
                entity_ref(row[5], row[6], row[7]),
                **qualified_fields(row[8], row[9], row[10], mid, row[11], row[12]),
            )
        )
    for mid, eid, name, type_, alias, stated, retired, total, _ in l_cur.fetchall():
        totals[str(mid), "aliases"] = total
        out.aliases.setdefault(str(mid), []).append(
            AliasView(entity_ref(eid, name, type_), alias, **stated_fields(mid, stated, retired))
        )
    for (mid, part), total in totals.items():
        out._count(mid, part, total, min(total, cap))
    return out
