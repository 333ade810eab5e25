"""Which of the lexical arm's rows hold every term of the query: rank judges
such a row relevant to a query of a few words whatever its cosine, since a
bare word lies far from any memory's meaning (services/rank/relevance.py)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import psycopg

# The rows are the arm's own, each eligible for the caller, so the policy on
# memory lets each through; the primary key finds them, and the tsquery (an
# AND of the query's lexemes) is tried on those rows alone.
MATCHING_EVERY_TERM = """
SELECT id::text FROM memory WHERE id = ANY(%(ids)s::uuid[]) AND search @@ %(every)s::tsquery
"""
# The same for a query's text (the dense arm, alone): plainto_tsquery is the
# AND of the lexemes the lexical arm would search.
MATCHING_EVERY_WORD = """
SELECT id::text FROM memory
WHERE id = ANY(%(ids)s::uuid[]) AND search @@ plainto_tsquery('english', %(words)s)
"""


def quoted(term: str) -> str:
    """An already-normalised lexeme quoted for a tsquery, so tsquery operators
    in user text are only ever literal characters."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def tsquery_of_every(terms: Sequence[str]) -> str:
    """An AND of lexemes, each quoted."""
    return " & ".join(quoted(t) for t in terms)


def matching_every_term(
    conn: psycopg.Connection, terms: Sequence[str], ids: Sequence[str]
) -> set[str]:
    """Those of ``ids`` (rows the arm matched on at least one of ``terms``,
    the query's every lexeme) whose memory holds all of ``terms``."""
    if len(terms) <= 1:
        # Every match holds the one term.
        return set(ids) if terms else set()
    if not ids:
        return set()
    rows = conn.execute(MATCHING_EVERY_TERM, {"ids": list(ids), "every": tsquery_of_every(terms)})
    return {str(r[0]) for r in rows}


def matching_every_word(conn: psycopg.Connection, words: str, ids: Sequence[str]) -> set[str]:
    """Those of ``ids`` whose memory holds every term of the text ``words``
    (none when it has no term, or is empty: not asked)."""
    if not words.strip() or not ids:
        return set()
    # The form memories are kept in (0067_baseline/04_memory.sql).
    params = {"ids": list(ids), "words": unicodedata.normalize("NFC", words)}
    return {str(r[0]) for r in conn.execute(MATCHING_EVERY_WORD, params)}
