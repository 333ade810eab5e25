"""Which of an arm's rows hold every term of the query: rank judges such a
row relevant to a query of a few words whatever its cosine, since a bare word
lies far from any memory's meaning (services/rank/relevance.py)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import psycopg

# The rows are the arm's own, each eligible for the caller, so the policy on
# memory lets each through; the primary key finds them, and plainto_tsquery,
# the AND of the lexemes the lexical arm searches (accents folded, as it reads
# them), is tried on those rows alone.
MATCHING_EVERY_TERM = """
SELECT id::text FROM memory
WHERE id = ANY(%(ids)s::uuid[]) AND search @@ plainto_tsquery('english', search_fold(%(words)s))
"""


def matching_every_term(conn: psycopg.Connection, words: str, ids: Sequence[str]) -> set[str]:
    """Those of ``ids`` whose memory holds every term of the query ``words``
    (none when it has no term, or is empty: not asked)."""
    if not words.strip() or not ids:
        return set()
    # The form memories are kept in (0067_baseline/04_memory.sql).
    params = {"ids": list(ids), "words": unicodedata.normalize("NFC", words)}
    return {str(r[0]) for r in conn.execute(MATCHING_EVERY_TERM, params)}
