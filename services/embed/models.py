"""The two local models behind the embed service, through ONNX Runtime.

Plain code (no gRPC): :class:`BiEncoder` turns texts into normalised vectors,
:class:`CrossEncoder` scores (query, passage) pairs, and :class:`EmbedModels`
validates requests, holds whichever models are loaded and raises domain errors.
Serving needs only onnxruntime, tokenizers and numpy.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from recallatron import errors
from services.embed.combining import QueryCombiner
from services.embed.manifest import (
    BI_ENCODER_DIRNAME,
    BI_ENCODER_KIND,
    CROSS_ENCODER_KIND,
    MODEL_FILE,
    QUERY_GRAPH_MIN_WORDS,
    QUERY_MODEL_FILE,
    TOKENIZER_FILE,
    Manifest,
    ManifestError,
    read_manifest,
)
from services.embed.settings import EmbedSettings

log = logging.getLogger("recallatron.embed.models")

NO_CROSS_ENCODER = (
    "no cross-encoder configured: set RECALLATRON_CROSS_ENCODER_DIR to a directory made by "
    "`python -m services.embed.prepare cross-encoder --from <model> --out <dir>`"
)


class ModelLoadError(Exception):
    """A prepared model directory could not be loaded."""


def make_session(model_path: Path, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = max(1, threads)
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Idle pool threads spinning starve the other session and Postgres on a small
    # machine (measured: 21 ms -> 8.3 ms per query embedding with spinning off).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return ort.InferenceSession(
        str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
    )


def load_tokenizer(path: Path, max_length: int) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(path))
    # The tokenizer.json shipped with MiniLM truncates at 128 and pads everything to
    # 128; the model was trained and is used by sentence-transformers at 256. Padding
    # is done per chunk below, to the longest sequence of the chunk.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")
    return tokenizer


def word_pieces(encoding: Encoding) -> int:
    """The pieces of a text that hold a letter or a digit (markers and
    unknown pieces left out)."""
    return sum(
        1
        for token in encoding.tokens
        if token not in ("[CLS]", "[SEP]", "[UNK]", "[PAD]") and any(c.isalnum() for c in token)
    )


def length_sorted_chunks(encodings: Sequence[Encoding], size: int) -> Iterator[list[int]]:
    """Indices in chunks of similar length, so that each chunk pads little."""
    order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
    for start in range(0, len(order), max(1, size)):
        yield order[start : start + size]


def pad_chunk(
    encodings: Sequence[Encoding], pad_id: int, input_names: Sequence[str]
) -> dict[str, np.ndarray]:
    """The model inputs of one chunk, padded to its longest sequence."""
    width = max(len(e.ids) for e in encodings)
    ids = np.full((len(encodings), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    types = np.zeros((len(encodings), width), dtype=np.int64)
    for row, encoding in enumerate(encodings):
        n = len(encoding.ids)
        ids[row, :n] = encoding.ids
        mask[row, :n] = encoding.attention_mask
        types[row, :n] = encoding.type_ids
    available = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    return {name: available[name] for name in input_names}


class _OnnxModel:
    kind: str

    def __init__(self, directory: Path, threads: int, chunk_size: int) -> None:
        self.directory = directory
        self.chunk_size = max(1, chunk_size)
        try:
            self.manifest: Manifest = read_manifest(directory, self.kind, verify=True)
            self.tokenizer = load_tokenizer(directory / TOKENIZER_FILE, self.manifest.max_length)
            self.session = make_session(directory / MODEL_FILE, threads)
        # onnxruntime and tokenizers raise their own exception types for bad files.
        except Exception as exc:
            raise ModelLoadError(f"cannot load the {self.kind} from {directory}: {exc}") from exc
        self.input_names = [i.name for i in self.session.get_inputs()]
        unknown = set(self.input_names) - {"input_ids", "attention_mask", "token_type_ids"}
        if unknown:
            raise ModelLoadError(
                f"cannot load the {self.kind} from {directory}: unexpected inputs {sorted(unknown)}"
            )
        self.output_name = self.session.get_outputs()[0].name

    @property
    def model_id(self) -> str:
        return self.manifest.model_id

    def _run(
        self, encodings: Sequence[Encoding], session: ort.InferenceSession | None = None
    ) -> np.ndarray:
        feeds = pad_chunk(encodings, self.manifest.pad_id, self.input_names)
        chosen = self.session if session is None else session
        (output,) = chosen.run([self.output_name], feeds)
        return np.asarray(output, dtype=np.float32)


class BiEncoder(_OnnxModel):
    """all-MiniLM-L6-v2 with mean pooling and L2 normalisation inside the graph.

    Queries may run on a second graph of the same model, its products in 8-bit
    integers (QUERY_MODEL_FILE, when the directory holds one): a query is
    embedded one text at a time, where the weights' size bounds the time.
    Memories are always embedded with the exact graph, so stored vectors are
    the model's own."""

    kind = BI_ENCODER_KIND

    def __init__(self, directory: Path, threads: int = 2, chunk_size: int = 32) -> None:
        super().__init__(directory, threads, chunk_size)
        if self.manifest.dimensions <= 0:
            raise ModelLoadError(f"{directory}: the manifest gives no dimensions")
        self.query_session: ort.InferenceSession | None = None
        if QUERY_MODEL_FILE in self.manifest.files:
            try:
                self.query_session = make_session(directory / QUERY_MODEL_FILE, threads)
            except Exception as exc:  # onnxruntime's own exception types
                raise ModelLoadError(
                    f"cannot load the query graph from {directory}: {exc}"
                ) from exc

    @property
    def dimensions(self) -> int:
        return self.manifest.dimensions

    @property
    def embed_input_version(self) -> str:
        return self.manifest.embed_input_version

    def tokenize(self, texts: Sequence[str]) -> list[Encoding]:
        return self.tokenizer.encode_batch(list(texts))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in the order given."""
        return self._embed(texts, queries=False)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """As :meth:`embed`, for recall queries: on the query graph when there
        is one, except the texts of fewer than QUERY_GRAPH_MIN_WORDS words."""
        return self._embed(texts, queries=True)

    def _embed(self, texts: Sequence[str], queries: bool) -> np.ndarray:
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenize(texts)
        use_fast = queries and self.query_session is not None
        exact: list[int] = []
        fast: list[int] = []
        for i, encoding in enumerate(encodings):
            if use_fast and word_pieces(encoding) >= QUERY_GRAPH_MIN_WORDS:
                fast.append(i)
            else:
                exact.append(i)
        for indices, session in ((exact, self.session), (fast, self.query_session)):
            subset = [encodings[i] for i in indices]
            for chunk in length_sorted_chunks(subset, self.chunk_size):
                rows = [indices[j] for j in chunk]
                out[rows] = self._run([subset[j] for j in chunk], session)
        return out


class CrossEncoder(_OnnxModel):
    """A sequence-classification model with one output: a relevance score per pair.
    The activation that sentence-transformers applies is folded into the graph."""

    kind = CROSS_ENCODER_KIND

    def __init__(self, directory: Path, threads: int = 2, chunk_size: int = 8) -> None:
        super().__init__(directory, threads, chunk_size)

    def tokenize(self, query: str, passages: Sequence[str]) -> list[Encoding]:
        return self.tokenizer.encode_batch([(query, passage) for passage in passages])

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One float32 score per passage, in the order given; higher is more relevant."""
        out = np.empty(len(passages), dtype=np.float32)
        if not passages:
            return out
        encodings = self.tokenize(query, passages)
        for chunk in length_sorted_chunks(encodings, self.chunk_size):
            out[chunk] = self._run([encodings[i] for i in chunk]).reshape(len(chunk), -1)[:, 0]
        return out


@dataclass(frozen=True)
class ModelSummary:
    model_id: str
    sha256: str
    max_length: int
    dimensions: int


@dataclass(frozen=True)
class ModelsInfo:
    embedder: ModelSummary | None
    # None when no cross-encoder is configured (or its manifest cannot be read).
    cross_encoder: ModelSummary | None
    cross_encoder_loaded: bool
    embed_input_version: str


def _summary(manifest: Manifest) -> ModelSummary:
    return ModelSummary(
        model_id=manifest.model_id,
        sha256=manifest.sha256,
        max_length=manifest.max_length,
        dimensions=manifest.dimensions,
    )


class EmbedModels:
    """The models of one embed service and the rules of its calls."""

    def __init__(self, settings: EmbedSettings) -> None:
        self.settings = settings
        self.bi_encoder: BiEncoder | None = None
        self.cross_encoder: CrossEncoder | None = None
        self.cross_encoder_error = NO_CROSS_ENCODER
        self.cross_encoder_manifest: Manifest | None = None
        self.queries: QueryCombiner[BiEncoder] = QueryCombiner(
            self._embed_queries, settings.query_batch_max, settings.query_runs
        )

    @property
    def bi_encoder_dir(self) -> Path:
        return Path(self.settings.models_dir) / BI_ENCODER_DIRNAME

    def load_bi_encoder(self) -> BiEncoder:
        """Raises :class:`ModelLoadError` when the models are not prepared."""
        model = BiEncoder(
            self.bi_encoder_dir,
            threads=self.settings.onnx_threads,
            chunk_size=self.settings.embed_chunk_size,
        )
        self.bi_encoder = model
        log.info(
            "bi-encoder loaded",
            extra={"model_id": model.model_id, "sha256": model.manifest.sha256},
        )
        return model

    def load_cross_encoder(self) -> bool:
        """Loads the configured cross-encoder. A failure is logged and remembered
        (Rerank then fails with it); everything else keeps working."""
        directory = self.settings.cross_encoder_dir.strip()
        if not directory:
            log.info("no cross-encoder configured; rerank is unavailable")
            return False
        path = Path(directory)
        try:
            self.cross_encoder_manifest = read_manifest(path, CROSS_ENCODER_KIND, verify=False)
        except (ManifestError, OSError):
            self.cross_encoder_manifest = None
        try:
            model = CrossEncoder(
                path,
                threads=self.settings.onnx_threads,
                chunk_size=self.settings.rerank_chunk_size,
            )
        except ModelLoadError as exc:
            # Said to callers (it reaches recall answers) without the
            # server's paths or the loader's words: those are in the log.
            self.cross_encoder_error = (
                "the cross-encoder configured by RECALLATRON_CROSS_ENCODER_DIR could not be "
                "loaded (the embed service's log says why)"
            )
            log.error("cross-encoder not loaded", extra={"error": str(exc)})
            return False
        self.cross_encoder = model
        self.cross_encoder_manifest = model.manifest
        log.info(
            "cross-encoder loaded",
            extra={"model_id": model.model_id, "sha256": model.manifest.sha256},
        )
        return True

    def _check_text(self, field: str, text: str) -> None:
        if len(text) > self.settings.max_text_chars:
            raise errors.InvalidArgument(
                field,
                f"is {len(text)} characters long; the limit is {self.settings.max_text_chars}",
            )

    def embed(self, texts: Sequence[str], queries: bool = False) -> tuple[BiEncoder, np.ndarray]:
        """Vectors of ``texts``; ``queries``: they are recall queries, which run
        on the query graph when the settings allow (memories never do: stored
        vectors are the exact graph's)."""
        if not texts:
            raise errors.InvalidArgument("texts", "must hold at least one text")
        if len(texts) > self.settings.max_batch:
            raise errors.InvalidArgument(
                "texts",
                f"holds {len(texts)} texts; at most {self.settings.max_batch} per call",
            )
        for i, text in enumerate(texts):
            self._check_text(f"texts[{i}]", text)
        if not (queries and self.settings.query_graph):
            return self._embed_batch(texts)
        if len(texts) == 1 and self.settings.query_batch_max > 1:
            # A recall's query: combined with those arriving meanwhile.
            model, vector = self.queries.embed(texts[0])
            return model, vector[np.newaxis, :]
        return self._embed_queries(texts)

    def _loaded(self) -> BiEncoder:
        model = self.bi_encoder
        if model is None:
            raise errors.Unavailable(
                "the embedding model is not loaded yet (prepare it with "
                "`recallatron prepare-models`)"
            )
        return model

    def _embed_batch(self, texts: Sequence[str]) -> tuple[BiEncoder, np.ndarray]:
        model = self._loaded()
        return model, model.embed(texts)

    def _embed_queries(self, texts: Sequence[str]) -> tuple[BiEncoder, np.ndarray]:
        model = self._loaded()
        return model, model.embed_queries(texts)

    def rerank(self, query: str, passages: Sequence[str]) -> tuple[CrossEncoder, np.ndarray]:
        if not query.strip():
            raise errors.InvalidArgument("query", "must not be empty")
        self._check_text("query", query)
        if not passages:
            raise errors.InvalidArgument("passages", "must hold at least one passage")
        if len(passages) > self.settings.max_rerank_passages:
            raise errors.InvalidArgument(
                "passages",
                f"holds {len(passages)} passages; at most "
                f"{self.settings.max_rerank_passages} per call",
            )
        for i, passage in enumerate(passages):
            self._check_text(f"passages[{i}]", passage)
        model = self.cross_encoder
        if model is None:
            raise errors.FailedPrecondition(self.cross_encoder_error)
        return model, model.score(query, passages)

    def info(self) -> ModelsInfo:
        bi = self.bi_encoder
        cross = self.cross_encoder_manifest
        return ModelsInfo(
            embedder=_summary(bi.manifest) if bi else None,
            cross_encoder=_summary(cross) if cross else None,
            cross_encoder_loaded=self.cross_encoder is not None,
            embed_input_version=bi.embed_input_version if bi else "",
        )
