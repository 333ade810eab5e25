"""One row a recall arm returned: what the store's arms give and rank fuses,
walks and judges (services/store/domain/recall.py, services/rank)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    """Its rank in the arm (from 1) and its score (BM25 for the lexical arm,
    cosine for the dense arm)."""

    id: str
    rank: int
    score: float
    # The memory holds every term of the query (services/store/domain/every_term.py).
    matches_every_term: bool = False
