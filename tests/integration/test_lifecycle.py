"""Migrations applied safely, and servers that drain on SIGTERM."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import grpc
import numpy as np
import psycopg
import pytest
from psycopg import sql

from recallatron import internal_auth, internal_channels
from recallatron.v1 import embed_pb2, embed_pb2_grpc
from recallatron_devkit.stack import Stack
from services.store.infrastructure import migrate
from services.store.infrastructure.db import with_database

pytestmark = pytest.mark.integration


def _migrate(url: str) -> list[str]:
    return migrate.apply_migrations(url, "workspace")


def test_migrations_twice_and_concurrently(stack: Stack) -> None:
    name = f"mig_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = with_database(stack.database_url, name)
    everything = migrate.versions("workspace")
    # Four processes at once: each version applied exactly once, by one of them.
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.map(_migrate, [url] * 4)
    applied = sorted(v for r in results for v in r)
    assert applied == sorted(everything)
    # Again: a no-op.
    assert _migrate(url) == []
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT version FROM schema_migration ORDER BY version").fetchall()
    assert [r[0] for r in rows] == everything


KEY = internal_auth.new_key()


def test_sigterm_lets_the_in_flight_call_finish(tmp_path: Path, prepared_models_dir: Path) -> None:
    port_file = tmp_path / "embed.port"
    env = dict(
        os.environ,
        RECALLATRON_EMBED_LISTEN="127.0.0.1:0",
        RECALLATRON_PORT_FILE=str(port_file),
        RECALLATRON_MODELS_DIR=str(prepared_models_dir),
        RECALLATRON_SHUTDOWN_GRACE_SECONDS="30",
        RECALLATRON_INTERNAL_KEY=KEY,
    )
    proc = subprocess.Popen([sys.executable, "-m", "services.embed"], env=env)
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        channel = internal_channels.member_channel(
            grpc.insecure_channel(f"127.0.0.1:{port_file.read_text()}"),
            internal_auth.Signer(KEY.encode(), "test"),
        )
        stub = embed_pb2_grpc.EmbedServiceStub(channel)
        grpc.channel_ready_future(channel).result(timeout=30)
        # Wait until the model is loaded, then start a slow batch.
        for _ in range(300):
            try:
                stub.Embed(embed_pb2.EmbedRequest(texts=["warm"]), timeout=5)
                break
            except grpc.RpcError:
                time.sleep(0.2)
        texts = [" ".join(["the quick brown fox jumps"] * 50) + str(i) for i in range(64)]
        result: dict[str, object] = {}

        def call() -> None:
            try:
                result["response"] = stub.Embed(embed_pb2.EmbedRequest(texts=texts), timeout=60)
            except grpc.RpcError as exc:
                result["error"] = exc

        worker = threading.Thread(target=call)
        worker.start()
        time.sleep(0.3)  # the call is now in flight
        proc.send_signal(signal.SIGTERM)
        worker.join(60)
        assert "error" not in result, result.get("error")
        response = result["response"]
        assert len(response.vectors) == 64  # type: ignore[attr-defined]
        assert proc.wait(60) == 0
        # Once drained, new calls are refused.
        with pytest.raises(grpc.RpcError):
            stub.Embed(embed_pb2.EmbedRequest(texts=["late"]), timeout=2)
        channel.close()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_renewed_memory_s_vector_follows_it(stack: Stack) -> None:
    """A memory renewed (new updated_at, same text, vector kept) keeps a
    vector whose copy of the time follows it, so the dense arm's expiry gate
    admits what the lexical arm answers. (Vectors renewed before migration
    0026 were brought up to date by 0030; a database that old is refused by
    the baseline, tests/integration/test_migration_baseline.py.)"""
    from pgvector.psycopg import register_vector

    name = f"mig_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = with_database(stack.database_url, name)
    migrate.apply_migrations(url, "workspace")
    memory_id, member = str(uuid.uuid4()), str(uuid.uuid4())
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute(
            "INSERT INTO memory (id, kind, title, body, confidence, origin, purposes,"
            " created_by, created_at, updated_at) VALUES (%s, 'fact', 'Rollout', 'plan',"
            " 0.5, 'told', '{assist}', %s, now() - interval '40 days',"
            " now() - interval '40 days')",
            (memory_id, member),
        )
        vector = np.ones(384, dtype=np.float32)
        conn.execute(
            "INSERT INTO memory_embedding (memory_id, model_id, input_version, embedding)"
            " VALUES (%s, 'm', 'v', %s)",
            (memory_id, vector),
        )
        conn.execute(
            "UPDATE memory SET confidence = 0.9, updated_at = now(), revision = revision + 1"
            " WHERE id = %s",
            (memory_id,),
        )
    with psycopg.connect(url) as conn:
        followed = conn.execute(
            "SELECT e.memory_updated_at = m.updated_at,"
            " e.memory_updated_at > now() - interval '1 day'"
            " FROM memory m JOIN memory_embedding e ON e.memory_id = m.id"
        ).fetchone()
    # The renewal's time, not the 40-day-old one the vector was stored with.
    assert followed == (True, True)
