"""One Authorization per request over streamable HTTP. The SDK's bearer check
and this server's own (server._token) each read one of a request's
Authorization headers; a request with two (a proxy's beside its client's) was
served as whoever the first named. Refused here, 401, before the SDK reads
anything of the request, as the gateway refuses it over gRPC and HTTP/JSON."""

from __future__ import annotations

import json

from recallatron_mcp.sessions import App, Receive, Scope, Send

ONLY_ONE = "authorization: only one Authorization may be sent"


class OneAuthorization:
    """ASGI middleware: an HTTP request with more than one Authorization
    header is answered 401 and never reaches ``app``."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            names = [bytes(k).lower() for k, _ in scope.get("headers") or ()]
            if names.count(b"authorization") > 1:
                await _refuse(send)
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send) -> None:
    # The shape of the SDK's own 401 (RFC 6750's error and its description).
    body = json.dumps({"error": "invalid_request", "error_description": ONLY_ONE}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer error="invalid_request"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
