"""The lexical arm's term rules, as plain functions."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from services.store.domain.recall import (
    Filters,
    QueryTerms,
    _filter_params,
    idf,
    select_terms,
    tsquery_text,
    walk_is_cheaper,
    walks,
)


def test_fewer_than_three_terms_drop_nothing() -> None:
    assert select_terms(["a", "b"], {"a": 100, "b": 100}, 100) == (["a", "b"], [])


def test_common_terms_dropped_from_three_up() -> None:
    kept, dropped = select_terms(["meet", "tuesday", "budget"], {"meet": 15, "tuesday": 3}, 100)
    assert kept == ["tuesday", "budget"] and dropped == ["meet"]
    # 14.9% stays.
    assert select_terms(["a", "b", "c"], {"a": 14}, 94)[1] == []


def test_all_common_keeps_the_rarest() -> None:
    kept, dropped = select_terms(["a", "b", "c"], {"a": 50, "b": 20, "c": 30}, 100)
    assert kept == ["b"] and sorted(dropped) == ["a", "c"]


def test_terms_no_memory_holds_never_stand_in_for_one_that_some_memory_does() -> None:
    """A small workspace: a term one memory of eight holds is "common" (12.5%
    would not be, 1 of 6 is); the query's other terms no memory holds are
    rarer. Keeping them alone searched for nothing at all."""
    terms = ["/ops", "wiki.example.com", "wiki.example.com/ops"]
    kept, dropped = select_terms(terms, {"wiki.example.com": 1}, 6)
    assert "wiki.example.com" in kept and dropped == []
    # Of several such terms, the rarest that some memory holds is kept.
    kept, dropped = select_terms(["x", "a", "b"], {"a": 3, "b": 2}, 6)
    assert kept == ["x", "b"] and dropped == ["a"]
    # No term any memory holds: nothing to keep instead.
    assert select_terms(["x", "y", "z"], {}, 6) == (["x", "y", "z"], [])


@given(
    st.lists(
        st.text(st.characters(exclude_characters=" "), min_size=1, max_size=12),
        max_size=6,
        min_size=1,
    )
)
def test_tsquery_text_quotes_every_term(terms: list[str]) -> None:
    text = tsquery_text(terms)
    assert text.count(" | ") == len(terms) - 1
    for t in terms:
        assert "'" + t.replace("\\", "\\\\").replace("'", "''") + "'" in text


def test_the_capped_path_walks_when_the_matches_are_many_and_apart() -> None:
    # 101,500 memories, the measured cases (docs/benchmarks.md): two names of
    # about 2,200 memories each, rarely together, are walked; two words of
    # about 1,900 that always come together are read from the GIN index.
    assert walk_is_cheaper([1_726, 2_206], 101_500)
    assert not walk_is_cheaper([1_909, 1_909], 101_500)
    # A term in a tenth of the memories is walked; no terms, no walk.
    assert walk_is_cheaper([10_150], 101_500)
    assert not walk_is_cheaper([], 101_500)


def test_only_a_recall_no_filter_narrows_may_walk() -> None:
    # The walk's cost counts every match as passing: true without a filter.
    assert walks(Filters(), 0)
    # Superseded memories taken in only let more matches pass.
    assert walks(Filters(include_superseded=True), 0)
    entity = "00000000-0000-4000-8000-000000000001"
    for filters, expiry_days in [
        (Filters(kinds=["decision"]), 0),
        (Filters(mention_entity_ids=[entity]), 0),
        (Filters(), 30),
        (Filters(kinds=["note"], include_superseded=True), 0),
    ]:
        assert not walks(filters, expiry_days), (filters, expiry_days)
        assert _filter_params(filters, expiry_days)["walks"] is False
    assert _filter_params(Filters(), 0)["walks"] is True


def test_idf_falls_as_a_term_grows_common_and_never_goes_negative() -> None:
    weights = [idf(docs, 100) for docs in (1, 10, 50, 100)]
    assert weights == sorted(weights, reverse=True)
    assert weights[-1] > 0
    # Statistics a moment apart (a count above the corpus) stay in range.
    assert idf(120, 100) == idf(100, 100)
    assert idf(1, 100) == math.log(1 + 99.5 / 1.5)


def test_the_lexical_parameters_pair_each_kept_term_with_its_idf() -> None:
    terms = QueryTerms(["budget", "tuesday"], ["meet"], False, idfs=[1.5, 2.5])
    assert terms.params() == {
        "tsquery": "'budget' | 'tuesday'",
        "terms": ["budget", "tuesday"],
        "idfs": [1.5, 2.5],
        "rare": None,
    }
