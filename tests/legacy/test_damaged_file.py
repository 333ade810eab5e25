"""An old store's SQLite file with a damaged page: refused naming the file,
before anything is read for import, or (changed under the run) where the read
stops, never as a traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from recallatron_devkit.legacy_fixture import SCHEMA
from services.store.legacy.oldstore import OldStoreError, SqliteStore

PAGE = 4096


def _store(tmp_path: Path) -> Path:
    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(SCHEMA)
    turns = [(i, "c", "user", f"turn {i} " + "words " * 40, "2026-01-01") for i in range(1, 2001)]
    conn.executemany("INSERT INTO turns VALUES (?, ?, ?, ?, ?)", turns)
    conn.commit()
    conn.close()
    return db


def _damage(db: Path) -> None:
    """A page two thirds into the file overwritten, and the header's change
    counter moved on so that a reader holding pages reads them anew."""
    pages = db.stat().st_size // PAGE
    with db.open("r+b") as f:
        f.seek((pages * 2 // 3) * PAGE)
        f.write(b"\xa5" * PAGE)
        f.seek(24)
        counter = int.from_bytes(f.read(4), "big")
        f.seek(24)
        f.write((counter + 1).to_bytes(4, "big"))


def test_a_damaged_page_is_refused_on_opening_naming_the_file(tmp_path: Path) -> None:
    db = _store(tmp_path)
    _damage(db)
    with pytest.raises(OldStoreError, match="is damaged") as refused:
        SqliteStore(db)
    assert str(db) in str(refused.value)


def test_a_page_damaged_under_the_run_stops_it_naming_the_file(tmp_path: Path) -> None:
    db = _store(tmp_path)
    store = SqliteStore(db)
    try:
        _damage(db)
        with pytest.raises(OldStoreError, match="could not be read partway") as stopped:
            for _ in store.turn_batches(100):
                pass
        assert str(db) in str(stopped.value)
    finally:
        store.close()
