"""An old store's SQLite file with a damaged page: refused naming the file,
before anything is read for import, or (changed under the run) where the read
stops, never as a traceback."""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from recallatron_devkit.legacy_fixture import SCHEMA
from services.store.legacy.oldgraph import fold_graph
from services.store.legacy.oldstore import OldStoreError, SqliteStore

PAGE = 4096
# The user and group a root test drops to.
NOBODY = 65534


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


def _as_another_user(reads: Callable[[], object]) -> str:
    """What ``reads`` did, in a child process that, run as root (who reads
    any file), drops to nobody first."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(r)
        try:
            if os.geteuid() == 0:
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            reads()
            said = "read"
        except OldStoreError as exc:
            said = f"refused: {exc}"
        except BaseException as exc:
            said = f"{type(exc).__name__}: {exc}"
        os.write(w, said.encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read().decode()
    os.waitpid(pid, 0)
    return said


def test_a_file_that_cannot_be_read_is_refused_naming_the_flag_and_the_file() -> None:
    """chmod 000 on either file, or a directory given as one, ended in a
    traceback (PermissionError, sqlite3's error) or a 'no such file' that is
    not so: refused in one line naming the flag and the file, before
    anything is written."""
    with tempfile.TemporaryDirectory() as held:
        where = Path(held)
        where.chmod(0o755)
        db = _store(where)
        graph = where / "graph.jsonl"
        graph.write_text("")
        for path in (db, graph):
            path.chmod(0)
        said = _as_another_user(lambda: SqliteStore(db))
        assert said.startswith("refused: --sqlite: ") and str(db) in said, said
        assert "cannot be read" in said and "\n" not in said, said
        said = _as_another_user(lambda: fold_graph(graph))
        assert said.startswith("refused: --graph: ") and str(graph) in said, said
        assert "cannot be read" in said and "\n" not in said, said
        for flag, reads in (("--sqlite", SqliteStore), ("--graph", fold_graph)):
            with pytest.raises(OldStoreError, match=f"^{flag}: {where} is a directory"):
                reads(where)
