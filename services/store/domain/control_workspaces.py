"""The control plane's new workspaces (design §3): each placed on a server
(placement.py), its database made there, then recorded. Mixed into
ControlPlane (control.py), whose workspace lookups it uses."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psycopg
from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb

from recallatron import deadline, errors
from services.store.domain import admin_requests
from services.store.domain.admin_requests import AdminRequest
from services.store.domain.control_names import SLUG_RULE, slug_ok
from services.store.domain.control_records import Workspace, WorkspaceSettings
from services.store.domain.placement import DrainedMeanwhile, Placement, draining_refusal
from services.store.infrastructure import migrate
from services.store.infrastructure.db import Databases
from services.store.infrastructure.transactions import translate_db_errors
from services.store.sql import queries as q


class WorkspaceCreation:
    """ControlPlane's CreateWorkspace: ``dbs`` and the lookup below are the
    control plane's own."""

    dbs: Databases

    if TYPE_CHECKING:

        def workspace(self, workspace_id: str, fresh: bool = False) -> Workspace: ...

    def create_workspace(
        self,
        slug: str,
        server: str = "",
        importing: bool = False,
        request: AdminRequest | None = None,
    ) -> Workspace:
        """``importing``: marked as being imported (served to nobody) until
        the import's last step clears the mark. ``request``: the client's
        request id, when given (a retry of it is answered with the workspace
        its first attempt made)."""
        if not slug_ok(slug):
            raise errors.InvalidArgument("slug", SLUG_RULE)
        made = self._made_by(request)
        if made is not None:
            return made
        with self.dbs.control_conn() as conn:
            taken = conn.execute(q.WORKSPACE_ID_BY_SLUG, (slug,)).fetchone()
        if taken and taken[1]:
            raise errors.AlreadyExists(
                f"slug: an import of {slug!r} holds it (under way, or killed: importing it "
                "again or delete-workspace removes what it left; docs/export.md)"
            )
        if taken:
            # Made meanwhile by this very request's first attempt, or taken.
            made = self._made_by(request)
            if made is not None:
                return made
            raise errors.AlreadyExists(f"slug: a workspace named {slug!r} exists")
        placement = Placement(self.dbs)
        named = server
        # Placed afresh while the server chosen drains meanwhile: each turn
        # skips the servers draining, so it ends once they all drain.
        while True:
            workspace_id = str(uuid.uuid4())
            database = f"ws_{uuid.UUID(workspace_id).hex}"
            server = placement.reserve(named, database)
            try:
                recorded = self._make_and_record(
                    placement,
                    _NewWorkspace(workspace_id, slug, server, database, importing, request),
                )
                if recorded is not None:
                    return self.workspace(recorded)
            except BaseException:
                # Unreleased, a placement stops counting after its hold.
                with deadline.detached(), contextlib.suppress(errors.DomainError):
                    placement.release(database)
                raise
            # Drained once placed: placed afresh (a server named is refused).
            placement.release(database)
            if named:
                raise draining_refusal(named)

    def _made_by(self, request: AdminRequest | None) -> Workspace | None:
        """The workspace the request's earlier attempt made, if one did."""
        if request is None:
            return None
        with self.dbs.control_conn() as conn:
            made = admin_requests.replayed(conn, request)
        return None if made is None else self.workspace(made)

    def _make_and_record(self, placement: Placement, new: _NewWorkspace) -> str | None:
        """The workspace's database made on its server, then the workspace
        recorded there; its id, or the one the request's earlier attempt made
        meanwhile; None when the server was marked draining meanwhile (the
        database made is dropped, as it is when the earlier attempt's answers)."""
        # A server that does not answer is UNAVAILABLE (retry), not a fault.
        with translate_db_errors():
            self.dbs.ensure_server(new.server)
            # The database is made and migrated before the workspace is
            # recorded, so a recorded workspace always has a usable database.
            self.dbs.create_database(new.server, new.database)
        recorded: str | None = new.id
        try:
            with placement.recording(new.server, new.database) as conn:
                recorded = admin_requests.take_turn(conn, new.request) or _record(conn, new)
        except UniqueViolation:
            # Another creation of this slug got there first: the database
            # made for this one is nobody's.
            self._drop(new)
            raise errors.AlreadyExists(f"slug: a workspace named {new.slug!r} exists") from None
        except DrainedMeanwhile:
            recorded = None
        except errors.DomainError:
            # The request id taken meanwhile by another request: none recorded.
            self._drop(new)
            raise
        if recorded != new.id:
            self._drop(new)
        return recorded

    def _drop(self, new: _NewWorkspace) -> None:
        with translate_db_errors():
            self.dbs.drop_database(new.server, new.database)


@dataclass(frozen=True)
class _NewWorkspace:
    """One attempt at a workspace: its id and slug, where its database is
    made, whether an import makes it, and the client's request id."""

    id: str
    slug: str
    server: str
    database: str
    importing: bool
    request: AdminRequest | None


def _record(conn: psycopg.Connection, new: _NewWorkspace) -> str:
    conn.execute(
        q.INSERT_WORKSPACE,
        (
            new.id,
            new.slug,
            new.server,
            new.database,
            Jsonb(WorkspaceSettings().to_json()),
            migrate.latest_version("workspace"),
            new.importing,
        ),
    )
    admin_requests.record(conn, new.request, new.id, new.id)
    return new.id
