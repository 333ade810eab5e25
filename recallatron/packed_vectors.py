"""Vectors between the services as packed bytes: little-endian IEEE 754
float32, 4 bytes a value, in order (numpy dtype '<f4'), the form of the
protos' `bytes` vector fields (Vector.packed, DenseCandidatesRequest.
vector_packed) beside the older `repeated float` ones. Packing and reading
them are a copy each; the numbers never become a Python list."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from google.protobuf.message import Message

from recallatron import errors
from recallatron.vocabulary import VECTOR_DIMENSIONS

FLOAT32_LE = np.dtype("<f4")


def pack(values: np.ndarray) -> bytes:
    return np.asarray(values, dtype=FLOAT32_LE).tobytes()


def unpack(
    packed: bytes, floats: Sequence[float], field: str, dimensions: int = VECTOR_DIMENSIONS
) -> np.ndarray:
    """The vector of a message: ``packed`` when present (``field`` names it
    in a refusal of a wrong length), else ``floats``, all a peer of a version
    before the packed field sends. Float32 either way, pgvector's form."""
    if not packed:
        return np.asarray(floats, dtype=np.float32)
    if len(packed) != FLOAT32_LE.itemsize * dimensions:
        raise errors.InvalidArgument(
            field,
            f"must hold {dimensions} little-endian float32 values "
            f"({FLOAT32_LE.itemsize * dimensions} bytes), not {len(packed)} bytes",
        )
    return np.frombuffer(packed, dtype=FLOAT32_LE)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def fill_floats(message: Message, field: str, packed: bytes) -> None:
    """Sets ``message``'s `repeated float` ``field`` to the values ``packed``
    holds, for a peer that reads only the floats. A packed repeated float is
    on the wire exactly a length-delimited run of little-endian float32s, so
    the protobuf runtime parses these bytes into the field in native code:
    about a tenth of the cost of assigning a list (benchmarks/vector_wire.py)."""
    number = message.DESCRIPTOR.fields_by_name[field].number
    message.ClearField(field)
    # Wire type 2: length-delimited, the form of a packed repeated scalar.
    message.MergeFromString(_varint(number << 3 | 2) + _varint(len(packed)) + packed)
