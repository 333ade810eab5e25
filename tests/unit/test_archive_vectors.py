"""An archive's vectors checked like its other records before anything is
made (docs/export.md): the database refused NaN values and a vector given
twice with a message naming its table, never the archive's line."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recallatron import errors
from services.store.domain import archive_plan as plan
from tests.unit.archive_records import T, memory, uid, write_archive


def vector(n: int, values: list[float] | None = None, **more: Any) -> dict[str, Any]:
    floats = np.array(values if values is not None else [0.05] * 384, dtype=">f4")
    encoded = base64.b64encode(floats.tobytes()).decode()
    return {"memory_id": uid(n), "model_id": "m", "input_version": "v", "created_at": T,
            "vector": encoded, **more}  # fmt: skip


NAN = [0.05] * 383 + [float("nan")]
INF = [float("inf")] + [0.05] * 383


@pytest.mark.parametrize(
    ("vectors", "field", "said"),
    [
        ([vector(1), vector(2, NAN)], "vectors.jsonl line 2: vector", "not a number"),
        ([vector(1, INF)], "vectors.jsonl line 1: vector", "not a number"),
        ([vector(1), vector(2), vector(1)], "vectors.jsonl line 3: memory_id", "already"),
        # The schema's own check: 384 float32s and no other count.
        ([{**vector(1), "vector": "A" * 2044}], "vectors.jsonl line 1: vector", ""),
    ],
)
def test_a_bad_vector_is_refused_naming_its_line(
    tmp_path: Path, vectors: list[dict[str, Any]], field: str, said: str
) -> None:
    write_archive(tmp_path / "a", {"memories": [memory(1), memory(2)], "vectors": vectors})
    with pytest.raises(errors.InvalidArgument) as err:
        plan.read_archive(tmp_path / "a")
    assert err.value.field == field, err.value
    assert said in err.value.description, err.value


def test_vectors_of_one_memory_under_two_models_or_stamps_are_read(tmp_path: Path) -> None:
    """The copy keeps a vector per memory, model and input version."""
    rows = [vector(1), vector(1, model_id="other"), vector(1, input_version="w"), vector(2)]
    write_archive(tmp_path / "a", {"memories": [memory(1), memory(2)], "vectors": rows})
    assert plan.read_archive(tmp_path / "a").count("vectors") == 4
