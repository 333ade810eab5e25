"""The control plane's token records (design §3): making, rotating, listing
and revoking a member's access tokens, and authenticating one. Mixed into
ControlPlane (control.py), whose members and workspaces they check; the
tokens' own rules (lifetimes, the hash kept of a secret) are in tokens.py."""

from __future__ import annotations

import secrets
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from psycopg.errors import ForeignKeyViolation

from recallatron import errors
from recallatron.vocabulary import PURPOSES, TOKEN_EXPIRED, TOKEN_REVOKED
from services.store.domain.admin_requests import AdminRequest, earlier
from services.store.domain.control_records import Identity, Member, Workspace
from services.store.domain.tokens import (
    MAX_LIVE_TOKENS,
    NewToken,
    hash_token,
    replayed_request,
    rotation_grace,
    token_label,
    token_lifetime,
)
from services.store.domain.validation import uuid_str
from services.store.infrastructure.db import Databases
from services.store.sql import queries as q

TOKEN_PREFIX = "rct_"


class TokenRecords:
    """ControlPlane's token calls: ``dbs`` and the member and workspace
    lookups below are the control plane's own."""

    dbs: Databases

    if TYPE_CHECKING:

        def member(self, member_id: str) -> Member: ...

        def member_in_workspace(
            self, workspace_id: str, member_id: str, live: bool = False
        ) -> bool: ...

        def workspace_in_field(self, workspace_id: str, field_name: str) -> Workspace: ...

    def create_token(
        self,
        member_id: str,
        label: str = "",
        workspace_id: str | None = None,
        purposes: tuple[str, ...] = (),
        read_only: bool = False,
        expires_in: timedelta | None = None,
        request: AdminRequest | None = None,
    ) -> NewToken:
        """``request``: the client's request id, when given (a retry of it
        is refused with the token the first attempt made, never a second)."""
        member_id = uuid_str(member_id, "member_id")
        lifetime = token_lifetime(expires_in)
        token_label(label)
        if request is not None:
            # First: a retry is answered so whatever changed since its first attempt.
            with self.dbs.control_conn() as conn:
                self._check_request(conn, request)
        # Named as ListTokens names it; one of another workspace is answered
        # as one that does not exist.
        missing = errors.NotFound(f"member_id: no member {member_id!r}")
        try:
            member = self.member(member_id)
        except errors.NotFound:
            raise missing from None
        if workspace_id and member.workspace_id != workspace_id:
            raise missing
        if not self.member_in_workspace(member.workspace_id, member_id, live=True):
            raise errors.FailedPrecondition("member_id: the member was removed", "member_id")
        scope = sorted(set(purposes), key=PURPOSES.index)
        try:
            with self.dbs.control_conn() as conn:
                if request is not None:
                    conn.execute(q.REQUEST_TURN, (request.key,))
                    self._check_request(conn, request)
                return self._insert_token(
                    conn, member_id, label, scope, read_only, lifetime, request
                )
        except ForeignKeyViolation:
            # The member's workspace was deleted since the checks above.
            raise missing from None

    @staticmethod
    def _check_request(conn: Any, request: AdminRequest) -> None:
        """Refuses a request id that already made a token (or anything else)."""
        found = earlier(conn, request)
        if found is not None:
            raise replayed_request(request, *found)

    @staticmethod
    def _insert_token(
        conn: Any,
        member_id: str,
        label: str,
        purposes: list[str],
        read_only: bool,
        lifetime: timedelta | None,
        request: AdminRequest | None = None,
    ) -> NewToken:
        free = conn.execute(q.NO_DELETION_UNDER_WAY, (member_id,)).fetchone()
        if free is not None and not free[0]:
            raise errors.FailedPrecondition(
                "member_id: the member's workspace is being deleted", "member_id"
            )
        importing = conn.execute(q.MEMBER_WORKSPACE_IMPORTING, (member_id,)).fetchone()
        if importing is not None and importing[0]:
            # Served to nobody until the import has ended (docs/export.md).
            raise errors.FailedPrecondition(
                "member_id: the member's workspace is being imported; tokens are made once "
                "its import has ended",
                "member_id",
            )
        conn.execute(q.TOKEN_TURN, (member_id,))
        live = conn.execute(q.MEMBER_HELD, (member_id,)).fetchone()
        if live is not None and not live[0]:
            # Removed since the caller's checks, before this transaction.
            raise errors.FailedPrecondition("member_id: the member was removed", "member_id")
        held = conn.execute(q.LIVE_TOKENS_OF_MEMBER, (member_id,)).fetchone()
        if held is not None and int(held[0]) >= MAX_LIVE_TOKENS:
            # Past it, their token list would leave a live one out.
            raise errors.FailedPrecondition(
                f"member_id: the member holds {int(held[0])} live tokens, as many as a member "
                "may; revoke some first (or rotate with grace 0)",
                "member_id",
            )
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = str(uuid.uuid4())
        row = conn.execute(
            q.INSERT_TOKEN,
            {
                "id": token_id,
                "member_id": member_id,
                "sha256": hash_token(token),
                "label": label,
                "purposes": purposes or None,
                "read_only": read_only,
                "lifetime": lifetime,
                "request_key": request.key if request else None,
                "request_call": request.call if request else None,
                "request_asked": request.asked if request else None,
            },
        ).fetchone()
        return NewToken(token, token_id, row[0])

    def rotate_token(
        self,
        token_id: str,
        workspace_id: str | None = None,
        grace: timedelta | None = None,
        request: AdminRequest | None = None,
    ) -> tuple[NewToken, datetime]:
        """A new token for the old one's member, scope and lifetime policy;
        the old one expires after ``grace``. Returns the new token and the old
        one's expiry. Published like a revocation, so that every gateway drops
        what it cached of the old token (and its former expiry). ``request``:
        as create_token's."""
        token_id = uuid_str(token_id, "token_id")
        grace = rotation_grace(grace)
        with self.dbs.control_conn() as conn:
            if request is not None:
                # Before the old token's checks: a retry after a rotation with
                # grace 0 finds it expired, yet is answered as a retry.
                conn.execute(q.REQUEST_TURN, (request.key,))
                self._check_request(conn, request)
            # The member first, then the token, as a removal takes them: the
            # other order deadlocked a rotation and a removal made together.
            conn.execute(q.TOKEN_MEMBER_HELD, (token_id,))
            old = conn.execute(
                q.TOKEN_TO_ROTATE, {"id": token_id, "workspace_id": workspace_id}
            ).fetchone()
            if old is None:
                raise errors.NotFound(f"token_id: no token {token_id!r}, or it was revoked")
            member_id, label, purposes, read_only, lifetime, expired = old
            if expired:
                raise errors.FailedPrecondition(
                    "token_id: the token has expired (or was rotated with no grace); "
                    "create a new one instead",
                    "token_id",
                )
            # Shortened first: one ending at once holds no place among the
            # member's live tokens when the new one is counted.
            shortened = conn.execute(q.SHORTEN_EXPIRY, {"id": token_id, "grace": grace}).fetchone()
            assert shortened is not None  # the row is locked above
            old_expires_at: datetime = shortened[0]
            made = self._insert_token(
                conn, str(member_id), label, list(purposes or ()), read_only, lifetime, request
            )
            conn.execute(q.NOTIFY_REVOKED, (token_id,))
        return made, old_expires_at

    def token_listing(
        self, member_id: str | None, workspace_id: str | None
    ) -> tuple[str | None, str | None]:
        """Whose tokens a listing covers, checked: a member's (within the
        workspace, when one is named) or a workspace's; their canonical ids
        (token_pages.py lists them)."""
        if member_id:
            member_id = uuid_str(member_id, "member_id")
        if not member_id and not workspace_id:
            raise errors.InvalidArgument("member_id", "is required")
        if workspace_id:
            workspace_id = uuid_str(workspace_id, "workspace_id")
            self.workspace_in_field(workspace_id, "workspace_id")  # NotFound when there is none
        # A member nobody holds is told, never answered an empty list as if
        # they held no tokens; one of another workspace is answered alike.
        if member_id and not self._member_listed(member_id, workspace_id):
            raise errors.NotFound(f"member_id: no member {member_id!r}")
        return member_id or None, workspace_id or None

    def _member_listed(self, member_id: str, workspace_id: str | None) -> bool:
        """Whether the member exists (in ``workspace_id``, when named)."""
        if workspace_id:
            return self.member_in_workspace(workspace_id, member_id)
        try:
            self.member(member_id)
        except errors.NotFound:
            return False
        return True

    def revoke_token(self, token_id: str, workspace_id: str | None = None) -> bool:
        """True when this call revoked the token; False when it was revoked
        before (answered alike: a retry's goal is met)."""
        token_id = uuid_str(token_id, "token_id")
        with self.dbs.control_conn() as conn:
            row = conn.execute(
                q.REVOKE_TOKEN, {"id": token_id, "workspace_id": workspace_id}
            ).fetchone()
            if row is not None and row[1]:
                conn.execute(q.NOTIFY_REVOKED, (token_id,))
        if row is None:
            raise errors.NotFound(f"token_id: no token {token_id!r}")
        return bool(row[1])

    def authenticate(self, token: str) -> Identity:
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            raise errors.NotFound("unknown token")
        digest = hash_token(token)
        with self.dbs.control_conn() as conn:
            row = conn.execute(q.AUTHENTICATE, (digest,)).fetchone()
            if row is not None and not row[8] and not row[10] and row[9]:
                # At most once a minute per token: never a write per call.
                conn.execute(q.TOUCH_TOKEN, {"id": row[6]})
            # A deleted workspace's token: once issued, so revoked, not unknown.
            retired = row is None and conn.execute(q.RETIRED_TOKEN, (digest,)).fetchone()
        if retired:
            raise errors.NotFound(TOKEN_REVOKED)
        if row is None:
            raise errors.NotFound("unknown token")
        # Told apart from an unknown token for the gateway's failure budget
        # only (a token once issued is a stale client, not a guess); the
        # caller hears "unknown or revoked" for both.
        if row[10]:
            raise errors.NotFound(TOKEN_REVOKED)
        if row[8]:
            raise errors.NotFound(TOKEN_EXPIRED)
        return Identity(
            str(row[0]),
            row[1],
            str(row[2]),
            row[3],
            tuple(row[4] or ()),
            row[5],
            row[7],
            member_handle=row[11],
        )
