"""An import's claim on its slug (docs/export.md, "An import that was killed").

The workspace an import makes is marked as being imported in the control
plane from its creation until the import's last step, and is served to
nobody meanwhile. The importing process holds an advisory lock on the slug,
on a control-plane session of its own, for the whole import. An import that
fails or is stopped removes its workspace itself; one that is killed
(SIGKILL, its host gone) cannot, but its session ends and the lock with it.
Whoever then takes the lock (a later import of the slug, delete-workspace, a
store at its start and then periodically) knows that import will never end,
and removes what it left."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager

import psycopg

from recallatron import errors
from services.store.domain.control import ControlPlane
from services.store.domain.deletion import Deleted, WorkspaceDeletion
from services.store.infrastructure.db import Databases
from services.store.sql import queries as q

log = logging.getLogger("recallatron.store.archive")

# The claim's session is idle for most of an import: the server probes it,
# so a host that vanished (no FIN ever comes) frees the lock about a minute
# later, not hours. Ignored over a Unix socket, where a host cannot vanish
# alone.
KEEPALIVES = "-c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3"


class ImportClaim:
    """The lock on a slug held by its import (or by what removes one)."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn

    def finish(self, workspace_id: str) -> None:
        """The import's last step: the workspace is whole and served. On the
        claim's own session, so a claim lost on the way (its session ended,
        and the workspace perhaps removed as a killed import's) fails the
        import rather than finishing a workspace someone else may be removing."""
        if self.conn.execute(q.FINISH_IMPORT, (workspace_id,)).rowcount != 1:
            raise errors.FailedPrecondition(
                "as: the workspace was removed while it was imported", "as"
            )


@contextmanager
def claim(dbs: Databases, slug: str) -> Iterator[ImportClaim]:
    """The slug's import lock for the block; AlreadyExists when another
    process holds it (an import of the slug, or its removal, is under way)."""
    with closing(psycopg.connect(dbs.control_url(), autocommit=True, options=KEEPALIVES)) as conn:
        row = conn.execute(q.TRY_IMPORT_LOCK, (slug,)).fetchone()
        if row is None or not row[0]:
            raise errors.AlreadyExists(f"as: an import of {slug!r} is under way")
        yield ImportClaim(conn)


def remove_unfinished(dbs: Databases, control: ControlPlane, slug: str) -> Deleted | None:
    """What a killed import of ``slug`` left, removed (the caller holds the
    slug's claim, so that import's process is gone); None when the slug
    holds no such workspace."""
    try:
        ws = control.workspace_named(slug, "as", importing=True)
    except errors.NotFound:
        return None
    if not ws.importing:
        return None
    done = WorkspaceDeletion(dbs, control).delete_unfinished_import(ws)
    log.warning(
        "removed what an import that did not end left",
        extra={"workspace": ws.slug, "workspace_id": ws.id},
    )
    return done


def remove_unfinished_imports(dbs: Databases, control: ControlPlane) -> list[Deleted]:
    """Every workspace whose import's process is gone, removed (by a store's
    sweep); an import under way is left to end."""
    try:
        with dbs.control_conn() as conn:
            slugs = [str(r[0]) for r in conn.execute(q.UNFINISHED_IMPORTS)]
    except Exception:
        log.exception("unfinished imports not looked for")
        return []
    removed: list[Deleted] = []
    for slug in slugs:
        try:
            with claim(dbs, slug):
                done = remove_unfinished(dbs, control, slug)
        except errors.AlreadyExists:
            continue  # its importer is alive (or another store removes it)
        except Exception:
            # The next start, a later import or delete-workspace tries again.
            log.exception("an unfinished import was not removed", extra={"workspace": slug})
            continue
        if done is not None:
            removed.append(done)
    return removed


def sweep_unfinished_imports(
    dbs: Databases, control: ControlPlane, every: float, stop: threading.Event
) -> None:
    """Removes what killed imports left at once, then every ``every`` seconds
    until ``stop``: a store that runs for weeks frees a killed import's slug
    without waiting for its next start."""
    while not stop.is_set():
        remove_unfinished_imports(dbs, control)
        if stop.wait(every):
            return
