"""Whether a workspace a rebuild failed in was deleted meanwhile: a deletion
drops its database first (ending every session on it) and removes its record
after, so an error its drop caused is read only once that deletion has ended
(services/store/domain/deletion.py)."""

from __future__ import annotations

from recallatron import errors
from services.embedding_job.queries import DELETION_ENDED, DELETION_WAIT
from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import Databases

# Longest wait for a deletion under way to end (its own lock waits as long).
DELETION_WAIT_SECONDS = 120


def deleted_meanwhile(dbs: Databases, control: ControlPlane, workspace_id: str) -> bool:
    """True when the workspace is gone, once any deletion of it under way has
    ended; its pools here are then closed. False when it is still there or
    the control plane cannot say (the caller's own error stands then)."""
    try:
        known = control.workspace(workspace_id)  # as last read: where its pools are
    except errors.NotFound:
        return True
    except errors.DomainError:
        return False
    try:
        with dbs.control_conn() as conn, conn.transaction():
            conn.execute(DELETION_WAIT, (f"{DELETION_WAIT_SECONDS}s",))
            conn.execute(DELETION_ENDED, (workspace_id,))
        control.workspace(workspace_id, fresh=True)
    except errors.NotFound:
        dbs.forget_pools(known.server, known.database_name)
        return True
    except errors.DomainError:
        return False
    return False
