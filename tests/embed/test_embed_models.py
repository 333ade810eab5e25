"""The plain model code, in process: tokenisation, chunking, ordering, validation,
manifests and preparation's cache."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recallatron import errors
from services.embed.manifest import (
    BI_ENCODER_DIRNAME,
    EMBED_INPUT_VERSION,
    MANIFEST_NAME,
    QUERY_GRAPH_MIN_WORDS,
    TOKENIZER_FILE,
    read_manifest,
)
from services.embed.models import (
    BiEncoder,
    EmbedModels,
    ModelLoadError,
    length_sorted_chunks,
    pad_chunk,
    word_pieces,
)
from services.embed.prepare import bi_encoder_status, main, prepare_cross_encoder
from services.embed.settings import EmbedSettings

pytestmark = pytest.mark.integration

LONG = " ".join(["The quarterly report covers revenue, churn and hiring plans."] * 40)


@pytest.fixture(scope="module")
def bi_encoder(bi_encoder_dir: Path) -> BiEncoder:
    return BiEncoder(bi_encoder_dir, threads=2, chunk_size=4)


def test_tokenizer_truncates_at_256_and_does_not_pad(bi_encoder: BiEncoder) -> None:
    # The shipped tokenizer.json truncates at 128 and pads everything to 128.
    long, short = bi_encoder.tokenize([LONG, "hello"])
    assert len(long.ids) == 256
    assert len(short.ids) == 3  # [CLS] hello [SEP]


def test_chunks_are_length_sorted_and_padded_to_their_longest(bi_encoder: BiEncoder) -> None:
    texts = [LONG, "a", "a b c d e f", "a b", LONG[:200], "x"]
    encodings = bi_encoder.tokenize(texts)
    chunks = list(length_sorted_chunks(encodings, 4))
    assert sorted(i for chunk in chunks for i in chunk) == list(range(len(texts)))
    lengths = [len(encodings[i].ids) for chunk in chunks for i in chunk]
    assert lengths == sorted(lengths)
    first = pad_chunk([encodings[i] for i in chunks[0]], 0, bi_encoder.input_names)
    assert first["input_ids"].shape == (4, max(len(encodings[i].ids) for i in chunks[0]))
    assert first["attention_mask"].sum() == sum(len(encodings[i].ids) for i in chunks[0])


def test_batched_embeddings_equal_single_ones_in_order(bi_encoder: BiEncoder) -> None:
    texts = [LONG, "a", "the staging database", "", "🙂 emoji", "a b c d e f g", "x" * 50]
    together = bi_encoder.embed(texts)
    alone = np.vstack([bi_encoder.embed([t]) for t in texts])
    assert together.dtype == np.float32
    assert together.shape == (len(texts), 384)
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    # Different texts give different vectors: no row was copied to the wrong place.
    assert float(together[1] @ together[2]) < 0.9


def _models(bi_encoder_dir: Path, **overrides: Any) -> EmbedModels:
    settings = EmbedSettings.model_construct(models_dir=bi_encoder_dir.parent, **overrides)
    return EmbedModels(settings)


def test_validation_names_the_field(bi_encoder_dir: Path) -> None:
    models = _models(
        bi_encoder_dir, max_batch=3, max_text_chars=10, max_rerank_passages=2, cross_encoder_dir=""
    )
    cases = [
        (lambda: models.embed([]), "texts"),
        (lambda: models.embed(["a", "b", "c", "d"]), "texts"),
        (lambda: models.embed(["a", "b", "c" * 11]), "texts[2]"),
        (lambda: models.rerank("", ["p"]), "query"),
        (lambda: models.rerank("q" * 11, ["p"]), "query"),
        (lambda: models.rerank("q", []), "passages"),
        (lambda: models.rerank("q", ["a", "b", "c"]), "passages"),
        (lambda: models.rerank("q", ["a", "b" * 11]), "passages[1]"),
    ]
    for call, field in cases:
        with pytest.raises(errors.InvalidArgument) as raised:
            call()
        assert raised.value.field == field


def test_embed_before_loading_is_unavailable_and_rerank_without_model_fails(
    bi_encoder_dir: Path,
) -> None:
    models = _models(bi_encoder_dir, cross_encoder_dir="")
    with pytest.raises(errors.Unavailable):
        models.embed(["hello"])
    assert not models.load_cross_encoder()
    with pytest.raises(errors.FailedPrecondition, match="RECALLATRON_CROSS_ENCODER_DIR"):
        models.rerank("q", ["p"])
    models.load_bi_encoder()
    _model, vectors = models.embed(["hello"])
    assert vectors.shape == (1, 384)
    info = models.info()
    assert info.embed_input_version == EMBED_INPUT_VERSION
    assert info.cross_encoder is None and not info.cross_encoder_loaded


def test_a_tampered_file_is_refused(bi_encoder_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / BI_ENCODER_DIRNAME
    shutil.copytree(bi_encoder_dir, copy)
    assert bi_encoder_status(copy) is None
    tokenizer = copy / TOKENIZER_FILE
    tokenizer.write_text(tokenizer.read_text(encoding="utf-8") + " ", encoding="utf-8")
    with pytest.raises(ModelLoadError, match="sha256"):
        BiEncoder(copy)
    assert "sha256" in (bi_encoder_status(copy) or "")
    (copy / MANIFEST_NAME).unlink()
    assert "does not exist" in (bi_encoder_status(copy) or "")


def test_preparing_again_is_a_no_op(
    models_dir: Path, bi_encoder_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (bi_encoder_dir / "model.onnx").stat().st_mtime_ns
    assert main(["--models-dir", str(models_dir)]) == 0
    assert "up to date" in capsys.readouterr().err
    assert (bi_encoder_dir / "model.onnx").stat().st_mtime_ns == before
    assert read_manifest(bi_encoder_dir, "bi-encoder").embed_input_version == EMBED_INPUT_VERSION


def test_cross_encoder_export_refuses_to_overwrite_a_foreign_directory(
    tiny_cross_encoder: tuple[Path, Path], tmp_path: Path
) -> None:
    hf_dir, _onnx_dir = tiny_cross_encoder
    foreign = tmp_path / "somebody-elses"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(ValueError, match="not a prepared model directory"):
        prepare_cross_encoder(str(hf_dir), foreign)
    assert (foreign / "notes.txt").read_text(encoding="utf-8") == "keep me"
    assert main(["cross-encoder", "--from", str(hf_dir), "--out", str(foreign)]) == 1


def test_concurrent_query_embeddings_each_get_their_own_vector(
    bi_encoder: BiEncoder, bi_encoder_dir: Path
) -> None:
    """Single-text query calls from many threads go through the query combiner:
    each answer is that text's vector alone, whatever batch it ran in."""
    from concurrent.futures import ThreadPoolExecutor

    models = _models(bi_encoder_dir, query_batch_max=16)
    models.load_bi_encoder()
    texts = [f"query {i}: {word}" for i, word in enumerate(LONG.split()[:48])]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda t: models.embed([t], queries=True)[1], texts))
    for text, answer in zip(texts, answers, strict=True):
        assert answer.shape == (1, 384)
        np.testing.assert_allclose(answer[0], bi_encoder.embed_queries([text])[0], atol=1e-5)


def test_queries_run_on_the_query_graph_and_memories_on_the_exact_one(
    bi_encoder: BiEncoder, bi_encoder_dir: Path
) -> None:
    assert bi_encoder.query_session is not None
    long_query = "where did we decide to host the staging database?"
    exact, fast = bi_encoder.embed([long_query])[0], bi_encoder.embed_queries([long_query])[0]
    # Another graph answered (its products in 8-bit integers), close to the exact one.
    assert not np.array_equal(exact, fast)
    assert float(exact @ fast) >= 0.9995
    # A text of fewer than QUERY_GRAPH_MIN_WORDS words keeps the exact graph,
    # however many pieces of punctuation it holds.
    for short in ("hello", "ok ok ok", "?!?!", "... ... ...", "🙂"):
        assert word_pieces(bi_encoder.tokenize([short])[0]) < QUERY_GRAPH_MIN_WORDS
        np.testing.assert_array_equal(bi_encoder.embed_queries([short]), bi_encoder.embed([short]))
    # In one call each text takes its own graph, in the order given.
    both = bi_encoder.embed_queries(["hello", long_query])
    np.testing.assert_array_equal(both[0], bi_encoder.embed(["hello"])[0])
    np.testing.assert_array_equal(both[1], fast)
    # Through the service's rules: only a call that says it holds queries.
    models = _models(bi_encoder_dir, query_batch_max=1)
    models.load_bi_encoder()
    np.testing.assert_array_equal(models.embed([long_query])[1][0], exact)
    np.testing.assert_array_equal(models.embed([long_query], queries=True)[1][0], fast)
    off = _models(bi_encoder_dir, query_batch_max=1, query_graph=False)
    off.load_bi_encoder()
    np.testing.assert_array_equal(off.embed([long_query], queries=True)[1][0], exact)
    # (In a padded batch the exact graph's float sums differ in the last bits.)
    np.testing.assert_allclose(models.embed([long_query, "hello"])[1][0], exact, atol=1e-5)
