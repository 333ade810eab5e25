"""The ASGI application: the Connect protocol's unary calls (connect-python's
``ConnectASGIApplication``, with the endpoints of relay.py) and the OpenAPI
document at ``/openapi.json``.

A call's token is checked first, by the gateway's own authentication
(``Auth.admit``) on a thread of the app's pool, before a byte of the body is
read: a caller without a known token cannot make the adapter read, inflate or
parse up to the message limit. The identity found is handed to the relayed
call (services/gateway/admissions.py), which does not ask the store again.
Then the body is read and checked here, once: its size against the gateway's
message limit (as gRPC checks a message), its content type (Connect's unary
``application/json`` or ``application/proto``) and whether it decodes as the
method's request at all (body.py), decoded off the event loop, and the request handed
to the library as decoded. The library would
answer a body that does not decode as an unknown error (HTTP 500); here it is
the caller's error, ``invalid_argument`` (HTTP 400) with a
``google.rpc.BadRequest`` naming the field, as a message gRPC cannot decode
is. Either refusal is counted in the gRPC metric under the same method."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import zlib
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import grpc
from connectrpc.code import Code
from connectrpc.server import ConnectASGIApplication
from google.protobuf import any_pb2, json_format, symbol_database
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message as ProtoMessage
from google.protobuf.message_factory import GetMessageClass
from google.rpc import error_details_pb2

from recallatron import errors
from recallatron.grpcserver import RPC_STATUS
from recallatron.grpcserver.status import MAX_DETAIL_BYTES, MAX_MESSAGE_BYTES, clip, status_for
from recallatron.settings import CommonSettings
from services.gateway import forwarded, scopes
from services.gateway.auth import one_authorization
from services.gateway.httpjson.abandon import stopped_when_gone
from services.gateway.httpjson.body import PROTO_TYPE, Refused, decode, media_type
from services.gateway.httpjson.budget import BodyBudget, Reservation
from services.gateway.httpjson.openapi import document
from services.gateway.httpjson.relay import ADMITTED, AUTHORIZATION, CODES, Relay, path, relays
from services.gateway.settings import GatewaySettings

Scope = MutableMapping[str, Any]
Event = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Event]]
Send = Callable[[Event], Awaitable[None]]

OPENAPI_PATH = "/openapi.json"
BODY_BUDGET_BYTES = int(GatewaySettings.model_fields["http_body_budget_bytes"].default)


# The most bytes a gzip body is inflated by at once, each step reserved as it comes.
_GUNZIP_STEP = 64 * 1024
_TIMEOUT_MS = re.compile(r"[0-9]{1,10}")
# The headers of a call that hold one value, each checked here before the
# library reads it (its first; a dict of them here, the last).
_SINGLE_HEADERS = ("content-type", "content-encoding", "connect-timeout-ms")
_GRPC_CODES = {c.value[0]: c for c in grpc.StatusCode}
# The HTTP status of each Connect code (the Connect protocol's table).
HTTP_STATUS: dict[Code, int] = {
    Code.CANCELED: 499,
    Code.UNKNOWN: 500,
    Code.INVALID_ARGUMENT: 400,
    Code.DEADLINE_EXCEEDED: 504,
    Code.NOT_FOUND: 404,
    Code.ALREADY_EXISTS: 409,
    Code.PERMISSION_DENIED: 403,
    Code.RESOURCE_EXHAUSTED: 429,
    Code.FAILED_PRECONDITION: 400,
    Code.ABORTED: 409,
    Code.OUT_OF_RANGE: 400,
    Code.UNIMPLEMENTED: 501,
    Code.INTERNAL: 500,
    Code.UNAVAILABLE: 503,
    Code.DATA_LOSS: 500,
    Code.UNAUTHENTICATED: 401,
}


class Admission(Protocol):
    """The gateway's check of a call's caller before its body is read
    (services/gateway/auth.py ``Auth.admit``): raises a domain error, or
    returns what the relayed call carries so that it is not checked twice."""

    def admit(
        self, method: str, authorization: str | None, peer: str
    ) -> tuple[tuple[str, str], ...]: ...


def refused_by(error: errors.DomainError) -> Refused:
    """A domain error as the gRPC path answers it (its one mapping,
    grpcserver/status.py), in the Connect code of that status."""
    status = status_for(error)
    grpc_code = _GRPC_CODES.get(status.code, grpc.StatusCode.UNKNOWN)
    code = CODES.get(grpc_code, Code.UNKNOWN)
    return Refused(
        HTTP_STATUS.get(code, 500),
        code.value,
        status.message,
        details=list(status.details),
        counted=grpc_code.name,
    )


def _detail(packed: any_pb2.Any) -> dict[str, Any]:
    """A detail as Connect writes one: its type, its bytes and, when the type
    is known here, its JSON form."""
    name = packed.TypeName()
    shown: dict[str, Any] = {
        "type": name,
        "value": base64.b64encode(packed.value).decode().rstrip("="),
    }
    try:
        message = symbol_database.Default().GetSymbol(name)()
    except KeyError:
        return shown
    if packed.Unpack(message):
        shown["debug"] = json_format.MessageToDict(message)
    return shown


def error_body(refused: Refused) -> bytes:
    """The Connect error JSON, with a BadRequest naming the field when there
    is one, and the refusal's own details."""
    message = f"{refused.field}: {refused.message}" if refused.field else refused.message
    body: dict[str, Any] = {"code": refused.code, "message": clip(message, MAX_MESSAGE_BYTES)}
    details = list(refused.details)
    if refused.field:
        violation = error_details_pb2.BadRequest.FieldViolation(
            field=clip(refused.field, MAX_DETAIL_BYTES),
            description=clip(refused.message, MAX_DETAIL_BYTES),
        )
        packed = any_pb2.Any()
        packed.Pack(error_details_pb2.BadRequest(field_violations=[violation]))
        details.insert(0, packed)
    if details:
        body["details"] = [_detail(d) for d in details]
    return json.dumps(body).encode()


async def _refuse(scope: Scope, send: Send, refused: Refused) -> None:
    if refused.counted:
        RPC_STATUS.labels(scope["path"], refused.counted).inc()
    await respond(send, refused.status, error_body(refused), *refused.headers)


async def respond(send: Send, status: int, body: bytes, *headers: tuple[bytes, bytes]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _Decoded:
    """The ``receive`` of a call whose body was read and decoded here: the
    library takes the request as it is (:class:`_Connect`), so the body is
    parsed once; it would read the body once more from here otherwise."""

    def __init__(self, request: ProtoMessage, body: bytes | bytearray, receive: Receive) -> None:
        self.request, self.body, self.receive = request, body, receive
        self.given = False

    async def __call__(self) -> Event:
        if self.given:
            return await self.receive()
        self.given = True
        return {"type": "http.request", "body": self.body, "more_body": False}


class _Connect(ConnectASGIApplication[Relay]):
    @property
    def path(self) -> str:
        return "/"

    async def _read_post_request(
        self, endpoint: Any, receive: Any, codec: Any, headers: Any
    ) -> Any:
        # The library's one step that reads and decodes a unary call's body.
        if isinstance(receive, _Decoded):
            return receive.request
        return await super()._read_post_request(endpoint, receive, codec, headers)


class HttpJsonApp:
    """The gateway's public services over HTTP/JSON, relayed to ``target``."""

    def __init__(
        self,
        target: str,
        settings: CommonSettings,
        services: Iterable[ServiceDescriptor],
        auth: Admission,
        version: str = "v1",
        body_budget: int = BODY_BUDGET_BYTES,
    ) -> None:
        """``body_budget``: the bytes of request bodies held at once (the
        gateway's ``http_body_budget_bytes``)."""
        services = list(services)
        self.budget = BodyBudget(body_budget)
        self.auth = auth
        # Off the event loop: the token's check (it may ask the store) and the
        # body's inflating and decoding, so one call never holds up the rest.
        self.pool = ThreadPoolExecutor(settings.server_threads, thread_name_prefix="http-json")
        self.inputs: dict[str, type[ProtoMessage]] = {
            path(m): GetMessageClass(m.input_type) for s in services for m in s.methods
        }
        self.max_bytes = settings.max_message_bytes
        self.connect = _Connect(
            service=relays(target, settings),
            endpoints=lambda relay: relay.endpoints(services),
            read_max_bytes=self.max_bytes,
        )
        self.openapi = json.dumps(document(services, version, scopes.OPEN_CALLS), indent=1).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == OPENAPI_PATH:
            await self._openapi(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] not in self.inputs:
            # The library would answer 404 with no body at all.
            refused = Refused(
                404,
                "unimplemented",
                f"{clip(scope['path'], MAX_DETAIL_BYTES)}: no such method "
                f"(POST /<package>.<Service>/<Method>, listed in {OPENAPI_PATH})",
            )
            await respond(send, refused.status, error_body(refused))
            return
        if scope["type"] == "http" and scope["method"] != "POST":
            # As above: 405 with no body from the library.
            refused = Refused(
                405, "unimplemented", f"{scope['method']}: a call is a POST (Connect's unary call)"
            )
            await respond(send, refused.status, error_body(refused), (b"allow", b"POST"))
            return
        # The body's bytes are held until the call ends: the decoded request
        # and the body handed to the library live as long as it.
        reservation = Reservation(self.budget)
        try:
            await self._call(scope, receive, send, reservation)
        finally:
            reservation.release()

    async def _call(
        self, scope: Scope, receive: Receive, send: Send, reservation: Reservation
    ) -> None:
        admitted: tuple[tuple[str, str], ...] = ()
        connection = receive  # the client's own, the body read from it
        if scope["type"] == "http":
            try:
                admitted = await self._admitted(scope)
            except Refused as refused:
                await self._discarded(scope, receive)
                await _refuse(scope, send, refused)
                return
            try:
                scope, receive = await self._checked(scope, receive, reservation)
            except Refused as refused:
                await _refuse(scope, send, refused)
                return
        # To the relay in this task's context, never in a header a client sends.
        handed = ADMITTED.set(admitted)
        try:
            if scope["type"] != "http":
                await self.connect(scope, receive, send)
                return
            await stopped_when_gone(
                lambda answer: self.connect(scope, receive, answer), connection, send
            )
        finally:
            ADMITTED.reset(handed)

    async def _openapi(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The document to a GET or a HEAD (the server sends a HEAD's headers
        only); to another method, 405 as a call's wrong method is answered,
        its body (a POST's, a PUT's) read and dropped first."""
        if scope["method"] in ("GET", "HEAD"):
            await respond(send, 200, self.openapi)
            return
        await self._discarded(scope, receive)
        refused = Refused(
            405, "unimplemented", f"{scope['method']}: {OPENAPI_PATH} is read with GET or HEAD"
        )
        await respond(send, refused.status, error_body(refused), (b"allow", b"GET, HEAD"))

    async def _discarded(self, scope: Scope, receive: Receive) -> None:
        """The body of a call refused before it was read, read and dropped as
        it comes (never kept, inflated or parsed): most clients send all of
        it before they read the answer, and one closed under it would reach
        them as a reset connection instead. Not when the client waits to be
        told to send it (Expect: 100-continue), nor past the message limit."""
        headers = {k.lower(): v for k, v in scope["headers"]}
        declared = headers.get(b"content-length", b"")
        if b"100-continue" in headers.get(b"expect", b"").lower() or (
            declared.isdigit() and int(declared) > self.max_bytes
        ):
            return
        size = 0
        while size <= self.max_bytes:
            event = await receive()
            if event["type"] != "http.request":
                return
            size += len(event.get("body", b""))
            if not event.get("more_body", False):
                return

    async def _admitted(self, scope: Scope) -> tuple[tuple[str, str], ...]:
        """The caller checked before the body is read (nothing of it is);
        what the relayed call carries for it (Admission)."""
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
        try:
            authorization = one_authorization([v for k, v in headers if k == AUTHORIZATION])
            # Every token the gateway issues is printable ASCII (all gRPC metadata holds).
            if authorization is not None and not (
                authorization.isascii() and authorization.isprintable()
            ):
                raise Refused(
                    401,
                    "unauthenticated",
                    "authorization: expected 'Bearer <token>'",
                    counted="UNAUTHENTICATED",
                )
            client = scope.get("client")
            peer = forwarded.http_peer(headers, f"{client[0]}:{client[1]}" if client else None)
            return await asyncio.get_running_loop().run_in_executor(
                self.pool, self.auth.admit, scope["path"], authorization, peer
            )
        except errors.DomainError as error:
            raise refused_by(error) from None

    async def _checked(
        self, scope: Scope, receive: Receive, reservation: Reservation
    ) -> tuple[Scope, _Decoded]:
        for name, value in scope["headers"]:
            # The Connect runtime reads headers as UTF-8 (a 500 otherwise).
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                raise Refused(
                    400, "invalid_argument", f"{name.decode('latin-1')}: a header that is not UTF-8"
                ) from None
        names = [k.decode("latin-1").lower() for k, _ in scope["headers"]]
        for name in _SINGLE_HEADERS:
            if names.count(name) > 1:
                # Checked here by one value, read by the library by another.
                raise Refused(400, "invalid_argument", f"{name}: given more than once")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        content_type = media_type(headers.get("content-type", ""))
        if content_type is None:
            raise Refused(
                415,
                "unimplemented",
                "content-type: a unary Connect call is application/json or application/proto "
                "(gRPC has its own port)",
            )
        timeout = headers.get("connect-timeout-ms")
        # The Connect protocol's Timeout-Milliseconds: a positive integer of at
        # most 10 digits. 0 is none: it ran the call with no time left (504).
        if timeout is not None and not (_TIMEOUT_MS.fullmatch(timeout) and int(timeout) > 0):
            raise Refused(
                400,
                "invalid_argument",
                "connect-timeout-ms: a positive whole number of milliseconds, at most 10 digits",
            )
        # The library matches the type as written: it gets the one form.
        scope = {
            **scope,
            "headers": [
                (k, content_type.encode() if k.lower() == b"content-type" else v)
                for k, v in scope["headers"]
            ],
        }
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise Refused(429, "resource_exhausted", f"request over {self.max_bytes} bytes")
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding not in ("gzip", "identity"):
            raise Refused(501, "unimplemented", f"content-encoding: {encoding} is not accepted")
        if declared.isdigit() and not reservation.cover(int(declared)):
            raise self._over_budget()
        body = await self._body(receive, reservation)
        if encoding == "gzip":
            kept = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-encoding"]
            scope = {**scope, "headers": kept}
        loop = asyncio.get_running_loop()
        held, request = await loop.run_in_executor(
            self.pool,
            self._request,
            scope["path"],
            body,
            content_type,
            reservation if encoding == "gzip" else None,
        )
        return scope, _Decoded(request, held, receive)

    def _request(
        self, method: str, sent: bytes, content_type: str, gzipped: Reservation | None
    ) -> tuple[bytes | bytearray, ProtoMessage]:
        """The body as it was sent (inflated when ``gzipped``, the call's
        reservation, which then holds the inflated body) and the method's
        request decoded from it; the body is never copied whole (the budget
        counts it once)."""
        body: bytes | bytearray = sent
        if gzipped is not None:
            body = self._gunzip(sent, gzipped)
            # The bytes sent are dropped as this returns; the inflated are held.
            gzipped.hold(len(body))
        if content_type != PROTO_TYPE and (not body or body.isspace()):
            body = b"{}"  # an empty JSON body is the empty request
        return body, decode(self.inputs[method], body, content_type)

    def _over_budget(self) -> Refused:
        """The process holds as many body bytes as it may: ``unavailable``
        (503, Connect's code for a state that passes; another replica, or
        this one a moment later, serves the call), not ``resource_exhausted``
        (429), which says the caller spent an allowance of its own. The
        connection is closed, its body left unread."""
        return Refused(
            503,
            "unavailable",
            "the gateway is reading as many request bodies as it may at once; retry",
            counted="UNAVAILABLE",
            headers=((b"retry-after", b"1"), (b"connection", b"close")),
        )

    async def _body(self, receive: Receive, reservation: Reservation) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await receive()
            if event["type"] == "http.disconnect":
                raise Refused(499, "canceled", "the client went away")
            chunk = event.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise Refused(429, "resource_exhausted", f"request over {self.max_bytes} bytes")
            # A body of no declared length is reserved as it comes.
            if not reservation.cover(size):
                raise self._over_budget()
            chunks.append(chunk)
            if not event.get("more_body", False):
                return b"".join(chunks)

    def _gunzip(self, body: bytes, reservation: Reservation) -> bytearray:
        """``body`` inflated whole: every member of it (RFC 1952 lets a gzip
        body be several, one after another), each complete, nothing after
        the last; never more than the message limit. What it inflates to is
        reserved besides the bytes sent, a step (64 KiB at most) at a time as
        it comes: past the budget the call is refused (:meth:`_over_budget`).
        The buffer inflated into is handed on as it is: a copy would hold the
        body twice, once beyond what is reserved."""
        out = bytearray()
        # The member being inflated; None between members.
        inflate: zlib._Decompress | None = None
        pending = b""  # the bytes sent, given to ``inflate`` but not yet taken
        at = 0  # how many of the bytes sent were given
        more = False  # the last step filled its room: it may hold more
        while pending or more or at < len(body):
            if not pending and not more:
                # The input a step at a time too: what it leaves is copied.
                pending = body[at : at + _GUNZIP_STEP]
                at += len(pending)
            if inflate is None:
                inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            # At least 1 byte may come (0 would mean no limit).
            room = min(_GUNZIP_STEP, self.max_bytes + 1 - len(out))
            try:
                step = inflate.decompress(pending, room)
            except zlib.error:
                raise Refused(400, "invalid_argument", "not valid gzip", "request") from None
            out += step
            if len(out) > self.max_bytes:
                raise Refused(429, "resource_exhausted", f"request over {self.max_bytes} bytes")
            # As a body's chunks as they arrive: a step held is reserved.
            if not reservation.cover(len(body) + len(out)):
                raise self._over_budget()
            more = not inflate.eof and len(step) == room
            if inflate.eof:
                pending, inflate = inflate.unused_data, None
            else:
                pending = inflate.unconsumed_tail
        if inflate is not None:
            raise Refused(400, "invalid_argument", "not valid gzip: cut short", "request")
        return out
