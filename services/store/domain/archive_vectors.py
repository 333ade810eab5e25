"""An archive's vectors checked like its other records (docs/export.md):
each the copy's dimension of finite numbers, one per memory, model and input
version, as the copy's memory_embedding keeps them. The database would
refuse the others only while the rows go in, naming its table, not the
archive's line."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from recallatron import errors
from services.store.domain.archive_reading import add_once

# memory_embedding.embedding is vector(384)
# (0067_baseline/02_memory_tables.sql).
DIMENSION = 384


def vector_floats(encoded: str) -> npt.NDArray[np.float32]:
    """The float32s of a vector the archive holds as base64, big-endian."""
    return np.frombuffer(base64.b64decode(encoded, validate=True), dtype=">f4")


def check_vectors(placed: Iterable[tuple[str, dict[str, Any]]]) -> None:
    """Refuses, naming the line and field, a vector of another dimension, one
    holding a value that is not a finite number (pgvector keeps neither NaN
    nor an infinity), and a second vector of one memory, model and input
    version (the table's key)."""
    seen: set[tuple[str, str, str]] = set()
    for place, record in placed:
        where = f"{place}: vector"
        try:
            floats = vector_floats(record["vector"])
        except (binascii.Error, ValueError):
            raise errors.InvalidArgument(where, "is not base64 of big-endian float32s") from None
        if floats.size != DIMENSION:
            raise errors.InvalidArgument(
                where, f"holds {floats.size} numbers: the copy keeps vectors of {DIMENSION}"
            )
        bad = np.flatnonzero(~np.isfinite(floats))
        if bad.size:
            raise errors.InvalidArgument(
                where,
                f"value {int(bad[0])} is {floats[bad[0]]}, not a number a vector may hold "
                "(finite numbers only)",
            )
        add_once(
            seen,
            (record["memory_id"], record["model_id"], record["input_version"]),
            f"{place}: memory_id",
            f"the memory's vector of model {record['model_id']!r} "
            f"(input version {record['input_version']!r}) is in the archive already",
        )
