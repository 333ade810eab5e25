"""Dedup review (design §8.1): near-duplicate pairs among the newest memories a
caller may see, and the "keep both" decision. Every query runs inside the
caller's transaction, so row-level security decides what exists: a pair is
only ever made of two memories the caller may see, and a dismissal cannot be
written for (or reveal) a memory the caller may not see."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass

import psycopg
from psycopg.types.json import Jsonb

from recallatron import errors
from recallatron.embed_input import EMBED_INPUT_VERSION
from services.store.domain import validation as v
from services.store.domain.workspace_services import InWorkspaces
from services.store.infrastructure.db import Caller
from services.store.sql import memory_queries as mq

MAX_WINDOW = 500
DEFAULT_WINDOW = 500
DEFAULT_MIN_COSINE = 0.80
DEFAULT_LIMIT = 50
MAX_LIMIT = 500

# The vectors compared must come from one model: the one the embedding job
# wrote last with the current input stamp (after a model change, rebuild
# replaces the older vectors; until then they are left out, not mixed in).
# Memories superseded for the caller keep their vector (0067_baseline/08_embedding.sql:
# recall may find them) but are left out of the window, and forgotten ones have none,
# so neither ever forms a pair. The window is the newest current memories the
# caller may see, taken before their vectors: one not embedded yet (or parked)
# keeps its place rather than letting the window reach back to older ones
# (design §8.1). 500 x 500 / 2 cosines is cheap in SQL.
# Current for the caller: no memory along its chain of successors is one they
# may see (visible_successor, 0067_baseline/12_chains.sql), as read, recall and
# the lists take it; the walk only for a superseded memory. One superseded
# only by successors hidden from them is theirs to review, and answers as
# before the supersede, which it may not reveal.
CURRENT_FOR_CALLER = "(m.superseded_by_id IS NULL OR visible_successor(m.superseded_by_id) IS NULL)"
CURRENT_MODEL = """current_model AS (
    SELECT e.model_id FROM memory_embedding e
    WHERE e.input_version = %(input_version)s
    ORDER BY e.created_at DESC
    LIMIT 1
)"""
PAIRS = f"""
WITH {CURRENT_MODEL}, newest AS (
    SELECT m.id FROM memory m
    WHERE {CURRENT_FOR_CALLER}
    ORDER BY m.created_at DESC, m.id DESC
    LIMIT %(window)s
), recent AS (
    SELECT n.id, e.embedding
    FROM newest n JOIN memory_embedding e ON e.memory_id = n.id
    WHERE e.input_version = %(input_version)s
      AND e.model_id = (SELECT model_id FROM current_model)
)
SELECT a.id, b.id, 1 - (a.embedding <=> b.embedding) AS cosine
FROM recent a JOIN recent b ON a.id < b.id
WHERE 1 - (a.embedding <=> b.embedding) >= %(min_cosine)s
  AND NOT EXISTS (
        SELECT 1 FROM dismissed_pair d WHERE d.first_id = a.id AND d.second_id = b.id)
ORDER BY cosine DESC, a.id, b.id
LIMIT %(limit)s
"""
# The window is walked from the created_at index: row security's conditions
# leave the planner expecting few visible memories, so with sorting on it
# reads every memory the caller may see and sorts them for the newest
# (20,040 memory rows a page at 20,040 memories).
WINDOW_ORDER = {"enable_sort": "off"}
# The pair's memories the caller may see, as they stand (superseded for the
# caller, as a change takes it, and its revision as they number it): a
# dismissal given the revisions read checks them against these, in its own
# transaction.
PAIR_STATES = f"""
SELECT id::text, reader_revision(id, revision), {mq.SUPERSEDED_FOR_CALLER}
FROM memory WHERE id = ANY(%s::uuid[])
"""
DISMISS = """
INSERT INTO dismissed_pair (first_id, second_id, dismissed_by) VALUES (%s, %s, %s)
ON CONFLICT (first_id, second_id) DO NOTHING
"""
AUDIT = """
INSERT INTO audit_log (member_id, action, memory_id, detail) VALUES (%s, 'dismiss_pair', %s, %s)
"""


@dataclass(frozen=True)
class Pair:
    first_id: str
    second_id: str
    cosine: float


def canonical(first_id: str, second_id: str) -> tuple[str, str]:
    """The pair's two ids, validated, in the order Postgres sorts uuids."""
    a, b = v.two_uuids(first_id, second_id, "first_id", "second_id")
    lo, hi = sorted((a, b), key=uuid.UUID)
    return lo, hi


def _pair_states(conn: psycopg.Connection, lo: str, hi: str) -> dict[str, tuple[int, bool]]:
    """Each of the pair's memories the caller sees: its revision, and whether it is superseded."""
    return {r[0]: (int(r[1]), bool(r[2])) for r in conn.execute(PAIR_STATES, ([lo, hi],))}


def _all_seen(states: dict[str, tuple[int, bool]], expected: dict[str, tuple[str, int]]) -> None:
    """NotFound naming the first field whose memory is not in ``states``."""
    for field, (memory_id, _) in expected.items():
        if memory_id not in states:
            raise errors.NotFound(f"{field}: memory not found")


def _min_cosine(value: float) -> float:
    if value == 0:
        return DEFAULT_MIN_COSINE
    if not math.isfinite(value) or not 0 < value <= 1:
        raise errors.InvalidArgument("min_cosine", "must lie in (0, 1]")
    return value


def _expected(revision: int, field: str) -> None:
    """A revision read (>= 1), or 0: not checked."""
    if revision < 0:
        raise errors.InvalidArgument(field, "must be the revision you read (>= 1), or 0")


class DedupStore(InWorkspaces):
    def pairs(
        self, caller: Caller, window: int, min_cosine: float, limit: int
    ) -> tuple[list[Pair], bool]:
        """The best ``limit`` pairs, and whether more wait past them (the
        caller is told the list was cut, not that it ended)."""
        limit = v.count(limit, "limit", DEFAULT_LIMIT, MAX_LIMIT)
        params = {
            "input_version": EMBED_INPUT_VERSION,
            "window": v.count(window, "window", DEFAULT_WINDOW, MAX_WINDOW),
            "min_cosine": _min_cosine(min_cosine),
            # One more than asked: whether another waits.
            "limit": limit + 1,
        }
        with self.transaction(caller, WINDOW_ORDER) as conn:
            rows = conn.execute(PAIRS, params).fetchall()
        # Float rounding can put an identical pair a hair above 1.
        pairs = [Pair(str(a), str(b), min(float(c), 1.0)) for a, b, c in rows[:limit]]
        return pairs, len(rows) > limit

    def dismiss(
        self,
        caller: Caller,
        first_id: str,
        second_id: str,
        first_revision: int = 0,
        second_revision: int = 0,
    ) -> None:
        """Keep both: the pair is never proposed again. Idempotent. A pair
        with a memory the caller may not see is not found, like any other.
        ``first_revision``/``second_revision``: 0, not checked; else the
        revision the caller read of that memory, refused as correct refuses
        a change on a revision read before another change (ABORTED; a memory
        superseded since, FAILED_PRECONDITION)."""
        lo, hi = canonical(first_id, second_id)
        expected = {
            "first_id": (v.uuid_str(first_id, "first_id"), first_revision),
            "second_id": (v.uuid_str(second_id, "second_id"), second_revision),
        }
        _expected(first_revision, "first_expected_revision")
        _expected(second_revision, "second_expected_revision")
        with self.transaction(caller) as conn:
            states = _pair_states(conn, lo, hi)
            _all_seen(states, expected)
            # Read without a lock: a change committing after this read orders
            # after the dismissal, which then was taken on the text it read.
            for field, (memory_id, revision) in expected.items():
                current, superseded = states[memory_id]
                if not revision:
                    continue
                if superseded:
                    raise errors.FailedPrecondition(
                        f"{field}: the memory was superseded and is no longer proposed",
                        subject=field,
                    )
                if current != revision:
                    raise errors.RevisionMismatch(memory_id, revision, current)
            try:
                # A savepoint: after row security's refusal the pair is read again.
                with conn.transaction():
                    written = conn.execute(DISMISS, (lo, hi, caller.member_id)).rowcount
            except psycopg.errors.InsufficientPrivilege:
                # A memory went out of sight since it was read (forgotten at
                # that moment): not found, named as for one never there.
                _all_seen(_pair_states(conn, lo, hi), expected)
                raise errors.NotFound("first_id or second_id: memory not found") from None
            if written == 1:
                conn.execute(AUDIT, (caller.member_id, lo, Jsonb({"second_id": hi})))
