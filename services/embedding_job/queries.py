"""The embedding job's statements (services/embedding_job/job.py), on a
workspace's database as its owner."""

from services.store.sql.queries import DELETION_LOCK_NAMESPACE

CLAIM = """
UPDATE embedding_job j
SET next_attempt_at = now() + make_interval(secs => %s), attempts = j.attempts + 1
FROM (
    SELECT memory_id FROM embedding_job
    WHERE next_attempt_at <= now()
    ORDER BY enqueued_at
    LIMIT %s
    FOR UPDATE SKIP LOCKED
) due, memory m
WHERE j.memory_id = due.memory_id AND m.id = j.memory_id
RETURNING j.memory_id, j.text_revision
"""
# The claimed memories' text, read by a statement of its own after the claim
# locked their queue rows: in the claim itself a correct committed while it
# ran gave the queue row's new revision beside the memory's old text (a
# statement re-reads the row it locks, not the rows it joined). Read later,
# the text is its revision's or newer; a newer one's vector is then refused
# by COMPLETE, and its own revision stays queued.
TEXTS = "SELECT id, title, body FROM memory WHERE id = ANY(%s::uuid[])"
# Only the worker that removes the queue entry for this exact text stores a
# vector: a memory corrected or forgotten meanwhile is skipped. A whole batch
# in one statement; the vectors then go in one pipelined round trip.
COMPLETE = """
DELETE FROM embedding_job j
USING unnest(%s::uuid[], %s::bigint[]) AS done(memory_id, text_revision)
WHERE j.memory_id = done.memory_id AND j.text_revision = done.text_revision
RETURNING j.memory_id
"""
# The memories of a batch about to be completed, held against a change until
# the vectors commit: a vector's copies of its memory's audience and update
# time (0067_baseline/08_embedding.sql) are read from the memory as committed,
# and a change that is not one of text (a removed member's memories handed
# over, a correct of the confidence) updates only the copies of vectors it can
# see. One that such a change holds now is left for the next claim (SKIP
# LOCKED: never a wait, so never a deadlock with a change that holds several
# memories).
HOLD_MEMORIES = """
SELECT id FROM memory WHERE id = ANY(%s::uuid[]) ORDER BY id FOR SHARE SKIP LOCKED
"""
STORE_VECTOR = """
INSERT INTO memory_embedding (memory_id, model_id, input_version, embedding)
VALUES (%s, %s, %s, %b)
ON CONFLICT (memory_id, model_id, input_version) DO UPDATE SET embedding = EXCLUDED.embedding,
    created_at = now()
"""
# Back to the queue without spending the attempt the claim counted.
RELEASE = """
UPDATE embedding_job SET next_attempt_at = now() + make_interval(secs => %s),
    attempts = greatest(attempts - 1, 0)
WHERE memory_id = ANY(%s)
"""
# One row failed alone: retried after a backoff doubling per attempt, parked
# ('infinity': never due) once it has had its last. Only for the text tried.
ROW_FAILED = """
UPDATE embedding_job SET last_error = %(reason)s,
    next_attempt_at = CASE WHEN attempts >= %(max_attempts)s THEN 'infinity'::timestamptz
        ELSE now() + make_interval(secs => least(
            %(base)s * power(2, greatest(attempts - 1, 0)), %(cap)s)) END
WHERE memory_id = %(memory_id)s AND text_revision = %(revision)s
RETURNING next_attempt_at = 'infinity'::timestamptz
"""
# When the earliest row not parked is due (seconds from now; NULL: none),
# and how many rows are queued and parked.
NEXT_DUE = """
SELECT extract(epoch FROM min(next_attempt_at) FILTER (WHERE next_attempt_at <> 'infinity')
                         - now()),
       count(*) FILTER (WHERE next_attempt_at <> 'infinity'),
       count(*) FILTER (WHERE next_attempt_at = 'infinity')
FROM embedding_job
"""
BACKLOG_COUNT = """
SELECT count(*) FILTER (WHERE next_attempt_at <> 'infinity'),
       count(*) FILTER (WHERE next_attempt_at = 'infinity')
FROM embedding_job
"""
# Memories whose current-stamp vector is missing: queued by rebuild. Every
# memory not forgotten has a vector, superseded ones too
# (0067_baseline/08_embedding.sql).
ENQUEUE_MISSING = """
INSERT INTO embedding_job (memory_id, text_revision)
SELECT m.id, m.revision FROM memory m
WHERE m.invalidated_at IS NULL
  AND (%s OR NOT EXISTS (
        SELECT 1 FROM memory_embedding e
        WHERE e.memory_id = m.id AND e.model_id = %s AND e.input_version = %s))
ON CONFLICT (memory_id) DO UPDATE SET next_attempt_at = now(), attempts = 0, last_error = NULL
"""
DROP_STALE = """
DELETE FROM memory_embedding WHERE model_id <> %s OR input_version <> %s
"""
# Waits for a deletion of the workspace under way to end: the deleting
# session holds queries.DELETION_LOCK (services/store/sql/queries.py, the
# same key) exclusively until its last step, so a share of it is granted
# only then (and released with this transaction).
DELETION_ENDED = (
    f"SELECT pg_advisory_xact_lock_shared({DELETION_LOCK_NAMESPACE}, hashtext(%s::text))"
)
DELETION_WAIT = "SELECT set_config('statement_timeout', %s, true)"
