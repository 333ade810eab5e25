-- A memory whose successor is forgotten is current again (0051), but what it
-- states in the graph stayed retired: the supersede retired its claims,
-- relations and aliases (its successor stated them again), the forget deleted
-- the successor's, and the memory, current for every reader, stated nothing
-- in lookup, neighbors, timelines or recall's cards. Reviving it now takes
-- back exactly that supersede's retirement: the statements retired in the
-- supersede's own transaction, at the time of the memory's latest 'supersede'
-- revision (both now() of that transaction). One a correct replaced before
-- stays retired, in the history.

CREATE FUNCTION memory_claims_revive(subject uuid) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    superseded_at timestamptz;
BEGIN
    SELECT max(r.changed_at) INTO superseded_at
    FROM memory_revision r WHERE r.memory_id = subject AND r.action = 'supersede';
    IF superseded_at IS NULL THEN
        RETURN;
    END IF;
    UPDATE attribute_claim SET retired_at = NULL
    WHERE memory_id = subject AND retired_at = superseded_at;
    UPDATE relation_claim SET retired_at = NULL
    WHERE memory_id = subject AND retired_at = superseded_at;
    UPDATE entity_alias SET retired_at = NULL
    WHERE memory_id = subject AND retired_at = superseded_at;
END $$;
-- Only the trigger below calls it (as the owner); no caller may.
REVOKE ALL ON FUNCTION memory_claims_revive(uuid) FROM PUBLIC;

CREATE OR REPLACE FUNCTION successor_forget() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    revived record;
BEGIN
    IF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        FOR revived IN
            UPDATE memory SET superseded_by_id = NULL
            WHERE superseded_by_id = NEW.id AND invalidated_at IS NULL
            RETURNING id, revision
        LOOP
            INSERT INTO embedding_job (memory_id, text_revision)
            VALUES (revived.id, revived.revision)
            ON CONFLICT (memory_id) DO UPDATE
            SET text_revision = EXCLUDED.text_revision, attempts = 0, next_attempt_at = now();
            PERFORM memory_claims_revive(revived.id);
        END LOOP;
    END IF;
    RETURN NULL;
END $$;

-- Memories revived before this migration: current (no successor, not
-- forgotten) and superseded once, which only a forgotten successor undoes.
SELECT memory_claims_revive(m.id)
FROM memory m
WHERE m.superseded_by_id IS NULL AND m.invalidated_at IS NULL
  AND EXISTS (SELECT 1 FROM memory_revision r WHERE r.memory_id = m.id AND r.action = 'supersede');
