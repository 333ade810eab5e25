"""Rerank through the real server equals sentence-transformers' CrossEncoder on the
same (tiny, randomly initialised) model, exported by the operator's code path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from recallatron.v1 import embed_pb2
from recallatron_devkit.embed_fixture import TINY_CROSS_ENCODER_ID, EmbedProcess

pytestmark = pytest.mark.integration

QUERY = "where is the staging database hosted?"
PASSAGES = [
    "We host the staging Postgres on the shared cluster, not on RDS.",
    "Alice prefers morning meetings.",
    "",
    "staging",
    "Die Staging-Datenbank läuft im gemeinsamen Cluster. 🚀",
    "会议改到下周三下午三点。",
    "SELECT * FROM memory WHERE kind = 'decision';",
    # Longer than the tiny model's 128 tokens: truncation must match.
    " ".join(["The quarterly report covers revenue, churn and hiring plans."] * 30),
    "Decision: ship v2 on Monday. Bob owns the rollout and the staging checks.",
    "!!!",
    "12345 67890",
    "The database for staging moved to the new cluster in March.",
]


def _predict(hf_dir: Path, pairs: list[tuple[str, str]]) -> np.ndarray:
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(str(hf_dir), device="cpu")
    return np.asarray(model.predict(pairs, convert_to_numpy=True), dtype=np.float32)


def test_rerank_matches_pytorch_cross_encoder(
    embed_server: EmbedProcess, tiny_cross_encoder: tuple[Path, Path]
) -> None:
    hf_dir, _onnx_dir = tiny_cross_encoder
    # More passages than one chunk of 8, so length sorting and reordering count.
    passages = PASSAGES * 2
    response = embed_server.stub.Rerank(
        embed_pb2.RerankRequest(query=QUERY, passages=passages), timeout=60
    )
    assert response.model_id == TINY_CROSS_ENCODER_ID
    served = np.asarray(response.scores, dtype=np.float32)
    reference = _predict(hf_dir, [(QUERY, p) for p in passages])
    assert served.shape == reference.shape == (len(passages),)
    # A parity check on near-equal scores would prove nothing.
    assert float(np.std(reference)) > 0.01
    np.testing.assert_allclose(served, reference, atol=1e-4)


def test_rerank_truncates_a_long_query_like_pytorch(
    embed_server: EmbedProcess, tiny_cross_encoder: tuple[Path, Path]
) -> None:
    hf_dir, _onnx_dir = tiny_cross_encoder
    query = " ".join(["which cluster hosts the staging database and who owns it"] * 20)
    passages = PASSAGES[:6]
    response = embed_server.stub.Rerank(
        embed_pb2.RerankRequest(query=query, passages=passages), timeout=60
    )
    reference = _predict(hf_dir, [(query, p) for p in passages])
    np.testing.assert_allclose(np.asarray(response.scores), reference, atol=1e-4)


def test_model_info_reports_both_models(
    embed_server: EmbedProcess, tiny_cross_encoder: tuple[Path, Path]
) -> None:
    info = embed_server.stub.GetModelInfo(embed_pb2.GetModelInfoRequest(), timeout=10)
    assert info.cross_encoder_loaded
    assert info.HasField("cross_encoder")
    assert info.cross_encoder.model_id == TINY_CROSS_ENCODER_ID
    assert info.cross_encoder.max_length == 128
    assert len(info.cross_encoder.sha256) == 64
