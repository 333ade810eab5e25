"""Exporting a workspace to a portable, versioned archive (docs/export.md).

Everything is read in one snapshot of the workspace database (REPEATABLE
READ, read only) as the server's admin role, so the archive is one moment of
the workspace even while it keeps serving. The members live in the control
plane, outside that snapshot: they are read after it is taken, and the
snapshot decides who of them the moment had (snapshot_members). Each kind of
record goes to its JSON Lines file; the manifest, written last, names the
files with their counts and digests. The files are written in a staging
directory and moved into place at the end, so the directory named holds a
complete archive or none (docs/export.md). An archive holds every member's private memories: its
directory and files are the exporting user's alone (0700, 0600), whatever
the umask."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import psycopg

from recallatron import errors
from services.store.domain import archive_format as fmt
from services.store.domain.archive_history import export_params
from services.store.domain.control import ControlPlane
from services.store.domain.control_records import Workspace
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
# The files whose query takes the members exported (%(members)s).
_BY_MEMBERS = frozenset({"history"})
DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


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


@dataclass(frozen=True)
class ControlMember:
    """A member as the control plane has them, removed or not."""

    id: str
    handle: str
    role: str
    removed: bool


def snapshot_members(
    members: Sequence[ControlMember], removed_here: set[str], still_holding: set[str]
) -> list[dict[str, str]]:
    """The members of the snapshot's moment, from the control plane's
    ``members`` read after it: none whose removal the snapshot holds
    (``removed_here``); one the control plane says is removed only when the
    snapshot still holds what their removal erases or hands over
    (``still_holding``: the removal's workspace step came after the snapshot).
    A removed member is otherwise no member of the archive: their private
    rows stay behind as a left-out member's do (docs/export.md)."""
    return [
        {"id": m.id, "handle": m.handle, "role": m.role}
        for m in members
        if m.id not in removed_here and (not m.removed or m.id in still_holding)
    ]


# An export writes into a staging directory named with this, locked (flock)
# while it runs, and moves the archive into place at its end: one killed
# (SIGKILL, an out-of-memory kill) leaves only that directory, which the next
# export beside it removes once its lock is free.
STAGING = "unfinished-export-"
ARCHIVE_NAMES = frozenset(
    [fmt.file_name(k) for k in fmt.RECORD_FILES] + [fmt.WORKSPACE, fmt.MANIFEST]
)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _remove_moved_up(staging: Path, present: set[str]) -> None:
    """The files an export killed while moving its archive up into the
    directory given (``staging``'s parent) had moved there removed. Its
    manifest, moved last, is still staged and names each file with its
    SHA-256: a file up there is removed only when its name is one the
    manifest names, no longer staged, and its bytes are the ones the
    manifest holds (anything else is no export's to remove)."""
    if fmt.MANIFEST not in present:
        return  # the move had not begun: nothing was moved up
    try:
        files = json.loads((staging / fmt.MANIFEST).read_bytes())["files"]
        named = {str(d["name"]): str(d["sha256"]) for d in files.values()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return  # not a manifest this code wrote: nothing is recognised
    for name, sha256 in named.items():
        path = staging.parent / name
        if name in present or name not in ARCHIVE_NAMES or name == fmt.MANIFEST:
            continue
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink() and _sha256(path) == sha256:
                path.unlink()


def _remove_unfinished(parent: Path, prefix: str, inside: bool = False) -> None:
    """The staging directories under ``parent`` of exports that were killed
    removed: those whose lock is free and which hold nothing but an
    archive's files (anything else there is left as it is). ``inside``: the
    staging directories are within the directory given, so what such an
    export had moved up into it already is removed too (_remove_moved_up)."""
    for path in parent.glob(f"{prefix}*"):
        if path.is_symlink() or not path.is_dir():
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # an export under way
            entries = list(path.iterdir())
            if any(e.name not in ARCHIVE_NAMES or e.is_symlink() for e in entries):
                continue
            if inside:
                _remove_moved_up(path, {e.name for e in entries})
            for entry in entries:
                entry.unlink()
            path.rmdir()
        except OSError:
            continue  # not ours to remove after all: left
        finally:
            os.close(fd)


@dataclass
class Staging:
    """Where an export writes until its archive is complete. ``out`` new:
    a sibling directory renamed to ``out`` at the end (one step on one
    filesystem); ``out`` given empty (a mount point, say): a directory
    within it whose files move up at the end, the manifest last."""

    out: Path
    directory: Path
    inside: bool
    fd: int  # held locked (flock) while the export runs

    def finish(self) -> None:
        """The archive moved into ``out``, never over anything: a file or
        directory someone put there while the export ran is kept, and the
        export refused naming ``out`` (what was moved up goes back to be
        removed with the staging directory)."""
        moved: list[tuple[str, int]] = []
        try:
            if not self.inside:
                _move_new(self.directory, self.out)
                return
            if any(p.name != self.directory.name for p in self.out.iterdir()):
                raise FileExistsError(errno.EEXIST, "not empty")
            names = sorted(p.name for p in self.directory.iterdir())
            for name in sorted(names, key=lambda n: n == fmt.MANIFEST):  # the manifest last
                inode = os.lstat(self.directory / name).st_ino
                _move_new(self.directory / name, self.out / name)
                moved.append((name, inode))
            self.directory.rmdir()
        except OSError as exc:
            self._move_back(moved)
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                raise errors.InvalidArgument(
                    "out", f"{self.out} is no longer empty: name a new or empty directory"
                ) from None
            raise errors.InvalidArgument(
                "out", f"cannot move the archive into {self.out}: {exc.strerror}"
            ) from None

    def _move_back(self, moved: list[tuple[str, int]]) -> None:
        """Files this export had moved up into ``out`` put back into its
        staging directory (only each still the very file it moved)."""
        for name, inode in moved:
            with contextlib.suppress(OSError):
                if os.lstat(self.out / name).st_ino == inode:
                    _move_new(self.out / name, self.directory / name)

    def abandon(self) -> None:
        """What the export wrote removed: the same command runs again, and no
        partial archive is left holding private memories."""
        with contextlib.suppress(OSError):
            for entry in self.directory.iterdir():
                if entry.name in ARCHIVE_NAMES:
                    entry.unlink()
            self.directory.rmdir()

    def release(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


_RENAME_NOREPLACE = 1
_AT_FDCWD = -100
_LIBC = ctypes.CDLL(None, use_errno=True)
_RENAMEAT2 = getattr(_LIBC, "renameat2", None)


def _move_new(src: Path, dst: Path) -> None:
    """``src`` renamed to ``dst`` only while nothing is at ``dst``, in one
    step (a plain rename replaces a file there, or an empty directory):
    renameat2's RENAME_NOREPLACE. On a filesystem without it a file is moved
    by a hard link (which never replaces) and its old name removed, and a
    directory by a plain rename (which replaces at most an empty directory);
    a file that cannot be linked is refused (OSError), not risked."""
    if _RENAMEAT2 is not None:
        names = (os.fsencode(src), os.fsencode(dst))
        if _RENAMEAT2(_AT_FDCWD, names[0], _AT_FDCWD, names[1], _RENAME_NOREPLACE) == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(err, os.strerror(err), str(dst))
    if src.is_dir():
        os.rename(src, dst)  # replaces at most an empty directory: no file is lost
        return
    os.link(src, dst)
    os.unlink(src)


def stage(out: Path) -> Staging:
    """A staging directory for an archive bound for ``out`` (new, or an empty
    directory: refused when it holds anything already), its owner's alone;
    what killed exports left beside it removed first."""
    if out.exists() and not out.is_dir():
        raise errors.InvalidArgument("out", f"{out} exists and is not a directory")
    try:
        inside = out.is_dir()
        if inside:
            prefix, parent = f".{STAGING}", out
            _remove_unfinished(out, prefix, inside=True)
            if any(out.iterdir()):
                raise errors.InvalidArgument(
                    "out", f"{out} is not empty: name a new or empty directory"
                )
            out.chmod(DIRECTORY_MODE)  # a directory given keeps its own mode otherwise
        else:
            prefix, parent = f".{out.name}.{STAGING}", out.parent
            parent.mkdir(parents=True, exist_ok=True)
            _remove_unfinished(parent, prefix)
        while True:
            directory = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            fcntl.flock(fd, fcntl.LOCK_EX)  # new and empty: no other export holds it
            with contextlib.suppress(FileNotFoundError):
                if os.stat(directory).st_ino == os.fstat(fd).st_ino:
                    break
            # Another export's sweep took it before it was locked: a new one.
            os.close(fd)
        directory.chmod(DIRECTORY_MODE)  # mkdtemp's mode is masked by the umask
    except OSError as exc:
        raise errors.InvalidArgument("out", f"cannot create {out}: {exc.strerror}") from None
    return Staging(out, directory, inside, fd)


def _create(path: Path) -> BinaryIO:
    """A new file of the archive, its owner's alone from its first byte."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # the umask may have taken some of it
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


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
        staging = stage(out)
        try:
            report = self._export(ws, staging.directory, vectors, on_total, on_rows, began)
            staging.finish()
        except BaseException:  # a failure, SIGTERM and Ctrl-C too (the CLI makes both this)
            staging.abandon()
            raise
        finally:
            staging.release()
        report.directory = str(out)
        report.seconds = time.monotonic() - began
        return report

    def _export(
        self,
        ws: Workspace,
        out: Path,
        vectors: bool,
        on_total: Callable[[str, int], None],
        on_rows: Callable[[int], None],
        began: float,
    ) -> ExportReport:
        kinds = [k for k in fmt.RECORD_FILES if vectors or k != "vectors"]
        report = ExportReport(ws.id, ws.slug, str(out), vectors)
        files: dict[str, fmt.FileDigest] = {}
        with psycopg.connect(self.dbs.database_url(ws.server, ws.database_name)) as conn:
            conn.execute(q.EXPORT_SNAPSHOT)
            conn.execute(q.UTC_SESSION)
            level_row = conn.execute(q.SCHEMA_LEVEL).fetchone()  # the snapshot is taken
            members = self._members(conn, ws.id)
            params: dict[str, Any] = {"members": [m["id"] for m in members]}
            params.update(export_params())
            # In the order of fmt.RECORD_FILES.
            counted = conn.execute(q.EXPORT_COUNTS, params).fetchone() or ()
            rows = dict(zip(fmt.RECORD_FILES, (int(n) for n in counted), strict=False))
            on_total("exporting", sum(rows.get(k, 0) for k in kinds))
            for kind in kinds:
                files[kind] = self._write(
                    conn, kind, out, on_rows, params if kind in _BY_MEMBERS else None
                )
                report.counts[kind] = files[kind].records
            exported_at = datetime.now(UTC).isoformat()
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

    def _members(self, conn: psycopg.Connection, workspace_id: str) -> list[dict[str, str]]:
        """The members of the moment ``conn``'s snapshot shows. The control
        plane is read after the snapshot was taken, so it knows every member
        the snapshot has rows of; a removal it already holds and the snapshot
        not yet is decided by the snapshot."""
        removed_here = {str(r[0]) for r in conn.execute(q.REMOVED_IN_SNAPSHOT).fetchall()}
        with self.dbs.control_conn() as control:
            known = [
                ControlMember(str(r[0]), r[1], r[2], bool(r[3]))
                for r in control.execute(q.MEMBERS_OF, (workspace_id,)).fetchall()
            ]
        pending = [m.id for m in known if m.removed and m.id not in removed_here]
        holding = (
            {str(r[0]) for r in conn.execute(q.STILL_HOLDING, {"members": pending}).fetchall()}
            if pending
            else set()
        )
        return snapshot_members(known, removed_here, holding)

    @staticmethod
    def _write(
        conn: psycopg.Connection,
        kind: str,
        out: Path,
        on_rows: Callable[[int], None],
        params: dict[str, Any] | None,
    ) -> fmt.FileDigest:
        name = fmt.file_name(kind)
        digest = hashlib.sha256()
        count = 0
        with _create(out / name) as f, conn.cursor(name=f"export_{kind}") as cur:
            cur.itersize = FETCH_ROWS
            cur.execute(QUERIES[kind], params)
            while rows := cur.fetchmany(FETCH_ROWS):
                chunk = b"".join(str(r[0]).encode("utf-8") + b"\n" for r in rows)
                f.write(chunk)
                digest.update(chunk)
                count += len(rows)
                on_rows(len(rows))
        return fmt.FileDigest(name, count, digest.hexdigest())


def _write_json(path: Path, value: Any, records: int) -> fmt.FileDigest:
    data = (json.dumps(value, indent=2, sort_keys=True) + "\n").encode("utf-8")
    with _create(path) as f:
        f.write(data)
    return fmt.FileDigest(path.name, records, hashlib.sha256(data).hexdigest())
