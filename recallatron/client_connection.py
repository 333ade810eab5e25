"""The connection under the gateway client: the channel, the token, and one
call path (:meth:`Connection.ask`) that builds a request from plain values."""

from __future__ import annotations

import copy
import os
from typing import Any, Self, TypeVar

import grpc
from google.protobuf.message import Message

from recallatron import forwarding
from recallatron.grpcclient import make_channel
from recallatron.protojson import to_message
from recallatron.v1 import gateway_pb2_grpc

DEFAULT_GATEWAY = "127.0.0.1:7400"

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


def default_gateway() -> str:
    """The gateway address: RECALLATRON_GATEWAY, else the local stack's."""
    return os.environ.get("RECALLATRON_GATEWAY", DEFAULT_GATEWAY)


class Connection:
    def __init__(
        self, address: str, token: str, timeout: float = 10.0, ca_file: str | None = None
    ) -> None:
        # TLS when a CA is given (or RECALLATRON_TLS_CA_FILE is set).
        self.channel = make_channel(address, ca_file=ca_file)
        self.memory = gateway_pb2_grpc.MemoryServiceStub(self.channel)
        self.admin = gateway_pb2_grpc.AdminServiceStub(self.channel)
        self.review = gateway_pb2_grpc.ReviewServiceStub(self.channel)
        self.token = token
        self.timeout = timeout
        # An end user's address a front forwards (recallatron/forwarding.py).
        self.forwarded: tuple[tuple[str, str], ...] = ()

    def close(self) -> None:
        self.channel.close()

    def with_token(self, token: str) -> Self:
        """This client for another token, on the same channel (the token
        travels with each call): closing it is closing this one."""
        other = copy.copy(self)
        other.token = token
        return other

    def for_address(self, client_address: str | None, secret: str) -> Self:
        """This client calling for an end user at ``client_address``, on the
        same channel: the gateway counts its failed authentications against
        that address when it knows ``secret`` (recallatron/forwarding.py)."""
        other = copy.copy(self)
        other.forwarded = forwarding.metadata(client_address, secret)
        return other

    def _md(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"), *self.forwarded)

    def call(
        self,
        stub_method: grpc.UnaryUnaryMultiCallable[Req, Resp],
        request: Req,
        timeout: float | None = None,
    ) -> Resp:
        return stub_method(request, metadata=self._md(), timeout=timeout or self.timeout)

    def start(
        self,
        stub_method: grpc.UnaryUnaryMultiCallable[Req, Resp],
        request: Req,
        timeout: float | None = None,
    ) -> grpc.Future[Resp]:
        """:meth:`call` started, not waited for: its caller can cancel it
        (the peer then stops the work) instead of waiting out the deadline."""
        return stub_method.future(request, metadata=self._md(), timeout=timeout or self.timeout)

    def ask(
        self,
        method: grpc.UnaryUnaryMultiCallable[Req, Resp],
        request: type[Req],
        timeout: float | None = None,
        /,
        **f: Any,
    ) -> Resp:
        """Calls ``method`` with the request its fields give by proto name, in
        plain values (recallatron/protojson.py): an enum's name, an RFC 3339
        time, "workspace" or a member id; a field None or left out stays unset."""
        return self.call(method, to_message(request, f), timeout)


def is_status(exc: BaseException, code: grpc.StatusCode) -> bool:
    return isinstance(exc, grpc.RpcError) and exc.code() == code
