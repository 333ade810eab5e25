"""Access: tokens stored only as sha256 (looked up by hash, so no
secret-dependent comparison), per-token rate limits with RESOURCE_EXHAUSTED,
and neither a token nor a memory's text in any log after real traffic."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from services.store.infrastructure.db import CONTROL_DATABASE, with_database
from tests.conftest import Team

pytestmark = pytest.mark.integration


def test_tokens_are_stored_as_sha256_only(stack: Stack, team: Team) -> None:
    token = team.clients["ada"].token
    url = with_database(stack.database_url, CONTROL_DATABASE)
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT t::text, token_sha256 FROM access_token t").fetchall()
    digest = hashlib.sha256(token.encode()).digest()
    assert any(bytes(r[1]) == digest for r in rows)
    assert not any(token in r[0] for r in rows)


@pytest.fixture
def limited_gateway(stack: Stack) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A second gateway on the session's store and rank, with a tight limit."""
    run = Path(tempfile.mkdtemp(prefix="recallatron-ratelimit-"))
    env = stack.env_for("gateway")
    env.pop("RECALLATRON_METRICS_PORT", None)  # the session gateway's
    env.update(
        {
            "RECALLATRON_GATEWAY_LISTEN": "127.0.0.1:0",
            "RECALLATRON_PORT_FILE": str(run / "gateway.port"),
            "RECALLATRON_REVIEW_LISTEN": "0",
            "RECALLATRON_HTTP_LISTEN": "0",
            "RECALLATRON_RATE_LIMIT_PER_SECOND": "5",
            "RECALLATRON_RATE_LIMIT_BURST": "5",
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "services.gateway"], env=env, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while not (run / "gateway.port").exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    yield f"127.0.0.1:{(run / 'gateway.port').read_text()}", proc
    proc.terminate()
    proc.wait(30)


def test_per_token_rate_limit_is_resource_exhausted(limited_gateway, team: Team) -> None:  # type: ignore[no-untyped-def]
    address, _ = limited_gateway
    ada = Client(address, team.clients["ada"].token)
    bob = Client(address, team.clients["bob"].token)
    memory = team.clients["ada"].remember("rate limited", audience_to="workspace").memory.id
    codes = []
    for _ in range(20):
        try:
            ada.read([memory])
            codes.append(grpc.StatusCode.OK)
        except grpc.RpcError as exc:
            codes.append(exc.code())
            if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                assert "authorization" in (exc.details() or "")
    assert set(codes) == {grpc.StatusCode.OK, grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert codes.count(grpc.StatusCode.OK) <= 7  # the burst of 5, plus refill
    # Another token has its own bucket.
    assert bob.read([memory]).memories
    # The bucket refills.
    time.sleep(1.0)
    assert ada.read([memory]).memories
    ada.close()
    bob.close()


def test_no_token_or_memory_text_in_logs(stack: Stack, operator: Client, team: Team) -> None:
    ada = team.clients["ada"]
    secret_text = f"zebra-{uuid.uuid4().hex}"
    made = ada.remember(secret_text, f"body {secret_text}", audience_to="workspace").memory
    ada.recall(secret_text)
    ada.correct(made.id, 1, "fix", body=f"corrected {secret_text}")
    with pytest.raises(grpc.RpcError):
        ada.remember(secret_text + "\x00")
    with pytest.raises(grpc.RpcError):
        ada.correct(made.id, 1, "stale", body=secret_text)
    fresh = operator.create_token(team.members["bob"], "log check")
    with pytest.raises(grpc.RpcError):
        Client(stack.gateway, fresh.token + "x").read([made.id])
    time.sleep(1.0)  # let the services flush their lines
    logs = sorted(stack.log_dir.glob("*.log"))
    assert logs
    if stack.postgres is not None:
        logs.append(stack.postgres.data_dir / "server.log")
    secrets = [secret_text, ada.token, fresh.token, stack.admin_token]
    for path in logs:
        text = path.read_text(errors="replace")
        for secret in secrets:
            assert secret not in text, f"{secret[:8]}... found in {os.path.basename(path)}"
