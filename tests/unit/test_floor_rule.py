"""The dense floor's rule (services/store/domain/floor.py): the lowest whole
percent blocking at least 95% of off-topic queries while keeping every
memory-shaped pair, and the populations it is judged on."""

from __future__ import annotations

import numpy as np
import pytest

from services.store.domain import floor


def test_the_lowest_whole_percent_that_blocks_95_percent() -> None:
    off = [i / 100 for i in range(100)]  # best cosines 0.00 .. 0.99
    choice = floor.choose([0.99, 0.995], off)
    # 95 of 100 below 0.95; 94 below 0.94.
    assert choice.floor == 0.95 and choice.meets_rule
    assert choice.blocked == pytest.approx(0.95) and choice.kept == 1.0


def test_every_pair_kept_wins_when_the_populations_overlap() -> None:
    off = [0.2] * 90 + [0.7] * 10  # 95% blocked only from 0.71
    choice = floor.choose([0.9, 0.655, 0.8], off)
    assert not choice.meets_rule
    assert choice.floor == 0.65  # the highest whole percent keeping 0.655
    assert choice.kept == 1.0 and choice.blocked == pytest.approx(0.9)


def test_a_pair_exactly_at_the_floor_is_kept() -> None:
    choice = floor.choose([0.3], [0.29] * 20)
    assert choice.floor == 0.3 and choice.kept == 1.0 and choice.meets_rule


def test_nothing_to_judge_on_is_refused() -> None:
    with pytest.raises(ValueError):
        floor.choose([], [0.1])


TEXTS = [
    "Robin moved the Lisbon office to the harbour building in March",
    "The quarterly budget review is on Thursday with finance",
    "ok",
    "Caroline adopted two cats named Oscar and Luna last spring",
]


def test_queries_come_from_the_workspace_and_repeat() -> None:
    pairs, off = floor.build_queries(TEXTS)
    assert (pairs, off) == floor.build_queries(TEXTS)
    # A memory with fewer than three content words gives none.
    assert sorted(i for _, i in pairs) == [0, 1, 3]
    query = dict((i, q) for q, i in pairs)[0]
    assert query == "Robin moved Lisbon office harbour building March"
    for (q, _), scrambled in zip(pairs, off, strict=True):
        # The same letters in each word, shuffled: about nothing.
        assert [sorted(w.lower()) for w in q.split()] == [sorted(w) for w in scrambled.split()]
        assert scrambled != q.lower()


def test_calibrate_scores_pairs_against_their_own_memory() -> None:
    vectors = {t: np.eye(4)[i % 4] for i, t in enumerate(TEXTS)}

    def embed(texts: object) -> np.ndarray:
        # Memory-shaped queries point at their own memory; scrambled ones nowhere.
        rows = []
        for t in texts:  # type: ignore[attr-defined]
            source = next((m for m in TEXTS if floor.memory_shaped_query(m) == t), None)
            rows.append(vectors[source] if source else np.full(4, 0.1))
        return np.asarray(rows)

    choice = floor.calibrate(TEXTS, embed, np.asarray([vectors[t] for t in TEXTS]))
    assert choice.pairs == 3 and choice.off_topic == 3
    assert choice.lowest_pair == pytest.approx(1.0)
    assert choice.floor == 0.11 and choice.meets_rule  # just above the scrambled 0.1


@pytest.mark.parametrize(
    ("text", "query"),
    [
        ("Die Straße wird über Nacht gesperrt", "Die Straße wird über Nacht gesperrt"),
        ("Réunion de l'équipe mercredi à Genève", "Réunion l'équipe mercredi Genève"),
        ("A naïve café résumé", "naïve café résumé"),
    ],
)
def test_a_memory_shaped_query_keeps_its_words_whole_beyond_ascii(text: str, query: str) -> None:
    """The query is the memory's content words: a letter beyond ASCII cut a
    word in two ('Straße' gave 'Stra', 'über' 'ber', 'Réunion' 'union'), so
    the pairs of a workspace written in most languages were judged on
    fragments no one searches with, and 'naïve café résumé' gave no pair."""
    assert floor.memory_shaped_query(text) == query
