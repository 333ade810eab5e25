-- Forgetting a memory that was itself superseded made the memory it had
-- replaced current again (0051, 0053_revived_claims), though a newer one
-- stood: Lyon superseded by Paris, Paris by Nice, and forgetting Paris
-- brought Lyon back beside Nice, both recalled as current, Lyon's claims
-- stated twice with Nice's, and the supersede of Lyon lost. The forgotten
-- memory now leaves the chain: what it replaced is replaced by its own
-- successor (which is live: a forgotten successor unlinks itself), and is
-- current again, re-embedded and stating its claims, only when it had none.

CREATE OR REPLACE FUNCTION successor_forget() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    replaced record;
BEGIN
    IF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        FOR replaced IN
            UPDATE memory SET superseded_by_id = NEW.superseded_by_id
            WHERE superseded_by_id = NEW.id AND invalidated_at IS NULL
            RETURNING id, revision
        LOOP
            IF NEW.superseded_by_id IS NULL THEN
                INSERT INTO embedding_job (memory_id, text_revision)
                VALUES (replaced.id, replaced.revision)
                ON CONFLICT (memory_id) DO UPDATE
                SET text_revision = EXCLUDED.text_revision, attempts = 0,
                    next_attempt_at = now();
                PERFORM memory_claims_revive(replaced.id);
            END IF;
        END LOOP;
    END IF;
    RETURN NULL;
END $$;
