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

AUDIT_EVENTS = """
SELECT a.id, a.at, a.member_id::text, a.action, a.memory_id::text, a.detail
FROM audit_log a
WHERE (%(member)s::uuid IS NULL OR a.member_id = %(member)s::uuid)
  AND (%(actions)s::text[] IS NULL OR a.action = ANY (%(actions)s::text[]))
  AND (%(from)s::timestamptz IS NULL OR a.at >= %(from)s::timestamptz)
  AND (%(to)s::timestamptz IS NULL OR a.at < %(to)s::timestamptz)
  AND (%(after_id)s::bigint IS NULL OR a.id < %(after_id)s::bigint)
ORDER BY a.id DESC
LIMIT %(limit)s
"""

# A change the control plane made to the workspace (a member, a token, its
# settings), written by the owner role after that change committed
# (services/store/domain/administration.py).
INSERT_ADMIN_EVENT = """
INSERT INTO audit_log (member_id, action, detail) VALUES (%s, %s, %s)
"""
