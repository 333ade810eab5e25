"""One definition per tool: the store's ToolService takes the public messages,
the gateway forwards each tool by one typed method, and the peer methods are
checked against the descriptors (recallatron/peer.py)."""

from __future__ import annotations

from typing import cast

import grpc
import pytest

from recallatron import peer
from recallatron.grpcserver import add_methods
from recallatron.v1 import gateway_pb2, gateway_pb2_grpc, store_pb2, tools_pb2
from recallatron.v1 import gateway_pb2 as pb
from services.gateway import peers as calls
from services.gateway.auth import Auth
from services.gateway.peers import Peers
from services.gateway.review import ReviewServicer
from services.gateway.server import MemoryServicer

TOOL_SERVICE = tools_pb2.DESCRIPTOR.services_by_name["ToolService"]


def test_every_store_tool_takes_and_answers_the_public_messages() -> None:
    public = {
        m.name: m
        for name in ("MemoryService", "ReviewService")
        for m in gateway_pb2.DESCRIPTOR.services_by_name[name].methods
    }
    assert list(TOOL_SERVICE.methods)
    for m in TOOL_SERVICE.methods:
        assert m.input_type is public[m.name].input_type, m.name
        assert m.output_type is public[m.name].output_type, m.name


def test_every_store_tool_is_forwarded_by_the_gateway_with_its_typed_method() -> None:
    assert set(calls.TOOLS) == {m.name for m in TOOL_SERVICE.methods}
    # Each tool is forwarded with the public messages, the ones the gateway serves.
    for name, m in calls.TOOLS.items():
        assert m.request_type.DESCRIPTOR.full_name == f"recallatron.v1.{name}Request", name
        assert m.response_type.DESCRIPTOR.full_name == f"recallatron.v1.{name}Response", name
    assert calls.REMEMBER.path == calls.TOOLS["Remember"].path
    # Each public service's handler table: every tool is in one of them, as a
    # handler of its own, never the generated base's that answers UNIMPLEMENTED.
    handled: dict[str, object] = {}
    for service, servicer in (("MemoryService", MemoryServicer), ("ReviewService", ReviewServicer)):
        descriptor = gateway_pb2.DESCRIPTOR.services_by_name[service]
        table = servicer(cast(Peers, None), cast(Auth, None)).handlers(descriptor)
        assert set(table) <= {m.name for m in descriptor.methods}
        handled.update(table)
    generated = {
        name: getattr(base, name)
        for base in (gateway_pb2_grpc.MemoryServiceServicer, gateway_pb2_grpc.ReviewServiceServicer)
        for name in vars(base)
    }
    for name in calls.TOOLS:
        assert name in handled, name
        assert getattr(handled[name], "__func__", None) is not generated.get(name), name


def test_the_gateway_serves_every_public_method_from_its_table() -> None:
    # add_methods refuses a service with a method nobody handles: every method
    # of MemoryService and ReviewService is a tool forwarded or one of the servicer's.
    for service, servicer in (("MemoryService", MemoryServicer), ("ReviewService", ReviewServicer)):
        descriptor = gateway_pb2.DESCRIPTOR.services_by_name[service]
        table = servicer(cast(Peers, None), cast(Auth, None)).handlers(descriptor)
        assert {m.name for m in descriptor.methods} == set(table), service


def test_a_method_refuses_message_classes_that_are_not_its_own() -> None:
    with pytest.raises(TypeError, match="takes"):
        peer.method(TOOL_SERVICE, "Remember", pb.ReadRequest, pb.RememberResponse)
    with pytest.raises(TypeError, match="answers"):
        peer.method(TOOL_SERVICE, "Remember", pb.RememberRequest, pb.ReadResponse)
    with pytest.raises(KeyError):
        peer.method(TOOL_SERVICE, "Recall", pb.RecallRequest, pb.RecallResponse)
    m = peer.method(TOOL_SERVICE, "Remember", pb.RememberRequest, pb.RememberResponse)
    assert (m.path, m.name) == ("/recallatron.v1.ToolService/Remember", "Remember")


class _Server:
    def __init__(self) -> None:
        self.generic: list[object] = []
        self.registered: dict[str, object] = {}

    def add_generic_rpc_handlers(self, handlers: tuple[object, ...]) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, name: str, table: dict[str, object]) -> None:
        self.registered[name] = table


def test_a_service_without_a_handler_for_every_method_refuses_to_start() -> None:
    store = store_pb2.DESCRIPTOR.services_by_name["StoreService"]
    handlers = {m.name: (lambda request, context: None) for m in store.methods}
    missing = dict(handlers)
    missing.pop("GetMemories")
    with pytest.raises(TypeError, match="GetMemories"):
        add_methods(_Server(), store, missing)  # type: ignore[arg-type]
    server = _Server()
    add_methods(server, store, handlers)  # type: ignore[arg-type]
    table = server.registered[store.full_name]
    assert set(table) == set(handlers)  # type: ignore[arg-type]
    assert isinstance(table["WatchRevocations"], grpc.RpcMethodHandler)  # type: ignore[index]
    assert table["WatchRevocations"].response_streaming  # type: ignore[index]
