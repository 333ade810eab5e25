-- A supersede moved its memory's revision on by one, for every reader: also
-- for one who may not see the successor, to whom the memory reads as current
-- (visible_successor, memory_reads_current) and whose answers may not tell
-- that a successor exists. Their read, recall and list showed the number
-- move, their history (which shows no hidden supersede, migration 0072) a
-- revision no change of theirs made, and their correct named a revision
-- that was not the one they read. A revision now counts versions of the
-- text (create, each correct); a supersede leaves it as it was and records
-- the revision it superseded, as a forget records the one it forgot
-- (memory_queries.SUPERSEDE, MemoryRevisions.supersede).
--
-- The rows written before are restated so: each history row's revision is
-- its memory's first (create) revision and one more for each correct up to
-- it, the memory's that and one for each correct. Every correct moved the
-- revision by exactly one (compare-and-set), so this is what the rows would
-- have been. Only memories with a supersede, whose history starts with its
-- create (every write records it); run again it changes nothing, so an
-- archive's import (written by a release before this one, or after) calls
-- it too (archive_queries.RESTATE_SUPERSEDE_REVISIONS). The timelines' keys
-- read the revision (memory:revision:action); mention_change keeps a copy.
CREATE FUNCTION restate_supersede_revisions() RETURNS void
    LANGUAGE sql SECURITY DEFINER SET search_path = public AS $$
    WITH chained AS (
        SELECT DISTINCT memory_id FROM memory_revision WHERE action = 'supersede'
    ), counted AS (
        SELECT r.id, r.memory_id, r.revision, r.action,
               first_value(r.revision) OVER w
                   + count(*) FILTER (WHERE r.action = 'correct') OVER w AS restated,
               first_value(r.action) OVER w AS first_action
        FROM memory_revision r JOIN chained c ON c.memory_id = r.memory_id
        WINDOW w AS (PARTITION BY r.memory_id ORDER BY r.id
                     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
    ), kept AS (
        SELECT * FROM counted WHERE first_action = 'create'
    ), rows_restated AS (
        UPDATE memory_revision r SET revision = k.restated
        FROM kept k
        WHERE r.id = k.id AND r.revision <> k.restated
        RETURNING r.id, r.memory_id, r.revision, r.action
    ), keys AS (
        UPDATE mention_change mc
        SET key = x.memory_id::text || ':' || x.revision::text || ':' || x.action
        FROM rows_restated x
        WHERE mc.revision_id = x.id
    )
    UPDATE memory m SET revision = last.restated
    FROM (SELECT DISTINCT ON (memory_id) memory_id, restated
          FROM kept ORDER BY memory_id, id DESC) last
    WHERE m.id = last.memory_id AND m.revision <> last.restated;
$$;
-- The migration and an archive's import call it as the database's owner; no
-- caller may.
REVOKE ALL ON FUNCTION restate_supersede_revisions() FROM PUBLIC;
SELECT restate_supersede_revisions();
