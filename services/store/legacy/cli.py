"""`recallatron migrate`: the old store into a workspace, against the
database directly (like `recallatron rebuild`; RECALLATRON_DATABASE_URL
names the Postgres server)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.store.legacy.plan import DEFAULT_BATCH_SIZE
from services.store.legacy.report import Report

if TYPE_CHECKING:
    from services.store.legacy.importer import BatchDone

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class Interrupted(Exception):
    """Stopped by a signal: committed batches stay, the report says so."""


class _Stop:
    """The first SIGTERM lets the batch in flight commit and stops after it;
    a second one stops at once (the batch in flight rolls back)."""

    requested = False

    @classmethod
    def on_signal(cls, *_: object) -> None:
        if cls.requested:
            raise Interrupted
        cls.requested = True


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "migrate",
        help="import the old store (SQLite + graph.jsonl) into a workspace",
        description=(
            "Turns become owner-only history, confirmed memory items become memories of "
            "origin migrated, memory-to-entity edges become mentions. Safe to rerun: what "
            "is there is left alone. See docs/migration.md."
        ),
    )
    p.add_argument("--sqlite", type=Path, required=True, help="the old store's SQLite file")
    p.add_argument("--graph", type=Path, required=True, help="the old store's graph.jsonl")
    p.add_argument("--workspace", required=True, help="workspace slug or id")
    p.add_argument("--owner", required=True, help="handle or id of the workspace owner")
    p.add_argument("--dry-run", action="store_true", help="read and count, write nothing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        help="rows per transaction (default %(default)s)",
    )
    p.set_defaults(func=cmd_migrate)


def _progress(done: BatchDone) -> None:
    # stderr, so that --json output stays parseable.
    state = "checked (dry run)" if done.dry_run else "committed"
    print(
        f"batch {done.number} {state}: {done.rows} {done.source.replace('_', ' ')}s read, "
        f"{done.imported} new",
        file=sys.stderr,
        flush=True,
    )
    if _Stop.requested:
        raise Interrupted


def cmd_migrate(args: argparse.Namespace) -> int:
    # Imported here: the database stack is not needed by the other commands.
    from recallatron import errors
    from services.store.control import ControlPlane
    from services.store.db import Databases
    from services.store.legacy.importer import Importer
    from services.store.legacy.oldstore import OldStoreError
    from services.store.settings import StoreSettings

    report = Report()
    try:
        dbs = Databases(StoreSettings())
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    code = 0
    _Stop.requested = False
    previous = signal.signal(signal.SIGTERM, _Stop.on_signal)
    try:
        dbs.bootstrap()
        importer = Importer(dbs, ControlPlane(dbs), args.batch_size, on_batch=_progress)
        importer.run(
            args.sqlite, args.graph, args.workspace, args.owner, args.dry_run, report=report
        )
    except (errors.DomainError, OldStoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (KeyboardInterrupt, Interrupted):
        print("interrupted: committed batches stay; rerun to finish", file=sys.stderr)
        code = EXIT_INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)
        dbs.close()
    print(json.dumps(report.to_json(), indent=2) if args.json else report.to_text(), flush=True)
    return code
