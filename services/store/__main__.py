"""`python -m services.store`: the store service."""

from __future__ import annotations

import logging
import sys
import threading

import psycopg

from recallatron import tracing
from recallatron.grpcserver import Server, add_methods
from recallatron.logs import configure_logging
from recallatron.v1 import store_pb2, tools_pb2, tools_pb2_grpc
from services.store.api.server import StoreServicer
from services.store.domain.control import ControlPlane
from services.store.domain.import_claims import sweep_unfinished_imports
from services.store.domain.memories import MemoryStore
from services.store.domain.recall import RecallQueries
from services.store.domain.revocations import RevocationFeed
from services.store.infrastructure import pool_metrics
from services.store.infrastructure.db import Databases
from services.store.infrastructure.follow import DeletionFollower, MoveFollower
from services.store.infrastructure.server_watch import ServerWatch
from services.store.settings import StoreSettings

log = logging.getLogger("recallatron.store")
# How often readiness looks at the revocation feed's connection (a flag, no
# round trip): the listener notices a closed control connection at once and a
# silent one within about 25 s (infrastructure/listen.py).
READINESS_SECONDS = 1.0
STORE_SERVICE = store_pb2.DESCRIPTOR.services_by_name["StoreService"]
TOOL_SERVICE = tools_pb2.DESCRIPTOR.services_by_name["ToolService"]


def migrate_all(dbs: Databases, control: ControlPlane, stop: threading.Event) -> None:
    """Every workspace database not recorded at the current level brought up
    to date, one after another."""
    for ws in control.below_current():
        if stop.is_set():
            return
        try:
            control.migrate(ws)
        except psycopg.OperationalError as exc:
            # A server that is down (or a database sealed by a move) must
            # not stop the others serving: its workspaces are UNAVAILABLE.
            log.warning(
                "workspace database not reachable; not migrated",
                extra={"workspace": ws.slug, "server": ws.server, "error": dbs.redact(str(exc))},
            )


def main() -> None:
    settings = StoreSettings()
    configure_logging("store", settings.log_level)
    # A workspace's calls never outnumber its pool's connections, so a
    # running handler does not wait for one behind its own workspace.
    settings.workspace_concurrency = min(settings.workspace_concurrency, settings.pool_max_size)
    settings.workspace_concurrency_alone = min(
        settings.workspace_concurrency_alone, settings.pool_max_size
    )
    server = Server(
        settings,
        [STORE_SERVICE.full_name, TOOL_SERVICE.full_name],
        internal=True,
    )
    dbs = Databases(settings)
    pool_metrics.register(dbs.pools, dbs.budgets)
    control = ControlPlane(dbs)
    revocations = RevocationFeed(dbs.control_url(), server.stopped)
    servicer = StoreServicer(
        control,
        MemoryStore(dbs, control),
        RecallQueries(control, settings.dense_exact_rows),
        revocations,
        server.stopped,
    )
    add_methods(server.grpc_server, STORE_SERVICE, servicer.handlers())
    tools_pb2_grpc.add_ToolServiceServicer_to_server(servicer.tools, server.grpc_server)
    port = server.start(settings.store_listen)
    log.info("listening", extra={"port": port})
    # NOT_SERVING until the database is reachable and migrated; a database
    # that is not up yet is waited for, not fatal (services start in any order).
    try:
        if not dbs.wait_and_bootstrap(server.stopped):
            return
        # Unknown server names fail here, at start-up (docs/servers.md).
        control.check_recorded_servers()
        dbs.ensure_all_servers()
    except RuntimeError as exc:  # BudgetTooLarge among them: both numbers said
        log.error("cannot serve", extra={"error": str(exc)})
        server.stop()
        sys.exit(1)
    # Serving before every workspace has been visited: each is brought up to
    # date before its first use, and all of them in the background.
    control.known_current()
    dbs.migrate_on_first_use = True
    threading.Thread(
        target=migrate_all, args=(dbs, control, server.stopped), name="migrate", daemon=True
    ).start()
    # What imports killed before this start, or while it runs, left
    # (docs/export.md): never served, so this runs beside serving.
    threading.Thread(
        target=sweep_unfinished_imports,
        args=(dbs, control, settings.unfinished_imports_sweep_seconds, server.stopped),
        name="imports",
        daemon=True,
    ).start()
    revocations.start()
    MoveFollower(dbs.control_url(), server.stopped, control.follow_move).start()
    DeletionFollower(dbs.control_url(), server.stopped, dbs, control.forget_workspace).start()
    # Ready while the control database is: every call needs it (tokens,
    # workspaces), and the revocation feed's listener is the connection to it
    # that notices losing it. Liveness stays SERVING through an outage.
    server.follow_readiness(lambda: revocations.live, READINESS_SECONDS, "control database")
    # Each server's own state, apart from readiness: one of several servers
    # away must not take the workspaces of the others out of service.
    watch = ServerWatch(
        dbs, server.stopped, lambda name, up: server.set_detail(f"postgres/{name}", up)
    )
    watch.register()
    watch.start()
    log.info("serving")
    server.wait_for_termination(on_stop=dbs.close)


if __name__ == "__main__":
    tracing.setup("store", database=True)
    main()
