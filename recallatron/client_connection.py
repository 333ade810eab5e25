"""The connection under the gateway client: the channel, the token, and one
call path (:meth:`Connection.ask`) that builds a request from plain values."""

from __future__ import annotations

import copy
import os
import time
from typing import Any, Self, TypeVar

import grpc
from google.protobuf.message import Message

from recallatron import forwarding
from recallatron.grpcclient import make_channel
from recallatron.protojson import to_message
from recallatron.settings import state_dir
from recallatron.v1 import gateway_pb2_grpc

DEFAULT_GATEWAY = "127.0.0.1:7400"
# A request with an id sent again after UNAVAILABLE (call_identified): the
# attempts in all and the first pause, doubled each time, as the channels'
# retry policy (recallatron/grpcclient.py).
RESEND_ATTEMPTS = 3
RESEND_BACKOFF_SECONDS = 0.05

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


def default_gateway() -> str:
    """The gateway address: RECALLATRON_GATEWAY, else the local stack's."""
    return os.environ.get("RECALLATRON_GATEWAY", DEFAULT_GATEWAY)


def local_gateway() -> str:
    """The gateway a command calls by default: RECALLATRON_GATEWAY, else the
    local stack's, at the port its gateway wrote in the state directory (`up`
    may have been given another port, or 0), else the default address."""
    if os.environ.get("RECALLATRON_GATEWAY"):
        return default_gateway()
    try:
        port = int((state_dir() / "run" / "gateway.port").read_text().strip())
    except (OSError, ValueError):
        return default_gateway()
    return f"127.0.0.1:{port}"


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

    def call_identified(
        self,
        stub_method: grpc.UnaryUnaryMultiCallable[Req, Resp],
        request: Req,
        timeout: float | None = None,
    ) -> Resp:
        """:meth:`call`, sent again after UNAVAILABLE (as the channel resends
        a read) when ``request`` carries a request id, whose resend is
        answered as its first attempt was; without one, sent once. For the
        methods with an optional id (grpcclient.Replay.FIRST_ANSWER_IF_GIVEN),
        which the channel's policy, per method, sends once either way."""
        identified = bool(getattr(request, "request_id", ""))
        for attempt in range(1, RESEND_ATTEMPTS + 1):
            try:
                return self.call(stub_method, request, timeout)
            except grpc.RpcError as exc:
                last = attempt == RESEND_ATTEMPTS or not identified
                if last or not is_status(exc, grpc.StatusCode.UNAVAILABLE):
                    raise
                time.sleep(RESEND_BACKOFF_SECONDS * 2 ** (attempt - 1))
        raise AssertionError("unreachable: the last attempt returns or raises")

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
