from __future__ import annotations

from pathlib import Path

from recallatron.settings import CommonSettings, default_state_dir


class EmbedSettings(CommonSettings):
    embed_listen: str = "127.0.0.1:7402"
    # Prepared models (see `recallatron prepare-models`).
    models_dir: Path = default_state_dir() / "models"
    # A cross-encoder directory (model.onnx + tokenizer.json); empty: none.
    cross_encoder_dir: str = ""
    onnx_threads: int = 2
    max_batch: int = 64
    max_text_chars: int = 8_000
