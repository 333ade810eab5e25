"""Exporting a workspace to a portable, versioned archive (docs/export.md).

Everything is read in one snapshot of the workspace database (REPEATABLE
READ, read only) as the server's admin role, so the archive is one moment of
the workspace even while it keeps serving. Each kind of record goes to its
JSON Lines file; the manifest, written last, names the files with their
counts and digests, so a directory without one is an unfinished export."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from recallatron import errors
from services.store.domain import archive_format as fmt
from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import Databases
from services.store.sql import archive_queries as q

# Which query fills which file.
QUERIES: dict[str, str] = {
    "episodes": q.EXPORT_EPISODES,
    "entities": q.EXPORT_ENTITIES,
    "memories": q.EXPORT_MEMORIES,
    "revisions": q.EXPORT_REVISIONS,
    "links": q.EXPORT_LINKS,
    "mentions": q.EXPORT_MENTIONS,
    "aliases": q.EXPORT_ALIASES,
    "attribute_claims": q.EXPORT_ATTRIBUTES,
    "relation_claims": q.EXPORT_RELATIONS,
    "merges": q.EXPORT_MERGES,
    "pairs_apart": q.EXPORT_PAIRS_APART,
    "dismissed_pairs": q.EXPORT_DISMISSED_PAIRS,
    "history": q.EXPORT_HISTORY,
    "vectors": q.EXPORT_VECTORS,
}
FETCH_ROWS = 2000


@dataclass
class ExportReport:
    workspace_id: str
    slug: str
    directory: str
    vectors: bool
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace_id": self.workspace_id,
            "slug": self.slug,
            "directory": self.directory,
            "format_version": fmt.FORMAT_VERSION,
            "vectors": self.vectors,
            "counts": self.counts,
            "seconds": round(self.seconds, 3),
        }


def prepare_directory(out: Path) -> None:
    """``out`` made, or refused when it holds anything already."""
    if out.exists() and not out.is_dir():
        raise errors.InvalidArgument("out", f"{out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        raise errors.InvalidArgument("out", f"{out} is not empty: name a new or empty directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise errors.InvalidArgument("out", f"cannot create {out}: {exc.strerror}") from None


class Exporter:
    def __init__(self, dbs: Databases, control: ControlPlane) -> None:
        self.dbs = dbs
        self.control = control

    def export(
        self,
        workspace_id: str,
        out: Path,
        vectors: bool = False,
        on_total: Callable[[str, int], None] = lambda _phase, _n: None,
        on_rows: Callable[[int], None] = lambda _n: None,
    ) -> ExportReport:
        began = time.monotonic()
        ws = self.control.workspace(workspace_id)
        prepare_directory(out)
        kinds = [k for k in fmt.RECORD_FILES if vectors or k != "vectors"]
        report = ExportReport(ws.id, ws.slug, str(out), vectors)
        files: dict[str, fmt.FileDigest] = {}
        with psycopg.connect(self.dbs.database_url(ws.server, ws.database_name)) as conn:
            conn.execute(q.EXPORT_SNAPSHOT)
            conn.execute(q.UTC_SESSION)
            level_row = conn.execute(q.SCHEMA_LEVEL).fetchone()
            # In the order of fmt.RECORD_FILES.
            counted = conn.execute(q.EXPORT_COUNTS).fetchone() or ()
            rows = dict(zip(fmt.RECORD_FILES, (int(n) for n in counted), strict=False))
            on_total("exporting", sum(rows.get(k, 0) for k in kinds))
            for kind in kinds:
                files[kind] = self._write(conn, kind, out, on_rows)
                report.counts[kind] = files[kind].records
            exported_at = datetime.now(UTC).isoformat()
        with self.dbs.control_conn() as control:
            members = [
                {"id": r[0], "handle": r[1], "role": r[2]}
                for r in control.execute(q.MEMBERS_OF, (ws.id,)).fetchall()
            ]
        workspace = {"settings": ws.settings.to_json(), "members": members}
        files[fmt.WORKSPACE] = _write_json(out / fmt.WORKSPACE, workspace, records=len(members))
        report.counts["members"] = len(members)
        manifest = {
            "format": fmt.FORMAT_NAME,
            "format_version": fmt.FORMAT_VERSION,
            "exported_at": exported_at,
            "source": {
                "workspace_id": ws.id,
                "slug": ws.slug,
                "schema_level": str(level_row[0]) if level_row and level_row[0] else "",
            },
            "vectors_included": vectors,
            "files": {k: d.to_json() for k, d in files.items()},
        }
        fmt.check("manifest", manifest, fmt.MANIFEST)
        _write_json(out / fmt.MANIFEST, manifest, records=1)
        report.seconds = time.monotonic() - began
        return report

    @staticmethod
    def _write(
        conn: psycopg.Connection, kind: str, out: Path, on_rows: Callable[[int], None]
    ) -> fmt.FileDigest:
        name = fmt.file_name(kind)
        digest = hashlib.sha256()
        count = 0
        with (out / name).open("wb") as f, conn.cursor(name=f"export_{kind}") as cur:
            cur.itersize = FETCH_ROWS
            cur.execute(QUERIES[kind])
            while rows := cur.fetchmany(FETCH_ROWS):
                chunk = b"".join(str(r[0]).encode("utf-8") + b"\n" for r in rows)
                f.write(chunk)
                digest.update(chunk)
                count += len(rows)
                on_rows(len(rows))
        return fmt.FileDigest(name, count, digest.hexdigest())


def _write_json(path: Path, value: Any, records: int) -> fmt.FileDigest:
    data = (json.dumps(value, indent=2, sort_keys=True) + "\n").encode("utf-8")
    path.write_bytes(data)
    return fmt.FileDigest(path.name, records, hashlib.sha256(data).hexdigest())
