"""Named SQL of an owner's view (services/store/domain/owner_view.py): the
memories a caller may see, listed, and the workspace's audit log. Both run in
a caller transaction, so row-level security leaves out what the caller may
not see; both are paged by a keyset (newest first)."""

from services.store.sql.memory_queries import MEMORY_COLUMNS


def _list_memories(author: str) -> str:
    """The listing, narrowed by ``author`` (a condition on m, or TRUE).

    An episode filter matches only an episode the caller may see (the policy
    on episode), so a hidden episode's id lists nothing."""
    return f"""
SELECT {MEMORY_COLUMNS} FROM memory m
WHERE {author}
  AND (%(kinds)s::memory_kind[] IS NULL OR m.kind = ANY (%(kinds)s::memory_kind[]))
  AND (%(episode)s::uuid IS NULL
       OR (m.episode_id = %(episode)s::uuid
           AND EXISTS (SELECT 1 FROM episode ep WHERE ep.id = %(episode)s::uuid)))
  AND (%(from)s::timestamptz IS NULL OR m.created_at >= %(from)s::timestamptz)
  AND (%(to)s::timestamptz IS NULL OR m.created_at < %(to)s::timestamptz)
  AND (%(include_superseded)s OR m.superseded_by_id IS NULL)
  AND (%(after_at)s::timestamptz IS NULL
       OR (m.created_at, m.id) < (%(after_at)s::timestamptz, %(after_id)s::uuid))
ORDER BY m.created_at DESC, m.id DESC
LIMIT %(limit)s
"""


# Every author's memories.
LIST_MEMORIES = _list_memories("TRUE")
# One author's, read from memory_author_idx (migration 0032) in the listing's
# order. The author is a plain equality so that the generic plan, which the
# store's prepared statement comes to, can use that index: behind
# "%(created_by)s IS NULL OR ..." it cannot, and walked the created_at index
# over the whole workspace for that author's rows.
LIST_MEMORIES_BY_AUTHOR = _list_memories("m.created_by = %(created_by)s::uuid")
# Some kinds' (at most four), every author's: each kind's page walked by
# memories_of_kind (migration 0040) from the page token's position, then merged.
# Behind "= ANY" the planner walked the created_at index over the whole
# workspace for the rows of those kinds.
LIST_MEMORIES_OF_KINDS = f"""
SELECT {MEMORY_COLUMNS}
FROM unnest(%(kinds)s::memory_kind[]) AS k(kind)
CROSS JOIN LATERAL memories_of_kind(
    k.kind, %(episode)s::uuid, %(from)s::timestamptz, %(to)s::timestamptz,
    %(include_superseded)s, %(after_at)s::timestamptz, %(after_id)s::uuid, %(limit)s
) AS f(id)
JOIN memory m ON m.id = f.id
ORDER BY m.created_at DESC, m.id DESC
LIMIT %(limit)s
"""


# The log's keyset, newest first, in two spellings. The primary key walks the
# whole log by id. A filtered listing walks a member's or an action's events
# in an index on (..., -id) (migration 0042), ordered and bounded by -id: no
# other index gives that order, so with sorting off (owner_view.AUDIT_ORDER)
# the planner cannot fall back on walking the primary key from the newest
# event and filtering, which it chose for a member's few old events under the
# generic plan (it guesses from the count of members alone how many match).
# The page token's id is an index condition either way: a page starts where
# the last ended.
BY_ID = ("a.id DESC", "a.id < coalesce(%(after_id)s::bigint, 9223372036854775807)")
BY_NEGATED_ID = ("-a.id", "-a.id > -coalesce(%(after_id)s::bigint, 9223372036854775807)")


def _audit_events(member: str, keyset: tuple[str, str] = BY_ID) -> str:
    """The log newest first, narrowed by ``member`` (a condition on a, or TRUE)."""
    order, after = keyset
    return f"""
SELECT a.id, a.at, a.member_id::text, a.action, a.memory_id::text, a.detail
FROM audit_log a
WHERE {member}
  AND (%(from)s::timestamptz IS NULL OR a.at >= %(from)s::timestamptz)
  AND (%(to)s::timestamptz IS NULL OR a.at < %(to)s::timestamptz)
  AND {after}
ORDER BY {order}
LIMIT %(limit)s
"""


def _audit_events_of_actions(member: str) -> str:
    """Some actions' events (at most MAX_AUDIT_ACTIONS), narrowed by
    ``member``: each action's page walked in its own index from the page
    token's position (behind "= ANY" no index gives the log's order), then
    merged."""
    page = _audit_events(f"{member} AND a.action = k.action", BY_NEGATED_ID)
    return f"""
SELECT e.* FROM unnest(%(actions)s::text[]) AS k(action)
CROSS JOIN LATERAL ({page}) AS e
ORDER BY e.id DESC
LIMIT %(limit)s
"""


# The whole log, by its primary key.
AUDIT_EVENTS = _audit_events("TRUE")
# One member's, from audit_log_member_idx. The member is a plain equality so
# that the generic plan, which the store's prepared statement comes to, can
# use that index: behind "%(member)s IS NULL OR ..." it cannot.
AUDIT_EVENTS_BY_MEMBER = _audit_events("a.member_id = %(member)s::uuid", BY_NEGATED_ID)
# Some actions', every member's, from audit_log_action_idx.
AUDIT_EVENTS_OF_ACTIONS = _audit_events_of_actions("TRUE")
# Some actions' of one member, from audit_log_member_action_idx.
AUDIT_EVENTS_BY_MEMBER_OF_ACTIONS = _audit_events_of_actions("a.member_id = %(member)s::uuid")

# A change the control plane made to the workspace (a member, a token, its
# settings), written by the owner role after that change committed
# (services/store/domain/administration.py).
INSERT_ADMIN_EVENT = """
INSERT INTO audit_log (member_id, action, detail) VALUES (%s, %s, %s)
"""
