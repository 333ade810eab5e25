-- Rows the permission walk is certain to refuse took places in the arms:
-- each arm keeps its first `arm_limit` rows (and the capped lexical path its
-- newest `cap` matches) before the walk runs, and a memory visible itself but
-- about, or derived from, one the caller may not see (or a forgotten one)
-- counted among them. 120 workspace memories about the owner's private one
-- left a member's own matching memory unrecalled in every mode: the answer
-- changed with rows the caller may not see (design §4, §5 steps 1 and 5).
-- Eligibility in SQL is now the walk's own condition on the provenance kept
-- on each memory (migration 0006: provenance_audience, _purposes, _forgotten,
-- current after every link, forget and member removal), so an arm returns
-- only rows the walk would admit. The walk itself stays: it is the answer's
-- snapshot, and guards a row changed between the arms and the walk.

-- The walk's condition (memory_queries.ADMIT) on one memory's provenance,
-- for a caller; inlined where it is used.
CREATE FUNCTION provenance_admits(
    audience uuid, purposes purpose[], forgotten boolean, member uuid, the_purpose purpose
) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT NOT forgotten AND (audience IS NULL OR audience = member)
                 AND the_purpose = ANY (purposes) $$;

-- 1. The lexical arm: both functions the store calls (0021's, 0036's), the
-- condition added after the memory's own eligibility; nothing else changes.

CREATE OR REPLACE FUNCTION lexical_candidates_bm25(
    query tsquery, terms text[], idfs double precision[], lim integer,
    include_superseded boolean, kinds memory_kind[], expiry_days integer, entities uuid[]
) RETURNS TABLE (id uuid, score double precision)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    SET max_parallel_workers_per_gather = 0
    AS $$
#variable_conflict use_column
DECLARE
    the_purpose purpose := caller_purpose();
    the_workspace uuid := stat_audience(NULL);
    the_member uuid := caller_member();
BEGIN
    RETURN QUERY
    WITH kept AS MATERIALIZED (
        SELECT m.id, m.created_at,
               ts_filter(setweight(setweight(m.search, 'D'), 'A', terms), '{a}') AS hits,
               (char_length(m.title) + char_length(m.body))::double precision AS chars
        FROM ((
                SELECT * FROM memory x
                WHERE x.purposes @> ARRAY[the_purpose] AND x.audience_key = the_workspace
                  AND x.search @@ query OFFSET 0
            ) UNION ALL (
                SELECT * FROM memory x
                WHERE x.purposes @> ARRAY[the_purpose] AND x.audience_key = the_member
                  AND x.search @@ query OFFSET 0
            )) m
        WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
          AND provenance_admits(m.provenance_audience, m.provenance_purposes,
                                m.provenance_forgotten, the_member, the_purpose)
          AND passes_recall_filters(m.id, m.superseded_by_id, m.kind, m.updated_at,
                                      include_superseded, kinds, expiry_days, entities)
    ), mean AS (SELECT greatest(avg(k.chars), 1.0) AS chars FROM kept k)
    SELECT k.id, coalesce((
        SELECT sum(idfs[array_position(terms, u.lexeme)] * t.tf * 2.2
                   / (t.tf + 1.2 * (0.25 + 0.75 * k.chars / mean.chars)))
        FROM unnest(k.hits) AS u, LATERAL (SELECT greatest(cardinality(u.positions), 1) AS tf) t
    ), 0) AS score
    FROM kept k, mean
    ORDER BY score DESC, k.created_at DESC, k.id
    LIMIT lim;
END $$;

CREATE OR REPLACE FUNCTION lexical_candidates_bm25_capped(
    query tsquery, rare tsquery, terms text[], idfs double precision[], lim integer,
    cap integer, prefilter integer, include_superseded boolean, kinds memory_kind[],
    expiry_days integer, entities uuid[], by_index boolean
) RETURNS TABLE (id uuid, score double precision)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    SET enable_bitmapscan = on
    SET max_parallel_workers_per_gather = 0
    AS $$
#variable_conflict use_column
DECLARE
    the_purpose purpose := caller_purpose();
    the_workspace uuid := stat_audience(NULL);
    the_member uuid := caller_member();
    rare_ids uuid[] := '{}';
BEGIN
    -- First, while bitmap scans are on: the GIN index answers only through them.
    IF rare IS NOT NULL THEN
        SELECT coalesce(array_agg(m.id), '{}') INTO rare_ids
        FROM ((
                SELECT * FROM memory x
                WHERE x.purposes @> ARRAY[the_purpose] AND x.audience_key = the_workspace
                  AND x.search @@ rare OFFSET 0
            ) UNION ALL (
                SELECT * FROM memory x
                WHERE x.purposes @> ARRAY[the_purpose] AND x.audience_key = the_member
                  AND x.search @@ rare OFFSET 0
            )) m
        WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
          AND provenance_admits(m.provenance_audience, m.provenance_purposes,
                                m.provenance_forgotten, the_member, the_purpose)
          AND passes_recall_filters(m.id, m.superseded_by_id, m.kind, m.updated_at,
                                    include_superseded, kinds, expiry_days, entities);
    END IF;
    IF by_index THEN
        -- Local to this call: the walk must not be traded for a bitmap scan.
        PERFORM set_config('enable_bitmapscan', 'off', true);
        RETURN QUERY
        WITH newest AS MATERIALIZED (
            SELECT n.id, n.created_at, n.search, n.chars FROM (
                SELECT m.id, m.search, m.created_at,
                       (char_length(m.title) + char_length(m.body))::double precision AS chars
                -- The fence keeps the walk on the created_at index.
                FROM (SELECT * FROM memory x WHERE x.search @@ query
                      ORDER BY x.created_at DESC, x.id DESC OFFSET 0) m
                WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
                  AND provenance_admits(m.provenance_audience, m.provenance_purposes,
                                        m.provenance_forgotten, the_member, the_purpose)
                  AND passes_recall_filters(m.id, m.superseded_by_id, m.kind, m.updated_at,
                                            include_superseded, kinds, expiry_days, entities)
                ORDER BY m.created_at DESC, m.id DESC
                LIMIT cap
            ) n
            ORDER BY ts_rank(n.search, query) DESC, n.created_at DESC, n.id
            LIMIT prefilter
        ), kept AS MATERIALIZED (
            -- The rare matches the newest left out, by primary key (each already
            -- found eligible in this snapshot): none read when there are none.
            SELECT k.id, k.created_at,
                   ts_filter(setweight(setweight(k.search, 'D'), 'A', terms), '{a}') AS hits,
                   k.chars
            FROM (
                SELECT w.id, w.created_at, w.search, w.chars FROM newest w
                UNION ALL
                SELECT m.id, m.created_at, m.search,
                       (char_length(m.title) + char_length(m.body))::double precision
                FROM memory m
                WHERE m.id = ANY (rare_ids) AND m.id NOT IN (SELECT w.id FROM newest w)
            ) k
        ), mean AS (SELECT greatest(avg(k.chars), 1.0) AS chars FROM kept k)
        SELECT k.id, coalesce((
            SELECT sum(idfs[array_position(terms, u.lexeme)] * t.tf * 2.2
                       / (t.tf + 1.2 * (0.25 + 0.75 * k.chars / mean.chars)))
            FROM unnest(k.hits) AS u, LATERAL (SELECT greatest(cardinality(u.positions), 1) AS tf) t
        ), 0) AS score
        FROM kept k, mean
        ORDER BY score DESC, k.created_at DESC, k.id
        LIMIT lim;
    ELSE
        RETURN QUERY
        WITH newest AS MATERIALIZED (
            SELECT n.id, n.created_at, n.search, n.chars FROM (
                SELECT m.id, m.search, m.created_at,
                       (char_length(m.title) + char_length(m.body))::double precision AS chars
                FROM ((
                    SELECT * FROM memory x
                    WHERE x.purposes @> ARRAY[the_purpose] AND x.audience_key = the_workspace
                      AND x.search @@ query OFFSET 0
                ) UNION ALL (
                    SELECT * FROM memory x
                    WHERE x.purposes @> ARRAY[the_purpose] AND x.audience_key = the_member
                      AND x.search @@ query OFFSET 0
                )) m
                WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
                  AND provenance_admits(m.provenance_audience, m.provenance_purposes,
                                        m.provenance_forgotten, the_member, the_purpose)
                  AND passes_recall_filters(m.id, m.superseded_by_id, m.kind, m.updated_at,
                                            include_superseded, kinds, expiry_days, entities)
                ORDER BY m.created_at DESC, m.id DESC
                LIMIT cap
            ) n
            ORDER BY ts_rank(n.search, query) DESC, n.created_at DESC, n.id
            LIMIT prefilter
        ), kept AS MATERIALIZED (
            -- The rare matches the newest left out, by primary key (each already
            -- found eligible in this snapshot): none read when there are none.
            SELECT k.id, k.created_at,
                   ts_filter(setweight(setweight(k.search, 'D'), 'A', terms), '{a}') AS hits,
                   k.chars
            FROM (
                SELECT w.id, w.created_at, w.search, w.chars FROM newest w
                UNION ALL
                SELECT m.id, m.created_at, m.search,
                       (char_length(m.title) + char_length(m.body))::double precision
                FROM memory m
                WHERE m.id = ANY (rare_ids) AND m.id NOT IN (SELECT w.id FROM newest w)
            ) k
        ), mean AS (SELECT greatest(avg(k.chars), 1.0) AS chars FROM kept k)
        SELECT k.id, coalesce((
            SELECT sum(idfs[array_position(terms, u.lexeme)] * t.tf * 2.2
                       / (t.tf + 1.2 * (0.25 + 0.75 * k.chars / mean.chars)))
            FROM unnest(k.hits) AS u, LATERAL (SELECT greatest(cardinality(u.positions), 1) AS tf) t
        ), 0) AS score
        FROM kept k, mean
        ORDER BY score DESC, k.created_at DESC, k.id
        LIMIT lim;
    END IF;
END $$;

-- 2. The dense arm: each vector carries a copy of its memory's provenance, as
-- it carries its audience and purposes (migration 0005), so that the
-- filtered HNSW scan applies the walk's condition to every vector it visits
-- and its iterative scan goes on past refused ones, instead of a join per
-- vector. The copy is taken from the memory when the vector is stored (the
-- job holds the memory FOR SHARE until then, so a change of the memory's
-- provenance either comes first and is copied, or waits and is followed) and
-- follows every later change of the memory's provenance: a forget marking
-- what reaches the forgotten memory, a removed member's hand-over.
ALTER TABLE memory_embedding
    ADD COLUMN provenance_audience uuid,
    ADD COLUMN provenance_purposes purpose[],
    ADD COLUMN provenance_forgotten boolean NOT NULL DEFAULT false;
UPDATE memory_embedding e
SET provenance_audience = m.provenance_audience, provenance_purposes = m.provenance_purposes,
    provenance_forgotten = m.provenance_forgotten
FROM memory m WHERE m.id = e.memory_id;
ALTER TABLE memory_embedding ALTER COLUMN provenance_purposes SET NOT NULL;

CREATE OR REPLACE FUNCTION memory_embedding_copy_trust() RETURNS trigger
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
    NEW.provenance_audience := m.provenance_audience;
    NEW.provenance_purposes := m.provenance_purposes;
    NEW.provenance_forgotten := m.provenance_forgotten;
    RETURN NEW;
END $$;

CREATE FUNCTION memory_embedding_follow_provenance() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    UPDATE memory_embedding
    SET provenance_audience = NEW.provenance_audience,
        provenance_purposes = NEW.provenance_purposes,
        provenance_forgotten = NEW.provenance_forgotten
    WHERE memory_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_embedding_follow_provenance
    AFTER UPDATE OF provenance_audience, provenance_purposes, provenance_forgotten ON memory
    FOR EACH ROW
    WHEN ((NEW.provenance_audience, NEW.provenance_purposes, NEW.provenance_forgotten)
          IS DISTINCT FROM (OLD.provenance_audience, OLD.provenance_purposes,
                            OLD.provenance_forgotten))
    EXECUTE FUNCTION memory_embedding_follow_provenance();

-- The walk's condition on a vector's copy, for the HNSW statement
-- (recall.DENSE): PL/pgSQL, evaluated as a simple expression and opaque to
-- the planner, as vector_is_eligible is (migration 0020), so the planner
-- still walks the index rather than sorting every vector.
CREATE FUNCTION vector_provenance_admits(audience uuid, purposes purpose[], forgotten boolean)
    RETURNS boolean
    LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = public
    AS $$
BEGIN
    RETURN NOT forgotten AND (audience IS NULL OR audience = caller_member())
           AND caller_purpose() = ANY (purposes);
END $$;

-- The exact plan (0029's), the same condition on the copies.
CREATE OR REPLACE FUNCTION dense_candidates_exact(
    query vector, model text, version text, lim integer, kinds memory_kind[],
    expiry_days integer, entities uuid[]
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
        ORDER BY distance, e.memory_id
        LIMIT lim
    ) nearest
    ORDER BY nearest.distance, nearest.memory_id;
END $$;
