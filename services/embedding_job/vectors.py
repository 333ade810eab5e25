"""The vectors the embed service answers, as the embedding job checks and
stores them."""

from __future__ import annotations

import numpy as np

from recallatron.vocabulary import VECTOR_DIMENSIONS


def unfit(values: np.ndarray) -> str:
    """Why a vector the embed service answered cannot be stored ("" when it
    can): not the model's dimensions, not finite, or all zero (whose cosine
    with anything is NaN, which passes any floor)."""
    vector = np.asarray(values)
    if vector.shape != (VECTOR_DIMENSIONS,):
        return f"{vector.size} numbers ({VECTOR_DIMENSIONS} expected)"
    if not np.isfinite(vector).all():
        return "a number that is not finite"
    if not np.any(vector):
        return "all zero"
    return ""


def binary(values: np.ndarray) -> np.ndarray:
    # Sent in pgvector's binary form (see services.store.infrastructure.db);
    # no copy of a float32 vector, as the embedder reads them.
    return np.asarray(values, dtype=np.float32)
