"""Client channels every service uses to reach its peers: one service config
(retries of UNAVAILABLE, round-robin over resolved addresses), keepalive and
message limits, built in one place. Every outgoing call passes a deadline.

A failed call's status is read in one place too (:func:`peer_status`): the
relay turns it into the error a service answers with (:func:`relay`), and
:func:`advice` into what an agent should do about it (the MCP tools' errors)."""

from __future__ import annotations

import importlib
import json
import logging
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

import grpc
from google.protobuf.descriptor import MethodDescriptor
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from recallatron import deadline, errors
from recallatron.settings import CommonSettings

Req = TypeVar("Req")
Resp = TypeVar("Resp")

# A call's metadata as gRPC's stubs take it: a tuple of (key, value) pairs.
Metadata: TypeAlias = tuple[tuple[str, str], ...]

log = logging.getLogger("recallatron.grpcclient")


class Replay(Enum):
    """What a write whose request carries a request_id answers when it is sent
    again with the same id after a first attempt that was done."""

    # The first attempt's answer (design §7): a resend after a lost answer is
    # safe, so the channel may resend.
    FIRST_ANSWER = "the first answer"
    # ALREADY_EXISTS naming what the first attempt made, whose answer is not
    # kept (a token's secret): a resend would lose the answer, so sent once.
    ALREADY_EXISTS = "ALREADY_EXISTS"
    # The first answer when the request carries an id, but the id is optional
    # and a channel's retry policy is per method, not per request: one sent
    # without an id could be done twice, so sent once (the caller resends it
    # with its id).
    FIRST_ANSWER_IF_GIVEN = "the first answer, when it carries an id"

    @property
    def resendable(self) -> bool:
        return self is Replay.FIRST_ANSWER


# Every method whose request carries a request_id, by name (the same in each
# service serving it), with what it answers a resend. A method with one that
# is not here is sent once until it is declared.
IDENTIFIED_WRITES: Mapping[str, Replay] = {
    "Remember": Replay.FIRST_ANSWER,
    "Derive": Replay.FIRST_ANSWER,
    "Correct": Replay.FIRST_ANSWER,
    "Supersede": Replay.FIRST_ANSWER,
    "Forget": Replay.FIRST_ANSWER,
    "Capture": Replay.FIRST_ANSWER,
    "CreateToken": Replay.ALREADY_EXISTS,
    "RotateToken": Replay.ALREADY_EXISTS,
    "CreateEpisode": Replay.FIRST_ANSWER_IF_GIVEN,
    "CreateWorkspace": Replay.FIRST_ANSWER_IF_GIVEN,
    "CreateMember": Replay.FIRST_ANSWER_IF_GIVEN,
}

# Calls that act again when sent again and carry no request id to tell a
# resend from a new call: another episode, token, rotation or merge, or a
# refusal of what the first attempt already did (a second delete).
_ACT_AGAIN = ("Create", "Rotate", "Merge", "Undo", "Delete", "Remove")


def _sent_once(method: MethodDescriptor, replays: Mapping[str, Replay]) -> bool:
    if "request_id" in method.input_type.fields_by_name:
        replay = replays.get(method.name)
        return replay is None or not replay.resendable
    return method.name.startswith(_ACT_AGAIN)


def not_retried(replays: Mapping[str, Replay] = IDENTIFIED_WRITES) -> list[dict[str, str]]:
    """The methods a channel never sends again after UNAVAILABLE, in every
    service of the stack: a write with a request id whose resend is not
    answered with the first answer (``replays``), and a write without one
    that acts again (by the name's verb). Reads are safe to resend."""
    from recallatron.v1 import embed_pb2, gateway_pb2, rank_pb2, store_pb2, tools_pb2

    return [
        {"service": service.full_name, "method": method.name}
        for module in (gateway_pb2, store_pb2, tools_pb2, rank_pb2, embed_pb2)
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
        if _sent_once(method, replays)
    ]


_SERVICE_CONFIG = json.dumps(
    {
        "loadBalancingConfig": [{"round_robin": {}}],
        "methodConfig": [
            # Sent once: a failure is the caller's to judge. gRPC still resends
            # by itself a call the server never saw (transparent retry).
            {"name": not_retried()},
            {
                "name": [{}],
                # Only UNAVAILABLE is retried: the call never reached a server,
                # the server was going away, or a peer behind it was down.
                # Reads are safe to resend, and so are writes with a client
                # request id whose resend is answered as the first was.
                "retryPolicy": {
                    "maxAttempts": 3,
                    "initialBackoff": "0.05s",
                    "maxBackoff": "0.5s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            },
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
    # gRPC's internal module, which its type stubs leave out: untyped, as
    # ``state`` is.
    cygrpc = importlib.import_module("grpc._cython.cygrpc")

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


@dataclass(frozen=True)
class PeerStatus:
    """A failed call's status, read once: its code and message and the rich
    details our servers send (``status_for`` in recallatron/grpcserver/status.py)."""

    code: grpc.StatusCode
    message: str
    # As sent (google.protobuf.Any), for passing on unchanged.
    details: tuple[Any, ...] = ()
    # "field: description" of each google.rpc.BadRequest violation.
    fields: tuple[str, ...] = ()
    # The REVISION_MISMATCH ErrorInfo's metadata: memory_id, expected_revision,
    # current_revision.
    revision: Mapping[str, str] = field(default_factory=dict)
    # The server's google.rpc.RetryInfo, in seconds, when it sent one.
    retry_after: float | None = None

    @property
    def problem(self) -> str:
        """What was wrong: the named fields when there are any."""
        return "; ".join(self.fields) if self.fields else self.message


def peer_status(exc: grpc.RpcError) -> PeerStatus:
    """The status of a failed call, with the details we understand unpacked."""
    try:
        status = rpc_status.from_call(exc)
    except ValueError:
        # Rich details whose code is not the call's: the transport ended the
        # call itself (trailers too large, a reset), and its code is the one.
        status = None
    if status is None:
        return PeerStatus(exc.code(), exc.details() or "")
    fields: list[str] = []
    revision: dict[str, str] = {}
    retry_after: float | None = None
    for detail in status.details:
        bad = error_details_pb2.BadRequest()
        info = error_details_pb2.ErrorInfo()
        retry = error_details_pb2.RetryInfo()
        if detail.Unpack(bad):
            fields += [f"{v.field}: {v.description}" for v in bad.field_violations]
        elif detail.Unpack(info) and info.reason == "REVISION_MISMATCH":
            revision = dict(info.metadata)
        elif detail.Unpack(retry):
            retry_after = retry.retry_delay.ToTimedelta().total_seconds()
    return PeerStatus(
        exc.code(),
        status.message,
        tuple(status.details),
        tuple(fields),
        revision,
        retry_after,
    )


def _own_deadline_passed() -> bool:
    scope = deadline.current()
    if scope is None:
        return False
    left = scope.remaining()
    return scope.abandoned or (left is not None and left <= 0)


def relay(exc: grpc.RpcError, peer: str = "a backing service") -> errors.DomainError:
    """The one translation of a peer's failure into the error this service
    answers with (design §9): a peer that is unreachable or past its deadline
    becomes UNAVAILABLE with a retry hint (the peer's own when it gave one);
    any other status is passed on as it came, code, message and rich details.
    A peer past the deadline of the call being served answers that call's own
    DEADLINE_EXCEEDED."""
    status = peer_status(exc)
    if status.code == grpc.StatusCode.DEADLINE_EXCEEDED and _own_deadline_passed():
        # The call being served ran out of time, not the peer: the caller's
        # own deadline, which a retry with the same deadline would meet again.
        return errors.DeadlineExceeded("the call's deadline passed")
    if status.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        hint = status.retry_after or errors.RETRY_AFTER_SECONDS
        return errors.Unavailable(f"{peer} is unavailable; retry shortly", hint)
    return errors.Relayed(status.code.value[0], status.message, list(status.details))


_BUSY = (
    "The service refuses calls for a moment (a rate limit, or too many calls in progress; "
    "the message says which): wait {wait} and retry with the same request_id."
)
# What an agent should do about each status the gateway answers with, after
# the relay: a peer's failure reaches it as the peer sent it, or as
# UNAVAILABLE. RESOURCE_EXHAUSTED and ABORTED depend on their details
# (:func:`advice`).
HINTS: dict[grpc.StatusCode, str] = {
    grpc.StatusCode.INVALID_ARGUMENT: "Nothing was changed. Fix the named field and call again.",
    grpc.StatusCode.NOT_FOUND: (
        "No memory or entity with that id exists for you (it may not be visible to you, or "
        "not for this purpose). Check the id, or recall or lookup to find the right one; do "
        "not retry as is."
    ),
    grpc.StatusCode.ALREADY_EXISTS: (
        "Nothing was changed: one by that name exists. Use the existing one or pick another name."
    ),
    grpc.StatusCode.ABORTED: (
        "The memory changed since you read it. Read it again and retry with its current "
        "revision and a new request_id."
    ),
    grpc.StatusCode.FAILED_PRECONDITION: (
        "Nothing was changed. The request conflicts with the memories' state or trust "
        "rules (for derive: sources with no audience or purpose in common); change the "
        "request rather than retrying it."
    ),
    grpc.StatusCode.UNAUTHENTICATED: (
        "The member token is missing, unknown or revoked. Ask the person to set "
        "RECALLATRON_TOKEN (or the HTTP Authorization header) to a valid member token."
    ),
    grpc.StatusCode.PERMISSION_DENIED: "This member may not do this; ask a workspace owner.",
    grpc.StatusCode.UNAVAILABLE: (
        "The memory service is unreachable right now; retry in a few seconds with the same "
        "request_id (a retried write is never applied twice)."
    ),
    grpc.StatusCode.DEADLINE_EXCEEDED: (
        "The memory service did not answer in time; retry with the same request_id."
    ),
    # The gateway's rate limits and the fair scheduler's refusal always send
    # RetryInfo (advice() then gives the delay); without it, a wait of its own.
    grpc.StatusCode.RESOURCE_EXHAUSTED: _BUSY.format(wait="a few seconds"),
}
UNEXPECTED = "Unexpected failure; retry later, and report it if it persists."
# gRPC's own refusal of a message over the size limit (RESOURCE_EXHAUSTED, no
# RetryInfo): the one case where waiting does not help.
_TOO_LARGE = "larger than max"
TOO_LARGE = "The message is larger than the service accepts: send less; do not retry as is."
# How the gateway refuses a call's purpose, or a write's purposes, outside a
# token's scope (services/gateway/scopes.py): another purpose may be the caller's.
_PURPOSE_SCOPE = ("purpose: token scope is ", "purposes: token scope is ")
OTHER_PURPOSE = (
    "This token acts only for the purposes its scope names: if one of them is why you ask, "
    "call again with one of them as purpose (and, for a write, as its purposes); else ask "
    "a workspace owner."
)


def advice(status: PeerStatus) -> str:
    """What an agent should do about a failed call: the one table above,
    made exact by the status's details (the current revision, the server's
    retry delay)."""
    code = status.code
    if code == grpc.StatusCode.ABORTED and status.revision:
        return (
            "The memory changed since you read it. Read it again (read tool, id "
            f"{status.revision.get('memory_id', '')}), check your change still applies, and "
            f"retry with expected_revision {status.revision.get('current_revision', '?')} "
            "and a new request_id."
        )
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        if status.retry_after is not None:
            return _BUSY.format(wait=f"{_seconds(status.retry_after)}, as the service asks,")
        if _TOO_LARGE in status.message:
            return TOO_LARGE
    if code == grpc.StatusCode.PERMISSION_DENIED and status.message.startswith(_PURPOSE_SCOPE):
        return OTHER_PURPOSE
    todo = HINTS.get(code, UNEXPECTED)
    if status.retry_after is not None:
        todo += f" The service asks you to wait {_seconds(status.retry_after)} before retrying."
    return todo


def _seconds(delay: float) -> str:
    """A retry delay to a tenth of a second, rounded up: never shorter than asked."""
    return f"{math.ceil(delay * 10) / 10:.1f} s"


def start_unary(
    method: grpc.UnaryUnaryMultiCallable[Req, Resp],
    request: Req,
    timeout: float,
    metadata: Metadata | None = None,
) -> grpc.Future[Resp]:
    """A unary call started while serving one (design §9), waited for later
    with :func:`result_of`: its deadline is never later than the served
    call's, and it is cancelled when the served call is abandoned, so a peer
    stops work nobody waits for."""
    future = method.future(request, timeout=deadline.capped(timeout), metadata=metadata)
    scope = deadline.current()
    if scope is not None:
        take_back = scope.on_abandon(future.cancel)
        future.add_done_callback(lambda _: take_back())
    return future


def result_of(future: grpc.Future[Resp]) -> Resp:
    """A started call's answer; DeadlineExceeded when it was cancelled with
    the served call."""
    try:
        return future.result()
    except grpc.FutureCancelledError:
        raise errors.DeadlineExceeded("abandoned by its caller") from None


def unary(
    method: grpc.UnaryUnaryMultiCallable[Req, Resp],
    request: Req,
    timeout: float,
    metadata: Metadata | None = None,
) -> Resp:
    """A unary call made while serving one, waited for at once, with the
    deadline and cancellation of :func:`start_unary`; outside a served call,
    a plain blocking call."""
    if deadline.current() is None:
        return method(request, timeout=deadline.capped(timeout), metadata=metadata)
    return result_of(start_unary(method, request, timeout, metadata))
