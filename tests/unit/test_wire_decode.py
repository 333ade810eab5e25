"""What a server answers a request whose bytes do not decode
(recallatron/grpcserver/calls.py, recallatron/wire.py): INVALID_ARGUMENT,
naming the string field that is not UTF-8 when that is the fault, and the
request as a whole, without blaming UTF-8, when the bytes are no protobuf
message at all."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from recallatron import internal_auth
from recallatron.grpcserver.calls import ServiceInterceptor
from recallatron.v1 import embed_pb2

METHOD = "/test.Decode/Embed"


def _echo(request: embed_pb2.EmbedRequest, context: grpc.ServicerContext) -> bytes:
    return b""


@pytest.fixture(scope="module")
def call() -> Iterator[grpc.UnaryUnaryMultiCallable[bytes, bytes]]:
    server = grpc.server(futures.ThreadPoolExecutor(2), interceptors=[ServiceInterceptor()])
    handler = grpc.unary_unary_rpc_method_handler(
        _echo,
        request_deserializer=embed_pb2.EmbedRequest.FromString,
        response_serializer=lambda b: b,
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("test.Decode", {"Embed": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield channel.unary_unary(
            METHOD, request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
    finally:
        channel.close()
        server.stop(0)


def _refusal(call: grpc.UnaryUnaryMultiCallable[bytes, bytes], payload: bytes) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call(payload, timeout=10)
    return caught.value


def test_a_string_field_that_is_not_utf8_is_named(
    call: grpc.UnaryUnaryMultiCallable[bytes, bytes],
) -> None:
    bad = b"\x0a\x02\xff\xfe"  # field 1 (texts), two bytes that are no UTF-8
    err = _refusal(call, bad)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = err.details() or ""
    assert details.startswith("texts:") and "UTF-8" in details, details


@pytest.mark.parametrize(
    "payload",
    [
        b"\x0a\x05ab",  # a field longer than what follows
        b"\xff\xff\xff",  # a tag that never ends
        b"\x0f\x01",  # wire type 7, which does not exist
        b"\x8a",  # cut inside a tag
    ],
    ids=["past the end", "endless varint", "wire type 7", "cut tag"],
)
def test_bytes_that_are_no_message_are_not_blamed_on_utf8(
    call: grpc.UnaryUnaryMultiCallable[bytes, bytes], payload: bytes
) -> None:
    """Malformed wire data was refused as 'request: could not be decoded
    (string fields must be UTF-8)', sending the client to look for text
    that was never there."""
    err = _refusal(call, payload)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = err.details() or ""
    assert details.startswith("request:"), details
    assert "UTF-8" not in details and "not a valid protobuf message" in details, details


KEY = b"k" * 32
STREAM = "/test.Decode/Watch"


def _watch(request: embed_pb2.EmbedRequest, context: grpc.ServicerContext) -> Iterator[bytes]:
    yield b""


@pytest.fixture(scope="module")
def guarded() -> Iterator[grpc.Channel]:
    """A server inside the stack: every call carries an assertion."""
    server = grpc.server(futures.ThreadPoolExecutor(2), interceptors=[ServiceInterceptor(KEY)])
    parse = embed_pb2.EmbedRequest.FromString
    methods = {
        "Embed": grpc.unary_unary_rpc_method_handler(
            _echo, request_deserializer=parse, response_serializer=lambda b: b
        ),
        "Watch": grpc.unary_stream_rpc_method_handler(
            _watch, request_deserializer=parse, response_serializer=lambda b: b
        ),
    }
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("test.Decode", methods)])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield channel
    finally:
        channel.close()
        server.stop(0)


@pytest.mark.parametrize("method", [METHOD, STREAM], ids=["unary", "stream"])
@pytest.mark.parametrize(
    ("payload", "field"),
    [(b"\x0a\x02\xff\xfe", "texts"), (b"\x0a\x05ab", "request")],
    ids=["not utf8", "no message"],
)
def test_a_call_inside_the_stack_is_refused_the_same(
    guarded: grpc.Channel, method: str, payload: bytes, field: str
) -> None:
    """A server-streaming method inside the stack (the store's revocation
    watch) is refused as the others are: INVALID_ARGUMENT saying why."""
    token = internal_auth.Signer(KEY, "test").service([method])
    kind = guarded.unary_unary if method == METHOD else guarded.unary_stream
    call = kind(method, request_serializer=lambda b: b, response_deserializer=lambda b: b)
    with pytest.raises(grpc.RpcError) as caught:
        answer = call(payload, metadata=internal_auth.metadata(token), timeout=10)
        if method == STREAM:
            list(answer)
    err = caught.value
    details = err.details() or ""
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (err.code(), details)
    assert details.startswith(f"{field}:"), details
