"""One way to call a peer inside the stack: typed methods, the caller
assertion, the deadline and the relay of the peer's status.

A :class:`Method` is a peer method with its request and response classes,
checked against the service's descriptor when it is made, so that mypy checks
every call's request and response types (``Peer.call(REMEMBER, request)``
takes a RememberRequest and returns a RememberResponse) and the method's name
(for the assertion) travels with it instead of being looked up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from recallatron import internal_auth
from recallatron.grpcclient import Metadata, relay, result_of, start_unary, unary

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


@dataclass(frozen=True)
class Method(Generic[Req, Resp]):
    """A unary method of a peer service, with its message classes."""

    path: str
    request_type: type[Req]
    response_type: type[Resp]

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[1]


def method(
    service: ServiceDescriptor, name: str, request_type: type[Req], response_type: type[Resp]
) -> Method[Req, Resp]:
    """``service``'s method ``name``; refuses (at import) classes that are not
    the method's own."""
    found = service.methods_by_name[name]
    if found.input_type.full_name != request_type.DESCRIPTOR.full_name:
        raise TypeError(f"{name} takes {found.input_type.full_name}")
    if found.output_type.full_name != response_type.DESCRIPTOR.full_name:
        raise TypeError(f"{name} answers {found.output_type.full_name}")
    return Method(f"/{service.full_name}/{name}", request_type, response_type)


def methods(service: ServiceDescriptor) -> dict[str, Method[Message, Message]]:
    """Every unary method of ``service`` by name, for a table that forwards
    messages as they are."""
    return {
        m.name: Method(
            f"/{service.full_name}/{m.name}",
            GetMessageClass(m.input_type),
            GetMessageClass(m.output_type),
        )
        for m in service.methods
        if not m.client_streaming and not m.server_streaming
    }


class Pending(Generic[Resp]):
    """A call started in the background; ``result()`` answers as
    :meth:`Peer.call` would."""

    def __init__(self, future: grpc.Future[Resp], peer: str) -> None:
        self._future = future
        self._peer = peer

    def result(self) -> Resp:
        try:
            return result_of(self._future)
        except grpc.RpcError as exc:
            raise relay(exc, self._peer) from None


class Peer:
    """One peer service on one channel. Every call has a deadline (never
    later than the call being served, and cancelled when it is abandoned:
    design §9), carries the given caller assertion, and a failure becomes a
    domain error: the peer's own status relayed, an unreachable peer or a
    missed deadline UNAVAILABLE (:func:`recallatron.grpcclient.relay`)."""

    def __init__(self, channel: grpc.Channel, timeout: float, name: str) -> None:
        self.channel = channel
        self.timeout = timeout
        self.name = name
        # One callable per method path, made on first use. Each is stored by
        # :meth:`_callable` for the Method whose path keys it, so its message
        # types are that Method's; the dict holds every method's, hence Any.
        self._callables: dict[str, grpc.UnaryUnaryMultiCallable[Any, Any]] = {}

    def _callable(self, m: Method[Req, Resp]) -> grpc.UnaryUnaryMultiCallable[Req, Resp]:
        found = self._callables.get(m.path)
        if found is None:
            made: grpc.UnaryUnaryMultiCallable[Req, Resp] = self.channel.unary_unary(
                m.path,
                request_serializer=m.request_type.SerializeToString,
                response_deserializer=m.response_type.FromString,
            )
            self._callables[m.path] = made
            return made
        return found

    def limit(self, timeout: float | None) -> float:
        # The call's own limit, or less when the caller said so (never zero:
        # gRPC would then fail the call at once).
        return self.timeout if timeout is None else max(0.001, min(self.timeout, timeout))

    @staticmethod
    def _metadata(assertion: str) -> Metadata | None:
        return internal_auth.metadata(assertion) if assertion else None

    def call(
        self, m: Method[Req, Resp], request: Req, assertion: str = "", timeout: float | None = None
    ) -> Resp:
        try:
            return unary(self._callable(m), request, self.limit(timeout), self._metadata(assertion))
        except grpc.RpcError as exc:
            raise relay(exc, self.name) from None

    def raw(
        self, m: Method[Req, Resp], request: Req, assertion: str = "", timeout: float | None = None
    ) -> Resp:
        """The same call, its failure left as the grpc.RpcError (for a caller
        that degrades on some codes instead of relaying them)."""
        return unary(self._callable(m), request, self.limit(timeout), self._metadata(assertion))

    def start(
        self, m: Method[Req, Resp], request: Req, assertion: str = "", timeout: float | None = None
    ) -> Pending[Resp]:
        future = start_unary(
            self._callable(m), request, self.limit(timeout), self._metadata(assertion)
        )
        return Pending(future, self.name)
