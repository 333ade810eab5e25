"""Named SQL of a member's leaving, on the workspace's database
(services/store/domain/member_removal.py). Run on the owner pool: the rows
changed are the member's, whoever may see them."""

# -- removals take turns --------------------------------------------------------
# One removal at a time in a workspace (its database; held to the commit),
# taken before any other lock, so that one waiting for its turn holds nothing
# (no member's lock) a removal under way or a write may wait for. Two at once
# each held their own memories' successors, batch by batch, and then changed
# their memories: along a chain whose memories were the two members' in turn,
# each held a successor the other was changing, and the database failed one.
# No order of rows across the two removals can be agreed (neither knows the
# other's memories, and forget's triggers lock more along the chain), and
# removals are rare: turns are the simple fix. 7417 names the lock's use.
REMOVAL_TURN = "SELECT pg_advisory_xact_lock(7417, 0)"

# -- the write lock of a member (0067_baseline/04_memory.sql) ----------------
# Every memory or episode inserted for or by one member holds that member's
# lock shared and then reads removed_member (the trigger refuse_removed_member);
# the removal holds it alone while it marks the member removed and erases or
# hands over their memories, so such a write commits wholly before that or is
# refused after it. 7404 names the lock's use (the control plane's
# removal turn is 7403), as in the migration.
HOLD_MEMBER_ALONE = "SELECT pg_advisory_xact_lock(7404, hashtext(%(member)s::text))"
# A hand-over's receiver: their lock shared, as a write for them holds it, so
# their own removal (which holds it alone) comes wholly before the hand-over,
# and is seen, or wholly after it, and takes what was handed over too.
HOLD_RECEIVER = "SELECT pg_advisory_xact_lock_shared(7404, hashtext(%(to)s::text))"
RECEIVER_REMOVED = "SELECT 1 FROM removed_member WHERE member_id = %(to)s"
MARK_REMOVED = """
INSERT INTO removed_member (member_id) VALUES (%(member)s) ON CONFLICT (member_id) DO NOTHING
"""

# -- a batch at a time ----------------------------------------------------------
# A statement that changes memories runs their triggers row by row (forget's
# cost a few milliseconds a memory), and the store's statement timeout bounds
# each statement: over every private memory of a member with thousands it
# was cancelled, and so was every retry. So the ids are read first (the
# member's lock is held: no row of theirs is added meanwhile) and each
# statement below changes one batch of them, named in %(ids)s.
#
# Changes along a chain of successors take its rows later memory first
# (hold_successor, workspace migration 0070): a forget of a memory holds it,
# then the memories it replaced. A batch changing memories holds their
# successors first (SUCCESSORS, HOLD_LIVE), and the memories come later
# first (the fewest hops to the end of their chain first), so a batch never
# holds a memory while it waits for its successor: the erase's relinking of
# what a memory replaced, and a memory's second change in the transaction
# (Postgres checks its successor's key then), wait for that successor, which
# a forget of it holds while it waits for the memory.


def _later_first(rows: str) -> str:
    """The ids of the memories ``rows`` selects, the later along a chain first."""
    return f"""
WITH RECURSIVE walk(id, step, hops) AS (
    SELECT id, superseded_by_id, 0 FROM memory WHERE {rows}
  UNION ALL
    SELECT w.id, m.superseded_by_id, w.hops + 1 FROM walk w JOIN memory m ON m.id = w.step
    WHERE w.hops < 100000
)
SELECT id FROM walk GROUP BY id ORDER BY max(hops), id
"""


PRIVATE_LIVE = _later_first("audience_member_id = %(member)s AND invalidated_at IS NULL")
PRIVATE_ALL = _later_first("audience_member_id = %(member)s")
PROVENANCE_OF = _later_first("provenance_audience = %(member)s")
# A batch's successors, in the batch's order.
SUCCESSORS = """
SELECT m.superseded_by_id FROM unnest(%(ids)s::uuid[]) WITH ORDINALITY AS b(id, n)
JOIN memory m ON m.id = b.id
WHERE m.superseded_by_id IS NOT NULL
ORDER BY b.n
"""
# Held in that order; one forgotten while waiting for it is passed over
# (its forget has linked what it replaced past it: SUCCESSORS again).
HOLD_LIVE = """
SELECT m.id FROM unnest(%(held)s::uuid[]) WITH ORDINALITY AS h(id, n)
JOIN memory m ON m.id = h.id
WHERE m.invalidated_at IS NULL
ORDER BY h.n
FOR SHARE OF m
"""
VECTORS_OF = """
SELECT DISTINCT memory_id FROM memory_embedding WHERE audience_member_id = %(member)s
"""

# -- erase: as forget does, for every memory only they could see -------------
# The triggers of forget follow (0067_baseline/04_memory.sql and the parts
# after it): the embedding, the search statistics, the graph claims, aliases
# and mentions (and entities nothing names any more) go, and what derives from
# it is marked.
ERASE_PRIVATE = """
UPDATE memory
SET title = '', body = '', invalidated_at = now(), invalidation_reason = %(reason)s,
    invalidated_by = %(by)s, updated_at = now()
WHERE id = ANY (%(ids)s::uuid[]) AND audience_member_id = %(member)s AND invalidated_at IS NULL
RETURNING id, revision
"""
INSERT_ERASED_REVISIONS = """
INSERT INTO memory_revision (memory_id, revision, action, changed_by, reason)
SELECT id, revision, 'forget', %(by)s, %(reason)s
FROM unnest(%(ids)s::uuid[], %(revisions)s::bigint[]) AS e(id, revision)
"""
# Their private episodes keep their span, not their title.
ERASE_PRIVATE_EPISODES = """
UPDATE episode SET title = '' WHERE audience_member_id = %(member)s AND title <> ''
"""

# Their imported conversation history (0067_baseline/05_history.sql):
# owner-only, so no one else could read it. The statistics trigger takes its
# lexemes with it.
ERASE_HISTORY = "DELETE FROM history_entry WHERE owner_member_id = %(member)s"

# -- transfer: every memory only they could see, to another member ------------
# The audience is fixed for a memory's life everywhere else, so each copy of
# it follows here: the memory, its vectors' copies, its provenance's, the
# search statistics kept per audience, and their episodes. Not updated_at:
# the hand-over changes who reads a memory, not what it says, so it renews
# nothing past the expiry gate and records no revision.
TRANSFER_PRIVATE = """
UPDATE memory SET audience_member_id = %(to)s
WHERE id = ANY (%(ids)s::uuid[]) AND audience_member_id = %(member)s
RETURNING invalidated_at IS NULL
"""
TRANSFER_PROVENANCE = """
UPDATE memory SET provenance_audience = %(to)s
WHERE id = ANY (%(ids)s::uuid[]) AND provenance_audience = %(member)s
"""
# The copy is taken from the memory again by memory_embedding_copy_trust.
TRANSFER_VECTORS = """
UPDATE memory_embedding SET audience_member_id = %(to)s
WHERE memory_id = ANY (%(ids)s::uuid[]) AND audience_member_id = %(member)s
"""
TRANSFER_TERM_STATS = """
WITH moved AS (DELETE FROM term_stat WHERE audience = %(member)s RETURNING *)
INSERT INTO term_stat AS t (lexeme, purpose, audience, shard, docs)
SELECT lexeme, purpose, %(to)s, shard, sum(docs) FROM moved
GROUP BY lexeme, purpose, shard ORDER BY lexeme, purpose, shard
ON CONFLICT (lexeme, purpose, audience, shard) DO UPDATE SET docs = t.docs + EXCLUDED.docs
"""
TRANSFER_CORPUS_STATS = """
WITH moved AS (DELETE FROM corpus_stat WHERE audience = %(member)s RETURNING *)
INSERT INTO corpus_stat AS c (purpose, audience, shard, docs)
SELECT purpose, %(to)s, shard, sum(docs) FROM moved
GROUP BY purpose, shard ORDER BY purpose, shard
ON CONFLICT (purpose, audience, shard) DO UPDATE SET docs = c.docs + EXCLUDED.docs
"""
TRANSFER_EPISODES = """
UPDATE episode SET audience_member_id = %(to)s WHERE audience_member_id = %(member)s
"""
# History rows are never edited (0067_baseline/05_history.sql), so each is
# taken out and put back as it was said, under its new owner, in one statement;
# the statistics triggers move its counts from one owner's to the other's.
TRANSFER_HISTORY = """
WITH moved AS (
    DELETE FROM history_entry WHERE owner_member_id = %(member)s
    RETURNING id, chat_id, role, text, occurred_at
)
INSERT INTO history_entry (id, owner_member_id, chat_id, role, text, occurred_at)
SELECT id, %(to)s, chat_id, role, text, occurred_at FROM moved
"""

# What they wrote that others may see: kept as it is, attributed to them.
KEPT = """
SELECT count(*) FROM memory
WHERE created_by = %(member)s AND invalidated_at IS NULL
  AND audience_member_id IS DISTINCT FROM %(member)s
"""
INSERT_AUDIT = """
INSERT INTO audit_log (member_id, action, detail) VALUES (%s, 'remove_member', %s)
"""
