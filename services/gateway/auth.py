"""Who is calling the gateway: the bearer token of each call checked against
the store (remembered by the auth cache while the revocation stream is live),
the operator's token, the token's rate and scope, and failed guesses limited
per client address."""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from datetime import UTC

import grpc

from recallatron import errors
from recallatron.grpcserver import current_method
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import store_pb2
from recallatron.vocabulary import TOKEN_EXPIRED, TOKEN_REVOKED
from services.gateway import forwarded, scopes
from services.gateway import peers as calls
from services.gateway.admissions import ADMISSION_KEY, Admissions
from services.gateway.authcache import AuthCache, Identity
from services.gateway.peers import Peers
from services.gateway.ratelimit import FailureLimiter, RateLimiter


def bearer_of(authorization: str | None) -> str:
    """The token of an ``authorization`` value ("Bearer <token>"; None: none sent)."""
    if authorization is None:
        raise errors.Unauthenticated("authorization: missing bearer token")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    raise errors.Unauthenticated("authorization: expected 'Bearer <token>'")


def one_authorization(values: Sequence[str]) -> str | None:
    """The one ``authorization`` value a call carries (None: none sent). Two
    or more are refused, never one of them chosen: each may name another
    member (a proxy's beside its client's), and the caller is not told which
    one acted."""
    if len(values) > 1:
        raise errors.Unauthenticated("authorization: only one Authorization may be sent")
    return values[0] if values else None


def authorization_of(context: grpc.ServicerContext) -> str | None:
    """The call's one ``authorization`` metadata value, if any."""
    return one_authorization(
        [str(v) for k, v in context.invocation_metadata() if k == "authorization"]
    )


def bearer_token(context: grpc.ServicerContext) -> str:
    return bearer_of(authorization_of(context))


def metadata_value(context: grpc.ServicerContext, name: str) -> str | None:
    for key, value in context.invocation_metadata():
        if key == name:
            return str(value)
    return None


class Auth:
    def __init__(
        self,
        peers: Peers,
        admin_token: str,
        limiter: RateLimiter | None = None,
        cache: AuthCache | None = None,
        failures: FailureLimiter | None = None,
    ) -> None:
        self.peers = peers
        self.admin_token = admin_token
        self.limiter = limiter or RateLimiter(0, 1)
        self.failures = failures or FailureLimiter(0, 1)
        # Off (never live) unless a RevocationWatcher drives it.
        self.cache = cache or AuthCache(0, 0)
        self.admissions = Admissions()

    def token(self, context: grpc.ServicerContext) -> str:
        token = bearer_token(context)
        self.limiter.check(token)
        return token

    def member(self, context: grpc.ServicerContext) -> Identity:
        """The member a token belongs to, with the call checked against the
        token's scope."""
        return self._member(context, self.token(context))

    def _member(self, context: grpc.ServicerContext, token: str) -> Identity:
        """:meth:`member` for the call's ``token``, already taken from its
        rate-limit bucket (once per call, however many checks it makes)."""
        ident = self._identity(context, token)
        scopes.check_call(ident.purposes, ident.read_only, current_method())
        return ident

    def admit(
        self, method: str, authorization: str | None, peer: str
    ) -> tuple[tuple[str, str], ...]:
        """A call that reaches the gateway other than on its gRPC port (the
        HTTP/JSON adapter), checked before its request is read, as the gRPC
        path checks its caller: the token is the operator's or one the store
        knows (an unknown one spends ``peer``'s failed-authentication
        allowance), and the call lies within its scope. ``method`` is the full
        name; the calls of scopes.OPEN_CALLS need no token. Returns the
        metadata the call relayed to the gRPC port carries so that its token
        is not looked up again (admissions.py); that call is checked again,
        scope and rate limit included, when it is served."""
        if method in scopes.OPEN_CALLS:
            return ()
        token = bearer_of(authorization)
        if self._is_admin_token(token):
            return ()
        generation = self.cache.generation()
        ident = self._identity_of(token, peer)
        scopes.check_call(ident.purposes, ident.read_only, method)
        return ((ADMISSION_KEY, self.admissions.issue(token, ident, generation)),)

    def _identity(self, context: grpc.ServicerContext, token: str) -> Identity:
        ticket = metadata_value(context, ADMISSION_KEY)
        if ticket is not None:
            admitted = self.admissions.redeem(ticket, token, self.cache.generation())
            if admitted is not None:
                return admitted
        return self._identity_of(token, forwarded.peer(context))

    def _identity_of(self, token: str, peer: str) -> Identity:
        cached = self.cache.get(token)
        if cached is not None:
            return cached
        if self._is_admin_token(token):
            # The operator's own token on a member's method: refused as before,
            # but saying why, never asked of the store, and no guess that
            # spends the address's failed-authentication budget.
            raise errors.Unauthenticated(
                "authorization: the operator token is not a member's token; this call "
                "needs a member's token"
            )
        # A peer that sent too many unknown tokens is refused before the store is asked.
        self.failures.check(peer)
        generation = self.cache.generation()
        try:
            resp = self.peers.store.call(
                calls.AUTHENTICATE,
                store_pb2.AuthenticateRequest(token=token),
                self.peers.service(calls.AUTHENTICATE.path),
            )
        except errors.Relayed as exc:
            if exc.code == grpc.StatusCode.NOT_FOUND.value[0]:
                # Only a token never issued is a guess; a stale client's
                # calls must not lock out its neighbours at the same address.
                if exc.message not in (TOKEN_EXPIRED, TOKEN_REVOKED):
                    self.failures.failed(peer)
                if exc.message == TOKEN_EXPIRED:
                    # Says that it expired, never whose it was.
                    raise errors.Unauthenticated("authorization: token expired") from None
                raise errors.Unauthenticated("authorization: unknown or revoked token") from None
            raise
        identity = Identity(
            resp.workspace_id,
            resp.member_id,
            resp.role,
            frozenset(resp.purposes),
            resp.read_only,
            resp.expires_at.ToDatetime(tzinfo=UTC).timestamp()
            if resp.HasField("expires_at")
            else None,
            resp.workspace_slug,
            resp.member_handle,
        )
        self.cache.put(token, identity, generation)
        return identity

    def operator(self, context: grpc.ServicerContext, refusal: str) -> None:
        """Refuses a call only the operator may make, ``refusal`` saying why
        (PERMISSION_DENIED) to a member's token; any other token (unknown,
        expired, revoked) is UNAUTHENTICATED as on every call and over
        HTTP/JSON (:meth:`admit`), an unknown one spending the address's
        failed-authentication allowance."""
        token = self.token(context)
        if self._is_admin_token(token):
            return
        self._identity(context, token)
        raise errors.PermissionDenied(refusal)

    def _is_admin_token(self, token: str) -> bool:
        return bool(self.admin_token) and hmac.compare_digest(token, self.admin_token)

    def owner(self, context: grpc.ServicerContext, to: str) -> Identity:
        """The member, who must own the workspace ``to`` make this call."""
        ident = self.member(context)
        if ident.role != cpb.ROLE_OWNER:
            raise errors.PermissionDenied(f"only a workspace owner may {to}")
        return ident

    def operator_or_owner(self, context: grpc.ServicerContext) -> Identity | None:
        """None for the operator; the owner's identity otherwise."""
        token = self.token(context)
        if self._is_admin_token(token):
            return None
        ident = self._member(context, token)
        if ident.role != cpb.ROLE_OWNER:
            raise errors.PermissionDenied("this call needs a workspace owner's token")
        return ident
