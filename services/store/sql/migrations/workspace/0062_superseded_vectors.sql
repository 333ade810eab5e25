-- A memory superseded by one the caller may not see (another member's, for a
-- purpose the caller lacks) reads to that caller with no successor and is
-- recalled as current (0044), but its vector was deleted with the supersede:
-- only the lexical arm found it, so the caller's dense and hybrid ranks
-- changed with a row they may not see (design §4), and a recall asking for
-- superseded memories found them only lexically. A superseded memory now
-- keeps its vector, the vector carrying a copy of its memory's successor as
-- it carries its audience, purposes, kind, update time and provenance (0005,
-- 0026, 0045), kept equal to the memory's by the same rules: taken from the
-- memory when the vector is stored (the job holds the memory FOR SHARE until
-- then) and followed on every later change of the successor. The dense arm
-- admits a superseded vector exactly when the lexical arm and the walk admit
-- its memory: the recall asks for superseded memories, or the caller may see
-- no memory along its chain of successors (successor_seen, 0044 and 0063).
-- Only a forget deletes a vector.

ALTER TABLE memory_embedding ADD COLUMN superseded_by_id uuid;

-- A vector for any memory not forgotten, superseded ones too.
CREATE OR REPLACE FUNCTION memory_embedding_copy_trust() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    m memory%ROWTYPE;
BEGIN
    SELECT * INTO m FROM memory WHERE id = NEW.memory_id;
    IF NOT FOUND OR m.invalidated_at IS NOT NULL THEN
        RETURN NULL;
    END IF;
    NEW.audience_member_id := m.audience_member_id;
    NEW.purposes := m.purposes;
    NEW.kind := m.kind;
    NEW.memory_updated_at := m.updated_at;
    NEW.provenance_audience := m.provenance_audience;
    NEW.provenance_purposes := m.provenance_purposes;
    NEW.provenance_forgotten := m.provenance_forgotten;
    NEW.superseded_by_id := m.superseded_by_id;
    RETURN NEW;
END $$;

-- A supersede keeps the vector and its queue entry (the text is the same);
-- a forget deletes both, a change of text queues the memory again.
CREATE OR REPLACE FUNCTION memory_embedding_sync() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO embedding_job (memory_id, text_revision) VALUES (NEW.id, NEW.revision);
        RETURN NEW;
    END IF;
    IF NEW.invalidated_at IS NOT NULL THEN
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

-- The copy of the successor follows the memory's: a supersede sets it, a
-- forgotten successor's leaving the chain (0054_successor_chain) moves or
-- clears it.
CREATE FUNCTION memory_embedding_follow_successor() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    UPDATE memory_embedding SET superseded_by_id = NEW.superseded_by_id
    WHERE memory_id = NEW.id AND superseded_by_id IS DISTINCT FROM NEW.superseded_by_id;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_embedding_follow_successor AFTER UPDATE OF superseded_by_id ON memory
    FOR EACH ROW
    WHEN (NEW.superseded_by_id IS DISTINCT FROM OLD.superseded_by_id
          AND NEW.invalidated_at IS NULL)
    EXECUTE FUNCTION memory_embedding_follow_successor();

-- The update time's copy (0026) follows a superseded memory too: the
-- supersede itself moves updated_at, which the expiry gate reads.
DROP TRIGGER memory_embedding_follow_renewal ON memory;
CREATE TRIGGER memory_embedding_follow_renewal AFTER UPDATE OF updated_at ON memory
    FOR EACH ROW
    WHEN (NEW.updated_at IS DISTINCT FROM OLD.updated_at AND NEW.invalidated_at IS NULL)
    EXECUTE FUNCTION memory_embedding_follow_renewal();

-- The exact plan (0045's) with the recall's include_superseded: a superseded
-- vector is ranked when asked for, or when the caller may see no memory along
-- its chain of successors (successor_seen, the lexical arm's and the walk's
-- rule, 0063). Evaluated for a superseded vector alone, its direct successor
-- first, by primary key (this function runs as its owner, beneath no policy:
-- the eligibility rule applied explicitly): one the caller sees settles it
-- without a function call, each of which cost about 150 µs when
-- successor_seen was 0044's (60 ms for 400 superseded vectors, against 5 ms
-- for the whole plan before).
CREATE FUNCTION dense_candidates_exact(
    query vector, model text, version text, lim integer, kinds memory_kind[],
    expiry_days integer, entities uuid[], include_superseded boolean
) RETURNS TABLE (id uuid, cosine double precision)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_indexscan = off
    SET max_parallel_workers_per_gather = 0
    AS $$
#variable_conflict use_column
DECLARE
    the_member uuid := caller_member();
    the_purpose purpose := caller_purpose();
BEGIN
    RETURN QUERY
    SELECT nearest.memory_id, 1 - nearest.distance
    FROM (
        SELECT e.memory_id, e.embedding <=> query AS distance
        FROM memory_embedding e
        WHERE (e.audience_key = stat_audience(NULL) OR e.audience_key = the_member)
          AND e.purposes @> ARRAY[the_purpose]
          AND provenance_admits(e.provenance_audience, e.provenance_purposes,
                                e.provenance_forgotten, the_member, the_purpose)
          AND e.model_id = model AND e.input_version = version
          AND (cardinality(kinds) = 0 OR e.kind = ANY (kinds))
          AND (expiry_days = 0
               OR e.memory_updated_at >= now() - make_interval(days => expiry_days))
          AND (cardinality(entities) = 0 OR mentions_any(e.memory_id, entities))
          AND (include_superseded OR e.superseded_by_id IS NULL
               OR ((SELECT s.id FROM memory s
                    WHERE s.id = e.superseded_by_id
                      AND is_eligible(s.invalidated_at, s.audience_member_id, s.purposes))
                   IS NULL
                   AND NOT successor_seen(e.superseded_by_id)))
        ORDER BY distance, e.memory_id
        LIMIT lim
    ) nearest
    ORDER BY nearest.distance, nearest.memory_id;
END $$;
REVOKE ALL ON FUNCTION dense_candidates_exact(
    vector, text, text, integer, memory_kind[], integer, uuid[], boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dense_candidates_exact(
    vector, text, text, integer, memory_kind[], integer, uuid[], boolean) TO recallatron_app;

-- The previous store's call, without include_superseded: as a recall that
-- does not ask for superseded memories. (Its HNSW statement has no condition
-- on the successor: until it is replaced, a superseded vector may take one
-- of its dense arm's places, which the walk then refuses.)
CREATE OR REPLACE FUNCTION dense_candidates_exact(
    query vector, model text, version text, lim integer, kinds memory_kind[],
    expiry_days integer, entities uuid[]
) RETURNS TABLE (id uuid, cosine double precision)
    LANGUAGE sql STABLE
    AS $$
    SELECT * FROM dense_candidates_exact(query, model, version, lim, kinds, expiry_days,
                                         entities, false)
$$;

-- The vectors of memories superseded before this migration, deleted with
-- their supersede, come back through the embedding job.
INSERT INTO embedding_job (memory_id, text_revision)
SELECT m.id, m.revision FROM memory m
WHERE m.superseded_by_id IS NOT NULL AND m.invalidated_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM memory_embedding e WHERE e.memory_id = m.id)
ON CONFLICT (memory_id) DO NOTHING;
