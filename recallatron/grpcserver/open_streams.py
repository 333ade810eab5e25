"""The streams a server serves without a credential (health's watch,
reflection): a stream held open holds a handler thread while it lasts, so
they have a few places of their own, and past them are refused at once."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias

import grpc

# Open streams served at once per server, well below its handler threads
# (RECALLATRON_SERVER_THREADS, 16).
OPEN_STREAMS = 2

Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


def bounded_stream(
    handler: Handler, slots: threading.BoundedSemaphore, refused: Callable[[], None]
) -> Handler:
    """``handler`` (a stream open to anyone) served while one of ``slots`` is
    free; RESOURCE_EXHAUSTED at once when none is (``refused`` counts it)."""

    def bounded(behavior: Callable[[Any, grpc.ServicerContext], Iterator[Any]]) -> Any:
        def stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            if not slots.acquire(blocking=False):
                refused()
                context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED,
                    "too many open health or reflection streams here; retry later",
                )
            try:
                yield from behavior(request, context)
            finally:
                slots.release()

        return stream

    if handler.stream_stream is not None:
        return grpc.stream_stream_rpc_method_handler(
            bounded(handler.stream_stream),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
    assert handler.unary_stream is not None
    return grpc.unary_stream_rpc_method_handler(
        bounded(handler.unary_stream),
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
