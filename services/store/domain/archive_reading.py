"""Reading a workspace archive's files within bounds (docs/export.md): a
JSON file no larger than its cap, record lines no longer than their kind's
limit, JSON values no deeper than the format nests, a record's key once per
archive, and a file's digest. The record formats themselves are in
archive_format."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from recallatron import errors

# What a reader holds at most: a JSON file (the manifest, workspace.json, a members file)
# and a record line; a history turn's as a file, its text alone up to 1.2 MB as JSON (200,000
# characters escaped as \u001b) beside chat ids older releases exported whole (docs/export.md).
MAX_JSON_FILE_BYTES = 64 << 20
MAX_LINE_BYTES = 1 << 20
LINE_LIMITS = {"history": MAX_JSON_FILE_BYTES}
# Nesting of one JSON value: the format's deepest is 3 (an episode's
# participants); a deeper value is refused before anything walks it.
MAX_DEPTH = 64

K = TypeVar("K", bound=Hashable)


def file_name(kind: str) -> str:
    return f"{kind}.jsonl"


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


def load_json(data: bytes | str, where: str) -> Any:
    """One JSON value of an archive (or a members file), or InvalidArgument
    naming ``where`` ("memories.jsonl line 12", "workspace.json"): text that
    is not UTF-8, not JSON, nested deeper than MAX_DEPTH (or than the parser
    goes), or holding a lone surrogate ("\\ud800": JSON, but no text to store)."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        value = json.loads(text)
        if not _within_depth(value):
            raise RecursionError
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeError:
        raise errors.InvalidArgument(where, "is not UTF-8 text") from None
    except RecursionError:
        raise errors.InvalidArgument(
            where, f"is JSON nested deeper than {MAX_DEPTH} levels: no value of the format is"
        ) from None
    except ValueError as exc:
        raise errors.InvalidArgument(where, f"is not JSON: {exc}") from None
    return value


def _within_depth(value: Any) -> bool:
    # Iterative: a walk by recursion would fail where the parser did not.
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if not isinstance(item, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            return False
        pending.extend((x, depth + 1) for x in (item.values() if isinstance(item, dict) else item))
    return True


def read_json_file(path: Path, where: str) -> Any:
    """The JSON value of a whole file, refused naming ``where`` when the file
    is larger than MAX_JSON_FILE_BYTES (before it is read) or is no JSON."""
    limit = MAX_JSON_FILE_BYTES
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            # One byte past the cap: a file growing while it is read is refused too.
            data = f.read(limit + 1) if size <= limit else b""
    except OSError as exc:
        raise errors.InvalidArgument(where, f"cannot read {path}: {exc.strerror}") from None
    if size > limit or len(data) > limit:
        raise errors.InvalidArgument(
            where, f"{path} is larger than {_size(limit)}: no file of an archive is"
        )
    return load_json(data, where)


def lines(f: BinaryIO, kind: str) -> Iterator[tuple[int, bytes]]:
    """A record file's lines with their numbers; one longer than its kind's
    limit (its line end not counted) is refused, naming it, before more is read."""
    limit, number = LINE_LIMITS.get(kind, MAX_LINE_BYTES), 0
    while raw := f.readline(limit + 2):
        number += 1
        line = raw.rstrip(b"\r\n")
        if len(line) > limit:
            raise errors.InvalidArgument(
                f"{file_name(kind)} line {number}",
                f"is longer than {_size(limit)}: no record of the archive is",
            )
        yield number, line


def add_once(seen: set[K], key: K, where: str, repeated: str) -> None:
    """Adds a record's ``key`` to ``seen`` (the keys of the records before
    it), or refuses one seen already, naming ``where`` (its line and field)
    with ``repeated``: what the archive would then hold twice."""
    if key in seen:
        raise errors.InvalidArgument(where, repeated)
    seen.add(key)


def sha256_of(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
