"""Not found means not found (design §4) through the graph tools, episodes and
the writes that name graph ids: an entity, episode or memory the caller may
not see is refused exactly as an id that does not exist, status and message."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from recallatron.client import Client
from tests.conftest import Team

pytestmark = pytest.mark.integration

START = "2025-01-01T00:00:00Z"

# Each call, given cy's client and an id: the id of what bob keeps to himself,
# or one that names nothing.
CALLS: dict[str, Callable[[Client, str, str], Any]] = {
    "timeline of an entity": lambda c, entity, _: c.timeline(entity_id=entity),
    "timeline of an episode": lambda c, _, episode: c.timeline(episode_id=episode),
    "neighbors": lambda c, entity, _: c.neighbors(entity),
    "remember into an episode": lambda c, _, episode: c.remember("x", episode_id=episode),
    "remember mentioning an entity": lambda c, entity, _: c.remember("x", mention_ids=[entity]),
    "an episode with an entity": lambda c, entity, _: c.create_episode(
        "e", START, entity_ids=[entity]
    ),
    "a claim about an entity": lambda c, entity, _: c.remember(
        "x", claims=[{"entity": {"entity_id": entity}, "attribute": "city", "value": "Oslo"}]
    ),
}


def _refusal(call: Callable[[], Any]) -> tuple[grpc.StatusCode, str | None]:
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code(), err.value.details()


@pytest.mark.parametrize("name", sorted(CALLS))
def test_an_unseen_graph_id_is_refused_as_a_missing_one(team: Team, name: str) -> None:
    bob, cy = team.clients["bob"], team.clients["cy"]
    secret = bob.remember("bob's own", mention_names=["Zed"]).memory
    entity = secret.mentions[0].entity_id
    episode = bob.create_episode("bob's own", START).episode_id
    missing = str(uuid.uuid4())
    call = CALLS[name]
    assert _refusal(lambda: call(cy, entity, episode)) == _refusal(
        lambda: call(cy, missing, missing)
    )


def _supersede_from(client: Client, memory_id: str, source: str) -> Any:
    return client.supersede(memory_id, 1, "s", sources=[source])


def test_an_unseen_source_is_refused_as_a_missing_one(team: Team) -> None:
    bob, cy = team.clients["bob"], team.clients["cy"]
    secret = bob.remember("bob's own").memory
    shared = cy.remember("cy's", audience_to="workspace").memory
    missing = str(uuid.uuid4())
    assert _refusal(lambda: cy.derive([shared.id, secret.id], "d")) == _refusal(
        lambda: cy.derive([shared.id, missing], "d")
    )
    assert _refusal(lambda: _supersede_from(cy, shared.id, secret.id)) == _refusal(
        lambda: _supersede_from(cy, shared.id, missing)
    )
    # Nothing was written by the refusals.
    assert cy.read([shared.id]).memories[0].revision == 1
