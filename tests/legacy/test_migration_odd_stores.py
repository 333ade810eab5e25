"""`recallatron migrate` on small hand-made old stores against the real stack:
lines and rows the generated store does not hold, each checked for what the
migration writes and what its report says."""

from __future__ import annotations

import json
import sqlite3
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from recallatron.client import Client
from recallatron_devkit.legacy_fixture import SCHEMA
from recallatron_devkit.stack import Stack
from services.store.legacy import plan
from tests import dbutil
from tests.conftest import Team, make_team
from tests.legacy.test_migration import recall, run_cli

pytestmark = pytest.mark.integration

AT = "2026-01-01T00:00:00Z"

# (id, chat id, role, text: bytes are kept as a BLOB, time)
Turn = tuple[int, str, str, str | bytes, str]


def old_store(
    tmp: Path, turns: list[Turn], graph: list[Any], *statements: tuple[str, tuple[Any, ...]]
) -> tuple[Path, Path]:
    """An old store of these turns and graph lines, and what ``statements``
    (SQL, parameters) add to its SQLite file."""
    db = tmp / "old.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(SCHEMA)
    conn.executemany("INSERT INTO turns VALUES (?, ?, ?, ?, ?)", turns)
    for sql, params in statements:
        conn.execute(sql, params)
    conn.commit()
    conn.close()
    graph_path = tmp / "graph.jsonl"
    graph_path.write_text("".join(json.dumps(line) + "\n" for line in graph))
    return db, graph_path


def migrate(stack: Stack, team: Team, files: tuple[Path, Path]) -> dict[str, Any]:
    args = ["migrate", "--sqlite", str(files[0]), "--graph", str(files[1])]
    args += ["--workspace", team.slug, "--owner", "ada", "--json", "--no-floor-check"]
    code, out, err = run_cli(stack, args)
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


@pytest.fixture
def ada(stack: Stack, operator: Client) -> Iterator[Team]:
    team = make_team(stack, operator, ("ada",))
    yield team
    for client in team.clients.values():
        client.close()


def test_a_graph_id_holding_a_nul_character_is_a_malformed_line(
    stack: Stack, ada: Team, tmp_path: Path
) -> None:
    """JSON may escape a NUL ("\\u0000") that Postgres text cannot hold: the
    ledger refused the record's old id and the run stopped there, every rerun
    too, with nothing of the graph or the memory items imported."""
    graph = [
        {"id": "torn\u0000", "name": "Torn", "valid_from": AT},
        {"id": "ok", "name": "Okay", "valid_from": AT},
        {"patch": "supersede", "id": "ok", "superseded_by": "torn\u0000", "at": AT},
    ]
    report = migrate(stack, ada, old_store(tmp_path, [(1, "c", "user", "hello", AT)], graph))
    assert report["graph"]["malformed"] == 2
    assert report["entity_records"]["imported"] == 1
    titles = dbutil.query(stack, ada.database_name, "SELECT title FROM memory")
    assert titles == [("Okay",)]


def test_claims_whose_parts_hold_colons_are_each_written(
    stack: Stack, ada: Team, tmp_path: Path
) -> None:
    """Claim ids were made from the old id, name and target joined by colons:
    verb "x" to "y:z" and verb "x:y" to "z" (or record "a:b"'s property "c"
    and record "a"'s "b:c") gave one id, the second claim was dropped on
    conflict, and the report counted it imported all the same."""
    graph = [
        {"id": "a", "name": "A", "valid_from": AT,
         "properties": {"b:c": "one", "relations": {"x": ["y:z"], "x:y": ["z"]}}},
        {"id": "a:b", "name": "AB", "valid_from": AT, "properties": {"c": "two"}},
        {"id": "y:z", "name": "YZ", "valid_from": AT},
        {"id": "z", "name": "Z", "valid_from": AT},
    ]  # fmt: skip
    report = migrate(stack, ada, old_store(tmp_path, [], graph))
    assert (report["attribute_claims"]["imported"], report["relation_claims"]["imported"]) == (
        2,
        2,
    )
    rows = dbutil.query(
        stack,
        ada.database_name,
        "SELECT (SELECT count(*) FROM attribute_claim), (SELECT count(*) FROM relation_claim)",
    )
    assert rows == [(2, 2)]


def test_history_written_with_combining_accents_is_found_by_either_form(
    stack: Stack, ada: Team, tmp_path: Path
) -> None:
    """Memories are kept and searched in NFC (migration 0038) and history
    kept as it was said: a turn written with combining accents (as macOS
    writes file names and some keyboards type) was found only by a query in
    the same decomposed form, never by "zébulon" typed the usual way."""
    said = unicodedata.normalize("NFD", "the café on rue zébulon")
    migrate(stack, ada, old_store(tmp_path, [(1, "c", "user", said, AT)], []))
    owner = ada.clients["ada"]
    for form in ("NFC", "NFD"):
        query = unicodedata.normalize(form, "zébulon")
        [hit] = recall(owner, query, include_history=True).outcome.history
        assert hit.text == said, form  # kept as it was said
    stats = dbutil.query(
        stack, ada.database_name, "SELECT lexeme FROM history_term_stat ORDER BY lexeme"
    )
    # One form in the statistics: its accents folded (workspace migration 0077).
    assert ("zebulon",) in stats
    assert (unicodedata.normalize("NFD", "zébulon"),) not in stats


def test_text_the_old_store_kept_as_bytes_is_carried_as_text(
    stack: Stack, ada: Team, tmp_path: Path
) -> None:
    """SQLite keeps bytes written to a TEXT column as a BLOB (an old writer
    that stored encoded text): they were carried as Python's b'...' (a
    history turn "b'see you at the caf\\xc3\\xa9'", a memory titled
    "b'Dentist'") and an edge to b'e1' named no entity."""
    item = (
        "INSERT INTO memory_items VALUES (1, 'fact', ?, ?, 0.9, 'confirmed', NULL, NULL, ?,"
        " NULL, NULL)",
        (b"Dentist", "Dentist on Tuesday at the café".encode(), b"2026-01-02T00:00:00Z"),
    )
    edge = ("INSERT INTO memory_item_entities VALUES (1, ?)", (b"e1",))
    turns: list[Turn] = [(1, "c", "user", "see you at the café".encode(), AT)]
    turns.append((2, "c", "user", b"caf\xe9 not UTF-8", AT))
    graph = [{"id": "e1", "name": "Dr Pereira", "valid_from": AT}]
    report = migrate(stack, ada, old_store(tmp_path, turns, graph, item, edge))
    assert report["mentions"]["imported"] == 1, report["mentions"]
    db = ada.database_name
    history = dbutil.query(stack, db, "SELECT text FROM history_entry ORDER BY text")
    assert history == [("caf\ufffd not UTF-8",), ("see you at the café",)]
    memory = dbutil.query(
        stack,
        db,
        "SELECT m.title, m.body, e.name FROM memory m JOIN mention n ON n.memory_id = m.id"
        " JOIN entity e ON e.id = n.entity_id WHERE m.kind = 'fact' AND m.title = 'Dentist'",
    )
    assert memory == [("Dentist", "Dentist on Tuesday at the café", "Dr Pereira")]


def test_a_corrupt_page_in_the_sqlite_file_is_refused_before_anything_is_written(
    stack: Stack, ada: Team, tmp_path: Path
) -> None:
    """A page partway through the file that does not read (a disk error, a
    copy cut short): the run must say which file is damaged, once, and write
    nothing a rerun on the repaired file would have to work around."""
    turns: list[Turn] = [(i, "c", "user", f"turn {i} " + "words " * 40, AT) for i in range(1, 2001)]
    db, graph = old_store(tmp_path, turns, [{"id": "e1", "name": "Robin", "valid_from": AT}])
    page = 4096
    pages = db.stat().st_size // page
    with db.open("r+b") as f:
        f.seek((pages * 2 // 3) * page)
        f.write(b"\xa5" * page)
    args = ["migrate", "--sqlite", str(db), "--graph", str(graph)]
    code, out, err = run_cli(stack, [*args, "--workspace", ada.slug, "--owner", "ada", "--json"])
    assert code == 2, (code, out, err)
    assert "Traceback" not in err
    assert str(db) in err and err.count("error:") == 1, err
    written = dbutil.query(
        stack,
        ada.database_name,
        "SELECT (SELECT count(*) FROM history_entry), (SELECT count(*) FROM memory),"
        " (SELECT count(*) FROM legacy_import)",
    )
    assert written == [(0, 0, 0)]


def test_times_at_the_ends_of_the_calendar_do_not_break_reading(
    stack: Stack, ada: Team, tmp_path: Path
) -> None:
    """A time whose offset puts it before year 1 or after year 9999 in UTC
    ('0001-01-01T00:30:00+01:00', '9999-12-31T23:00:00-05:00') was written as
    it was (Postgres keeps it), and then every read of the row failed: the
    owner's recall answered an error for the memory and for the turn."""
    early, late = "0001-01-01T00:30:00+01:00", "9999-12-31T23:00:00-05:00"
    items = [
        (
            "INSERT INTO memory_items VALUES (?, 'fact', ?, ?, 0.9, 'confirmed', NULL, NULL, ?,"
            " ?, NULL)",
            (n, title, f"{title} quasar window", created, updated),
        )
        for n, title, created, updated in (
            (1, "Early", early, None),
            (2, "Late", late, None),
            (3, "Renewed late", AT, late),
        )
    ]
    edge = ("INSERT INTO memory_item_entities VALUES (3, 'e1')", ())
    graph = [{"id": "e1", "name": "Robin", "valid_from": early, "valid_until": late}]
    turns: list[Turn] = [(1, "c", "user", "zephyrine early", early)]
    turns.append((2, "c", "user", "zephyrine late", late))
    report = migrate(stack, ada, old_store(tmp_path, turns, graph, *items, edge))
    assert report["turns"]["skipped"] == {"unreadable time": 2}, report["turns"]
    assert report["memory_items"]["skipped"] == {"unreadable time": 2}, report["memory_items"]
    owner = ada.clients["ada"]
    assert not recall(owner, "zephyrine", include_history=True).outcome.history
    [result] = recall(owner, "quasar", include_history=False).outcome.results
    assert result.memory.title == "Renewed late"
    rows = dbutil.query(
        stack,
        ada.database_name,
        "SELECT count(*) FROM memory WHERE created_at < '0001-01-02' OR updated_at > '9999-12-30'"
        " OR created_at > '9999-12-30'",
    )
    assert rows == [(0,)]


def test_a_graph_file_that_is_no_graph_jsonl_is_refused_before_anything_is_written(
    stack: Stack, ada: Team, tmp_path: Path
) -> None:
    """The SQLite file given as --graph too (or any file of no JSON lines):
    every line was malformed, the run imported the items without one of their
    mentions and exited 0, and a rerun with the right graph.jsonl could not
    add them (a rerun never revises an imported item)."""
    item = (
        "INSERT INTO memory_items VALUES (1, 'fact', 'Dentist', 'On Tuesday', 0.9, 'confirmed',"
        " NULL, NULL, ?, NULL, NULL)",
        (AT,),
    )
    edge = ("INSERT INTO memory_item_entities VALUES (1, 'e1')", ())
    db, graph = old_store(tmp_path, [(1, "c", "user", "hello", AT)], [], item, edge)
    notes = tmp_path / "notes.txt"
    notes.write_text("not json\n{torn\n")
    for wrong in (db, notes):
        args = ["migrate", "--sqlite", str(db), "--graph", str(wrong)]
        code, out, err = run_cli(stack, [*args, "--workspace", ada.slug, "--owner", "ada"])
        assert code == 2, (code, out, err)
        assert "--graph" in err and str(wrong) in err and "Traceback" not in err, err
    written = dbutil.query(
        stack,
        ada.database_name,
        "SELECT (SELECT count(*) FROM history_entry), (SELECT count(*) FROM memory),"
        " (SELECT count(*) FROM legacy_import)",
    )
    assert written == [(0, 0, 0)]
    # A graph of no lines at all is an old store that never met an entity.
    report = migrate(stack, ada, (db, graph))
    assert report["memory_items"]["imported"] == 1


def test_another_old_store_for_the_same_owner_is_refused_not_taken_as_present(
    stack: Stack, ada: Team, tmp_path: Path
) -> None:
    """A second old store (another device's) migrated for the same owner: its
    turns and items share the first's ids, so the run reported them all
    'already present', imported none of them and exited 0."""
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    migrate(stack, ada, old_store(first, [(1, "c", "user", "the laptop's turn", AT)], []))
    turns: list[Turn] = [(1, "c", "user", "the phone's turn about zinnias", AT)]
    turns.append((2, "c", "user", "another phone turn", AT))
    db, graph = old_store(second, turns, [])
    args = ["migrate", "--sqlite", str(db), "--graph", str(graph)]
    code, out, err = run_cli(stack, [*args, "--workspace", ada.slug, "--owner", "ada"])
    assert code == 2, (code, out, err)
    assert "--sqlite" in err and "turn 1" in err and "Traceback" not in err, err
    history = dbutil.query(stack, ada.database_name, "SELECT text FROM history_entry")
    assert history == [("the laptop's turn",)]
    # The same store again, grown since, is a rerun: its new turn comes over.
    grown = [(1, "c", "user", "the laptop's turn", AT), (2, "c", "user", "later", AT)]
    (tmp_path / "grown").mkdir()
    report = migrate(stack, ada, old_store(tmp_path / "grown", grown, []))
    assert (report["turns"]["imported"], report["turns"]["already_present"]) == (1, 1)


def test_a_batch_is_bounded_by_bytes_as_well_as_rows(
    stack: Stack, ada: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--batch-size 10000 of turns up to 200,000 characters each could pass
    Postgres's 1 GB limit on one parameter (a batch's texts go as one array
    each) and end in a traceback: a batch also ends at MAX_BATCH_BYTES of
    text, here made small enough for a few turns and items to cross."""
    monkeypatch.setattr(plan, "MAX_BATCH_BYTES", 4000, raising=False)
    turns: list[Turn] = [(i, "c", "user", f"{i:04d}" + "é" * 748, AT) for i in range(1, 6)]
    items = [
        (
            "INSERT INTO memory_items VALUES (?, 'fact', 'T', ?, 0.9, 'confirmed', NULL, NULL,"
            " ?, NULL, NULL)",
            (i, "x" * 1500, AT),
        )
        for i in range(1, 5)
    ]
    db, graph = old_store(tmp_path, turns, [], *items)
    args = ["migrate", "--sqlite", str(db), "--graph", str(graph), "--batch-size", "10000"]
    args += ["--workspace", ada.slug, "--owner", "ada", "--json", "--no-floor-check"]
    code, out, err = run_cli(stack, args)
    assert code == 0, err
    report = json.loads(out)
    assert report["turns"]["imported"] == 5 and report["memory_items"]["imported"] == 4
    # Turns and items of about 1,500 bytes: two to a batch of 4,000 bytes.
    assert report["batches"] == 5, report
    texts = dbutil.query(stack, ada.database_name, "SELECT text FROM history_entry ORDER BY text")
    assert [t[0] for t in texts] == [t[3] for t in turns]


def test_a_name_that_shows_nothing_once_folded_gives_way_to_the_records_id(
    stack: Stack, ada: Team, tmp_path: Path
) -> None:
    """Every write and lookup refuses an entity name that folds to nothing
    visible (only accents, only zero-width characters): it names no entity.
    The migration made entities of such names, which no lookup could find.
    Now such a name is taken as none, the record's id naming its entity as
    for a record with no name; a record whose id shows nothing either is a
    malformed line, counted and skipped."""
    said = {"properties": {"role": "kept"}, "valid_from": AT}
    graph = [
        {"id": "accents", "name": "\u0301\u0301", "type": "person", **said},
        {"id": "zero-width", "name": "\u200b", **said},
        # Visible only past the length a name is cut to.
        {"id": "cut-accents", "name": "\u0301" * 250 + "Zed", **said},
        {"id": "\u200b\u200d", "name": " \ufeff ", "type": "place", **said},
        {"id": "\u0301", "type": "place", **said},
        {"id": "ok", "name": "Okay", **said},
    ]
    report = migrate(stack, ada, old_store(tmp_path, [], graph))
    assert report["graph"]["malformed"] == 2, report["graph"]
    assert report["entity_records"]["imported"] == 4, report["entity_records"]
    names = dbutil.query(stack, ada.database_name, "SELECT name FROM entity ORDER BY name")
    assert names == [("Okay",), ("accents",), ("cut-accents",), ("zero-width",)]
    # A record's memory is titled by its name where that shows something whole.
    titles = {t for (t,) in dbutil.query(stack, ada.database_name, "SELECT title FROM memory")}
    assert titles == {"Okay", "accents (person)", "zero-width", graph[2]["name"]}
