"""The two candidate queries of recall (design §5.2, 5.3), eligibility applied
in SQL inside the caller's transaction: by row-level security for the dense
arm, explicitly by the lexical arm's functions (0067_baseline/06_recall.sql)."""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import psycopg

from recallatron import errors, recall_filters
from recallatron.candidates import Candidate
from recallatron.vocabulary import (
    MAX_NOT_EMBEDDED_COUNTED,
    MAX_QUERY_CHARS,
    PURPOSES,
    VECTOR_DIMENSIONS,
)
from services.store.domain import entity_groups, expiry_gate
from services.store.domain import validation as v
from services.store.domain.control import ControlPlane
from services.store.domain.every_term import matching_every_term
from services.store.domain.workspace_services import InWorkspaces
from services.store.infrastructure.db import GENERIC_PLANS, Caller, caller_transaction

# Terms at or above this share of the workspace's memories are dropped from a
# query of three terms or more (design §5.2).
DF_CUTOFF = 0.15
MAX_LIMIT = 500
# HNSW candidate list; at least the LIMIT, or pgvector returns fewer rows.
EF_SEARCH = 100

# The query's distinct lexemes with their document frequencies and the corpus
# size, over the memories the caller may see (the workspace's statistics plus
# the caller's own, for the caller's purpose: 0067_baseline/06_recall.sql),
# from the trigger-maintained statistics (no corpus scan). Row security on the
# statistics says the same; the explicit conditions let the primary key serve.
# The last column, the planner's estimate of all memories, only chooses how the
# capped path finds its rows (the same rows either way). The query's terms
# are read as the search vectors hold words, accents folded, hyphenated words
# joined besides (query_lexemes, workspace migration 0077).
TERMS = """
WITH visible(audience) AS (VALUES (stat_audience(NULL)), (caller_member()))
SELECT t.lexeme,
       coalesce((SELECT sum(s.docs) FROM term_stat s, visible a
                 WHERE s.lexeme = t.lexeme AND s.purpose = caller_purpose()
                   AND s.audience = a.audience), 0),
       coalesce((SELECT sum(c.docs) FROM corpus_stat c, visible a
                 WHERE c.purpose = caller_purpose() AND c.audience = a.audience), 0),
       (SELECT reltuples FROM pg_class WHERE oid = 'memory'::regclass)
FROM unnest(query_lexemes(%s)) AS t(lexeme)
ORDER BY t.lexeme
"""

# The arm runs in SECURITY DEFINER functions (0067_baseline/06_recall.sql) that
# read the GIN index and apply the eligibility rule explicitly: beneath
# row-level security `@@` is not leakproof and would be checked on every
# visible row. Rows are ordered by BM25 with the kept terms'
# idf from the caller's own statistics. Every match is ranked when the kept
# terms' document frequencies say the matches are few (the common case with
# the 15% rule).
LEXICAL = """
SELECT id::text, score FROM lexical_candidates_bm25(
    %(tsquery)s::tsquery, %(terms)s::text[], %(idfs)s::float8[], %(limit)s,
    %(include_superseded)s, %(kinds)s::memory_kind[], %(expiry_days)s, %(entities)s::uuid[])
"""
# When they say the matches are many, only the most recent CANDIDATE_CAP
# matches are ranked: ranking costs per match, and a lexical arm that ranks
# every match grows with the corpus (MEASUREMENTS: 9 ms under 1,000 matches,
# 192 ms above 15,000). Recency is the tie-breaker a memory service wants.
# Of those, ts_rank (cheap) keeps the best PREFILTER_FACTOR x limit for BM25
# to order: on the benchmark corpora the top 100 of ts_rank_cd were the same
# rows in 598 capped queries of 599 (docs/benchmarks.md).
# Beside them, every match of the query's rare terms (``rare_terms``; NULL
# for none) is ranked too, past the prefilter: otherwise a rare word beside a
# common one went unfound once CANDIDATE_CAP newer memories held the common
# one (0067_baseline/06_recall.sql).
LEXICAL_CAPPED = """
SELECT id::text, score FROM lexical_candidates_bm25_capped(
    %(tsquery)s::tsquery, %(rare)s::tsquery, %(terms)s::text[], %(idfs)s::float8[], %(limit)s,
    %(cap)s, %(prefilter)s, %(include_superseded)s, %(kinds)s::memory_kind[], %(expiry_days)s,
    %(entities)s::uuid[], %(by_index)s)
"""
PREFILTER_FACTOR = 2
CANDIDATE_CAP = 500

# The inner query walks the HNSW graph of the caller's purpose
# (0067_baseline/06_recall.sql: the purpose, a value in a custom plan, proves
# the partial index's predicate; iterative scan keeps going until enough rows
# pass the eligibility filter, which row-level security applies to the vector's
# own copy of its memory's trust, see 0067_baseline/08_embedding.sql; the
# walk's condition is applied to its copy of the memory's provenance, so that a
# row the walk would refuse takes no place among the first rows). The floor is
# applied by the caller (RecallQueries.dense), after it has seen how many rows
# the scan found: fewer than asked tells a scan that gave up. Vectors exist for
# every memory not forgotten; a superseded one's is admitted as the lexical arm
# and the walk admit its memory (asked for, or no memory along its chain of
# successors visible to the caller, successor_seen). Looked up for a superseded
# vector alone, its direct successor first, by primary key under the memory
# policy: a successor the caller sees settles it at a fiftieth of the chain's
# walk (the exact plan, beneath no policy, also reads a hidden one's own
# successor: dense_candidates_exact, 0067_baseline/08_embedding.sql).
_DENSE = """
SELECT id::text, cosine FROM (
    SELECT e.memory_id AS id, 1 - (e.embedding <=> %(vector)b) AS cosine
    FROM memory_embedding e
    WHERE e.purposes @> ARRAY['{purpose}'::purpose]
      AND vector_provenance_admits(
            e.provenance_audience, e.provenance_purposes, e.provenance_forgotten)
      AND e.model_id = %(model_id)s AND e.input_version = %(input_version)s
      AND (cardinality(%(kinds)s::memory_kind[]) = 0 OR e.kind = ANY(%(kinds)s::memory_kind[]))
      AND (%(expiry_days)s = 0
           OR e.memory_updated_at >= now() - make_interval(days => %(expiry_days)s))
      AND (cardinality(%(entities)s::uuid[]) = 0 OR EXISTS (
            SELECT 1 FROM mention mn
            WHERE mn.memory_id = e.memory_id AND mn.entity_id = ANY(%(entities)s::uuid[])))
      AND (%(include_superseded)s OR e.superseded_by_id IS NULL
           OR ((SELECT s.id FROM memory s WHERE s.id = e.superseded_by_id) IS NULL
               AND NOT successor_seen(e.superseded_by_id)))
    ORDER BY e.embedding <=> %(vector)b
    LIMIT %(limit)s
) nearest
ORDER BY cosine DESC, id
"""
# One statement per purpose, the purpose written into it from the closed set
# (never from a request): its prepared plan, cached like any other, proves the
# predicate of that purpose's partial index. A parameter would need a custom
# plan on every execution (measured: 1.7-2.0 ms against 0.8-0.9 ms for the
# whole statement at 10,000 memories) for the planner to see the purpose.
DENSE = {purpose: _DENSE.replace("{purpose}", purpose) for purpose in PURPOSES}
# A narrow caller's vectors ranked exactly (0067_baseline/08_embedding.sql):
# cheaper than the filtered HNSW scan when the caller may see few of the
# vectors of their purpose's graph, and exact.
DENSE_EXACT = """
SELECT id::text, cosine FROM dense_candidates_exact(
    %(vector)b, %(model_id)s, %(input_version)s, %(limit)s, %(kinds)s::memory_kind[],
    %(expiry_days)s, %(entities)s::uuid[], %(include_superseded)s)
ORDER BY cosine DESC, id
"""
# How many memories the caller may see (the caller's own statistics) and the
# planner's estimate of the vectors in their purpose's graph (the partial
# index's entries, 0067_baseline/06_recall.sql): what decides between the two
# dense plans.
CALLER_CORPUS = """
SELECT coalesce(sum(c.docs), 0),
       (SELECT i.reltuples FROM pg_class i
        WHERE i.oid = to_regclass('memory_embedding_' || caller_purpose() || '_hnsw_idx'))
FROM corpus_stat c
WHERE c.purpose = caller_purpose() AND c.audience IN (stat_audience(NULL), caller_member())
"""
# The exact plan while the caller sees at most this share of their purpose's
# graph and at most EXACT_MAX_ROWS vectors, or at most ``exact_rows`` (the
# store's setting dense_exact_rows) in all: the filtered HNSW scan visits
# about 1/share as many vectors as it returns, so a caller who sees 5.6% of the
# graph took about 20 ms, where ranking their 5,563 vectors exactly took 4.7 ms
# (docs/benchmarks.md); ranking a half of 100,000 would not. Within their
# purpose's own graph a caller usually sees a large share (the narrow caller at
# 100,000: 5,563 of about 6,900 audit vectors), and the scan costs what an
# owner's does.
EXACT_SHARE = 0.1
EXACT_MAX_ROWS = 20_000


def dense_exact(visible: int, graph: float, exact_rows: int) -> bool:
    """Whether the caller's vectors are few enough, in all or against the
    graph of their purpose (``graph`` vectors), to rank them all exactly."""
    return visible <= max(exact_rows, min(EXACT_MAX_ROWS, EXACT_SHARE * graph))


HAS_EMBEDDINGS = """
SELECT EXISTS (SELECT 1 FROM memory_embedding WHERE model_id = %s AND input_version = %s)
"""
# The memories the caller may see that wait for their vector, up to a cap
# (0067_baseline/08_embedding.sql): what the dense arm cannot find yet.
NOT_EMBEDDED = "SELECT memories_not_embedded(%s)"


@dataclass(frozen=True)
class Filters:
    kinds: Sequence[str] = ()
    mention_entity_ids: Sequence[str] = ()
    include_superseded: bool = False


@dataclass(frozen=True)
class LexicalResult:
    candidates: list[Candidate]
    terms_kept: list[str] = field(default_factory=list)
    terms_dropped: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DenseResult:
    candidates: list[Candidate]
    embeddings_available: bool
    floor: float
    # Memories the caller may see with no vector yet, counted up to
    # MAX_NOT_EMBEDDED_COUNTED (that many: at least that many).
    not_embedded: int = 0


def select_terms(
    terms: Sequence[str], docs: dict[str, int], corpus: int
) -> tuple[list[str], list[str]]:
    """The 15% rule: from three terms up, drop every term found in 15% or more
    of the memories; if all would go, keep the rarest. "All" counts the terms
    some memory holds: a term none holds matches nothing, and kept alone it
    made a query that found nothing (in a small workspace, where one memory
    of six is 15%, every other term of it went)."""
    if len(terms) < 3 or corpus <= 0:
        return list(terms), []
    cutoff = DF_CUTOFF * corpus
    kept = [t for t in terms if docs.get(t, 0) < cutoff]
    if not any(docs.get(t, 0) > 0 for t in kept):
        held = [t for t in terms if docs.get(t, 0) > 0] or list(terms)
        rarest = min(held, key=lambda t: (docs.get(t, 0), t))
        kept = [t for t in terms if t in kept or t == rarest]
    return kept, [t for t in terms if t not in kept]


def idf(docs: int, corpus: int) -> float:
    """BM25's inverse document frequency of a term found in ``docs`` of the
    ``corpus`` memories the caller may see (never negative)."""
    docs = max(0, min(docs, corpus))
    return math.log(1.0 + (corpus - docs + 0.5) / (docs + 0.5))


def tsquery_text(terms: Sequence[str]) -> str:
    """An OR of already-normalised lexemes, each quoted (so tsquery operators
    in user text are only ever literal characters)."""
    quoted = ["'" + t.replace("\\", "\\\\").replace("'", "''") + "'" for t in terms]
    return " | ".join(quoted)


def _ranked(rows: Sequence[tuple[Any, ...]], every: set[str]) -> list[Candidate]:
    """An arm's rows (id, score) as candidates ranked from 1 in their order;
    ``every``: the ids whose memory holds every term of the query."""
    return [
        Candidate(str(r[0]), i + 1, float(r[1]), str(r[0]) in every) for i, r in enumerate(rows)
    ]


def _check_limit(limit: int) -> int:
    if limit <= 0 or limit > MAX_LIMIT:
        raise errors.InvalidArgument("limit", f"must lie in [1, {MAX_LIMIT}]")
    return limit


# Filters that only let more memories pass than a recall without them.
WIDENING_FILTERS = frozenset({"include_superseded"})


def walks(filters: Filters, expiry_days: int) -> bool:
    """Whether the capped path may walk the created_at index: only for a
    recall that nothing narrows. The walk's cost counts every match as
    passing (``walk_is_cheaper``); under a filter (a kind, a mentioned
    entity, the expiry gate, any other) few matches may pass, and the walk
    then reads the whole workspace looking for CANDIDATE_CAP of them, where
    the GIN index reads the matches alone."""
    narrowed = any(
        getattr(filters, f.name) for f in fields(filters) if f.name not in WIDENING_FILTERS
    )
    return not narrowed and expiry_days <= 0


def _filter_params(filters: Filters, expiry_days: int) -> dict[str, object]:
    kinds = [v.kind(k) for k in filters.kinds]
    entities = recall_filters.mention_entity_ids(list(filters.mention_entity_ids))
    return {
        "include_superseded": filters.include_superseded,
        "kinds": kinds,
        "entities": entities,
        # The opt-in expiry gate (0 = off): memories not renewed (corrected or
        # superseded, which moves updated_at) within the gate are left out of
        # recall. Nothing is deleted; turning the gate off restores them.
        "expiry_days": expiry_days,
        # Read by lexical_arm only; no statement names it.
        "walks": walks(filters, expiry_days),
    }


def _merged_mentions(conn: psycopg.Connection, params: dict[str, object]) -> None:
    """The mention filter takes in the entities merged with each named one
    (design §8.5), as the caller sees the merges: expanded here, in the
    caller's transaction, before any function that runs as its owner."""
    named = params["entities"]
    if isinstance(named, list) and named:
        params["entities"] = entity_groups.expand(conn, named)


@dataclass(frozen=True)
class QueryTerms:
    kept: list[str]
    dropped: list[str]
    # Few matches: the GIN index finds them. Many (the kept terms' document
    # frequencies over what the caller may see, an upper bound of the
    # caller's matches, add up to more than CANDIDATE_CAP): walk the
    # created_at index newest first and stop at the cap, a cost that does not
    # grow with the corpus. Both come from the caller's own statistics, so
    # neither the path nor the rows depend on memories the caller may not see.
    capped: bool
    # How the capped path finds the newest CANDIDATE_CAP matches (the same
    # rows either way): reading the caller's matches from the GIN index costs
    # about their posting entries, the sum of the kept terms' document
    # frequencies; walking the created_at index until the cap passes costs
    # about CANDIDATE_CAP x memories / matches rows, at most CANDIDATE_CAP x
    # memories / the largest document frequency (the terms may all be in the
    # same memories). A walked row costs WALK_COST of a match read from the
    # GIN index (the walk reads the heap in the order rows were written). The
    # walk when cheaper, and only for a recall no filter narrows (``walks``):
    # the estimate counts every match as passing.
    by_index: bool = False
    # BM25's idf of each kept term, in the order of ``kept``.
    idfs: list[float] = field(default_factory=list)
    # Capped: the kept terms whose every match is ranked (``rare_terms``).
    rare: list[str] = field(default_factory=list)

    def params(self) -> dict[str, object]:
        """The lexical functions' query parameters for these terms."""
        return {
            "tsquery": tsquery_text(self.kept),
            "terms": self.kept,
            "idfs": self.idfs,
            "rare": tsquery_text(self.rare) if self.rare else None,
        }


# Measured on 100,000 memories (docs/benchmarks.md, "What changed";
# benchmarks.arm_paths): of 210 capped queries, all 13 with largest x sum <=
# 0.145 x cap x memories were faster on the GIN index, and 191 of the 197
# above 0.15 faster walked.
WALK_COST = 0.15


def rare_terms(terms: Sequence[str], docs: Sequence[int]) -> list[str]:
    """The rarest of the kept terms whose document frequencies add up to at
    most CANDIDATE_CAP (rarest first, ties by lexeme): on the capped path all
    of their matches are ranked, at the cost of the uncapped path's."""
    rare: list[str] = []
    total = 0
    for doc_count, term in sorted(zip(docs, terms, strict=True)):
        if total + doc_count > CANDIDATE_CAP:
            break
        rare.append(term)
        total += doc_count
    return rare


def walk_is_cheaper(docs: Sequence[int], memories: float) -> bool:
    """Whether walking the created_at index finds the newest CANDIDATE_CAP
    matches of terms with these document frequencies sooner than reading
    their matches from the GIN index."""
    return max(docs, default=0) * sum(docs) > WALK_COST * CANDIDATE_CAP * memories


def query_terms(conn: psycopg.Connection, query: str) -> QueryTerms | None:
    """The query's terms after the 15% rule, from the statistics we keep
    anyway; None when the query has no terms."""
    # The form memories are kept in (0067_baseline/04_memory.sql): "é" one code
    # point.
    rows = conn.execute(TERMS, (unicodedata.normalize("NFC", query),)).fetchall()
    if not rows:
        return None
    docs = {r[0]: int(r[1]) for r in rows}
    corpus = int(rows[0][2] or 0)
    kept, dropped = select_terms([r[0] for r in rows], docs, corpus)
    kept_docs = [docs.get(t, 0) for t in kept]
    # reltuples is -1 before the first ANALYZE; the caller's corpus bounds it.
    memories = max(float(rows[0][3] or 0), corpus)
    capped = sum(kept_docs) > CANDIDATE_CAP
    return QueryTerms(
        kept,
        dropped,
        capped,
        walk_is_cheaper(kept_docs, memories),
        [idf(d, corpus) for d in kept_docs],
        rare_terms(kept, kept_docs) if capped else [],
    )


def lexical_arm(conn: psycopg.Connection, query: str, params: dict[str, object]) -> LexicalResult:
    """The lexical arm's statement in the caller's transaction ``conn``:
    ``params`` holds the filters and the limit, the terms are added here."""
    terms = query_terms(conn, query)
    if terms is None:
        return LexicalResult([])
    params = {**params, **terms.params()}
    if terms.capped:
        params["cap"] = CANDIDATE_CAP
        # Parameters built without _filter_params are taken as filtered:
        # the GIN index gives the same rows, and never reads past the matches.
        params["by_index"] = terms.by_index and params.get("walks") is True
        params["prefilter"] = PREFILTER_FACTOR * params["limit"]  # type: ignore[operator]
    rows = conn.execute(LEXICAL_CAPPED if terms.capped else LEXICAL, params).fetchall()
    ids = [str(r[0]) for r in rows]
    # One term: every match holds it, nothing to ask.
    one = len(terms.kept) + len(terms.dropped) == 1
    every = set(ids) if one else matching_every_term(conn, query, ids)
    return LexicalResult(
        _ranked(rows, every),
        terms.kept,
        terms.dropped,
    )


class RecallQueries(InWorkspaces):
    def __init__(self, control: ControlPlane, exact_rows: int) -> None:
        super().__init__(control)
        self.exact_rows = exact_rows

    def lexical(self, caller: Caller, query: str, limit: int, filters: Filters) -> LexicalResult:
        v.text(query, "query", MAX_QUERY_CHARS)
        expiry_days = self.control.settings(caller.workspace_id).expiry_days
        params = {**_filter_params(filters, expiry_days), "limit": _check_limit(limit)}
        # The arm's own functions plan their statements for each call (their
        # SET clause); the term statistics need no custom plan.
        pool = self.control.caller_pool(caller)
        with caller_transaction(pool, caller, GENERIC_PLANS) as conn:
            _merged_mentions(conn, params)
            return lexical_arm(conn, query, params)

    def dense(
        self,
        caller: Caller,
        vector: np.ndarray | Sequence[float],
        model_id: str,
        input_version: str,
        limit: int,
        filters: Filters,
        floor: float | None = None,
        words: str = "",
    ) -> DenseResult:
        values = np.asarray(vector, dtype=np.float32)
        if values.shape != (VECTOR_DIMENSIONS,) or not np.isfinite(values).all():
            raise errors.InvalidArgument("vector", f"must hold {VECTOR_DIMENSIONS} finite numbers")
        if not np.any(values):
            # Its cosine with any row is NaN, which passes any floor.
            raise errors.InvalidArgument("vector", "must not be all zero")
        if not model_id:
            raise errors.InvalidArgument("model_id", "is required")
        settings = self.control.settings(caller.workspace_id)
        floor = settings.dense_floor if floor is None else floor
        params = {
            **_filter_params(filters, settings.expiry_days),
            "limit": _check_limit(limit),
            "vector": values,
            "model_id": model_id,
            "input_version": input_version,
            "floor": floor,
        }
        # Iterative scan: a selective eligibility filter must not starve the
        # arm (MEASUREMENTS: 2% filter without it returns ~2 of 50); the
        # planner walks the HNSW index (vector_is_eligible,
        # 0067_baseline/08_embedding.sql), the graph of the caller's purpose
        # (its own statement, DENSE).
        hnsw = {
            "hnsw.iterative_scan": "relaxed_order",
            "hnsw.ef_search": str(max(EF_SEARCH, limit)),
        }
        with self.transaction(caller, hnsw) as conn:
            _merged_mentions(conn, params)
            row = conn.execute(CALLER_CORPUS).fetchone()
            visible = int(row[0]) if row is not None else 0
            exact = row is not None and dense_exact(visible, float(row[1] or 0), self.exact_rows)
            # Few vectors inside the expiry gate: the graph's scan would give up.
            exact = exact or expiry_gate.few_inside(conn, params)
            rows = conn.execute(DENSE_EXACT if exact else DENSE[caller.purpose], params).fetchall()
            if not exact and len(rows) < min(limit, visible):
                # The filtered scan gave up before the limit (it stops after
                # hnsw.max_scan_tuples visited vectors, which count the ones a
                # filter or another member's audience keeps out) although the
                # caller may see more: rank their vectors exactly instead, so
                # that a selective filter finds its rows and what others hold
                # near the query changes nothing in the answer.
                rows = conn.execute(DENSE_EXACT, params).fetchall()
            rows = [r for r in rows if r[1] >= floor]
            every = matching_every_term(conn, words, [str(r[0]) for r in rows])
            # Whatever the rows, tell "nothing near enough" from "not
            # embedded yet": the memories this arm cannot find.
            waiting = conn.execute(NOT_EMBEDDED, (MAX_NOT_EMBEDDED_COUNTED,)).fetchone()
            not_embedded = int(waiting[0]) if waiting is not None else 0
            # No row: nothing embedded at all is a degrade the answer must report.
            if not rows:
                available_row = conn.execute(HAS_EMBEDDINGS, (model_id, input_version)).fetchone()
                if not (available_row and available_row[0]):
                    return DenseResult([], False, floor, not_embedded)
        return DenseResult(
            _ranked(rows, every),
            True,
            floor,
            not_embedded,
        )
