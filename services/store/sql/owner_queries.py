"""Named SQL of an owner's view (services/store/domain/owner_view.py): the
memories a caller may see, listed, and the workspace's audit log. Both run in
a caller transaction, so row-level security leaves out what the caller may
not see; both are paged by a keyset (newest first). The handles of a page's
members are read in the control database."""

from services.store.sql.memory_queries import MEMORY_COLUMNS

# The listing's conditions beside its narrowing (see _list_memories).
_LISTED = """
  AND (%(kinds)s::memory_kind[] IS NULL OR m.kind = ANY (%(kinds)s::memory_kind[]))
  AND (%(episode)s::uuid IS NULL
       OR (m.episode_id = %(episode)s::uuid
           AND EXISTS (SELECT 1 FROM episode ep WHERE ep.id = %(episode)s::uuid)))
  AND m.created_at >= %(since)s::timestamptz
  AND m.created_at < %(until)s::timestamptz
  AND m.created_at <= %(at_most)s::timestamptz
  AND (%(include_superseded)s OR m.superseded_by_id IS NULL
       OR visible_successor(m.superseded_by_id) IS NULL)
  AND (%(after_at)s::timestamptz IS NULL
       OR (m.created_at, m.id) < (%(after_at)s::timestamptz, %(after_id)s::uuid))"""


def _list_memories(narrow: str, key: str = "") -> str:
    """The listing, narrowed by ``narrow`` (a condition on m, or TRUE), read
    from the indexes of 0067_baseline/12_chains.sql on (``key``, created_at, id):
    the workspace's memories and the caller's own (that index keyed first by
    its member), each walked in the listing's order for a page's worth, then
    merged. Forgotten memories and other members' private ones are in
    neither: one index of every audience had a page check each of them, one
    by one (20,008 rows read for a page of two of Ada's few memories beneath
    20,000 private to Bob). The narrowing and the audience are plain
    equalities, which the generic plan (the store's prepared statement comes
    to it) can use: behind "IS NULL OR" it walked the created_at index over
    the whole workspace.

    Its span in time, and the page token's instant, are bounds of each walk
    in every plan: given as values, infinite when not given ("IS NULL OR",
    or coalesce, which row security does not trust to run before its own
    conditions, left them filters, and the generic plan walked from the
    newest memory: 15,514 rows read for a page of two before an end in time).

    An episode filter matches only an episode the caller may see (the policy
    on episode), so a hidden episode's id lists nothing. A memory is
    superseded for the caller only when a memory along its chain of
    successors is one they may see, as read and recall take it
    (visible_successor, 0067_baseline/12_chains.sql): one whose successors
    are all hidden is listed as current. A call on the memory's own link,
    walking by primary key only for a superseded one, not a join, which the
    planner could answer by hashing the whole table."""
    order = f"{key}m.created_at DESC, m.id DESC"
    walk = f"""
SELECT m.id, m.kind, m.title, m.body, m.confidence, m.origin, m.revision, m.superseded_by_id,
       m.audience_member_id, m.purposes, m.created_by, m.created_at, m.updated_at,
       m.episode_id
FROM memory m
WHERE {narrow} AND m.invalidated_at IS NULL{_LISTED}"""
    return f"""
SELECT {MEMORY_COLUMNS} FROM (
    ({walk}
       AND m.audience_member_id IS NULL
     ORDER BY {order}
     LIMIT %(limit)s)
    UNION ALL
    ({walk}
       AND m.audience_member_id = caller_member()
     ORDER BY m.audience_member_id, {order}
     LIMIT %(limit)s)
) AS m
ORDER BY m.created_at DESC, m.id DESC
LIMIT %(limit)s
"""


# Every author's memories.
LIST_MEMORIES = _list_memories("TRUE")
# One author's, the author a plain equality (0067_baseline/12_chains.sql's
# indexes).
LIST_MEMORIES_BY_AUTHOR = _list_memories("m.created_by = %(created_by)s::uuid", "m.created_by, ")
# One episode's, every author's, the episode a plain equality (the same part's).
LIST_MEMORIES_OF_EPISODE = _list_memories("m.episode_id = %(episode)s::uuid", "m.episode_id, ")
# Some kinds' (at most four), every author's: each kind's page walked by
# memories_of_kind (0067_baseline/12_chains.sql) from the page token's
# position, then merged.
# Behind "= ANY" the planner walked the created_at index over the whole
# workspace for the rows of those kinds. The walks run once, before any memory
# is read (an InitPlan), the page's memories then read by their ids: joined to
# the walks, the generic plan (guessing ten kinds of fifty rows each, and few
# memories the caller may see) read the caller's memories first and walked
# every kind again for each of them (100,020 rows read for a page of two of
# five memories).
LIST_MEMORIES_OF_KINDS = f"""
SELECT {MEMORY_COLUMNS}
FROM memory m
WHERE m.id = ANY (ARRAY(
    SELECT w.id
    FROM unnest(%(kinds)s::memory_kind[]) AS k(kind)
    CROSS JOIN LATERAL memories_of_kind(
        k.kind, %(episode)s::uuid, %(from)s::timestamptz, %(to)s::timestamptz,
        %(include_superseded)s, %(after_at)s::timestamptz, %(after_id)s::uuid, %(limit)s
    ) AS w(id)
))
ORDER BY m.created_at DESC, m.id DESC
LIMIT %(limit)s
"""


# The log's keyset, newest first, in two spellings. The primary key walks the
# whole log by id. A filtered listing walks a member's or an action's events in
# an index on (..., -id) (0067_baseline/04_memory.sql), ordered and bounded by
# -id: no other index gives that order, so with sorting off
# (owner_view.AUDIT_ORDER) the planner cannot fall back on walking the primary
# key from the newest event and filtering, which it chose for a member's few
# old events under the generic plan (it guesses from the count of members alone
# how many match). The page token's id is an index condition either way: a page
# starts where the last ended.
BY_ID = ("a.id DESC", "a.id < coalesce(%(after_id)s::bigint, 9223372036854775807)")
BY_NEGATED_ID = ("-a.id", "-a.id > -coalesce(%(after_id)s::bigint, 9223372036854775807)")
# A window in time walks a GiST index of (..., id, at)
# (0067_baseline/04_memory.sql) nearest first to the page token's id, that is
# newest first below it; each index spells the id its own way (id, -id,
# id::float8) so that only it gives its statement's order. The index measures
# distance in double precision, exact below 2**53: it is measured from just
# past the log's last id, not from the largest bigint, where neighbouring ids
# are at one distance.
_AFTER = "coalesce(%(after_id)s::bigint, 9223372036854775807)"
_ORIGIN = f"least({_AFTER}, (SELECT max(l.id) + 1 FROM audit_log l))"
BY_DISTANCE = (f"a.id <-> {_ORIGIN}", f"a.id < {_AFTER}")
BY_NEGATED_DISTANCE = (f"(-a.id) <-> (-{_ORIGIN})", f"-a.id > -{_AFTER}")
BY_FLOAT_DISTANCE = (
    f"a.id::float8 <-> {_ORIGIN}::float8",
    f"a.id::float8 < {_AFTER}::float8 AND a.id < {_AFTER}",
)
# The window's bounds are index conditions there, infinite when not given
# ("IS NULL OR" would keep them out of the generic plan's index scan). Its
# end is exclusive: the index takes it inclusive, so that no end keeps an
# event at 'infinity', and the plain test leaves out an event at the end.
ANY_TIME = """
  AND (%(from)s::timestamptz IS NULL OR a.at >= %(from)s::timestamptz)
  AND (%(to)s::timestamptz IS NULL OR a.at < %(to)s::timestamptz)"""
IN_WINDOW = """
  AND a.at >= coalesce(%(from)s::timestamptz, '-infinity')
  AND a.at <= coalesce(%(to)s::timestamptz, 'infinity')
  AND (%(to)s::timestamptz IS NULL OR a.at < %(to)s::timestamptz)"""


def _audit_events(member: str, keyset: tuple[str, str] = BY_ID, window: str = ANY_TIME) -> str:
    """The log newest first, narrowed by ``member`` (a condition on a, or
    TRUE) and the time ``window``."""
    order, after = keyset
    return f"""
SELECT a.id, a.at, a.member_id::text, a.action, a.memory_id::text, a.detail
FROM audit_log a
WHERE {member}{window}
  AND {after}
ORDER BY {order}
LIMIT %(limit)s
"""


def _audit_events_of_actions(
    member: str, keyset: tuple[str, str] = BY_NEGATED_ID, window: str = ANY_TIME
) -> str:
    """Some actions' events (at most MAX_AUDIT_ACTIONS), narrowed by
    ``member``: each action's page walked in its own index from the page
    token's position (behind "= ANY" no index gives the log's order), then
    merged."""
    page = _audit_events(f"{member} AND a.action = k.action", keyset, window)
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
# The same within a window in time, from the GiST indexes: the whole
# log's from audit_log_time_idx, a member's (of some actions or not) from
# audit_log_member_time_idx, some actions' of every member from
# audit_log_action_time_idx.
AUDIT_EVENTS_IN_WINDOW = _audit_events("TRUE", BY_DISTANCE, IN_WINDOW)
AUDIT_EVENTS_BY_MEMBER_IN_WINDOW = _audit_events(
    "a.member_id = %(member)s::uuid", BY_NEGATED_DISTANCE, IN_WINDOW
)
AUDIT_EVENTS_OF_ACTIONS_IN_WINDOW = _audit_events_of_actions("TRUE", BY_FLOAT_DISTANCE, IN_WINDOW)
AUDIT_EVENTS_BY_MEMBER_OF_ACTIONS_IN_WINDOW = _audit_events_of_actions(
    "a.member_id = %(member)s::uuid", BY_NEGATED_DISTANCE, IN_WINDOW
)

# The handles of an audit page's members (removed ones included), read in the
# control database by their ids: the handles of every member of the workspace
# cost each page as many rows as it has had members (2,003 for a page of two).
MEMBER_HANDLES_OF = """
SELECT id::text, handle FROM member WHERE id = ANY (%s::uuid[]) AND workspace_id = %s
"""

# A change the control plane made to the workspace (a member, a token, its
# settings), written by the owner role after that change committed
# (services/store/domain/administration.py).
INSERT_ADMIN_EVENT = """
INSERT INTO audit_log (member_id, action, detail) VALUES (%s, %s, %s)
"""
