"""Each call a server serves, wrapped once per method: the caller assertion
checked inside the stack, the call's deadline, fair admission by workspace
or token, domain errors mapped to status codes, latency and status metrics.

Inside the stack a call's assertion is checked when gRPC looks up its
handler, in the server's polling thread, before the call is queued for the
handler pool: metadata and assertion over their size bounds are refused
before anything is decoded, a verified assertion gives the call its fair
queue, and a refused call gets a handler that only answers
UNAUTHENTICATED (it neither parses the request nor waits in a queue). gRPC
tells a handler, not the lookup, which peer sent the call, so the failures
of each peer are counted there (:class:`PeerFailures`): past its limit a
peer's calls are refused with RESOURCE_EXHAUSTED and a retry hint before
their request is parsed or their handler runs."""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import grpc
from google.protobuf.message import DecodeError
from grpc_status import rpc_status
from prometheus_client import Counter, Histogram

from recallatron import deadline, errors, fairness, internal_auth
from recallatron.grpcserver.open_streams import OPEN_STREAMS, bounded_stream
from recallatron.grpcserver.status import status_for
from recallatron.wire import decode_refusal

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


def claims_key(claims: internal_auth.Claims) -> tuple[str, str]:
    """The fair queue of a call inside the stack: the workspace and member of
    a member assertion; the kind and issuer of any other."""
    if claims.kind == internal_auth.MEMBER:
        return f"workspace:{claims.workspace_id}", f"member:{claims.member_id}"
    return f"{claims.kind}:{claims.issuer}", ""


def internal_key_of(key: bytes) -> KeyOf:
    """For store, rank and embed: :func:`claims_key` of a verified
    assertion; None when it does not verify (the call is refused)."""

    def key_of(method: str, metadata: Sequence[tuple[str, Any]]) -> tuple[str, str] | None:
        try:
            claims, _token = internal_auth.authenticate(key, method, metadata)
        except errors.DomainError:
            return None
        return claims_key(claims)

    return key_of


# Failed caller assertions one peer may send at once, and how many more per
# second after that: more than a test of every method sends, far fewer than a
# flood (the sent thousands a second).
FAILURE_BURST = 128
FAILURE_PER_SECOND = 16.0


class PeerFailures:
    """Failed caller assertions by peer: a bucket of ``burst`` refilled at
    ``per_second``, spent by each call refused UNAUTHENTICATED for its
    assertion. A peer is what gRPC names one (address and port: one client
    connection). Keyed by the address alone, one process on a shared host
    (a node, a developer's machine) would shut out the gateway and rank
    beside it; a client that reconnects starts a new bucket, paying a
    connection for it."""

    def __init__(self, burst: int = FAILURE_BURST, per_second: float = FAILURE_PER_SECOND) -> None:
        self.burst = max(1, burst)
        self.per_second = per_second
        self._buckets: dict[str, tuple[float, float]] = {}  # peer -> (left, when)
        self._lock = threading.Lock()

    def _left(self, peer: str, now: float) -> float:
        left, when = self._buckets.get(peer, (float(self.burst), now))
        return min(float(self.burst), left + (now - when) * self.per_second)

    def wait(self, peer: str) -> float:
        """0 while ``peer`` is within its limit, else the seconds until it is."""
        if self.per_second <= 0 or peer not in self._buckets:
            return 0.0
        with self._lock:
            left = self._left(peer, time.monotonic())
        return 0.0 if left >= 1.0 else (1.0 - left) / self.per_second

    def failed(self, peer: str) -> None:
        if self.per_second <= 0:
            return
        now = time.monotonic()
        with self._lock:
            self._buckets[peer] = (self._left(peer, now) - 1.0, now)
            if len(self._buckets) > 4096:
                # Full buckets say nothing: dropped, so new peers cannot grow the table.
                self._buckets = {
                    p: b for p, b in self._buckets.items() if self._left(p, now) < self.burst
                }

    def check(self, peer: str) -> None:
        wait = self.wait(peer)
        if wait:
            raise errors.ResourceExhausted(
                "internal call: too many failed caller assertions from this peer; "
                f"retry in {wait:.2f} s",
                wait,
            )


# The verified assertion of the call being looked up, for its handler: set in
# the polling thread, in the context gRPC then runs the handler in.
_AUTHENTICATED: contextvars.ContextVar[tuple[internal_auth.Claims, str] | None] = (
    contextvars.ContextVar("recallatron_authenticated", default=None)
)


# The full name of the method the current thread serves ("/pkg.Service/Method"),
# set around each call by the interceptor below.
_METHOD: contextvars.ContextVar[str] = contextvars.ContextVar("recallatron_method", default="")


def current_method() -> str:
    """The method being served in this thread ('' outside a call)."""
    return _METHOD.get()


@dataclass(frozen=True)
class _Undecodable:
    field: str
    problem: str


def _parsed(parse: Callable[[bytes], Any] | None, data: bytes) -> Any:
    """The request, or why it does not decode: a string field that is not
    UTF-8 or bytes that are no message are the client's error, answered
    INVALID_ARGUMENT saying which."""
    try:
        return parse(data) if parse else data
    except DecodeError:
        message_class = getattr(parse, "__self__", None)
        descriptor = getattr(message_class, "DESCRIPTOR", None)
        return _Undecodable(*decode_refusal(descriptor, data))


@dataclass(frozen=True)
class _Received:
    """The bytes of a call's request inside the stack: parsed only once the
    call is admitted (a bound assertion is checked against them first)."""

    data: bytes


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
        self.failures = PeerFailures()
        # The streams open without a credential (health's watch, reflection)
        # this server serves at once: a few, so that anyone who can reach it
        # cannot hold every handler thread with streams left silent.
        self.open_streams = threading.BoundedSemaphore(OPEN_STREAMS)

    def _guarded(self, method: str) -> bool:
        return bool(self.internal_key) and not method.startswith(internal_auth.OPEN_PREFIXES)

    def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        method = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is None:
            cached = self._build(continuation, handler_call_details)
        if cached is None:
            return cached
        metadata = handler_call_details.invocation_metadata
        found: tuple[str, str] | None = None
        if self._guarded(method):
            # Runs in the server's polling thread, before the call is queued.
            try:
                authenticated = internal_auth.authenticate(self.internal_key, method, metadata)
            except errors.DomainError as exc:
                return self._unauthenticated(method, cached, exc)
            _AUTHENTICATED.set(authenticated)
            found = claims_key(authenticated[0])
        if self.executor is None:
            return cached
        if method.startswith(internal_auth.OPEN_PREFIXES) or cached.unary_unary is None:
            # Streams (the revocation watch) live as long as their peer: they
            # would hold a key's share for good.
            return cached
        # In the context the call's handler is then submitted from: the
        # executor reads the ticket there.
        if self.key_of is not None:
            found = self.key_of(method, metadata)
        if found is None:
            return cached
        ticket = self.executor.admit(*found)
        fairness.TICKET.set(ticket)
        if ticket.refused:
            return _overloaded(method, cached, ticket.retry_after)
        return cached

    def _unauthenticated(self, method: str, handler: Handler, error: errors.DomainError) -> Handler:
        """A handler that only refuses, counting the failure against the peer
        (or, past its limit, telling it when to come back)."""
        status = rpc_status.to_status(status_for(error))
        failures = self.failures

        def refuse(request: Any, context: grpc.ServicerContext) -> None:
            peer = context.peer()
            wait = failures.wait(peer)
            if wait:
                _refuse_blocked(method, context, wait)
            failures.failed(peer)
            RPC_STATUS.labels(method, "UNAUTHENTICATED").inc()
            context.abort_with_status(status)

        return _refusing(handler, refuse)

    def _admitted(
        self, method: str, context: grpc.ServicerContext, received: Any
    ) -> tuple[internal_auth.Claims, str]:
        """The verified assertion of a guarded call, once its peer is within
        its limit and the assertion, when bound, is the request's."""
        peer = context.peer()
        self.failures.check(peer)
        authenticated = _AUTHENTICATED.get()
        if authenticated is None:
            authenticated = internal_auth.authenticate(
                self.internal_key, method, context.invocation_metadata()
            )
        if isinstance(received, _Received):
            try:
                internal_auth.check_request(authenticated[0], received.data)
            except errors.DomainError:
                self.failures.failed(peer)
                raise
        return authenticated

    def _build(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> Handler | None:
        method = handler_call_details.method
        handler = continuation(handler_call_details)
        if handler is None:
            return handler
        guarded = self._guarded(method)
        if handler.unary_unary is not None:
            wrapped_handler = self._wrap(method, handler, handler.unary_unary, guarded)
        elif handler.unary_stream is not None and guarded:
            wrapped_handler = self._wrap_stream(method, handler, handler.unary_stream)
        elif guarded:
            # No internal method streams from the client; refuse rather than pass.
            wrapped_handler = _refuse(method)
        elif handler.unary_stream is not None or handler.stream_stream is not None:
            # Health's watch and reflection: open to anyone, and a stream held
            # open holds a handler thread while it lasts.
            wrapped_handler = bounded_stream(
                handler,
                self.open_streams,
                RPC_STATUS.labels(method, "RESOURCE_EXHAUSTED").inc,
            )
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
        parse = handler.request_deserializer

        def deserialize(data: bytes) -> _Received:
            return _Received(data)

        def wrapped(received: _Received, context: grpc.ServicerContext) -> Any:
            try:
                claims, token = self._admitted(method, context, received)
                request = _parsed(parse, received.data)
                if isinstance(request, _Undecodable):
                    raise errors.InvalidArgument(request.field, request.problem)
            except errors.DomainError as exc:
                status = status_for(exc)
                RPC_STATUS.labels(method, _CODES[status.code].name).inc()
                context.abort_with_status(rpc_status.to_status(status))
            leave = internal_auth.enter(claims, token)
            try:
                yield from inner(request, context)
            finally:
                leave()

        return grpc.unary_stream_rpc_method_handler(
            wrapped,
            request_deserializer=deserialize,
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

        def deserialize(data: bytes) -> Any:
            # Inside the stack the request is parsed in the handler, once its
            # assertion is checked (against these bytes when bound).
            return _Received(data) if guarded else _parsed(parse, data)

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
                    leave = internal_auth.enter(*self._admitted(method, context, request))
                    request = _parsed(parse, request.data)
                if isinstance(request, _Undecodable):
                    raise errors.InvalidArgument(request.field, request.problem)
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


def _refuse_blocked(method: str, context: grpc.ServicerContext, wait: float) -> None:
    status = status_for(
        errors.ResourceExhausted(
            "internal call: too many failed caller assertions from this peer; "
            f"retry in {wait:.2f} s",
            wait,
        )
    )
    RPC_STATUS.labels(method, "RESOURCE_EXHAUSTED").inc()
    context.abort_with_status(rpc_status.to_status(status))


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

    def refuse(request: Any, context: grpc.ServicerContext) -> None:
        REFUSED.labels(method).inc()
        RPC_STATUS.labels(method, "RESOURCE_EXHAUSTED").inc()
        context.abort_with_status(status)

    return _refusing(handler, refuse)


def _refusing(handler: Handler, refuse: Callable[[Any, grpc.ServicerContext], None]) -> Handler:
    """A handler of ``handler``'s kind (one answer or a stream) that only
    calls ``refuse``, which aborts. No request deserializer: the request's
    bytes are never parsed."""

    def refuse_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
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
