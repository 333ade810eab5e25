"""Authentication is cached by the gateway, and a revocation still takes
effect without passing through that gateway (it is pushed from the store)."""

from __future__ import annotations

import grpc
import pytest

from recallatron.v1 import store_pb2, store_pb2_grpc
from recallatron_devkit.stack import Stack
from tests import internal
from tests.conftest import Team, wait_for
from tests.integration.test_metrics import scrape

pytestmark = pytest.mark.integration


def _hits(stack: Stack) -> float:
    text = scrape(stack.config.metrics_ports["gateway"], "recallatron_gateway_auth_cache_total")
    for line in text.splitlines():
        if line.startswith('recallatron_gateway_auth_cache_total{result="hit"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _refused(call) -> bool:  # type: ignore[no-untyped-def]
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined, no-any-return]
    return False


def test_a_revocation_at_the_store_reaches_the_gateway(stack: Stack, team: Team) -> None:
    bob = team.clients["bob"]
    memory_id = team.clients["ada"].remember("cached auth", audience_to="workspace").memory.id
    # The stream may still be connecting right after start-up: wait until
    # bob's calls are answered from the cache.
    before = _hits(stack)
    wait_for(
        lambda: bob.read([memory_id]) and _hits(stack) > before,
        "authentication answered from the gateway's cache",
        timeout=30,
    )
    # Revoked behind the gateway's back (as through another gateway replica).
    store = store_pb2_grpc.StoreServiceStub(internal.channel(stack, "store"))
    store.RevokeToken(store_pb2.RevokeTokenRequest(token_id=team.token_ids["bob"]), timeout=5)
    wait_for(lambda: _refused(lambda: bob.read([memory_id])), "the revoked token refused", 10)
    # Others' cached identities were dropped with it, and come back.
    assert team.clients["ada"].read([memory_id]).memories[0].id == memory_id
