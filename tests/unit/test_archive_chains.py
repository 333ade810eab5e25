"""Supersede chains an older release's archive holds with a forgotten
successor are taken as the service holds them now (archive_chains)."""

from __future__ import annotations

from typing import Any

import pytest

from recallatron import errors
from services.store.domain.archive_chains import check_chains, take_out_forgotten

T1 = "2025-01-01T00:00:00+00:00"
T2 = "2025-01-02T00:00:00+00:00"


def memory(id_: str, successor: str | None, forgotten: bool = False) -> dict[str, Any]:
    return {"id": id_, "superseded_by": successor, "forgotten_at": T2 if forgotten else None}


def test_a_chain_through_forgotten_successors_reaches_the_first_live_one() -> None:
    rows = {
        "memories": [
            memory("a", "b"),
            memory("b", "c", forgotten=True),
            memory("c", "d", forgotten=True),
            memory("d", None),
        ]
    }
    out = take_out_forgotten(rows)
    assert {m["id"]: m["superseded_by"] for m in out["memories"]} == {
        "a": "d", "b": "c", "c": "d", "d": None,
    }  # fmt: skip
    assert rows["memories"][0]["superseded_by"] == "b"  # the records given are kept


def test_a_memory_left_with_no_successor_states_what_its_supersede_retired() -> None:
    rows = {
        "memories": [memory("a", "b"), memory("b", "a", forgotten=True)],
        "revisions": [
            {"memory_id": "a", "action": "create", "changed_at": T1},
            {"memory_id": "a", "action": "supersede", "changed_at": "2025-01-01T12:00:00Z"},
        ],
        "attribute_claims": [
            {"memory_id": "a", "retired_at": "2025-01-01T12:00:00+00:00"},
            {"memory_id": "a", "retired_at": T1},  # a correct replaced it before
        ],
        "aliases": [{"memory_id": "a", "retired_at": "2025-01-01T12:00:00+00:00"}],
        "relation_claims": [],
    }
    out = take_out_forgotten(rows)
    assert out["memories"][0]["superseded_by"] is None
    assert [c["retired_at"] for c in out["attribute_claims"]] == [None, T1]
    assert out["aliases"][0]["retired_at"] is None


def test_forgotten_successors_in_a_circle_leave_no_successor() -> None:
    rows = {
        "memories": [
            memory("a", "b"),
            memory("b", "c", forgotten=True),
            memory("c", "b", forgotten=True),
        ]
    }
    assert take_out_forgotten(rows)["memories"][0]["superseded_by"] is None


def placed(successors: dict[str, str | None]) -> list[tuple[str, dict[str, Any]]]:
    items = enumerate(successors.items())
    return [(f"memories.jsonl line {i + 1}", memory(m, s)) for i, (m, s) in items]


def test_a_chain_leading_back_to_a_memory_is_refused_naming_the_first_in_the_file() -> None:
    check_chains(placed({"a": "b", "b": "c", "c": None, "d": "c"}))
    shapes: list[tuple[dict[str, str | None], int, str]] = [
        ({"a": None, "b": "b"}, 2, "names the memory itself"),
        ({"x": "a", "a": "b", "b": "a"}, 2, "leads back"),
        ({"a": "b", "b": "c", "c": "b"}, 2, "leads back"),
    ]
    for successors, line, what in shapes:
        with pytest.raises(errors.InvalidArgument) as refused:
            check_chains(placed(successors))
        assert refused.value.field == f"memories.jsonl line {line}: superseded_by"
        assert what in refused.value.description


def test_a_long_chain_is_checked_in_one_pass() -> None:
    n = 100_000
    chain = {f"m{i}": f"m{i + 1}" for i in range(n)} | {f"m{n}": None}
    check_chains(placed(chain))


def test_a_long_chain_of_forgotten_memories_is_walked_once() -> None:
    n = 50_000
    forgotten = [memory(f"f{i}", f"f{i + 1}", forgotten=True) for i in range(n)]
    live = [memory(f"l{i}", f"f{i}") for i in range(n)]
    out = take_out_forgotten({"memories": [*forgotten, memory(f"f{n}", None), *live]})
    assert {m["superseded_by"] for m in out["memories"] if m["id"].startswith("l")} == {f"f{n}"}
