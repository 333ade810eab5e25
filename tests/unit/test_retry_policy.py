"""The channels' retry policy (recallatron/grpcclient.py): after UNAVAILABLE a
read or a write with a request id is sent again when it answers a resend
as it answered the first (its declared Replay), a write without one is sent once, since a resend
could do it twice (another episode, another token) though the first attempt
was done and only its answer lost."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from concurrent import futures

import grpc
import pytest

from recallatron.client import Client
from recallatron.grpcclient import IDENTIFIED_WRITES, Replay, make_channel, not_retried
from recallatron.v1 import embed_pb2, gateway_pb2, gateway_pb2_grpc, rank_pb2, store_pb2, tools_pb2
from recallatron.v1 import gateway_pb2 as pb

SENT: Counter[str] = Counter()


def _unavailable(request: bytes, context: grpc.ServicerContext) -> bytes:
    method = context._rpc_event.call_details.method.decode()  # type: ignore[attr-defined]
    SENT[method.rsplit("/", 1)[1]] += 1
    context.abort(grpc.StatusCode.UNAVAILABLE, "a peer behind this server is down")


class _Everything(grpc.GenericRpcHandler):
    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[bytes, bytes]:
        return grpc.unary_unary_rpc_method_handler(_unavailable)


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(4))
    server.add_generic_rpc_handlers((_Everything(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


@pytest.fixture(scope="module")
def channel(address: str) -> Iterator[grpc.Channel]:
    ch = make_channel(address)
    yield ch
    ch.close()


def _sent(call: grpc.UnaryUnaryMultiCallable, request: object, name: str) -> int:  # type: ignore[type-arg]
    SENT.clear()
    with pytest.raises(grpc.RpcError) as caught:
        call(request, timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    return SENT[name]


def test_a_write_without_a_request_id_is_sent_once(channel: grpc.Channel) -> None:
    memory = gateway_pb2_grpc.MemoryServiceStub(channel)
    admin = gateway_pb2_grpc.AdminServiceStub(channel)
    assert _sent(memory.CreateEpisode, pb.CreateEpisodeRequest(title="t"), "CreateEpisode") == 1
    assert _sent(admin.CreateToken, pb.AdminServiceCreateTokenRequest(), "CreateToken") == 1


def test_a_creation_is_sent_again_by_the_client_only_with_a_request_id(
    channel: grpc.Channel, address: str
) -> None:
    """CreateWorkspace and CreateMember take an optional id: the channel sends
    each once, id or not (its policy is per method); the client, which gives
    one unless told not to, sends it again with its id."""
    admin = gateway_pb2_grpc.AdminServiceStub(channel)
    for name, request in (
        ("CreateWorkspace", pb.AdminServiceCreateWorkspaceRequest(request_id="r")),
        ("CreateMember", pb.AdminServiceCreateMemberRequest(request_id="r")),
    ):
        assert _sent(getattr(admin, name), request, name) == 1
    client = Client(address, "token")
    try:
        creations: dict[str, Callable[[str | None], object]] = {
            "CreateWorkspace": lambda rid: client.create_workspace("x", request_id=rid),
            "CreateMember": lambda rid: client.create_member("w", "x", request_id=rid),
        }
        for name, create in creations.items():
            for request_id, sent in ((None, 3), ("mine", 3), ("", 1)):
                SENT.clear()
                with pytest.raises(grpc.RpcError) as caught:
                    create(request_id)
                assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
                assert SENT[name] == sent, (name, request_id)
    finally:
        client.close()


def test_reads_and_writes_with_a_request_id_are_sent_again(channel: grpc.Channel) -> None:
    memory = gateway_pb2_grpc.MemoryServiceStub(channel)
    assert _sent(memory.Remember, pb.RememberRequest(request_id="r"), "Remember") == 3
    assert _sent(memory.Read, pb.ReadRequest(), "Read") == 3


def test_every_write_without_a_request_id_that_acts_again_is_listed() -> None:
    listed = {(n["service"].rsplit(".", 1)[1], n["method"]) for n in not_retried()}
    assert {
        ("MemoryService", "CreateEpisode"),
        ("ToolService", "CreateEpisode"),
        ("AdminService", "CreateToken"),
        ("StoreService", "RotateToken"),
        ("ReviewService", "MergeEntities"),
    } <= listed
    # Writes a resend cannot double stay retried.
    assert not {m for s, m in listed} & {"Remember", "CreateMemory", "Forget", "Read"}


def _listed(replays: dict[str, Replay]) -> set[tuple[str, str]]:
    return {(n["service"].rsplit(".", 1)[1], n["method"]) for n in not_retried(replays)}


def test_a_newly_tabled_method_follows_its_declaration() -> None:
    # Remember declared as refusing its resend is sent once wherever it is
    # served; CreateToken declared as answering the first answer is resent.
    table = {**IDENTIFIED_WRITES, "Remember": Replay.ALREADY_EXISTS}
    table["CreateToken"] = Replay.FIRST_ANSWER
    listed = _listed(table)
    assert {("MemoryService", "Remember"), ("ToolService", "Remember")} <= listed
    assert not {m for s, m in listed} & {"CreateToken"}
    assert ("AdminService", "RotateToken") in listed
    # Left out of the table, a write with a request id is sent once.
    untabled = {k: v for k, v in IDENTIFIED_WRITES.items() if k != "Derive"}
    assert ("MemoryService", "Derive") in _listed(untabled)
    assert ("MemoryService", "Derive") not in _listed(dict(IDENTIFIED_WRITES))


def test_every_method_with_a_request_id_declares_its_replay() -> None:
    identified = {
        m.name
        for module in (gateway_pb2, store_pb2, tools_pb2, rank_pb2, embed_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for m in service.methods
        if "request_id" in m.input_type.fields_by_name
    }
    assert identified == set(IDENTIFIED_WRITES)
