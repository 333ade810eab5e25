"""A private stack per fault module: its own embedded Postgres, services on
free ports and a state directory outside pytest's tmp tree, so killing
processes here never disturbs the session stack other tests share."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TypeVar

import grpc
from google.protobuf.message import Message
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from recallatron.client import Client
from recallatron.v1 import gateway_pb2_grpc
from recallatron_devkit.stack import FAST_JOB, Stack, metrics_everywhere, own_config
from recallatron_devkit.stack import running as stack_running

T = TypeVar("T")
M = TypeVar("M", bound=Message)

# Codes that mean "the call may not have happened; retry with the same request id".
RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def new_stack(models_dir: Path, env: dict[str, str] | None = None, metrics: bool = False) -> Stack:
    return Stack(
        own_config(
            Path(tempfile.mkdtemp(prefix="recallatron-faults-")),
            models_dir,
            env={**FAST_JOB, **(env or {})},
            metrics_ports=metrics_everywhere() if metrics else None,
        )
    )


def running(stack: Stack) -> AbstractContextManager[Stack]:
    """The stack started for the block; its state removed after, unless kept
    for a look at the logs (RECALLATRON_KEEP_FAULT_STATE)."""
    return stack_running(stack, remove_state=not os.environ.get("RECALLATRON_KEEP_FAULT_STATE"))


def plain_client(address: str, token: str, timeout: float = 10.0) -> Client:
    """A client whose channel does not retry by itself (the project's channels
    retry UNAVAILABLE): every failure reaches the test, which retries with
    the same request id, as an agent would."""
    client = Client(address, token, timeout)
    client.channel.close()
    client.channel = grpc.insecure_channel(address, options=[("grpc.enable_retries", 0)])
    client.memory = gateway_pb2_grpc.MemoryServiceStub(client.channel)
    client.admin = gateway_pb2_grpc.AdminServiceStub(client.channel)
    client.review = gateway_pb2_grpc.ReviewServiceStub(client.channel)
    return client


def owner_client(stack: Stack, slug: str) -> tuple[Client, str, str]:
    """A workspace with one owner: its (non-retrying) client, workspace id and
    database name."""
    operator = Client(stack.gateway, stack.admin_token)
    try:
        ws = operator.create_workspace(slug).workspace
        member = operator.create_member(ws.id, "owner", owner=True).member
        token = operator.create_token(member.id, "faults").token
    finally:
        operator.close()
    return plain_client(stack.gateway, token), ws.id, ws.database_name


def until_ok(call: Callable[[], T], timeout: float = 60.0, pause: float = 0.2) -> T:
    """Retries a call that fails only with a retryable status, until it answers."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except grpc.RpcError as exc:
            if exc.code() not in RETRYABLE or time.monotonic() > deadline:  # type: ignore[attr-defined]
                raise
            time.sleep(pause)


def restart_postgres(stack: Stack, attempts: int = 20) -> None:
    """Starts the embedded server again; right after a kill -9 its old
    backends may still hold shared memory for a moment, so retry briefly."""
    assert stack.postgres is not None
    for attempt in range(attempts):
        try:
            stack.postgres.start()
            return
        except Exception:
            if attempt == attempts - 1:
                raise
            time.sleep(0.5)


def rich_detail(exc: grpc.RpcError, message: type[M]) -> M | None:
    """The first rich-status detail of a refusal of the given type, if any."""
    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    assert status is not None
    for detail in status.details:
        if detail.Is(message.DESCRIPTOR):
            found = message()
            detail.Unpack(found)
            return found
    return None


def field_violations(exc: grpc.RpcError) -> list[str]:
    """The fields the google.rpc.BadRequest details of a refusal name, in
    their order (none when it carries no rich status)."""
    status = rpc_status.from_call(exc)
    found: list[str] = []
    for detail in status.details if status else []:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            found.extend(v.field for v in bad.field_violations)
    return found


def retry_delay(exc: grpc.RpcError) -> float:
    """The google.rpc.RetryInfo hint of a refusal, in seconds (0: none)."""
    info = rich_detail(exc, error_details_pb2.RetryInfo)
    return float(info.retry_delay.ToTimedelta().total_seconds()) if info else 0.0


def record(name: str, **figures: object) -> None:
    """Appends a test's figures (JSON lines) to $RECALLATRON_FIGURES when set,
    the source of the counts in docs/reliability.md."""
    import json
    import os

    print(name, figures)
    path = os.environ.get("RECALLATRON_FIGURES")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"test": name, **figures}, default=str) + "\n")
