"""Each call a server serves, wrapped once per method: the caller assertion
checked inside the stack, the call's deadline, fair admission by workspace
or token, domain errors mapped to status codes, latency and status metrics."""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import grpc
from google.protobuf.message import DecodeError
from grpc_status import rpc_status
from prometheus_client import Counter, Histogram

from recallatron import deadline, errors, fairness, internal_auth
from recallatron.grpcserver.status import status_for
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

# A method's handler as the interceptor sees it: one interceptor wraps every
# method alike, so its request and response are any method's messages.
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"

# What an interceptor is handed to find a method's handler (None: no such method).
Continuation = Callable[[grpc.HandlerCallDetails], "Handler | None"]


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


@dataclass(frozen=True)
class _Undecodable:
    field: str


class ServiceInterceptor(grpc.ServerInterceptor):
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
        self._wrapped: dict[str, Handler] = {}
        self.internal_key = internal_key
        self.executor = executor
        self.key_of = key_of

    def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
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
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        method = handler_call_details.method
        handler = continuation(handler_call_details)
        if handler is None:
            return handler
        guarded = bool(self.internal_key) and not method.startswith(internal_auth.OPEN_PREFIXES)
        if handler.unary_unary is not None:
            wrapped_handler = self._wrap(method, handler, handler.unary_unary, guarded)
        elif handler.unary_stream is not None and guarded:
            wrapped_handler = self._wrap_stream(method, handler, handler.unary_stream)
        elif guarded:
            # No internal method streams from the client; refuse rather than pass.
            wrapped_handler = _refuse(method)
        else:
            return handler
        self._wrapped[method] = wrapped_handler
        return wrapped_handler

    def _wrap_stream(
        self,
        method: str,
        handler: Handler,
        inner: Callable[[Any, grpc.ServicerContext], Iterator[Any]],
    ) -> Handler:
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
        self,
        method: str,
        handler: Handler,
        inner: Callable[[Any, grpc.ServicerContext], Any],
        guarded: bool = False,
    ) -> Handler:
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
                # grpc.ServicerContext.code() exists (an experimental API);
                # types-grpcio leaves it out.
                aborted = context.code()  # type: ignore[attr-defined]
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


def _overloaded(method: str, handler: Handler, retry_after: float) -> Handler:
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


def _refuse(method: str) -> Handler:
    def refuse(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "internal call: not accepted")

    return grpc.stream_stream_rpc_method_handler(refuse)
