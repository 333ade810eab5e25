"""The query and memory vectors between the services as packed float32
bytes (recallatron/packed_vectors.py): packed and read without a list, the
older `repeated float` form read when the bytes are absent, a wrong length
refused naming the field, and the floats filled for an older peer the same
as a list would fill them."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from recallatron import errors
from recallatron.packed_vectors import fill_floats, pack, unpack
from recallatron.v1 import embed_pb2, store_pb2
from recallatron.vocabulary import VECTOR_DIMENSIONS


def _vector(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(VECTOR_DIMENSIONS).astype(np.float32)


def test_packed_bytes_are_little_endian_float32_in_order() -> None:
    vector = _vector()
    packed = pack(vector)
    assert len(packed) == 4 * VECTOR_DIMENSIONS
    assert struct.unpack(f"<{VECTOR_DIMENSIONS}f", packed) == tuple(vector.tolist())
    # A float64 source packs to the same float32 values.
    assert pack(vector.astype(np.float64)) == packed


def test_unpack_reads_the_bytes_back_as_float32() -> None:
    vector = _vector()
    read = unpack(pack(vector), [], "vector_packed")
    assert read.dtype == np.float32 and read.shape == (VECTOR_DIMENSIONS,)
    assert np.array_equal(read, vector)


def test_without_bytes_the_floats_are_read() -> None:
    vector = _vector()
    read = unpack(b"", vector.tolist(), "vector_packed")
    assert read.dtype == np.float32 and np.array_equal(read, vector)


def test_the_bytes_are_read_in_place_of_the_floats_when_both_are_there() -> None:
    read = unpack(pack(_vector(1)), _vector(2).tolist(), "vector_packed")
    assert np.array_equal(read, _vector(1))


@pytest.mark.parametrize("size", [4 * (VECTOR_DIMENSIONS - 1), 4 * VECTOR_DIMENSIONS - 1, 3, 8000])
def test_a_wrong_length_is_refused_naming_the_field(size: int) -> None:
    with pytest.raises(errors.InvalidArgument) as info:
        unpack(b"\x01" * size, [], "vector_packed")
    assert info.value.field == "vector_packed"
    assert str(info.value) == (
        f"vector_packed: must hold {VECTOR_DIMENSIONS} little-endian float32 values "
        f"({4 * VECTOR_DIMENSIONS} bytes), not {size} bytes"
    )


def test_another_dimension_is_read_when_asked() -> None:
    assert unpack(pack(np.arange(3, dtype=np.float32)), [], "v", dimensions=3).tolist() == [0, 1, 2]


def test_the_floats_filled_from_the_bytes_are_those_a_list_gives() -> None:
    vector = _vector()
    filled = store_pb2.DenseCandidatesRequest(model_id="m", limit=5)
    fill_floats(filled, "vector", pack(vector))
    listed = store_pb2.DenseCandidatesRequest(model_id="m", limit=5, vector=vector.tolist())
    assert list(filled.vector) == vector.tolist()
    assert filled == listed
    assert filled.SerializeToString() == listed.SerializeToString()
    # Filled again: replaced, not appended to.
    fill_floats(filled, "vector", pack(_vector(2)))
    assert list(filled.vector) == _vector(2).tolist()


def test_an_older_reader_of_the_floats_reads_the_same_vector_from_a_message_with_both() -> None:
    """What an older store or rank parses: the floats only (it knows no
    bytes field, and skips it as unknown)."""
    vector = _vector()
    answer = embed_pb2.EmbedResponse(model_id="m", dimensions=VECTOR_DIMENSIONS)
    fill_floats(answer.vectors.add(), "values", pack(vector))
    parsed = embed_pb2.EmbedResponse.FromString(answer.SerializeToString())
    assert np.array_equal(np.asarray(parsed.vectors[0].values, dtype=np.float32), vector)
    request = store_pb2.DenseCandidatesRequest(vector_packed=pack(vector))
    fill_floats(request, "vector", pack(vector))
    parsed_request = store_pb2.DenseCandidatesRequest.FromString(request.SerializeToString())
    assert list(parsed_request.vector) == vector.tolist()
    assert unpack(parsed_request.vector_packed, [], "vector_packed").tolist() == vector.tolist()
