"""The streamable-HTTP server as an OAuth 2.1 resource server (the MCP
authorization specification): it publishes its protected-resource metadata
(RFC 9728), answers a request without a valid token with 401 and a
`WWW-Authenticate` naming that metadata, and accepts a JWT access token only
when it was issued for this server: signed by a key of the issuer's JWKS, `iss`
the configured issuer, `aud` this server's resource URL (RFC 8707), not
expired. The authorization server is someone else's; this module only checks
its tokens.

A token's member is a claim (RECALLATRON_MCP_OAUTH_MEMBER_CLAIM, default `sub`:
the member id) and its scopes say what it may do: `recallatron:read` (the
read-only tools), `recallatron:write` (every tool), and optionally
`recallatron:purpose:<purpose>` to narrow the purposes (none: all four). The
gateway knows only its own tokens, so the server makes one per member,
client and scope with an owner's or the operator's token (RECALLATRON_MCP_OAUTH_ADMIN_TOKEN
or _FILE), short-lived and reused while it lives, and the gateway applies that
scope to every call as it does for any token (docs/agents.md, "OAuth").

The project's own member tokens are still accepted as they are: a bearer token
that is not a JWT is checked with the gateway (GetSettings) and then
forwarded unchanged."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import grpc
import jwt
from mcp.server.auth.provider import AccessToken
from starlette.authentication import AuthenticationError

from recallatron import errors
from recallatron.client import Client
from recallatron.grpcclient import peer_status
from recallatron.secretfiles import token_from
from recallatron.v1 import gateway_pb2 as pb
from recallatron.vocabulary import PURPOSES
from recallatron_mcp.gateway_tokens import MAX_MINTED, Grant, GrantRevoked, MemberTokens

log = logging.getLogger("recallatron.mcp.oauth")

READ = "recallatron:read"
WRITE = "recallatron:write"
PURPOSE_PREFIX = "recallatron:purpose:"
SCOPES = [READ, WRITE, *(f"{PURPOSE_PREFIX}{p}" for p in PURPOSES)]
# Asymmetric algorithms only: never `none`, never a shared secret.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")

# How long the check of a member token of the project's own holds, valid or
# not (a token revoked meanwhile is refused by the gateway at the tool call).
OWN_TOKEN_TTL = 60.0
# After the issuer's metadata or keys could not be had, JWTs needing them are
# answered 503 for this long without asking again: an issuer that does not
# answer costs one lookup's wait per period, not every JWT's.
KEYS_RETRY_SECONDS = 30.0
# How long one fetch of the issuer's metadata (each of up to three URLs) or
# keys may wait: a JWT's check holds a worker thread the tool calls use too.
FETCH_TIMEOUT = 5.0
OWN_CLIENT_ID = "recallatron-token"
# The gateway's refusals of a gateway token for a JWT's member that say the
# member cannot be served (unknown, of another workspace, removed): the token
# is no good here, 401. Any other failure (the gateway away, overloaded,
# failing) says nothing of the token: 503, and the client retries.
MEMBER_REFUSED = frozenset(
    {
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
    }
)


# The gateway's answers to a member token's check that say nothing of the
# token: it was never looked at (the gateway away, late, failing, or refusing
# the address's unknown tokens for a while, RESOURCE_EXHAUSTED).
NOT_CHECKED = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.CANCELLED,
    }
)


class CannotCheckNow(AuthenticationError):
    """A token that cannot be checked or served for now: answered 503 with
    Retry-After (server.py), not 401, which would send an MCP client back
    through its whole sign-in for a dependency briefly away."""

    def __init__(self, why: str, retry_after: float = errors.RETRY_AFTER_SECONDS) -> None:
        super().__init__(why)
        self.retry_after = retry_after

    @property
    def retry_after_header(self) -> str:
        """Retry-After in whole seconds, rounded up: never shorter than asked."""
        return str(max(1, math.ceil(self.retry_after)))


@dataclass(frozen=True)
class OAuthSettings:
    """From the environment (from_env): RECALLATRON_MCP_OAUTH_ISSUER turns it on."""

    issuer: str
    # This server's canonical URL (its /mcp endpoint): the audience tokens must name.
    resource: str
    gateway: str = ""
    # Else found from the issuer's metadata (RFC 8414, then OpenID discovery).
    jwks_url: str = ""
    member_claim: str = "sub"
    scope_claim: str = "scope"
    admin_token: str = ""
    leeway: float = 30.0
    fetch_timeout: float = FETCH_TIMEOUT

    @classmethod
    def from_env(cls, gateway: str, env: Mapping[str, str] = os.environ) -> OAuthSettings | None:
        issuer = env.get("RECALLATRON_MCP_OAUTH_ISSUER", "").strip()
        if not issuer:
            return None
        resource = env.get("RECALLATRON_MCP_RESOURCE_URL", "").strip()
        if not resource:
            raise ValueError(
                "RECALLATRON_MCP_OAUTH_ISSUER is set but RECALLATRON_MCP_RESOURCE_URL is not: "
                "set it to this server's public URL, such as https://memory.example.com/mcp"
            )
        admin = token_from(env="RECALLATRON_MCP_OAUTH_ADMIN_TOKEN")
        if not admin:
            raise ValueError(
                "RECALLATRON_MCP_OAUTH_ISSUER is set but neither RECALLATRON_MCP_OAUTH_ADMIN_TOKEN "
                "nor RECALLATRON_MCP_OAUTH_ADMIN_TOKEN_FILE is: give an owner's or the operator's "
                "token, with which the server makes its OAuth callers' gateway tokens"
            )
        return cls(
            issuer=issuer,
            resource=resource,
            gateway=gateway,
            jwks_url=env.get("RECALLATRON_MCP_OAUTH_JWKS_URL", "").strip(),
            member_claim=env.get("RECALLATRON_MCP_OAUTH_MEMBER_CLAIM", "sub").strip() or "sub",
            scope_claim=env.get("RECALLATRON_MCP_OAUTH_SCOPE_CLAIM", "scope").strip() or "scope",
            admin_token=admin,
        )


class MemberAccess(AccessToken):
    """A verified caller with the gateway token its tool calls carry."""

    gateway_token: str
    # The gateway token was made by this server for an OAuth caller (not the
    # caller's own member token): MemberTokens.refused applies to it.
    made_here: bool = False


def scopes_of(claims: Mapping[str, Any], claim: str) -> list[str]:
    """The token's scopes: a space-separated string (RFC 9068 `scope`) or a list (`scp`)."""
    value = claims.get(claim)
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [str(v) for v in value]
    return []


def grant_of(member_id: str, scopes: list[str], client_id: str = "") -> Grant:
    purposes = tuple(p for p in PURPOSES if f"{PURPOSE_PREFIX}{p}" in scopes)
    return Grant(member_id, WRITE not in scopes, purposes, client_id)


def granted_scopes(scopes: list[str]) -> list[str]:
    """The scopes as the bearer middleware checks them: write includes read."""
    return sorted({*scopes, READ}) if WRITE in scopes else scopes


def looks_like_jwt(token: str) -> bool:
    return token.count(".") == 2 and token.startswith("eyJ")


def token_shaped(token: str) -> bool:
    """Whether ``token`` can be a token at all: printable ASCII, no spaces
    (anything else cannot even travel to the gateway as call metadata)."""
    return all("!" <= ch <= "~" for ch in token)


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata is: RFC 8414 §3.1 (the well-known part
    inserted before the issuer's path), then OpenID Connect discovery."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{issuer.rstrip('/')}/.well-known/openid-configuration",
    ]


def discover_jwks(issuer: str, timeout: float = FETCH_TIMEOUT) -> str:
    """The issuer's jwks_uri, from metadata whose issuer is exactly ``issuer``."""
    for url in metadata_urls(issuer):
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                metadata = json.load(answer)
        except (OSError, ValueError):
            continue
        if metadata.get("issuer") == issuer and metadata.get("jwks_uri"):
            return str(metadata["jwks_uri"])
    raise LookupError(f"no authorization server metadata with a jwks_uri for {issuer}")


class RecentFailure:
    """The last failed lookup of the issuer's metadata or keys, remembered
    KEYS_RETRY_SECONDS: meanwhile a lookup fails at once, as that one did."""

    def __init__(self) -> None:
        # (when, why)
        self._last: tuple[float, str] | None = None

    def raise_if_recent(self) -> None:
        last = self._last
        if last is not None and time.monotonic() - last[0] < KEYS_RETRY_SECONDS:
            raise LookupError(last[1])

    def record(self, why: str) -> None:
        self._last = (time.monotonic(), why)

    def retry_after(self) -> float:
        """Until the issuer is asked again, else a moment."""
        last = self._last
        if last is None:
            return errors.RETRY_AFTER_SECONDS
        left = KEYS_RETRY_SECONDS - (time.monotonic() - last[0])
        return max(errors.RETRY_AFTER_SECONDS, left)


class IssuerKeys(jwt.PyJWKClient):
    """The issuer's JWKS, cached as the library does; each fetch bounded by
    the settings' timeout and its failure remembered, so the JWTs queued
    behind a fetch that timed out (the library fetches under one lock) are
    answered at once rather than each waiting out a fetch of its own."""

    def __init__(self, url: str, timeout: float, failure: RecentFailure) -> None:
        super().__init__(url, cache_jwk_set=True, lifespan=300, timeout=timeout)
        self._failure = failure

    def fetch_data(self) -> Any:
        self._failure.raise_if_recent()
        try:
            return super().fetch_data()
        except jwt.PyJWKClientConnectionError as exc:
            self._failure.record(str(exc))
            raise
        except (OSError, ValueError, jwt.PyJWKClientError, jwt.PyJWKSetError) as exc:
            # What escapes the library unwrapped (a connection reset while
            # reading, an answer that is not JSON) or is no key set (not an
            # object, no usable key: a proxy's page): the keys are as out of
            # reach as for a timeout, and nothing is known of the token.
            why = f"the issuer's keys could not be had from {self.uri}: {exc}"
            self._failure.record(why)
            raise jwt.PyJWKClientConnectionError(why) from exc


class Verifier:
    """The SDK's TokenVerifier: a JWT of the issuer for this resource, or a
    member token of the project's own. None refuses (401); CannotCheckNow
    says to come back later (503)."""

    def __init__(
        self,
        settings: OAuthSettings,
        client_of: Callable[[str], Client],
        minted: MemberTokens,
    ) -> None:
        self.settings = settings
        self._client_of = client_of
        self._minted = minted
        self._jwks: IssuerKeys | None = None
        self._keys_failed = RecentFailure()
        self._own: dict[bytes, tuple[bool, float]] = {}
        self._lock = threading.Lock()
        # The issuer is looked up under a lock of its own: the checks of the
        # members' own tokens need no issuer and never wait for it.
        self._keys_lock = threading.Lock()

    async def verify_token(self, token: str) -> AccessToken | None:
        check = self._check_jwt if looks_like_jwt(token) else self._check_own
        return await anyio.to_thread.run_sync(check, token)

    # -- JWTs of the authorization server ------------------------------------------

    def _keys(self) -> IssuerKeys:
        with self._keys_lock:
            if self._jwks is not None:
                return self._jwks
            self._keys_failed.raise_if_recent()
            timeout = self.settings.fetch_timeout
            try:
                url = self.settings.jwks_url or discover_jwks(self.settings.issuer, timeout)
            except LookupError as exc:
                self._keys_failed.record(str(exc))
                raise
            self._jwks = IssuerKeys(url, timeout, self._keys_failed)
            return self._jwks

    def claims(self, token: str) -> dict[str, Any]:
        """The token's claims when it is valid for this resource; raises
        jwt.PyJWTError (or LookupError: no keys) otherwise."""
        key = self._keys().get_signing_key_from_jwt(token)
        resource = self.settings.resource
        claims: dict[str, Any] = jwt.decode(
            token,
            key.key,
            algorithms=list(ALGORITHMS),
            # The resource URL, with or without a trailing slash.
            audience=[resource.rstrip("/"), resource.rstrip("/") + "/"],
            issuer=self.settings.issuer,
            leeway=self.settings.leeway,
            options={"require": ["exp", "iss", "aud"]},
        )
        return claims

    def _check_jwt(self, token: str) -> AccessToken | None:
        try:
            claims = self.claims(token)
        except (LookupError, jwt.PyJWKClientConnectionError) as exc:
            # The issuer's metadata or keys out of reach: nothing is known of
            # the token, so the client is asked to come back, not to sign in.
            log.warning("bearer JWT not checked, the issuer's keys are out of reach: %s", exc)
            raise CannotCheckNow(
                "the authorization server's keys cannot be had now", self._keys_failed.retry_after()
            ) from None
        except jwt.PyJWTError as exc:
            log.info("bearer JWT refused: %s", exc)
            return None
        member = claims.get(self.settings.member_claim)
        if not isinstance(member, str) or not member:
            log.info("bearer JWT refused: no %s claim", self.settings.member_claim)
            return None
        scopes = scopes_of(claims, self.settings.scope_claim)
        client_id = str(claims.get("client_id") or claims.get("azp") or "oauth")
        gateway_token = ""
        issued = claims.get("iat")
        if READ in scopes or WRITE in scopes:
            try:
                gateway_token = self._minted.token_for(
                    grant_of(member, scopes, client_id),
                    f"mcp-oauth {client_id} {claims.get('sub', '')}",
                    issued if isinstance(issued, (int, float)) else None,
                )
            except GrantRevoked as exc:
                log.info("bearer JWT refused: %s", exc)
                return None
            except grpc.RpcError as exc:
                status = peer_status(exc)
                log.warning("no gateway token for an OAuth caller: %s", status.code)
                if status.code in MEMBER_REFUSED:
                    return None
                raise CannotCheckNow(
                    f"the memory service cannot serve this token now ({status.code.name})",
                    status.retry_after or errors.RETRY_AFTER_SECONDS,
                ) from None
        return MemberAccess(
            token=token,
            client_id=client_id,
            scopes=granted_scopes(scopes),
            expires_at=int(claims["exp"]),
            resource=self.settings.resource,
            subject=str(claims.get("sub", member)),
            claims={"iss": self.settings.issuer},
            gateway_token=gateway_token,
            made_here=bool(gateway_token),
        )

    # -- the project's own member tokens -------------------------------------------

    def _check_own(self, token: str) -> AccessToken | None:
        """Checked with the gateway (GetSettings: any member may call it, and
        it authenticates), the answer kept OWN_TOKEN_TTL either way; no answer
        (NOT_CHECKED) is CannotCheckNow, kept not at all. One no
        token could be is refused here: gRPC would refuse to send it with an
        INTERNAL status, which is not the gateway's UNAUTHENTICATED and so
        would pass it as valid."""
        if not token_shaped(token):
            return None
        digest = hashlib.sha256(token.encode()).digest()
        with self._lock:
            known = self._own.get(digest)
        if known is None or known[1] <= time.monotonic():
            client = self._client_of(token)
            valid = True
            try:
                client.call(client.admin.GetSettings, pb.GetSettingsRequest())
            except grpc.RpcError as exc:
                status = peer_status(exc)
                if status.code in NOT_CHECKED:
                    # The gateway said nothing of the token (away, failing,
                    # or refusing this address's guesses for now): neither
                    # admitted nor kept, 503 as for a JWT it cannot serve.
                    log.warning("a member token not checked: %s", status.code)
                    raise CannotCheckNow(
                        f"the memory service cannot check this token now ({status.code.name})",
                        status.retry_after or errors.RETRY_AFTER_SECONDS,
                    ) from None
                # Any other refusal (a scope's PERMISSION_DENIED) came after
                # the gateway knew the token: only UNAUTHENTICATED is not.
                valid = status.code != grpc.StatusCode.UNAUTHENTICATED
            known = (valid, time.monotonic() + OWN_TOKEN_TTL)
            with self._lock:
                if len(self._own) >= MAX_MINTED:
                    self._own.pop(next(iter(self._own)))
                self._own[digest] = known
        return self._own_access(token, digest) if known[0] else None

    def _own_access(self, token: str, digest: bytes) -> AccessToken:
        # Its scope is the gateway's to apply; here it passes as both scopes.
        return MemberAccess(
            token=token,
            client_id=OWN_CLIENT_ID,
            scopes=[READ, WRITE],
            resource=self.settings.resource,
            subject=digest.hex()[:32],
            gateway_token=token,
        )
