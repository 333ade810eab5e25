"""The MCP server: exactly the tools of recallatron/tools.py (the seven, the
graph's lookup, neighbors and timeline, an owner's list_memories and
audit_log), with their names, titles, descriptions and input and output
schemas there, forwarded to the gateway with the
member's token. Over stdio (one member: RECALLATRON_TOKEN or
RECALLATRON_TOKEN_FILE) or streamable HTTP (the member's token in each
request's `Authorization: Bearer` header, else that one; or, with
RECALLATRON_MCP_OAUTH_ISSUER set, an OAuth 2.1 resource server taking the
issuer's access tokens for this server beside the members' own: oauth.py).

Tool failures come back as tool results with is_error set and a message an
agent can act on, never as protocol errors or stack traces."""

from __future__ import annotations

import argparse
import contextvars
import json
import logging
from types import TracebackType
from typing import Any, Protocol

import anyio
import grpc
import mcp_types as types
import pydantic
from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from mcp.server.auth.routes import create_protected_resource_routes
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter
from starlette.applications import Starlette
from starlette.authentication import AuthenticationBackend, AuthenticationError
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Send

from recallatron.client import Client
from recallatron.grpcclient import PeerStatus
from recallatron.secretfiles import token_from
from recallatron.tools import TOOLS
from recallatron_mcp import options, tools
from recallatron_mcp.arguments import ArgumentsAnObject
from recallatron_mcp.gateway_tokens import MemberTokens
from recallatron_mcp.http_authorization import OneAuthorization
from recallatron_mcp.http_settings import CannotStart, HttpSettings
from recallatron_mcp.inflight import OneRequestPerId
from recallatron_mcp.oauth import (
    READ,
    SCOPES,
    CannotCheckNow,
    MemberAccess,
    OAuthSettings,
    Verifier,
    token_shaped,
)
from recallatron_mcp.sessions import bounded_sessions

log = logging.getLogger("recallatron.mcp")

# Failures of this server's own, told like the gateway's (tools.failure).
NO_TOKEN = PeerStatus(grpc.StatusCode.UNAUTHENTICATED, "no member token")
NOT_BEARER = PeerStatus(
    grpc.StatusCode.UNAUTHENTICATED,
    "the request's Authorization header is not 'Bearer <member token>'",
)
# Said without the token: it may be a real one with a stray character.
NOT_A_TOKEN = PeerStatus(
    grpc.StatusCode.UNAUTHENTICATED,
    "the member token holds a character no token has (tokens are printable ASCII with no "
    "spaces: a copied quote mark, a non-ASCII letter or a control character is in it)",
)
FAILED = PeerStatus(grpc.StatusCode.INTERNAL, "the tool failed unexpectedly")

# What the tool descriptions do not say: when to reach for the tools at all.
INSTRUCTIONS = (
    "Recallatron is the memory of the member you act for and of their workspace. Nothing "
    "from it reaches this conversation unless you call a tool.\n"
    "- Call recall before you say you have no context about a person, project or past "
    "decision, and before asking the person something they may have told you already.\n"
    "- When an answer rests on a memory, say so, with its date.\n"
    "- To learn what is known about a named person, project or thing, call lookup with "
    "its exact name; every attribute and relation is a claim stated by a memory.\n"
    "- Store only what someone plainly told you, or what you concluded from memories "
    "you can see; never a guess. Recall first: correct or supersede what is already "
    "there rather than storing it twice.\n"
    "- Choose the purpose that says why you ask: assist when helping in conversation, "
    "automate when acting on systems, personalize when tailoring to the member, audit "
    "when reviewing. Share with the workspace only what the person meant to share.\n"
    "- When a call fails, its message says what to do next; a write retried with the "
    "same request_id is never applied twice."
)


def listed_tools() -> list[types.Tool]:
    """The catalogue's tools as MCP lists them, each with its annotations
    (Tool.hints)."""
    return [
        types.Tool(
            name=t.name,
            title=t.title,
            description=t.description,
            input_schema=t.input_schema,
            # The structured content of every answer conforms to it.
            output_schema=t.output_schema,
            annotations=types.ToolAnnotations(**t.hints),
        )
        for t in TOOLS
    ]


# The HTTP client's address ("host:port") of the request being served: set
# by :class:`RememberClient` for the bearer check, which the SDK gives only
# the token.
CLIENT_ADDRESS: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "recallatron_mcp_client_address", default=None
)


class Clients:
    """Gateway clients for the tokens calls bring, all on one channel (the
    token travels with each call): none is ever closed under a call in
    flight, and a caller sending many tokens costs no channel each. With
    ``forwarding_secret`` (RECALLATRON_FORWARDING_SECRET, the gateway's too)
    each call carries its HTTP client's address, so a stranger's wrong tokens
    spend their own address's allowance of failed authentications at the
    gateway, not this server's (recallatron/forwarding.py)."""

    def __init__(self, gateway: str, default_token: str, forwarding_secret: str = "") -> None:
        self.gateway = gateway
        self.default_token = default_token
        self.forwarding_secret = forwarding_secret
        self._base = Client(gateway, default_token)
        # The gateway tokens made for OAuth callers (set by http_app with OAuth).
        self.made: MemberTokens | None = None

    def get(self, token: str, client_address: str | None = None) -> Client:
        client = self._base.with_token(token)
        if not self.forwarding_secret:
            return client
        return client.for_address(client_address or CLIENT_ADDRESS.get(), self.forwarding_secret)

    def close(self) -> None:
        self._base.close()


def _address(ctx: ServerRequestContext[Any]) -> str | None:
    """The HTTP client's "host:port" of the request a tool call came in (None
    on stdio)."""
    client = getattr(ctx.request, "client", None)
    return f"{client.host}:{client.port}" if client is not None else None


class RememberClient:
    """ASGI middleware: the HTTP client's address in :data:`CLIENT_ADDRESS`
    for the rest of the request."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        client = scope.get("client") if scope.get("type") == "http" else None
        token = CLIENT_ADDRESS.set(f"{client[0]}:{client[1]}" if client else None)
        try:
            await self.app(scope, receive, send)
        finally:
            CLIENT_ADDRESS.reset(token)


def _access(ctx: ServerRequestContext[Any]) -> MemberAccess | None:
    """The request's verified caller, when the server checks tokens (OAuth)."""
    scope = getattr(ctx.request, "scope", None)
    access = getattr(scope.get("user") if isinstance(scope, dict) else None, "access_token", None)
    return access if isinstance(access, MemberAccess) else None


def _token(ctx: ServerRequestContext[Any], default: str) -> str | None:
    """The gateway token of the request's verified OAuth caller, or the HTTP
    request's bearer token, else (no Authorization header, or stdio) the
    default. None: the request has an Authorization header with no bearer
    token in it; its caller meant to be someone, so it is refused rather than
    served as the default member."""
    access = _access(ctx)
    if access is not None:
        return access.gateway_token
    headers = getattr(ctx.request, "headers", None)
    value: str | None = headers.get("authorization") if headers is not None else None
    if value is None:
        return default
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def _text(payload: Any) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=json.dumps(payload, indent=1, ensure_ascii=False))]


def build_server(clients: Clients) -> Server[Any]:
    listed = listed_tools()

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        token = _token(ctx, clients.default_token)
        arguments = dict(params.arguments or {})
        if not token:
            return types.CallToolResult(
                content=_text(tools.failure(NO_TOKEN if token == "" else NOT_BEARER)),
                is_error=True,
            )
        if not token_shaped(token):
            # gRPC refuses it as call metadata, which reads as a server fault.
            return types.CallToolResult(content=_text(tools.failure(NOT_A_TOKEN)), is_error=True)
        client = clients.get(token, _address(ctx))
        try:
            # Cancelled with this task when the client cancels the request.
            result = await tools.call_cancellable(client, params.name, arguments)
        except tools.ToolError as exc:
            return types.CallToolResult(content=_text(_told(exc, _access(ctx))), is_error=True)
        except Exception:
            log.exception("tool call failed", extra={"tool": params.name})
            return types.CallToolResult(
                content=_text(tools.failure(FAILED)),
                is_error=True,
            )
        return types.CallToolResult(content=_text(result), structured_content=result)

    def _told(exc: tools.ToolError, access: MemberAccess | None) -> str:
        """The failure as the agent reads it. The gateway refusing a token
        this server made for an OAuth caller: the token is dropped (the
        caller signs in again for another) and the advice is that; refusing
        a call outside its scope, which is what the person approved at
        sign-in, the advice is to approve more there, not to ask an owner."""
        status = exc.status
        if status is None or access is None or not access.made_here:
            return str(exc)
        if status.code == grpc.StatusCode.PERMISSION_DENIED and tools.SCOPE in status.message:
            return tools.failure(status, tools.wider_sign_in(access.scopes))
        if status.code != grpc.StatusCode.UNAUTHENTICATED:
            return str(exc)
        if clients.made is not None:
            clients.made.refused(access.gateway_token)
        return tools.failure(status, tools.SIGN_IN_AGAIN)

    server: Server[Any] = Server(
        "recallatron",
        version="0.1.0",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.middleware.append(ArgumentsAnObject())
    return server


def bad_line_reply(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC 2.0 error for a line the transport could not read as a
    message (§5.1): not JSON at all is a parse error, JSON that is no message an
    invalid request; the id is null, as it cannot be known. The line itself is
    not echoed."""
    not_json = not isinstance(exc, pydantic.ValidationError) or any(
        e["type"] == "json_invalid" for e in exc.errors()
    )
    if not_json:
        error = types.ErrorData(code=types.PARSE_ERROR, message="Parse error: the line is not JSON")
    else:
        error = types.ErrorData(
            code=types.INVALID_REQUEST,
            message="Invalid Request: the line is JSON but not a JSON-RPC 2.0 message",
        )
    return types.JSONRPCError(jsonrpc="2.0", id=None, error=error)


class _Incoming(Protocol):
    async def receive(self) -> SessionMessage | Exception: ...
    async def aclose(self) -> None: ...


class _Outgoing(Protocol):
    async def send(self, item: SessionMessage, /) -> None: ...


class AnsweringBadLines:
    """The stdio transport's read stream, answering each line it could not
    parse with the JSON-RPC error for it: the SDK hands such a line on as an
    exception, which the server only logs, so the client would wait for a reply
    that never comes. Everything else passes through, sender context included."""

    def __init__(
        self,
        inner: _Incoming,
        replies: _Outgoing,
    ) -> None:
        self._inner = inner
        self._replies = replies

    @property
    def last_context(self) -> contextvars.Context | None:
        context: contextvars.Context | None = getattr(self._inner, "last_context", None)
        return context

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            log.warning("unreadable line on stdin answered with a JSON-RPC error")
            await self._replies.send(SessionMessage(bad_line_reply(item)))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> AnsweringBadLines:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringBadLines:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


async def serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(
            AnsweringBadLines(read_stream, write_stream),
            write_stream,
            server.create_initialization_options(),
        )


def http_app(
    server: Server[Any], host: str, clients: Clients, oauth: OAuthSettings | None
) -> Starlette:
    """The streamable HTTP app at /mcp; with ``oauth``, behind the SDK's
    bearer middleware and with the protected-resource metadata (RFC 9728)
    at the path the resource URL gives and at the root well-known path."""
    if oauth is None:
        return server.streamable_http_app(host=host)
    admin = Client(oauth.gateway or clients.gateway, oauth.admin_token)
    clients.made = MemberTokens(admin)
    verifier = Verifier(oauth, clients.get, clients.made)
    auth = AuthSettings(
        issuer_url=_url(oauth.issuer),
        resource_server_url=_url(oauth.resource),
        required_scopes=[READ],
        validate_token_resource=True,
    )
    app = server.streamable_http_app(host=host, auth=auth, token_verifier=verifier)
    app.user_middleware[:] = _answering_cannot_check(app.user_middleware)
    metadata = create_protected_resource_routes(
        resource_url=_url(oauth.resource),
        authorization_servers=[_url(oauth.issuer)],
        scopes_supported=SCOPES,
        resource_name="Recallatron memory",
    )
    routes = [_said_unauthorized(r) for r in app.router.routes if not _is_metadata(r)]
    root = Route(WELL_KNOWN, endpoint=metadata[0].endpoint, methods=["GET", "OPTIONS"])
    app.router.routes[:] = [*routes, *metadata, root]
    return app


WELL_KNOWN = "/.well-known/oauth-protected-resource"
# URLs exactly as configured: an issuer is compared as a string (RFC 8414), so
# no slash may be added to a path-less one.
_EXACT_URL = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))


def _url(value: str) -> AnyHttpUrl:
    return _EXACT_URL.validate_python(value)


class _Challenge(RequireAuthMiddleware):
    """The SDK's bearer check, its 401 saying "Unauthorized" in the
    description: the MCP Inspector's proxy (0.15) hands a 401 on to its page as
    a JSON-RPC error carrying the body only, and its page starts the OAuth flow
    when that error says 401 or Unauthorized."""

    async def _send_auth_error(
        self, send: Send, status_code: int, error: str, description: str
    ) -> None:
        if status_code == 401:
            description = f"Unauthorized: {description}"
        await super()._send_auth_error(send, status_code, error, description)


def _cannot_check_now(conn: HTTPConnection, exc: AuthenticationError) -> Response:
    """A token that cannot be checked now (CannotCheckNow) is 503 with
    Retry-After: a 401 would send the client back through its sign-in."""
    if isinstance(exc, CannotCheckNow):
        return JSONResponse(
            {"error": "temporarily_unavailable", "error_description": str(exc)},
            status_code=503,
            headers={"Retry-After": exc.retry_after_header},
        )
    return AuthenticationMiddleware.default_on_error(conn, exc)


def _is_bearer_check(middleware: Middleware) -> bool:
    cls: object = middleware.cls
    return cls is AuthenticationMiddleware


def _answering_cannot_check(middleware: list[Middleware]) -> list[Middleware]:
    """The SDK's middleware with its bearer check answering CannotCheckNow
    as :func:`_cannot_check_now` does (Starlette's own answer is a 400)."""
    checks = [m for m in middleware if _is_bearer_check(m)]
    if len(checks) != 1:
        raise RuntimeError("the MCP SDK's app has no one bearer check to answer 503 with")
    backend = checks[0].kwargs.get("backend")
    if not isinstance(backend, AuthenticationBackend):
        raise RuntimeError("the MCP SDK's bearer check has no authentication backend")
    answering = Middleware(AuthenticationMiddleware, backend=backend, on_error=_cannot_check_now)
    return [answering if _is_bearer_check(m) else m for m in middleware]


def _said_unauthorized(route: BaseRoute) -> BaseRoute:
    if isinstance(route, Route) and isinstance(route.endpoint, RequireAuthMiddleware):
        check = route.endpoint
        challenge = _Challenge(check.app, check.required_scopes, check.resource_metadata_url)
        return Route(route.path, endpoint=challenge)
    return route


def _is_metadata(route: BaseRoute) -> bool:
    return isinstance(route, Route) and route.path.startswith(WELL_KNOWN)


def serve_http(server: Server[Any], settings: HttpSettings, clients: Clients) -> None:
    import uvicorn

    sdk_app = http_app(server, settings.host, clients, settings.oauth)
    # One address may not hold every session open.
    bounded = bounded_sessions(sdk_app, server.session_manager, settings.per_address)
    # A duplicate request id must not leave the first request hanging.
    limit = server.session_manager.max_request_body_size
    # Two Authorization headers are refused before anything reads either.
    app = OneAuthorization(RememberClient(OneRequestPerId(bounded, limit)))
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning")


def run(args: argparse.Namespace) -> int:
    # stdout belongs to the protocol on stdio: logs go to stderr.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    http = HttpSettings.read(args.listen, args.gateway) if args.transport == "http" else None
    # From the environment or a file (RECALLATRON_TOKEN_FILE), never an argument.
    clients = Clients(args.gateway, token_from(), token_from(env="RECALLATRON_FORWARDING_SECRET"))
    server = build_server(clients)
    try:
        if http is None:
            anyio.run(serve_stdio, server)
        else:
            serve_http(server, http, clients)
    finally:
        clients.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recallatron_mcp", description=__doc__)
    options.add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except CannotStart as exc:
        parser.error(str(exc))
