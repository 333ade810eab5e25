-- The lexical arm ranks by BM25 (docs/recall.md, "Finding more"): each kept
-- term weighs its inverse document frequency over the memories the caller may
-- see (the statistics of migration 0006, computed by the store and passed in
-- as `idfs`, in the order of `terms`), its count in the memory saturates
-- (k1 = 1.2), and a long memory is discounted against the mean length of the
-- memories ranked (b = 0.75): the textbook constants, not tuned here.
-- `ts_rank_cd` counts neither how rare a term is nor how long a memory is,
-- and ties many rows.
--
-- A term's count is the number of its positions in the memory's tsvector
-- (title and body), read from the tsvector cut down to the kept terms
-- (setweight marks them, ts_filter keeps them): a few lexemes to unnest, not
-- the whole memory. A memory's length is its title's and body's characters:
-- proportional to its words, free to read, and only its ratio to the mean
-- counts. Everything is computed inline: a SQL function per row cost four
-- times ts_rank_cd (docs/recall.md).
--
-- Candidate selection, eligibility and the two paths are those of
-- lexical_candidates and lexical_candidates_newest (migration 0006), which
-- stay for a store of the previous release during an upgrade.

-- Every match ranked (few matches).
CREATE FUNCTION lexical_candidates_bm25(
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
BEGIN
    RETURN QUERY
    WITH kept AS MATERIALIZED (
        SELECT m.id, m.created_at,
               ts_filter(setweight(setweight(m.search, 'D'), 'A', terms), '{a}') AS hits,
               (char_length(m.title) + char_length(m.body))::double precision AS chars
        FROM caller_matches(query) m
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
CREATE FUNCTION lexical_candidates_bm25_newest(
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
                FROM caller_matches(query) m
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

REVOKE ALL ON FUNCTION lexical_candidates_bm25(
    tsquery, text[], double precision[], integer, boolean, memory_kind[], integer, uuid[])
    FROM PUBLIC;
REVOKE ALL ON FUNCTION lexical_candidates_bm25_newest(
    tsquery, text[], double precision[], integer, integer, integer, boolean, memory_kind[],
    integer, uuid[], boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION lexical_candidates_bm25(
    tsquery, text[], double precision[], integer, boolean, memory_kind[], integer, uuid[])
    TO recallatron_app;
GRANT EXECUTE ON FUNCTION lexical_candidates_bm25_newest(
    tsquery, text[], double precision[], integer, integer, integer, boolean, memory_kind[],
    integer, uuid[], boolean) TO recallatron_app;
