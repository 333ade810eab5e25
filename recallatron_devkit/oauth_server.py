"""A small OAuth 2.1 authorization server for development and tests, to stand
where a real one (an identity provider) stands in front of the MCP server's
OAuth mode (recallatron_mcp/oauth.py). It publishes its metadata (RFC 8414)
and its signing key (JWKS), registers clients dynamically (RFC 7591), and
issues RS256 JWT access tokens (RFC 9068) whose `aud` is the `resource` the
client asked for (RFC 8707), by the authorization-code grant with PKCE (S256
only) and by client credentials. It approves every authorization request at
once as one configured member (no login page), so an MCP client completes the
flow headlessly. Not for production: keys live in memory, approval is
automatic.

    python -m recallatron_devkit.oauth_server --member <member id> --listen 127.0.0.1:7430
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

SCOPES = (
    "recallatron:read",
    "recallatron:write",
    "recallatron:purpose:assist",
    "recallatron:purpose:automate",
    "recallatron:purpose:personalize",
    "recallatron:purpose:audit",
)
TOKEN_LIFETIME = 600


def _error(error: str, description: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=status)


@dataclass
class _Code:
    client_id: str
    redirect_uri: str
    challenge: str
    scope: str
    resource: str
    made: float = field(default_factory=time.monotonic)


class AuthorizationServer:
    """``issuer``: its own URL (http://host:port); ``member``: the member id
    every approved request acts for (the token's `sub`)."""

    def __init__(self, issuer: str, member: str, lifetime: int = TOKEN_LIFETIME) -> None:
        self.issuer = issuer.rstrip("/")
        self.member = member
        self.lifetime = lifetime
        # What the person approves of what a client asks: a test narrows it.
        self.consent: tuple[str, ...] = SCOPES
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = uuid.uuid4().hex[:16]
        self.clients: dict[str, dict[str, Any]] = {}
        self._codes: dict[str, _Code] = {}
        self._lock = threading.Lock()

    # -- tokens ---------------------------------------------------------------

    def issue(
        self,
        audience: str | list[str] | None,
        scope: str = "recallatron:read recallatron:write",
        *,
        subject: str | None = None,
        client_id: str = "devkit",
        lifetime: int | None = None,
        issuer: str | None = None,
        key: rsa.RSAPrivateKey | None = None,
    ) -> str:
        """An access token; tests pass other values to make bad ones."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": issuer or self.issuer,
            "sub": subject or self.member,
            "client_id": client_id,
            "scope": scope,
            "iat": now,
            "exp": now + (self.lifetime if lifetime is None else lifetime),
            "jti": uuid.uuid4().hex,
        }
        if audience:
            claims["aud"] = audience
        headers = {"kid": self.kid, "typ": "at+jwt"}
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers=headers)

    def _scope(self, asked: str) -> str:
        wanted = asked.split() or list(SCOPES)
        return " ".join(s for s in wanted if s in self.consent)

    def _answer(self, client_id: str, scope: str, resource: str) -> JSONResponse:
        token = self.issue(resource or None, scope, client_id=client_id)
        return JSONResponse(
            {
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": self.lifetime,
                "scope": scope,
            },
            headers={"Cache-Control": "no-store"},
        )

    # -- endpoints -----------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "registration_endpoint": f"{self.issuer}/register",
            "jwks_uri": f"{self.issuer}/jwks",
            "scopes_supported": list(SCOPES),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "client_credentials"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_post"],
            "code_challenge_methods_supported": ["S256"],
        }

    async def _metadata(self, request: Request) -> Response:
        return JSONResponse(self.metadata())

    async def _jwks(self, request: Request) -> Response:
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return JSONResponse({"keys": [{**jwk, "kid": self.kid, "use": "sig", "alg": "RS256"}]})

    async def _register(self, request: Request) -> Response:
        asked = await request.json()
        uris = asked.get("redirect_uris") or []
        method = asked.get("token_endpoint_auth_method", "client_secret_post")
        client = {
            **asked,
            "client_id": uuid.uuid4().hex,
            "client_id_issued_at": int(time.time()),
            "redirect_uris": uris,
            "token_endpoint_auth_method": method,
        }
        if method != "none":
            client["client_secret"] = secrets.token_urlsafe(24)
        with self._lock:
            self.clients[client["client_id"]] = client
        return JSONResponse(client, status_code=201)

    async def _authorize(self, request: Request) -> Response:
        q = request.query_params
        client = self.clients.get(q.get("client_id", ""))
        if client is None or q.get("redirect_uri") not in client["redirect_uris"]:
            return _error("invalid_request", "unknown client or redirect_uri")
        if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256":
            return _error("invalid_request", "response_type code with S256 PKCE only")
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._codes[code] = _Code(
                client["client_id"],
                q["redirect_uri"],
                q.get("code_challenge", ""),
                self._scope(q.get("scope", "")),
                q.get("resource", ""),
            )
        back = {"code": code, **({"state": q["state"]} if "state" in q else {})}
        return RedirectResponse(f"{q['redirect_uri']}?{urlencode(back)}", status_code=302)

    def _client(self, form: Any) -> dict[str, Any] | None:
        client = self.clients.get(str(form.get("client_id", "")))
        if client is None:
            return None
        secret = client.get("client_secret")
        if secret and not secrets.compare_digest(str(form.get("client_secret", "")), secret):
            return None
        return client

    async def _token(self, request: Request) -> Response:
        form = await request.form()
        client = self._client(form)
        if client is None:
            return _error("invalid_client", "unknown client or bad secret", 401)
        grant = form.get("grant_type")
        resource = str(form.get("resource", ""))
        if grant == "client_credentials":
            return self._answer(
                client["client_id"], self._scope(str(form.get("scope", ""))), resource
            )
        if grant != "authorization_code":
            return _error("unsupported_grant_type", f"grant_type {grant!r}")
        with self._lock:
            code = self._codes.pop(str(form.get("code", "")), None)
        verifier = str(form.get("code_verifier", ""))
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        if (
            code is None
            or time.monotonic() - code.made > 60
            or code.client_id != client["client_id"]
            or code.redirect_uri != form.get("redirect_uri")
            or challenge.rstrip(b"=").decode() != code.challenge
        ):
            return _error("invalid_grant", "bad code, redirect_uri or code_verifier")
        return self._answer(client["client_id"], code.scope, resource or code.resource)

    def app(self) -> Starlette:
        # Browser-based clients (the MCP Inspector's page) fetch the metadata,
        # register and exchange codes from their own origin.
        cors = Middleware(
            CORSMiddleware, allow_origins=["*"], allow_methods=["GET", "POST"], allow_headers=["*"]
        )
        return Starlette(
            middleware=[cors],
            routes=[
                Route("/.well-known/oauth-authorization-server", self._metadata),
                Route("/jwks", self._jwks),
                Route("/register", self._register, methods=["POST"]),
                Route("/authorize", self._authorize),
                Route("/token", self._token, methods=["POST"]),
            ],
        )


class Running:
    """The server on a port in a thread of this process, until stop()."""

    def __init__(self, server: AuthorizationServer, host: str, port: int) -> None:
        config = uvicorn.Config(server.app(), host=host, port=port, log_level="warning")
        self._uvicorn = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._uvicorn.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._uvicorn.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the authorization server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self._uvicorn.should_exit = True
        self._thread.join(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recallatron_devkit.oauth_server")
    parser.add_argument("--member", required=True, help="the member id every token acts for")
    parser.add_argument("--listen", default="127.0.0.1:7430")
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    server = AuthorizationServer(f"http://{args.listen}", args.member)
    uvicorn.run(server.app(), host=host, port=int(port), log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
