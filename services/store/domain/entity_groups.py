"""Entity groups (design §8.5): the entities a person decided are one, as the
caller sees them. A merge joins two entities without rewriting either, so
every reader (lookup, neighbors, timeline, recall's cards and mention filter)
asks here which entities answer together and under which one. Run inside the
caller's transaction: a merge counts only while the caller may see both of
its entities (row security on entity_merge), so a group never reaches an
entity the caller cannot see evidence for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import psycopg

from services.store.domain import validation as v
from services.store.sql import graph_queries as gq

# Every visible member of each start id's group, with what picks the head:
# an entity no visible merge folds into another, the oldest such first. Each
# member is read by its id (LATERAL ... OFFSET 0), so the entity policy is
# asked of the members only, never of every entity a join might scan. As of
# a time (%(known_by)s, NULL for now), only the members known by then: one
# first mentioned later did not exist then, in a group or alone.
GROUPS = f"""
SELECT g.start_id, e.id, e.name, e.type,
       EXISTS (SELECT 1 FROM entity_merge m
               WHERE m.merged_id = e.id AND m.undone_at IS NULL) AS folded,
       e.created_at
FROM entity_group(%(ids)s::uuid[]) g
CROSS JOIN LATERAL (
    SELECT * FROM entity e WHERE e.id = g.member_id AND {gq.KNOWN_BY_CONDITION} OFFSET 0
) e
"""


@dataclass(frozen=True)
class EntityRef:
    """An entity as answers name it."""

    id: str
    name: str
    type: str | None


@dataclass(frozen=True)
class Group:
    """One entity as the caller sees it: ``head`` answers for it (its id and
    name), ``members`` are all of it, the head first, then oldest first."""

    members: tuple[EntityRef, ...]

    @property
    def head(self) -> EntityRef:
        return self.members[0]

    @property
    def merged(self) -> tuple[EntityRef, ...]:
        return self.members[1:]

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.members]


def groups(
    conn: psycopg.Connection, ids: Sequence[str], known_by: datetime | None = None
) -> dict[str, Group]:
    """The group of each id the caller may see (an id it may not see is
    absent); an entity no merge touches is a group of one. With ``known_by``
    (an as_of), only the members some visible memory had mentioned by then
    (an id not known then is absent too)."""
    if not ids:
        return {}
    found: dict[str, list[tuple[bool, datetime, str, EntityRef]]] = {}
    for start, eid, name, type_, folded, created in conn.execute(
        GROUPS, {"ids": v.uuid_array(list(dict.fromkeys(ids))), "known_by": known_by}
    ).fetchall():
        found.setdefault(str(start), []).append(
            (bool(folded), created, str(eid), EntityRef(str(eid), name, type_))
        )
    return {
        start: Group(tuple(m for *_, m in sorted(rows, key=lambda r: r[:3])))
        for start, rows in found.items()
    }


def expand(conn: psycopg.Connection, ids: Sequence[str]) -> list[str]:
    """Every member of the groups of ``ids``: a filter on an entity takes
    in the entities merged with it. Ids the caller may not see stay as given
    (they match nothing the caller may see anyway)."""
    if not ids:
        return []
    grouped = groups(conn, ids)
    out = list(ids)
    for group in grouped.values():
        out.extend(group.ids)
    return list(dict.fromkeys(out))
