"""The dense floor's rule (design §5.8): the lowest whole-percent floor that
blocks at least 95% of off-topic queries while keeping every memory-shaped
pair, with both populations built from the workspace itself.

- A *memory-shaped pair* is (query, memory): the query is the memory's content
  words (words of three letters or more that are not stop-words) in their
  order, the memory's gist as someone searching for it by its words would put
  it. The pair is kept at a floor when the query's cosine to its own memory is
  at least the floor (the dense arm could return that memory for it).
- An *off-topic query* is a memory-shaped query with the letters of each of its
  words shuffled: the workspace's own letters, word lengths and query lengths,
  about nothing at all. It is blocked at a floor when its best cosine to every
  memory of the workspace is below the floor (the dense arm returns nothing).

At most :data:`SAMPLE` memories give a query of each kind, drawn with a fixed
seed, so the same workspace gives the same answer. When no floor does both
(the populations overlap), the choice is the highest floor that still keeps
every pair, and ``meets_rule`` is false: recall is never given up for
blocking. Plain Python and numpy: the caller brings the vectors."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

BLOCK_SHARE = 0.95
# At most this many memories give a query of each kind.
SAMPLE = 300
SEED = 20260918
MIN_QUERY_WORDS = 3
# A word: a letter of any script, then letters, apostrophes or hyphens
# (three characters at least): "Straße", "über" and "l'équipe" whole.
_WORD = re.compile(r"[^\W\d_](?:[^\W\d_]|['-]){2,}")
_STOPWORDS = (
    "about above after again against all also and any are because been before being "
    "below between both but can could did does doing down during each few for from "
    "further had has have having her here hers herself him himself his how into its "
    "itself just more most myself nor not now off once only other our ours ourselves out "
    "over own same she should some such than that the their theirs them themselves then "
    "there these they this those through too under until very was were what when where "
    "which while who whom why will with would you your yours yourself yourselves"
)
STOPWORDS = frozenset(_STOPWORDS.split())

Embed = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class FloorChoice:
    floor: float
    # Off-topic queries whose best cosine is below the floor.
    blocked: float
    # Memory-shaped pairs at or above the floor.
    kept: float
    meets_rule: bool
    pairs: int
    off_topic: int
    # The lowest pair cosine and the 95th percentile of the off-topic best cosines.
    lowest_pair: float
    off_topic_p95: float

    def to_json(self) -> dict[str, object]:
        return {
            "floor": self.floor,
            "off_topic_blocked": round(self.blocked, 4),
            "pairs_kept": round(self.kept, 4),
            "meets_rule": self.meets_rule,
            "pairs": self.pairs,
            "off_topic_queries": self.off_topic,
            "lowest_pair_cosine": round(self.lowest_pair, 4),
            "off_topic_p95_cosine": round(self.off_topic_p95, 4),
        }

    def line(self) -> str:
        verdict = (
            "meets the rule" if self.meets_rule else "the rule cannot be met: keeps every pair"
        )
        return (
            f"floor {self.floor:.2f}: blocks {100 * self.blocked:.1f}% of {self.off_topic} "
            f"off-topic queries, keeps {100 * self.kept:.1f}% of {self.pairs} memory-shaped "
            f"pairs ({verdict}; lowest pair cosine {self.lowest_pair:.3f}, off-topic 95th "
            f"percentile {self.off_topic_p95:.3f})"
        )


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.lower() not in STOPWORDS]


def memory_shaped_query(text: str) -> str | None:
    words = content_words(text)
    return " ".join(words) if len(words) >= MIN_QUERY_WORDS else None


def off_topic_query(query: str, rng: random.Random) -> str:
    def shuffled(word: str) -> str:
        letters = list(word.lower())
        rng.shuffle(letters)
        return "".join(letters)

    return " ".join(shuffled(w) for w in query.split())


def build_queries(
    texts: Sequence[str], seed: int = SEED, sample: int = SAMPLE
) -> tuple[list[tuple[str, int]], list[str]]:
    """(memory-shaped pairs as (query, index of its memory), off-topic queries)."""
    rng = random.Random(seed)
    order = list(range(len(texts)))
    rng.shuffle(order)
    pairs: list[tuple[str, int]] = []
    for i in order:
        query = memory_shaped_query(texts[i])
        if query is not None:
            pairs.append((query, i))
        if len(pairs) >= sample:
            break
    return pairs, [off_topic_query(q, rng) for q, _ in pairs]


def choose(pair_cosines: Sequence[float], off_topic_best: Sequence[float]) -> FloorChoice:
    """The rule on the two populations' cosines."""
    pairs = np.asarray(pair_cosines, dtype=np.float64)
    off = np.asarray(off_topic_best, dtype=np.float64)
    if not len(pairs) or not len(off):
        raise ValueError("too few memories with three content words to calibrate on")
    lowest = float(pairs.min())
    # Every pair kept: a floor at or below the lowest pair (whole percent).
    highest_keeping = math.floor(lowest * 100 + 1e-9)
    chosen = None
    for percent in range(0, 101):
        if percent > highest_keeping:
            break
        if float(np.mean(off < percent / 100)) >= BLOCK_SHARE:
            chosen = percent
            break
    meets = chosen is not None
    floor = (chosen if chosen is not None else max(0, highest_keeping)) / 100
    return FloorChoice(
        floor=floor,
        blocked=float(np.mean(off < floor)),
        kept=float(np.mean(pairs >= floor)),
        meets_rule=meets,
        pairs=len(pairs),
        off_topic=len(off),
        lowest_pair=lowest,
        off_topic_p95=float(np.percentile(off, 95)),
    )


def calibrate(
    texts: Sequence[str],
    embed: Embed,
    memory_vectors: np.ndarray | None = None,
    embed_queries: Embed | None = None,
) -> FloorChoice:
    """The rule on a workspace's memories (their embed inputs, in any order).
    ``embed`` gives unit vectors for texts as memories are embedded;
    ``memory_vectors`` (one unit row per text) saves embedding the memories
    again; ``embed_queries`` gives the queries' vectors as recall embeds a
    query (the embed service's query graph, whose cosines differ from the
    exact graph's in the third decimal: a floor measured on other vectors
    than recall's could drop a pair it reports kept), by default ``embed``."""
    pairs, off_topic = build_queries(texts)
    if not pairs:
        raise ValueError("too few memories with three content words to calibrate on")
    memories = memory_vectors if memory_vectors is not None else embed(texts)
    queries = (embed_queries or embed)([q for q, _ in pairs] + off_topic)
    pair_q, off_q = queries[: len(pairs)], queries[len(pairs) :]
    own = memories[[i for _, i in pairs]]
    pair_cosines = np.einsum("ij,ij->i", pair_q, own)
    off_best = (off_q @ memories.T).max(axis=1)
    return choose(pair_cosines.tolist(), off_best.tolist())
