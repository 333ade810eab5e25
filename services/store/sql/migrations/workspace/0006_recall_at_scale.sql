-- Recall that holds for any corpus and any caller (docs/recall.md, "Recall at
-- scale"): statistics per audience and purpose, a lexical arm that reads its
-- GIN index beneath row-level security, and a bounded permission walk.

-- 1. Document frequencies a caller may be told -------------------------------
--
-- The 15% rule and the capped-path decision must count only memories the
-- caller may see (design §4: statistics never reveal rows the caller may not
-- see). Eligibility is (audience is the workspace or the caller) and (the
-- caller's purpose is one of the memory's) and (not forgotten); audience and
-- purposes never change, so counts kept per (audience, purpose) add up
-- exactly: a caller's figure is the workspace's row plus their own.
--
-- Each memory counts in one of STAT_SHARDS shards picked from its id, so
-- concurrent writers rarely update the same row (one row per lexeme, or a
-- single corpus row, is a lock every writer queues on until it commits), and
-- a memory's removal always decrements the shard its insertion incremented.

DROP TRIGGER term_stat_sync_insert ON memory;
DROP TRIGGER term_stat_sync_update ON memory;
DROP FUNCTION term_stat_sync();
DROP TABLE term_stat;
DROP TABLE corpus_stat;

-- The audience key of the statistics: the nil uuid stands for the workspace.
CREATE FUNCTION stat_audience(audience_member_id uuid) RETURNS uuid
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT coalesce(audience_member_id, '00000000-0000-0000-0000-000000000000'::uuid) $$;

-- 32 shards: with 8 writers, two of them meet on a shard about one time in 32.
CREATE FUNCTION stat_shard(memory uuid) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT (get_byte(uuid_send(memory), 15) % 32)::smallint $$;

CREATE TABLE term_stat (
    lexeme      text NOT NULL,
    purpose     purpose NOT NULL,
    audience    uuid NOT NULL,
    shard       smallint NOT NULL,
    docs        bigint NOT NULL,
    PRIMARY KEY (lexeme, purpose, audience, shard)
);

-- Memories with searchable text (forgotten ones have none).
CREATE TABLE corpus_stat (
    purpose     purpose NOT NULL,
    audience    uuid NOT NULL,
    shard       smallint NOT NULL,
    docs        bigint NOT NULL,
    PRIMARY KEY (purpose, audience, shard)
);

INSERT INTO term_stat (lexeme, purpose, audience, shard, docs)
    SELECT l, p, stat_audience(m.audience_member_id), stat_shard(m.id), count(*)
    FROM memory m, unnest(tsvector_to_array(m.search)) AS l, unnest(m.purposes) AS p
    GROUP BY 1, 2, 3, 4;
INSERT INTO corpus_stat (purpose, audience, shard, docs)
    SELECT p, stat_audience(m.audience_member_id), stat_shard(m.id), count(*)
    FROM memory m, unnest(m.purposes) AS p
    WHERE m.invalidated_at IS NULL
    GROUP BY 1, 2, 3;

CREATE FUNCTION term_stat_sync() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    old_terms text[] := CASE WHEN TG_OP = 'UPDATE' THEN tsvector_to_array(OLD.search) ELSE '{}' END;
    new_terms text[] := tsvector_to_array(NEW.search);
    delta_docs integer := 0;
    aud uuid := stat_audience(NEW.audience_member_id);
    sh smallint := stat_shard(NEW.id);
BEGIN
    IF TG_OP = 'INSERT' THEN
        delta_docs := 1;
    ELSIF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        delta_docs := -1;
    END IF;
    IF old_terms = new_terms AND delta_docs = 0 THEN
        RETURN NEW;
    END IF;
    -- One statement in key order: concurrent writers lock rows in the same
    -- order and cannot deadlock.
    INSERT INTO term_stat AS t (lexeme, purpose, audience, shard, docs)
        SELECT lexeme, p, aud, sh, sum(d) FROM (
            SELECT unnest(new_terms) AS lexeme, 1 AS d
            UNION ALL
            SELECT unnest(old_terms), -1
        ) changes, unnest(NEW.purposes) AS p
        GROUP BY lexeme, p HAVING sum(d) <> 0
        ORDER BY lexeme, p
    ON CONFLICT (lexeme, purpose, audience, shard) DO UPDATE SET docs = t.docs + EXCLUDED.docs;
    -- A lexeme no memory holds any more must not linger: after forget, no
    -- table may keep a trace of the text.
    DELETE FROM term_stat
    WHERE lexeme = ANY (old_terms) AND purpose = ANY (NEW.purposes) AND audience = aud
      AND shard = sh AND docs <= 0;
    IF delta_docs <> 0 THEN
        INSERT INTO corpus_stat AS c (purpose, audience, shard, docs)
            SELECT p, aud, sh, delta_docs FROM unnest(NEW.purposes) AS p ORDER BY p
        ON CONFLICT (purpose, audience, shard) DO UPDATE SET docs = c.docs + EXCLUDED.docs;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER term_stat_sync_insert AFTER INSERT ON memory
    FOR EACH ROW EXECUTE FUNCTION term_stat_sync();
CREATE TRIGGER term_stat_sync_update AFTER UPDATE OF title, body, invalidated_at ON memory
    FOR EACH ROW EXECUTE FUNCTION term_stat_sync();

-- A caller reads only the statistics of what they may see (the store's
-- queries say so too; the policies make it hold for any query).
ALTER TABLE term_stat ENABLE ROW LEVEL SECURITY;
ALTER TABLE term_stat FORCE ROW LEVEL SECURITY;
CREATE POLICY term_stat_visible ON term_stat FOR SELECT
    USING (purpose = caller_purpose() AND audience IN (stat_audience(NULL), caller_member()));
ALTER TABLE corpus_stat ENABLE ROW LEVEL SECURITY;
ALTER TABLE corpus_stat FORCE ROW LEVEL SECURITY;
CREATE POLICY corpus_stat_visible ON corpus_stat FOR SELECT
    USING (purpose = caller_purpose() AND audience IN (stat_audience(NULL), caller_member()));
GRANT SELECT ON term_stat, corpus_stat TO recallatron_app;

-- 2. The lexical arm on its index ---------------------------------------------
--
-- `@@` (ts_match_vq) is not LEAKPROOF, so beneath a row-level-security policy
-- Postgres refuses to use it as an index condition and checks it on every row
-- the policy lets through: the arm cost O(visible memories). These functions
-- run the GIN search as their owner (the migration role, which bypasses row
-- security) and apply the very same is_eligible() explicitly to every match
-- before anything is ranked, so they return exactly the rows the policy would
-- (eligibility still in SQL, ahead of ranking), and cost what the matches
-- cost. They take only typed values (a tsquery, filters), never SQL text, and
-- return only ids and scores. plan_cache_mode: the plan must be made for the
-- actual query (a generic plan cannot tell one rare term from a common one).
-- Order: ts_rank_cd, then ts_rank (of two rows with the same cover density,
-- the one whose matches weigh more: lexical nDCG@10 0.566 -> 0.573 on the dev
-- data, docs/recall.md), then the newer memory, then the id.

-- The GIN index holds each memory's audience and purposes beside its lexemes
-- (btree_gin for the uuid), so a search reads the caller's matches only (the
-- caller's purpose; the workspace's audience or the caller's own), not every
-- match of the workspace: a caller who sees 5% of it pays for 5%.
CREATE EXTENSION IF NOT EXISTS btree_gin;
ALTER TABLE memory
    ADD COLUMN audience_key uuid GENERATED ALWAYS AS (stat_audience(audience_member_id)) STORED;
DROP INDEX memory_search_idx;
CREATE INDEX memory_search_idx ON memory USING gin (audience_key, purposes, search);

-- The matches of the current caller's audiences and purpose, one index scan
-- per audience (the fences keep each scan on the index). Inlined into the
-- functions below; called by anyone else it runs beneath row security.
CREATE FUNCTION caller_matches(query tsquery) RETURNS SETOF memory
    LANGUAGE sql STABLE
    AS $$
    (SELECT * FROM memory x
     WHERE x.audience_key = stat_audience(NULL) AND x.purposes @> ARRAY[caller_purpose()]
       AND x.search @@ query
     OFFSET 0)
    UNION ALL
    (SELECT * FROM memory x
     WHERE x.audience_key = caller_member() AND x.purposes @> ARRAY[caller_purpose()]
       AND x.search @@ query
     OFFSET 0)
$$;

-- Recall's filters (design §5) on one memory row, inlined where it is used
-- (its body holds no subquery, or the planner would call it per row); the
-- entity filter's lookup runs only when the recall asks for it.
CREATE FUNCTION mentions_any(memory uuid, entities uuid[]) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$ SELECT EXISTS (SELECT 1 FROM mention mn
                         WHERE mn.memory_id = memory AND mn.entity_id = ANY (entities)) $$;

CREATE FUNCTION passes_recall_filters(
    memory_id uuid, superseded_by_id uuid, kind memory_kind, updated_at timestamptz,
    include_superseded boolean, kinds memory_kind[], expiry_days integer, entities uuid[]
) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT (include_superseded OR superseded_by_id IS NULL)
       AND (cardinality(kinds) = 0 OR kind = ANY (kinds))
       AND (expiry_days = 0 OR updated_at >= now() - make_interval(days => expiry_days))
       AND (cardinality(entities) = 0 OR mentions_any(memory_id, entities))
$$;

-- Every match ranked: the kept terms' document frequencies (over what the
-- caller may see) say the matches are few.
CREATE FUNCTION lexical_candidates(
    query tsquery, lim integer, include_superseded boolean, kinds memory_kind[],
    expiry_days integer, entities uuid[]
) RETURNS TABLE (id uuid, score real)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    SET max_parallel_workers_per_gather = 0
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT m.id, ts_rank_cd(m.search, query) AS score
    FROM caller_matches(query) m
    WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
      AND passes_recall_filters(m.id, m.superseded_by_id, m.kind, m.updated_at,
                                  include_superseded, kinds, expiry_days, entities)
    ORDER BY score DESC, ts_rank(m.search, query) DESC, m.created_at DESC, m.id
    LIMIT lim;
END $$;

-- Many matches: only the newest `cap` eligible matches are ranked; ts_rank,
-- a tenth of ts_rank_cd's cost, keeps the best `prefilter` of them for
-- ts_rank_cd to order (docs/benchmarks.md). Two ways to find the newest
-- `cap`, with the same rows: read the caller's matches from the index and
-- keep the newest (cost: the caller's matches), or walk the created_at index
-- newest first until `cap` pass (cost: cap x memories / caller's matches).
-- The caller says which (`by_index`: the walk), from the statistics. Ties
-- of creation time (one transaction's memories) go to the greater id, so
-- both ways keep the same rows.
CREATE FUNCTION lexical_candidates_newest(
    query tsquery, lim integer, cap integer, prefilter integer, include_superseded boolean,
    kinds memory_kind[], expiry_days integer, entities uuid[], by_index boolean
) RETURNS TABLE (id uuid, score real)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    SET enable_bitmapscan = on
    SET max_parallel_workers_per_gather = 0
    AS $$
#variable_conflict use_column
BEGIN
    IF by_index THEN
        -- Local to this call (the SET clause above restores it): the walk
        -- must not be traded for a bitmap scan and a sort.
        PERFORM set_config('enable_bitmapscan', 'off', true);
        RETURN QUERY
        SELECT c.id, ts_rank_cd(c.search, query) AS score
        FROM (
            SELECT n.id, n.search, n.created_at, ts_rank(n.search, query) AS quick FROM (
                -- The fence keeps the walk on the created_at index.
                SELECT m.id, m.search, m.created_at
                FROM (SELECT * FROM memory x WHERE x.search @@ query
                      ORDER BY x.created_at DESC, x.id DESC OFFSET 0) m
                WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
                  AND passes_recall_filters(m.id, m.superseded_by_id, m.kind, m.updated_at,
                                  include_superseded, kinds, expiry_days, entities)
                ORDER BY m.created_at DESC, m.id DESC
                LIMIT cap
            ) n
            ORDER BY quick DESC, n.created_at DESC, n.id
            LIMIT prefilter
        ) c
        ORDER BY score DESC, c.quick DESC, c.created_at DESC, c.id
        LIMIT lim;
    ELSE
        RETURN QUERY
        SELECT c.id, ts_rank_cd(c.search, query) AS score
        FROM (
            SELECT n.id, n.search, n.created_at, ts_rank(n.search, query) AS quick FROM (
                SELECT m.id, m.search, m.created_at
                FROM caller_matches(query) m
                WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
                  AND passes_recall_filters(m.id, m.superseded_by_id, m.kind, m.updated_at,
                                  include_superseded, kinds, expiry_days, entities)
                ORDER BY m.created_at DESC, m.id DESC
                LIMIT cap
            ) n
            ORDER BY quick DESC, n.created_at DESC, n.id
            LIMIT prefilter
        ) c
        ORDER BY score DESC, c.quick DESC, c.created_at DESC, c.id
        LIMIT lim;
    END IF;
END $$;

REVOKE ALL ON FUNCTION caller_matches(tsquery) FROM PUBLIC;
REVOKE ALL ON FUNCTION mentions_any(uuid, uuid[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION lexical_candidates(tsquery, integer, boolean, memory_kind[], integer, uuid[])
    FROM PUBLIC;
REVOKE ALL ON FUNCTION lexical_candidates_newest(
    tsquery, integer, integer, integer, boolean, memory_kind[], integer, uuid[], boolean)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lexical_candidates(tsquery, integer, boolean, memory_kind[], integer, uuid[])
    TO recallatron_app;
GRANT EXECUTE ON FUNCTION lexical_candidates_newest(
    tsquery, integer, integer, integer, boolean, memory_kind[], integer, uuid[], boolean)
    TO recallatron_app;

-- 2b. The dense arm for a narrow caller -----------------------------------------
--
-- pgvector's filtered HNSW scan visits about 1/selectivity as many vectors to
-- find its rows: for a caller who may see 5% of the workspace it was the
-- slowest part of recall (docs/benchmarks.md). Such a caller's vectors are
-- few, and ranking them all exactly is cheaper (5,563 vectors at 100,000
-- memories: 4.7 ms) and exact. The vectors' copies of their memory's trust
-- (migration 0005) are indexed like the lexemes: one scan per audience, the
-- caller's purpose. Eligibility is applied as the policy does, explicitly,
-- before the distance order.
ALTER TABLE memory_embedding
    ADD COLUMN audience_key uuid GENERATED ALWAYS AS (stat_audience(audience_member_id)) STORED;
CREATE INDEX memory_embedding_trust_idx ON memory_embedding USING gin (audience_key, purposes);

CREATE FUNCTION dense_candidates_exact(
    query vector, model text, version text, lim integer, kinds memory_kind[],
    expiry_days integer, entities uuid[]
) RETURNS TABLE (id uuid, cosine double precision)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    SET max_parallel_workers_per_gather = 0
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT e.memory_id, 1 - (e.embedding <=> query)
    FROM (
        (SELECT * FROM memory_embedding x
         WHERE x.audience_key = stat_audience(NULL) AND x.purposes @> ARRAY[caller_purpose()]
         OFFSET 0)
        UNION ALL
        (SELECT * FROM memory_embedding x
         WHERE x.audience_key = caller_member() AND x.purposes @> ARRAY[caller_purpose()]
         OFFSET 0)
    ) e
    -- is_eligible itself, inlined (vector_is_eligible, which the policy
    -- uses to stay opaque to the planner, would cost a call per vector).
    WHERE is_eligible(NULL, e.audience_member_id, e.purposes)
      AND e.model_id = model AND e.input_version = version
      AND (cardinality(kinds) = 0 OR e.kind = ANY (kinds))
      AND (expiry_days = 0 OR e.memory_updated_at >= now() - make_interval(days => expiry_days))
      AND (cardinality(entities) = 0 OR mentions_any(e.memory_id, entities))
    ORDER BY e.embedding <=> query, e.memory_id
    LIMIT lim;
END $$;
REVOKE ALL ON FUNCTION dense_candidates_exact(
    vector, text, text, integer, memory_kind[], integer, uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dense_candidates_exact(
    vector, text, text, integer, memory_kind[], integer, uuid[]) TO recallatron_app;

-- 3. The permission walk, one row per candidate -------------------------------
--
-- A candidate is admitted when every memory reachable along its links is
-- visible to the caller and not forgotten (design §5.5). Links are written
-- once, with their memory, and point only to memories that existed then;
-- audience and purposes never change; forget is final. So what the walk
-- needs of a memory's whole provenance is fixed at its creation except for
-- forget, and is kept on the memory itself:
--   provenance_audience  the intersection of the audiences of the memory and
--                        everything it reaches: NULL the workspace, a member,
--                        or provenance_nobody() when two members meet
--   provenance_purposes  the intersection of their purposes
--   provenance_forgotten something it reaches is forgotten
-- The first two are computed from the direct targets when the links are
-- inserted (their own values already cover what they reach); forget marks
-- every memory that reaches the forgotten one, once. The walk then reads one
-- row per candidate, however deep or wide its provenance (services/store/
-- memory_queries.py, ADMIT), and admits exactly what a walk along the links
-- would: every reached memory is visible to (member, purpose) exactly when
-- the intersections are the workspace or that member and hold the purpose.

-- Stands for "no one": the audiences of two different members met.
CREATE FUNCTION provenance_nobody() RETURNS uuid
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid $$;

ALTER TABLE memory
    ADD COLUMN provenance_audience uuid,
    ADD COLUMN provenance_purposes purpose[],
    ADD COLUMN provenance_forgotten boolean NOT NULL DEFAULT false;
UPDATE memory SET provenance_audience = audience_member_id, provenance_purposes = purposes;
ALTER TABLE memory ALTER COLUMN provenance_purposes SET NOT NULL;

-- A memory's own trust is its provenance's until links say otherwise.
CREATE FUNCTION memory_provenance_init() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    NEW.provenance_audience := NEW.audience_member_id;
    NEW.provenance_purposes := NEW.purposes;
    NEW.provenance_forgotten := false;
    RETURN NEW;
END $$;
CREATE TRIGGER memory_provenance_init BEFORE INSERT ON memory
    FOR EACH ROW EXECUTE FUNCTION memory_provenance_init();

-- Folds a memory's direct targets into its provenance. The targets are
-- locked FOR SHARE: a forget of one of them either commits first (and is
-- seen here, the row re-read after the wait) or waits for this transaction
-- and then finds this memory's link when it marks what reaches it.
CREATE FUNCTION memory_provenance_fold(subject uuid) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    aud uuid;
    purp purpose[];
    gone boolean;
    t record;
BEGIN
    SELECT m.provenance_audience, m.provenance_purposes, m.provenance_forgotten
    INTO aud, purp, gone FROM memory m WHERE m.id = subject;
    FOR t IN
        SELECT x.provenance_audience AS audience, x.provenance_purposes AS purposes,
               x.provenance_forgotten OR x.invalidated_at IS NOT NULL AS forgotten
        FROM memory x
        WHERE x.id IN (SELECT l.target_id FROM memory_link l WHERE l.memory_id = subject)
        ORDER BY x.id
        FOR SHARE OF x
    LOOP
        IF t.audience IS NOT NULL AND aud IS NULL THEN
            aud := t.audience;
        ELSIF t.audience IS NOT NULL AND t.audience <> aud THEN
            aud := provenance_nobody();
        END IF;
        purp := ARRAY(SELECT unnest(purp) INTERSECT SELECT unnest(t.purposes) ORDER BY 1);
        gone := gone OR t.forgotten;
    END LOOP;
    UPDATE memory
    SET provenance_audience = aud, provenance_purposes = purp, provenance_forgotten = gone
    WHERE id = subject;
END $$;

CREATE FUNCTION memory_provenance_links() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    PERFORM memory_provenance_fold(n.memory_id)
    FROM (SELECT DISTINCT memory_id FROM new_links ORDER BY memory_id) n;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_provenance_links AFTER INSERT ON memory_link
    REFERENCING NEW TABLE AS new_links
    FOR EACH STATEMENT EXECUTE FUNCTION memory_provenance_links();

-- Forget marks every memory that reaches the forgotten one. The walk up the
-- reversed links stops at memories already marked (what reaches them is
-- marked too), so each memory is marked once, on the write that forgets.
CREATE FUNCTION memory_provenance_forget() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    IF OLD.invalidated_at IS NULL AND NEW.invalidated_at IS NOT NULL THEN
        WITH RECURSIVE up(id) AS (
            SELECT l.memory_id FROM memory_link l WHERE l.target_id = NEW.id
          UNION
            SELECT l.memory_id FROM up JOIN memory_link l ON l.target_id = up.id
            WHERE NOT (SELECT x.provenance_forgotten FROM memory x WHERE x.id = up.id)
        )
        UPDATE memory m SET provenance_forgotten = true
        FROM up WHERE m.id = up.id AND NOT m.provenance_forgotten;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_provenance_forget AFTER UPDATE OF invalidated_at ON memory
    FOR EACH ROW EXECUTE FUNCTION memory_provenance_forget();

-- Existing memories, oldest first (a memory's targets are older); then again
-- until nothing changes, for memories that share a creation time.
DO $$
DECLARE
    before text;
    after text;
BEGIN
    LOOP
        SELECT md5(string_agg(id::text || coalesce(provenance_audience::text, '')
                              || provenance_purposes::text || provenance_forgotten::text,
                              ',' ORDER BY id))
        INTO before FROM memory;
        PERFORM memory_provenance_fold(s.memory_id)
        FROM (SELECT DISTINCT l.memory_id, m.created_at
              FROM memory_link l JOIN memory m ON m.id = l.memory_id
              ORDER BY m.created_at, l.memory_id) s;
        UPDATE memory m SET provenance_forgotten = true
        WHERE NOT m.provenance_forgotten AND EXISTS (
            SELECT 1 FROM memory_link l JOIN memory t ON t.id = l.target_id
            WHERE l.memory_id = m.id AND (t.invalidated_at IS NOT NULL OR t.provenance_forgotten));
        SELECT md5(string_agg(id::text || coalesce(provenance_audience::text, '')
                              || provenance_purposes::text || provenance_forgotten::text,
                              ',' ORDER BY id))
        INTO after FROM memory;
        EXIT WHEN before IS NOT DISTINCT FROM after;
    END LOOP;
END $$;
