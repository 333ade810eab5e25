"""The ASGI application: the Connect protocol's unary calls (connect-python's
``ConnectASGIApplication``, with the endpoints of relay.py) and the OpenAPI
document at ``/openapi.json``.

Before the library decodes a call's body it is checked here, once: its size
against the gateway's message limit (as gRPC checks a message), its content
type (Connect's unary ``application/json`` or ``application/proto``) and
whether it decodes as the method's request at all. The library would answer
a body that does not decode as an unknown error (HTTP 500); here it is the
caller's error, ``invalid_argument`` (HTTP 400) with a ``google.rpc.BadRequest``
naming the field, as a message gRPC cannot decode is, and it is counted in the
same metric under the same method."""

from __future__ import annotations

import base64
import json
import re
import zlib
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, cast

from connectrpc.server import ConnectASGIApplication
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, ServiceDescriptor
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as ProtoMessage
from google.protobuf.message_factory import GetMessageClass
from google.rpc import error_details_pb2

from recallatron.grpcserver import RPC_STATUS
from recallatron.grpcserver.status import MAX_DETAIL_BYTES, MAX_MESSAGE_BYTES, clip
from recallatron.settings import CommonSettings
from recallatron.wire import undecodable_field
from services.gateway.httpjson.openapi import document
from services.gateway.httpjson.relay import Relay, path, relays

Scope = MutableMapping[str, Any]
Event = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Event]]
Send = Callable[[Event], Awaitable[None]]

OPENAPI_PATH = "/openapi.json"
PROTO_TYPE = "application/proto"
_FAILED_FIELD = re.compile(r"Failed to parse (\S+) field: ")
_UNKNOWN_FIELD = re.compile(r'has no field named "([^"]+)"')


_TIMEOUT_MS = re.compile(r"[0-9]{1,10}")


def media_type(content_type: str) -> str | None:
    """The call's type in the one form the library reads ("application/json"
    or "application/proto"), from any spelling HTTP allows (case, spaces,
    a UTF-8 charset); None for another type."""
    media, _, params = content_type.partition(";")
    media = media.strip().lower()
    charset = ""
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
    if media == "application/json" and charset in ("", "utf-8"):
        return "application/json"
    if media == PROTO_TYPE and not charset:
        return PROTO_TYPE
    return None


class Refused(Exception):
    """A call answered here with a Connect error, before the library sees it."""

    def __init__(self, status: int, code: str, message: str, field: str = "") -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field


def field_of(parse_error: str) -> str:
    """The field a proto3 JSON parse error is about, dotted ("filters.kinds"),
    as the caller named it; "request" when it is about the whole body."""
    names = _FAILED_FIELD.findall(parse_error)
    unknown = _UNKNOWN_FIELD.search(parse_error)
    if unknown:
        names.append(unknown.group(1))
    return ".".join(names) or "request"


def decode(cls: type[ProtoMessage], body: bytes, content_type: str) -> None:
    """Raises :class:`Refused` naming the field when ``body`` is not a ``cls``."""
    try:
        if content_type == PROTO_TYPE:
            cls.FromString(body)
            return
        if not body.lstrip().startswith(b"{"):
            raise Refused(400, "invalid_argument", "must be a JSON object", "request")
        json_format.Parse(body, cls())
    except DecodeError:
        field = undecodable_field(cast(Descriptor, cls.DESCRIPTOR), body) or "request"
        raise Refused(400, "invalid_argument", "could not be decoded", field) from None
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        # The parser's first line; the next ones list every field the message has.
        said = str(exc).split("\n", 1)[0]
        raise Refused(400, "invalid_argument", said, field_of(str(exc))) from None


def error_body(refused: Refused) -> bytes:
    """The Connect error JSON, with a BadRequest naming the field when there is one."""
    message = f"{refused.field}: {refused.message}" if refused.field else refused.message
    body: dict[str, Any] = {"code": refused.code, "message": clip(message, MAX_MESSAGE_BYTES)}
    if refused.field:
        violation = {
            "field": clip(refused.field, MAX_DETAIL_BYTES),
            "description": clip(refused.message, MAX_DETAIL_BYTES),
        }
        detail = error_details_pb2.BadRequest(
            field_violations=[error_details_pb2.BadRequest.FieldViolation(**violation)]
        )
        body["details"] = [
            {
                "type": detail.DESCRIPTOR.full_name,
                "value": base64.b64encode(detail.SerializeToString()).decode().rstrip("="),
                "debug": {"fieldViolations": [violation]},
            }
        ]
    return json.dumps(body).encode()


async def respond(send: Send, status: int, body: bytes, *headers: tuple[bytes, bytes]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _Connect(ConnectASGIApplication[Relay]):
    @property
    def path(self) -> str:
        return "/"


class HttpJsonApp:
    """The gateway's public services over HTTP/JSON, relayed to ``target``."""

    def __init__(
        self,
        target: str,
        settings: CommonSettings,
        services: Iterable[ServiceDescriptor],
        version: str = "v1",
    ) -> None:
        services = list(services)
        self.inputs: dict[str, type[ProtoMessage]] = {
            path(m): GetMessageClass(m.input_type) for s in services for m in s.methods
        }
        self.max_bytes = settings.max_message_bytes
        self.connect = _Connect(
            service=relays(target, settings),
            endpoints=lambda relay: relay.endpoints(services),
            read_max_bytes=self.max_bytes,
        )
        self.openapi = json.dumps(document(services, version), indent=1).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == OPENAPI_PATH:
            await respond(send, 200, self.openapi)
            return
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in self.inputs:
            try:
                scope, body = await self._checked(scope, receive)
            except Refused as refused:
                if refused.field:
                    RPC_STATUS.labels(scope["path"], "INVALID_ARGUMENT").inc()
                await respond(send, refused.status, error_body(refused))
                return
            receive = _replay(body, receive)
        await self.connect(scope, receive, send)

    async def _checked(self, scope: Scope, receive: Receive) -> tuple[Scope, bytes]:
        for name, value in scope["headers"]:
            # The Connect runtime reads headers as UTF-8 (a 500 otherwise).
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                raise Refused(
                    400, "invalid_argument", f"{name.decode('latin-1')}: a header that is not UTF-8"
                ) from None
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
        if timeout is not None and not _TIMEOUT_MS.fullmatch(timeout):
            raise Refused(
                400, "invalid_argument", "connect-timeout-ms: at most 10 digits, a positive number"
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
        body = await self._body(receive)
        encoding = headers.get("content-encoding", "identity").lower()
        if encoding == "gzip":
            body = self._gunzip(body)
            kept = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-encoding"]
            scope = {**scope, "headers": kept}
        elif encoding != "identity":
            raise Refused(501, "unimplemented", f"content-encoding: {encoding} is not accepted")
        if content_type != PROTO_TYPE and not body.strip():
            body = b"{}"  # an empty JSON body is the empty request
        decode(self.inputs[scope["path"]], body, content_type)
        return scope, body

    async def _body(self, receive: Receive) -> bytes:
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
            chunks.append(chunk)
            if not event.get("more_body", False):
                return b"".join(chunks)

    def _gunzip(self, body: bytes) -> bytes:
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out = inflate.decompress(body, self.max_bytes + 1)
        except zlib.error:
            raise Refused(400, "invalid_argument", "not valid gzip", "request") from None
        if len(out) > self.max_bytes:
            raise Refused(429, "resource_exhausted", f"request over {self.max_bytes} bytes")
        return out


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body already read given once more."""
    given = False

    async def again() -> Event:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again
