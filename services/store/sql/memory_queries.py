"""Named SQL of the memory tools. Each runs inside a caller transaction, where
row-level security restricts `memory` (and, through it, links, mentions and
embeddings) to what the caller may see."""

# The successor's id only when the caller may see it (row-level security
# filters the subquery): an id one may not see is never shown (design §4). Past
# one hidden from them, the nearest along the chain they may see
# (0067_baseline/12_chains.sql): a later one they see supersedes it for them
# too. The revision as the caller numbers it: the supersedes hidden from them
# left out (reader_revision, workspace migration 0076).
MEMORY_COLUMNS = """
m.id, m.kind::text, m.title, m.body, m.confidence, m.origin::text,
reader_revision(m.id, m.revision),
coalesce((SELECT s.id FROM memory s WHERE s.id = m.superseded_by_id),
         visible_successor(m.superseded_by_id)), m.audience_member_id,
m.purposes::text[], m.created_by, m.created_at, m.updated_at,
(SELECT ep.id FROM episode ep WHERE ep.id = m.episode_id)
"""

INSERT_MEMORY = """
INSERT INTO memory (id, kind, title, body, confidence, origin, audience_member_id, purposes,
                    created_by, episode_id)
VALUES (%s, %s::memory_kind, %s, %s, %s, %s::memory_origin, %s, %s::purpose[], %s, %s)
"""
# All of a memory's links in one statement: the trigger that folds them into
# its provenance (0067_baseline/07_permission_walk.sql) then runs once.
INSERT_LINKS = """
INSERT INTO memory_link (memory_id, kind, target_id)
SELECT %s, k, t FROM unnest(%s::link_kind[], %s::uuid[]) AS l(k, t)
"""
INSERT_AUDIT = """
INSERT INTO audit_log (member_id, action, memory_id, request_id, detail) VALUES (%s, %s, %s, %s, %s)
"""
# What the first attempt made: a memory, or an episode
# (0067_baseline/02_memory_tables.sql).
REQUEST_KEY = """
SELECT tool, coalesce(memory_id, episode_id), fingerprint FROM request_key
WHERE member_id = %s AND request_id = %s
"""
INSERT_REQUEST_KEY = """
INSERT INTO request_key (member_id, request_id, tool, memory_id, fingerprint)
VALUES (%s, %s, %s, %s, %s)
"""
VISIBLE_IDS = "SELECT id FROM memory WHERE id = ANY(%s::uuid[])"
TRUST_OF = """
SELECT id, audience_member_id, purposes::text[] FROM memory WHERE id = ANY(%s::uuid[])
"""
# Superseded for the caller: a memory along its chain of successors is one
# they may see (memory_reads_current, workspace migration 0068). One whose
# successors are all hidden from them reads, and changes, as current.
SUPERSEDED_FOR_CALLER = "superseded_by_id IS NOT NULL AND NOT memory_reads_current(id)"
# A derived memory's sources, which its successor keeps (MemoryRevisions.supersede).
SOURCES_OF = """
SELECT target_id FROM memory_link
WHERE memory_id = %s AND kind = 'derived_from' ORDER BY target_id
"""
# Whether one of supersede's sources is an older version of the memory it
# supersedes: that memory is along the source's chain of successors as the
# caller reads it (past hidden ones, visible_successor,
# 0067_baseline/12_chains.sql); bounded as that walk is.
REPLACED_AMONG = """
WITH RECURSIVE later(id, hops) AS (
    SELECT visible_successor(m.superseded_by_id), 1
    FROM memory m
    WHERE m.id = ANY(%(sources)s::uuid[]) AND m.superseded_by_id IS NOT NULL
  UNION ALL
    SELECT visible_successor(m.superseded_by_id), l.hops + 1
    FROM later l JOIN memory m ON m.id = l.id
    WHERE m.superseded_by_id IS NOT NULL AND l.id <> %(memory)s::uuid AND l.hops < 100000
)
SELECT 1 FROM later WHERE id = %(memory)s::uuid LIMIT 1
"""
# Who may change it: its author, its audience (NULL: the workspace) and its
# revision, for the rule in MemoryStore._may_change; whether it is superseded
# for the caller, and its successor (one hidden from the caller when it is
# not), which a supersede links its new memory to (MemoryRevisions.supersede);
# its revision as the caller numbers it, which a change is given, and as
# stored, which the change writes on.
CHANGE_SUBJECT = f"""
SELECT created_by, audience_member_id, reader_revision(id, revision),
       {SUPERSEDED_FOR_CALLER}, superseded_by_id, revision
FROM memory WHERE id = %s
"""
# The row made the caller's own until the change commits, before CHANGE_SUBJECT
# reads it in a statement of its own: one that waited here for a change of
# another caller then sees all that change wrote (its revision's row too,
# which a statement begun before that commit would not).
LOCK_MEMORY = "SELECT 1 FROM memory WHERE id = %s FOR UPDATE"
# A memory's successor held (FOR SHARE) before the memory itself is locked:
# changes along a chain lock the later memory first (hold_successor,
# workspace migration 0070).
HOLD_SUCCESSOR = "SELECT hold_successor(%s)"
# A supersede names the memory it made (successor_id, workspace migration
# 0072): its revision shows only to whoever sees the memory superseded.
INSERT_REVISION = """
INSERT INTO memory_revision (memory_id, revision, action, changed_by, reason, successor_id)
VALUES (%s, %s, %s, %s, %s, %s)
"""
# The provenance lists below keep at most %(cap)s items per memory and give
# each row its list's whole length (total), so the answer can say how many it
# left out (vocabulary.MAX_PROVENANCE_ITEMS).
# A memory's newest revisions, oldest first; a supersede only when the caller
# sees the memory superseded through it (supersession_seen, migration 0072),
# each numbered as the caller numbers the memory's revisions.
REVISIONS_OF = """
SELECT memory_id, reader_revision(memory_id, revision), action, changed_by, reason, changed_at,
       total FROM (
    SELECT r.*, row_number() OVER (PARTITION BY memory_id ORDER BY id DESC) AS nth,
           count(*) OVER (PARTITION BY memory_id) AS total
    FROM memory_revision r WHERE memory_id = ANY(%(ids)s::uuid[])
      AND (r.action <> 'supersede' OR supersession_seen(r.successor_id))
) r WHERE nth <= %(cap)s
ORDER BY memory_id, id
"""

# The change of a memory the caller holds locked (LOCK_MEMORY), its revision
# as the caller numbers it checked against the one they read
# (MemoryRevisions._check): the stored revision read under the lock, which
# always matches. A memory the caller reads as current changes, whatever
# successors hidden from them it has: refused, it would reveal one.
# Correct's answers that successor (hidden from the caller, so) as it stands
# under the row's lock: a forget of it may have committed since the memory
# was first read.
CORRECT = f"""
UPDATE memory SET title = coalesce(%s, title), body = coalesce(%s, body),
                  confidence = coalesce(%s, confidence),
                  revision = revision + 1, updated_at = now()
WHERE id = %s AND revision = %s AND NOT ({SUPERSEDED_FOR_CALLER})
RETURNING superseded_by_id
"""
# It renews nothing (updated_at stays): whoever may not see the successor
# reads the memory as current, and a renewal would bring it back inside the
# expiry gate for them and date it to a change they may not see.
SUPERSEDE = f"""
UPDATE memory SET superseded_by_id = %s, revision = revision + 1
WHERE id = %s AND revision = %s AND NOT ({SUPERSEDED_FOR_CALLER})
"""
# A supersede of a memory whose successor is hidden from the caller puts its
# new memory where the caller's view of the chain ends: the old memory, the
# new one, then that hidden successor (MemoryRevisions.supersede).
CHAIN_BEFORE = "UPDATE memory SET superseded_by_id = %s WHERE id = %s"
# Through the tombstone function (forget_memory, 0067_baseline/04_memory.sql):
# NULL when not visible.
FORGET = "SELECT forget_memory(%s, %s)"
TOMBSTONE_TIME = "SELECT invalidated_at FROM memory WHERE id = %s"
# Its tombstone when it was forgotten since (or erased with a removed member).
OWN_MEMORY = f"""
SELECT {MEMORY_COLUMNS} FROM memory m WHERE m.id = %s AND m.created_by = %s
"""

MEMORIES_BY_ID = f"SELECT {MEMORY_COLUMNS} FROM memory m WHERE m.id = ANY(%s::uuid[])"

# Targets the caller may not see come back with a NULL title.
LINKS_OF = """
SELECT l.memory_id, l.kind::text, l.target_id, t.title, t.kind::text
FROM memory_link l LEFT JOIN memory t ON t.id = l.target_id
WHERE l.memory_id = ANY(%s::uuid[])
ORDER BY l.memory_id, l.kind, t.created_at NULLS LAST
"""
MENTIONS_OF = """
SELECT memory_id, entity_id, name, total FROM (
    SELECT mn.memory_id, e.id AS entity_id, e.name,
           row_number() OVER (PARTITION BY mn.memory_id ORDER BY e.name, e.id) AS nth,
           count(*) OVER (PARTITION BY mn.memory_id) AS total
    FROM mention mn JOIN entity e ON e.id = mn.entity_id
    WHERE mn.memory_id = ANY(%(ids)s::uuid[])
) m WHERE nth <= %(cap)s
ORDER BY memory_id, nth
"""
# Both directions of the supersession chain, nearest first. Each steps over the
# memories the caller may not see to the next they may (visible_successor,
# visible_predecessors: 0067_baseline/12_chains.sql); one hidden from them all
# the way on ends the chain unseen, as it reads current to them (no anonymous
# entry, which would reveal that it exists). Each direction is followed %(cap)s
# steps and one more: a step past the cap says the answer's list was cut
# (MemoryReads._provenance drops and counts it); the rest of a longer chain is
# not walked.
SUPERSESSION_CHAINS = """
WITH RECURSIVE newer(root, depth, id, title, kind, next_id) AS (
    SELECT m.id, 0, m.id, m.title, m.kind::text, m.superseded_by_id
    FROM memory m WHERE m.id = ANY(%(ids)s::uuid[])
  UNION ALL
    SELECT n.root, n.depth + 1, x.id, x.title, x.kind::text, x.superseded_by_id
    FROM newer n JOIN memory x ON x.id = visible_successor(n.next_id)
    WHERE n.depth <= %(cap)s
), older(root, depth, id, title, kind) AS (
    SELECT m.id, 0, m.id, m.title, m.kind::text FROM memory m WHERE m.id = ANY(%(ids)s::uuid[])
  UNION ALL
    SELECT o.root, o.depth + 1, x.id, x.title, x.kind::text
    FROM older o CROSS JOIN LATERAL visible_predecessors(o.id) AS p(id)
    JOIN memory x ON x.id = p.id
    WHERE o.depth <= %(cap)s
)
SELECT root, 'newer' AS direction, depth, id, title, kind FROM newer WHERE depth > 0
UNION ALL
SELECT root, 'older', depth, id, title, kind FROM older WHERE depth > 0
ORDER BY 1, 2, 3
"""

# The permission walk (design §5.5): a candidate is admitted when it is
# visible, not superseded (unless asked for; a memory superseded after the arms
# ran is refused here, in the snapshot the answer is read from; only a
# successor the caller may see, which the policy filters, supersedes it for
# them, as read shows, or one along its chain: 0067_baseline/12_chains.sql),
# and every memory reachable along its links is visible to the caller and not
# forgotten. That last part is kept on each memory
# (0067_baseline/07_permission_walk.sql: the intersections of its provenance's
# audiences and purposes, and whether any of it is forgotten), so the walk
# reads one row per candidate, whatever the depth or width of its provenance.
# The LATERAL fence keeps it to one primary key lookup per candidate (left
# alone, the planner cannot estimate row security and may hash every visible
# memory).
ADMIT = """
SELECT c.id, m.in_episode FROM unnest(%(ids)s::uuid[]) WITH ORDINALITY AS c(id, ord)
CROSS JOIN LATERAL (
    SELECT x.episode_id IS NOT NULL AS in_episode FROM memory x
    WHERE x.id = c.id
      AND (%(include_superseded)s OR x.superseded_by_id IS NULL
           OR NOT successor_seen(x.superseded_by_id))
      AND NOT x.provenance_forgotten
      AND (x.provenance_audience IS NULL OR x.provenance_audience = caller_member())
      AND caller_purpose() = ANY (x.provenance_purposes)
    OFFSET 0
) m
ORDER BY c.ord
"""

# Recall's episode neighbours (0067_baseline/09_graph.sql): for each seed, in
# the order given, the memory just before it and the one just after it in its
# episode among those the caller may see (the policy filters as the index is
# walked: a memory the caller may not see is passed over, never named, so
# nothing here depends on rows hidden from them). The episode itself must be
# one the caller may see (its own policy): shared memories filed in a member's
# private episode (as capture files a speaker's turns) are no neighbours to
# anyone else, as a read shows them in no episode. A memory the walk would
# refuse (superseded for the caller, or reaching one hidden from them or
# forgotten: ADMIT's condition) is passed over too, so the lift does not depend
# on what the caller may not see.
_ADMITTED_NEIGHBOUR = """
       AND (%(include_superseded)s OR m.superseded_by_id IS NULL
            OR NOT successor_seen(m.superseded_by_id))
       AND NOT m.provenance_forgotten
       AND (m.provenance_audience IS NULL OR m.provenance_audience = caller_member())
       AND caller_purpose() = ANY (m.provenance_purposes)"""
EPISODE_NEIGHBOURS = f"""
SELECT s.id::text, n.id::text
FROM unnest(%(seeds)s::uuid[]) WITH ORDINALITY AS q(id, ord)
JOIN memory s ON s.id = q.id AND s.episode_id IS NOT NULL
JOIN episode e ON e.id = s.episode_id
CROSS JOIN LATERAL (
    (SELECT m.id, 1 AS side FROM memory m
     WHERE m.episode_id = s.episode_id AND (m.created_at, m.id) < (s.created_at, s.id)
       {_ADMITTED_NEIGHBOUR}
     ORDER BY m.created_at DESC, m.id DESC LIMIT 1)
    UNION ALL
    (SELECT m.id, 2 AS side FROM memory m
     WHERE m.episode_id = s.episode_id AND (m.created_at, m.id) > (s.created_at, s.id)
       {_ADMITTED_NEIGHBOUR}
     ORDER BY m.created_at, m.id LIMIT 1)
) n
ORDER BY q.ord, n.side
"""
