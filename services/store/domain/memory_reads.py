"""Reading memories (design §7 `read`, §5.5 the permission walk): the views a
read answers with, each memory with its provenance (links, mentions, the
supersession chain, revisions and the claims it states). Every query runs
inside `caller_transaction`, so row-level security applies eligibility
(design §4); not visible answers exactly like not there."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from recallatron import errors
from recallatron.vocabulary import (
    ANSWER_BUDGET_BYTES,
    MAX_EPISODE_SEEDS,
    MAX_PROVENANCE_ITEMS,
    MAX_READ_IDS,
    MAX_WALK,
    PURPOSES,
)
from services.store.domain import answer_budget, graph_claims
from services.store.domain import validation as v
from services.store.domain.workspace_services import OnWorkspaces
from services.store.infrastructure.db import GENERIC_PLANS, SET_LOCALS, Caller
from services.store.sql import memory_queries as mq

# The parts of a memory's provenance, each its own query (or three, "graph").
LINKS, MENTIONS, CHAINS, GRAPH = "links", "mentions", "chains", "graph"
EVERY_PART = frozenset({LINKS, MENTIONS, CHAINS, GRAPH})


@dataclass(frozen=True)
class Ref:
    id: str
    visible: bool
    title: str = ""
    kind: str = ""


@dataclass(frozen=True)
class RevisionView:
    revision: int
    action: str  # create | correct | supersede | forget
    changed_by: str
    reason: str
    changed_at: datetime


@dataclass
class MemoryView:
    id: str
    kind: str
    title: str
    body: str
    confidence: float
    origin: str
    revision: int
    audience: str | None
    purposes: list[str]
    created_by: str
    created_at: datetime
    updated_at: datetime
    superseded_by_id: str | None
    # The memory's episode, when the reader may see it.
    episode_id: str | None = None
    links: list[tuple[str, Ref]] = field(default_factory=list)
    mentions: list[tuple[str, str]] = field(default_factory=list)
    supersedes: list[Ref] = field(default_factory=list)
    superseded_by: list[Ref] = field(default_factory=list)
    revisions: list[RevisionView] = field(default_factory=list)
    claims: list[graph_claims.AttributeView] = field(default_factory=list)
    relations: list[graph_claims.RelationView] = field(default_factory=list)
    aliases: list[graph_claims.AliasView] = field(default_factory=list)
    # Items of each provenance list (by its name) the answer left out
    # (vocabulary.MAX_PROVENANCE_ITEMS, ANSWER_BUDGET_BYTES).
    omitted: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Withheld:
    """What a retried write answers of a memory its caller may not see now:
    its id alone (design §4), so that the client knows the write was made."""

    id: str


def memory_view(row: Sequence[Any]) -> MemoryView:
    return MemoryView(
        id=str(row[0]),
        kind=row[1],
        title=row[2],
        body=row[3],
        confidence=row[4],
        origin=row[5],
        revision=row[6],
        superseded_by_id=str(row[7]) if row[7] else None,
        audience=str(row[8]) if row[8] else None,
        purposes=sorted(row[9], key=PURPOSES.index),
        created_by=str(row[10]),
        created_at=row[11],
        updated_at=row[12],
        episode_id=str(row[13]) if row[13] else None,
    )


@dataclass(frozen=True)
class Walk:
    # The admitted candidates, in the order given.
    admitted: list[str]
    # The first of them, read with provenance.
    memories: list[MemoryView]
    # Episode neighbours asked for (seed id, neighbour id), admitted ones only,
    # seed by seed, the one before first.
    neighbours: list[tuple[str, str]] = field(default_factory=list)


class MemoryReads(OnWorkspaces):
    """The read side of the memory tools, and what the write side reads back."""

    def _owner_pool(self, caller: Caller) -> Any:
        ws = self.control.workspace(caller.workspace_id)
        return self.dbs.owner_pool(ws.server, ws.database_name)

    def _own_write(self, caller: Caller, memory_id: str) -> MemoryView:
        """A write the caller made, read back even when the caller's own
        eligibility does not cover it (say, written for another member); its
        tombstone if it has been forgotten or erased since it committed."""
        with self._owner_pool(caller).connection() as conn:
            row = conn.execute(mq.OWN_MEMORY, (memory_id, caller.member_id)).fetchone()
        if row is None:
            raise errors.NotFound("memory not found")
        return memory_view(row)

    def _read_back(
        self, caller: Caller, memory_id: str, replayed: bool = False
    ) -> MemoryView | Withheld:
        """A write's memory as a read gives it. Its first answer falls back to
        what the caller wrote (say, for another member); a retry's answer does
        not: what others changed since, or what the retrying token's purposes
        do not cover, is not the caller's to see, so it holds the id alone."""
        found = self.read(caller, [memory_id], with_provenance=True)
        if found:
            return found[0]
        return Withheld(memory_id) if replayed else self._own_write(caller, memory_id)

    def _read_new(
        self, conn: psycopg.Connection, memory_id: str, parts: frozenset[str]
    ) -> MemoryView | None:
        """The memory this transaction has just made, as a read gives it, in
        the write's own transaction: no other transaction can see it yet, so
        of its provenance only ``parts``, what the write itself may have
        made, can hold anything, and the other queries are not run. None when
        the caller may not read it (the write's caller falls back to
        :meth:`_own_write` after the commit)."""
        conn.execute(SET_LOCALS, (list(GENERIC_PLANS), list(GENERIC_PLANS.values())))
        rows = conn.execute(mq.MEMORIES_BY_ID, (v.uuid_array([memory_id]),)).fetchall()
        if not rows:
            return None
        views = {memory_id: memory_view(rows[0])}
        self._provenance(conn, views, True, parts)
        return views[memory_id]

    def read(
        self, caller: Caller, ids: Sequence[str], with_provenance: bool = True
    ) -> list[MemoryView]:
        wanted = v.uuid_list(list(ids), "ids", MAX_READ_IDS, min_items=1)
        # Ids in arrays plan alike whatever the values: left to itself,
        # Postgres planned a one-memory read (every write's read-back) afresh
        # each time, about 3 ms of planning for 0.4 ms of running.
        with self.transaction(caller, GENERIC_PLANS) as conn:
            return self._read(conn, wanted, with_provenance, with_revisions=with_provenance)

    def read_answer(
        self, caller: Caller, ids: Sequence[str], with_provenance: bool = True
    ) -> tuple[list[MemoryView], list[str]]:
        """A read's answer: the visible memories among ``ids``, in that order,
        as many as fit the answer's size budget, and the ids of the visible
        ones left for another call."""
        found = self.read(caller, ids, with_provenance)
        kept = answer_budget.fitting(found, ANSWER_BUDGET_BYTES)
        return found[:kept], [m.id for m in found[kept:]]

    def _read(
        self,
        conn: psycopg.Connection,
        wanted: list[str],
        with_provenance: bool,
        with_revisions: bool = False,
    ) -> list[MemoryView]:
        """The visible memories among ``wanted`` (validated ids), in that order."""
        ids = v.uuid_array(wanted)
        rows = {
            str(r[0]): memory_view(r) for r in conn.execute(mq.MEMORIES_BY_ID, (ids,)).fetchall()
        }
        if with_provenance and rows:
            self._provenance(conn, rows, with_revisions)
        return [rows[i] for i in wanted if i in rows]

    def _provenance(
        self,
        conn: psycopg.Connection,
        views: dict[str, MemoryView],
        with_revisions: bool,
        parts: frozenset[str] = EVERY_PART,
    ) -> None:
        ids = v.uuid_array(list(views))
        capped = {"ids": ids, "cap": MAX_PROVENANCE_ITEMS}
        # Independent queries: one round trip.
        with conn.pipeline():
            links = conn.execute(mq.LINKS_OF, (ids,)) if LINKS in parts else None
            mentions = conn.execute(mq.MENTIONS_OF, capped) if MENTIONS in parts else None
            chains = conn.execute(mq.SUPERSESSION_CHAINS, capped) if CHAINS in parts else None
            revisions = conn.execute(mq.REVISIONS_OF, capped) if with_revisions else None
        totals: dict[tuple[str, str], int] = {}
        if with_revisions and GRAPH in parts:
            stated = graph_claims.claims_of(conn, ids, MAX_PROVENANCE_ITEMS)
            for memory_id, view in views.items():
                view.claims = stated.attributes.get(memory_id, [])
                view.relations = stated.relations.get(memory_id, [])
                view.aliases = stated.aliases.get(memory_id, [])
                view.omitted.update(stated.omitted.get(memory_id, {}))
        if revisions is not None:
            for memory_id, revision, action, changed_by, reason, changed_at, total in revisions:
                totals[str(memory_id), "revisions"] = total
                views[str(memory_id)].revisions.append(
                    RevisionView(revision, action, str(changed_by), reason, changed_at)
                )
        for memory_id, kind, target, title, target_kind in links.fetchall() if links else ():
            ref = (
                Ref(str(target), True, title, target_kind) if title is not None else Ref("", False)
            )
            views[str(memory_id)].links.append((kind, ref))
        for memory_id, entity_id, name, total in mentions.fetchall() if mentions else ():
            totals[str(memory_id), "mentions"] = total
            views[str(memory_id)].mentions.append((str(entity_id), name))
        for (memory_id, part), total in totals.items():
            view = views[memory_id]
            if total > len(getattr(view, part)):
                view.omitted[part] = total - len(getattr(view, part))
        for memory_id, direction, depth, ref_id, title, kind in chains.fetchall() if chains else ():
            view = views[str(memory_id)]
            part = "supersedes" if direction == "older" else "superseded_by"
            chain: list[Ref] = getattr(view, part)
            # Nearest first (ordered in SQL): past the cap the chain was cut,
            # and what the query found past it (a step at least) is counted.
            if depth > MAX_PROVENANCE_ITEMS or len(chain) >= MAX_PROVENANCE_ITEMS:
                view.omitted[part] = view.omitted.get(part, 0) + 1
                continue
            # Every step is a memory the caller may see (SUPERSESSION_CHAINS
            # joins each): where what they may see ends, the chain ends.
            chain.append(Ref(str(ref_id), True, title, kind))

    def walk(
        self,
        caller: Caller,
        ids: Sequence[str],
        hydrate: int,
        include_superseded: bool = False,
        neighbours_of: int = 0,
    ) -> Walk:
        """The permission walk (design §5.5): keeps, in order, the candidates the
        caller may see whose every linked memory, transitively, the caller may
        also see and is not forgotten; then reads the first ``hydrate`` of them
        with provenance in the same transaction (one snapshot: a memory the walk
        admitted cannot vanish before it is read).

        With ``neighbours_of`` n, also the episode neighbours of the first n
        admitted rows (the visible memory just before and just after each in
        its episode) that are themselves admitted candidates, read as well
        when they lie past the first ``hydrate``: recall lifts them a little
        (docs/recall.md, "Episode neighbours")."""
        wanted = v.uuid_list(list(ids), "ids", MAX_WALK)
        if not 0 <= hydrate <= MAX_READ_IDS:
            raise errors.InvalidArgument("hydrate_limit", f"must lie in [0, {MAX_READ_IDS}]")
        if not 0 <= neighbours_of <= MAX_EPISODE_SEEDS:
            raise errors.InvalidArgument("neighbours_of", f"must lie in [0, {MAX_EPISODE_SEEDS}]")
        if not wanted:
            return Walk([], [])
        with self.transaction(caller, GENERIC_PLANS) as conn:
            array = v.uuid_array(wanted)
            params = {"ids": array, "include_superseded": include_superseded}
            rows = conn.execute(mq.ADMIT, params).fetchall()
            admitted = [r[0] for r in rows]
            # Only when a seed belongs to an episode: most workspaces' memories
            # belong to none, and a statement costs most on a backend just opened.
            seeded = any(in_episode for _, in_episode in rows[:neighbours_of])
            neighbours = (
                _admitted_neighbours(conn, admitted, neighbours_of, include_superseded)
                if seeded
                else []
            )
            # The head, then the neighbours past it, each once.
            read = list(dict.fromkeys(admitted[:hydrate] + [n for _, n in neighbours]))
            memories = self._read(conn, read, True) if read else []
        # The memories past the budget even without provenance are not
        # answered: recall ranks the rows it has memories for, and a page
        # (at most MAX_RECALL_LIMIT rows) always fits without provenance.
        memories = memories[: answer_budget.keep_within(memories, ANSWER_BUDGET_BYTES)]
        return Walk(admitted, memories, neighbours)


def _admitted_neighbours(
    conn: psycopg.Connection, admitted: list[str], seeds: int, include_superseded: bool
) -> list[tuple[str, str]]:
    """The episode neighbours of the first ``seeds`` admitted rows that the walk
    admitted too; a seed is never another seed's neighbour."""
    first = admitted[:seeds]
    params = {"seeds": v.uuid_array(first), "include_superseded": include_superseded}
    rows = conn.execute(mq.EPISODE_NEIGHBOURS, params).fetchall()
    keep = set(admitted) - set(first)
    return [(s, n) for s, n in rows if n in keep]
