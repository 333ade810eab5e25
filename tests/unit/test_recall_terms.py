"""The lexical arm's term rules, as plain functions."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.store.recall import select_terms, tsquery_text


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
