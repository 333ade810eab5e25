"""Client channels every service uses to reach its peers: one service config
(retries of UNAVAILABLE, round-robin over resolved addresses), keepalive and
message limits, built in one place. Every outgoing call passes a deadline."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc_status import rpc_status

from recallatron import deadline, errors
from recallatron.settings import CommonSettings

Resp = TypeVar("Resp")

log = logging.getLogger("recallatron.grpcclient")

_SERVICE_CONFIG = json.dumps(
    {
        "loadBalancingConfig": [{"round_robin": {}}],
        "methodConfig": [
            {
                "name": [{}],
                # Only UNAVAILABLE is retried: the call never reached a server
                # or the server was going away. Writes are safe to retry
                # because they carry a client request id.
                "retryPolicy": {
                    "maxAttempts": 3,
                    "initialBackoff": "0.05s",
                    "maxBackoff": "0.5s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ],
    }
)


def make_channel(
    target: str, settings: CommonSettings | None = None, ca_file: str | None = None
) -> grpc.Channel:
    """A channel to a peer; TLS, verified against `ca_file` (default: the
    settings' tls_ca_file, else RECALLATRON_TLS_CA_FILE), when one is given."""
    limit = settings.max_message_bytes if settings else 8 * 1024 * 1024
    if ca_file is None:
        ca_file = (
            settings.tls_ca_file if settings else os.environ.get("RECALLATRON_TLS_CA_FILE", "")
        )
    options = [
        ("grpc.service_config", _SERVICE_CONFIG),
        ("grpc.enable_retries", 1),
        ("grpc.max_receive_message_length", limit),
        ("grpc.max_send_message_length", limit),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        # Reconnect quickly after a peer restarts.
        ("grpc.initial_reconnect_backoff_ms", 200),
        ("grpc.max_reconnect_backoff_ms", 2_000),
    ]
    if ca_file:
        credentials = grpc.ssl_channel_credentials(root_certificates=Path(ca_file).read_bytes())
        return grpc.secure_channel(target, credentials, options=options)
    return grpc.insecure_channel(target, options=options)


def peer_channel(target: str, settings: CommonSettings) -> grpc.Channel:
    """A service's channel to one of its peers (the gateway's to store and
    rank, rank's to store and embed): :func:`make_channel`, made once and kept
    for the process's life, never closed, with :func:`keep_spinning`."""
    channel = make_channel(target, settings)
    keep_spinning(channel)
    return channel


def keep_spinning(channel: grpc.Channel) -> bool:
    """Gives a channel that lives as long as its process one thread that
    delivers the results of its background calls (``.future()``, which
    :func:`unary` uses to cancel a call its caller abandoned).

    gRPC starts that thread when a background call begins on a channel with
    none in flight and ends it when the last one completes, so one call at a
    time starts a thread per call: ~0.2-0.4 ms a hop on two cores (a thread
    start and its first scheduling), more than the round trip itself. The
    thread here holds one count of the channel's in-flight calls, so gRPC's
    own is never started. It keeps the channel open (closing it would free
    the queue the thread waits on): only for channels never closed. It reads
    gRPC's internal call state; where that is not as expected (another gRPC
    version), the channel is left as it came. True when kept."""
    state: Any = getattr(channel, "_call_state", None)
    if state is None:  # an intercepted channel (tracing on): the one inside
        state = getattr(getattr(channel, "_channel", None), "_call_state", None)
    if not all(hasattr(state, a) for a in ("lock", "channel", "managed_calls")):
        return False
    with state.lock:
        if state.managed_calls:
            return False  # gRPC's own thread is running: not ours to replace
        state.managed_calls = 1
    threading.Thread(target=_spin, args=(state,), name="grpc-spin", daemon=True).start()
    return True


def _spin(state: Any) -> None:
    from grpc._cython import cygrpc

    while True:
        event = state.channel.next_call_event()
        if event.completion_type == cygrpc.CompletionType.queue_timeout:
            continue
        if event.tag is None:  # the queue shut down
            return
        try:
            completed = event.tag(event)
        except Exception:  # gRPC's own loop would end here; the channel goes on
            log.exception("a call's completion handler failed")
            continue
        if completed:
            with state.lock:
                state.managed_calls -= 1


def peer_serving(channel: grpc.Channel, timeout: float = 1.0) -> bool:
    """True when the peer's standard health service says SERVING."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    try:
        resp = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=timeout
        )
    except grpc.RpcError:
        return False
    return bool(resp.status == health_pb2.HealthCheckResponse.SERVING)


def relay(exc: grpc.RpcError, peer: str = "a backing service") -> errors.DomainError:
    """The one translation of a peer's failure into the error this service
    answers with (design §9): a peer that is unreachable or past its deadline
    becomes UNAVAILABLE with a retry hint; any other status is passed on as it
    came, code, message and rich details."""
    code = exc.code()
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return errors.Unavailable(f"{peer} is unavailable; retry shortly")
    status = rpc_status.from_call(exc)
    if status is not None:
        return errors.Relayed(status.code, status.message, list(status.details))
    return errors.Relayed(code.value[0], exc.details() or "")


def unary(
    method: Callable[..., Resp],
    request: Any,
    timeout: float,
    metadata: Sequence[tuple[str, str]] | None = None,
) -> Resp:
    """A unary call made while serving one (design §9): its deadline is never
    later than the served call's, and it is cancelled when the served call is
    abandoned, so a peer stops work nobody waits for."""
    timeout = deadline.capped(timeout)
    scope = deadline.current()
    start = getattr(method, "future", None)
    if scope is None or start is None:
        if metadata is None:  # a plain callable in place of a stub takes no metadata
            return method(request, timeout=timeout)
        return method(request, timeout=timeout, metadata=metadata)
    future = start(request, timeout=timeout, metadata=metadata)
    take_back = scope.on_abandon(future.cancel)
    try:
        return future.result()  # type: ignore[no-any-return]
    except grpc.FutureCancelledError:
        raise errors.DeadlineExceeded("abandoned by its caller") from None
    finally:
        take_back()
