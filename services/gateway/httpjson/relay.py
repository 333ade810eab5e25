"""Every method of the gateway's public services as a Connect endpoint, made
from the service descriptors: each relays its request, as it was decoded, to
the gateway's own gRPC port inside the process, with the caller's bearer
token, the deadline the caller gave (``connect-timeout-ms``), the caller's
address (services/gateway/forwarded.py) and the ticket of the identity the
adapter admitted (services/gateway/admissions.py, so the token is looked up
once). The gRPC server then does all the
rest as for any gRPC call: authentication, scopes, rate and fairness limits,
validation, the tools themselves, status codes with details, metrics. A
status comes back as a Connect error with the same code, message and details.

Nothing here names a method: a method added to a service's proto is served
as soon as the gateway serves it over gRPC."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import grpc
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.method import IdempotencyLevel, MethodInfo
from connectrpc.request import RequestContext
from connectrpc.server import Endpoint
from google.protobuf import any_pb2
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from google.rpc import error_details_pb2, status_pb2

from recallatron.grpcclient import keep_spinning
from recallatron.settings import CommonSettings
from services.gateway import forwarded

# gRPC's status codes as Connect names them (the same codes; one spelled apart).
CODES: dict[grpc.StatusCode, Code] = {
    c: (Code.CANCELED if c == grpc.StatusCode.CANCELLED else Code(c.name.lower()))
    for c in grpc.StatusCode
    if c != grpc.StatusCode.OK
}
DETAILS_KEY = "grpc-status-details-bin"
AUTHORIZATION = "authorization"

Handler = Callable[[Message, RequestContext[Message, Message]], Awaitable[Message]]
# What the adapter's admission of this call gave it to carry (app.py), set in
# the call's own task: in the process, where no client can set it.
ADMITTED: ContextVar[tuple[tuple[str, str], ...]] = ContextVar("admitted", default=())


def path(method: MethodDescriptor) -> str:
    """A method's path, the same for gRPC and Connect: /<package>.<Service>/<Method>."""
    return f"/{method.containing_service.full_name}/{method.name}"


def method_info(method: MethodDescriptor) -> MethodInfo[Message, Message]:
    return MethodInfo(
        name=method.name,
        service_name=method.containing_service.full_name,
        input=GetMessageClass(method.input_type),
        output=GetMessageClass(method.output_type),
        # POST only: no method is declared free of side effects in the protos.
        idempotency_level=IdempotencyLevel.UNKNOWN,
    )


_SNAKE = re.compile(r"_([a-z0-9])")
_LEADING_FIELD = re.compile(r"^([a-z][a-z0-9_]*(?:\[\d+\])*(?:\.[a-z][a-z0-9_]*(?:\[\d+\])*)*): ")


def json_path(field_path: str) -> str:
    """A field path as gRPC's refusals name it ("expires_in", "about_ids[0]")
    in the proto3 JSON names an HTTP caller sends ("expiresIn", "aboutIds[0]")."""
    return _SNAKE.sub(lambda m: m.group(1).upper(), field_path)


def _json_named(detail: Any) -> Any:
    bad = error_details_pb2.BadRequest()
    if not detail.Unpack(bad):
        return detail
    for violation in bad.field_violations:
        violation.field = json_path(violation.field)
    packed = any_pb2.Any()
    packed.Pack(bad)
    return packed


def connect_error(exc: grpc.Call) -> ConnectError:
    """A gRPC status as a Connect error: code, message and rich details, the
    fields they name as the caller's JSON names them (a body that does not
    decode is refused so too, services/gateway/httpjson/body.py)."""
    details: Iterable[Any] = ()
    for key, value in exc.trailing_metadata() or ():
        if key == DETAILS_KEY and isinstance(value, bytes):
            details = [_json_named(d) for d in status_pb2.Status.FromString(value).details]
    message = _LEADING_FIELD.sub(lambda m: f"{json_path(m.group(1))}: ", exc.details() or "")
    return ConnectError(CODES.get(exc.code(), Code.UNKNOWN), message, details)


def _settle(done: asyncio.Future[Message], call: grpc.Future[Message]) -> None:
    """On the event loop: the relayed call's answer, or its status as a Connect error."""
    if done.done():  # the HTTP call was abandoned first
        return
    if call.cancelled():
        done.set_exception(ConnectError(Code.CANCELED, "the call was cancelled"))
        return
    error = call.exception()
    if error is None:
        done.set_result(call.result())
    elif isinstance(error, grpc.Call):
        done.set_exception(connect_error(error))
    else:
        done.set_exception(error)


def _metadata(ctx: RequestContext[Message, Message]) -> tuple[tuple[str, str], ...]:
    token = ctx.request_headers().get(AUTHORIZATION)
    # gRPC metadata holds printable ASCII only (a tab or a control byte
    # would fail the relay with INTERNAL).
    if token is not None and not (token.isascii() and token.isprintable()):
        raise ConnectError(Code.UNAUTHENTICATED, "authorization: expected 'Bearer <token>'")
    own = ((AUTHORIZATION, token),) if token is not None else ()
    # The caller's address as the token's check before the body took it (app.py).
    peer = forwarded.http_peer(ctx.request_headers().allitems(), ctx.client_address())
    return own + forwarded.for_peer(peer) + ADMITTED.get()


class Relay:
    """The gateway's gRPC port as the endpoints' one peer."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.channel = channel

    def handler(self, method: MethodDescriptor) -> Handler:
        send = self.channel.unary_unary(
            path(method),
            request_serializer=GetMessageClass(method.input_type).SerializeToString,
            response_deserializer=GetMessageClass(method.output_type).FromString,
        )

        async def relay(request: Message, ctx: RequestContext[Message, Message]) -> Message:
            left = ctx.timeout_ms()
            loop = asyncio.get_running_loop()
            done: asyncio.Future[Message] = loop.create_future()
            # Started without blocking the event loop; the answer comes back
            # on the channel's thread and is handed to the loop.
            call = send.future(
                request,
                metadata=_metadata(ctx),
                timeout=None if left is None else max(left, 0.0) / 1000,
            )

            def finished(c: grpc.Future[Message]) -> None:
                loop.call_soon_threadsafe(_settle, done, c)

            call.add_done_callback(finished)
            try:
                return await done
            except asyncio.CancelledError:
                call.cancel()  # the HTTP client went away: the work stops too
                raise

        return relay

    def endpoints(self, services: Iterable[ServiceDescriptor]) -> Mapping[str, Any]:
        """An endpoint per unary method of ``services``, by path (the
        library's unary endpoint type is not among its public names)."""
        return {
            path(m): Endpoint.unary(method_info(m), self.handler(m))
            for s in services
            for m in s.methods
            if not (m.client_streaming or m.server_streaming)
        }


def channel(target: str, settings: CommonSettings) -> grpc.Channel:
    """The adapter's channel to its own gateway (TLS when the gateway's
    clients are told to verify it). No retries: a status is relayed as the
    gateway gave it, as a gRPC client without retries would see it. Made once
    for the process and never closed (:func:`keep_spinning`)."""
    options = [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.enable_retries", 0),
    ]
    if settings.tls_ca_file:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=Path(settings.tls_ca_file).read_bytes()
        )
        made = grpc.secure_channel(target, credentials, options=options)
    else:
        made = grpc.insecure_channel(target, options=options)
    keep_spinning(made)
    return made


async def relays(target: str, settings: CommonSettings) -> AsyncGenerator[Relay]:
    """The relay for the ASGI app's life (its lifespan)."""
    yield Relay(channel(target, settings))
