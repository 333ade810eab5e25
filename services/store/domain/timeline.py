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

# The kinds of event, in the order they sort at one instant (the timeline
# functions of 0067_baseline/10_workspace_timeline.sql and
# 11_subject_timelines.sql number their walks in this order).
KINDS = (
    "memory",
    "claim_start",
    "relation_start",
    "correction",
    "supersession",
    "claim_end",
    "relation_end",
)

# An entity's (its group, design §8.5, answering as its head) and an episode's:
# each kind of event of the subject walked on an index in this order from the
# page's position, under the policies' rules
# (0067_baseline/11_subject_timelines.sql), so a page reads about its own rows,
# not its subject's whole life.
ENTITY_EVENTS = """
SELECT at, kind, memory_id, entity_id, summary, key
FROM entity_timeline(%(entities)s::uuid[], %(entity)s::uuid, %(from)s::timestamptz,
                     %(to)s::timestamptz, %(after_at)s::timestamptz, %(after_kind)s::integer,
                     %(after_key)s::text, %(limit)s::integer)
"""
EPISODE_EVENTS = """
SELECT at, kind, memory_id, entity_id, summary, key
FROM episode_timeline(%(episode)s::uuid, %(from)s::timestamptz, %(to)s::timestamptz,
                      %(after_at)s::timestamptz, %(after_kind)s::integer, %(after_key)s::text,
                      %(limit)s::integer)
"""

# The whole workspace's: each kind of event walked on an index in this order
# from the page's position, under the same visibility rules
# (0067_baseline/10_workspace_timeline.sql), so a page reads about its own
# rows, not the workspace's.
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
    try:
        data = page_tokens.decode(token)
        at = datetime.fromisoformat(data["at"])
        kind, key = int(data["kind"]), str(data["key"])
        same = data["s"] == subject
        # Only what this service writes: a kind of KINDS, a key with no NUL
        # and of characters only (JSON may spell a lone surrogate, which no
        # encoding takes): the database could not take either otherwise
        # (INTERNAL). UnicodeEncodeError is a ValueError.
        key.encode()
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
        v.window(start, end)
        subject = f"entity:{entity}" if entity else f"episode:{episode}" if episode else "all"
        after_at, after_kind, after_key = _after(page_token, subject)
        with self.transaction(caller) as conn:
            group = entity_groups.groups(conn, [entity]).get(entity) if entity else None
            if entity and group is None:
                raise errors.NotFound("entity_id: entity not found")
            if episode:
                episodes.check_visible(conn, episode)
            statement = ENTITY_EVENTS if entity else EPISODE_EVENTS if episode else WORKSPACE_EVENTS
            rows = conn.execute(
                statement,
                {
                    "entity": group.head.id if group else None,
                    "entities": group.ids if group else None,
                    "episode": episode,
                    "from": start,
                    "to": end,
                    "after_at": after_at,
                    "after_kind": after_kind,
                    "after_key": after_key,
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
