"""Fixtures of the recall tests: the session's real stack (embedded Postgres,
store, embed, rank, gateway and the embedding job as processes), fresh
workspaces per test, and helpers that wait for the asynchronous parts (the
embedding job, reconnecting channels, cached settings) by polling."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from recallatron.client import Client
from recallatron_devkit.stack import Stack
from tests.conftest import wait_for


@pytest.fixture(scope="session")
def tiny_cross_encoder(prepared_models_dir: Path) -> Path:
    """The ONNX directory of the tiny random cross-encoder (built once, cached)."""
    pytest.importorskip("torch")
    from recallatron_devkit.embed_fixture import prepare_tiny_cross_encoder

    _, onnx_dir = prepare_tiny_cross_encoder(
        prepared_models_dir.parent / "test-models" / "tiny-cross-encoder"
    )
    return onnx_dir


@pytest.fixture
def one_connection(stack: Stack) -> Iterator[Any]:
    """The store's control plane in this process on pools of one connection,
    so that every statement of a domain call lands on the session a test then
    reads (pg_prepared_statements)."""
    from services.store.domain.control import ControlPlane
    from services.store.infrastructure.db import Databases
    from services.store.settings import StoreSettings

    dbs = Databases(
        StoreSettings(
            database_url=stack.database_url,
            app_password=stack.app_password,
            # As the stack's own store: reaching the server sets the app
            # role's password with this many rounds.
            app_password_scram_iterations=1,
            pool_max_size=1,
        )
    )
    try:
        dbs.bootstrap()
        yield ControlPlane(dbs)
    finally:
        dbs.close()


@dataclass
class Member:
    id: str
    client: Client


@dataclass
class Workspace:
    id: str
    owner: Member
    members: dict[str, Member]
    admin: Client


class RecallStack:
    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.admin = Client(stack.gateway, stack.admin_token, timeout=60)

    def workspace(self, *members: str) -> Workspace:
        """A fresh workspace with an owner and the named plain members."""
        ws = self.admin.create_workspace(f"recall-{uuid.uuid4().hex[:12]}").workspace

        def member(handle: str, owner: bool) -> Member:
            m = self.admin.create_member(ws.id, handle, owner=owner).member
            token = self.admin.create_token(m.id).token
            return Member(m.id, Client(self.stack.gateway, token, timeout=30))

        owner = member("owner", True)
        return Workspace(ws.id, owner, {h: member(h, False) for h in members}, self.admin)

    def use_cross_encoder(self, directory: Path | None) -> None:
        """Restarts the embed process when its cross-encoder must change."""
        wanted = str(directory) if directory else ""
        if self.stack.config.cross_encoder_dir != wanted:
            self.stack.config.cross_encoder_dir = wanted
            self.stack.restart_service("embed")

    def dense_recall(self, client: Client, query: str, **kwargs: Any) -> Any:
        """A recall in which the dense arm took part (rank's channel to a
        restarted embed service may need a moment to reconnect)."""

        def probe() -> Any:
            outcome = client.recall(query, **kwargs).outcome
            return outcome if outcome.dense_available else None

        return wait_for(probe, "the dense arm to take part")

    def close(self) -> None:
        self.admin.close()


@pytest.fixture(scope="session")
def recall_stack(stack: Stack) -> Iterator[RecallStack]:
    """The session stack (tests/conftest.py), with the helpers above."""
    rs = RecallStack(stack)
    try:
        yield rs
    finally:
        rs.close()
