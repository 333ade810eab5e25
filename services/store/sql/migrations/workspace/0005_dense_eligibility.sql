-- The dense arm filters on memory_embedding alone, so that the HNSW index
-- scan drives the query (with iterative scan) instead of a join the planner
-- misjudges: each vector carries a copy of its memory's trust (audience,
-- purposes) and of what recall filters on (kind, updated_at). These never
-- change while the vector exists: a memory's audience, purposes and kind are
-- fixed at creation, and correct/supersede/forget delete its vectors.

ALTER TABLE memory_embedding
    ADD COLUMN audience_member_id uuid,
    ADD COLUMN purposes purpose[],
    ADD COLUMN kind memory_kind,
    ADD COLUMN memory_updated_at timestamptz;

UPDATE memory_embedding e
SET audience_member_id = m.audience_member_id, purposes = m.purposes, kind = m.kind,
    memory_updated_at = m.updated_at
FROM memory m WHERE m.id = e.memory_id;

ALTER TABLE memory_embedding
    ALTER COLUMN purposes SET NOT NULL,
    ALTER COLUMN kind SET NOT NULL,
    ALTER COLUMN memory_updated_at SET NOT NULL;

-- Fills the copies from the memory; refuses a vector for a memory that is no
-- longer live (forgotten or superseded meanwhile).
CREATE FUNCTION memory_embedding_copy_trust() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    m memory%ROWTYPE;
BEGIN
    SELECT * INTO m FROM memory WHERE id = NEW.memory_id;
    IF NOT FOUND OR m.invalidated_at IS NOT NULL OR m.superseded_by_id IS NOT NULL THEN
        RETURN NULL;
    END IF;
    NEW.audience_member_id := m.audience_member_id;
    NEW.purposes := m.purposes;
    NEW.kind := m.kind;
    NEW.memory_updated_at := m.updated_at;
    RETURN NEW;
END $$;
CREATE TRIGGER memory_embedding_copy_trust BEFORE INSERT OR UPDATE ON memory_embedding
    FOR EACH ROW EXECUTE FUNCTION memory_embedding_copy_trust();

-- The same eligibility rule as the memory policy, on the copies, through a
-- wrapper the planner does not inline (a SET clause prevents inlining): the
-- inlined rule reads the caller from settings, which the planner cannot see,
-- and it then guesses that almost no row passes and sorts every vector
-- rather than walk the HNSW index. An opaque function gets the default
-- selectivity, and the index walk wins.
CREATE FUNCTION vector_is_eligible(audience_member_id uuid, purposes purpose[])
    RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE SET search_path = public
    AS $$ SELECT is_eligible(NULL, audience_member_id, purposes) $$;

DROP POLICY memory_embedding_visible ON memory_embedding;
CREATE POLICY memory_embedding_visible ON memory_embedding FOR SELECT
    USING (vector_is_eligible(audience_member_id, purposes));

-- Queue entry first: a worker holding it is waited for, so the vector it
-- commits is seen, and removed, by the delete that follows.
CREATE OR REPLACE FUNCTION memory_embedding_sync() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO embedding_job (memory_id, text_revision) VALUES (NEW.id, NEW.revision);
        RETURN NEW;
    END IF;
    IF NEW.invalidated_at IS NOT NULL OR NEW.superseded_by_id IS NOT NULL THEN
        DELETE FROM embedding_job WHERE memory_id = NEW.id;
        DELETE FROM memory_embedding WHERE memory_id = NEW.id;
    ELSIF NEW.title IS DISTINCT FROM OLD.title OR NEW.body IS DISTINCT FROM OLD.body THEN
        INSERT INTO embedding_job (memory_id, text_revision) VALUES (NEW.id, NEW.revision)
            ON CONFLICT (memory_id) DO UPDATE
            SET text_revision = EXCLUDED.text_revision, attempts = 0, next_attempt_at = now();
        DELETE FROM memory_embedding WHERE memory_id = NEW.id;
    END IF;
    RETURN NEW;
END $$;
