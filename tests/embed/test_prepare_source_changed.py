"""`prepare-models cross-encoder --from DIR` re-exports when the model in DIR
changed since it was prepared (a retrained or replaced model), and still does
nothing when DIR is as it was. Needs torch: marked."""

from __future__ import annotations

from pathlib import Path

import pytest

from recallatron_devkit.embed_fixture import (
    TINY_CROSS_ENCODER_ID,
    build_tiny_cross_encoder,
    prepare_tiny_cross_encoder,
)
from services.embed.manifest import CROSS_ENCODER_KIND, read_manifest
from services.embed.prepare import prepare_cross_encoder

pytestmark = pytest.mark.integration


def test_a_changed_source_directory_is_prepared_again(tmp_path: Path) -> None:
    """Retraining the model in its directory left the old export in place:
    'is up to date; nothing to do', and the embed service went on serving the
    old weights."""
    source, onnx_dir = prepare_tiny_cross_encoder(tmp_path)
    before = read_manifest(onnx_dir, CROSS_ENCODER_KIND).sha256
    said: list[str] = []

    def again() -> None:
        said.clear()
        prepare_cross_encoder(
            str(source), onnx_dir, model_id=TINY_CROSS_ENCODER_ID, log=said.append
        )

    again()
    assert any("up to date" in line for line in said), said
    build_tiny_cross_encoder(source, seed=1)  # other weights, same directory
    again()
    assert any(line.startswith(f"preparing {onnx_dir}: ") for line in said), said
    assert read_manifest(onnx_dir, CROSS_ENCODER_KIND).sha256 != before
    again()
    assert any("up to date" in line for line in said), said
