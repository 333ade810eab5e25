"""A silent network cut to Postgres (packets dropped, no reset: a host gone,
a partition) is noticed within RECALLATRON_POSTGRES_SILENCE_SECONDS (10 by
default): every connection the store opens carries TCP keepalives and
tcp_user_timeout, so a call on a connection whose server went silent answers
UNAVAILABLE with a retry hint instead of waiting out its deadline, and
readiness turns NOT_SERVING. The cut is made by the kernel (iptables drops
every packet to and from the stack's Postgres port): a proxy in user space,
as tests/faults/tcp_proxy.py, would still acknowledge the packets, and the
kernel's watch would see a live peer. A store-only stack of its own."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from recallatron import internal_auth, internal_channels
from recallatron.v1 import store_pb2, store_pb2_grpc
from recallatron_devkit.stack import Stack, own_config
from tests.conftest import wait_for
from tests.faults.stackutil import record, retry_delay, running
from tests.faults.test_readiness import _status

pytestmark = pytest.mark.integration

# The default RECALLATRON_POSTGRES_SILENCE_SECONDS, and the call's deadline:
# far beyond it, so only a cut noticed by the store answers before it.
SILENCE_SECONDS = 10
CALL_DEADLINE_SECONDS = 40.0


def _iptables(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["iptables", "-w", *args], capture_output=True, text=True)


def _can_cut() -> str:
    """Why the kernel cannot drop packets here ('' when it can)."""
    if shutil.which("iptables") is None:
        return "iptables is not installed"
    done = _iptables("-L", "INPUT", "-n")
    return "" if done.returncode == 0 else f"iptables refused: {done.stderr.strip()}"


@contextmanager
def cut(port: int) -> Iterator[None]:
    """Every packet to and from ``port`` on loopback dropped for the block."""
    rules = [
        ["INPUT", "-i", "lo", "-p", "tcp", "--dport", str(port), "-j", "DROP"],
        ["INPUT", "-i", "lo", "-p", "tcp", "--sport", str(port), "-j", "DROP"],
    ]
    added: list[list[str]] = []
    try:
        for rule in rules:
            done = _iptables("-I", *rule)
            assert done.returncode == 0, done.stderr
            added.append(rule)
        yield
    finally:
        for rule in added:
            _iptables("-D", *rule)


@pytest.fixture(scope="module")
def store_stack() -> Iterator[Stack]:
    reason = _can_cut()
    if reason:
        pytest.skip(f"a silent cut needs iptables as root: {reason}")
    config = own_config(
        Path(tempfile.mkdtemp(prefix="recallatron-faults-")),
        services=("store",),
        embedding_job=False,
        env={"RECALLATRON_SHUTDOWN_GRACE_SECONDS": "1"},
    )
    with running(Stack(config)) as stack:
        yield stack


def _plain_store(stack: Stack) -> tuple[grpc.Channel, store_pb2_grpc.StoreServiceStub]:
    """The store without the channel's own retries: its first answer is the test's."""
    signer = internal_auth.Signer(stack.internal_key, "test")
    raw = grpc.insecure_channel(stack.address("store"), options=[("grpc.enable_retries", 0)])
    channel = internal_channels.member_channel(raw, signer)
    return raw, store_pb2_grpc.StoreServiceStub(channel)


def test_a_silent_cut_answers_unavailable_and_turns_readiness_off(store_stack: Stack) -> None:
    pg = store_stack.postgres
    assert pg is not None
    raw, store = _plain_store(store_stack)
    try:
        # The control pool holds a connection that has answered.
        store.ListWorkspaces(store_pb2.ListWorkspacesRequest(), timeout=10)
        assert _status(store_stack, "store") == "SERVING"
        with cut(pg.port):
            began = time.monotonic()
            with pytest.raises(grpc.RpcError) as info:
                store.ListWorkspaces(
                    store_pb2.ListWorkspacesRequest(), timeout=CALL_DEADLINE_SECONDS
                )
            answered = time.monotonic() - began
            code = info.value.code()
            assert code == grpc.StatusCode.UNAVAILABLE, (
                f"{code} after {answered:.1f} s: the store did not notice the cut"
            )
            assert retry_delay(info.value) > 0
            wait_for(
                lambda: _status(store_stack, "store") == "NOT_SERVING",
                "the store NOT_SERVING with its Postgres cut off",
            )
            unready = time.monotonic() - began
        wait_for(
            lambda: _status(store_stack, "store") == "SERVING",
            "the store SERVING again once the cut ends",
        )
        # A pooled connection the cut ended is found so when next lent and
        # replaced: the first call once the store is back is served.
        store.ListWorkspaces(store_pb2.ListWorkspacesRequest(), timeout=30)
        record(
            "a silent cut to Postgres",
            unavailable_after_seconds=round(answered, 1),
            not_serving_after_seconds=round(unready, 1),
            silence_seconds=SILENCE_SECONDS,
        )
    finally:
        raw.close()
