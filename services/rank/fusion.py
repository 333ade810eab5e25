"""Reciprocal Rank Fusion of the two arms (design §5.4), with each row's
scores as the arms and the fusion gave them, the arms' agreement on each row,
the lift of the first rows' episode neighbours, and the page's order by the
agreement."""

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
    agreement_score: float = 0.0
    episode_rank: int = 0
    episode_lift: float = 0.0
    # The cross-encoder scored this row (rerank_score is its score).
    reranked: bool = False
    # The lexical arm found every term of the query in the row's memory.
    matches_every_term: bool = False


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
        s.matches_every_term = c.matches_every_term
    for c in dense:
        s = by_id.setdefault(c.id, Scores())
        s.dense_rank, s.dense_cosine = c.rank, c.score
        s.matches_every_term = s.matches_every_term or c.matches_every_term
    for s in by_id.values():
        s.fused_score = sum(1.0 / (k + r) for r in (s.lexical_rank, s.dense_rank) if r > 0)

    return sorted((Fused(i, s) for i, s in by_id.items()), key=_fused_order)


def _fused_order(f: Fused) -> tuple[float, int, int, str]:
    s = f.scores
    ranks = [r for r in (s.lexical_rank, s.dense_rank) if r > 0]
    return (-s.fused_score, min(ranks, default=sys.maxsize), s.lexical_rank or sys.maxsize, f.id)


def lift_neighbours(
    fused: list[Fused],
    neighbours: Sequence[tuple[str, str]],
    weight: float,
    power: float,
    k: int = 60,
) -> list[Fused]:
    """The episode neighbours as a third list (docs/recall.md, "Episode
    neighbours"): ``neighbours`` are (seed, neighbour) pairs, seed by seed,
    from the store's walk. Each neighbour, once, takes the next rank of that
    list and adds ``weight * c ** power / (k + rank)`` to its fused score,
    where ``c`` is its seed's agreement as a share of the most there is (both
    arms' best row: 2), so a seed the arms barely agree on lends its context
    little; then the list is put in fused order again. Needs the agreement set
    (``agreement``). Only rows already in ``fused`` (found by an arm and
    admitted; the store names no seed as a neighbour) can be lifted: no row
    comes in by this alone."""
    by_id = {f.id: f for f in fused}
    rank = 0
    for seed_id, memory_id in neighbours:
        row, seed = by_id.get(memory_id), by_id.get(seed_id)
        if row is None or seed is None or row.scores.episode_rank:
            continue
        rank += 1
        share = seed.scores.agreement_score / 2.0
        row.scores.episode_rank = rank
        row.scores.episode_lift = weight * share**power / (k + rank)
        row.scores.fused_score += row.scores.episode_lift
    return sorted(fused, key=_fused_order) if rank else fused


def agreement(admitted: list[Fused], dense_floor: float = 0.0) -> None:
    """Sets every admitted row's ``agreement_score``: how far the arms agree
    on it (design §5.4). Each arm's score is measured from where its scale
    starts (BM25 from 0, the cosine from the dense floor the arm applied)
    against the best of the admitted rows it returned; a row's agreement is
    the sum over the arms (an arm that did not return it adds 0), from 0 to
    2. RRF reads ranks alone; the scores say how far apart the rows really
    are (a lexical match far above the next, a cosine well clear of the
    rest)."""
    lexical = [f.scores.lexical_score for f in admitted if f.scores.lexical_rank]
    cosines = [f.scores.dense_cosine for f in admitted if f.scores.dense_rank]
    best_lexical = max(lexical, default=0.0)
    best_cosine = max(cosines, default=0.0)

    def share(value: float, zero: float, best: float) -> float:
        # An arm whose best row sits at its zero: each row it returned counts whole.
        return (value - zero) / (best - zero) if best > zero else 1.0

    for f in admitted:
        s = f.scores
        s.agreement_score = (
            share(s.lexical_score, 0.0, best_lexical) if s.lexical_rank else 0.0
        ) + (share(s.dense_cosine, dense_floor, best_cosine) if s.dense_rank else 0.0)


def order_page(admitted: list[Fused], page: int) -> list[Fused]:
    """The admitted fused list with its first ``page`` rows ordered by their
    ``agreement_score`` (set by ``agreement``); equal scores keep the fused
    order. Only the page moves, so which rows the page holds, and every
    count, stay the fused list's. With one arm the order is that arm's."""
    head = sorted(admitted[:page], key=lambda f: -f.scores.agreement_score)
    return head + admitted[page:]
