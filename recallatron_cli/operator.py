"""The operator's commands, run beside the store with its settings rather
than through the gateway: `migrate-db`, `embed-job`, `rebuild`, `scrub`,
`servers`, `move-workspace` and `prepare-models`. The store's modules are
imported when a command runs, so that the client commands do not load them.
Before any command that opens the databases (`migrate` of the old store
included) runs, :func:`find_database` settles which server it works on."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

from recallatron import errors
from recallatron.progress import Progress
from recallatron.waits import completed
from recallatron_cli import common, migrate_room

if TYPE_CHECKING:
    from services.store.domain.control import ControlPlane
    from services.store.domain.control_records import Workspace
    from services.store.infrastructure.db import Databases
    from services.store.settings import StoreSettings

# The commands that open the store's databases themselves, and so need the
# default server's URL (main() calls find_database for them).
DATABASE_COMMANDS = frozenset(
    {
        "migrate-db",
        "embed-job",
        "rebuild",
        "scrub",
        "servers",
        "move-workspace",
        "migrate",
        "calibrate-floor",
    }
)
# Bad or missing settings, as argparse reports bad arguments.
EXIT_SETTINGS = 2


def _fail(message: str) -> NoReturn:
    """One line on stderr and exit 2: what to set or do, never a traceback."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(EXIT_SETTINGS)


def _default_server_named(settings: StoreSettings) -> bool:
    """True when the settings name the default server themselves (the URL,
    or a server list holding its name), or name servers so badly that the
    check in find_database must say how."""
    from services.store.infrastructure.servers import ServerConfigError, parse_pairs, read_dir

    if settings.database_url:
        return True
    try:
        named = parse_pairs(settings.postgres_servers) | read_dir(settings.postgres_servers_dir)
    except ServerConfigError:
        return True
    return settings.default_server in named


def _local_stack() -> dict[str, str]:
    """The settings for the local stack's running embedded server (see
    recallatron_devkit.stack.beside_env), checked to answer; exits with
    what to do when there is none."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from recallatron_devkit.stack import beside_env, has_embedded_server

    state = common.state_dir()
    found = beside_env(state)
    if found is None and has_embedded_server(state):
        _fail(
            f"the local stack (state in {state}) is not running: start it with "
            "`recallatron up` (`make run`) and run this again, or set "
            "RECALLATRON_DATABASE_URL to another server's admin URL"
        )
    if found is None:
        _fail(
            "no Postgres server: set RECALLATRON_DATABASE_URL to the default server's "
            "admin URL, or start the local stack with `recallatron up` "
            f"(no local stack in {state}; RECALLATRON_STATE_DIR names another)"
        )
    url = found["RECALLATRON_DATABASE_URL"]
    # Where, never how: the URL names the password file, not the password.
    params = conninfo_to_dict(url)
    address = f"{params.get('host')}:{params.get('port')}"
    try:
        # A pid file can outlive its server (a crash, its pid reused).
        psycopg.connect(url, connect_timeout=10).close()
    except psycopg.OperationalError as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        _fail(
            f"the local stack's Postgres on {address} (state in {state}) does not answer: "
            f"{reason}; restart it with `recallatron up`"
        )
    print(f"using the local stack's Postgres on {address} (state in {state})", file=sys.stderr)
    return found


def find_database() -> None:
    """Settles the default Postgres server before a command opens it; every
    command of DATABASE_COMMANDS comes through here (main). An explicit
    RECALLATRON_DATABASE_URL (or a server list naming the default server)
    always wins; else the embedded server of the local stack in the state
    directory, while `recallatron up` runs it. A stopped stack is not
    started: its server lives and dies with `up`, which runs the services
    beside it. Otherwise exits 2 with one line saying what to set.

    The command is told through this process's environment, where the
    store's settings (and the embedding job's) read theirs."""
    from services.store.infrastructure.servers import ServerConfigError, server_map
    from services.store.settings import StoreSettings

    settings = StoreSettings()
    if not _default_server_named(settings):
        for name, value in _local_stack().items():
            # What the user set by hand stays (a key, the embed service's address).
            if not os.environ.get(name):
                os.environ[name] = value
        settings = StoreSettings()
    try:
        server_map(
            settings.database_url,
            settings.default_server,
            settings.postgres_servers,
            settings.postgres_servers_dir,
        )
    except ServerConfigError as exc:
        _fail(str(exc))


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


def workspace_id_or_none(control: ControlPlane, given: str) -> str | None:
    """The workspace ``given`` names by slug or id, or None when there is none."""
    try:
        return control.workspace_named(given).id
    except (errors.NotFound, errors.InvalidArgument):
        return None


def _named_workspace(given: str | None) -> str | None:
    """``--workspace`` as given (None: not given). Empty, it is refused
    rather than taken for absent: an unset shell variable must not turn a
    command on one workspace into one on every workspace."""
    if given is not None and not given.strip():
        raise common.invalid("workspace", "--workspace", "empty: give a workspace's slug or id")
    return given


def _workspace_id(control: ControlPlane, given: str) -> str:
    """The workspace ``given`` names by slug or id; NotFound when there is none."""
    found = workspace_id_or_none(control, given)
    if found is None:
        raise errors.NotFound(f"no workspace {given!r}")
    return found


def cmd_migrate_db(args: argparse.Namespace) -> int:
    """Every workspace database recorded below the current migration level
    (``--all``: every one) and each server's template brought to it,
    ``--parallel`` at once. Each database migrates in its own transactions
    under its own lock and records its level when done, so an interrupted run
    is resumed by running it again: what is done is skipped."""
    from concurrent.futures import ThreadPoolExecutor

    from services.store.infrastructure.migrate import latest_version

    parallel = migrate_room.wanted(args.parallel)
    failed = done = gone = 0
    with _store(admin_connections=parallel) as (dbs, control):
        try:
            everything = control.all_workspace_locations()
            workspaces = everything if args.all else control.below_current()
            servers = sorted({ws.server for ws in everything} | {dbs.default_server})
            migrate_room.check(dbs, parallel, servers)
            for server in servers:
                try:
                    dbs.refresh_template(server)
                except Exception as exc:  # that server's workspaces fail below; the others go on
                    failed += 1
                    _failure(f"server {server}: template not refreshed: {dbs.redact(str(exc))}")
            pool = ThreadPoolExecutor(parallel, thread_name_prefix="migrate")
            with Progress("migrating", len(workspaces), "workspaces") as bar:
                futures = {
                    pool.submit(_migrate_where_it_is, dbs, control, ws): ws for ws in workspaces
                }
                for future in completed(futures):
                    ws = futures[future]
                    try:
                        applied = future.result()
                    except Exception as exc:  # reported, the others go on
                        failed += 1
                        _failure(f"{ws.slug}: failed: {dbs.redact(str(exc))}")
                    else:
                        done += 1
                        if applied is None:
                            gone += 1
                            bar.echo(f"{ws.slug}: deleted since migrate-db started; passed over")
                        elif applied or args.verbose:
                            bar.echo(
                                f"{ws.slug}: {', '.join(applied) if applied else 'up to date'}"
                            )
                    bar.advance()
            pool.shutdown()
        except KeyboardInterrupt:
            code = common.stopped(
                f"migrate-db stopped: {done} workspaces done; run it again to migrate the "
                "rest (what is done is skipped)"
            )
            # Now, not after the migrations under way (a thread cannot be
            # stopped, and the interpreter's exit waits for the pool's): each
            # migrates in its own transactions, which its server rolls back.
            os._exit(code)
    if failed:
        _failure(
            f"migrations done, {failed} failed (workspaces or templates): run again to retry them"
        )
        return 1
    print(
        f"migrations done: {len(workspaces) - gone} workspaces brought to "
        f"{latest_version('workspace')}, {len(everything) - len(workspaces)} already there"
        + (f", {gone} deleted meanwhile" if gone else "")
    )
    return 0


def _migrate_where_it_is(dbs: Databases, control: ControlPlane, ws: Workspace) -> list[str] | None:
    """``ws`` migrated (the migrations applied), where it is now: listed
    before a deletion or a move, its database may be gone from where the
    listing said. None when the workspace was deleted (after any deletion
    under way has ended); moved, it is migrated on its new server."""
    from services.embedding_job.deletions import deleted_meanwhile

    try:
        return control.migrate(ws)
    except Exception:
        if deleted_meanwhile(dbs, control, ws.id):
            return None
        now = control.workspace(ws.id, fresh=True)
        if (now.server, now.database_name) == (ws.server, ws.database_name):
            raise
    return control.migrate(now)


def _failure(line: str) -> None:
    """A failure the command reports and goes on from: on stderr, so that
    stdout holds its answer alone (a script reads what was migrated there).
    Above a progress bar, which takes over stderr while it runs."""
    print(line, file=sys.stderr, flush=True)


def _job(settings: Any = None) -> Any:
    """The embedding job for a one-shot command: an unreachable database ends
    the command (main says so in one line) instead of being waited for."""
    from services.embedding_job.__main__ import build

    return build(settings, wait=False)


def cmd_embed_job(args: argparse.Namespace) -> int:
    from services.embedding_job.__main__ import main

    return main()


def cmd_rebuild(args: argparse.Namespace) -> int:
    from services.embedding_job.deletions import deleted_meanwhile

    named = _named_workspace(args.workspace)
    job = _job()
    # One workspace by slug or id (one lookup), else every one.
    workspaces = (
        [_workspace_id(job.control, named)] if named is not None else job.control.all_workspaces()
    )
    for workspace_id in workspaces:
        try:
            _rebuild_one(job, workspace_id, args.force)
        except Exception as exc:
            # Listed, then deleted (before its turn, or its database dropped
            # under the rebuild): nothing of it to rebuild; the others go on.
            if args.workspace or not (
                isinstance(exc, errors.NotFound)
                or deleted_meanwhile(job.dbs, job.control, workspace_id)
            ):
                raise
            print(f"{workspace_id}: deleted since the rebuild started; passed over", flush=True)
    job.dbs.close()
    return 0


def _rebuild_one(job: Any, workspace_id: str, force: bool) -> None:
    slug = job.control.workspace(workspace_id, fresh=True).slug
    queued = job.enqueue_rebuild(workspace_id, force=force)
    # Marked too: should this command stop, the running job carries on.
    job.control.mark_work(workspace_id)
    print(f"{slug}: {queued} memories queued", flush=True)
    with Progress(f"{slug}: embedding", queued, "memories") as bar:
        # The backlog left; writes meanwhile may keep it above the queued count.
        done = job.drain(workspace_id, lambda left, b=bar, q=queued: b.update(max(0, q - left)))
    dropped = job.drop_stale(workspace_id)
    print(f"{slug}: {done} embedded, {dropped} stale vectors removed", flush=True)


def cmd_scrub(args: argparse.Namespace) -> int:
    import json

    from services.store.domain.erasure import scrub, scrub_server

    # With --json, stdout holds the report alone; the steps go to stderr.
    steps = sys.stderr if args.json else sys.stdout

    def step(msg: str) -> None:
        print(msg, file=steps, flush=True)

    if args.server:
        # A refusal (an unknown server) ends the command through main().
        with _store() as (dbs, _control):
            report = scrub_server(dbs, args.server, step)
        target = {"server": args.server}
    else:
        with _store() as (dbs, control):
            workspace_id = _workspace_id(control, args.workspace)
            report = scrub(dbs, control, workspace_id, step)
        target = {"workspace": args.workspace}
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(
            json.dumps(
                {
                    **target,
                    "tables_rewritten": report.tables,
                    "wal_cycles": report.wal_cycles,
                    "warnings": report.warnings,
                }
            )
        )
    elif args.server:
        print(f"scrubbed server {args.server}: WAL cycled {report.wal_cycles} times")
    else:
        print(
            f"scrubbed {args.workspace}: {len(report.tables)} tables rewritten, "
            f"WAL cycled {report.wal_cycles} times"
        )
    return 0


def cmd_servers(args: argparse.Namespace) -> int:
    """Named Postgres servers: list them (each asked whether it answers
    now), mark one draining or open again. Runs with the store's settings
    (names only are shown; why a server does not answer goes to stderr,
    redacted; docs/servers.md)."""
    from recallatron_cli.servers_list import print_servers

    if args.servers_cmd in ("kept", "drop-kept"):
        return _kept_copies(args)
    # An admin connection for each server at once: none waits on another's probe.
    with _store(admin_connections=len(_server_names())) as (dbs, control):
        if args.servers_cmd in ("drain", "undrain"):
            control.set_draining(args.name, args.servers_cmd == "drain")
        print_servers(dbs, control.servers())
    return 0


def _server_names() -> list[str]:
    """The configured servers' names (find_database checked the settings)."""
    from services.store.infrastructure.servers import server_map
    from services.store.settings import StoreSettings

    settings = StoreSettings()
    return list(
        server_map(
            settings.database_url,
            settings.default_server,
            settings.postgres_servers,
            settings.postgres_servers_dir,
        ).names
    )


def _kept_copies(args: argparse.Namespace) -> int:
    """Lists the copies moves kept, or drops those of deleted workspaces (a
    deletion's whose server did not answer) or of one live workspace; 1 when
    a copy could not be dropped (docs/servers.md, Moving)."""
    from services.store.domain.kept_copies import KeptCopies

    named = _named_workspace(getattr(args, "workspace", None))
    with _store() as (dbs, control):
        copies = KeptCopies(dbs)
        if args.servers_cmd == "kept":
            for c in copies.listed():
                owner = c.workspace_slug or f"deleted workspace {c.workspace_id}"
                print(f"{c.server}\t{c.database}\t{owner}\tkept {c.kept_at.isoformat()}")
            return 0
        if named is not None:
            chosen = copies.listed(_workspace_id(control, named))
        else:
            chosen = copies.listed(deleted_only=True)
        left = copies.drop(chosen)
    for c in chosen:
        if c not in [n.copy for n in left]:
            print(f"dropped {c}")
    for n in left:
        print(f"left {n.copy}: {n.why}", file=sys.stderr)
    return 1 if left else 0


def cmd_move_workspace(args: argparse.Namespace) -> int:
    """Moves a live workspace to another named server (docs/servers.md,
    Moving); a rerun after an interruption finishes or rolls back."""
    from services.store.domain.moving import Mover

    with _store() as (dbs, control):
        workspace_id = _workspace_id(control, args.workspace)
        mover = Mover(dbs, control, lambda msg: print(msg, flush=True))
        try:
            report = mover.move(workspace_id, args.to, keep_source=args.keep_source)
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM (main): a move not yet sealed rolls back at
            # once, one past the seal is finished by a rerun (rolled back
            # instead when its target was drained meanwhile).
            return common.stopped(
                "move-workspace stopped (its last step above); run it again to finish a "
                "move past its seal (rolled back instead if its target was drained "
                "meanwhile), or to move anew one rolled back"
            )
    print(
        f"moved {report.workspace} from {report.source} to {report.target} in "
        f"{report.total_seconds:.1f} s (copy {report.copied_seconds:.1f} s, writes held "
        f"{report.fence_seconds * 1000:.0f} ms)"
        + (f"; resumed from {report.resumed_from}" if report.resumed_from else ""),
        flush=True,
    )
    return 0
