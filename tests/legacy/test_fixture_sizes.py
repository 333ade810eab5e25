"""The generated old store at sizes other than the default: every size from
the least up generates, and a smaller one is refused before anything is
written."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from recallatron_devkit import legacy_fixture
from recallatron_devkit.legacy_fixture import generate
from services.store.legacy.oldgraph import fold_graph


@pytest.mark.parametrize(
    "sizes",
    [
        {"turns": 3},
        {"turns": 100},
        {"turns": 402},
        {"entities": 5},
        {"entities": 30},
        {"entities": 59},
        {"items": 0},
        {"turns": 3, "items": 1, "entities": 5},
        {"entities": 3_000},
    ],
)
def test_every_size_the_generator_accepts_generates(sizes: dict[str, int], tmp_path: Path) -> None:
    """Small stores (fewer than 403 turns: 'Sample larger than population';
    fewer than 60 entities: an IndexError) and large graphs (3,000 entities:
    'ran out of names') generate, holding what they were asked for and still
    agreeing with the reader."""
    truth = generate(tmp_path, seed=7, **sizes)
    want = {"turns": 4_200, "items": 523, "entities": 300} | sizes
    assert (truth.turns, truth.memory_items, truth.entities) == (
        want["turns"],
        want["items"],
        want["entities"],
    )
    graph = fold_graph(tmp_path / "graph.jsonl")
    assert len(graph.entities) == truth.entities
    assert len({e.name for e in graph.entities.values()}) == truth.entities
    conn = sqlite3.connect(tmp_path / "old-store.sqlite")
    for word, (turn_id, _) in truth.needles.items():
        hits = conn.execute("SELECT rowid FROM turns_fts WHERE turns_fts MATCH ?", (word,))
        assert hits.fetchall() == [(turn_id,)]
    conn.close()
    assert len(truth.needles) == 3


@pytest.mark.parametrize(
    ("sizes", "named"),
    [
        ({"turns": 2}, "turns must be at least 3"),
        ({"turns": -5}, "turns must be at least 3"),
        ({"entities": 4}, "entities must be at least 5"),
        ({"items": -1}, "items must be at least 0"),
    ],
)
def test_a_size_too_small_is_refused_up_front(
    sizes: dict[str, int], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before anything is written, naming the parameter and its
    least value; the command says the same of its option."""
    with pytest.raises(ValueError, match=named):
        generate(tmp_path / "out", **sizes)
    assert not (tmp_path / "out").exists()
    [(name, value)] = sizes.items()
    with pytest.raises(SystemExit) as stopped:
        legacy_fixture.main([str(tmp_path / "cli"), f"--{name}", str(value)])
    assert stopped.value.code == 2
    assert f"--{named}" in capsys.readouterr().err
    assert not (tmp_path / "cli").exists()
