"""The graph's input rules as plain functions: the lookup key, identifiers,
valid-time spans, and a write's graph part checked before anything is written."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recallatron import errors
from services.store.domain import graph
from services.store.domain.graph_rules import identifier, name_key, valid_span


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Zoë Ångström", "zoe angstrom"),
        ("  Robin   Goodwin ", "robin goodwin"),
        ("RÓBIN", "robin"),
        ("Straße", "strasse"),
        ("ﬁsh", "fish"),  # compatibility ligature
    ],
)
def test_names_that_differ_in_case_accents_or_spaces_share_a_key(a: str, b: str) -> None:
    assert name_key(a) == name_key(b)


@pytest.mark.parametrize(("a", "b"), [("Rob", "Robin"), ("Ann", "Anne"), ("A B", "AB")])
def test_different_names_keep_different_keys(a: str, b: str) -> None:
    assert name_key(a) != name_key(b)


@given(st.text(max_size=40))
def test_the_key_is_idempotent_and_trimmed(text: str) -> None:
    key = name_key(text)
    assert name_key(key) == key
    assert key == key.strip() and "  " not in key


@pytest.mark.parametrize("good", ["city", "works_with", "a1", "x" * 64])
def test_identifiers(good: str) -> None:
    assert identifier(good, "f") == good


@pytest.mark.parametrize(
    "bad", ["", "City", "9lives", "has space", "dash-ed", "x" * 65, "é", "leads\n"]
)
def test_bad_identifiers_name_the_field(bad: str) -> None:
    with pytest.raises(errors.InvalidArgument) as err:
        identifier(bad, "claims[3].attribute")
    assert err.value.field == "claims[3].attribute"


def test_valid_until_may_not_precede_valid_from() -> None:
    early, late = datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)
    assert valid_span(early, late, "c") == (early, late)
    assert valid_span(None, early, "c") == (None, early)
    with pytest.raises(errors.InvalidArgument) as err:
        valid_span(late, early, "relations[0]")
    assert err.value.field == "relations[0].valid_until"


@pytest.mark.parametrize(
    ("given_graph", "field"),
    [
        (graph.GraphIn(claims=[graph.ClaimIn(graph.EntityIn(), "a", "v")]), "claims[0].entity"),
        (
            graph.GraphIn(claims=[graph.ClaimIn(graph.EntityIn(name="  "), "a", "v")]),
            "claims[0].entity.name",
        ),
        (
            graph.GraphIn(
                claims=[graph.ClaimIn(graph.EntityIn(entity_id="x", name="y"), "a", "v")]
            ),
            "claims[0].entity",
        ),
        (
            graph.GraphIn(
                relations=[
                    graph.RelationIn(graph.EntityIn(name="a"), "p", graph.EntityIn(entity_id="no"))
                ]
            ),
            "relations[0].object.entity_id",
        ),
        (
            graph.GraphIn(aliases=[graph.AliasIn(graph.EntityIn(name="a"), "")]),
            "aliases[0].alias",
        ),
        (
            graph.GraphIn(
                claims=[graph.ClaimIn(graph.EntityIn(name="a"), "a", "v", confidence=-1)]
            ),
            "claims[0].confidence",
        ),
        (graph.GraphIn(claims=[graph.ClaimIn(graph.EntityIn(name="a"), "a", "v")] * 101), "claims"),
    ],
)
def test_a_write_graph_is_checked_whole(given_graph: graph.GraphIn, field: str) -> None:
    with pytest.raises(errors.InvalidArgument) as err:
        graph.validate(given_graph)
    assert err.value.field == field
