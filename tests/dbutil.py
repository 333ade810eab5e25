"""Direct database access for assertions the API cannot make (row checksums,
pg_dump): as the admin role, outside row-level security."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg

# The wheel's, as localpg imports it (quietly: the wheel warns at import).
from recallatron_devkit.localpg import _commands  # type: ignore[attr-defined]
from recallatron_devkit.stack import Stack
from services.store.domain.control import ControlPlane
from services.store.domain.workspace_services import InWorkspaces
from services.store.infrastructure.db import Caller, Databases, with_database
from services.store.settings import StoreSettings

# The embedding job's tables (embedding_job, memory_embedding) change in the
# background as vectors are written; they derive from `memory` by trigger, so
# `memory` stands for them in a checksum.
WORKSPACE_TABLES = (
    "memory",
    "memory_link",
    "entity",
    "mention",
    "entity_alias",
    "attribute_claim",
    "relation_claim",
    "request_key",
    "audit_log",
    "memory_revision",
    "term_stat",
    "corpus_stat",
)


def workspace_url(stack: Stack, database: str) -> str:
    return with_database(stack.database_url, database)


def checksum(stack: Stack, database: str) -> dict[str, str]:
    """A digest of every row of every workspace table."""
    out = {}
    with psycopg.connect(workspace_url(stack, database)) as conn:
        for table in WORKSPACE_TABLES:
            row = conn.execute(
                f"SELECT count(*) || ':' || coalesce(md5(string_agg(t::text, '|' ORDER BY t::text)), '')"  # noqa: E501
                f" FROM {table} t"
            ).fetchone()
            out[table] = row[0] if row else ""
    return out


def pg_dump(stack: Stack, database: str) -> str:
    return subprocess.run(
        [str(_commands.POSTGRES_BIN_PATH / "pg_dump"), "--inserts", workspace_url(stack, database)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def query(
    stack: Stack, database: str, sql: str, params: tuple[object, ...] = ()
) -> list[tuple[Any, ...]]:
    with psycopg.connect(workspace_url(stack, database)) as conn:
        return conn.execute(sql, params).fetchall()


@contextmanager
def store_databases(stack: Stack) -> Iterator[Databases]:
    """The store's databases held in this process, on the stack's server, as
    another store replica holds them (bootstrapped; closed after): for a test
    that drives the store's domain code itself, to hold a call at one step."""
    dbs = Databases(StoreSettings(database_url=stack.database_url, app_password=stack.app_password))
    try:
        dbs.bootstrap()
        yield dbs
    finally:
        dbs.close()


@contextmanager
def store_transaction(
    stack: Stack, caller: Caller, settings: Mapping[str, str] | None = None
) -> Iterator[psycopg.Connection]:
    """A transaction as the store opens one for ``caller`` (``settings``: more
    transaction-local settings), on databases held in this process as by
    store_databases: for a test that runs the store's reads on it itself."""
    with (
        store_databases(stack) as dbs,
        InWorkspaces(ControlPlane(dbs)).transaction(caller, settings) as conn,
    ):
        yield conn
