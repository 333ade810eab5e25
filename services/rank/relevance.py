"""Whether anything a recall returns is relevant (design §5.8): the
``nothing_relevant`` signal, judged from what the pipeline already has.

The rule: a returned memory is judged relevant when the dense arm found it
at a cosine of at least :data:`RELEVANT_COSINE` to the bare query, or when
the lexical arm found every term of the query in it (``matches_every_term``);
``nothing_relevant`` is true when no returned memory is. Measured as a detector
on conversations held out from the choice (docs/recall.md, "Nothing relevant";
``python -m benchmarks.nothing_relevant``), the cosine separated a
conversation's own questions from another conversation's better than any
other signal the pipeline holds: the lexical scores (BM25 is not comparable
across queries) and the arms' agreement (a row both arms found) only moved
along the same trade-off, so the rule leaves them out. The cosine was chosen on
questions; a query of a word or two lies far from the meaning of any memory,
the one about it included ("standup" against the memory of the daily standup:
0.45), so the rule also takes a row holding every word asked for. A question
rarely has all its words in one memory unless it is about that memory (the
detector's figures, docs/recall.md).

What the rule cannot judge it does not claim:

- when the dense arm did not take part (mode ``lexical``, or degraded), there
  is no cosine to judge by: the rows the words matched are not flagged, and
  only an empty answer is;
- a dense floor set above :data:`RELEVANT_COSINE` (an owner's setting) keeps
  out of the dense arm rows whose cosine lies between the two: a returned row
  the arm did not return then has no cosine to judge by and is not flagged,
  so with such a floor only an empty answer is (every dense row it lets
  through counts); at or under the threshold a row the arm left out lies
  under the floor, so under the threshold;
- while memories the caller may see wait for their vector (the embedding job
  behind the writes, ``not_embedded``), a returned row the dense arm did not
  return may be one of them, never compared with the query: such an answer
  is not flagged (a memory just written, found by its words, is not called
  beside the point);
- cross-encoder scores are not used: no real cross-encoder's weights were at
  hand to calibrate a threshold on (docs/embeddings.md), and an uncalibrated
  one would be a guess.

It reads only the admitted rows being returned, so it says nothing about rows
the caller may not see."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

# Chosen on the dev conversations by the leave-one-out procedure of
# docs/recall.md: the highest whole-hundredth cosine that flags at most 3%
# of a workspace's own judged questions (a margin under the 10% target for
# conversations never seen); held out, it flagged 0.6-7.1% of the own
# questions and 90-100% of another conversation's.
RELEVANT_COSINE = 0.53


class Judged(Protocol):
    """What the rule reads of one returned row (a row's scores): its dense
    rank (0 when the dense arm did not return it) and cosine, and whether the
    lexical arm found every term of the query in it."""

    dense_rank: int
    dense_cosine: float
    matches_every_term: bool


def _relevant(row: Judged, threshold: float) -> bool:
    return row.matches_every_term or (row.dense_rank > 0 and row.dense_cosine >= threshold)


def nothing_relevant(
    rows: Iterable[Judged],
    dense_available: bool,
    threshold: float = RELEVANT_COSINE,
    dense_floor: float = 0.0,
    not_embedded: int = 0,
) -> bool:
    """True when no returned row is judged relevant (see the module's rule);
    ``dense_floor`` is the floor the dense arm applied, ``not_embedded`` how
    many memories the caller may see have no vector yet."""
    rows = list(rows)
    if not rows:
        return True
    if not dense_available:
        return False
    if any(_relevant(r, threshold) for r in rows):
        return False
    if not_embedded > 0 and any(r.dense_rank == 0 for r in rows):
        return False
    # A row the arm left out lies under its floor: under the threshold only
    # when the floor is not above it.
    return dense_floor <= threshold or all(r.dense_rank > 0 for r in rows)
