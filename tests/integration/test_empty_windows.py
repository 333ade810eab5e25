"""A window in time is `from` (inclusive) to `to` (exclusive): one whose `to`
is not later than its `from` holds no instant at all. Every call that takes
one refuses such a window, INVALID_ARGUMENT naming `to`, rather than
answering an empty page as if nothing had happened in it: the timelines of
the workspace, an entity and an episode as the memory and audit listings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from tests.conftest import Team

pytestmark = pytest.mark.integration

AT = "2026-03-01T12:00:00Z"
BEFORE = "2026-02-01T12:00:00Z"


def _refused(call: Callable[[], Any]) -> str:
    with pytest.raises(grpc.RpcError) as info:
        call()
    err = info.value
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
    return str(err.details())


def _calls(ada: Client, entity: str, episode: str, start: str, end: str) -> dict[str, Any]:
    window = {"start": start, "end": end}
    return {
        "workspace timeline": lambda: ada.timeline(**window),
        "entity timeline": lambda: ada.timeline(entity_id=entity, **window),
        "episode timeline": lambda: ada.timeline(episode_id=episode, **window),
        "list_memories": lambda: ada.list_memories(**{"from": start, "to": end}),
        "audit_events": lambda: ada.audit_events(**{"from": start, "to": end}),
    }


def _subjects(ada: Client) -> tuple[str, str]:
    episode = ada.create_episode("window", AT, audience_to="workspace").episode_id
    memory = ada.remember(
        "Met Vera at the window",
        audience_to="workspace",
        mention_names=["Vera Window"],
        episode_id=episode,
    ).memory
    return memory.mentions[0].entity_id, episode


def test_an_empty_or_backward_window_is_refused_by_every_call_naming_to(team: Team) -> None:
    ada = team.clients["ada"]
    entity, episode = _subjects(ada)
    for start, end in ((AT, AT), (AT, BEFORE)):
        for name, call in _calls(ada, entity, episode, start, end).items():
            details = _refused(call)
            assert details == "to: must be later than from", (name, start, end, details)


def test_a_window_of_one_microsecond_is_answered(team: Team) -> None:
    """The smallest window there is still holds an instant: answered, not refused."""
    ada = team.clients["ada"]
    entity, episode = _subjects(ada)
    for name, call in _calls(ada, entity, episode, AT, "2026-03-01T12:00:00.000001Z").items():
        assert call() is not None, name
