"""The embed service as the embedding job (services/embedding_job/job.py) and
`rebuild` reach it: calls with a deadline, each carrying a service assertion
when the stack has an internal key."""

from __future__ import annotations

from collections.abc import Sequence

import grpc
import numpy as np

from recallatron import errors, internal_channels, packed_vectors
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


class BadAnswer(grpc.RpcError):
    """An answer the embed service's protocol rules out (a packed vector of
    the wrong length): failed as a call it refused, so the batch's rows are
    tried alone and the one answered so fails, retried and parked."""

    def __init__(self, details: str) -> None:
        super().__init__(details)
        self._details = details

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.INTERNAL

    def details(self) -> str:
        return self._details


def vectors_of(resp: embed_pb2.EmbedResponse) -> list[np.ndarray]:
    """The answer's vectors, float32, pgvector's form: each read from its
    packed bytes, or from its floats when a service of a version before
    `packed` answered those. Raises :class:`BadAnswer` on packed bytes of
    the wrong length."""
    try:
        return [
            packed_vectors.unpack(vec.packed, vec.values, f"vectors[{i}].packed")
            for i, vec in enumerate(resp.vectors)
        ]
    except errors.InvalidArgument as exc:
        raise BadAnswer(f"the embed service answered a bad vector: {exc}") from None


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

    def embed(self, texts: Sequence[str]) -> tuple[str, list[np.ndarray]]:
        request = embed_pb2.EmbedRequest(texts=list(texts), packed=True)
        resp = self.stub.Embed(request, timeout=self.timeout)
        return resp.model_id, vectors_of(resp)

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
