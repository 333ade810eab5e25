"""What the embedding job has done in one workspace (GetEmbeddingStatus):
counts from the workspace's database, as the owner sees them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from recallatron.embed_input import EMBED_INPUT_VERSION
from services.store.domain.control import ControlPlane
from services.store.infrastructure.db import Databases
from services.store.sql.queries import EMBEDDING_STATUS, PARKED_REASONS


@dataclass(frozen=True)
class EmbeddingStatus:
    memories: int
    embedded: int
    pending: int
    parked: int
    # The most common reasons rows were parked for, with their counts.
    parked_reasons: list[tuple[str, int]]
    # The model of the newest vector, whose vectors ``embedded`` counts.
    model_id: str = ""


def status(
    dbs: Databases,
    control: ControlPlane,
    workspace_id: str,
    member_id: str | None = None,
    purposes: Sequence[str] = (),
) -> EmbeddingStatus:
    """The counts among what ``member_id`` may see by audience, for one of
    ``purposes`` (a scoped token's; empty: every purpose); every memory when
    None (the operator). Parked reasons are the embed service's status texts,
    never memory text."""
    ws = control.workspace(workspace_id)
    params = {"member": member_id, "version": EMBED_INPUT_VERSION, "purposes": list(purposes)}
    with dbs.owner_pool(ws.server, ws.database_name).connection() as conn:
        row = conn.execute(EMBEDDING_STATUS, params).fetchone()
        assert row is not None
        reasons = conn.execute(PARKED_REASONS, {**params, "limit": 5}).fetchall() if row[3] else []
    return EmbeddingStatus(
        int(row[0]),
        int(row[1]),
        int(row[2]),
        int(row[3]),
        [(str(r[0] or ""), int(r[1])) for r in reasons],
        str(row[4] or ""),
    )
