"""Connections: the admin connection to each Postgres server, one bounded pool
per workspace database for the tools (as the non-owner app role, so row-level
security holds); the caller set per transaction is in transactions.py."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types import TypeInfo
from psycopg_pool import ConnectionPool

from recallatron import deadline, errors
from services.store.infrastructure import migrate
from services.store.infrastructure.budget import DatabasePool, ServerBudget, closing_and_waiting
from services.store.infrastructure.liveness import check_alive
from services.store.infrastructure.reach import Identity, SameServers, check_budget, identify
from services.store.infrastructure.reaper import Reaper
from services.store.infrastructure.servers import (
    ADMIN_CONNECTIONS,
    ServerConfigError,
    UnknownServer,
    redact,
    server_map,
    unknown_server,
    watched,
)
from services.store.infrastructure.transactions import (
    CANCEL_TIMEOUT_SECONDS,
    GENERIC_PLANS,
    SET_LOCALS,
    Caller,
    WorkspacePool,
    caller_transaction,
    cancelled_if_abandoned,
    configure_connection,
    configure_workspace_connection,
    translate_db_errors,
)
from services.store.settings import StoreSettings

__all__ = [
    "ADMIN_WAIT_SECONDS",
    "APP_ROLE",
    "CANCEL_TIMEOUT_SECONDS",
    "CONTROL_DATABASE",
    "GENERIC_PLANS",
    "PROCESSES",
    "SET_LOCALS",
    "TEMPLATE_DATABASE",
    "Caller",
    "Databases",
    "WorkspacePool",
    "caller_transaction",
    "cancelled_if_abandoned",
    "configure_connection",
    "configure_workspace_connection",
    "translate_db_errors",
    "with_database",
]

log = logging.getLogger("recallatron.store.db")

CONTROL_DATABASE = "recallatron"
# Every workspace database is a copy of this one, kept at the current
# migration level (design §10): a copy takes a fraction of running them all.
TEMPLATE_DATABASE = "recallatron_template"
APP_ROLE = "recallatron_app"
_BOOTSTRAP_LOCK = 7_401_000
_TEMPLATE_LOCK = 7_401_002
PROCESSES = ("store", "embedding job")
ADMIN_WAIT_SECONDS = 60.0
ADMIN_CONNECT_TIMEOUT_SECONDS = 10


def with_database(server_url: str, database: str, **overrides: str) -> str:
    params = conninfo_to_dict(server_url)
    params["dbname"] = database
    params.update(overrides)
    return make_conninfo(**params)  # type: ignore[arg-type]


class Databases:
    """Everything the store knows about where data lives. ``process`` names
    whose connection budget this process spends (the store's or the
    embedding job's)."""

    def __init__(
        self,
        settings: StoreSettings,
        process: str = "store",
        admin_connections: int = ADMIN_CONNECTIONS,
    ) -> None:
        if process not in PROCESSES:
            raise ValueError(f"process must be one of {PROCESSES}")
        self.settings = settings
        try:
            # Names -> admin URLs, from settings only (design §3); a bad or
            # missing entry stops the start-up here, before serving.
            self.servers = server_map(
                settings.database_url,
                settings.default_server,
                settings.postgres_servers,
                settings.postgres_servers_dir,
            )
        except ServerConfigError as exc:
            raise RuntimeError(str(exc)) from None
        if not settings.app_password:
            log.warning(
                "RECALLATRON_APP_PASSWORD is not set: the app role gets no password, and "
                "a Postgres that asks every role for one (the embedded one does) refuses it"
            )
        # The default server's name: the control plane lives there.
        self.default_server = self.servers.default
        self.budget_size, self.budget_setting = (
            (settings.connection_budget, "RECALLATRON_CONNECTION_BUDGET")
            if process == "store"
            else (settings.job_connection_budget, "RECALLATRON_JOB_CONNECTION_BUDGET")
        )
        # By server name, and by the first name reached of each server:
        # names that reach one server share its budget (reach.SameServers).
        self._budgets: dict[str, ServerBudget] = {}
        self._budget_at: dict[str, ServerBudget] = {}
        self._same = SameServers()
        self._lock = threading.Lock()
        # Admin connections (databases made, migrations) at once, per process.
        self._admin_slots = threading.BoundedSemaphore(admin_connections)
        # Servers whose template is current.
        self._templates: set[str] = set()
        # Workspace databases known to be at the current migration level (the
        # store checks each before its first use, not all of them at start).
        self._migrated: set[str] = set()
        self.migrate_on_first_use = False
        # Each workspace database's vector type (its oid is the database's own).
        self._vector_types: dict[str, TypeInfo] = {}
        self._reaper = Reaper(self.budgets, min(1.0, settings.pool_max_idle_seconds / 2))
        self._reaper.start()
        self.control: ConnectionPool | None = None

    def server_url(self, server: str) -> str:
        """A configured server's admin URL ('' is the default server). Never
        put it in an answer or a log."""
        try:
            # Every connection opened to it notices a silent cut (settings).
            return watched(self.servers.url(server), self.settings.postgres_silence_seconds)
        except UnknownServer:
            raise errors.InvalidArgument(
                "server", unknown_server(server, self.servers.names)
            ) from None

    def database_url(self, server: str, database: str, **overrides: str) -> str:
        """Admin URL of one database on a named server."""
        return with_database(self.server_url(server), database, **overrides)

    def secrets(self) -> list[str]:
        """What must never reach an answer or a log (see servers.redact)."""
        return self.servers.secrets([self.settings.app_password])

    # -- bootstrap ---------------------------------------------------------

    @contextmanager
    def admin_slot(self) -> Iterator[None]:
        """One of the admin connections this process may hold at once; a
        caller that cannot have one in a minute (or, inside a call, by its
        deadline: a workspace migrated on its first use) is told to retry."""
        if not self._admin_slots.acquire(timeout=deadline.capped(ADMIN_WAIT_SECONDS)):
            raise errors.Unavailable("database busy: migrations or new databases queued", 1.0)
        try:
            yield
        finally:
            self._admin_slots.release()

    @contextmanager
    def admin(self, server: str, database: str = "") -> Iterator[psycopg.Connection]:
        """An admin connection (autocommit), outside the budget but counted
        in the start-up check: at most ADMIN_CONNECTIONS at once."""
        url = self.database_url(server, database) if database else self.server_url(server)
        # A server that never answers is given up (its own URL may say how
        # long): it would hold a slot, and the start or a call, for ever.
        if "connect_timeout" not in conninfo_to_dict(url):
            wait = deadline.capped(ADMIN_CONNECT_TIMEOUT_SECONDS)  # a call's, when nearer
            url = make_conninfo(url, connect_timeout=max(1, round(wait)))
        # The slot is free again only once the server ended the backend.
        with self.admin_slot(), closing_and_waiting(psycopg.connect(url, autocommit=True)) as conn:
            yield conn

    def bootstrap(self) -> None:
        """Creates the app role and the control database if missing, applies the
        control migrations. Safe to run from several processes at once."""
        self.ensure_server(self.default_server)
        with self.admin(self.default_server) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (_BOOTSTRAP_LOCK,))
            try:
                exists = conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (CONTROL_DATABASE,)
                ).fetchone()
                if not exists:
                    conn.execute(
                        sql.SQL("CREATE DATABASE {}").format(sql.Identifier(CONTROL_DATABASE))
                    )
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_BOOTSTRAP_LOCK,))
        control_url = self.control_url()
        with self.admin_slot():
            migrate.apply_migrations(control_url, "control")
        self.control = ConnectionPool(
            control_url,
            min_size=1,
            max_size=self.settings.control_pool_max_size,
            timeout=self.settings.pool_timeout_seconds,
            kwargs={"options": f"-c statement_timeout={self.settings.statement_timeout_ms}"},
            open=True,
            configure=configure_connection,
            check=check_alive,
            name="control",
        )

    def wait_and_bootstrap(self, stop: threading.Event, retry_seconds: float = 1.0) -> bool:
        """Bootstraps, retrying while Postgres is not reachable yet. False when
        stopped first."""
        while not stop.is_set():
            try:
                self.bootstrap()
                return True
            except psycopg.OperationalError as exc:
                log.warning(
                    "postgres not reachable yet; retrying",
                    extra={"server": self.default_server, "error": self.redact(str(exc))},
                )
                stop.wait(retry_seconds)
        return False

    def ensure_all_servers(self) -> None:
        """The app role on every configured server, so its password follows
        a rotation everywhere; a server not reachable now is only logged
        (its workspaces answer UNAVAILABLE until it is)."""
        for name in self.servers.names:
            try:
                self.ensure_server(name)
            except psycopg.OperationalError as exc:
                log.warning(
                    "postgres server not reachable",
                    extra={"server": name, "error": self.redact(str(exc))},
                )

    def redact(self, text: str) -> str:
        return redact(text, self.secrets())

    def ensure_server(self, server: str) -> None:
        """The app role exists on a named server (roles are per server), and,
        the first time this process reaches it, the budgets fit the server
        and the names that reach the same server are known."""
        found: Identity | None = None
        with self.admin(server) as conn:
            if self._same.first(server) is None:
                # The start-up check (docs/servers.md): raises BudgetTooLarge.
                check_budget(self.settings, server, server == self.default_server, conn)
                found = identify(conn)
            conn.execute("SELECT pg_advisory_lock(%s)", (_BOOTSTRAP_LOCK,))
            try:
                if not conn.execute(
                    "SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)
                ).fetchone():
                    conn.execute(
                        sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS").format(
                            sql.Identifier(APP_ROLE)
                        )
                    )
                if self.settings.app_password:
                    # The verifier is hashed here, in this session, with its
                    # rounds (settings: app_password_scram_iterations).
                    conn.execute(
                        "SELECT set_config('scram_iterations', %s, false)",
                        (str(self.settings.app_password_scram_iterations),),
                    )
                    conn.execute(
                        sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                            sql.Identifier(APP_ROLE), sql.Literal(self.settings.app_password)
                        )
                    )
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_BOOTSTRAP_LOCK,))
        if found is not None:
            # Outside the admin connection: asking another name takes a slot.
            self._same.place(server, found, self._identity)

    def _identity(self, server: str) -> Identity | None:
        """What a server says it is now; None when it does not answer."""
        try:
            with self.admin(server) as conn:
                return identify(conn)
        except (psycopg.OperationalError, errors.Unavailable):
            return None

    def create_database(self, server: str, database: str) -> None:
        """A new workspace database: a copy of the server's template, which is
        brought to the current migration level first (under a lock that also
        keeps every other copier and migrator out while it is copied)."""
        server = server or self.default_server
        with self._template_lock(server) as conn:
            if server not in self._templates:
                self._migrate_template(server, conn)
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(database), sql.Identifier(TEMPLATE_DATABASE)
                )
            )
        self._migrated.add(f"{server}|{database}")

    def drop_database(self, server: str, database: str) -> None:
        """A workspace database gone from its server, whoever is connected
        (their sessions end); nothing when it is not there."""
        server = server or self.default_server
        with self.admin(server) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
            )
        self._migrated.discard(f"{server}|{database}")

    def refresh_template(self, server: str) -> None:
        """The server's template at the current migration level (migrate-db)."""
        with self._template_lock(server) as conn:
            self._migrate_template(server, conn)

    @contextmanager
    def _template_lock(self, server: str) -> Iterator[psycopg.Connection]:
        with self.admin(server) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (_TEMPLATE_LOCK,))
            try:
                yield conn
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_TEMPLATE_LOCK,))

    def _migrate_template(self, server: str, conn: psycopg.Connection) -> None:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (TEMPLATE_DATABASE,)
        ).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE_DATABASE)))
        # Its own connection, closed before any copy: a template may have
        # no session while it is copied. Outside the admin slots (this
        # caller holds one, and the lock keeps the work serial).
        migrate.apply_migrations(self.database_url(server, TEMPLATE_DATABASE), "workspace")
        self._templates.add(server)

    def mark_migrated(self, locations: Iterable[tuple[str, str]]) -> None:
        """(server, database) pairs known to be at the current level."""
        self._migrated.update(f"{server}|{database}" for server, database in locations)

    def ensure_migrated(self, server: str, database: str) -> None:
        """Migrates a workspace database unless this process already has."""
        if f"{server or self.default_server}|{database}" not in self._migrated:
            self.migrate_workspace(server, database)

    def migrate_workspace(self, server: str, database: str) -> list[str]:
        with self.admin_slot():
            applied = migrate.apply_migrations(self.database_url(server, database), "workspace")
        self._migrated.add(f"{server or self.default_server}|{database}")
        return applied

    # -- pools -------------------------------------------------------------

    def budget(self, server: str) -> ServerBudget:
        """This process's budget on a server, made once the server was
        reached (ensure_server): two names of one server (an old url-...
        name beside its new one, two spellings of its host) share its one
        budget, since the server counts connections, not names."""
        server = server or self.default_server
        with self._lock:
            found = self._budgets.get(server)
        if found is not None:
            return found
        first = self._same.reach(server, lambda: self.ensure_server(server))
        with self._lock:
            found = self._budgets.get(server)
            if found is None:
                found = self._budget_at.get(first)
                if found is None:
                    found = self._budget_at[first] = ServerBudget(
                        first,
                        self.budget_size,
                        self.settings.pool_max_idle_seconds,
                        self.settings.pool_grow_after_seconds,
                        setting=self.budget_setting,
                    )
                self._budgets[server] = found
            return found

    def budgets(self) -> list[ServerBudget]:
        """Each budget once, however many names its server has."""
        with self._lock:
            return list(self._budget_at.values())

    def _pool(self, server: str, database: str, app: bool) -> WorkspacePool:
        server = server or self.default_server
        if self.migrate_on_first_use:
            # A store start serves before it has visited every workspace: a
            # workspace is brought up to date before its first use instead.
            with translate_db_errors():
                self.ensure_migrated(server, database)
        key = f"{'app' if app else 'owner'}:{database}"
        with translate_db_errors():
            budget = self.budget(server)

        def make() -> DatabasePool:
            overrides = {"user": APP_ROLE} if app else {}
            if app and self.settings.app_password:
                overrides["password"] = self.settings.app_password
            s = self.settings
            return WorkspacePool(
                budget,
                key,
                with_database(self.server_url(server), database, **overrides),
                max_size=s.pool_max_size if app else s.owner_pool_max_size,
                timeout=s.pool_timeout_seconds,
                statement_timeout_ms=s.statement_timeout_ms,
                configure=lambda conn: self._configure_workspace(conn, server, database),
                name=key,
                setting=f"RECALLATRON_{'' if app else 'OWNER_'}POOL_MAX_SIZE",
            )

        pool = budget.pool(key, make)
        assert isinstance(pool, WorkspacePool)
        return pool

    def _configure_workspace(self, conn: psycopg.Connection, server: str, database: str) -> None:
        key = f"{server}|{database}"
        vector = self._vector_types.get(key)
        if vector is None:
            vector = TypeInfo.fetch(conn, "vector")
            conn.commit()  # the lookup opened a transaction; a pool wants it idle
            if vector is None:
                raise psycopg.OperationalError(f"database {database}: no vector type")
            self._vector_types[key] = vector
        configure_workspace_connection(conn, vector)

    def app_pool(self, server: str, database: str) -> WorkspacePool:
        return self._pool(server, database, app=True)

    def owner_pool(self, server: str, database: str) -> WorkspacePool:
        return self._pool(server, database, app=False)

    def pools(self) -> dict[str, ConnectionPool | DatabasePool]:
        control: dict[str, ConnectionPool | DatabasePool] = (
            {"control": self.control} if self.control is not None else {}
        )
        for budget in self.budgets():
            with budget.lock:
                control.update(budget.pools)
        return control

    def control_url(self) -> str:
        return self.database_url(self.default_server, CONTROL_DATABASE)

    def forget_pools(self, server: str, database: str) -> None:
        """Closes a database's pools (after a move: its old location)."""
        with self._lock:
            budget = self._budgets.get(server or self.default_server)
        if budget is None:
            return  # never reached: it has no pools
        for role in ("app", "owner"):
            with budget.lock:
                pool = budget.pools.get(f"{role}:{database}")
            if pool is not None:
                pool.close()
        self._migrated.discard(f"{server or self.default_server}|{database}")
        self._vector_types.pop(f"{server or self.default_server}|{database}", None)

    def forget_database(self, database: str) -> None:
        """What this process holds of a database on every server it has used
        (a workspace moved: a database of that name made again later on a
        server it left is another database, its vector type another oid)."""
        with self._lock:
            servers = list(self._budgets)
        for server in servers:
            self.forget_pools(server, database)

    @contextmanager
    def control_conn(self) -> Iterator[psycopg.Connection]:
        if self.control is None:
            # The server takes calls while it still waits for Postgres at start.
            raise errors.Unavailable("database unavailable: the store is starting")
        with translate_db_errors():
            timeout = deadline.capped(self.control.timeout)
            with self.control.connection(timeout=timeout) as conn, cancelled_if_abandoned(conn):
                yield conn

    def close(self) -> None:
        self._reaper.stop.set()
        for budget in self.budgets():
            budget.close()
        if self.control is not None:
            self.control.close()
