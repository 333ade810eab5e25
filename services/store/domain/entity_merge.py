"""Entity merge, decided by a person (design §8.5): pairs of entities that may
be one, proposed for the review page, and an owner's decisions on them:
merge (a reversible record; nothing about either entity is rewritten),
keep apart (never proposed again), undo a merge. Nothing here merges on a
pair's strength: a merge is written only by `merge`, which the page calls on
an owner's explicit decision.

Everything runs inside the caller's transaction, so row-level security
decides what exists: an entity only through a mention the caller may see, a
decision only while both its entities exist for the caller. A proposal, and
every piece of evidence shown with it, is made of what the caller may see."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg.types.json import Jsonb

from recallatron import errors
from recallatron.embed_input import EMBED_INPUT_VERSION
from recallatron.size_budget import Budget
from recallatron.vocabulary import ANSWER_BUDGET_BYTES, MAX_ENTITY_GROUP
from services.store.domain import answer_budget, entity_groups, graph, page_tokens
from services.store.domain import validation as v
from services.store.domain.dedup import CURRENT_FOR_CALLER, CURRENT_MODEL
from services.store.domain.workspace_services import InWorkspaces
from services.store.infrastructure.db import Caller
from services.store.sql import graph_queries as gq

# The entities looked at: those mentioned by the caller's newest memories
# current for them (a bounded window, as dedup review's: one whose successors
# are all hidden from the caller is in it, as before its supersede), at most
# this many.
PAIR_MEMORIES = 1000
PAIR_ENTITIES = 500
# Mention contexts (the mean embedding of the memories mentioning each
# entity, less the mean of the window's memories) at least this close
# propose a pair.
CONTEXT_MIN_COSINE = 0.56  # docs/graph.md "Mention contexts: the threshold"
# The window is the newest memories walked from the created_at index: row
# security's conditions leave the planner expecting few visible memories, so
# with sorting on it reads every memory the caller may see and sorts them for
# the newest 1,000 (20,040 memory rows a page at 20,040 memories).
WINDOW_ORDER = {"enable_sort": "off"}
DEFAULT_PAIRS = 20
MAX_PAIRS = 100
DEFAULT_MERGES = 50
MAX_MERGES = 200

# One statement: the window, the three rules, the decisions already taken.
# - same_name / same_alias: equal normalised names, or a name or current
#   alias equal to the other's;
# - name_prefix: one name is a whole-word prefix of the other ("robin" of
#   "robin goodwin") and the two share an entity co-mentioned in the window;
# - close_context: their mention contexts (centred, of the window's memories)
#   are close, their types agree (or one has none) and no memory of the window
#   mentions both (entities named together in one memory are two things, and
#   would share their context trivially).
# Every rule reads the window's memories only, so a pair costs what the
# window holds, however many older memories mention its entities.
PAIRS = f"""
WITH {CURRENT_MODEL}, recent_memory AS (
    SELECT m.id, m.created_at FROM memory m
    WHERE {CURRENT_FOR_CALLER}
    ORDER BY m.created_at DESC, m.id DESC
    LIMIT %(memories)s
), windowed AS (
    SELECT e.id, e.name_key, e.type
    FROM entity e
    JOIN (SELECT mn.entity_id, max(rm.created_at) AS seen
          FROM mention mn JOIN recent_memory rm ON rm.id = mn.memory_id
          GROUP BY mn.entity_id) s ON s.entity_id = e.id
    ORDER BY s.seen DESC, e.id
    LIMIT %(entities)s
), window_mean AS (
    -- Contexts are centred on the window's mean: a mean of many memories
    -- otherwise drifts toward it, and so toward every other such mean.
    SELECT avg(me.embedding) AS mean
    FROM recent_memory rm JOIN memory_embedding me ON me.memory_id = rm.id
    WHERE me.input_version = %(input_version)s
      AND me.model_id = (SELECT model_id FROM current_model)
), window_mention AS MATERIALIZED (
    -- The window's mentions: contexts and co-mentions are read here, never
    -- from every mention of an entity (one named by tens of thousands of
    -- older memories costs what the window holds of it).
    SELECT mn.memory_id, mn.entity_id
    FROM recent_memory rm JOIN mention mn ON mn.memory_id = rm.id
), context AS (
    SELECT wm.entity_id AS id, avg(me.embedding) - (SELECT mean FROM window_mean) AS centroid
    FROM window_mention wm
    JOIN memory_embedding me ON me.memory_id = wm.memory_id
    WHERE wm.entity_id IN (SELECT id FROM windowed)
      AND me.input_version = %(input_version)s
      AND me.model_id = (SELECT model_id FROM current_model)
    GROUP BY wm.entity_id
), grp AS MATERIALIZED (
    SELECT g.start_id, g.member_id FROM entity_group(ARRAY(SELECT id FROM windowed)) g
), rep AS MATERIALIZED (
    -- The least member stands for its group: the rows of two groups are one
    -- proposal, and two entities of one group none.
    SELECT start_id AS id, min(member_id::text)::uuid AS rep FROM grp GROUP BY start_id
), recent AS MATERIALIZED (
    -- Each entity with its group and its context, joined once here (the
    -- rules below make many rows of few entities).
    SELECT w.id, w.name_key, w.type, r.rep, c.centroid
    FROM windowed w JOIN rep r ON r.id = w.id LEFT JOIN context c ON c.id = w.id
), keys AS (
    SELECT r.id, r.rep, r.centroid, r.name_key AS key, true AS is_name FROM recent r
    UNION ALL
    SELECT a.entity_id, r.rep, r.centroid, a.alias_key, false
    FROM entity_alias a JOIN recent r ON r.id = a.entity_id
    WHERE {gq.ALIAS_CURRENT_NOW}
), by_key AS (
    SELECT a.id AS first_id, b.id AS second_id, a.rep AS first_rep, b.rep AS second_rep,
           CASE WHEN bool_or(a.is_name AND b.is_name) THEN 'same_name'
                ELSE 'same_alias' END AS reason,
           max(nullif(1 - (a.centroid <=> b.centroid), 'NaN')) AS cosine
    FROM keys a JOIN keys b ON a.key = b.key AND a.id < b.id AND a.rep <> b.rep
    GROUP BY a.id, b.id, a.rep, b.rep
), by_prefix AS (
    SELECT least(a.id, b.id), greatest(a.id, b.id), a.rep, b.rep, 'name_prefix',
           nullif(1 - (a.centroid <=> b.centroid), 'NaN')
    FROM recent a JOIN recent b
      ON length(b.name_key) > length(a.name_key)
     AND left(b.name_key, length(a.name_key) + 1) = a.name_key || ' '
    WHERE a.rep <> b.rep AND EXISTS (
        SELECT 1
        FROM window_mention ma
        JOIN window_mention ca ON ca.memory_id = ma.memory_id
                              AND ca.entity_id <> a.id AND ca.entity_id <> b.id
        JOIN window_mention cb ON cb.entity_id = ca.entity_id
        JOIN window_mention mb ON mb.memory_id = cb.memory_id AND mb.entity_id = b.id
        WHERE ma.entity_id = a.id)
), by_context AS (
    SELECT a.id, b.id, a.rep, b.rep, 'close_context',
           nullif(1 - (a.centroid <=> b.centroid), 'NaN')
    FROM recent a JOIN recent b ON a.id < b.id
    WHERE a.rep <> b.rep
      AND (a.type IS NULL OR b.type IS NULL OR a.type = b.type)
      -- As a distance: a zero context (NaN cosine), or none, never passes.
      AND (a.centroid <=> b.centroid) <= 1 - %(min_cosine)s
      AND NOT EXISTS (SELECT 1 FROM window_mention x
                      JOIN window_mention y ON y.memory_id = x.memory_id
                      WHERE x.entity_id = a.id AND y.entity_id = b.id)
), candidates AS (
    SELECT * FROM by_key UNION ALL SELECT * FROM by_prefix UNION ALL SELECT * FROM by_context
), apart AS MATERIALIZED (
    -- Two groups any of whose members were kept apart are kept apart.
    SELECT DISTINCT least(ra.rep, rb.rep) AS lo, greatest(ra.rep, rb.rep) AS hi
    FROM entity_pair_apart d
    JOIN grp ga ON ga.member_id = d.first_id JOIN rep ra ON ra.id = ga.start_id
    JOIN grp gb ON gb.member_id = d.second_id JOIN rep rb ON rb.id = gb.start_id
)
-- One row per pair of groups, named by its closest two entities.
SELECT (array_agg(c.first_id ORDER BY c.cosine DESC NULLS LAST, c.first_id, c.second_id))[1],
       (array_agg(c.second_id ORDER BY c.cosine DESC NULLS LAST, c.first_id, c.second_id))[1],
       array_agg(DISTINCT c.reason) AS reasons,
       max(c.cosine) AS cosine
FROM candidates c
WHERE NOT EXISTS (SELECT 1 FROM apart a WHERE a.lo = least(c.first_rep, c.second_rep)
                                          AND a.hi = greatest(c.first_rep, c.second_rep))
GROUP BY least(c.first_rep, c.second_rep), greatest(c.first_rep, c.second_rep)
ORDER BY bool_or(c.reason <> 'close_context') DESC, cosine DESC NULLS LAST,
         least(c.first_rep, c.second_rep), greatest(c.first_rep, c.second_rep)
LIMIT %(limit)s
"""
# Merges in one workspace are decided one at a time (a transaction-scoped
# lock of its database): two taken at once could each find their groups within
# MAX_ENTITY_GROUP and together pass it. Owners decide merges; they are rare.
MERGE_TURN = "SELECT pg_advisory_xact_lock(7405, 0)"
# The entities two groups hold together as the workspace holds them, merges
# the caller cannot see included (migration 0050): only a number.
GROUP_SIZE = "SELECT entity_group_size(%s::uuid[])"
INSERT_MERGE = """
INSERT INTO entity_merge (id, kept_id, merged_id, decided_by) VALUES (%s, %s, %s, %s)
ON CONFLICT (least(kept_id, merged_id), greatest(kept_id, merged_id))
    WHERE undone_at IS NULL DO NOTHING
RETURNING decided_at
"""
UNDO_MERGE = """
UPDATE entity_merge SET undone_at = now(), undone_by = %(me)s
WHERE id = %(id)s AND undone_at IS NULL
RETURNING kept_id, merged_id
"""
KEEP_APART = """
INSERT INTO entity_pair_apart (first_id, second_id, decided_by) VALUES (%s, %s, %s)
ON CONFLICT (first_id, second_id) DO NOTHING
"""
# Newest first; a page goes on after the (decided_at, id) its token names,
# so merges undone (or decided) since the last page shift nothing.
MERGES = """
SELECT m.id, k.id, k.name, k.type, x.id, x.name, x.type, m.decided_by, m.decided_at
FROM entity_merge m JOIN entity k ON k.id = m.kept_id JOIN entity x ON x.id = m.merged_id
WHERE m.undone_at IS NULL
  AND (%(pair)s::uuid[] IS NULL OR (m.kept_id = ANY(%(pair)s::uuid[])
                                    AND m.merged_id = ANY(%(pair)s::uuid[])))
  AND (%(after_at)s::timestamptz IS NULL
       OR m.decided_at < %(after_at)s::timestamptz
       OR (m.decided_at = %(after_at)s::timestamptz AND m.id > %(after_id)s::uuid))
ORDER BY m.decided_at DESC, m.id
LIMIT %(limit)s
"""
AUDIT = """
INSERT INTO audit_log (member_id, action, detail) VALUES (%s, %s, %s)
"""


@dataclass(frozen=True)
class EntityPair:
    first: graph.EntityCard
    second: graph.EntityCard
    reasons: list[str]
    context_cosine: float | None


@dataclass(frozen=True)
class Merge:
    id: str
    kept: graph.EntityRefView
    merged: graph.EntityRefView
    decided_by: str
    decided_at: datetime


@dataclass(frozen=True)
class MergePage:
    merges: list[Merge]
    # Empty when this page is the last.
    next_page_token: str


def _owner(caller: Caller) -> None:
    if caller.role != "owner":
        raise errors.PermissionDenied("only a workspace owner may decide on entity merges")


def _all_seen(grouped: dict[str, entity_groups.Group], given: dict[str, str]) -> None:
    """NotFound naming the first field (in the request's order) whose entity
    the caller does not see: one hidden reads as one that does not exist."""
    for field, entity_id in given.items():
        if entity_id not in grouped:
            raise errors.NotFound(f"{field}: entity not found")


@contextmanager
def _seen_until_written(conn: psycopg.Connection, given: dict[str, str]) -> Iterator[None]:
    """Row security checks a decision's row as it is written: an entity that
    went out of the caller's sight since it was read (its last visible
    mention forgotten at that moment) refuses it. The write runs in a
    savepoint, so the entities can be read again to name the one gone."""
    try:
        with conn.transaction():
            yield
    except psycopg.errors.InsufficientPrivilege:
        _all_seen(entity_groups.groups(conn, list(given.values())), given)
        raise errors.NotFound(f"{' or '.join(given)}: entity not found") from None


class EntityMergeStore(InWorkspaces):
    def pairs(self, caller: Caller, limit: int = 0) -> tuple[list[EntityPair], bool]:
        """Proposed pairs, each as two cards of what the caller may see. Two
        entities already one (for the caller) or kept apart are not proposed;
        a pair whose sides belong to merged groups is shown group to group.
        As many as fit the answer's size budget (ANSWER_BUDGET_BYTES, at
        least one) and the limit, and whether pairs were left out for either
        (decided on, the shown ones make way for them): the caller is told
        the list was cut, not that it ended."""
        _owner(caller)
        limit = v.count(limit, "limit", DEFAULT_PAIRS, MAX_PAIRS)
        params = {
            "input_version": EMBED_INPUT_VERSION,
            "memories": PAIR_MEMORIES,
            "entities": PAIR_ENTITIES,
            "min_cosine": CONTEXT_MIN_COSINE,
            # One row per pair of groups, none inside one group or kept
            # apart (the statement decides, so none crowds out another);
            # one more than asked tells whether another waits.
            "limit": limit + 1,
        }
        with self.transaction(caller, WINDOW_ORDER) as conn:
            rows = conn.execute(PAIRS, params).fetchall()
            ids = list(dict.fromkeys(str(i) for r in rows for i in (r[0], r[1])))
            cards = graph.cards_by_id(conn, ids)
        out: list[EntityPair] = []
        shown: set[tuple[str, str]] = set()
        page = Budget(ANSWER_BUDGET_BYTES)
        for first_id, second_id, reasons, cosine in rows:
            a, b = cards.get(str(first_id)), cards.get(str(second_id))
            if a is None or b is None or a is b:
                continue
            key = (min(a.entity.id, b.entity.id), max(a.entity.id, b.entity.id))
            if key in shown:
                continue
            if len(out) == limit:
                return out, True
            if not page.takes(answer_budget.card_bytes(a) + answer_budget.card_bytes(b)):
                return out, True
            shown.add(key)
            out.append(
                EntityPair(
                    a, b, sorted(reasons), None if cosine is None else min(float(cosine), 1.0)
                )
            )
        return out, False

    def merge(self, caller: Caller, kept_id: str, merged_id: str) -> tuple[Merge, bool]:
        """Records that ``merged_id`` is ``kept_id`` (reversibly); afterwards
        both answer as one, under the kept entity's group. Two entities that
        already answer as one are left as they are (False)."""
        _owner(caller)
        kept, merged = v.two_uuids(kept_id, merged_id, "kept_id", "merged_id")
        given = {"kept_id": kept, "merged_id": merged}
        with self.transaction(caller) as conn:
            conn.execute(MERGE_TURN)
            grouped = entity_groups.groups(conn, [kept, merged])
            _all_seen(grouped, given)
            if merged in grouped[kept].ids:
                existing = self._merges(conn, 1, [kept, merged])
                if existing:
                    return existing[0], False
                raise errors.FailedPrecondition(
                    "the two entities already answer as one through other merges"
                )
            size = len(grouped[kept].ids) + len(grouped[merged].ids)
            if size <= MAX_ENTITY_GROUP:
                # The bound holds for every reader: merges decided for another
                # purpose, or through another member's memories, count too.
                row = conn.execute(GROUP_SIZE, ([kept, merged],)).fetchone()
                size = max(size, int(row[0]) if row else 0)
            if size > MAX_ENTITY_GROUP:
                raise errors.FailedPrecondition(
                    f"a merged entity holds at most {MAX_ENTITY_GROUP} entities"
                    " (merges decided for other purposes count too)",
                    "merged_id",
                )
            merge_id = str(uuid.uuid4())
            with _seen_until_written(conn, given):
                row = conn.execute(
                    INSERT_MERGE, (merge_id, kept, merged, caller.member_id)
                ).fetchone()
            if row is None:
                # The same decision, taken at the same moment, won.
                return self._merges(conn, 1, [kept, merged])[0], False
            conn.execute(
                AUDIT,
                (
                    caller.member_id,
                    "merge_entities",
                    Jsonb({"merge_id": merge_id, "kept_id": kept, "merged_id": merged}),
                ),
            )
            names = {m.id: m for g in grouped.values() for m in g.members}
        return (
            Merge(
                merge_id,
                names[kept],
                names[merged],
                caller.member_id,
                row[0],
            ),
            True,
        )

    def keep_apart(self, caller: Caller, first_id: str, second_id: str) -> None:
        """The pair is never proposed again. Idempotent. Entities that
        answer as one must be undone first."""
        _owner(caller)
        first, second = v.two_uuids(first_id, second_id, "first_id", "second_id")
        given = {"first_id": first, "second_id": second}
        lo, hi = sorted((first, second), key=uuid.UUID)
        with self.transaction(caller) as conn:
            grouped = entity_groups.groups(conn, [lo, hi])
            _all_seen(grouped, given)
            if hi in grouped[lo].ids:
                raise errors.FailedPrecondition("the two entities are merged; undo the merge first")
            with _seen_until_written(conn, given):
                written = conn.execute(KEEP_APART, (lo, hi, caller.member_id)).rowcount
            if written == 1:
                conn.execute(
                    AUDIT,
                    (
                        caller.member_id,
                        "keep_entities_apart",
                        Jsonb({"first_id": lo, "second_id": hi}),
                    ),
                )

    def undo(self, caller: Caller, merge_id: str) -> None:
        """Ends a merge in force; both entities answer on their own again
        (the record stays, with who undid it and when)."""
        _owner(caller)
        mid = v.uuid_str(merge_id, "merge_id")
        with self.transaction(caller) as conn:
            row = conn.execute(UNDO_MERGE, {"id": mid, "me": caller.member_id}).fetchone()
            if row is None:
                raise errors.NotFound("merge_id: no merge in force with that id")
            conn.execute(
                AUDIT,
                (
                    caller.member_id,
                    "undo_entity_merge",
                    Jsonb({"merge_id": mid, "kept_id": str(row[0]), "merged_id": str(row[1])}),
                ),
            )

    def merges(
        self, caller: Caller, limit: int = 0, page_size: int = 0, page_token: str = ""
    ) -> MergePage:
        """A page of the merges in force the caller may see, newest first:
        ``page_size`` of them (or ``limit``, as callers from before paging
        ask), after the last merge of the page ``page_token`` ended."""
        _owner(caller)
        if page_size and limit:
            raise errors.InvalidArgument("page_size", "give page_size or limit, not both")
        size = (
            v.count(page_size, "page_size", DEFAULT_MERGES, MAX_MERGES)
            if page_size
            else v.count(limit, "limit", DEFAULT_MERGES, MAX_MERGES)
        )
        after = _after(page_token) if page_token else None
        with self.transaction(caller) as conn:
            # One more than the page, to know whether another follows.
            found = self._merges(conn, size + 1, None, after)
        if len(found) <= size:
            return MergePage(found, "")
        last = found[size - 1]
        token = page_tokens.encode(
            {"w": "merges", "at": last.decided_at.isoformat(), "id": last.id}
        )
        return MergePage(found[:size], token)

    @staticmethod
    def _merges(
        conn: psycopg.Connection,
        limit: int,
        pair: list[str] | None,
        after: tuple[datetime, str] | None = None,
    ) -> list[Merge]:
        params = {
            "limit": limit,
            "pair": pair,
            "after_at": after[0] if after else None,
            "after_id": after[1] if after else None,
        }
        rows = conn.execute(MERGES, params).fetchall()
        return [
            Merge(
                str(r[0]),
                graph.EntityRefView(str(r[1]), r[2], r[3]),
                graph.EntityRefView(str(r[4]), r[5], r[6]),
                str(r[7]),
                r[8],
            )
            for r in rows
        ]


def _after(page_token: str) -> tuple[datetime, str]:
    """Where a merges page token says the next page starts; InvalidArgument
    (page_token) for any other token."""
    data = page_tokens.decode(page_token)
    try:
        if data.get("w") != "merges":
            raise ValueError("another listing's token")
        at = datetime.fromisoformat(str(data["at"]))
        if at.tzinfo is None:
            raise ValueError("a time without its zone")
        return at, v.uuid_str(str(data["id"]), "page_token")
    except (KeyError, ValueError, errors.InvalidArgument):
        raise errors.InvalidArgument("page_token", page_tokens.NOT_OURS) from None
