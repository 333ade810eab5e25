"""The timeline as one plain statement, for the tests to hold paged answers
against: every event of an entity (its group), an episode or the whole
workspace the caller may see, under row security, sorted by (time, kind,
key) in one ORDER BY. It is the statement that served every page of each
timeline before each was walked on its indexes (migrations 0031, 0033), and
reads all of its subject's events each time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from services.store.domain import timeline as tl

Row = tuple[datetime, str, str, str | None, str, str]

# Each arm narrows to the subject, %(entities)s (an entity's group, answering
# as %(entity)s) or %(episode)s (both NULL: every event of the workspace).
EVENTS = """
WITH subject AS (
    -- An entity's memory event is from the memory's first mention of it (a
    -- correction may name it later, migration 0046).
    SELECT m.id,
           CASE WHEN %(entities)s::uuid[] IS NULL THEN m.created_at
                ELSE (SELECT min(coalesce(mn.mentioned_at, m.created_at)) FROM mention mn
                      WHERE mn.memory_id = m.id AND mn.entity_id = ANY(%(entities)s::uuid[]))
           END AS since
    FROM memory m
    WHERE (%(entities)s::uuid[] IS NULL
           OR EXISTS (SELECT 1 FROM mention mn
                      WHERE mn.memory_id = m.id AND mn.entity_id = ANY(%(entities)s::uuid[])))
      AND (%(episode)s::uuid IS NULL OR m.episode_id = %(episode)s::uuid)
), events AS (
    SELECT s.since AS at, 'memory' AS kind, m.id AS memory_id, NULL::uuid AS entity_id,
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
      AND (%(entities)s::uuid[] IS NULL OR rv.changed_at >= s.since)
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


def row(at: datetime, kind: str, memory: Any, entity: Any, summary: str, key: str) -> Row:
    return (at, kind, str(memory), str(entity) if entity else None, summary, key)


def every_event(
    conn: psycopg.Connection,
    entities: list[str] | None = None,
    head: str | None = None,
    episode: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> list[Row]:
    """Every event of the subject the caller of ``conn`` may see, in order; a
    claim about a member of an entity's group is the head's event, as the
    timeline answers it."""
    params = {
        "entity": head,
        "entities": entities,
        "episode": episode,
        "from": start,
        "to": end,
        **dict.fromkeys(("after_at", "after_kind", "after_key")),
        "kinds": list(tl.KINDS),
        "limit": 10_000_000,
    }
    rows = [row(*r) for r in conn.execute(EVENTS, params).fetchall()]
    members = set(entities or ())
    return [(*r[:3], head if r[3] in members else r[3], *r[4:]) for r in rows]
