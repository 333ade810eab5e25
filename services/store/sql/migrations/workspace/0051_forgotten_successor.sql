-- A memory whose successor is forgotten is current again. Since 0044 it read
-- as current to every caller (nobody may see a tombstone) and recall answered
-- it as current, yet correct and supersede still found superseded_by_id set
-- and refused it as superseded for good, and its vector, deleted with the
-- supersede, never came back, so only the lexical arm found it. Forget now
-- clears the link from the memory it replaced and queues that memory for the
-- embedding job; its revision history keeps the supersede. A trigger, as
-- 0028's, so every path that forgets does it.
CREATE FUNCTION successor_forget() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        WITH revived AS (
            UPDATE memory SET superseded_by_id = NULL
            WHERE superseded_by_id = NEW.id AND invalidated_at IS NULL
            RETURNING id, revision
        )
        INSERT INTO embedding_job (memory_id, text_revision)
        SELECT id, revision FROM revived
        ON CONFLICT (memory_id) DO UPDATE
        SET text_revision = EXCLUDED.text_revision, attempts = 0, next_attempt_at = now();
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER successor_forget AFTER UPDATE OF invalidated_at ON memory
    FOR EACH ROW EXECUTE FUNCTION successor_forget();

-- Memories whose successor was forgotten before this migration.
WITH revived AS (
    UPDATE memory m SET superseded_by_id = NULL
    FROM memory s
    WHERE s.id = m.superseded_by_id AND s.invalidated_at IS NOT NULL
      AND m.invalidated_at IS NULL
    RETURNING m.id, m.revision
)
INSERT INTO embedding_job (memory_id, text_revision)
SELECT id, revision FROM revived
ON CONFLICT (memory_id) DO UPDATE
SET text_revision = EXCLUDED.text_revision, attempts = 0, next_attempt_at = now();
