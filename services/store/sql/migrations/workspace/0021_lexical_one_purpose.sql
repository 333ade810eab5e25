-- The lexical arm's matches planned for the caller's purpose alone. The
-- functions of migration 0017 read them through caller_matches (migration
-- 0013): eight branches, one per purpose and audience, each with its purpose
-- written in so that it proves its partial index's predicate. Every call
-- plans its statement afresh (a custom plan), and planning all eight took
-- about 0.85 ms of a 2-3 ms call at 10,000 memories, though six never run.
-- Here the caller's purpose and audiences are read once into variables,
-- which a custom plan sees as values: two branches prove the index of the
-- caller's purpose by themselves (docs/benchmarks.md, "The lexical arm's
-- plan, for one purpose"). Candidates, order and scores are unchanged.

-- Every match ranked (few matches).
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

-- Many matches: the newest `cap` eligible matches, of which ts_rank keeps the
-- best `prefilter` for BM25 to order (as lexical_candidates_newest does for
-- ts_rank_cd; `by_index` chooses how the newest are found, the same rows).
CREATE OR REPLACE FUNCTION lexical_candidates_bm25_newest(
    query tsquery, terms text[], idfs double precision[], lim integer, cap integer,
    prefilter integer, include_superseded boolean, kinds memory_kind[], expiry_days integer,
    entities uuid[], by_index boolean
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
BEGIN
    IF by_index THEN
        -- Local to this call: the walk must not be traded for a bitmap scan.
        PERFORM set_config('enable_bitmapscan', 'off', true);
        RETURN QUERY
        WITH kept AS MATERIALIZED (
            SELECT n.id, n.created_at,
                   ts_filter(setweight(setweight(n.search, 'D'), 'A', terms), '{a}') AS hits,
                   n.chars
            FROM (
                -- The fence keeps the walk on the created_at index.
                SELECT m.id, m.search, m.created_at,
                       (char_length(m.title) + char_length(m.body))::double precision AS chars
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
        WITH kept AS MATERIALIZED (
            SELECT n.id, n.created_at,
                   ts_filter(setweight(setweight(n.search, 'D'), 'A', terms), '{a}') AS hits,
                   n.chars
            FROM (
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
