"""graph.jsonl lines of the wrong shape (docs/migration.md, "graph.jsonl"):
a line that is not a JSON object of either shape, an entity record or a
patch, is malformed, counted and skipped."""

from __future__ import annotations

from pathlib import Path

from services.store.legacy import plan
from services.store.legacy.oldgraph import fold_graph
from tests.legacy.test_old_store import _graph, rec

AT = {"valid_from": "2026-01-01T00:00:00Z"}


def test_a_record_whose_text_fields_hold_objects_or_lists_is_malformed(tmp_path: Path) -> None:
    """An id, name, type or source written as a JSON object or list became
    Python's text of it (an entity titled "{'x': 1}")."""
    lines: list[object] = [
        rec("n", {"x": 1}, **AT),  # type: ignore[arg-type]
        rec("t", "Typed", **{**AT, "type": ["person"]}),
        rec("s", "Sourced", source={"chat": "tg-1"}, **AT),
        {"id": {"x": 1}, "name": "Keyed", **AT},
        {"id": ["a"], "name": "Listed", **AT},
        rec("ok", "Robin", **AT),
        rec("num", 1998, **AT),  # type: ignore[arg-type]
        rec("b", "Bee", **AT),
        {"patch": "supersede", "id": "b", "superseded_by": {"id": "ok"}},
    ]
    graph = fold_graph(_graph(tmp_path, lines))
    assert sorted(graph.entities) == ["b", "num", "ok"]
    assert graph.entities["num"].name == "1998"
    assert graph.entities["b"].superseded_by is None
    assert graph.stats.malformed == 6
    assert graph.stats.records == 3


def test_a_patch_line_whose_patch_is_null_or_no_name_is_malformed(tmp_path: Path) -> None:
    """A line holding "patch": null was read as an entity record (the
    record's test is for a missing patch), and one whose patch was an object
    or a number was counted as a patch of an unknown kind."""
    lines: list[object] = [
        rec("a", "Robin", **AT),
        {"patch": None, "id": "a", "name": "Not Robin", **AT},
        {"patch": None, "id": "z", "name": "Zed", **AT},
        {"patch": {"op": "confirm"}, "id": "a"},
        {"patch": 1, "id": "a"},
        {"patch": "merge", "id": "a"},
    ]
    graph = fold_graph(_graph(tmp_path, lines))
    assert sorted(graph.entities) == ["a"]
    assert graph.entities["a"].name == "Robin"
    assert (graph.stats.records, graph.stats.restated) == (1, 0)
    assert graph.stats.malformed == 4
    assert graph.stats.unknown_ops == 1


def test_times_written_as_objects_lists_or_flags_are_read_as_none(tmp_path: Path) -> None:
    """A valid-from, valid-until or patch time written as a JSON object, list
    or flag was carried into the record's memory as Python's text of it
    ("valid from {'at': '2026'}", "Confirmed at True.")."""
    lines: list[object] = [
        rec("v", "Vera", valid_from={"at": "2026-01-01"}, valid_until=["2027"]),
        {"patch": "confirm", "id": "v", "at": "2026-02-01T00:00:00Z"},
        rec("w", "Walt", **AT),
        {"patch": "confirm", "id": "w", "at": True},
        rec("x", "Xena", **AT),
        {"patch": "supersede", "id": "x", "superseded_by": "w", "at": {"t": 1}},
    ]
    graph = fold_graph(_graph(tmp_path, lines))
    assert graph.entities["v"].valid_from is None and graph.entities["v"].valid_until is None
    assert graph.entities["w"].confirmed and graph.entities["w"].confirmed_at is None
    assert graph.entities["x"].superseded_by == "w" and graph.entities["x"].superseded_at is None
    rows, _skipped = plan.plan_records(graph, plan.Ids("ada"), {})
    bodies = {r.source_id: r.body for r in rows}
    assert sorted(bodies) == ["v", "w", "x"]
    for body in bodies.values():
        assert "{'" not in body and "['" not in body and "True" not in body, body
