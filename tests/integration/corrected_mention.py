"""The setup of the tests of a mention a `correct` adds (docs/graph.md,
"Time"): an older memory that names nothing until a correction's claims name
a new entity and a known one, with a time between the two."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from recallatron.client import Client


@dataclass(frozen=True)
class Corrected:
    kai: str  # the memory mentioning Kai from its creation
    plain: str  # the memory a correction made name Kai and Newcomer
    kai_id: str
    newcomer: str
    before: str  # a time before the correction, after both memories were written


def correct_an_old_note(client: Client) -> Corrected:
    """Writes, for the whole workspace, a memory naming Kai and a note naming
    nothing; then, after ``before``, corrects the note with claims on a new
    entity, Newcomer, and on Kai."""
    kai = client.remember(
        "Kai", "Kai is here.", audience_to="workspace", mention_names=["Kai"]
    ).memory
    plain = client.remember("A note", "Nothing named yet.", audience_to="workspace").memory
    kai_id = client.lookup("Kai").entities[0].id
    # Apart from both writes by more than the clock's grain.
    time.sleep(0.05)
    before = datetime.now(UTC).isoformat()
    time.sleep(0.05)
    client.correct(
        plain.id,
        plain.revision,
        "named them",
        claims=[
            {"entity": {"name": "Newcomer"}, "attribute": "role", "value": "guest"},
            {"entity": {"entity_id": kai_id}, "attribute": "role", "value": "host"},
        ],
    )
    newcomer = client.lookup("Newcomer").entities[0].id
    return Corrected(kai.id, plain.id, kai_id, newcomer, before)
