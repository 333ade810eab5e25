"""The walk over relations (design §7 `neighbors`): breadth first from one
entity over the relations the caller may see, both directions, bounded in
hops, nodes and edges; a node is a group of merged entities (design §8.5).
Runs on the caller's connection, so row-level security bounds the walk."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from recallatron import errors
from recallatron.vocabulary import MAX_NEIGHBOR_EDGES, MAX_NEIGHBOR_NODES
from services.store.domain import entity_groups
from services.store.domain import validation as v
from services.store.domain.graph_cards import held_to_walks
from services.store.domain.graph_claims import EntityRefView, RelationView, qualified_fields
from services.store.sql import graph_queries as gq


@dataclass(frozen=True)
class Neighborhood:
    nodes: list[tuple[EntityRefView, int]]
    edges: list[RelationView]
    truncated: bool
    # Per node id, the entities merged into it.
    merged: dict[str, list[EntityRefView]] = field(default_factory=dict)


def neighborhood(
    conn: psycopg.Connection,
    start: str,
    hops: int,
    predicates: list[str],
    at: datetime,
    known_by: datetime | None = None,
) -> Neighborhood:
    """Breadth first from ``start`` over the relations current at ``at``
    whose predicate is one of ``predicates`` (any, when none), up to ``hops``,
    with every such relation among the nodes reached (those between two of
    the last hop too); at most MAX_NEIGHBOR_NODES nodes and MAX_NEIGHBOR_EDGES
    edges (the newest statements first at each hop), ``truncated`` when a cap
    cut. A relation whose end the caller cannot see is skipped. With
    ``known_by`` (an as_of), a start no memory had mentioned by then is not
    found, as lookup's."""
    # Nodes are groups (design §8.5): each keyed by its head, reached
    # through any member, and walked on from all of its members.
    group_of: dict[str, entity_groups.Group] = {}
    depth_of: dict[str, int] = {}
    seen: set[str] = set()
    raw: list[tuple[Any, ...]] = []
    truncated = False
    # As of a time, a group holds the members known then (entity_groups).
    first = entity_groups.groups(conn, [start], known_by).get(start)
    if first is None or (
        known_by is not None
        and conn.execute(
            gq.KNOWN_BY, {"ids": v.uuid_array(first.ids), "known_by": known_by}
        ).fetchone()
        is None
    ):
        raise errors.NotFound("entity_id: entity not found")
    group_of.update((m, first) for m in first.ids)
    depth_of[first.head.id] = 0
    frontier = first.ids
    # One pass more than the hops: the last takes the relations between two
    # nodes of the last hop, which no hop walked (the answer is a subgraph:
    # its nodes and every edge among them), and reaches no new node.
    for depth in range(1, hops + 2):
        room = MAX_NEIGHBOR_EDGES - len(raw)
        if not frontier or (room <= 0 and truncated):
            break
        # With no room left the pass still asks for one edge: whether the
        # cap cut one is what ``truncated`` says.
        with held_to_walks(conn):
            rows = conn.execute(
                gq.NEIGHBOR_EDGES if depth <= hops else gq.NEIGHBOR_EDGES_AMONG,
                {
                    "frontier": v.uuid_array(frontier),
                    "predicates": predicates,
                    "at": at,
                    "history": False,
                    "limit": room + 1,
                    "seen": sorted(seen),
                },
            ).fetchall()
        if len(rows) > room:
            rows = rows[:room]
            truncated = True
        unknown = {str(r[i]) for r in rows for i in (1, 3)} - group_of.keys()
        for group in entity_groups.groups(conn, sorted(unknown), known_by).values():
            group_of.update((m, group) for m in group.ids)
        next_frontier: list[str] = []
        for row in rows:
            claim_id = str(row[0])
            if claim_id in seen:
                continue
            subject, object_ = group_of.get(str(row[1])), group_of.get(str(row[3]))
            if subject is None or object_ is None:
                # An end no mention the caller sees places (a store edited by
                # hand; every write mentions both): no node, so no edge.
                continue
            ends = {subject.head.id, object_.head.id}
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

    views = [RelationView(node(r[1]), r[2], node(r[3]), **qualified_fields(*r[4:10])) for r in raw]
    nodes = sorted(
        ((names[e], d) for e, d in depth_of.items()), key=lambda n: (n[1], n[0].name, n[0].id)
    )
    merged = {h: list(heads[h].merged) for h in depth_of if heads[h].merged}
    return Neighborhood(nodes, views, truncated, merged)
