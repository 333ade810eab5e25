"""The embed service over gRPC: validation, health, model info and the absence or
failure of the optional cross-encoder, each in a real process."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2

from recallatron.v1 import embed_pb2
from recallatron_devkit.embed_fixture import EmbedProcess
from services.embed.manifest import (
    BI_ENCODER_DIMENSIONS,
    BI_ENCODER_DIRNAME,
    BI_ENCODER_ID,
    EMBED_INPUT_VERSION,
    read_manifest,
)
from services.embed.server import SERVICE_NAME
from services.embed.settings import EmbedSettings
from tests.faults.stackutil import rich_detail

pytestmark = pytest.mark.integration

# The defaults: the server processes run without the caller's RECALLATRON_ variables.
LIMITS = EmbedSettings.model_construct()
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _error(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value


def _bad_field(error: grpc.RpcError) -> str:
    """The field named by the BadRequest detail of an INVALID_ARGUMENT status."""
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error.details()
    bad = rich_detail(error, error_details_pb2.BadRequest)
    assert bad is not None, f"no BadRequest detail in {error.details()}"
    return str(bad.field_violations[0].field)


@pytest.mark.parametrize(
    ("texts", "field"),
    [
        ([], "texts"),
        (["x"] * (LIMITS.max_batch + 1), "texts"),
        (["fine", "also fine", "y" * (LIMITS.max_text_chars + 1)], "texts[2]"),
    ],
    ids=["empty", "too-many", "too-long"],
)
def test_embed_rejects_bad_input_naming_the_field(
    embed_server: EmbedProcess, texts: list[str], field: str
) -> None:
    error = _error(lambda: embed_server.stub.Embed(embed_pb2.EmbedRequest(texts=texts)))
    assert _bad_field(error) == field
    assert field in (error.details() or "")


def test_embed_accepts_the_limits(embed_server: EmbedProcess) -> None:
    texts = ["z" * LIMITS.max_text_chars] + [""] * (LIMITS.max_batch - 1)
    response = embed_server.stub.Embed(embed_pb2.EmbedRequest(texts=texts), timeout=60)
    assert len(response.vectors) == LIMITS.max_batch
    assert all(len(v.values) == BI_ENCODER_DIMENSIONS for v in response.vectors)


@pytest.mark.parametrize(
    ("query", "passages", "field"),
    [
        ("", ["a passage"], "query"),
        ("   ", ["a passage"], "query"),
        ("q" * (LIMITS.max_text_chars + 1), ["a passage"], "query"),
        ("a query", [], "passages"),
        ("a query", ["p"] * (LIMITS.max_rerank_passages + 1), "passages"),
        ("a query", ["fine", "p" * (LIMITS.max_text_chars + 1)], "passages[1]"),
    ],
    ids=["empty-query", "blank-query", "long-query", "no-passages", "too-many", "long-passage"],
)
def test_rerank_rejects_bad_input_naming_the_field(
    embed_server: EmbedProcess, query: str, passages: list[str], field: str
) -> None:
    request = embed_pb2.RerankRequest(query=query, passages=passages)
    error = _error(lambda: embed_server.stub.Rerank(request))
    assert _bad_field(error) == field


def test_model_info_matches_the_manifest(embed_server: EmbedProcess, bi_encoder_dir: Path) -> None:
    manifest = read_manifest(bi_encoder_dir, "bi-encoder", verify=False)
    info = embed_server.stub.GetModelInfo(embed_pb2.GetModelInfoRequest(), timeout=10)
    assert info.embedder.model_id == BI_ENCODER_ID
    assert info.embedder.sha256 == manifest.sha256
    assert info.embedder.max_length == 256
    assert info.embedder.dimensions == BI_ENCODER_DIMENSIONS
    assert info.embed_input_version == EMBED_INPUT_VERSION


def test_health_is_serving_for_the_service_and_overall(embed_server: EmbedProcess) -> None:
    assert embed_server.health_status("") == SERVING
    assert embed_server.health_status(SERVICE_NAME) == SERVING


def test_not_serving_until_models_are_prepared_then_serving(
    start_embed: Callable[..., EmbedProcess], bi_encoder_dir: Path, tmp_path: Path
) -> None:
    empty_models = tmp_path / "models"
    empty_models.mkdir()
    server = start_embed(
        RECALLATRON_MODELS_DIR=str(empty_models), RECALLATRON_LOAD_RETRY_SECONDS="0.2"
    )
    # No model can load from an empty directory: the state is not a race.
    time.sleep(0.5)
    assert server.health_status() == NOT_SERVING
    assert server.health_status(SERVICE_NAME) == NOT_SERVING
    error = _error(lambda: server.stub.Embed(embed_pb2.EmbedRequest(texts=["hello"]), timeout=10))
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert "prepare-models" in (error.details() or "")
    info = server.stub.GetModelInfo(embed_pb2.GetModelInfoRequest(), timeout=10)
    assert not info.HasField("embedder")

    # An operator prepares the models; the service picks them up without a restart.
    os.symlink(bi_encoder_dir, empty_models / BI_ENCODER_DIRNAME)
    server.wait_serving(timeout=60)
    response = server.stub.Embed(embed_pb2.EmbedRequest(texts=["hello"]), timeout=30)
    assert len(response.vectors[0].values) == BI_ENCODER_DIMENSIONS

    # No cross-encoder configured: Rerank says how to configure one.
    request = embed_pb2.RerankRequest(query="q", passages=["p"])
    error = _error(lambda: server.stub.Rerank(request, timeout=10))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "no cross-encoder configured" in (error.details() or "")
    assert "RECALLATRON_CROSS_ENCODER_DIR" in (error.details() or "")
    info = server.stub.GetModelInfo(embed_pb2.GetModelInfoRequest(), timeout=10)
    assert not info.cross_encoder_loaded
    assert not info.HasField("cross_encoder")
    assert info.embedder.model_id == BI_ENCODER_ID

    assert server.stop() == 0, server.log()


def test_a_broken_cross_encoder_fails_rerank_only(
    start_embed: Callable[..., EmbedProcess], models_dir: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "cross-encoder"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not a model")
    server = start_embed(
        RECALLATRON_MODELS_DIR=str(models_dir), RECALLATRON_CROSS_ENCODER_DIR=str(broken)
    )
    server.wait_serving(timeout=60)
    response = server.stub.Embed(embed_pb2.EmbedRequest(texts=["still works"]), timeout=30)
    assert len(response.vectors) == 1
    request = embed_pb2.RerankRequest(query="q", passages=["p"])
    error = _error(lambda: server.stub.Rerank(request, timeout=10))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "could not be loaded" in (error.details() or "")
    # Its paths and the loader's words go to the log, not into every recall
    # answer's rerank_unavailable_reason (rank passes the status on).
    assert str(tmp_path) not in (error.details() or "")
    info = server.stub.GetModelInfo(embed_pb2.GetModelInfoRequest(), timeout=10)
    assert not info.cross_encoder_loaded
