"""A database on an embedded Postgres server of the benchmark's own, with
the app role the migrations' grants name, for the benchmarks that time a
migration at upgrade."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from recallatron_devkit.localpg import LocalPostgres
from recallatron_devkit.ports import free_port
from services.store.infrastructure.db import APP_ROLE, with_database


@contextmanager
def empty_database(state_dir: str, name: str, prefix: str) -> Iterator[str]:
    """The superuser's URL of a new, empty database `name` on a server whose
    data lives in `state_dir` (a new temporary directory when empty); the
    server stops on leaving."""
    state = Path(state_dir or tempfile.mkdtemp(prefix=prefix))
    pg = LocalPostgres(state / "pgdata", free_port())
    pg.start()
    try:
        with psycopg.connect(pg.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}".encode())
            conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN NOSUPERUSER NOBYPASSRLS".encode())
        yield with_database(pg.url, name)
    finally:
        pg.stop()
