"""The operator's commands, run beside the store with its settings rather
than through the gateway: `migrate-db`, `embed-job`, `rebuild`, `scrub`,
`servers`, `move-workspace` and `prepare-models`. The store's modules are
imported when a command runs, so that the client commands do not load them."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from recallatron.progress import Progress

if TYPE_CHECKING:
    from services.store.domain.control import ControlPlane
    from services.store.infrastructure.db import Databases


@contextmanager
def _store(admin_connections: int | None = None) -> Iterator[tuple[Databases, ControlPlane]]:
    """The store's databases, bootstrapped, and its control plane; closed on leaving."""
    from services.store.domain.control import ControlPlane
    from services.store.infrastructure.db import Databases
    from services.store.settings import StoreSettings

    dbs = (
        Databases(StoreSettings())
        if admin_connections is None
        else Databases(StoreSettings(), admin_connections=admin_connections)
    )
    dbs.bootstrap()
    try:
        yield dbs, ControlPlane(dbs)
    finally:
        dbs.close()


def _workspace_id(control: ControlPlane, given: str) -> str:
    """The workspace ``given`` names by slug or id; exits when there is none."""
    found = [w for w in control.all_workspaces() if given in (w, control.workspace(w).slug)]
    if not found:
        sys.exit(f"no workspace {given!r}")
    return found[0]


def cmd_migrate_db(args: argparse.Namespace) -> int:
    """Every workspace database recorded below the current migration level
    (``--all``: every one) and each server's template brought to it,
    ``--parallel`` at once. Each database migrates in its own transactions
    under its own lock and records its level when done, so an interrupted run
    is resumed by running it again: what is done is skipped."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from services.store.infrastructure.migrate import latest_version

    parallel = max(1, args.parallel)
    failed = 0
    with _store(admin_connections=parallel) as (dbs, control):
        everything = control.all_workspace_locations()
        workspaces = everything if args.all else control.below_current()
        for server in {ws.server for ws in everything} | {dbs.default_server}:
            dbs.refresh_template(server)
        with (
            Progress("migrating", len(workspaces), "workspaces") as bar,
            ThreadPoolExecutor(parallel, thread_name_prefix="migrate") as pool,
        ):
            futures = {pool.submit(control.migrate, ws): ws for ws in workspaces}
            for future in as_completed(futures):
                ws = futures[future]
                try:
                    applied = future.result()
                except Exception as exc:  # reported, the others go on
                    failed += 1
                    bar.echo(f"{ws.slug}: failed: {dbs.redact(str(exc))}")
                else:
                    if applied or args.verbose:
                        bar.echo(f"{ws.slug}: {', '.join(applied) if applied else 'up to date'}")
                bar.advance()
    if failed:
        print(f"migrations done, {failed} workspaces failed: run again to retry them")
        return 1
    print(
        f"migrations done: {len(workspaces)} workspaces brought to "
        f"{latest_version('workspace')}, {len(everything) - len(workspaces)} already there"
    )
    return 0


def _job(settings: Any = None) -> Any:
    from services.embedding_job.__main__ import build

    return build(settings)


def cmd_embed_job(args: argparse.Namespace) -> int:
    from services.embedding_job.__main__ import main

    return main()


def cmd_rebuild(args: argparse.Namespace) -> int:
    job = _job()
    workspaces = job.control.all_workspaces()
    if args.workspace:
        workspaces = [w for w in workspaces if job.control.workspace(w).slug == args.workspace]
        if not workspaces:
            sys.exit(f"no workspace {args.workspace!r}")
    for workspace_id in workspaces:
        slug = job.control.workspace(workspace_id).slug
        queued = job.enqueue_rebuild(workspace_id, force=args.force)
        # Marked too: should this command stop, the running job carries on.
        job.control.mark_work(workspace_id)
        print(f"{slug}: {queued} memories queued", flush=True)
        with Progress(f"{slug}: embedding", queued, "memories") as bar:
            # The backlog left; writes meanwhile may keep it above the queued count.
            done = job.drain(workspace_id, lambda left, b=bar, q=queued: b.update(max(0, q - left)))
        dropped = job.drop_stale(workspace_id)
        print(f"{slug}: {done} embedded, {dropped} stale vectors removed", flush=True)
    job.dbs.close()
    return 0


def cmd_scrub(args: argparse.Namespace) -> int:
    from services.store.domain.erasure import scrub

    with _store() as (dbs, control):
        workspace_id = _workspace_id(control, args.workspace)
        report = scrub(dbs, control, workspace_id, lambda msg: print(msg, flush=True))
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(
        f"scrubbed {args.workspace}: {len(report.tables)} tables rewritten, "
        f"WAL cycled {report.wal_cycles} times"
    )
    return 0


def cmd_servers(args: argparse.Namespace) -> int:
    """Named Postgres servers: list them, mark one draining or open again.
    Runs with the store's settings (names only are shown; docs/servers.md)."""
    from recallatron import errors

    with _store() as (_, control):
        try:
            if args.servers_cmd in ("drain", "undrain"):
                control.set_draining(args.name, args.servers_cmd == "drain")
            for s in control.servers():
                marks = [m for m, on in (("default", s.default), ("draining", s.draining)) if on]
                print(
                    f"{s.name}\t{s.workspaces} workspaces"
                    + (f"\t{', '.join(marks)}" if marks else "")
                )
        except errors.DomainError as exc:
            sys.exit(f"error: {exc.message}")
    return 0


def cmd_move_workspace(args: argparse.Namespace) -> int:
    """Moves a live workspace to another named server (docs/servers.md,
    Moving); a rerun after an interruption finishes or rolls back."""
    from recallatron import errors
    from services.store.domain.moving import Mover

    with _store() as (dbs, control):
        # SIGTERM ends the move like Ctrl-C: a move not yet sealed rolls back at
        # once (one past the seal is finished by a rerun).
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try:
            workspace_id = _workspace_id(control, args.workspace)
            mover = Mover(dbs, control, lambda msg: print(msg, flush=True))
            report = mover.move(workspace_id, args.to, keep_source=args.keep_source)
        except errors.DomainError as exc:
            sys.exit(f"error: {exc.message}")
    print(
        f"moved {report.workspace} from {report.source} to {report.target} in "
        f"{report.total_seconds:.1f} s (copy {report.copied_seconds:.1f} s, writes held "
        f"{report.fence_seconds * 1000:.0f} ms)"
        + (f"; resumed from {report.resumed_from}" if report.resumed_from else ""),
        flush=True,
    )
    return 0


def cmd_prepare_models(args: argparse.Namespace) -> int:
    from services.embed import prepare

    return int(prepare.main(args.rest))
