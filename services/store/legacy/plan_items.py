"""Old conversation turns and curated memory items -> the history rows and
memories the importer writes, as pure functions: kind mapping, titles, times,
audience and skip reasons."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from recallatron.vocabulary import (
    MAX_BODY,
    MAX_HISTORY_CHAT_ID,
    MAX_HISTORY_ROLE,
    MAX_HISTORY_TEXT,
    MAX_TITLE,
)
from services.store.legacy.ids import Ids
from services.store.legacy.oldgraph import Graph
from services.store.legacy.oldstore import MemoryItem, Turn, parse_time

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
MAX_HISTORY_TURN_CHARS = MAX_HISTORY_TEXT
# A chat id ('tg-1004', 'cli-main') and a role ('user', 'assistant', 'tool')
# are short names. A turn with a longer one is skipped, not cut (two chats'
# ids cut alike would become one chat): every reader shows them beside each
# turn, and an archive line holds the turn's text and them.
MAX_CHAT_ID_CHARS = MAX_HISTORY_CHAT_ID
MAX_ROLE_CHARS = MAX_HISTORY_ROLE
# Only memory items in this status are curated knowledge worth carrying.
IMPORTED_STATUS = "confirmed"
# The scopes that mean everyone; any other (a 'team' of some members, say)
# stays with the owner: a migration narrows, never widens (design §4).
SHARED_SCOPES = ("shared", "workspace")


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
    if len(turn.chat_id) > MAX_CHAT_ID_CHARS:
        return f"chat id over {MAX_CHAT_ID_CHARS} characters"
    if len(turn.role) > MAX_ROLE_CHARS:
        return f"role over {MAX_ROLE_CHARS} characters"
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


def confidence_of(value: float | None) -> float:
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
        confidence=confidence_of(item.confidence),
        owner_only=scope not in SHARED_SCOPES,
        created_at=created,
        # A correction never predates the claim.
        updated_at=max(created, updated),
        mentions=tuple(mentions),
    )
