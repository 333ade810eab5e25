"""Shared by the entity merge tests: two entities that are one person,
written apart, and the entity a memory mentions by name."""

from __future__ import annotations

from recallatron.client import Client
from recallatron.v1 import common_pb2 as cpb


def entity(memory: cpb.Memory, name: str) -> str:
    return next(m.entity_id for m in memory.mentions if m.name == name)


def write_robins(client: Client, audience_to: str | None = None) -> dict[str, str]:
    """ "Robin Goodwin" (leads Apollo, lives in Lisbon) and "Robin" (reviews
    Apollo's releases): a whole-word prefix sharing the co-mentioned Apollo.
    Ids by role: goodwin, robin, apollo, first_memory, second_memory."""
    first = client.remember(
        "Robin Goodwin leads Apollo",
        "Robin Goodwin leads the Apollo project from Lisbon.",
        kind="fact",
        audience_to=audience_to,
        mention_names=["Robin Goodwin", "Apollo"],
        claims=[
            {
                "entity": {"name": "Robin Goodwin", "type": "person"},
                "attribute": "city",
                "value": "Lisbon",
            },
        ],
        relations=[
            {
                "subject": {"name": "Robin Goodwin"},
                "predicate": "leads",
                "object": {"name": "Apollo"},
            },
        ],
    ).memory
    apollo = entity(first, "Apollo")
    second = client.remember(
        "Robin on Apollo",
        "Robin reviews every Apollo release.",
        kind="fact",
        audience_to=audience_to,
        mention_names=["Robin"],
        mention_ids=[apollo],
        claims=[
            {
                "entity": {"name": "Robin", "type": "person"},
                "attribute": "role",
                "value": "release reviewer",
            },
        ],
        relations=[
            {"subject": {"name": "Robin"}, "predicate": "reviews", "object": {"entity_id": apollo}},
        ],
    ).memory
    return {
        "goodwin": entity(first, "Robin Goodwin"),
        "robin": entity(second, "Robin"),
        "apollo": apollo,
        "first_memory": first.id,
        "second_memory": second.id,
    }
