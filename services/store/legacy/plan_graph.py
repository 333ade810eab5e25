"""The old store's graph -> rows, as pure functions: the entities planned
memories mention, and for each entity record of graph.jsonl the memory that
states its graph claims (attributes, relations, its supersession)."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from recallatron.vocabulary import (
    MAX_BODY,
    MAX_CLAIM_VALUE,
    MAX_IDENTIFIER,
    MAX_TITLE,
)
from services.store.domain.graph_rules import shows_something
from services.store.legacy.ids import Ids
from services.store.legacy.oldgraph import Entity, Graph
from services.store.legacy.oldgraph import clean_text as _clean
from services.store.legacy.oldstore import parse_time
from services.store.legacy.plan_items import MemoryRow, confidence_of


@dataclass(frozen=True)
class EntityRow:
    id: str
    source_id: str
    name: str
    # An identifier, or None.
    type: str | None
    created_at: datetime


def entity_rows(
    items: Sequence[MemoryRow], records: Sequence[RecordRow], graph: Graph, ids: Ids
) -> dict[str, EntityRow]:
    """old id -> entity row, for every entity a planned memory mentions
    (entities exist only as mentions), with the type of its record when that
    makes an identifier. Created at the record's valid-from, else at the first
    memory mentioning it: fixed by the data, not by when or in which batch the
    import runs."""
    first: dict[str, datetime] = {}

    def seen(old_id: str, at: datetime) -> None:
        if old_id not in first or at < first[old_id]:
            first[old_id] = at

    for row in items:
        for m in row.mentions:
            if m.resolved_old_id is not None:
                seen(m.resolved_old_id, row.created_at)
    for record in records:
        for old_id in record.mentions:
            seen(old_id, record.created_at)
    out: dict[str, EntityRow] = {}
    for old_id in sorted(first):
        entity = graph.entities[old_id]
        out[old_id] = EntityRow(
            ids.entity(old_id),
            old_id,
            entity.row_name,
            identifier_from(entity.type, "type_"),
            parse_time(entity.valid_from) or first[old_id],
        )
    return out


# -- entity records -> memories that state their claims -------------------------

# A record's memory states what the old store held true about an entity.
RECORD_KIND = "fact"
# Not an attribute: the entity-to-entity edges (Entity.relations()).
RELATIONS_KEY = "relations"
# Property values quoted in a record memory's body, this long at most (the
# claims hold them whole).
BODY_VALUE_CHARS = 300
SUPERSEDE_REASON = "supersede patch of the old store's graph"
# Where a name that starts with a digit gets its leading letter from.
ATTRIBUTE_PREFIX = "attr_"
PREDICATE_PREFIX = "rel_"
TYPE_PREFIX = "type_"

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NOT_IDENTIFIER = re.compile(r"[^a-z0-9]+")


def identifier_from(text: str, prefix: str) -> str | None:
    """An old name made an identifier (design §3.3: `^[a-z][a-z0-9_]*$`, at
    most 64 characters): accents dropped, a camelCase boundary and every run
    of other characters one underscore, lower case, `prefix` before a leading
    digit. None when no letter or digit is left. "Home City" and "homeCity"
    become home_city, "2fa" attr_2fa."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    plain = bare.encode("ascii", "ignore").decode("ascii")
    out = _NOT_IDENTIFIER.sub("_", _CAMEL.sub("_", plain).lower()).strip("_")
    if not out:
        return None
    if not out[0].isalpha():
        out = prefix + out
    return out[:MAX_IDENTIFIER].rstrip("_")


def claim_value(value: Any) -> tuple[str, str | None]:
    """(the value as claim text, None), or ("", why it cannot be one).
    Strings stand as written; anything else as JSON."""
    if value is None:
        return "", "no value (null)"
    if isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if "\x00" in text:
        return "", "value holds NUL characters"
    if not text.strip():
        return "", "empty value"
    if len(text) > MAX_CLAIM_VALUE:
        return "", f"value over {MAX_CLAIM_VALUE} characters"
    return text, None


def claim_entity(graph: Graph, old_id: str) -> str | None:
    """The entity a claim about `old_id` names: the end of its supersession
    chain, as for mentions. One whose chain loops or leads to no record stands
    for itself: the fold cannot say which entity was meant. None for an id
    with no record."""
    res = graph.resolve(old_id)
    if res.entity_id is None:
        return None
    return res.entity_id if res.how in ("self", "replaced") else old_id


def record_time(entity: Entity, first_mention: datetime | None) -> datetime | None:
    """When a record was written: the old store kept no such time, so its
    valid-from stands in, else its confirmation or supersession, else the
    first imported memory item mentioning it."""
    for raw in (entity.valid_from, entity.confirmed_at, entity.superseded_at):
        if (t := parse_time(raw)) is not None:
            return t
    return first_mention


def item_mention_times(items: Sequence[MemoryRow]) -> dict[str, datetime]:
    """old entity id -> the earliest planned memory item linked to it."""
    out: dict[str, datetime] = {}
    for row in items:
        for m in row.mentions:
            for old_id in (m.old_entity_id, m.resolved_old_id):
                if old_id is not None and (old_id not in out or row.created_at < out[old_id]):
                    out[old_id] = row.created_at
    return out


@dataclass(frozen=True)
class AttributeRow:
    id: str
    entity_old_id: str
    attribute: str
    value: str

    def own_columns(self, new_id: Callable[[str], str]) -> tuple[str, str, str]:
        """entity_id, attribute, value: the claim's columns but those of its
        record, its entity by ``new_id`` of its old id."""
        return new_id(self.entity_old_id), self.attribute, self.value


@dataclass(frozen=True)
class RelationRow:
    id: str
    subject_old_id: str
    predicate: str
    object_old_id: str

    def own_columns(self, new_id: Callable[[str], str]) -> tuple[str, str, str]:
        """subject_id, predicate, object_id, as AttributeRow.own_columns."""
        return new_id(self.subject_old_id), self.predicate, new_id(self.object_old_id)


@dataclass(frozen=True)
class Supersession:
    by_old_id: str
    by_memory_id: str
    # When the memory was superseded and its claims retired.
    at: datetime


@dataclass(frozen=True)
class RecordRow:
    id: str
    source_id: str
    title: str
    body: str
    confidence: float
    created_at: datetime
    updated_at: datetime
    valid_from: datetime | None
    valid_until: datetime | None
    attributes: tuple[AttributeRow, ...]
    relations: tuple[RelationRow, ...]
    # Old ids of the entities it mentions: every entity a claim names.
    mentions: tuple[str, ...]
    supersession: Supersession | None
    # Why a superseded record's memory is not superseded here.
    supersession_skipped: str | None
    attributes_read: int
    relations_read: int
    attributes_skipped: tuple[str, ...]
    relations_skipped: tuple[str, ...]
    # Supersession steps to the end of its chain: a replacement's memory is
    # written no later than the memories it supersedes.
    depth: int = 0


def property_counts(entity: Entity) -> tuple[int, int]:
    """(attribute properties, entity-to-entity edges) a record holds; a
    `relations` value that is no verb -> ids map counts as one unusable edge."""
    attributes = sum(1 for k in entity.properties if k != RELATIONS_KEY)
    rel = entity.properties.get(RELATIONS_KEY)
    edges = len(entity.relations())
    if rel is not None and not isinstance(rel, dict):
        edges += 1
    return attributes, edges


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = _clean(text)
    return text if len(text) <= BODY_VALUE_CHARS else text[: BODY_VALUE_CHARS - 1] + "…"


def _record_text(entity: Entity, graph: Graph, confidence: float) -> tuple[str, str]:
    """Title and body: what the record was and where it came from."""
    name = _clean(entity.name) if shows_something(entity.name) else _clean(entity.id)
    kind = _clean(entity.type)
    title = f"{name} ({kind})" if kind else name
    if len(title) > MAX_TITLE:
        title = title[: MAX_TITLE - 1].rstrip() + "…"
    head = f"Entity {_clean(entity.id)} of the old store's graph"
    if kind:
        head += f", type {kind}"
    if _clean(entity.source):
        head += f", source {_clean(entity.source)}"
    if entity.confidence is not None:
        head += f", confidence {confidence:g}"
    if entity.valid_from:
        head += f", valid from {_clean(str(entity.valid_from))}"
    if entity.valid_until:
        head += f" until {_clean(str(entity.valid_until))}"
    lines = [head + "."]
    if entity.confirmed:
        lines.append(
            f"Confirmed{' at ' + _clean(str(entity.confirmed_at)) if entity.confirmed_at else ''}."
        )
    if entity.superseded_by:
        by = graph.entities.get(entity.superseded_by)
        by_name = f" ({_clean(by.name)})" if by is not None and _clean(by.name) else ""
        at = f" at {_clean(str(entity.superseded_at))}" if entity.superseded_at else ""
        lines.append(f"Superseded by {_clean(entity.superseded_by)}{by_name}{at}.")
    for key, value in entity.properties.items():
        if key != RELATIONS_KEY:
            lines.append(f"{_clean(key)}: {_shown(value)}")
    for verb, target in entity.relations():
        other = graph.entities.get(target)
        other_name = _clean(other.name) if other is not None else "no record"
        lines.append(f"{_clean(verb)}: {other_name or target} ({_clean(target)})")
    body = "\n".join(lines)
    if len(body) > MAX_BODY:
        body = body[: MAX_BODY - 1] + "…"
    return title, body


def _later(*times: datetime | None) -> datetime:
    return max(t for t in times if t is not None)


def plan_record(
    entity: Entity, ids: Ids, graph: Graph, first_mention: datetime | None = None
) -> RecordRow | str:
    """The memory for one folded entity record, stating its properties as
    attribute claims and its edges as relation claims about the entities
    that stand for them; or why it is skipped. Its supersession is planned
    here and checked against the other records by plan_records."""
    created = record_time(entity, first_mention)
    if created is None:
        return "no readable time"
    subject = claim_entity(graph, entity.id)
    assert subject is not None  # the entity has a record
    confidence = confidence_of(entity.confidence)
    valid_from, valid_until = parse_time(entity.valid_from), parse_time(entity.valid_until)
    backwards = valid_from is not None and valid_until is not None and valid_until < valid_from
    attributes: list[AttributeRow] = []
    skipped_a: list[str] = []
    for key, value in entity.properties.items():
        if key == RELATIONS_KEY:
            continue
        name = identifier_from(key, ATTRIBUTE_PREFIX)
        text, why = claim_value(value)
        if name is None:
            skipped_a.append("attribute name with no letter or digit")
        elif why is not None:
            skipped_a.append(why)
        elif backwards:
            skipped_a.append("valid_until before valid_from")
        else:
            attributes.append(AttributeRow(ids.attribute(entity.id, key), subject, name, text))
    relations: list[RelationRow] = []
    skipped_r: list[str] = []
    rel = entity.properties.get(RELATIONS_KEY)
    if rel is not None and not isinstance(rel, dict):
        skipped_r.append("relations is not a map of verb -> entity ids")
    stated: set[tuple[str, str]] = set()
    for verb, target in entity.relations():
        predicate = identifier_from(verb, PREDICATE_PREFIX)
        other = claim_entity(graph, target)
        if predicate is None:
            skipped_r.append("verb with no letter or digit")
        elif other is None:
            skipped_r.append("unknown target entity")
        elif (predicate, other) in stated:
            skipped_r.append("same relation as another of the record, after supersession")
        elif backwards:
            skipped_r.append("valid_until before valid_from")
        else:
            stated.add((predicate, other))
            relations.append(
                RelationRow(ids.relation(entity.id, verb, target), subject, predicate, other)
            )
    supersession: Supersession | None = None
    supersession_skipped: str | None = None
    updated = _later(created, parse_time(entity.confirmed_at))
    if entity.superseded_by:
        res = graph.resolve(entity.id)
        if res.how != "replaced":
            supersession_skipped = res.how
        else:
            by = graph.entities[entity.superseded_by]
            at = _later(
                created, parse_time(entity.superseded_at) or record_time(by, None) or created
            )
            supersession = Supersession(by.id, ids.entity_record(by.id), at)
            updated = _later(updated, at)
    mentions = dict.fromkeys([subject, *(r.object_old_id for r in relations)])
    title, body = _record_text(entity, graph, confidence)
    attributes_read, relations_read = property_counts(entity)
    return RecordRow(
        id=ids.entity_record(entity.id),
        source_id=entity.id,
        title=title,
        body=body,
        confidence=confidence,
        created_at=created,
        updated_at=updated,
        valid_from=valid_from,
        valid_until=valid_until,
        attributes=tuple(attributes),
        relations=tuple(relations),
        mentions=tuple(mentions),
        supersession=supersession,
        supersession_skipped=supersession_skipped,
        attributes_read=attributes_read,
        relations_read=relations_read,
        attributes_skipped=tuple(skipped_a),
        relations_skipped=tuple(skipped_r),
    )


def plan_records(
    graph: Graph, ids: Ids, first_mentions: dict[str, datetime]
) -> tuple[list[RecordRow], dict[str, str]]:
    """Every folded record's memory in write order (replacements before what
    they supersede, then by time and id), and the skipped records' reasons."""
    planned: dict[str, RecordRow] = {}
    skipped: dict[str, str] = {}
    for old_id, entity in graph.entities.items():
        row = plan_record(entity, ids, graph, first_mentions.get(old_id))
        if isinstance(row, str):
            skipped[old_id] = row
        else:
            planned[old_id] = row
    for old_id, row in planned.items():
        if row.supersession is not None and row.supersession.by_old_id not in planned:
            planned[old_id] = replace(
                row, supersession=None, supersession_skipped="replacement record not imported"
            )
    depth: dict[str, int] = {}

    def depth_of(old_id: str) -> int:
        # Walked, not recursed: a chain may be longer than Python's stack.
        # Chains end ("replaced" only when they do), so the walk does.
        path: list[str] = []
        at = old_id
        while at not in depth:
            s = planned[at].supersession
            if s is None:
                depth[at] = 0
                break
            path.append(at)
            at = s.by_old_id
        for step in reversed(path):
            s = planned[step].supersession
            assert s is not None
            depth[step] = 1 + depth[s.by_old_id]
        return depth[old_id]

    rows = [replace(r, depth=depth_of(k)) for k, r in planned.items()]
    rows.sort(key=lambda r: (r.depth, r.created_at, r.source_id))
    return rows, skipped
