"""`recallatron servers list` (docs/servers.md): each server with its
workspaces, whether it answers now, and its marks. A server the settings no
longer name that workspaces are still recorded on is listed too, marked not
configured: the store refuses to start until the settings name it, and the
list says why."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from recallatron import errors

if TYPE_CHECKING:
    from services.store.domain.control_records import ServerStatus
    from services.store.infrastructure.db import Databases


def print_servers(dbs: Databases, listed: list[ServerStatus]) -> None:
    """One line per server on stdout; why one does not answer, or is not
    configured, on stderr."""
    from concurrent.futures import ThreadPoolExecutor

    # Every configured server asked at once: none waits on another's probe.
    names = [s.name for s in listed if s.configured]
    pool = ThreadPoolExecutor(max(1, len(names)), thread_name_prefix="probe")
    try:
        why_not = dict(
            zip(names, pool.map(lambda n: why_not_answering(dbs, n), names), strict=True)
        )
    finally:
        # A stop (Ctrl-C) leaves the probes to their own short limit.
        pool.shutdown(wait=False, cancel_futures=True)
    for s in listed:
        marks = [m for m, on in (("default", s.default), ("draining", s.draining)) if on]
        if not s.configured:
            reach = "not configured"
        else:
            reach = "not answering" if why_not[s.name] else "answers"
        print(
            f"{s.name}\t{s.workspaces} workspaces\t{reach}"
            + (f"\t{', '.join(marks)}" if marks else "")
        )
        if not s.configured:
            print(
                f"warning: server {s.name} is not configured, yet {s.workspaces} workspaces are "
                "recorded on it: the store and the embedding job refuse to start until "
                "RECALLATRON_POSTGRES_SERVERS or RECALLATRON_POSTGRES_SERVERS_DIR names it "
                "(docs/servers.md)",
                file=sys.stderr,
            )
        elif why_not[s.name]:
            print(f"warning: server {s.name} does not answer: {why_not[s.name]}", file=sys.stderr)


def why_not_answering(dbs: Databases, server: str) -> str:
    """'' when ``server`` answers now; else why not, redacted. Asked as the
    store's watch asks (an admin connection, with the keepalive options of
    server_url), within the watch's limit: a server whose port accepts and
    never answers is given up, not waited on."""
    import psycopg

    from recallatron import deadline
    from services.store.infrastructure.server_watch import PROBE_LIMIT_SECONDS

    leave = deadline.enter(deadline.Scope(PROBE_LIMIT_SECONDS))
    try:
        with dbs.admin(server) as conn:
            conn.execute("SELECT 1")
        return ""
    except (psycopg.Error, errors.DomainError) as exc:
        said = (str(exc).strip().splitlines() or [""])[0]
        return dbs.redact(said) or type(exc).__name__
    finally:
        leave()
