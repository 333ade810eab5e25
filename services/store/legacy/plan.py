"""From old-store records to the rows the importer writes, as pure functions:
deterministic ids, kind mapping, times, audience, skip reasons."""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from recallatron.vocabulary import MAX_BODY, MAX_ENTITY_NAME, MAX_TITLE
from services.store.legacy.oldstore import Graph, MemoryItem, Turn, parse_time

# Rows per transaction: big enough to be quick, small enough that an
# interruption loses little work.
DEFAULT_BATCH_SIZE = 500

# Fixed: the ids of imported rows derive from it, so never change it.
LEGACY_NAMESPACE = uuid.UUID("6f1d2b1e-7c1a-5d43-9a0e-3c52f0d1b7a4")

# Old kinds without a namesake among the four (design §3.2).
KIND_MAP = {
    "fact": "fact",
    "decision": "decision",
    "note": "note",
    "summary": "summary",
    "preference": "fact",
    "procedure": "note",
    "procedural": "note",
    "episode": "summary",
}
# An item without a title gets one from its body, this long at most.
DERIVED_TITLE_CHARS = 80
# Longer turns (pasted logs, say) are skipped: their search vector could
# pass Postgres's tsvector size limit and fail the whole batch.
MAX_HISTORY_TURN_CHARS = 200_000
# Only memory items in this status are curated knowledge worth carrying.
IMPORTED_STATUS = "confirmed"
SHARED_SCOPES = ("shared", "workspace", "team")


class Ids:
    """Deterministic ids: the same old record always becomes the same row,
    which is what makes a rerun (or a run after an interruption) a no-op for
    what is already there. Keyed by the owner's handle, not the member id, so
    a rehearsal in another workspace yields the very same ids."""

    def __init__(self, owner_handle: str) -> None:
        self.namespace = uuid.uuid5(LEGACY_NAMESPACE, f"owner:{owner_handle}")

    def turn(self, turn_id: int) -> str:
        return str(uuid.uuid5(self.namespace, f"turn:{turn_id}"))

    def memory_item(self, item_id: int) -> str:
        return str(uuid.uuid5(self.namespace, f"memory_item:{item_id}"))

    def entity(self, old_id: str) -> str:
        return str(uuid.uuid5(self.namespace, f"entity:{old_id}"))


@dataclass(frozen=True)
class HistoryRow:
    id: str
    source_id: str
    chat_id: str
    role: str
    text: str
    occurred_at: datetime


@dataclass(frozen=True)
class MentionPlan:
    old_entity_id: str
    # The entity that stands for it after folding; None when there is none.
    resolved_old_id: str | None
    how: str


@dataclass(frozen=True)
class MemoryRow:
    id: str
    source_id: str
    kind: str
    mapped_from: str | None
    title: str
    body: str
    confidence: float
    # True: the owner alone; False: the whole workspace.
    owner_only: bool
    created_at: datetime
    updated_at: datetime
    mentions: tuple[MentionPlan, ...]


@dataclass(frozen=True)
class EntityRow:
    id: str
    source_id: str
    name: str
    created_at: datetime


def _bad_text(value: str) -> bool:
    return "\x00" in value


def plan_turn(turn: Turn, ids: Ids) -> HistoryRow | str:
    """The history row for a turn, or why it is skipped."""
    if not turn.text.strip():
        return "empty text"
    if _bad_text(turn.text) or _bad_text(turn.chat_id) or _bad_text(turn.role):
        return "text holds NUL characters"
    if len(turn.text) > MAX_HISTORY_TURN_CHARS:
        return f"text over {MAX_HISTORY_TURN_CHARS} characters"
    occurred = parse_time(turn.ts)
    if occurred is None:
        return "unreadable time"
    return HistoryRow(
        ids.turn(turn.id), str(turn.id), turn.chat_id, turn.role or "unknown", turn.text, occurred
    )


def _title(item: MemoryItem) -> str:
    title = " ".join(item.title.split())
    if not title:
        first = item.body.strip().splitlines()[0] if item.body.strip() else ""
        title = " ".join(first.split())
        if len(title) > DERIVED_TITLE_CHARS:
            title = title[: DERIVED_TITLE_CHARS - 1].rstrip() + "…"
    if len(title) > MAX_TITLE:
        title = title[: MAX_TITLE - 1].rstrip() + "…"
    return title


def _confidence(value: float | None) -> float:
    if value is None or not math.isfinite(value):
        return 1.0
    return min(1.0, max(0.0, value))


def plan_item(item: MemoryItem, ids: Ids, graph: Graph) -> MemoryRow | str:
    """The memory for a curated item, or why it is skipped."""
    status = item.status.strip().lower()
    if status != IMPORTED_STATUS:
        return f"not confirmed (status {status or 'empty'})"
    if _bad_text(item.title) or _bad_text(item.body):
        return "text holds NUL characters"
    title = _title(item)
    if not title:
        return "no title and no body"
    if len(item.body) > MAX_BODY:
        return f"body over {MAX_BODY} characters"
    created = parse_time(item.created_at)
    if created is None:
        return "unreadable time"
    updated = parse_time(item.updated_at) or created
    old_kind = item.kind.strip().lower()
    kind = KIND_MAP.get(old_kind, "note")
    mapped_from = None if old_kind == kind else (old_kind or "empty")
    mentions = []
    for old_id in dict.fromkeys(item.entity_ids):
        res = graph.resolve(old_id)
        mentions.append(MentionPlan(old_id, res.entity_id, res.how))
    scope = (item.scope or "").strip().lower()
    return MemoryRow(
        id=ids.memory_item(item.id),
        source_id=str(item.id),
        kind=kind,
        mapped_from=mapped_from,
        title=title,
        body=item.body,
        confidence=_confidence(item.confidence),
        owner_only=scope not in SHARED_SCOPES,
        created_at=created,
        # A correction never predates the claim.
        updated_at=max(created, updated),
        mentions=tuple(mentions),
    )


def entity_rows(rows: Sequence[MemoryRow], graph: Graph, ids: Ids) -> dict[str, EntityRow]:
    """old id -> entity row, for every entity the planned memories mention
    (entities exist only as mentions). Created at the record's valid-from,
    else at the first memory mentioning it: fixed by the data, not by when
    or in which batch the import runs."""
    out: dict[str, EntityRow] = {}
    for row in sorted(rows, key=lambda r: (r.created_at, int(r.source_id))):
        for m in row.mentions:
            if m.resolved_old_id is None or m.resolved_old_id in out:
                continue
            entity = graph.entities[m.resolved_old_id]
            name = " ".join(entity.name.replace("\x00", "").split()) or m.resolved_old_id
            out[m.resolved_old_id] = EntityRow(
                ids.entity(m.resolved_old_id),
                m.resolved_old_id,
                name[:MAX_ENTITY_NAME],
                parse_time(entity.valid_from) or row.created_at,
            )
    return out
