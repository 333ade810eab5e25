"""The gateway tokens the OAuth resource server (oauth.py) makes for its
callers: one per grant (member, client and scope), made with the admin token, reused
until shortly before it expires, shared by a burst of first requests, and
dropped when the gateway refuses it, after which the access tokens issued
before that are refused so that an owner's revocation holds (docs/agents.md,
"OAuth")."""

from __future__ import annotations

import logging
import math
import threading
import time
import unicodedata
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta

from recallatron.client import Client

log = logging.getLogger("recallatron.mcp.oauth")

# The gateway tokens made for OAuth callers: how long one lives, how much of
# that must be left to reuse it, and how many are kept.
MINTED_LIFETIME = timedelta(hours=1)
MINTED_MARGIN = 300.0
MAX_MINTED = 256
# How long a grant whose gateway token the gateway refused (revoked: by an
# owner, or with its member) refuses the access tokens issued before that
# (or with no `iat` to tell): longer than any access token should live.
REVOKED_KEPT = 24 * 3600.0


def plain_label(text: str) -> str:
    """A token label made of what a JWT says (its client_id and sub, the
    issuer's choice): control and format characters, which the store refuses
    in a label, as '?'; at most the store's 200 characters."""
    return "".join(
        "?" if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text[:200]
    )


class GrantRevoked(Exception):
    """The grant's gateway token was refused since this access token was
    issued: the caller must sign in again for a new one."""


@dataclass(frozen=True)
class Grant:
    """What one OAuth token lets its bearer do, as a gateway token's scope,
    and for which client: each client (connector) of a member has its own
    gateway token, labelled with its client_id, so the token list tells
    them apart and an owner revokes one without cutting off the others."""

    member_id: str
    read_only: bool
    # Empty: all four.
    purposes: tuple[str, ...]
    # The JWT's client_id (or azp).
    client_id: str = ""


class MemberTokens:
    """Gateway tokens made for OAuth callers, one per grant, reused until
    MINTED_MARGIN before they expire, or until the gateway refuses one
    (:meth:`refused`)."""

    def __init__(self, admin: Client) -> None:
        self._admin = admin
        self._made: dict[Grant, tuple[str, float]] = {}
        self._lock = threading.Lock()
        # The making of a grant's token under way: a burst of the grant's first
        # requests (or its renewal) shares that one making, its token or its
        # failure, rather than each making a live token of the member's.
        self._making: dict[Grant, Future[str]] = {}
        # Grant -> the second (epoch, whole) its token was found refused.
        self._revoked: dict[Grant, tuple[int, float]] = {}

    def refused(self, token: str) -> None:
        """The gateway refused ``token`` as unknown or revoked: it is dropped,
        and its grant refuses the access tokens issued before now. Making a
        new one for those would undo an owner's revocation; a caller who
        signs in again (a grant the authorization server still honours) gets
        a new one, if the gateway still makes one for the member."""
        with self._lock:
            grant = next((g for g, (t, _) in self._made.items() if t == token), None)
            if grant is None:  # already replaced, or pushed out
                return
            del self._made[grant]
            if len(self._revoked) >= MAX_MINTED:
                self._revoked.pop(next(iter(self._revoked)))
            self._revoked.pop(grant, None)
            self._revoked[grant] = (math.floor(time.time()), time.monotonic() + REVOKED_KEPT)
        log.info("a gateway token made for an OAuth caller was refused; it signs in again")

    def _check_issued(self, grant: Grant, issued_at: float | None) -> None:
        """Raises GrantRevoked for an access token issued before the grant's
        token was refused (whole seconds, as `iat` is; none: not known)."""
        revoked = self._revoked.get(grant)
        if revoked is None:
            return
        since, kept_until = revoked
        if kept_until <= time.monotonic():
            del self._revoked[grant]
        elif issued_at is None or issued_at < since:
            raise GrantRevoked(f"its gateway token was refused at {since}")

    def token_for(self, grant: Grant, label: str, issued_at: float | None = None) -> str:
        """The grant's gateway token for an access token issued at
        ``issued_at`` (epoch seconds, its `iat`)."""
        with self._lock:
            self._check_issued(grant, issued_at)
            made = self._made.get(grant)
            if made is not None and made[1] - time.monotonic() > MINTED_MARGIN:
                return made[0]
            making = self._making.get(grant)
            mine = making is None
            if making is None:
                making = self._making[grant] = Future()
        if not mine:
            return making.result()
        try:
            answer = self._admin.create_token(
                grant.member_id,
                label=plain_label(label),
                purposes=grant.purposes,
                read_only=grant.read_only,
                expires_in=MINTED_LIFETIME,
            )
        except BaseException as exc:
            with self._lock:
                self._making.pop(grant, None)
            making.set_exception(exc)
            raise
        until = time.monotonic() + MINTED_LIFETIME.total_seconds()
        with self._lock:
            if len(self._made) >= MAX_MINTED:
                self._made.pop(next(iter(self._made)))
            self._made[grant] = (answer.token, until)
            self._making.pop(grant, None)
        making.set_result(answer.token)
        return answer.token
