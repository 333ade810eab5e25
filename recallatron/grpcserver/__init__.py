"""The server side every service shares: options, health, reflection, error
mapping, metrics and graceful shutdown, built in one place."""

from __future__ import annotations

import contextvars
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError
from google.protobuf.message_factory import GetMessageClass
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from grpc_status import rpc_status
from prometheus_client import Counter, Histogram, start_http_server

from recallatron import deadline, errors, fairness, internal_auth
from recallatron.settings import CommonSettings
from recallatron.wire import undecodable_field

log = logging.getLogger("recallatron.server")

RPC_LATENCY = Histogram(
    "recallatron_rpc_duration_seconds",
    "Server-side latency of each RPC.",
    ["method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
RPC_STATUS = Counter(
    "recallatron_rpc_total", "RPCs served, by method and status code.", ["method", "code"]
)


REFUSED = Counter(
    "recallatron_fair_refused_total",
    "Calls refused with RESOURCE_EXHAUSTED: their workspace or token had too many outstanding.",
    ["method"],
)

_CODES = {c.value[0]: c for c in grpc.StatusCode}

# Finds the fairness key of a call (recallatron/fairness.py) from its method
# and metadata: (key, sub-key), or None for a call under no key.
KeyOf = Callable[[str, Sequence[tuple[str, Any]]], "tuple[str, str] | None"]


def internal_key_of(key: bytes) -> KeyOf:
    """For store, rank and embed: the workspace and member of a verified
    member assertion; the kind and issuer of any other. None when the
    assertion does not verify (the handler refuses the call)."""

    def key_of(method: str, metadata: Sequence[tuple[str, Any]]) -> tuple[str, str] | None:
        token = next((str(v) for k, v in metadata or () if k == internal_auth.HEADER), "")
        if not token:
            return None
        try:
            claims = internal_auth.verify(key, token, method)
        except errors.DomainError:
            return None
        if claims.kind == internal_auth.MEMBER:
            return f"workspace:{claims.workspace_id}", f"member:{claims.member_id}"
        return f"{claims.kind}:{claims.issuer}", ""

    return key_of


# The full name of the method the current thread serves ("/pkg.Service/Method"),
# set around each call by the interceptor below.
_METHOD: contextvars.ContextVar[str] = contextvars.ContextVar("recallatron_method", default="")


def current_method() -> str:
    """The method being served in this thread ('' outside a call)."""
    return _METHOD.get()


def _pack(message: Any) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def status_for(error: errors.DomainError) -> status_pb2.Status:
    """The one mapping from domain errors to gRPC status with rich details."""
    details: list[any_pb2.Any] = []
    if isinstance(error, errors.Relayed):
        return status_pb2.Status(code=error.code, message=error.message, details=error.details)
    if isinstance(error, errors.InvalidArgument):
        code = code_pb2.INVALID_ARGUMENT
        details.append(
            _pack(
                error_details_pb2.BadRequest(
                    field_violations=[
                        error_details_pb2.BadRequest.FieldViolation(
                            field=error.field, description=error.description
                        )
                    ]
                )
            )
        )
    elif isinstance(error, errors.RevisionMismatch):
        code = code_pb2.ABORTED
        details.append(
            _pack(
                error_details_pb2.ErrorInfo(
                    reason="REVISION_MISMATCH",
                    domain="recallatron",
                    metadata={
                        "memory_id": error.memory_id,
                        "expected_revision": str(error.expected),
                        "current_revision": str(error.current),
                    },
                )
            )
        )
    elif isinstance(error, errors.FailedPrecondition):
        code = code_pb2.FAILED_PRECONDITION
        if error.subject:
            details.append(
                _pack(
                    error_details_pb2.PreconditionFailure(
                        violations=[
                            error_details_pb2.PreconditionFailure.Violation(
                                type="TRUST", subject=error.subject, description=error.message
                            )
                        ]
                    )
                )
            )
    elif isinstance(error, errors.NotFound):
        code = code_pb2.NOT_FOUND
    elif isinstance(error, errors.AlreadyExists):
        code = code_pb2.ALREADY_EXISTS
    elif isinstance(error, errors.Unauthenticated):
        code = code_pb2.UNAUTHENTICATED
    elif isinstance(error, errors.PermissionDenied):
        code = code_pb2.PERMISSION_DENIED
    elif isinstance(error, errors.Unavailable | errors.ResourceExhausted):
        code = (
            code_pb2.UNAVAILABLE
            if isinstance(error, errors.Unavailable)
            else code_pb2.RESOURCE_EXHAUSTED
        )
        if error.retry_after > 0:
            delay = duration_pb2.Duration()
            delay.FromTimedelta(timedelta(seconds=error.retry_after))
            details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    elif isinstance(error, errors.DeadlineExceeded):
        code = code_pb2.DEADLINE_EXCEEDED
    else:
        code = code_pb2.INTERNAL
    return status_pb2.Status(code=code, message=error.message, details=details)


@dataclass(frozen=True)
class _Undecodable:
    field: str


class _ServiceInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]  # no grpc stubs
    """Maps domain errors to status codes and records latency and status
    metrics. With an internal key (store, rank, embed), every call but health
    and reflection must carry a valid caller assertion
    (recallatron/internal_auth.py), checked before the handler runs; its
    claims are the handler's for the call."""

    def __init__(
        self,
        internal_key: bytes = b"",
        executor: fairness.FairExecutor | None = None,
        key_of: KeyOf | None = None,
    ) -> None:
        # The wrapped handler of each method, built once: gRPC asks on every call.
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}
        self.internal_key = internal_key
        self.executor = executor
        self.key_of = key_of

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is None:
            cached = self._build(continuation, handler_call_details)
        if cached is None or self.executor is None or self.key_of is None:
            return cached
        if method.startswith(internal_auth.OPEN_PREFIXES) or cached.unary_unary is None:
            # Streams (the revocation watch) live as long as their peer: they
            # would hold a key's share for good.
            return cached
        # Runs in the server's polling thread, in the context the call's
        # handler is then submitted from: the executor reads the ticket there.
        found = self.key_of(method, handler_call_details.invocation_metadata)
        if found is None:
            return cached
        ticket = self.executor.admit(*found)
        fairness.TICKET.set(ticket)
        if ticket.refused:
            return _overloaded(method, cached, ticket.retry_after)
        return cached

    def _build(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        handler = continuation(handler_call_details)
        if handler is None:
            return handler
        guarded = bool(self.internal_key) and not method.startswith(internal_auth.OPEN_PREFIXES)
        if handler.unary_unary is not None:
            wrapped_handler = self._wrap(method, handler, guarded)
        elif handler.unary_stream is not None and guarded:
            wrapped_handler = self._wrap_stream(method, handler)
        elif guarded:
            # No internal method streams from the client; refuse rather than pass.
            wrapped_handler = _refuse(method)
        else:
            return handler
        self._wrapped[method] = wrapped_handler
        return wrapped_handler

    def _wrap_stream(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        inner = handler.unary_stream
        key = self.internal_key

        def wrapped(request: Any, context: grpc.ServicerContext) -> Any:
            try:
                claims, token = internal_auth.authenticate(key, method, context)
            except errors.DomainError as exc:
                RPC_STATUS.labels(method, "UNAUTHENTICATED").inc()
                context.abort_with_status(rpc_status.to_status(status_for(exc)))
            leave = internal_auth.enter(claims, token)
            try:
                yield from inner(request, context)
            finally:
                leave()

        return grpc.unary_stream_rpc_method_handler(
            wrapped,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _wrap(
        self, method: str, handler: grpc.RpcMethodHandler, guarded: bool = False
    ) -> grpc.RpcMethodHandler:
        inner = handler.unary_unary
        parse = handler.request_deserializer
        latency = RPC_LATENCY.labels(method)
        key = self.internal_key

        def deserialize(data: bytes) -> Any:
            # A refused request (say, a string field that is not UTF-8) is the
            # client's error: the handler answers INVALID_ARGUMENT naming it.
            try:
                return parse(data) if parse else data
            except DecodeError:
                message_class = getattr(parse, "__self__", None)
                descriptor = getattr(message_class, "DESCRIPTOR", None)
                field = undecodable_field(descriptor, data) if descriptor else ""
                return _Undecodable(field or "request")

        def wrapped(request: Any, context: grpc.ServicerContext) -> Any:
            start = time.perf_counter()
            code = "OK"
            method_token = _METHOD.set(method)
            leave = None
            # What is left of the client's deadline, and a hook to stop the
            # work the handler started when the call ends first.
            scope = deadline.Scope(context.time_remaining())
            leave_scope = deadline.enter(scope)
            if not context.add_callback(scope.abandon):
                scope.abandon()
            try:
                left = scope.remaining()
                if scope.abandoned or (left is not None and left <= 0):
                    raise errors.DeadlineExceeded("the deadline passed while the call waited")
                if guarded:
                    # Before anything else, the request's content included.
                    leave = internal_auth.enter(*internal_auth.authenticate(key, method, context))
                if isinstance(request, _Undecodable):
                    raise errors.InvalidArgument(
                        request.field, "could not be decoded (string fields must be UTF-8)"
                    )
                return inner(request, context)
            except errors.DomainError as exc:
                status = status_for(exc)
                code = _CODES[status.code].name
                context.abort_with_status(rpc_status.to_status(status))
            except Exception:
                aborted = context.code()
                if aborted not in (None, grpc.StatusCode.OK):
                    # The handler aborted the call itself; pass it on.
                    code = aborted.name
                    raise
                code = "INTERNAL"
                log.exception("unhandled error in %s", method)
                context.abort(grpc.StatusCode.INTERNAL, "internal error")
            finally:
                scope.finish()
                leave_scope()
                if leave is not None:
                    leave()
                _METHOD.reset(method_token)
                latency.observe(time.perf_counter() - start)
                RPC_STATUS.labels(method, code).inc()

        return grpc.unary_unary_rpc_method_handler(
            wrapped,
            request_deserializer=deserialize,
            response_serializer=handler.response_serializer,
        )


def _overloaded(
    method: str, handler: grpc.RpcMethodHandler, retry_after: float
) -> grpc.RpcMethodHandler:
    """Answers RESOURCE_EXHAUSTED with a retry hint, without reading the request."""
    status = rpc_status.to_status(
        status_for(
            errors.ResourceExhausted(
                "overloaded: too many calls of this workspace or token are in progress; "
                f"retry in {retry_after:.2f} s",
                retry_after,
            )
        )
    )

    def refuse(request: Any, context: grpc.ServicerContext) -> Any:
        REFUSED.labels(method).inc()
        RPC_STATUS.labels(method, "RESOURCE_EXHAUSTED").inc()
        context.abort_with_status(status)

    def refuse_stream(request: Any, context: grpc.ServicerContext) -> Any:
        refuse(request, context)
        yield  # pragma: no cover - abort raises

    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            refuse_stream, response_serializer=handler.response_serializer
        )
    return grpc.unary_unary_rpc_method_handler(
        refuse, response_serializer=handler.response_serializer
    )


def _refuse(method: str) -> grpc.RpcMethodHandler:
    def refuse(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "internal call: not accepted")

    return grpc.stream_stream_rpc_method_handler(refuse)


class Server:
    """A gRPC server with health (NOT_SERVING until :meth:`set_serving`),
    reflection, error mapping, metrics and a SIGTERM drain. ``internal``: a
    service inside the stack (store, rank, embed), whose every call but
    health and reflection must carry a caller assertion signed with the
    stack's internal key; without a key it does not start."""

    def __init__(
        self,
        settings: CommonSettings,
        service_names: Iterable[str],
        internal: bool = False,
        key_of: KeyOf | None = None,
    ) -> None:
        self.settings = settings
        internal_key = settings.internal_signing_key() if internal else b""
        if internal and not internal_key:
            raise RuntimeError(
                "no internal key: set RECALLATRON_INTERNAL_KEY_FILE (or RECALLATRON_INTERNAL_KEY) "
                "to the stack's key; `recallatron up` generates one in the state directory"
            )
        self.service_names = list(service_names)
        options = [
            ("grpc.max_receive_message_length", settings.max_message_bytes),
            ("grpc.max_send_message_length", settings.max_message_bytes),
            # Two servers on one port would split calls between them silently:
            # binding a port in use must fail instead.
            ("grpc.so_reuseport", 0),
            # Keep idle client connections alive through proxies, but refuse
            # pings more frequent than clients are configured to send.
            ("grpc.keepalive_time_ms", 60_000),
            ("grpc.keepalive_timeout_ms", 20_000),
            ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
            ("grpc.keepalive_permit_without_calls", 1),
            # Clients resolve DNS again only when a connection closes: cycling
            # connections lets round-robin clients find pods added by scaling.
            ("grpc.max_connection_age_ms", 300_000),
            ("grpc.max_connection_age_grace_ms", 30_000),
        ]
        if settings.max_streams_per_connection > 0:
            options.append(("grpc.max_concurrent_streams", settings.max_streams_per_connection))
        # Handlers run on a fair pool: a queue per workspace, threads in turn
        # (recallatron/fairness.py). The key comes from the call's assertion
        # inside the stack, from ``key_of`` (the gateway's tokens) outside it.
        self.executor = fairness.FairExecutor(
            settings.server_threads,
            fairness.Limits(
                settings.workspace_concurrency,
                settings.workspace_queue,
                settings.token_outstanding,
                settings.workspace_concurrency_alone,
                settings.workspace_alone_after_seconds,
            ),
            name="rpc",
        )
        if key_of is None and internal_key:
            key_of = internal_key_of(internal_key)
        self.grpc_server = grpc.server(
            self.executor,
            interceptors=[_ServiceInterceptor(internal_key, self.executor, key_of)],
            options=options,
        )
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc_server)
        for name in [*self.service_names, ""]:
            self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        # Set by SIGTERM/SIGINT; start-up waits (say, for Postgres) watch it.
        self.stopped = threading.Event()
        self.port = 0

    def start(self, address: str) -> int:
        reflection.enable_server_reflection(
            [*self.service_names, reflection.SERVICE_NAME, health.SERVICE_NAME], self.grpc_server
        )
        s = self.settings
        if s.tls_cert_file and s.tls_key_file:
            credentials = grpc.ssl_server_credentials(
                [(Path(s.tls_key_file).read_bytes(), Path(s.tls_cert_file).read_bytes())]
            )
            self.port = self.grpc_server.add_secure_port(address, credentials)
        else:
            self.port = self.grpc_server.add_insecure_port(address)
        if self.port == 0:
            raise RuntimeError(f"could not bind {address}")
        self.grpc_server.start()
        if self.settings.metrics_port:
            start_http_server(self.settings.metrics_port)

        def _handle(signum: int, _frame: object) -> None:
            log.info("signal received, draining", extra={"signal": signum})
            self.stopped.set()

        signal.signal(signal.SIGTERM, _handle)
        signal.signal(signal.SIGINT, _handle)
        # Lets a parent that started us on port 0 learn the port.
        port_file = os.environ.get("RECALLATRON_PORT_FILE")
        if port_file:
            with open(port_file + ".tmp", "w") as f:
                f.write(str(self.port))
            os.replace(port_file + ".tmp", port_file)
        return self.port

    def set_serving(self, serving: bool = True) -> None:
        state = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in [*self.service_names, ""]:
            self.health.set(name, state)

    def wait_for_termination(self, on_stop: Callable[[], None] | None = None) -> None:
        """Blocks until SIGTERM or SIGINT, then drains: health goes NOT_SERVING,
        new calls are refused, in-flight calls get the grace period to finish."""

        self.stopped.wait()
        self.health.enter_graceful_shutdown()
        self.grpc_server.stop(self.settings.shutdown_grace_seconds).wait()
        if on_stop is not None:
            on_stop()
        log.info("stopped")

    def stop(self) -> None:
        self.stopped.set()


def add_methods(
    server: grpc.Server, service: ServiceDescriptor, handlers: Mapping[str, Callable[..., Any]]
) -> None:
    """Serves ``service`` from one handler per method, found by name (the
    generated ``add_*Servicer_to_server`` does the same from a servicer's
    attributes); a method without a handler refuses to start."""
    missing = [m.name for m in service.methods if m.name not in handlers]
    if missing:
        raise TypeError(f"{service.name}: no handler for {', '.join(missing)}")
    table = {}
    for m in service.methods:
        make = (
            grpc.unary_stream_rpc_method_handler
            if m.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        table[m.name] = make(
            handlers[m.name],
            request_deserializer=GetMessageClass(m.input_type).FromString,
            response_serializer=GetMessageClass(m.output_type).SerializeToString,
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, table),)
    )
    server.add_registered_method_handlers(service.full_name, table)
