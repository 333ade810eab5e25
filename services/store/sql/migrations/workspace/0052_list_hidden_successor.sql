-- An owner's list of memories (ListMemories) left out every memory with a
-- successor, even one the caller may not see (another member's, a purpose the
-- caller lacks): such a memory reads to them as current, with no successor,
-- and recall answers it as current (0044), yet the list hid it, its answer
-- changed by a row the caller may not see (design §4). A memory is superseded
-- for the caller exactly when its successor is eligible for them. The
-- listing's own statement checks that under row-level security
-- (owner_queries._list_memories); memories_of_kind (0040), which runs as its
-- owner, checks it explicitly, as it checks the memory's own eligibility.
-- Unchanged otherwise.
CREATE OR REPLACE FUNCTION memories_of_kind(
    the_kind memory_kind, the_episode uuid, start_at timestamptz, end_at timestamptz,
    with_superseded boolean, after_at timestamptz, after_id uuid, lim integer
) RETURNS SETOF uuid
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    ROWS 50
    SET search_path = public
    SET plan_cache_mode = force_custom_plan
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET enable_sort = off
    SET max_parallel_workers_per_gather = 0
    AS $$
BEGIN
    RETURN QUERY
    SELECT m.id FROM memory m
    WHERE m.kind = the_kind
      AND (after_at IS NULL OR (m.created_at, m.id) < (after_at, after_id))
      AND (start_at IS NULL OR m.created_at >= start_at)
      AND (end_at IS NULL OR m.created_at < end_at)
      AND (with_superseded OR m.superseded_by_id IS NULL
           OR (SELECT s.id FROM memory s
               WHERE s.id = m.superseded_by_id
                 AND is_eligible(s.invalidated_at, s.audience_member_id, s.purposes)) IS NULL)
      AND (the_episode IS NULL
           OR (m.episode_id = the_episode
               AND EXISTS (SELECT 1 FROM episode ep
                           WHERE ep.id = the_episode
                             AND is_eligible(NULL, ep.audience_member_id, ep.purposes))))
      AND is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
    ORDER BY m.kind, m.created_at DESC, m.id DESC
    LIMIT lim;
END $$;
