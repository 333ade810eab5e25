"""The gRPC face of the embed service: a thin adapter over
:class:`services.embed.models.EmbedModels`, and the process entry point."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import grpc

from recallatron import packed_vectors
from recallatron.grpcserver import Server
from recallatron.logs import configure_logging
from recallatron.v1 import embed_pb2, embed_pb2_grpc
from services.embed.models import EmbedModels, ModelLoadError, ModelSummary
from services.embed.settings import EmbedSettings

SERVICE_NAME = embed_pb2.DESCRIPTOR.services_by_name["EmbedService"].full_name

log = logging.getLogger("recallatron.embed")


def _model_info(summary: ModelSummary) -> embed_pb2.ModelInfo:
    return embed_pb2.ModelInfo(
        model_id=summary.model_id,
        sha256=summary.sha256,
        max_length=summary.max_length,
        dimensions=summary.dimensions,
    )


class EmbedServicer(embed_pb2_grpc.EmbedServiceServicer):
    def __init__(self, models: EmbedModels) -> None:
        self.models = models

    def Embed(
        self, request: embed_pb2.EmbedRequest, context: grpc.ServicerContext
    ) -> embed_pb2.EmbedResponse:
        model, vectors = self.models.embed(list(request.texts), queries=request.queries)
        response = embed_pb2.EmbedResponse(model_id=model.model_id, dimensions=model.dimensions)
        for row in vectors:
            if request.packed:
                response.vectors.add(packed=packed_vectors.pack(row))
            else:
                # A caller that does not ask packed (a rank of the previous
                # version, the embedding job) reads only the floats: parsed
                # from the bytes in native code, never a list.
                packed_vectors.fill_floats(
                    response.vectors.add(), "values", packed_vectors.pack(row)
                )
        return response

    def Rerank(
        self, request: embed_pb2.RerankRequest, context: grpc.ServicerContext
    ) -> embed_pb2.RerankResponse:
        model, scores = self.models.rerank(request.query, list(request.passages))
        return embed_pb2.RerankResponse(scores=scores.tolist(), model_id=model.model_id)

    def GetModelInfo(
        self, request: embed_pb2.GetModelInfoRequest, context: grpc.ServicerContext
    ) -> embed_pb2.GetModelInfoResponse:
        info = self.models.info()
        response = embed_pb2.GetModelInfoResponse(
            cross_encoder_loaded=info.cross_encoder_loaded,
            embed_input_version=info.embed_input_version,
            max_batch=self.models.settings.max_batch,
        )
        if info.embedder is not None:
            response.embedder.CopyFrom(_model_info(info.embedder))
        if info.cross_encoder is not None:
            response.cross_encoder.CopyFrom(_model_info(info.cross_encoder))
        return response


def write_port_file(path: str, port: int) -> None:
    """Written whole or not at all: a harness polling the file never reads half."""
    target = Path(path)
    tmp = target.with_name(target.name + f".tmp-{os.getpid()}")
    tmp.write_text(f"{port}\n", encoding="utf-8")
    os.replace(tmp, target)


NOT_LOADED = "bi-encoder not loaded; run `recallatron prepare-models`"


def load_models(
    models: EmbedModels, server: Server, settings: EmbedSettings, stop: threading.Event
) -> bool | None:
    """Loads the cross-encoder (optional), then the bi-encoder, retrying until the
    models are prepared; health turns SERVING once the bi-encoder is loaded (True).
    With ``wait_for_models`` off it gives up at the first failure instead (False).
    None: stopped before either."""
    models.load_cross_encoder()
    warned = False
    while not stop.is_set():
        try:
            models.load_bi_encoder()
        except ModelLoadError as exc:
            # Logged loudly once, then quietly: an operator may prepare models later.
            extra: dict[str, object] = {"error": str(exc)}
            if settings.wait_for_models:
                extra["retry_seconds"] = settings.load_retry_seconds
            log.log(logging.DEBUG if warned else logging.ERROR, NOT_LOADED, extra=extra)
            if not settings.wait_for_models:
                return False
            warned = True
            stop.wait(settings.load_retry_seconds)
            continue
        server.set_serving(True)
        log.info("serving")
        return True
    return None


def main(argv: list[str] | None = None) -> int:
    settings = EmbedSettings()
    configure_logging("embed", settings.log_level)
    models = EmbedModels(settings)
    server = Server(settings, [SERVICE_NAME], internal=True)
    embed_pb2_grpc.add_EmbedServiceServicer_to_server(EmbedServicer(models), server.grpc_server)
    port = server.start(settings.embed_listen)
    log.info("listening", extra={"address": settings.embed_listen, "port": port})
    if settings.port_file:
        write_port_file(settings.port_file, port)
    stop = threading.Event()
    gave_up = threading.Event()

    def load() -> None:
        if load_models(models, server, settings, stop) is False:
            gave_up.set()
            server.stop()

    threading.Thread(target=load, name="model-loader", daemon=True).start()
    server.wait_for_termination(on_stop=stop.set)
    # Stopped for want of models, not by a signal: a failure the parent sees.
    return 1 if gave_up.is_set() else 0
