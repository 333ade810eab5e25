"""Timelines (design §7.2): the events of an entity, an episode or the whole
workspace in valid-time order: memories written, claims and relations that
start or end, supersessions and corrections, each with its memory. One query
inside the caller's transaction, so what the caller may not see is left out;
paged by a keyset token."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from recallatron import errors
from recallatron.vocabulary import MAX_TIMELINE_EVENTS
from services.store.domain import entity_groups, episodes, page_tokens
from services.store.domain import validation as v
from services.store.domain.workspace_services import InWorkspaces
from services.store.infrastructure.db import Caller

# The kinds of event, in the order they sort at one instant (migration 0031's
# workspace_timeline numbers its walks in this order).
KINDS = (
    "memory",
    "claim_start",
    "relation_start",
    "correction",
    "supersession",
    "claim_end",
    "relation_end",
)

# An entity's or an episode's: each arm narrows to the subject, %(entities)s
# (an entity's group, design §8.5, answering as %(entity)s) or %(episode)s
# (both NULL: every event of the workspace, sorted). `at` is valid time where
# the claim states one, else when it was stated. Only claims held now: one a
# correction replaced or a supersession carried on is retired (its
# successor's copy, or the change's own event, tells it; lookup's history
# keeps it), else it would start twice.
EVENTS = """
WITH subject AS (
    SELECT m.id FROM memory m
    WHERE (%(entities)s::uuid[] IS NULL
           OR EXISTS (SELECT 1 FROM mention mn
                      WHERE mn.memory_id = m.id AND mn.entity_id = ANY(%(entities)s::uuid[])))
      AND (%(episode)s::uuid IS NULL OR m.episode_id = %(episode)s::uuid)
), events AS (
    SELECT m.created_at AS at, 'memory' AS kind, m.id AS memory_id, NULL::uuid AS entity_id,
           m.title AS summary, m.id::text AS key
    FROM memory m JOIN subject s ON s.id = m.id
  UNION ALL
    SELECT coalesce(c.valid_from, c.stated_at), 'claim_start', c.memory_id, c.entity_id,
           e.name || ': ' || c.attribute || ' = ' || c.value, c.id::text
    FROM attribute_claim c JOIN entity e ON e.id = c.entity_id
    WHERE (%(entities)s::uuid[] IS NULL OR c.entity_id = ANY(%(entities)s::uuid[]))
      AND c.retired_at IS NULL AND c.memory_id IN (SELECT id FROM subject)
  UNION ALL
    SELECT c.valid_until, 'claim_end', c.memory_id, c.entity_id,
           e.name || ': ' || c.attribute || ' = ' || c.value || ' ends', c.id::text
    FROM attribute_claim c JOIN entity e ON e.id = c.entity_id
    WHERE c.valid_until IS NOT NULL
      AND (%(entities)s::uuid[] IS NULL OR c.entity_id = ANY(%(entities)s::uuid[]))
      AND c.retired_at IS NULL AND c.memory_id IN (SELECT id FROM subject)
  UNION ALL
    SELECT coalesce(r.valid_from, r.stated_at), 'relation_start', r.memory_id,
           CASE WHEN %(entity)s::uuid IS NULL THEN r.subject_id ELSE %(entity)s::uuid END,
           s.name || ' ' || r.predicate || ' ' || o.name, r.id::text
    FROM relation_claim r JOIN entity s ON s.id = r.subject_id JOIN entity o ON o.id = r.object_id
    WHERE (%(entities)s::uuid[] IS NULL
           OR r.subject_id = ANY(%(entities)s::uuid[]) OR r.object_id = ANY(%(entities)s::uuid[]))
      AND r.retired_at IS NULL AND r.memory_id IN (SELECT id FROM subject)
  UNION ALL
    SELECT r.valid_until, 'relation_end', r.memory_id,
           CASE WHEN %(entity)s::uuid IS NULL THEN r.subject_id ELSE %(entity)s::uuid END,
           s.name || ' ' || r.predicate || ' ' || o.name || ' ends', r.id::text
    FROM relation_claim r JOIN entity s ON s.id = r.subject_id JOIN entity o ON o.id = r.object_id
    WHERE r.valid_until IS NOT NULL
      AND (%(entities)s::uuid[] IS NULL
           OR r.subject_id = ANY(%(entities)s::uuid[]) OR r.object_id = ANY(%(entities)s::uuid[]))
      AND r.retired_at IS NULL AND r.memory_id IN (SELECT id FROM subject)
  UNION ALL
    SELECT rv.changed_at,
           CASE rv.action WHEN 'correct' THEN 'correction' ELSE 'supersession' END,
           rv.memory_id, NULL::uuid,
           CASE rv.action WHEN 'correct' THEN 'corrected to revision ' || rv.revision
                ELSE 'superseded' END
           || CASE WHEN rv.reason <> '' THEN ': ' || rv.reason ELSE '' END,
           rv.memory_id::text || ':' || rv.revision || ':' || rv.action
    FROM memory_revision rv JOIN subject s ON s.id = rv.memory_id
    WHERE rv.action IN ('correct', 'supersede')
)
SELECT at, kind, memory_id, entity_id, summary, key FROM events
WHERE (%(from)s::timestamptz IS NULL OR at >= %(from)s::timestamptz)
  AND (%(to)s::timestamptz IS NULL OR at < %(to)s::timestamptz)
  AND (%(after_at)s::timestamptz IS NULL
       OR (at, array_position(%(kinds)s::text[], kind), key)
          > (%(after_at)s::timestamptz, %(after_kind)s::int, %(after_key)s::text))
ORDER BY at, array_position(%(kinds)s::text[], kind), key
LIMIT %(limit)s
"""

# The whole workspace's: each kind of event walked on an index in this order
# from the page's position, under the same visibility rules (migration 0031),
# so a page reads about its own rows, not the workspace's.
WORKSPACE_EVENTS = """
SELECT at, kind, memory_id, entity_id, summary, key
FROM workspace_timeline(%(from)s::timestamptz, %(to)s::timestamptz, %(after_at)s::timestamptz,
                        %(after_kind)s::integer, %(after_key)s::text, %(limit)s::integer)
"""


@dataclass(frozen=True)
class Event:
    at: datetime
    kind: str
    memory_id: str
    entity_id: str | None
    summary: str
    key: str


@dataclass(frozen=True)
class Page:
    events: list[Event]
    next_page_token: str


def _token(event: Event, subject: str) -> str:
    return page_tokens.encode(
        {
            "at": event.at.isoformat(),
            # The kind's place as SQL's array_position counts it (from 1).
            "kind": KINDS.index(event.kind) + 1,
            "key": event.key,
            "s": subject,
        }
    )


def _after(token: str, subject: str) -> tuple[datetime | None, int | None, str | None]:
    if not token:
        return None, None, None
    data = page_tokens.decode(token)
    try:
        at = datetime.fromisoformat(data["at"])
        kind, key = int(data["kind"]), str(data["key"])
        same = data["s"] == subject
        # Only what this service writes: a kind of KINDS, a key with no NUL
        # (the database could not take either otherwise: INTERNAL).
        if not 1 <= kind <= len(KINDS) or "\x00" in key or at.tzinfo is None:
            raise ValueError(data)
    except (ValueError, KeyError, TypeError, OverflowError):
        raise errors.InvalidArgument("page_token", page_tokens.NOT_OURS) from None
    if not same:
        raise errors.InvalidArgument("page_token", "belongs to another timeline")
    return at, kind, key


class TimelineStore(InWorkspaces):
    def timeline(
        self,
        caller: Caller,
        entity_id: str | None,
        episode_id: str | None,
        start: datetime | None,
        end: datetime | None,
        page_token: str = "",
    ) -> Page:
        """At most MAX_TIMELINE_EVENTS events from ``start`` (inclusive) to
        ``end`` (exclusive), oldest first; ``next_page_token`` continues."""
        if entity_id and episode_id:
            raise errors.InvalidArgument(
                "entity_id", "give an entity_id or an episode_id, not both"
            )
        entity = v.uuid_str(entity_id, "entity_id") if entity_id else None
        episode = v.uuid_str(episode_id, "episode_id") if episode_id else None
        if start is not None and end is not None and end < start:
            raise errors.InvalidArgument("to", "must not lie before from")
        subject = f"entity:{entity}" if entity else f"episode:{episode}" if episode else "all"
        after_at, after_kind, after_key = _after(page_token, subject)
        with self.transaction(caller) as conn:
            group = entity_groups.groups(conn, [entity]).get(entity) if entity else None
            if entity and group is None:
                raise errors.NotFound("entity_id: entity not found")
            if episode and conn.execute(episodes.VISIBLE, (episode,)).fetchone() is None:
                raise errors.NotFound("episode_id: episode not found")
            rows = conn.execute(
                EVENTS if entity or episode else WORKSPACE_EVENTS,
                {
                    "entity": group.head.id if group else None,
                    "entities": group.ids if group else None,
                    "episode": episode,
                    "from": start,
                    "to": end,
                    "after_at": after_at,
                    "after_kind": after_kind,
                    "after_key": after_key,
                    "kinds": list(KINDS),
                    "limit": MAX_TIMELINE_EVENTS + 1,
                },
            ).fetchall()
        # A claim about a merged member is an event of the group's head.
        head = {m: group.head.id for m in group.ids} if group else {}
        events = [
            Event(
                r[0], r[1], str(r[2]), head.get(str(r[3]), str(r[3])) if r[3] else None, r[4], r[5]
            )
            for r in rows[:MAX_TIMELINE_EVENTS]
        ]
        more = len(rows) > MAX_TIMELINE_EVENTS
        return Page(events, _token(events[-1], subject) if more else "")
