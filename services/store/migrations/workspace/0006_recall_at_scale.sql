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
    -- The fence (OFFSET 0) keeps the scan on the match alone, so the GIN
    -- index finds the matches and eligibility is checked on them only (left
    -- free, the planner may pick the audience index and filter every row of
    -- the audience for the term).
    RETURN QUERY
    SELECT m.id, ts_rank_cd(m.search, query) AS score
    FROM (SELECT * FROM memory x WHERE x.search @@ query OFFSET 0) m
    WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
      AND (include_superseded OR m.superseded_by_id IS NULL)
      AND (cardinality(kinds) = 0 OR m.kind = ANY (kinds))
      AND (expiry_days = 0 OR m.updated_at >= now() - make_interval(days => expiry_days))
      AND (cardinality(entities) = 0 OR EXISTS (
            SELECT 1 FROM mention mn WHERE mn.memory_id = m.id AND mn.entity_id = ANY (entities)))
    ORDER BY score DESC, ts_rank(m.search, query) DESC, m.created_at DESC, m.id
    LIMIT lim;
END $$;

-- Many matches: only the newest `cap` eligible matches are ranked (a cost
-- that does not grow with the corpus); ts_rank, a tenth of ts_rank_cd's
-- cost, keeps the best `prefilter` of them for ts_rank_cd to order
-- (docs/benchmarks.md). The created_at index is walked newest first.
CREATE FUNCTION lexical_candidates_newest(
    query tsquery, lim integer, cap integer, prefilter integer, include_superseded boolean,
    kinds memory_kind[], expiry_days integer, entities uuid[]
) RETURNS TABLE (id uuid, score real)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET max_parallel_workers_per_gather = 0
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT c.id, ts_rank_cd(c.search, query) AS score
    FROM (
        SELECT n.id, n.search, n.created_at, ts_rank(n.search, query) AS quick FROM (
            -- Newest first along the created_at index, stopping at the cap
            -- (the fence keeps the planner from trading that walk for the
            -- audience index and a sort of every eligible match).
            SELECT m.id, m.search, m.created_at
            FROM (SELECT * FROM memory x WHERE x.search @@ query
                  ORDER BY x.created_at DESC OFFSET 0) m
            WHERE is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
              AND (include_superseded OR m.superseded_by_id IS NULL)
              AND (cardinality(kinds) = 0 OR m.kind = ANY (kinds))
              AND (expiry_days = 0 OR m.updated_at >= now() - make_interval(days => expiry_days))
              AND (cardinality(entities) = 0 OR EXISTS (
                    SELECT 1 FROM mention mn
                    WHERE mn.memory_id = m.id AND mn.entity_id = ANY (entities)))
            ORDER BY m.created_at DESC
            LIMIT cap
        ) n
        ORDER BY quick DESC, n.created_at DESC, n.id
        LIMIT prefilter
    ) c
    ORDER BY score DESC, c.quick DESC, c.created_at DESC, c.id
    LIMIT lim;
END $$;

REVOKE ALL ON FUNCTION lexical_candidates(tsquery, integer, boolean, memory_kind[], integer, uuid[])
    FROM PUBLIC;
REVOKE ALL ON FUNCTION lexical_candidates_newest(
    tsquery, integer, integer, integer, boolean, memory_kind[], integer, uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lexical_candidates(tsquery, integer, boolean, memory_kind[], integer, uuid[])
    TO recallatron_app;
GRANT EXECUTE ON FUNCTION lexical_candidates_newest(
    tsquery, integer, integer, integer, boolean, memory_kind[], integer, uuid[]) TO recallatron_app;

-- 3. What bounds the permission walk -------------------------------------------
--
-- Links are written once, with their memory, and point only to memories that
-- existed then, so the length of a memory's longest chain of links and the
-- number of memories it reaches are fixed at creation. The walk refuses a
-- candidate whose provenance is deeper or wider than its documented caps
-- without walking it (services/store/memory_queries.py, ADMIT). Both counts
-- cover every linked memory, whoever may see it: a refusal for size can only
-- matter when every linked memory is visible (any hidden one refuses the
-- candidate anyway), so they reveal nothing.

ALTER TABLE memory
    ADD COLUMN link_depth integer NOT NULL DEFAULT 0,
    ADD COLUMN link_reach integer NOT NULL DEFAULT 0;

-- Counting stops past this: the walk's per-candidate cap is below it.
CREATE FUNCTION link_reach_limit() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT 1001 $$;

CREATE FUNCTION memory_link_measure(subject uuid) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
DECLARE
    depth integer;
    widest integer;
    reach integer;
BEGIN
    SELECT 1 + max(t.link_depth), max(t.link_reach) INTO depth, widest
    FROM memory_link l JOIN memory t ON t.id = l.target_id
    WHERE l.memory_id = subject;
    IF depth IS NULL THEN
        RETURN;
    END IF;
    IF widest >= link_reach_limit() THEN
        reach := link_reach_limit();
    ELSE
        -- Distinct memories reachable, counted up to the limit only.
        WITH RECURSIVE r(node) AS (
            SELECT target_id FROM memory_link WHERE memory_id = subject
          UNION
            SELECT l.target_id FROM r JOIN memory_link l ON l.memory_id = r.node
        )
        SELECT count(*) INTO reach FROM (SELECT node FROM r LIMIT link_reach_limit()) x;
    END IF;
    UPDATE memory SET link_depth = depth, link_reach = reach WHERE id = subject;
END $$;

CREATE FUNCTION memory_link_measure_new() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
BEGIN
    PERFORM memory_link_measure(n.memory_id)
    FROM (SELECT DISTINCT memory_id FROM new_links ORDER BY memory_id) n;
    RETURN NULL;
END $$;

CREATE TRIGGER memory_link_measure AFTER INSERT ON memory_link
    REFERENCING NEW TABLE AS new_links
    FOR EACH STATEMENT EXECUTE FUNCTION memory_link_measure_new();

-- Existing links, oldest memory first (a memory's targets are older).
SELECT memory_link_measure(s.memory_id)
FROM (SELECT DISTINCT l.memory_id, m.created_at
      FROM memory_link l JOIN memory m ON m.id = l.memory_id
      ORDER BY m.created_at, l.memory_id) s;
