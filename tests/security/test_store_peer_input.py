"""Bad input a peer with a genuine assertion sends the store's recall calls
(tests/internal.py signs as the stack does): a clear status naming the field,
never INTERNAL, never work without bound."""

from __future__ import annotations

import grpc
import pytest

from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import store_pb2, store_pb2_grpc
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.internal import channel

pytestmark = pytest.mark.integration


def _caller(team: Team) -> cpb.Caller:
    return cpb.Caller(
        workspace_id=team.workspace_id,
        member_id=team.members["ada"],
        role=cpb.ROLE_OWNER,
        purpose=cpb.PURPOSE_ASSIST,
    )


def _refusal(call) -> grpc.RpcError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value  # type: ignore[no-any-return]


@pytest.mark.parametrize("text", ["Robin\x00Goodwin leads", "x" * 6_000_000])
def test_entity_cards_refuse_a_text_no_query_may_be(stack: Stack, team: Team, text: str) -> None:
    """NUL answered INTERNAL; six million characters were read (the arms
    refuse past the query's limit)."""
    store = store_pb2_grpc.StoreServiceStub(channel(stack, "store"))
    request = store_pb2.NamedEntitiesRequest(caller=_caller(team), text=text)
    err = _refusal(lambda: store.NamedEntities(request, timeout=60))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()  # type: ignore[attr-defined]
    assert (err.details() or "").startswith("text:")  # type: ignore[attr-defined]


def test_the_dense_arm_refuses_a_zero_vector(stack: Stack, team: Team) -> None:
    """A zero query vector's cosine with every row is NaN, which passed the
    floor: the arm answered rows scored NaN."""
    store = store_pb2_grpc.StoreServiceStub(channel(stack, "store"))
    request = store_pb2.DenseCandidatesRequest(
        caller=_caller(team), vector=[0.0] * 384, model_id="any-model", limit=10
    )
    err = _refusal(lambda: store.DenseCandidates(request, timeout=20))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
    assert (err.details() or "").startswith("vector:")  # type: ignore[attr-defined]
