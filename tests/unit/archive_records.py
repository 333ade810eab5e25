"""Records and a written archive for the archive's tests without a database
(tests/unit/test_archive*.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.store.domain import archive_format as fmt

ADA = "00000000-0000-4000-8000-00000000000a"
BOB = "00000000-0000-4000-8000-00000000000b"
T = "2026-01-02T03:04:05.123456+00:00"


def uid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def memory(n: int, audience: str | None = None, **more: Any) -> dict[str, Any]:
    return {
        "id": uid(n),
        "kind": "note",
        "title": f"title {n}",
        "body": f"body {n}",
        "confidence": 1.0,
        "origin": "told",
        "revision": 1,
        "superseded_by": None,
        "forgotten_at": None,
        "forgotten_by": None,
        "audience_member": audience,
        "purposes": ["assist"],
        "created_by": audience or ADA,
        "created_at": T,
        "updated_at": T,
        "episode_id": None,
        **more,
    }


def write_archive(directory: Path, records: dict[str, list[dict[str, Any]]]) -> None:
    directory.mkdir()
    files: dict[str, Any] = {}
    for kind in fmt.RECORD_FILES:
        rows = records.get(kind, [])
        path = directory / fmt.file_name(kind)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        files[kind] = {"name": path.name, "records": len(rows), "sha256": fmt.sha256_of(path)}
    workspace = {
        "settings": {"dense_floor": 0.3},
        "members": [
            {"id": ADA, "handle": "ada", "role": "owner"},
            {"id": BOB, "handle": "bob", "role": "member"},
        ],
    }
    (directory / fmt.WORKSPACE).write_text(json.dumps(workspace))
    files[fmt.WORKSPACE] = {
        "name": fmt.WORKSPACE,
        "records": 2,
        "sha256": fmt.sha256_of(directory / fmt.WORKSPACE),
    }
    manifest = {
        "format": fmt.FORMAT_NAME,
        "format_version": fmt.FORMAT_VERSION,
        "exported_at": T,
        "source": {"workspace_id": uid(999), "slug": "src", "schema_level": "0014"},
        "vectors_included": False,
        "files": files,
    }
    (directory / fmt.MANIFEST).write_text(json.dumps(manifest))


def pad_to(path: Path, size: int) -> None:
    """``path``'s JSON followed by spaces up to ``size`` bytes (still JSON)."""
    data = path.read_bytes().rstrip()
    path.write_bytes(data + b" " * (size - len(data)))


def fix_digest(directory: Path, kind: str) -> None:
    name = kind if kind == fmt.WORKSPACE else fmt.file_name(kind)
    manifest = json.loads((directory / fmt.MANIFEST).read_text())
    manifest["files"][kind]["sha256"] = fmt.sha256_of(directory / name)
    (directory / fmt.MANIFEST).write_text(json.dumps(manifest))
