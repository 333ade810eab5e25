"""History evidence search (design §3.2, §8.4): the old conversation turns brought
over by migration, searched lexically for the workspace owner they belong to.

For anyone else history does not exist: a caller who is not an owner of the
workspace (by the control plane, not by what the request claims) gets an
empty list, never an error, so the answer does not even reveal whether the
workspace holds any. Nor does it for a call made for a purpose history does
not serve (HISTORY_PURPOSES: conversation evidence is for assist and audit;
the gateway says so to the owner). Row-level security then limits an owner
to the rows recorded for that owner. History is never a memory: it is not embedded, not
fused, not re-ranked, and the expiry gate (which is about memories) does not
apply to it."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from datetime import datetime

from recallatron import errors
from recallatron.vocabulary import BESIDE_BUDGET_BYTES, HISTORY_PURPOSES, MAX_QUERY_CHARS
from services.store.domain import answer_budget
from services.store.domain import validation as v
from services.store.domain.recall import select_terms, tsquery_text
from services.store.domain.workspace_services import OnWorkspaces
from services.store.infrastructure.db import Caller, caller_transaction

MAX_LIMIT = 100
DEFAULT_LIMIT = 10

# As recall's lexical arm reads a query (query_lexemes, workspace migration 0077).
LEXEMES = "SELECT query_lexemes(%s)"
HISTORY_TERM_DOCS = "SELECT lexeme, docs FROM history_term_stat WHERE lexeme = ANY(%s)"
HISTORY_CORPUS_DOCS = "SELECT docs FROM history_corpus_stat"
# The caller's matches come from its index (history_matches,
# 0067_baseline/05_history.sql: beneath the policy `@@` could not use it).
SEARCH_HISTORY = """
SELECT h.id::text, h.chat_id, h.role, h.text, h.occurred_at, ts_rank_cd(h.search, q.query) AS score
FROM (SELECT %(tsquery)s::tsquery AS query) q, history_matches(q.query) h
ORDER BY score DESC, h.occurred_at DESC, h.id
LIMIT %(limit)s
"""


@dataclass(frozen=True)
class HistoryHit:
    id: str
    chat_id: str
    role: str
    text: str
    occurred_at: datetime
    score: float


@dataclass(frozen=True)
class HistoryAnswer:
    """The hits that fit beside recall's memories (BESIDE_BUDGET_BYTES), best
    first, and how many others matched within the limit (a turn may hold
    200,000 characters)."""

    hits: list[HistoryHit]
    left_out: int


class HistorySearch(OnWorkspaces):
    def _is_owner(self, caller: Caller) -> bool:
        try:
            member = self.control.member(v.uuid_str(caller.member_id, "caller.member_id"))
        except errors.NotFound:
            return False
        return member.workspace_id == caller.workspace_id and member.role == "owner"

    def search(self, caller: Caller, query: str, limit: int) -> list[HistoryHit]:
        v.text(query, "query", MAX_QUERY_CHARS)
        if limit < 0 or limit > MAX_LIMIT:
            raise errors.InvalidArgument(
                "limit", f"must lie in [0, {MAX_LIMIT}]; 0 is {DEFAULT_LIMIT}"
            )
        workspace_id = v.uuid_str(caller.workspace_id, "caller.workspace_id")
        if caller.purpose not in HISTORY_PURPOSES or not self._is_owner(caller):
            return []
        ws = self.control.workspace(workspace_id)
        pool = self.dbs.app_pool(ws.server, ws.database_name)
        with caller_transaction(pool, caller) as conn:
            # The form turns are searched in
            # (0067_baseline/02_memory_tables.sql): "é" one code point.
            row = conn.execute(LEXEMES, (unicodedata.normalize("NFC", query),)).fetchone()
            terms: list[str] = list(dict.fromkeys(row[0])) if row and row[0] else []
            if not terms:
                return []
            # The 15% rule of the lexical arm, over this owner's history.
            docs = {r[0]: int(r[1]) for r in conn.execute(HISTORY_TERM_DOCS, (terms,))}
            corpus_row = conn.execute(HISTORY_CORPUS_DOCS).fetchone()
            kept, _ = select_terms(terms, docs, int(corpus_row[0]) if corpus_row else 0)
            rows = conn.execute(
                SEARCH_HISTORY, {"tsquery": tsquery_text(kept), "limit": limit or DEFAULT_LIMIT}
            ).fetchall()
        return [HistoryHit(r[0], r[1], r[2], r[3], r[4], float(r[5])) for r in rows]

    def answer(self, caller: Caller, query: str, limit: int) -> HistoryAnswer:
        """:meth:`search`'s hits, each in turn as it fits the budget."""
        hits, left = answer_budget.each_fitting(
            self.search(caller, query, limit), answer_budget.text_bytes, BESIDE_BUDGET_BYTES
        )
        return HistoryAnswer(hits, len(left))
