"""The control plane's new members (design §3): a handle's rules
(control_names.py), one handle a workspace in any case. Mixed into
ControlPlane (control.py), whose workspace and member lookups it uses."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import psycopg
from psycopg.errors import ForeignKeyViolation, UniqueViolation

from recallatron import errors
from services.store.domain import admin_requests, validation
from services.store.domain.admin_requests import AdminRequest
from services.store.domain.control_names import HANDLE_RE, HANDLE_RULE, OPERATOR_HANDLE
from services.store.domain.control_records import Member, Workspace
from services.store.infrastructure.db import Databases
from services.store.sql import queries as q


def being_imported(ws: Workspace, field_name: str) -> errors.FailedPrecondition:
    """The refusal of a call that would use a workspace an import is making."""
    return errors.FailedPrecondition(
        f"{field_name}: workspace {ws.slug!r} is being imported; it is served once its import "
        "has ended (docs/export.md)",
        field_name,
    )


class MemberRecords:
    """ControlPlane's member calls: ``dbs`` and the lookups below are the
    control plane's own."""

    dbs: Databases

    if TYPE_CHECKING:

        def member(self, member_id: str) -> Member: ...

        def workspace_in_field(self, workspace_id: str, field_name: str) -> Workspace: ...

        def forget_workspace(self, workspace_id: str) -> None: ...

    def create_member(
        self, workspace_id: str, handle: str, role: str, importing: bool = False
    ) -> Member:
        """``importing``: the import making the workspace adds its members
        (one whose handle another has in another case, as an archive from
        before handles were one in any case may hold, is kept so)."""
        return self.add_member(workspace_id, handle, role, importing=importing)[0]

    def add_member(
        self,
        workspace_id: str,
        handle: str,
        role: str,
        request: AdminRequest | None = None,
        importing: bool = False,
    ) -> tuple[Member, bool]:
        """The member, and whether it was made now: not when ``request``,
        the client's request id, made it in an earlier attempt (a retry is
        answered with that member, whatever changed since)."""
        if request is not None:
            with self.dbs.control_conn() as conn:
                made = admin_requests.replayed(conn, request)
            if made is not None:
                return self.member(made), False
        workspace_id = validation.uuid_str(workspace_id, "workspace_id")
        ws = self.workspace_in_field(workspace_id, "workspace_id")
        if ws.importing and not importing:
            raise being_imported(ws, "workspace_id")
        if not HANDLE_RE.match(handle or ""):
            raise errors.InvalidArgument("handle", HANDLE_RULE)
        if handle.casefold() == OPERATOR_HANDLE and not importing:
            # An archive's member keeps the handle it had (their id tells them apart).
            raise errors.InvalidArgument(
                "handle",
                f"{handle!r} is how the audit log names the operator; choose another handle",
            )
        if role not in ("owner", "member"):
            raise errors.InvalidArgument("role", "must be owner or member")
        member_id = str(uuid.uuid4())
        try:
            with self.dbs.control_conn() as conn:
                # A concurrent attempt of the request made it meanwhile, or none did.
                made = admin_requests.take_turn(conn, request)
                if made is None:
                    self._insert(conn, member_id, workspace_id, handle, role, importing)
                    admin_requests.record(conn, request, workspace_id, member_id)
        except UniqueViolation:
            raise self._handle_taken(workspace_id, handle) from None
        except ForeignKeyViolation:
            # Deleted since it was looked up (or still cached here after a
            # delete elsewhere): the workspace is gone, as the lookup says.
            self.forget_workspace(workspace_id)
            raise errors.NotFound("workspace_id: workspace not found") from None
        return self.member(made or member_id), made is None

    @staticmethod
    def _insert(
        conn: psycopg.Connection,
        member_id: str,
        workspace_id: str,
        handle: str,
        role: str,
        importing: bool,
    ) -> None:
        free = conn.execute(q.NO_DELETION_OF_WORKSPACE, (workspace_id,)).fetchone()
        if free is not None and not free[0]:
            raise errors.FailedPrecondition(
                "workspace_id: the workspace is being deleted", "workspace_id"
            )
        conn.execute(
            q.INSERT_MEMBER,
            {
                "id": member_id,
                "workspace_id": workspace_id,
                "handle": handle,
                "role": role,
                "importing": importing,
            },
        )

    def _handle_taken(self, workspace_id: str, handle: str) -> errors.AlreadyExists:
        """The refusal of ``handle``, naming the member's who holds it when
        they spell it in another case."""
        with self.dbs.control_conn() as conn:
            row = conn.execute(
                q.HANDLE_IN_ANY_CASE, {"workspace_id": workspace_id, "handle": handle}
            ).fetchone()
        if row is None or row[0] == handle:
            return errors.AlreadyExists(f"handle: {handle!r} is taken in this workspace")
        return errors.AlreadyExists(
            f"handle: {handle!r} is taken in this workspace as {row[0]!r} "
            "(a handle is one in any case)"
        )
