"""The embedding job's embed calls in a rolling upgrade: it asks for packed
bytes and reads them as float32 arrays, which go to pgvector's adapter as
they are; an embed service of the previous version ignores the ask and
answers floats, which are read the same. Packed bytes of a wrong length are
a failed call, never a vector."""

from __future__ import annotations

from typing import Any

import grpc
import numpy as np
import pytest
from pgvector import Vector
from psycopg.adapt import PyFormat, Transformer

from recallatron.packed_vectors import pack
from recallatron.v1 import embed_pb2
from recallatron.vocabulary import VECTOR_DIMENSIONS
from services.embedding_job.embedder import BadAnswer, Embedder
from services.embedding_job.vectors import binary, unfit
from services.store.infrastructure.transactions import configure_workspace_connection
from tests.unit.test_vector_adapters import VECTOR as VECTOR_TYPE
from tests.unit.test_vector_adapters import FakeConnection

VECTORS = np.random.default_rng(5).standard_normal((2, VECTOR_DIMENSIONS)).astype(np.float32)


class Stub:
    """Stands in for the embed service: keeps the request, answers ``vectors``."""

    def __init__(self, vectors: list[embed_pb2.Vector]) -> None:
        self.vectors = vectors
        self.requests: list[embed_pb2.EmbedRequest] = []

    def Embed(self, request: embed_pb2.EmbedRequest, timeout: float) -> Any:
        # Over the wire, as the service would read it.
        self.requests.append(embed_pb2.EmbedRequest.FromString(request.SerializeToString()))
        answer = embed_pb2.EmbedResponse(vectors=self.vectors, model_id="m")
        return embed_pb2.EmbedResponse.FromString(answer.SerializeToString())


def embed(vectors: list[embed_pb2.Vector]) -> tuple[str, list[np.ndarray]]:
    embedder = Embedder("127.0.0.1:9", 1.0)
    stub = Stub(vectors)
    embedder.stub = stub  # type: ignore[assignment]
    answered = embedder.embed(["first", "second"])
    (asked,) = stub.requests
    assert asked.packed and list(asked.texts) == ["first", "second"]
    assert not asked.queries  # memories: the exact graph
    return answered


def test_the_vectors_are_read_from_the_bytes() -> None:
    model, vectors = embed([embed_pb2.Vector(packed=pack(v)) for v in VECTORS])
    assert model == "m"
    for got, want in zip(vectors, VECTORS, strict=True):
        assert got.dtype == np.float32 and np.array_equal(got, want)
        assert not unfit(got)


def test_an_embed_service_of_the_previous_version_answers_floats_which_are_read() -> None:
    model, vectors = embed([embed_pb2.Vector(values=v.tolist()) for v in VECTORS])
    assert model == "m"
    for got, want in zip(vectors, VECTORS, strict=True):
        assert got.dtype == np.float32 and np.array_equal(got, want)


@pytest.mark.parametrize("cut", [4, 1], ids=["a value short", "a byte short"])
def test_bytes_of_a_wrong_length_fail_the_call(cut: int) -> None:
    answer = [embed_pb2.Vector(packed=pack(VECTORS[0])), embed_pb2.Vector(packed=pack(VECTORS[1]))]
    answer[1].packed = answer[1].packed[:-cut]
    with pytest.raises(BadAnswer) as info:
        embed(answer)
    # Read by the job as a call the service refused (its rows tried alone).
    assert isinstance(info.value, grpc.RpcError)
    assert info.value.code() == grpc.StatusCode.INTERNAL
    assert "vectors[1].packed: must hold 384 little-endian float32 values" in info.value.details()


def test_a_vector_read_from_the_bytes_goes_to_pgvector_as_it_is() -> None:
    """No copy on the way to the adapter, and dumped as the floats would be."""
    (_, vectors) = embed([embed_pb2.Vector(packed=pack(v)) for v in VECTORS])
    stored = binary(vectors[0])
    assert stored is vectors[0]
    conn = FakeConnection()
    configure_workspace_connection(conn, VECTOR_TYPE)  # type: ignore[arg-type]
    dumper = Transformer(conn).get_dumper(stored, PyFormat.BINARY)
    dumped = dumper.dump(stored)
    assert dumped is not None and bytes(dumped) == Vector(VECTORS[0].tolist()).to_binary()
