"""The query vector between the services as packed float32 bytes, beside
the older `repeated float` form a peer of the previous version still sends
and reads: the embed service answers the bytes only to a caller that asks
for them, the floats to one that does not, the same vector either way; the
store's dense arm finds the same candidates from either form and refuses
bytes of a wrong length naming the field."""

from __future__ import annotations

from typing import Any

import grpc
import numpy as np
import pytest

from recallatron.packed_vectors import fill_floats, pack
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import embed_pb2, embed_pb2_grpc, store_pb2, store_pb2_grpc
from recallatron.vocabulary import VECTOR_DIMENSIONS
from recallatron_devkit.stack import Stack
from tests.conftest import Team
from tests.internal import channel

pytestmark = pytest.mark.integration

QUERY = "when do the nightly copies of the data happen"


def _query_vectors(stack: Stack) -> tuple[str, embed_pb2.Vector, embed_pb2.Vector]:
    """The model and the query's vector as asked packed, and as not."""
    embed = embed_pb2_grpc.EmbedServiceStub(channel(stack, "embed"))
    packed = embed.Embed(
        embed_pb2.EmbedRequest(texts=[QUERY], queries=True, packed=True), timeout=60
    )
    floats = embed.Embed(embed_pb2.EmbedRequest(texts=[QUERY], queries=True), timeout=60)
    assert packed.model_id == floats.model_id
    return packed.model_id, packed.vectors[0], floats.vectors[0]


def test_embed_answers_the_bytes_to_a_caller_that_asks_and_the_floats_to_one_that_does_not(
    stack: Stack,
) -> None:
    _, packed, floats = _query_vectors(stack)
    assert len(packed.packed) == 4 * VECTOR_DIMENSIONS and not packed.values
    assert len(floats.values) == VECTOR_DIMENSIONS and not floats.packed
    assert np.frombuffer(packed.packed, dtype="<f4").tolist() == list(floats.values)


def test_the_dense_arm_finds_the_same_candidates_from_the_bytes_and_from_the_floats(
    stack: Stack, team: Team
) -> None:
    ada = team.clients["ada"]
    for title, body in [
        ("The backup window is 02:00 to 03:00 UTC", "Nightly database backups run at two."),
        ("Backups are copied offsite", "Each night's database copy goes to the second site."),
        ("Restore drills happen monthly", "We restore last night's backup copy of the data."),
    ]:
        ada.remember(title, body)
    ada.wait_embedded(timeout=120)
    model_id, packed, floats = _query_vectors(stack)
    store = store_pb2_grpc.StoreServiceStub(channel(stack, "store"))
    caller = cpb.Caller(
        workspace_id=team.workspace_id,
        member_id=team.members["ada"],
        role=cpb.ROLE_OWNER,
        purpose=cpb.PURPOSE_ASSIST,
    )

    def dense(**vector: Any) -> store_pb2.DenseCandidatesResponse:
        request = store_pb2.DenseCandidatesRequest(
            caller=caller, model_id=model_id, limit=10, **vector
        )
        answer: store_pb2.DenseCandidatesResponse = store.DenseCandidates(request, timeout=30)
        return answer

    from_bytes = dense(vector_packed=packed.packed)
    from_floats = dense(vector=floats.values)  # as a rank of the previous version sends it
    both = store_pb2.DenseCandidatesRequest(
        caller=caller, model_id=model_id, limit=10, vector_packed=packed.packed
    )
    fill_floats(both, "vector", packed.packed)  # as the current rank sends it
    from_both = store.DenseCandidates(both, timeout=30)
    assert from_bytes.embeddings_available and len(from_bytes.candidates) == 3
    assert from_bytes == from_floats == from_both

    for bad in (packed.packed[:-4], packed.packed[:-1], packed.packed + b"\0\0"):
        with pytest.raises(grpc.RpcError) as info:
            # Floats beside them change nothing: the bytes are what is read.
            dense(vector_packed=bad, vector=floats.values)
        err = info.value
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.details() or "").startswith(
            f"vector_packed: must hold {VECTOR_DIMENSIONS} little-endian float32 values"
        ) and f"not {len(bad)} bytes" in (err.details() or "")
    # A vector of the wrong numbers in the right length: the arm's own check.
    with pytest.raises(grpc.RpcError) as info:
        dense(vector_packed=pack(np.zeros(VECTOR_DIMENSIONS, dtype=np.float32)))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
