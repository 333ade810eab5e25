"""The control plane's changes to a workspace, each written to that
workspace's audit log (design §10: an owner reads who did what): members
added, tokens made, rotated and revoked, settings changed. Member removal
writes its own entry (member_removal.py).

The change commits in the control plane first, then its entry is written in
the workspace's database (another database, so not in one transaction). An
entry that cannot be written is logged and the change still answers: a made
token must reach its caller, who sees it once. Secrets are never written:
a token appears by its id."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from services.store.domain import validation as v
from services.store.domain.admin_requests import AdminRequest
from services.store.domain.control_records import Member, Workspace, WorkspaceSettings
from services.store.domain.erasure import fingerprint, request_keys
from services.store.domain.member_removal import OPERATOR_ID
from services.store.domain.tokens import NewToken
from services.store.domain.workspace_services import OnWorkspaces
from services.store.sql import owner_queries as oq
from services.store.sql import queries as q

log = logging.getLogger("recallatron.store.administration")

# The actions these entries carry in the audit log.
ACTIONS = ("create_member", "create_token", "rotate_token", "revoke_token", "update_settings")


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def admin_request(by: str, request_id: str, call: str, *asked: Any) -> AdminRequest | None:
    """``request_id`` of a ``call`` (create_workspace, create_member,
    create_token or rotate_token) made by ``by`` (an owner's member id, or the
    operator's), or None when none was given: such a call is made each time it
    is asked, as before."""
    if not request_id:
        return None
    key, *spelled = request_keys(by, v.request_id(request_id))
    return AdminRequest(key, call, fingerprint(call, *asked), spelled[0] if spelled else None)


def _seconds(value: timedelta | None) -> float | None:
    """A duration as a request's fingerprint takes it (unset is not zero)."""
    return value.total_seconds() if value is not None else None


class Administration(OnWorkspaces):
    """Each call: the control plane's own, then its audit entry. ``by`` is the
    owner who asked, or None for the operator."""

    def create_workspace(self, slug: str, server: str, request_id: str = "") -> Workspace:
        """The operator's call (only theirs); ``request_id`` as create_member's."""
        request = admin_request(OPERATOR_ID, request_id, "create_workspace", slug, server)
        return self.control.create_workspace(slug, server, request=request)

    def create_member(
        self, by: str | None, workspace_id: str, handle: str, role: str, request_id: str = ""
    ) -> Member:
        """``request_id``: a retry with it is answered with the member its
        first attempt made (one audit entry: that attempt's)."""
        request = None
        if request_id:
            workspace_id = v.uuid_str(workspace_id, "workspace_id")
            request = admin_request(
                by or OPERATOR_ID, request_id, "create_member", workspace_id, handle, role
            )
        member, made = self.control.add_member(workspace_id, handle, role, request)
        if made:
            self._record(
                member.workspace_id,
                by,
                "create_member",
                {"member_id": member.id, "handle": member.handle, "role": member.role},
            )
        return member

    def create_token(
        self,
        by: str | None,
        member_id: str,
        label: str,
        workspace_id: str | None,
        purposes: tuple[str, ...],
        read_only: bool,
        expires_in: timedelta | None,
        request_id: str = "",
    ) -> NewToken:
        member_id = v.uuid_str(member_id, "member_id")
        request = admin_request(
            by or OPERATOR_ID, request_id, "create_token",
            member_id, label, sorted(set(purposes)), read_only, _seconds(expires_in),
        )  # fmt: skip
        made = self.control.create_token(
            member_id, label, workspace_id, purposes, read_only, expires_in, request
        )
        self._token_event(
            by,
            "create_token",
            made.token_id,
            {
                "label": label,
                "purposes": list(purposes),
                "read_only": read_only,
                "expires_at": _when(made.expires_at),
            },
        )
        return made

    def revoke_token(self, by: str | None, token_id: str, workspace_id: str | None) -> None:
        # One entry per revocation: a token revoked before changes nothing.
        if self.control.revoke_token(token_id, workspace_id):
            self._token_event(by, "revoke_token", token_id, {})

    def rotate_token(
        self,
        by: str | None,
        token_id: str,
        workspace_id: str | None,
        grace: timedelta | None,
        request_id: str = "",
    ) -> tuple[NewToken, datetime]:
        token_id = v.uuid_str(token_id, "token_id")
        request = admin_request(
            by or OPERATOR_ID, request_id, "rotate_token", token_id, _seconds(grace)
        )
        made, old_expires_at = self.control.rotate_token(token_id, workspace_id, grace, request)
        self._token_event(
            by,
            "rotate_token",
            made.token_id,
            {
                "replaces": token_id,
                "old_expires_at": _when(old_expires_at),
                "expires_at": _when(made.expires_at),
            },
        )
        return made, old_expires_at

    def update_settings(
        self, by: str | None, workspace_id: str, changes: dict[str, Any]
    ) -> WorkspaceSettings:
        was, merged = self.control.change_settings(workspace_id, changes)
        before, after = was.to_json(), merged.to_json()
        changed = {k: [before.get(k), after[k]] for k in changes if before.get(k) != after[k]}
        # The log holds changes (docs/api.md): a setting given its own value is none.
        if changed:
            self._record(workspace_id, by, "update_settings", {"changed": changed})
        return merged

    def _token_event(
        self, by: str | None, action: str, token_id: str, detail: dict[str, Any]
    ) -> None:
        with self.dbs.control_conn() as conn:
            row = conn.execute(q.TOKEN_HOLDER, (token_id,)).fetchone()
        if row is not None:
            workspace_id, member_id = row
            self._record(
                workspace_id, by, action, {"token_id": token_id, "member_id": member_id, **detail}
            )

    def _record(
        self, workspace_id: str, by: str | None, action: str, detail: dict[str, Any]
    ) -> None:
        try:
            ws = self.control.workspace(workspace_id)
            with self.dbs.owner_pool(ws.server, ws.database_name).connection() as conn:
                conn.execute(oq.INSERT_ADMIN_EVENT, (by or OPERATOR_ID, action, Jsonb(detail)))
        except Exception:  # the change stands; its entry is what failed
            log.exception(
                "audit entry not written", extra={"action": action, "workspace_id": workspace_id}
            )
