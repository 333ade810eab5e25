"""The client side of the stack's internal calls (recallatron/internal_auth.py):
channels whose interceptor attaches a caller assertion to every call, made
for the call (a member's or the service's own), bound to the request's bytes
where the assertion is for one method, or forwarded as the call being served
received it (rank passing a recall's assertion on)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import grpc
from google.protobuf.message import Message

from recallatron.internal_auth import (
    HEADER,
    RANK,
    RECALL_METHODS,
    Signer,
    forwarded,
    metadata,
    store_method,
)
from recallatron.v1 import common_pb2 as cpb

# The request of the call an interceptor passes on (any method's), and what
# its continuation returns: one answer's future or a stream's iterator
# (grpc._CallFuture and grpc._CallIterator, which exist only in the stubs), so
# one method intercepts both kinds of call.
_Req = TypeVar("_Req")
_Answer = TypeVar("_Answer")


class _Details(grpc.ClientCallDetails):
    def __init__(
        self,
        details: grpc.ClientCallDetails,
        extra: tuple[tuple[str, str], ...],
        replace: bool = False,
    ):
        self.method = details.method
        self.timeout = details.timeout
        kept = [(k, v) for k, v in details.metadata or () if not (replace and k == HEADER)]
        self.metadata = (*kept, *extra)
        self.credentials = details.credentials
        self.wait_for_ready = details.wait_for_ready
        self.compression = details.compression


class _Attach(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Attaches ``token_for(method)`` to calls that carry no assertion; with
    a ``binder``, binds a single call's assertion (attached here or given by
    the caller) to the request sent (:meth:`Signer.bind`)."""

    def __init__(self, token_for: Callable[[str], str], binder: Signer | None = None) -> None:
        self.token_for = token_for
        self.binder = binder

    def _bound(self, token: str, called: str, request: object) -> str:
        if self.binder is None or not isinstance(request, Message):
            return token
        # The same call gRPC makes to send it: the bytes the server digests.
        return self.binder.bind(token, called, request.SerializeToString())

    def _details(self, details: grpc.ClientCallDetails, request: object) -> grpc.ClientCallDetails:
        given = next((v for k, v in details.metadata or () if k == HEADER), None)
        if given is None:
            token = self.token_for(details.method)
            if not token:
                return details
            return _Details(details, metadata(self._bound(token, details.method, request)))
        bound = self._bound(str(given), details.method, request)
        if bound == given:
            return details
        return _Details(details, metadata(bound), replace=True)

    def _intercept(
        self,
        continuation: Callable[[grpc.ClientCallDetails, _Req], _Answer],
        client_call_details: grpc.ClientCallDetails,
        request: _Req,
    ) -> _Answer:
        return continuation(self._details(client_call_details, request), request)

    # A call with one answer and a call with a stream of them are sent alike.
    intercept_unary_unary = _intercept
    intercept_unary_stream = _intercept


def binding_channel(channel: grpc.Channel, signer: Signer) -> grpc.Channel:
    """A channel that binds each call's assertion, when it was made with
    ``signer``'s key for that call alone, to the request sent (the
    gateway's calls to the store and rank)."""
    return grpc.intercept_channel(channel, _Attach(lambda _method: "", signer))


def forwarding_channel(channel: grpc.Channel) -> grpc.Channel:
    """A channel whose calls carry the assertion the current call came with
    (rank's calls to store and embed, made for the recall it serves)."""
    return grpc.intercept_channel(channel, _Attach(lambda _method: forwarded()))


def service_channel(channel: grpc.Channel, signer: Signer) -> grpc.Channel:
    """A channel whose calls carry a fresh service assertion for each method
    (the embedding job's calls to embed)."""
    return grpc.intercept_channel(channel, _Attach(lambda m: signer.service([m]), signer))


def member_channel(channel: grpc.Channel, signer: Signer) -> grpc.Channel:
    """A channel whose calls are vouched for the Caller inside each request
    (requests without one: as the operator, or as a service where the store
    asks for that). For tests and tools that call store, rank or embed
    directly with the stack's key; the gateway vouches explicitly
    (services/gateway/server.py)."""

    class _FromRequest(_Attach):
        def intercept_unary_unary(
            self,
            continuation: Callable[[grpc.ClientCallDetails, _Req], _Answer],
            client_call_details: grpc.ClientCallDetails,
            request: _Req,
        ) -> _Answer:
            details = client_call_details
            # Every request's ``caller`` field is a Caller (protos/); any request
            # type may pass here, so both are checked.
            caller = getattr(request, "caller", None)
            if (
                isinstance(caller, cpb.Caller)
                and isinstance(request, Message)
                and request.HasField("caller")
            ):
                methods = RECALL_METHODS if details.method == RANK else [details.method]
                token = self._bound(signer.member(caller, methods), details.method, request)
                return continuation(_Details(details, metadata(token)), request)
            return continuation(self._details(details, request), request)

    service_methods = {store_method("Authenticate"), store_method("WatchRevocations")}

    def other(m: str) -> str:
        return signer.service([m]) if m in service_methods else signer.operator([m])

    return grpc.intercept_channel(channel, _FromRequest(other, signer))
