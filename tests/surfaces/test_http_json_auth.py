"""One HTTP/JSON call authenticates once (services/gateway/httpjson/): the
adapter's check before the body (``Auth.admit``) hands the identity it found
to the one call it relays to the gateway's gRPC port, inside the process, so
a gateway without a live auth cache asks the store for the token once per
call, as a gRPC call does, not twice. Nothing from outside can claim such a
hand-over: a call carrying one the adapter did not make is authenticated as
any other, and refused without a known token."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from recallatron.v1 import gateway_pb2 as pb
from recallatron.v1 import gateway_pb2_grpc
from recallatron_devkit.stack import Stack, free_port
from services.gateway.admissions import ADMISSION_KEY
from tests.integration.test_metrics import scrape
from tests.integration.test_rolling_upgrade import REPO, Processes
from tests.surfaces.httpjson import call

pytestmark = pytest.mark.integration

STORE_AUTHENTICATE = "/recallatron.v1.StoreService/Authenticate"
READ = "recallatron.v1.MemoryService/Read"
REMEMBER = "recallatron.v1.MemoryService/Remember"


@pytest.fixture(scope="module")
def uncached(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Another gateway on the session store with its auth cache off: its gRPC
    address and its HTTP/JSON base URL."""
    procs = Processes(stack, tmp_path_factory.mktemp("uncached-gateway"))
    http = f"127.0.0.1:{free_port()}"
    settings = {"RECALLATRON_AUTH_CACHE_SECONDS": "0", "RECALLATRON_HTTP_LISTEN": http}
    try:
        address = procs.start(
            "gateway", REPO, settings, store=stack.address("store"), rank=stack.address("rank")
        )
        yield address, f"http://{http}"
    finally:
        procs.stop()


@pytest.fixture
def member(stack: Stack, operator: Client) -> tuple[str, str]:
    """A workspace's owner's token, and the id of a memory of theirs."""
    ws = operator.create_workspace(f"auth-once-{uuid.uuid4().hex[:10]}").workspace
    owner = operator.create_member(ws.id, "ada", owner=True).member
    token = operator.create_token(owner.id, "http").token
    client = Client(stack.gateway, token)
    try:
        memory_id = client.remember("Auth once", "Asked of the store once.").memory.id
    finally:
        client.close()
    return token, memory_id


def store_lookups(stack: Stack) -> float:
    """The store's Authenticate calls served so far (its own metric)."""
    text = scrape(stack.config.metrics_ports["store"], STORE_AUTHENTICATE)
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("recallatron_rpc_total{") and f'method="{STORE_AUTHENTICATE}"' in line
    )


def lookups_of(stack: Stack, made: Callable[[], Any]) -> float:
    before = store_lookups(stack)
    made()
    return store_lookups(stack) - before


def test_an_http_json_call_asks_the_store_for_its_token_once(
    stack: Stack, uncached: tuple[str, str], member: tuple[str, str]
) -> None:
    address, http = uncached
    token, memory_id = member
    answers: list[tuple[int, dict[str, Any]]] = []
    asked = [
        lookups_of(stack, lambda: answers.append(call(http, READ, {"ids": [memory_id]}, token))),
        lookups_of(
            stack,
            lambda: answers.append(
                call(
                    http,
                    REMEMBER,
                    {"requestId": uuid.uuid4().hex, "title": "Once more", "kind": "KIND_NOTE"},
                    token,
                )
            ),
        ),
    ]
    assert [status for status, _ in answers] == [200, 200], answers
    assert answers[0][1]["memories"][0]["id"] == memory_id
    client = Client(address, token)
    try:
        by_grpc = lookups_of(stack, lambda: client.read([memory_id]))
    finally:
        client.close()
    assert (asked, by_grpc) == ([1, 1], 1), "lookups per call (HTTP/JSON, then gRPC)"


def test_a_hand_over_claimed_from_outside_is_not_believed(
    stack: Stack, uncached: tuple[str, str], member: tuple[str, str]
) -> None:
    address, http = uncached
    token, memory_id = member
    forged = (ADMISSION_KEY, "f" * 43)
    channel = grpc.insecure_channel(address)
    stub = gateway_pb2_grpc.MemoryServiceStub(channel)
    read = pb.ReadRequest(ids=[memory_id])
    try:
        for metadata in ((forged,), (forged, ("authorization", "Bearer rc_forged_token"))):
            with pytest.raises(grpc.RpcError) as refused:
                stub.Read(read, metadata=metadata, timeout=30)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, metadata
        status, answer = call(
            http, READ, {"ids": [memory_id]}, "rc_forged_token", headers=dict([forged])
        )
        assert (status, answer["code"]) == (401, "unauthenticated")
        # With a known token the claim changes nothing: the token is asked as usual.
        known = (forged, ("authorization", f"Bearer {token}"))
        assert lookups_of(stack, lambda: stub.Read(read, metadata=known, timeout=30)) == 1
    finally:
        channel.close()
