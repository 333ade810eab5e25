-- memories_not_embedded (0059) read the whole outbox, or every memory the
-- caller may see, to count the few of theirs that wait: a member seeing 9 of
-- 10,012 waiting memories and 10,000 embedded ones read 30,028 rows a dense
-- recall (5 ms at 10,000 waiting, about 50 ms at 100,000 after a bulk
-- import). Each queued memory's audience and purposes are now copied beside
-- the outbox, as a vector carries them (0005), so the count reads the
-- workspace's and the caller's own waiting rows, never another member's
-- private ones.
-- And it left out every superseded memory, although one whose chain of
-- successors the caller may not see reads to them as current (0044, 0063)
-- and has kept its vector since 0062: it is counted like any other.

-- A table of its own, not columns of the outbox: a hand-over of audience
-- (member removal) updates the copy under its lock while the job may
-- release the same memory's queue row, which must never wait (the job skips
-- a memory a change holds, services/embedding_job/queries.py HOLD_MEMORIES).
-- A row for each queue row, gone with it.
CREATE TABLE embedding_job_audience (
    memory_id    uuid PRIMARY KEY REFERENCES embedding_job (memory_id) ON DELETE CASCADE,
    audience_key uuid NOT NULL,
    purposes     purpose[] NOT NULL
);
CREATE INDEX embedding_job_audience_idx ON embedding_job_audience (audience_key);

INSERT INTO embedding_job_audience (memory_id, audience_key, purposes)
SELECT j.memory_id, m.audience_key, m.purposes
FROM embedding_job j JOIN memory m ON m.id = j.memory_id;

-- Every row queued, by any path (the memory's own trigger, rebuild, import,
-- a migration), takes its memory's copy. A row queued by a memory's trigger
-- is of a memory its transaction wrote and holds; any other holds the memory
-- against a change of audience until it commits, so that the change (below)
-- finds the copy to follow.
CREATE FUNCTION embedding_job_copy_audience() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    m memory%ROWTYPE;
BEGIN
    IF pg_trigger_depth() > 1 THEN
        SELECT * INTO m FROM memory WHERE id = NEW.memory_id;
    ELSE
        SELECT * INTO m FROM memory WHERE id = NEW.memory_id FOR SHARE;
    END IF;
    IF FOUND THEN
        INSERT INTO embedding_job_audience (memory_id, audience_key, purposes)
        VALUES (NEW.memory_id, m.audience_key, m.purposes);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER embedding_job_copy_audience AFTER INSERT ON embedding_job
    FOR EACH ROW EXECUTE FUNCTION embedding_job_copy_audience();

-- A memory handed to another member (a member removed) or given other
-- purposes: its copy follows.
CREATE FUNCTION embedding_job_follow_audience() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    UPDATE embedding_job_audience SET audience_key = NEW.audience_key, purposes = NEW.purposes
    WHERE memory_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER embedding_job_follow_audience AFTER UPDATE OF audience_member_id, purposes ON memory
    FOR EACH ROW
    WHEN (NEW.audience_member_id IS DISTINCT FROM OLD.audience_member_id
          OR NEW.purposes IS DISTINCT FROM OLD.purposes)
    EXECUTE FUNCTION embedding_job_follow_audience();

-- Redefined from 0059 (its only definition). The copies of the workspace's
-- and the caller's audience for the caller's purpose, through the index
-- alone (a scan of all, a queue's whose statistics lag its size, is never
-- planned); the rule itself read from the memory, by key:
-- eligible, and current to the caller (no successor, or none along its chain
-- they may see: the lexical arm's and the walk's rule, 0066's steps).
CREATE OR REPLACE FUNCTION memories_not_embedded(cap integer) RETURNS integer
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = public
    SET enable_seqscan = off
    AS $$
SELECT count(*)::integer FROM (
    SELECT 1
    FROM (SELECT q.memory_id FROM embedding_job_audience q
          WHERE q.audience_key = stat_audience(NULL) AND q.purposes @> ARRAY[caller_purpose()]
          UNION ALL
          SELECT q.memory_id FROM embedding_job_audience q
          WHERE q.audience_key = caller_member() AND q.purposes @> ARRAY[caller_purpose()]) j
    JOIN memory m ON m.id = j.memory_id
    WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
      AND (m.superseded_by_id IS NULL
           OR coalesce((
                SELECT NOT is_eligible(s.invalidated_at, s.audience_member_id, s.purposes)
                       AND (s.superseded_by_id IS NULL OR NOT successor_seen(s.superseded_by_id))
                FROM memory s WHERE s.id = m.superseded_by_id), true))
    LIMIT cap
) waiting
$$;
