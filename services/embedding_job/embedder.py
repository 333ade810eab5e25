"""The embed service as the embedding job (services/embedding_job/job.py) and
`rebuild` reach it: calls with a deadline, each carrying a service assertion
when the stack has an internal key."""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from recallatron import errors, internal_channels
from recallatron.grpcclient import make_channel
from recallatron.internal_auth import Signer
from recallatron.v1 import embed_pb2, embed_pb2_grpc
from services.store.settings import StoreSettings


class EmbedUnavailable(errors.Unavailable):
    """The embed service could not be reached, or has no model loaded yet;
    the claimed rows are back in the queue. A domain error, so a one-shot
    command (`rebuild`) ends with its message in one line."""

    def __init__(self, code: grpc.StatusCode, details: str = "") -> None:
        said = f": {details}" if details else ""
        super().__init__(
            f"the embed service cannot embed now ({code.name}{said}); what is queued stays "
            "queued for the embedding job"
        )
        self.code = code


class Embedder:
    """The embed service, reached with a deadline."""

    def __init__(self, target: str, timeout: float, settings: StoreSettings | None = None) -> None:
        channel = make_channel(target, settings)
        key = settings.internal_signing_key() if settings is not None else b""
        if key:
            # Each call carries a service assertion (recallatron/internal_auth.py).
            channel = internal_channels.service_channel(channel, Signer(key, "embedding-job"))
        self.stub = embed_pb2_grpc.EmbedServiceStub(channel)
        self.timeout = timeout

    def embed(self, texts: Sequence[str]) -> tuple[str, list[list[float]]]:
        resp = self.stub.Embed(embed_pb2.EmbedRequest(texts=list(texts)), timeout=self.timeout)
        return resp.model_id, [list(vec.values) for vec in resp.vectors]

    def _info(self) -> embed_pb2.GetModelInfoResponse:
        try:
            info: embed_pb2.GetModelInfoResponse = self.stub.GetModelInfo(
                embed_pb2.GetModelInfoRequest(), timeout=self.timeout
            )
        except grpc.RpcError as exc:
            raise EmbedUnavailable(exc.code(), exc.details() or "") from exc
        return info

    def max_batch(self) -> int:
        """The most texts the service takes in one call; 0 when it does not
        say (a service of a version before it)."""
        return max(0, self._info().max_batch)

    def model_id(self) -> str:
        """The model the service embeds with. One that has not loaded it yet
        answers no id, which is no model: every vector would look stale."""
        info = self._info()
        if not info.HasField("embedder") or not info.embedder.model_id:
            raise EmbedUnavailable(grpc.StatusCode.UNAVAILABLE, "no model loaded yet")
        return info.embedder.model_id
