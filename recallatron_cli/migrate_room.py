"""How many databases `migrate-db` migrates at once (docs/servers.md,
"Creation from a template"): each holds an admin connection to its server,
outside the store's budget, so ``--parallel`` may not pass what the server
leaves beyond the store's and the embedding job's connections at their most;
more would take what they are promised and starve the store."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from recallatron import errors
from recallatron_cli import common

if TYPE_CHECKING:
    from services.store.infrastructure.db import Databases


def wanted(parallel: int) -> int:
    """``--parallel`` as given, at least 1 (checked before any connection)."""
    if parallel < 1:
        raise common.invalid("parallel", "--parallel", "at least 1")
    return parallel


def check(dbs: Databases, parallel: int, servers: Iterable[str]) -> None:
    """Refuses ``parallel`` past the room of any of ``servers`` that answers
    (one that does not has its workspaces fail, each said, as before), less
    this command's own control-plane pool on the default server."""
    import psycopg

    from services.store.infrastructure.reach import room

    for server in servers:
        default = server == dbs.default_server
        try:
            with dbs.admin(server) as conn:
                found = room(dbs.settings, default, conn)
        except (psycopg.Error, errors.DomainError):
            continue
        own = dbs.settings.control_pool_max_size if default else 0
        most = max(1, found.left - own)
        if parallel > most:
            mine = f" - {own} of this command's control-plane pool" if own else ""
            raise common.invalid(
                "parallel",
                "--parallel",
                f"at most {most} on server {server!r} ({found}{mine}); each database "
                "migrated at once holds a connection there",
            )
