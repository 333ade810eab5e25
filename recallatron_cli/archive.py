"""`recallatron export` and `recallatron import`: a workspace to a portable,
versioned archive and back as a new workspace (docs/export.md). Operator
commands: they run beside the store with its settings and work on the
databases directly, finding the local stack's server as the others do.

    recallatron export --workspace W --out DIR [--vectors] [--json]
    recallatron import DIR --as SLUG [--server NAME] [--members FILE] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from recallatron.progress import Progress
from recallatron_cli import common, operator

if TYPE_CHECKING:
    from services.store.domain.archive_export import ExportReport
    from services.store.domain.archive_import import ImportReport


class _Report(Protocol):
    """What an export or an import reports when it is done."""

    def to_json(self) -> dict[str, Any]: ...


_R = TypeVar("_R", bound=_Report)


def add_parser(sub: Any) -> None:
    ex = sub.add_parser(
        "export",
        help="write a workspace's portable, versioned archive to a directory (docs/export.md)",
    )
    ex.add_argument("--workspace", required=True, help="slug or id")
    ex.add_argument("--out", required=True, help="a new or empty directory")
    ex.add_argument(
        "--vectors",
        action="store_true",
        help="include the embeddings with their model stamp (else the copy embeds again)",
    )
    ex.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    ex.set_defaults(func=cmd_export)
    im = sub.add_parser(
        "import", help="create a new workspace from an archive (docs/export.md); prints its id"
    )
    im.add_argument("archive", help="the directory `recallatron export` wrote")
    im.add_argument("--as", dest="slug", required=True, help="the new workspace's slug")
    im.add_argument("--server", default="", help="the configured Postgres server's name")
    im.add_argument(
        "--members",
        help="JSON {members: [{source, handle?, role?}]}: the source members the copy has "
        "(by handle or id), at least one an owner; default: every one, as they were",
    )
    im.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    im.set_defaults(func=cmd_import)


class Phases:
    """One progress bar per phase of the work, each opened when the work
    says how many rows it has (so a refusal before any work shows none)."""

    def __init__(self) -> None:
        self.bar: Progress | None = None

    def start(self, phase: str, total: int) -> None:
        self.close()
        self.bar = Progress(phase, total=total, unit="rows")

    def advance(self, rows: int) -> None:
        if self.bar is not None:
            self.bar.advance(rows)

    def close(self, stopped: bool = False) -> None:
        if self.bar is not None:
            self.bar.close(stopped=stopped)
            self.bar = None


def _error(message: str, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"error": message}))
    print(f"error: {message}", file=sys.stderr)
    return 1


def _run(
    what: str,
    dbs: Any,
    as_json: bool,
    work: Callable[[Phases], _R],
    say: Callable[[_R], None],
) -> int:
    """Runs ``work``, its phases shown as progress bars, and shows its report:
    as JSON, or as ``say`` puts it. For a refused or failed export or import,
    1 after one line: a domain error's own message, else the database's or the
    file system's, its URL redacted."""
    import psycopg

    from recallatron import errors

    bar = Phases()
    try:
        report = work(bar)
    except KeyboardInterrupt:
        bar.close(stopped=True)
        # The work took back what it had made before this came up.
        undone = "nothing of it is kept" if what == "import" else "what it wrote is removed"
        return common.stopped(f"{what} stopped: {undone}; run it again")
    except (errors.DomainError, psycopg.Error, OSError) as exc:
        bar.close(stopped=True)
        if isinstance(exc, errors.DomainError):
            return _error(exc.message, as_json)
        return _error(f"{what} failed: {dbs.redact(str(exc))}", as_json)
    finally:
        bar.close()
    if as_json:
        print(json.dumps(report.to_json()))
    else:
        say(report)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from services.store.domain.archive_export import Exporter

    operator.find_database()
    with operator._store() as (dbs, control):
        workspace_id = operator.workspace_id_or_none(control, args.workspace)
        if workspace_id is None:
            return _error(f"workspace: no workspace {args.workspace!r}", args.json)
        return _run(
            "export",
            dbs,
            args.json,
            lambda bar: Exporter(dbs, control).export(
                workspace_id,
                Path(args.out),
                vectors=args.vectors,
                on_total=bar.start,
                on_rows=bar.advance,
            ),
            _say_exported,
        )


def _say_exported(report: ExportReport) -> None:
    counts = ", ".join(f"{n} {k}" for k, n in report.counts.items() if n)
    print(
        f"exported {report.slug} to {report.directory} in {report.seconds:.1f} s: "
        f"{counts or 'nothing'}"
    )


def cmd_import(args: argparse.Namespace) -> int:
    from services.store.domain.archive_import import Importer

    operator.find_database()
    with operator._store() as (dbs, control):
        # On a failure the workspace made for it is gone again (docs/export.md).
        return _run(
            "import",
            dbs,
            args.json,
            lambda bar: Importer(dbs, control).import_archive(
                Path(args.archive),
                args.slug,
                server=args.server,
                members_file=Path(args.members) if args.members else None,
                on_total=bar.start,
                on_rows=bar.advance,
            ),
            _say_imported,
        )


def _say_imported(report: ImportReport) -> None:
    print(report.workspace_id)
    if report.removed_unfinished:
        print(
            f"removed first: workspace {report.removed_unfinished}, left by an import of "
            f"{report.slug} that did not end (its process was killed)",
            file=sys.stderr,
        )
    for m in report.members:
        print(f"member {m['handle']} ({m['role']}): {m['id']}", file=sys.stderr)
    left = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in report.left_out.items() if n)
    print(
        f"imported as {report.slug} on {report.server} in {report.seconds:.1f} s"
        + (f"; not imported (no member of the copy may see them): {left}" if left else "")
        + (
            f"; {report.queued_for_embedding} memories queued for embedding"
            if report.queued_for_embedding
            else ""
        ),
        file=sys.stderr,
    )
    if report.times_ahead:
        files = ", ".join(f"{n} {k}" for k, n in report.times_ahead.items())
        print(
            f"{sum(report.times_ahead.values())} records hold a time later than this host's "
            f"clock ({files}): copied as the source held them (its clock ran ahead?)",
            file=sys.stderr,
        )
