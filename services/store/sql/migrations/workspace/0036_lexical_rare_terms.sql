-- The capped path ranked only the newest `cap` matches of all the kept terms
-- together, so a query of a rare word beside a common one ("zephyrine
-- deploy", deploy in 600 memories) never ranked the one memory holding the
-- rare word once 500 newer memories held the common one: the most telling
-- term of the query was the one the arm could not find. Here the matches of
-- the query's rare terms (the rarest kept terms whose document frequencies,
-- over what the caller may see, add up to at most `cap`: the store chooses
-- them) are all ranked beside the newest matches, as the uncapped path would
-- rank them, and go to BM25 without ts_rank's prefilter (which weighs every
-- term alike). Their cost is bounded as the uncapped path's is: at most `cap`
-- posting entries, read from the GIN index of the caller's purpose. With no
-- rare term (NULL) the rows, scores and order are those of
-- lexical_candidates_bm25_newest, which stays for a store of the previous
-- release.
CREATE FUNCTION lexical_candidates_bm25_capped(
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

REVOKE ALL ON FUNCTION lexical_candidates_bm25_capped(
    tsquery, tsquery, text[], double precision[], integer, integer, integer, boolean,
    memory_kind[], integer, uuid[], boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lexical_candidates_bm25_capped(
    tsquery, tsquery, text[], double precision[], integer, integer, integer, boolean,
    memory_kind[], integer, uuid[], boolean) TO recallatron_app;
