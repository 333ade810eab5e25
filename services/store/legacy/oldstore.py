"""Reading the old store (docs/migration.md describes the format): its SQLite
file (conversation turns with an FTS5 index, session digests, curated memory
items and their entity edges), and what both of its files share: refusing a
file that cannot be read, and its times. Its `graph.jsonl` is folded in
oldgraph. Plain Python, no database of ours."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from services.store.legacy.batching import MAX_BATCH_BYTES, bounded_batches, text_bytes

REQUIRED_TABLES = ("turns", "session_digests", "memory_items", "memory_item_entities")
# The columns this reader reads, per table: a file of another schema version
# is refused before anything is imported, naming what it lacks.
REQUIRED_COLUMNS = {
    "turns": ("id", "chat_id", "role", "text", "ts"),
    "memory_items": (
        "id", "kind", "title", "body", "confidence", "status", "scope", "created_at", "updated_at",
    ),
    "memory_item_entities": ("memory_id", "entity_id"),
}  # fmt: skip
# Unix seconds written as text (the time columns are TEXT in the old schema).
_UNIX_SECONDS = re.compile(r"-?\d+(?:\.\d+)?")
# Postgres keeps times past both ends of Python's calendar (years 1 to
# 9999), which every later read of the row (psycopg's datetime) then fails
# on; a server's time zone moves a time shown by up to a day, hence the margin.
_EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
_LATEST = datetime(9999, 12, 30, tzinfo=UTC)
# Turns read from the file at a time (batches are cut from them).
_READ_ROWS = 256


class OldStoreError(Exception):
    """The files are not an old store this reader understands."""


def readable(path: Path, flag: str) -> None:
    """Refuses, naming ``flag`` and the file, a path that is missing, not a
    file, or not readable (its permissions, say), before anything is read."""
    if path.is_dir():
        raise OldStoreError(f"{flag}: {path} is a directory, not the file")
    if path.exists() and not path.is_file():
        raise OldStoreError(f"{flag}: {path} is not a regular file")
    try:
        with path.open("rb") as f:
            f.read(1)
    except FileNotFoundError:
        raise OldStoreError(f"{flag}: no such file: {path}") from None
    except OSError as exc:
        raise OldStoreError(f"{flag}: {path} cannot be read ({exc.strerror or exc})") from None


@dataclass(frozen=True)
class Turn:
    id: int
    chat_id: str
    role: str
    text: str
    # ISO-8601 text or Unix seconds, as written (parse_time reads both).
    ts: str | int | float | None


def turn_bytes(turn: Turn) -> int:
    """What a turn weighs in a batch: its text columns' UTF-8 size."""
    return text_bytes(turn.chat_id, turn.role, turn.text)


@dataclass(frozen=True)
class MemoryItem:
    id: int
    kind: str
    title: str
    body: str
    confidence: float | None
    status: str
    scope: str | None
    created_at: str | int | float | None
    updated_at: str | int | float | None
    entity_ids: tuple[str, ...] = ()


def parse_time(value: object) -> datetime | None:
    """ISO-8601 text (a trailing Z allowed; no zone means UTC) or Unix
    seconds; None when unreadable, or when it lies outside the times a
    reader can read back (_EARLIEST.._LATEST)."""
    if value is None:
        return None
    if isinstance(value, str) and _UNIX_SECONDS.fullmatch(value.strip()):
        value = float(value)
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            parsed = datetime.fromtimestamp(float(value), UTC)
        else:
            parsed = datetime.fromisoformat(str(value).strip())
            parsed = parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return parsed if _EARLIEST <= parsed <= _LATEST else None


# -- the SQLite file ----------------------------------------------------------


class SqliteStore:
    """Read-only access to the old store's SQLite file."""

    def __init__(self, path: Path) -> None:
        readable(path, "--sqlite")
        self.path = path
        # Read-only: the migration never changes the old store.
        try:
            self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise OldStoreError(f"--sqlite: {path} cannot be read ({exc})") from None
        # Text that is not UTF-8 is carried with U+FFFD where bytes did not
        # decode (Python's default stops the whole run at that row).
        self.conn.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
        try:
            names = {
                r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
        except sqlite3.DatabaseError as exc:
            raise OldStoreError(f"--sqlite: not a SQLite database: {exc}") from None
        missing = [t for t in REQUIRED_TABLES if t not in names]
        if missing:
            raise OldStoreError(f"--sqlite: not an old store: missing {', '.join(missing)}")
        for table, columns in REQUIRED_COLUMNS.items():
            # PRAGMA takes no parameter; the table names are this module's own.
            have = {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}
            lacking = [c for c in columns if c not in have]
            if lacking:
                raise OldStoreError(
                    f"--sqlite: an old store of another schema: {table} has no "
                    f"{', '.join(lacking)} column"
                )
        self.has_fts = "turns_fts" in names
        self._check_pages()

    def _check_pages(self) -> None:
        """Every page of the tables read, read once before anything is
        written: a damaged page partway through the file would otherwise stop
        the run there, with the batches before it committed and every rerun
        stopping at the same page. The FTS index is not read, so not checked."""
        for table in REQUIRED_TABLES:
            try:
                # PRAGMA takes no parameter; the table names are this module's own.
                found = [r[0] for r in self.conn.execute(f"PRAGMA quick_check({table})")]
            except sqlite3.DatabaseError as exc:
                found = [str(exc)]
            if found != ["ok"]:
                raise OldStoreError(
                    f"--sqlite: {self.path} is damaged (table {table}: {found[0]}); "
                    "nothing was imported: repair the file (sqlite3 .recover) and rerun"
                )

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """A page that stops reading after the check (the file changed under
        the run) is the file's fault, said once with its name."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise OldStoreError(
                f"--sqlite: {self.path} could not be read partway ({exc}); the batches "
                "imported before stay: repair the file (sqlite3 .recover) and rerun"
            ) from None

    def digest_count(self) -> int:
        with self._reading():
            row = self.conn.execute("SELECT count(*) FROM session_digests").fetchone()
        return int(row[0])

    def turn_batches(self, size: int, max_bytes: int = MAX_BATCH_BYTES) -> Iterator[list[Turn]]:
        """Every turn in id order, at most `size` and (past a batch's first
        turn) `max_bytes` of text at a time: the ledger may be large, and a
        turn may hold 200,000 characters."""
        return bounded_batches(self._turns(), size, max_bytes, turn_bytes)

    def _turns(self) -> Iterator[Turn]:
        with self._reading():
            cur = self.conn.execute("SELECT id, chat_id, role, text, ts FROM turns ORDER BY id")
            rows = cur.fetchmany(_READ_ROWS)
        while rows:
            for r in rows:
                yield Turn(int(r[0]), _text(r[1]), _text(r[2]), _text(r[3]), _time(r[4]))
            with self._reading():
                rows = cur.fetchmany(_READ_ROWS)

    def memory_items(self) -> list[MemoryItem]:
        with self._reading():
            return self._memory_items()

    def _memory_items(self) -> list[MemoryItem]:
        edges: dict[int, list[str]] = {}
        for memory_id, entity_id in self.conn.execute(
            "SELECT memory_id, entity_id FROM memory_item_entities ORDER BY memory_id, entity_id"
        ):
            item_id = _integer(memory_id)
            if item_id is not None:  # an edge to no item's id names nothing
                edges.setdefault(item_id, []).append(_text(entity_id))
        items = []
        for r in self.conn.execute(
            "SELECT id, kind, title, body, confidence, status, scope, created_at, updated_at"
            " FROM memory_items ORDER BY id"
        ):
            items.append(
                MemoryItem(
                    id=int(r[0]),
                    kind=_text(r[1]),
                    title=_text(r[2]),
                    body=_text(r[3]),
                    confidence=_number(r[4]),
                    status=_text(r[5]),
                    scope=None if r[6] is None else _text(r[6]),
                    created_at=_time(r[7]),
                    updated_at=_time(r[8]),
                    entity_ids=tuple(edges.get(int(r[0]), ())),
                )
            )
        return items


def _text(value: object) -> str:
    """A text column's value as text. SQLite keeps what was written: bytes
    (a BLOB) are decoded as UTF-8, U+FFFD where they do not decode, not
    carried as Python's b'...'; a number in a column of no type is its
    digits, 0 included; NULL is empty."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


def _time(value: object) -> str | int | float | None:
    """A time column's value for parse_time: numbers stay numbers (Unix
    seconds), bytes are decoded like text."""
    return value if value is None or isinstance(value, int | float | str) else _text(value)


def _integer(value: object) -> int | None:
    if isinstance(value, int):
        return value
    try:
        return int(_text(value).strip())
    except ValueError:
        return None


def _number(value: object) -> float | None:
    """A confidence as the old store held it; None (the default) when it is
    not a number ('high')."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
