-- The exact plan of 0062_superseded_vectors called successor_seen for each
-- superseded vector whose direct successor the caller may not see: a
-- SECURITY DEFINER walk of the chain (0064) per row, about 45 µs, so a member
-- to whom 1,000 of 12,000 vectors were superseded by the owner's private
-- memories waited 49 ms where the plan took 6 ms before 0062
-- (benchmarks.superseded_cost). Most chains end at that hidden successor:
-- it is read once, by key, and the chain is walked on from its own successor
-- only when it has one. The same rule as successor_seen, step for step: the
-- direct successor visible supersedes; hidden, the one after it is asked.
-- Same signature, same rows, same order.
CREATE OR REPLACE FUNCTION dense_candidates_exact(
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
               OR coalesce((
                    SELECT NOT is_eligible(s.invalidated_at, s.audience_member_id, s.purposes)
                           AND (s.superseded_by_id IS NULL
                                OR NOT successor_seen(s.superseded_by_id))
                    FROM memory s WHERE s.id = e.superseded_by_id), true))
        ORDER BY distance, e.memory_id
        LIMIT lim
    ) nearest
    ORDER BY nearest.distance, nearest.memory_id;
END $$;
