"""The soak's writers retry as an agent is told to: the same request, whole,
under the same request id. A retry that changed its request would be refused
INVALID_ARGUMENT by the store whenever the first attempt had committed but its
answer was lost (a part killed at that moment), and the soak would count a
documented refusal as the service's fault."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from benchmarks.soak_traffic import Ledger, Own, Tenant, Worker


class Lost(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


class FlakyClient:
    """Fails each write's first two attempts as a killed store would, then
    answers; keeps every attempt's arguments."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __getattr__(self, tool: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.attempts.append((tool, args, kwargs))
            if len(self.attempts) % 3:
                raise Lost()
            memory = SimpleNamespace(id="m-new", revision=2)
            return SimpleNamespace(memory=memory, episode_id="e-new", replayed=True)

        return call


@pytest.mark.parametrize("op", ["remember", "derive", "correct", "supersede", "forget", "episode"])
def test_a_retried_write_repeats_its_request_whole(
    op: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("benchmarks.soak_traffic.time.sleep", lambda _: None)
    worker = Worker(7, [], Ledger(), threading.Event(), "http://127.0.0.1:1/")
    client = FlakyClient()
    tenant = Tenant("s", "w", "db", "tok", [], "entity-1", "seed")
    own = Own({"m-old": 1})
    worker.ops[op](tenant, client, own)  # type: ignore[arg-type]
    assert len(client.attempts) == 3
    assert client.attempts[0] == client.attempts[1] == client.attempts[2]
    assert client.attempts[0][2]["request_id"]
    assert worker.ledger.errors[("warm-up", "UNAVAILABLE")] == 2
    if op == "episode":  # acknowledged, so the audit looks for it
        assert list(worker.ledger.episodes.values()) == ["e-new"]
