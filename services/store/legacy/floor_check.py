"""The migration report's floor section (design §5.8): the dense floor's
rule (services/store/domain/floor.py) run on the migrated corpus, to confirm
or correct the workspace's floor there. Advisory: the floor is not changed
(`recallatron calibrate-floor --apply` does that), and a failure to compute
it (the embed service unreachable) is reported, never fatal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recallatron.embed_input import compose
from services.store.domain.control import ControlPlane
from services.store.domain.floor import Embed, calibrate
from services.store.infrastructure.db import Databases
from services.store.sql import floor_queries as q

# Migrated memories embedded for the check (newest first); the report says
# how many.
MAX_MEMORIES = 5_000

# (texts -> unit vectors as the embedding job embeds memories, texts -> unit
# vectors as recall embeds its query). Recall embeds its query on the embed
# service's query graph, whose cosines differ from the exact graph's in the
# third decimal: the rule must read the cosines recall compares with the floor.
Embedders = tuple[Embed, Embed]


def migrated_floor(
    dbs: Databases, control: ControlPlane, workspace_id: str, make_embed: Callable[[], Embedders]
) -> dict[str, Any]:
    ws = control.workspace(workspace_id)
    with dbs.owner_pool(ws.server, ws.database_name).connection() as conn:
        rows = conn.execute(q.MIGRATED_MEMORIES, {"limit": MAX_MEMORIES}).fetchall()
    section: dict[str, Any] = {
        "computed": False,
        "memories": len(rows),
        "current_floor": ws.settings.dense_floor,
    }
    texts = [compose(str(r[0]), str(r[1])) for r in rows]
    try:
        embed, embed_queries = make_embed()
        choice = calibrate(texts, embed, embed_queries=embed_queries)
    except ValueError as exc:
        return {**section, "reason": str(exc)}
    except Exception as exc:  # the embed service: reported, the migration stands
        code = getattr(exc, "code", None)
        why = code().name if callable(code) else type(exc).__name__
        return {**section, "reason": f"the embed service could not embed: {why}"}
    return {**section, "computed": True, **choice.to_json(), "line": choice.line()}
