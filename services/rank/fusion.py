"""Reciprocal Rank Fusion of the two arms (design §5.4), with each row's
scores as the arms and the fusion gave them."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from services.rank.ports import Candidate


@dataclass
class Scores:
    lexical_rank: int = 0
    lexical_score: float = 0.0
    dense_rank: int = 0
    dense_cosine: float = 0.0
    fused_score: float = 0.0
    rerank_score: float = 0.0


@dataclass
class Fused:
    id: str
    scores: Scores


def rrf(lexical: Sequence[Candidate], dense: Sequence[Candidate], k: int = 60) -> list[Fused]:
    """Reciprocal Rank Fusion (design §5.4): score = sum over the arms that
    returned the row of 1 / (k + rank), ranks from 1 as each arm gave them.

    Ties (common: rank 1 of one arm against rank 1 of the other) go to the row
    with the better single rank, then to the better lexical rank (a row the
    lexical arm found before one it did not), so the order never depends on
    memory ids."""
    by_id: dict[str, Scores] = {}
    for c in lexical:
        s = by_id.setdefault(c.id, Scores())
        s.lexical_rank, s.lexical_score = c.rank, c.score
    for c in dense:
        s = by_id.setdefault(c.id, Scores())
        s.dense_rank, s.dense_cosine = c.rank, c.score
    for s in by_id.values():
        s.fused_score = sum(1.0 / (k + r) for r in (s.lexical_rank, s.dense_rank) if r > 0)

    def key(item: tuple[str, Scores]) -> tuple[float, int, int, str]:
        memory_id, s = item
        ranks = [r for r in (s.lexical_rank, s.dense_rank) if r > 0]
        lexical = s.lexical_rank or sys.maxsize
        return (-s.fused_score, min(ranks), lexical, memory_id)

    return [Fused(i, s) for i, s in sorted(by_id.items(), key=key)]
