"""The old store's format without a database: the generator, the reader,
patch folding and the planning rules, checked against the generator's own
bookkeeping and against small hand-written graphs."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.store.legacy import plan
from services.store.legacy.generate import Truth, generate
from services.store.legacy.oldstore import (
    MemoryItem,
    OldStoreError,
    Resolution,
    SqliteStore,
    Turn,
    fold_graph,
)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth]:
    out = tmp_path_factory.mktemp("old-store")
    return out, generate(out, seed=7)


def content_digest(out: Path) -> str:
    h = hashlib.sha256((out / "graph.jsonl").read_bytes())
    conn = sqlite3.connect(out / "old-store.sqlite")
    for table in ("turns", "session_digests", "memory_items", "memory_item_entities"):
        for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2"):
            h.update(repr(row).encode())
    conn.close()
    return h.hexdigest()


def test_generator_is_deterministic_and_realistic(
    generated: tuple[Path, Truth], tmp_path: Path
) -> None:
    out, truth = generated
    again = generate(tmp_path, seed=7)
    assert content_digest(tmp_path) == content_digest(out)
    assert again.to_json() == truth.to_json()
    generate(tmp_path / "other", seed=8)
    assert content_digest(tmp_path / "other") != content_digest(out)
    assert truth.turns >= 4_000 and truth.sessions > 100 and truth.chats > 5
    assert truth.memory_items == 523
    assert set(truth.statuses) == {"confirmed", "candidate", "rejected", "superseded"}
    assert all(n > 0 for n in truth.statuses.values())
    assert 200 <= truth.entities <= 500
    assert truth.confirm_patches and truth.supersede_patches and truth.entity_edges
    assert truth.mentions and truth.mentions_redirected
    # The FTS5 index is there and agrees with the ledger.
    conn = sqlite3.connect(out / "old-store.sqlite")
    word, (turn_id, _) = next(iter(truth.needles.items()))
    hits = conn.execute("SELECT rowid FROM turns_fts WHERE turns_fts MATCH ?", (word,)).fetchall()
    assert hits == [(turn_id,)]
    conn.close()


def test_reader_and_fold_agree_with_the_generator(generated: tuple[Path, Truth]) -> None:
    out, truth = generated
    graph = fold_graph(out / "graph.jsonl")
    s = graph.stats
    assert s.records == truth.entity_records
    assert s.restated == truth.entities_restated
    assert s.patches == {"confirm": truth.confirm_patches, "supersede": truth.supersede_patches}
    assert s.orphan_patches == truth.orphan_patches
    assert s.malformed == truth.malformed_lines
    assert len(graph.entities) == truth.entities
    assert sum(1 for e in graph.entities.values() if e.superseded_by) == truth.entities_superseded
    assert graph.entity_edges() == truth.entity_edges
    for old_id, final in truth.final_entity.items():
        assert graph.resolve(old_id).entity_id == final

    store = SqliteStore(out / "old-store.sqlite")
    assert sum(len(b) for b in store.turn_batches(1000)) == truth.turns
    assert store.digest_count() == truth.session_digests
    ids = plan.Ids("ada")
    items = store.memory_items()
    store.close()
    rows = [r for r in (plan.plan_item(i, ids, graph) for i in items) if not isinstance(r, str)]
    assert len(rows) == truth.memories
    assert sum(not r.owner_only for r in rows) == truth.memories_shared
    assert len(plan.entity_rows(rows, graph, ids)) == truth.entities_created


def _graph(tmp_path: Path, lines: list[object], tail: str = "") -> Path:
    path = tmp_path / "graph.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + tail)
    return path


def rec(eid: str, name: str, **extra: object) -> dict[str, object]:
    return {"id": eid, "name": name, "type": "person", "properties": {}, **extra}


def test_fold_rules(tmp_path: Path) -> None:
    path = _graph(
        tmp_path,
        [
            rec("a", "Robin", properties={"relations": {"knows": ["b", "c"]}}),
            rec("b", "Robin Goodwin"),
            rec("c", "R. Goodwin"),
            rec("d", "Loop one"),
            rec("e", "Loop two"),
            rec("f", "Dangling"),
            {"patch": "supersede", "id": "a", "superseded_by": "b", "at": "2026-07-01T00:00:00Z"},
            {"patch": "supersede", "id": "b", "superseded_by": "c"},
            {"patch": "supersede", "id": "d", "superseded_by": "e"},
            {"patch": "supersede", "id": "e", "superseded_by": "d"},
            {"patch": "supersede", "id": "f", "superseded_by": "nowhere"},
            {"patch": "confirm", "id": "c", "confidence": 0.97, "at": "2026-07-02T00:00:00Z"},
            {"patch": "confirm", "id": "ghost"},
            {"patch": "merge", "id": "a"},
            rec("c", "R. Goodwin", properties={"relations": {"knows": "a"}}),
            "not an object",
        ],
        tail='{"id": "a", "patch": "sup',
    )
    graph = fold_graph(path)
    assert graph.resolve("a").entity_id == "c" and graph.resolve("a").how == "replaced"
    assert graph.resolve("c").how == "self"
    assert graph.resolve("d").how == "replacement chain loops"
    assert graph.resolve("f") == Resolution("f", "replacement missing")
    assert graph.resolve("zzz").entity_id is None
    assert graph.entities["a"].valid_until == "2026-07-01T00:00:00Z"
    # The restated record of c came after its confirmation and stands as written.
    assert graph.entities["c"].confirmed is False
    assert graph.stats.restated == 1
    assert graph.stats.orphan_patches == 1 and graph.stats.unknown_ops == 1
    assert graph.stats.malformed == 2  # the string line and the torn last write
    assert graph.entity_edges() == 3  # a knows b, c; c knows a


def test_fold_refuses_what_is_not_there(tmp_path: Path) -> None:
    with pytest.raises(OldStoreError, match="--graph"):
        fold_graph(tmp_path / "missing.jsonl")
    with pytest.raises(OldStoreError, match="--sqlite"):
        SqliteStore(tmp_path / "missing.sqlite")
    sqlite3.connect(tmp_path / "other.sqlite").execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(OldStoreError, match="missing turns"):
        SqliteStore(tmp_path / "other.sqlite")


def item(**overrides: object) -> MemoryItem:
    base: dict[str, object] = {
        "id": 1,
        "kind": "fact",
        "title": "Standup at 9:30",
        "body": "Moved from 9:00.",
        "confidence": 0.8,
        "status": "confirmed",
        "scope": None,
        "created_at": "2026-05-01T10:00:00Z",
        "updated_at": "2026-05-03T10:00:00Z",
    }
    base.update(overrides)
    return MemoryItem(**base)  # type: ignore[arg-type]


def test_planning_rules(tmp_path: Path) -> None:
    graph = fold_graph(_graph(tmp_path, [rec("a", "Robin")]))
    ids = plan.Ids("ada")
    row = plan.plan_item(item(), ids, graph)
    assert not isinstance(row, str)
    assert (row.kind, row.owner_only, row.confidence) == ("fact", True, 0.8)
    assert row.created_at == datetime(2026, 5, 1, 10, tzinfo=UTC)
    assert row.updated_at == datetime(2026, 5, 3, 10, tzinfo=UTC)
    assert row.id == ids.memory_item(1) == plan.Ids("ada").memory_item(1)
    assert row.id != plan.Ids("bob").memory_item(1)

    mapped = plan.plan_item(item(kind="procedure", scope="shared"), ids, graph)
    assert not isinstance(mapped, str)
    assert (mapped.kind, mapped.mapped_from, mapped.owner_only) == ("note", "procedure", False)
    untitled = plan.plan_item(item(title="  ", body="First line here\nsecond"), ids, graph)
    assert not isinstance(untitled, str) and untitled.title == "First line here"
    backwards = plan.plan_item(item(updated_at="2026-01-01T00:00:00"), ids, graph)
    assert not isinstance(backwards, str) and backwards.updated_at == backwards.created_at
    clamped = plan.plan_item(item(confidence=1.7), ids, graph)
    assert not isinstance(clamped, str) and clamped.confidence == 1.0

    assert plan.plan_item(item(status="candidate"), ids, graph) == (
        "not confirmed (status candidate)"
    )
    assert plan.plan_item(item(title="", body=""), ids, graph) == "no title and no body"
    assert plan.plan_item(item(created_at="last tuesday"), ids, graph) == "unreadable time"
    with_edges = plan.plan_item(item(entity_ids=("a", "zzz")), ids, graph)
    assert not isinstance(with_edges, str)
    assert [m.how for m in with_edges.mentions] == ["self", "unknown entity"]

    turn = Turn(5, "tg-1", "user", "hello there", "2026-05-01T10:00:00Z")
    history = plan.plan_turn(turn, ids)
    assert not isinstance(history, str) and history.id == ids.turn(5)
    assert plan.plan_turn(Turn(6, "tg-1", "tool", "  ", "2026-05-01T10:00:00Z"), ids) == (
        "empty text"
    )
    assert plan.plan_turn(Turn(7, "tg-1", "user", "hi", "garbage"), ids) == "unreadable time"
    huge = Turn(8, "tg-1", "user", "log " * 60_000, "2026-05-01T10:00:00Z")
    assert plan.plan_turn(huge, ids) == "text over 200000 characters"
