-- The exact dense plan (0006's dense_candidates_exact) read the caller's
-- member and purpose once per vector (caller_member() and caller_purpose()
-- are a setting read and an enum's input each; the policy's is_eligible
-- inlined them into every row's filter) and computed each vector's distance
-- twice (its cosine, then its order): 14.4 ms for 10,500 vectors where the
-- scan and the distances alone take about 7.5 (docs/benchmarks.md, "The
-- exact dense plan"). The caller's values are now read once, as the lexical
-- arm's functions read them (0021), one scan of memory_embedding serves the
-- workspace's and the caller's own vectors (the planner picks a sequential
-- scan or the trust index by the caller's share, its values now constants of
-- the custom plan), and each distance is computed once. enable_indexscan is
-- off because with the purpose a constant, the planner could otherwise walk
-- that purpose's HNSW graph for this ORDER BY and answer approximately.
-- Same signature, same rows, same order.
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
