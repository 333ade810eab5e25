"""Calls inside the stack authenticate (design §4, "Inside the stack"; issue 21).

Every call to store, rank and embed carries a *caller assertion* in metadata:
a short-lived statement, signed with the stack's internal key (HMAC-SHA256),
of who the call is for and which methods it may reach:

- ``member``: a member the gateway authenticated with a token: workspace,
  member, role, purpose. The store and rank then act only for exactly that
  Caller (:func:`check_caller`): a request whose Caller differs is refused.
- ``operator``: the gateway verified the operator token (CreateWorkspace and
  the other admin calls without an owner).
- ``service``: a stack process acting for nobody in particular: the gateway
  authenticating tokens and watching revocations, the embedding job embedding.

An assertion names the methods it is good for (the one the gateway calls, or
for a recall the rank call and the store and embed calls rank makes with it,
which rank forwards unchanged) and expires after ``TTL_SECONDS``. One made
for a single call is also *bound* to that call's request: it carries the
sha256 of the request's bytes (:func:`binding_channel` adds it as the call
is sent), and the server refuses it with any other request; a recall's,
forwarded to several calls, is not bound, only short-lived
(docs/reliability.md, "Inside the stack"). An assertion longer than
``MAX_ASSERTION_BYTES`` is refused before it is decoded. The server
side (:class:`recallatron.grpcserver.Server` with ``internal=True``) refuses
any other call with UNAUTHENTICATED, before the handler runs; health checks
and reflection stay open (they reveal no data: the method names are the
published protos).

The key is 32 random bytes that only the stack's processes hold: generated
into the state directory (mode 0600) by ``recallatron up``, or mounted from a
Kubernetes Secret. Anyone holding it can sign any assertion, so every process
given it is trusted as much as the gateway; see docs/reliability.md."""

from __future__ import annotations

import base64
import contextvars
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recallatron import errors
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import embed_pb2, rank_pb2, store_pb2

HEADER = "x-recallatron-assertion"
VERSION = "v1"
# How long an assertion is good for: a few seconds past the longest deadline
# of a call that carries one (the gateway's calls to the store and rank, 5 s;
# rank's, made within the gateway's, are shorter), so it outlives its call
# and little else. The most a verifier accepts stays at 60 s: the gateways
# and ranks of the previous release sign for 30 s, and a longer one was not
# made by any release.
TTL_SECONDS = 10.0
MAX_TTL_SECONDS = 60.0
# Ours are under 800 bytes (a recall's, naming eight methods, is the
# longest); anything longer is refused before it is decoded or its signature
# computed, so a flood of large garbage costs a length check per call.
MAX_ASSERTION_BYTES = 2048
# All of an internal call's metadata: the assertion and a trace context.
MAX_METADATA_BYTES = 4096
# Clocks of the stack's machines may differ this much.
CLOCK_SKEW_SECONDS = 5.0
MIN_KEY_BYTES = 32

MEMBER = "member"
OPERATOR = "operator"
SERVICE = "service"
KINDS = (MEMBER, OPERATOR, SERVICE)

# Methods that stay open: the standard health service and reflection.
OPEN_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

_SIGNED = b"recallatron-caller-assertion-" + VERSION.encode() + b"."


def method(module: Any, service: str, name: str) -> str:
    """The full name of a method, checked against the service's descriptor."""
    descriptor = module.DESCRIPTOR.services_by_name[service]
    if name not in descriptor.methods_by_name:
        raise KeyError(f"{service} has no method {name}")
    return f"/{descriptor.full_name}/{name}"


def store_method(name: str) -> str:
    return method(store_pb2, "StoreService", name)


def embed_method(name: str) -> str:
    return method(embed_pb2, "EmbedService", name)


RANK = method(rank_pb2, "RankService", "Rank")
# One recall: the rank call and what rank calls with the assertion it got,
# and the entity cards the gateway asks the store for beside it (one
# assertion signed per recall, checked once by each process).
RECALL_METHODS = (
    RANK,
    store_method("NamedEntities"),
    store_method("GetWorkspaceSettings"),
    store_method("LexicalCandidates"),
    store_method("DenseCandidates"),
    store_method("AdmitCandidates"),
    embed_method("Embed"),
    embed_method("Rerank"),
)


# -- the key -----------------------------------------------------------------------


def load_key(key: str = "", key_file: str = "") -> bytes:
    """The stack's internal key: ``key`` itself, else the content of
    ``key_file``; at least 32 bytes. Empty when neither is set."""
    text = key or (Path(key_file).read_text() if key_file else "")
    raw = text.strip().encode()
    if raw and len(raw) < MIN_KEY_BYTES:
        raise ValueError(f"the internal key must hold at least {MIN_KEY_BYTES} bytes")
    return raw


def new_key() -> str:
    """A new key as text (URL-safe base64 of 32 random bytes)."""
    return secrets.token_urlsafe(32)


# -- assertions ----------------------------------------------------------------------


@dataclass(frozen=True)
class Claims:
    kind: str
    methods: tuple[str, ...]
    expires: float
    issuer: str = ""
    workspace_id: str = ""
    member_id: str = ""
    role: int = 0
    purpose: int = 0
    # The sha256 of the one request it was made for (:func:`request_digest`);
    # empty: good for any request to its methods.
    digest: str = ""

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "k": self.kind,
            "m": list(self.methods),
            "e": round(self.expires, 3),
            "i": self.issuer,
            "w": self.workspace_id,
            "u": self.member_id,
            "r": self.role,
            "p": self.purpose,
        }
        if self.digest:
            # Only when bound: an unbound assertion reads as the previous
            # release's, and that release's verifiers ignore the field.
            data["d"] = self.digest
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Claims:
        claims = cls(
            kind=str(data["k"]),
            methods=tuple(str(m) for m in data["m"]),
            expires=float(data["e"]),
            issuer=str(data.get("i", "")),
            workspace_id=str(data.get("w", "")),
            member_id=str(data.get("u", "")),
            role=int(data.get("r", 0)),
            purpose=int(data.get("p", 0)),
            digest=str(data.get("d", "")),
        )
        if claims.kind not in KINDS:
            raise ValueError("unknown kind")
        return claims


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, payload: str) -> bytes:
    return hmac.new(key, _SIGNED + payload.encode(), hashlib.sha256).digest()


def encode(key: bytes, claims: Claims) -> str:
    payload = _b64(json.dumps(claims.as_json(), separators=(",", ":"), sort_keys=True).encode())
    return f"{VERSION}.{payload}.{_b64(_mac(key, payload))}"


def request_digest(data: bytes) -> str:
    """What a bound assertion carries of its request: the sha256 of the
    request's bytes as sent."""
    return _b64(hashlib.sha256(data).digest())


def _too_large(size: int, limit: int, what: str) -> errors.Unauthenticated:
    return errors.Unauthenticated(
        f"internal call: {what} is too large ({size} bytes, at most {limit}); "
        "refused without being checked"
    )


def screened(metadata: Iterable[tuple[str, Any]] | None) -> str:
    """The assertion among a call's metadata, once the metadata and the
    assertion are within their bounds; Unauthenticated otherwise, before
    anything is decoded."""
    token = ""
    size = 0
    for k, v in metadata or ():
        size += len(k) + len(v)
        if k == HEADER and not token:
            token = v if isinstance(v, str) else ""
    if size > MAX_METADATA_BYTES:
        raise _too_large(size, MAX_METADATA_BYTES, "the call's metadata")
    if not token:
        raise errors.Unauthenticated("internal call: no caller assertion (the stack's credential)")
    if len(token) > MAX_ASSERTION_BYTES:
        raise _too_large(len(token), MAX_ASSERTION_BYTES, "the caller assertion")
    return token


# Assertions whose signature checked out, by key and token: one recall's
# assertion reaches a process several times (rank's calls to the store, the
# fairness key read before the handler's check), and each is good for
# seconds. Only the signature and the decoding are remembered; expiry and
# the method are checked on every call.
_VERIFIED: dict[tuple[bytes, str], Claims] = {}
_VERIFIED_MAX = 4096


def _signed_claims(key: bytes, token: str) -> Claims:
    """The claims of a token whose signature is the key's; Unauthenticated
    otherwise. Remembered (``_VERIFIED``) once checked."""
    if len(token) > MAX_ASSERTION_BYTES:
        raise _too_large(len(token), MAX_ASSERTION_BYTES, "the caller assertion")
    cached = _VERIFIED.get((key, token))
    if cached is not None:
        return cached
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != VERSION:
        raise errors.Unauthenticated("internal call: malformed caller assertion")
    payload, signature = parts[1], parts[2]
    try:
        given = _unb64(signature)
    except ValueError:
        raise errors.Unauthenticated("internal call: malformed caller assertion") from None
    if not hmac.compare_digest(given, _mac(key, payload)):
        raise errors.Unauthenticated("internal call: the caller assertion's signature is wrong")
    try:
        claims = Claims.from_json(json.loads(_unb64(payload)))
    except (ValueError, KeyError, TypeError):
        raise errors.Unauthenticated("internal call: malformed caller assertion") from None
    if len(_VERIFIED) >= _VERIFIED_MAX:
        # Tokens live seconds: dropping them all costs one check each again.
        _VERIFIED.clear()
    _VERIFIED[(key, token)] = claims
    return claims


def verify(key: bytes, token: str, called: str, now: float | None = None) -> Claims:
    """The claims of a valid assertion for method ``called``; Unauthenticated
    (saying why, never echoing the token) otherwise."""
    now = time.time() if now is None else now
    claims = _signed_claims(key, token)
    if claims.expires <= now - CLOCK_SKEW_SECONDS:
        raise errors.Unauthenticated("internal call: the caller assertion has expired")
    if claims.expires > now + MAX_TTL_SECONDS + CLOCK_SKEW_SECONDS:
        raise errors.Unauthenticated("internal call: the caller assertion lives too long")
    if called not in claims.methods:
        raise errors.Unauthenticated(
            f"internal call: the caller assertion is not good for {called.rsplit('/', 1)[-1]}"
        )
    return claims


class Signer:
    """Makes assertions with the stack's key, each good for ``ttl`` seconds."""

    def __init__(self, key: bytes, issuer: str, ttl: float = TTL_SECONDS) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError("no internal key: set RECALLATRON_INTERNAL_KEY_FILE")
        self.key = key
        self.issuer = issuer
        self.ttl = ttl

    def bind(self, token: str, called: str, request: bytes) -> str:
        """``token`` bound to one request: when it is this key's, made for
        exactly the method ``called`` and not bound yet, the same claims
        with the request's digest, signed again; otherwise ``token``
        unchanged (a recall's, made for several calls, stays unbound)."""
        try:
            claims = _signed_claims(self.key, token)
        except errors.DomainError:
            return token
        if claims.digest or claims.methods != (called,):
            return token
        bound = Claims(**{**claims.__dict__, "digest": request_digest(request)})
        return encode(self.key, bound)

    def _sign(self, kind: str, methods: Iterable[str], **fields: Any) -> str:
        claims = Claims(
            kind=kind,
            methods=tuple(methods),
            expires=time.time() + self.ttl,
            issuer=self.issuer,
            **fields,
        )
        return encode(self.key, claims)

    def member(self, caller: cpb.Caller, methods: Iterable[str]) -> str:
        """For the member (and purpose) of a Caller the gateway authenticated."""
        return self._sign(
            MEMBER,
            methods,
            workspace_id=caller.workspace_id,
            member_id=caller.member_id,
            role=int(caller.role),
            purpose=int(caller.purpose) or cpb.PURPOSE_ASSIST,
        )

    def owner(self, workspace_id: str, member_id: str, methods: Iterable[str]) -> str:
        return self._sign(
            MEMBER,
            methods,
            workspace_id=workspace_id,
            member_id=member_id,
            role=cpb.ROLE_OWNER,
            purpose=cpb.PURPOSE_ASSIST,
        )

    def operator(self, methods: Iterable[str]) -> str:
        return self._sign(OPERATOR, methods)

    def service(self, methods: Iterable[str]) -> str:
        return self._sign(SERVICE, methods)


def metadata(token: str) -> tuple[tuple[str, str]]:
    return ((HEADER, token),)


# -- the server side: what the current call was vouched for ---------------------------

_CLAIMS: contextvars.ContextVar[Claims | None] = contextvars.ContextVar(
    "recallatron_claims", default=None
)
_TOKEN: contextvars.ContextVar[str] = contextvars.ContextVar("recallatron_assertion", default="")


def authenticate(
    key: bytes, called: str, metadata: Iterable[tuple[str, Any]] | None
) -> tuple[Claims, str]:
    """The verified claims of a call (its metadata within bounds, its
    assertion good for ``called``), and its assertion."""
    token = screened(metadata)
    return verify(key, token, called), token


def check_request(claims: Claims, request: bytes) -> None:
    """A bound assertion is good only for the request it was made for."""
    if claims.digest and not hmac.compare_digest(claims.digest, request_digest(request)):
        raise errors.Unauthenticated(
            "internal call: the caller assertion was made for another request"
        )


def enter(claims: Claims, token: str) -> Callable[[], None]:
    """Makes ``claims`` the current call's; returns the function that undoes it."""
    claims_token = _CLAIMS.set(claims)
    raw_token = _TOKEN.set(token)

    def leave() -> None:
        _CLAIMS.reset(claims_token)
        _TOKEN.reset(raw_token)

    return leave


def asserted() -> Claims:
    """The current call's verified claims. Only inside an internal server's
    handler; anywhere else (a bug) it refuses."""
    claims = _CLAIMS.get()
    if claims is None:
        raise errors.Unauthenticated("internal call: not authenticated")
    return claims


def forwarded() -> str:
    """The assertion the current call came with, to pass on (rank does)."""
    return _TOKEN.get()


def _mismatch(what: str) -> errors.Unauthenticated:
    return errors.Unauthenticated(f"caller: {what} is not the one the caller assertion vouches for")


def check_caller(caller: cpb.Caller) -> Claims:
    """The request's Caller is exactly the member the assertion vouches for."""
    claims = asserted()
    if claims.kind != MEMBER:
        raise _mismatch("a member")
    if caller.workspace_id != claims.workspace_id:
        raise _mismatch("the workspace")
    if caller.member_id != claims.member_id:
        raise _mismatch("the member")
    if int(caller.role) != claims.role:
        raise _mismatch("the role")
    if (int(caller.purpose) or cpb.PURPOSE_ASSIST) != claims.purpose:
        raise _mismatch("the purpose")
    return claims


def check_workspace(workspace_id: str) -> Claims:
    """A call about one workspace: for a member of it (or the operator)."""
    claims = asserted()
    if claims.kind == OPERATOR:
        return claims
    if claims.kind != MEMBER or claims.workspace_id != workspace_id:
        raise _mismatch("the workspace")
    return claims


def check_admin(workspace_id: str) -> Claims:
    """An admin call: the operator, or an owner of the workspace named (which
    must then be named)."""
    claims = asserted()
    if claims.kind == OPERATOR:
        return claims
    if claims.kind != MEMBER or not workspace_id or claims.workspace_id != workspace_id:
        raise _mismatch("the workspace")
    if claims.role != cpb.ROLE_OWNER:
        raise errors.PermissionDenied("this call needs a workspace owner")
    return claims


def check_kind(*kinds: str) -> Claims:
    claims = asserted()
    if claims.kind not in kinds:
        raise _mismatch(" or ".join(kinds))
    return claims
