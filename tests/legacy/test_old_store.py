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

from recallatron_devkit.legacy_fixture import generate
from recallatron_devkit.legacy_truth import Truth
from services.store.legacy import plan
from services.store.legacy.oldgraph import Resolution, fold_graph
from services.store.legacy.oldstore import MemoryItem, OldStoreError, SqliteStore, Turn


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
    records, skipped = plan.plan_records(graph, ids, plan.item_mention_times(rows))
    assert not skipped and len(records) == truth.record_memories
    entities = plan.entity_rows(rows, records, graph, ids)
    assert len(entities) == truth.entities_created
    assert sum(1 for e in entities.values() if e.type) == truth.entities_typed
    assert {e.type for e in entities.values()} == {
        "person",
        "project",
        "place",
        "organisation",
        "tool",
    }


def test_record_plans_agree_with_the_generator(generated: tuple[Path, Truth]) -> None:
    """Each folded record's planned claims against the generator's own
    account of them, record by record."""
    out, truth = generated
    graph = fold_graph(out / "graph.jsonl")
    ids = plan.Ids("ada")
    records, _ = plan.plan_records(graph, ids, {})
    by_id = {r.source_id: r for r in records}
    assert set(by_id) == set(truth.entity_attributes)
    for old_id, attributes in truth.entity_attributes.items():
        r = by_id[old_id]
        assert sorted((a.attribute, a.value) for a in r.attributes) == sorted(attributes), old_id
        assert {a.entity_old_id for a in r.attributes} <= {truth.final_entity[old_id]}
        assert r.confidence == truth.entity_confidence[old_id]
        assert r.id == ids.entity_record(old_id)
        assert old_id in r.body and truth.entity_names[old_id] in r.title
    planned = sorted(
        (r.source_id, x.subject_old_id, x.predicate, x.object_old_id)
        for r in records
        for x in r.relations
    )
    assert planned == sorted(truth.relations)
    assert sum(len(r.mentions) for r in records) == truth.record_mentions
    superseded = [r for r in records if r.supersession is not None]
    assert len(superseded) == truth.supersessions
    position = {r.source_id: i for i, r in enumerate(records)}
    for r in superseded:
        assert r.supersession is not None
        by = r.supersession.by_old_id
        assert graph.entities[r.source_id].superseded_by == by
        # Written after its replacement, so the pointer has a target.
        assert position[by] < position[r.source_id]
        assert r.supersession.at >= r.created_at and r.updated_at >= r.supersession.at
    varied = by_id[truth.varied_entity]
    assert sorted(varied.attributes_skipped) == sorted(truth.attribute_claims_skipped)


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


def test_identifiers_and_values() -> None:
    cases = {
        "role": "role",
        "Home City": "home_city",
        "homeOffice": "home_office",
        "e-mail  address": "e_mail_address",
        "__private__": "private",
        "2fa": "attr_2fa",
        "Ångström Ünit": "angstrom_unit",
        "x" * 70: "x" * 64,
        "a" * 63 + " b": "a" * 63,
        "★": None,
        "": None,
    }
    for raw, expected in cases.items():
        assert plan.identifier_from(raw, "attr_") == expected, raw
    assert plan.claim_value("Lisbon") == ("Lisbon", None)
    assert plan.claim_value(3.5) == ("3.5", None)
    assert plan.claim_value(False) == ("false", None)
    assert plan.claim_value({"b": 1, "a": [1, "é"]}) == ('{"a": [1, "é"], "b": 1}', None)
    assert plan.claim_value(None) == ("", "no value (null)")
    assert plan.claim_value("   ") == ("", "empty value")
    assert plan.claim_value("a\x00b") == ("", "value holds NUL characters")
    assert plan.claim_value("v" * 2000)[1] is None
    assert plan.claim_value("v" * 2001) == ("", "value over 2000 characters")


def test_record_planning_rules(tmp_path: Path) -> None:
    path = _graph(
        tmp_path,
        [
            rec(
                "a",
                "Robin",
                type="Person",
                confidence=0.6,
                valid_from="2026-03-01T00:00:00Z",
                properties={
                    "City": "Porto",
                    "relations": {"knows": ["c", "c2", "ghost"], "Works At!": "o", "★": ["o"]},
                },
            ),
            rec("c", "Robin Goodwin", valid_from="2026-02-01T00:00:00Z"),
            rec("c2", "R. Goodwin", valid_from="2026-04-01T00:00:00Z"),
            rec("o", "Northwind", type="", properties={"relations": "o"}),
            rec("d", "Loop one", valid_from="2026-01-01T00:00:00Z", properties={"x": "1"}),
            rec("e", "Loop two", valid_from="2026-01-01T00:00:00Z"),
            rec(
                "f",
                "Backwards",
                valid_from="2026-05-01T00:00:00Z",
                valid_until="2026-04-01T00:00:00Z",
                properties={"x": "1", "relations": {"knows": ["c"]}},
            ),
            {"patch": "supersede", "id": "c2", "superseded_by": "c", "at": "2026-06-01T00:00:00Z"},
            {"patch": "supersede", "id": "a", "superseded_by": "c2", "at": "2026-07-01T00:00:00Z"},
            {"patch": "supersede", "id": "d", "superseded_by": "e"},
            {"patch": "supersede", "id": "e", "superseded_by": "d"},
        ],
    )
    graph = fold_graph(path)
    ids = plan.Ids("ada")
    records, skipped = plan.plan_records(graph, ids, {})
    # "o" has no time at all and no memory item links it.
    assert skipped == {"o": "no readable time"}
    assert plan.plan_record(graph.entities["o"], ids, graph, datetime(2026, 1, 1, tzinfo=UTC))
    by = {r.source_id: r for r in records}
    a = by["a"]
    # Claims about the entity that stands for "a" (the end of its chain).
    assert [(x.entity_old_id, x.attribute, x.value) for x in a.attributes] == [
        ("c", "city", "Porto")
    ]
    assert [(x.subject_old_id, x.predicate, x.object_old_id) for x in a.relations] == [
        ("c", "knows", "c"),
        ("c", "works_at", "o"),
    ]
    assert sorted(a.relations_skipped) == [
        "same relation as another of the record, after supersession",
        "unknown target entity",
        "verb with no letter or digit",
    ]
    assert a.mentions == ("c", "o")
    assert a.supersession is not None and a.supersession.by_old_id == "c2"
    assert a.supersession.by_memory_id == ids.entity_record("c2")
    assert a.supersession.at == datetime(2026, 7, 1, tzinfo=UTC)
    assert (a.attributes_read, a.relations_read) == (1, 5)
    # Replacements first: c, then c2 (superseded by c), then a.
    order = [r.source_id for r in records]
    assert order.index("c") < order.index("c2") < order.index("a")
    assert (by["c"].depth, by["c2"].depth, by["a"].depth) == (0, 1, 2)
    # A loop supersedes nothing, and each record speaks for itself.
    assert by["d"].supersession is None and by["d"].supersession_skipped == (
        "replacement chain loops"
    )
    assert [x.entity_old_id for x in by["d"].attributes] == ["d"]
    assert by["f"].attributes == () and by["f"].relations == ()
    assert by["f"].attributes_skipped == ("valid_until before valid_from",)
    assert by["f"].relations_skipped == ("valid_until before valid_from",)
    entities = plan.entity_rows([], records, graph, ids)
    assert entities["c"].type == "person" and "a" not in entities
    assert entities["c"].created_at == datetime(2026, 2, 1, tzinfo=UTC)
    # "o" is named by a's relation though its own record is skipped.
    assert (entities["o"].name, entities["o"].type) == ("Northwind", None)
    only_a = plan.entity_rows([], [a], graph, ids)
    assert only_a["o"].created_at == a.created_at
    typed = fold_graph(
        _graph(tmp_path, [rec("p", "Pat", type="Team Lead", valid_from="2026-01-01")])
    )
    assert plan.entity_rows([], plan.plan_records(typed, ids, {})[0], typed, ids)["p"].type == (
        "team_lead"
    )


OLD_SCHEMA = """
CREATE TABLE turns (id INTEGER PRIMARY KEY, chat_id TEXT NOT NULL, role TEXT NOT NULL,
    text TEXT NOT NULL, ts TEXT NOT NULL);
CREATE TABLE session_digests (id INTEGER PRIMARY KEY, chat_id TEXT NOT NULL,
    started_at TEXT NOT NULL, ended_at TEXT NOT NULL, turn_count INTEGER NOT NULL,
    digest TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE memory_items (id INTEGER PRIMARY KEY, kind TEXT NOT NULL, title TEXT NOT NULL,
    body TEXT NOT NULL, confidence REAL NOT NULL, status TEXT NOT NULL, scope TEXT,
    source_chat_id TEXT, created_at TEXT NOT NULL, updated_at TEXT, confirmed_at TEXT);
CREATE TABLE memory_item_entities (memory_id INTEGER NOT NULL, entity_id TEXT NOT NULL,
    PRIMARY KEY (memory_id, entity_id));
"""


def _old_store(tmp_path: Path, *statements: str, schema: str = OLD_SCHEMA) -> Path:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(schema)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path


def test_odd_rows_of_the_sqlite_file_are_read_not_crashed_on(tmp_path: Path) -> None:
    """Held-out old stores: Unix seconds in the TEXT time columns (stored as
    text, and skipped as unreadable), text that is not UTF-8 (a traceback, the
    rest of the run never made), a confidence that is not a number and an edge
    whose memory id is not one (a bare ValueError)."""
    path = _old_store(
        tmp_path,
        "INSERT INTO turns VALUES (1, 'cli', 'user', 'hello there', 1718700000)",
        "INSERT INTO turns VALUES (2, 'cli', 'user', CAST(X'68E96C6C6F' AS TEXT), '2026-01-01')",
        "INSERT INTO memory_items VALUES (1, 'fact', 't', 'b', 'high', 'confirmed', NULL, NULL,"
        " 1718700000, NULL, NULL)",
        "INSERT INTO memory_item_entities VALUES ('one', 'e1')",
        "INSERT INTO memory_item_entities VALUES (1, 'e2')",
    )
    store = SqliteStore(path)
    turns = [t for batch in store.turn_batches(10) for t in batch]
    ids = plan.Ids("ada")
    first = plan.plan_turn(turns[0], ids)
    assert not isinstance(first, str), first
    assert first.occurred_at == datetime.fromtimestamp(1718700000, UTC)
    assert turns[1].text == "h\ufffdllo"
    [memory_item] = store.memory_items()
    assert memory_item.confidence is None and memory_item.entity_ids == ("e2",)
    row = plan.plan_item(memory_item, ids, fold_graph(_graph(tmp_path, [])))
    assert not isinstance(row, str), row


def test_a_store_of_another_schema_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    path = _old_store(tmp_path, schema=OLD_SCHEMA.replace("scope TEXT,", ""))
    with pytest.raises(OldStoreError, match=r"--sqlite: .*memory_items.*scope"):
        SqliteStore(path)


def test_only_a_documented_shared_scope_shares(tmp_path: Path) -> None:
    """'shared' (and 'workspace') are everyone; any other scope, 'team'
    included, stays with the owner: a migration narrows, never widens."""
    graph = fold_graph(_graph(tmp_path, []))
    ids = plan.Ids("ada")
    for scope, owner_only in (
        ("shared", False), ("Workspace", False), ("team", True), ("private", True),
        ("everyone-but-hr", True), (None, True),
    ):  # fmt: skip
        row = plan.plan_item(item(scope=scope), ids, graph)
        assert not isinstance(row, str) and row.owner_only is owner_only, scope


def test_graph_lines_of_odd_values_fold_without_harm(tmp_path: Path) -> None:
    """A lone surrogate escape (valid JSON, refused by Postgres: the whole run
    stopped, every rerun too), "confirmed": "false" (read as true), a confirm
    patch whose confidence is true (read as 1.0), and a chain of 1,500
    supersessions (a RecursionError)."""
    chain = 1_500
    at = {"valid_from": "2026-01-01T00:00:00Z"}
    lines: list[object] = [
        rec("s", "Bad \ud800 name", properties={"note\udfff": "v\ud800"}, **at),
        rec("q", "Quoted", confirmed="false", **at),
        rec("t", "True one", **at),
        {"patch": "confirm", "id": "t", "confidence": True},
    ]
    lines += [rec(f"e{i}", f"E{i}", **at) for i in range(chain)]
    lines += [
        {"patch": "supersede", "id": f"e{i}", "superseded_by": f"e{i + 1}", "at": "2026-02-01"}
        for i in range(chain - 1)
    ]
    graph = fold_graph(_graph(tmp_path, lines))
    assert graph.entities["s"].name == "Bad \ufffd name"
    assert graph.entities["s"].properties == {"note\ufffd": "v\ufffd"}
    assert graph.entities["q"].confirmed is False
    assert graph.entities["t"].confirmed and graph.entities["t"].confidence is None
    rows, _skipped = plan.plan_records(graph, plan.Ids("ada"), {})
    assert len(rows) == chain + 3
    assert max(r.depth for r in rows) == chain - 1


def test_a_turn_of_an_overlong_chat_id_or_role_is_skipped_and_counted() -> None:
    """A turn's chat id and role had no limit: a chat id of 300,000
    characters came over, and its history line (with a long text) outgrew
    the line an archive reads back (1 MiB), so the workspace's export could
    not be imported. Cut, two chats' ids could become one: skipped, counted."""
    ids = plan.Ids("ada")
    at = "2026-05-01T10:00:00Z"
    said = plan.plan_turn(Turn(1, "c" * 300_000, "user", "hi", at), ids)
    assert isinstance(said, str) and said.startswith("chat id over"), said
    said = plan.plan_turn(Turn(2, "tg-1", "r" * 1000, "hi", at), ids)
    assert isinstance(said, str) and said.startswith("role over"), said
    edge = Turn(3, "c" * plan.MAX_CHAT_ID_CHARS, "r" * plan.MAX_ROLE_CHARS, "hi", at)
    assert isinstance(plan.plan_turn(edge, ids), plan.HistoryRow)
    over = Turn(4, "c" * (plan.MAX_CHAT_ID_CHARS + 1), "user", "hi", at)
    assert plan.plan_turn(over, ids) == f"chat id over {plan.MAX_CHAT_ID_CHARS} characters"
