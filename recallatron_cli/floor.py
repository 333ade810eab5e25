"""`recallatron calibrate-floor --workspace W [--apply] [--json]`: the dense
floor's rule (services/store/domain/floor.py) on a workspace's own memories,
run beside the store like `rebuild`: the memories and their vectors from the
workspace's database, the queries embedded by the embed service. With
``--apply`` the chosen floor becomes the workspace's ``dense_floor`` (the
services read settings anew within seconds), written to the workspace's audit
log as the operator's change, as an owner's change through the API is."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

# The newest memories read: their vectors are held in memory (40 MB at most).
MAX_MEMORIES = 25_000
EMBED_BATCH = 32
EMBED_TIMEOUT_SECONDS = 60.0


def unit_rows(vectors: Sequence[Sequence[float]]) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1, norms)


def service_embedder() -> Any:
    """(the job's embedder, texts -> unit vectors as memories are embedded,
    texts -> unit vectors as recall embeds its query), through the embed
    service of the settings. Recall marks its queries (EmbedRequest.queries:
    the service's query graph, docs/embeddings.md), so the floor's queries
    are marked too: the cosines the rule reads are the ones recall compares
    with the floor."""
    from recallatron.v1 import embed_pb2
    from services.embedding_job.embedder import Embedder
    from services.store.settings import StoreSettings

    settings = StoreSettings()
    embedder = Embedder(settings.embed_target, EMBED_TIMEOUT_SECONDS, settings)

    def once(texts: Sequence[str], queries: bool) -> list[list[float]]:
        request = embed_pb2.EmbedRequest(texts=list(texts), queries=queries)
        resp = embedder.stub.Embed(request, timeout=EMBED_TIMEOUT_SECONDS)
        return [list(vec.values) for vec in resp.vectors]

    def batch(texts: Sequence[str], queries: bool) -> list[list[float]]:
        try:
            return once(texts, queries)
        except Exception:  # once more: the service may be busy with the embedding job
            return once(texts, queries)

    def embedding(queries: bool) -> Callable[[Sequence[str]], np.ndarray]:
        def embed(texts: Sequence[str]) -> np.ndarray:
            out: list[list[float]] = []
            for i in range(0, len(texts), EMBED_BATCH):
                out += batch(texts[i : i + EMBED_BATCH], queries)
            return unit_rows(out)

        return embed

    return embedder, embedding(False), embedding(True)


def embed_texts() -> Any:
    """The embedders of the migration report's floor section: of the
    memories (not embedded yet) and of the queries, as recall embeds them."""
    return service_embedder()[1:]


def cmd_calibrate_floor(args: argparse.Namespace) -> int:
    from recallatron.embed_input import EMBED_INPUT_VERSION, compose
    from recallatron_cli.common import Refused
    from recallatron_cli.operator import _store, _workspace_id
    from services.store.domain.administration import Administration
    from services.store.domain.floor import calibrate
    from services.store.sql import floor_queries as q

    embedder, embed, embed_queries = service_embedder()
    with _store() as (dbs, control):
        workspace_id = _workspace_id(control, args.workspace)
        ws = control.workspace(workspace_id)
        params = {
            "model_id": embedder.model_id(),
            "input_version": EMBED_INPUT_VERSION,
            "limit": MAX_MEMORIES,
        }
        with dbs.owner_pool(ws.server, ws.database_name).connection() as conn:
            rows = conn.execute(q.CALIBRATION_MEMORIES, params).fetchall()
            counted = conn.execute(q.CALIBRATION_MEMORY_COUNT).fetchone()
        total = int(counted[0]) if counted else 0
        if not rows:
            # A failure as every command's: one "error:" line on stderr, so
            # that --json's stdout holds JSON or nothing.
            raise Refused(
                f"{ws.slug}: no memory is embedded yet with the current model; nothing to do", 1
            )
        texts = [compose(str(r[0]), str(r[1])) for r in rows]
        try:
            choice = calibrate(texts, embed, unit_rows([list(r[2]) for r in rows]), embed_queries)
        except ValueError as exc:
            raise Refused(f"{ws.slug}: {exc}", 1) from None
        current = ws.settings.dense_floor
        if args.apply:
            # None: the operator (the command runs beside the store, no member asked).
            Administration(dbs, control).update_settings(
                None, workspace_id, {"dense_floor": choice.floor}
            )
    result = {
        "workspace": ws.slug,
        "memories": len(rows),
        "memories_not_embedded_or_beyond_the_newest": total - len(rows),
        "current_floor": current,
        "applied": bool(args.apply),
        **choice.to_json(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{ws.slug}: {choice.line()}")
        print(f"    on {len(rows)} memories; the workspace's floor was {current:.2f}")
        print("    applied" if args.apply else "    not applied (--apply sets it)")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate-floor",
        help="the dense floor by the rule, on a workspace's own memories (docs/recall.md)",
    )
    p.add_argument("--workspace", required=True, help="slug or id")
    p.add_argument("--apply", action="store_true", help="set the workspace's dense_floor to it")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_calibrate_floor)
