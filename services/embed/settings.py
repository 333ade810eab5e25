from __future__ import annotations

from pathlib import Path

from pydantic import Field

from recallatron.embed_input import MAX_INPUT_CHARS
from recallatron.settings import EMBED_ADDRESS, CommonSettings, default_state_dir


class EmbedSettings(CommonSettings):
    embed_listen: str = EMBED_ADDRESS
    # Prepared models (see `recallatron prepare-models`).
    models_dir: Path = default_state_dir() / "models"
    # A cross-encoder directory (model.onnx + tokenizer.json); empty: none.
    cross_encoder_dir: str = ""
    # ONNX Runtime threads per call. One: a query embedding costs ~3 ms of CPU
    # on one thread against ~4.4 ms spread over two (measured, docs/embeddings.md),
    # and concurrent calls already use every core.
    onnx_threads: int = Field(default=1, ge=1)
    max_batch: int = Field(default=64, ge=1)
    # Longest text per call: at least what the embedding job sends (a lower
    # setting makes longer memories fail alone and park, design §6).
    max_text_chars: int = Field(default=MAX_INPUT_CHARS, ge=1)
    # Passages per Rerank call; above the largest rerank depth a workspace may set.
    max_rerank_passages: int = Field(default=200, ge=1)
    # Recall queries on the bi-encoder's query graph (8-bit products, when
    # prepared): about 0.8x a query's time, vectors within a cosine of 0.9996 of
    # the exact graph's (docs/embeddings.md, "The query graph"). False: every
    # text on the exact graph, as memories always are.
    query_graph: bool = True
    # Single-text calls (recall queries) that arrive while one runs are run
    # together, up to this many per ONNX run (services/embed/combining.py);
    # 1 runs every call on its own.
    query_batch_max: int = Field(default=16, ge=1)
    # ONNX runs of queries at once before further ones wait to be combined:
    # one a core (each run uses onnx_threads).
    query_runs: int = Field(default=2, ge=1)
    # Texts per ONNX run when embedding: length-sorted chunks keep padding small.
    embed_chunk_size: int = Field(default=32, ge=1)
    # Pairs per ONNX run when re-ranking (measured: chunks of 8 beat one padded batch).
    rerank_chunk_size: int = Field(default=8, ge=1)
    # While the bi-encoder cannot be loaded (models not prepared yet), retry this often.
    load_retry_seconds: float = Field(default=5.0, gt=0)
    # False: exit (status 1) with the reason instead of retrying, so a stack that
    # cannot serve without the models fails at once (`recallatron up` sets it). A
    # pod keeps the default and waits, NOT_SERVING, for its models to be filled in.
    wait_for_models: bool = True
    # When set, the bound port is written here once the server listens (port 0 picks one).
    port_file: str = ""
