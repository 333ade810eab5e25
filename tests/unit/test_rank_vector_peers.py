"""Rank's two hops of the query vector in a rolling upgrade: it asks the
embed service for packed bytes and reads the floats of a service that does
not know them; it sends the store the bytes and the floats both, which a
store of the previous version reads alone."""

from __future__ import annotations

from typing import Any

import grpc
import numpy as np
import pytest

from recallatron.packed_vectors import pack
from recallatron.v1 import common_pb2 as cpb
from recallatron.v1 import embed_pb2, store_pb2
from recallatron.vocabulary import VECTOR_DIMENSIONS
from services.rank import peers
from services.rank.ports import Degraded, QueryVector

VECTOR = np.random.default_rng(3).standard_normal(VECTOR_DIMENSIONS).astype(np.float32)


class Answering:
    """Stands in for the call: keeps the request, answers ``answer``."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.requests: list[Any] = []

    def __call__(self, peer: Any, m: Any, request: Any, timeout: Any, name: str) -> Any:
        # Over the wire, as a peer would read it.
        self.requests.append(type(request).FromString(request.SerializeToString()))
        return self.answer


def _embed_query(monkeypatch: pytest.MonkeyPatch, vector: embed_pb2.Vector) -> QueryVector:
    call = Answering(embed_pb2.EmbedResponse(vectors=[vector], model_id="m"))
    monkeypatch.setattr(peers, "_degradable", call)
    client = peers.EmbedClient(grpc.insecure_channel("127.0.0.1:9"), 1.0, 1.0)
    found = client.embed_query("a query")
    assert call.requests[0].packed and call.requests[0].queries
    return found


def test_the_query_vector_is_read_from_the_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    found = _embed_query(monkeypatch, embed_pb2.Vector(packed=pack(VECTOR)))
    assert found.model_id == "m" and np.array_equal(found.values, VECTOR)


def test_an_embed_service_of_the_previous_version_answers_floats_which_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = _embed_query(monkeypatch, embed_pb2.Vector(values=VECTOR.tolist()))
    assert found.values.dtype == np.float32 and np.array_equal(found.values, VECTOR)


def test_bytes_of_a_wrong_length_degrade_the_dense_arm(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(Degraded) as info:
        _embed_query(monkeypatch, embed_pb2.Vector(packed=pack(VECTOR)[:-4]))
    assert info.value.kind == "failed"
    assert "vectors[0].packed: must hold 384" in info.value.message


def test_the_store_is_sent_the_bytes_and_the_floats(monkeypatch: pytest.MonkeyPatch) -> None:
    call = Answering(store_pb2.DenseCandidatesResponse(embeddings_available=True))
    monkeypatch.setattr(peers, "_degradable", call)
    client = peers.StoreClient(grpc.insecure_channel("127.0.0.1:9"), 1.0)
    client.dense(cpb.Caller(), QueryVector("m", VECTOR), 10, cpb.RecallFilters())
    (sent,) = call.requests
    assert sent.vector_packed == pack(VECTOR)
    # What a store of the previous version reads: the floats alone.
    assert list(sent.vector) == VECTOR.tolist()
    assert sent.model_id == "m" and sent.limit == 10
