"""`recallatron migrate`: the old store into a workspace, against the
database directly (like `recallatron rebuild`; RECALLATRON_DATABASE_URL
names the Postgres server)."""

from __future__ import annotations

import argparse
import json
import signal
import sqlite3
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recallatron.progress import Progress
from services.store.legacy.plan import DEFAULT_BATCH_SIZE
from services.store.legacy.report import Report

if TYPE_CHECKING:
    from services.store.legacy.floor_check import Embedders
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


def add_parser(sub: Any, floor_embed: Callable[[], Embedders] | None = None) -> None:
    """``floor_embed`` makes the embedders of the report's floor section, of
    memories and of queries as recall embeds them (the command line brings
    the embed service's client; without it the section says it was not
    checked)."""
    p = sub.add_parser(
        "migrate",
        help="import the old store (SQLite + graph.jsonl) into a workspace",
        description=(
            "Turns become owner-only history, confirmed memory items become memories of "
            "origin migrated, memory-to-entity edges become mentions; each entity record "
            "becomes a memory stating its properties and edges as graph claims, its "
            "supersede patch a supersession. Safe to rerun: what is there is left alone. "
            "See docs/migration.md."
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
    p.add_argument(
        "--no-floor-check",
        action="store_true",
        help="leave out the report's dense-floor section (it embeds the migrated memories)",
    )
    p.set_defaults(func=cmd_migrate, floor_embed=floor_embed)


def turn_count(path: Path) -> int | None:
    """The old store's turns, for the progress bar (None if unreadable: the
    importer then says what is wrong with the file)."""
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT count(*) FROM turns").fetchone()[0])
    except sqlite3.Error:
        return None


class _Shown:
    """Progress on stderr (so that --json output stays parseable), one bar
    per source: turns (their count known), then entity records, then memory
    items."""

    def __init__(self, turns: int | None) -> None:
        self.turns = turns
        self.bar: Progress | None = None
        self.source = ""

    def __call__(self, done: BatchDone) -> None:
        if done.source != self.source:
            self.close()
            self.source = done.source
            total = self.turns if done.source == "turn" else None
            verb = "checking" if done.dry_run else "importing"
            self.bar = Progress(f"{verb} {done.source.replace('_', ' ')}s", total, "rows")
        assert self.bar is not None
        self.bar.advance(done.rows)
        if _Stop.requested:
            raise Interrupted

    def close(self, stopped: bool = False) -> None:
        if self.bar is not None:
            self.bar.close(stopped)
            self.bar = None


def cmd_migrate(args: argparse.Namespace) -> int:
    # Imported here: the database stack is not needed by the other commands.
    from recallatron import errors
    from services.store.domain.control import ControlPlane
    from services.store.infrastructure.db import Databases
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
    shown = _Shown(turn_count(args.sqlite))
    previous = signal.signal(signal.SIGTERM, _Stop.on_signal)
    try:
        dbs.bootstrap()
        importer = Importer(dbs, ControlPlane(dbs), args.batch_size, on_batch=shown)
        importer.run(
            args.sqlite, args.graph, args.workspace, args.owner, args.dry_run, report=report
        )
        if report.complete and not args.dry_run and not args.no_floor_check and args.floor_embed:
            from services.store.legacy.floor_check import migrated_floor
            from services.store.legacy.importer import resolve_target

            target = resolve_target(dbs, importer.control, args.workspace, args.owner)
            report.floor = migrated_floor(
                dbs, importer.control, target.workspace_id, args.floor_embed
            )
    except (errors.DomainError, OldStoreError) as exc:
        shown.close(stopped=True)
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (KeyboardInterrupt, Interrupted):
        shown.close(stopped=True)
        print("interrupted: committed batches stay; rerun to finish", file=sys.stderr)
        code = EXIT_INTERRUPTED
    finally:
        shown.close()
        signal.signal(signal.SIGTERM, previous)
        dbs.close()
    print(json.dumps(report.to_json(), indent=2) if args.json else report.to_text(), flush=True)
    return code
