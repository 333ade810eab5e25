"""The gateway caches authentication only while the store's revocation
stream is live: with the store gone the cache is off, and once the store is
back a revocation made behind the gateway's back still reaches it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from recallatron.client import Client
from recallatron.v1 import store_pb2, store_pb2_grpc
from recallatron_devkit.stack import Stack
from tests import internal
from tests.conftest import wait_for
from tests.faults.stackutil import new_stack, owner_client, running, until_ok
from tests.integration.test_metrics import scrape

pytestmark = pytest.mark.integration

ENV = {"RECALLATRON_SHUTDOWN_GRACE_SECONDS": "1", "RECALLATRON_STORE_TIMEOUT_SECONDS": "3"}


@pytest.fixture(scope="module")
def fault_stack(prepared_models_dir: Path) -> Iterator[Stack]:
    with running(new_stack(prepared_models_dir, ENV, metrics=True)) as stack:
        yield stack


def _live(stack: Stack) -> float | None:
    text = scrape(stack.config.metrics_ports["gateway"], "recallatron_gateway_auth_cache_live")
    for line in text.splitlines():
        if line.startswith("recallatron_gateway_auth_cache_live "):
            return float(line.rsplit(" ", 1)[1])
    return None


def _refused(client: Client, memory_id: str) -> bool:
    try:
        client.read([memory_id])
    except grpc.RpcError as exc:
        return exc.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined, no-any-return]
    return False


def test_cache_follows_the_stream_across_a_store_restart(fault_stack: Stack) -> None:
    owner, workspace_id, _ = owner_client(fault_stack, "revocations")
    member = owner.create_member(workspace_id, "bob").member
    created = owner.create_token(member.id, "bob")
    bob = Client(fault_stack.gateway, created.token)
    memory_id = owner.remember("seen by bob", audience_to="workspace").memory.id
    wait_for(lambda: _live(fault_stack) == 1.0, "the revocation stream live", 30)
    assert bob.read([memory_id]).memories[0].id == memory_id

    fault_stack.stop_service("store")
    wait_for(lambda: _live(fault_stack) == 0.0, "the cache off with the store gone", 30)
    fault_stack.start_service("store")
    fault_stack.wait_serving("store")
    wait_for(lambda: _live(fault_stack) == 1.0, "the stream live again", 30)
    until_ok(lambda: bob.read([memory_id]))

    # Revoked at the store, not through the gateway: only the stream tells it.
    store = store_pb2_grpc.StoreServiceStub(internal.channel(fault_stack, "store"))
    store.RevokeToken(store_pb2.RevokeTokenRequest(token_id=created.token_id), timeout=5)
    wait_for(lambda: _refused(bob, memory_id), "the revoked token refused", 10)
    bob.close()
    owner.close()
