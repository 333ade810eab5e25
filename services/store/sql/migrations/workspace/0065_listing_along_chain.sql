-- An owner's list of memories took a memory as superseded for the caller only
-- when its direct successor was one they may see (0052, 0057): Lyon (the
-- workspace's) superseded by Paris (Ada's own draft), Paris by Nice (the
-- workspace's), and Bob's list showed Lyon as current beside Nice, where read
-- and recall take Lyon as superseded by Nice (0063_successor_along_chain).
-- The list now takes the same rule: a memory is superseded for the caller when
-- any memory along its chain of successors is one they may see
-- (visible_successor), walked by primary key only for a superseded memory.
-- The list of every author's, one author's or one episode's memories does so
-- in its statement (services/store/sql/owner_queries.py).

-- Redefined from 0057 (its newest definition): the superseded check alone
-- changed.
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
    SELECT w.id FROM (
        (SELECT m.id, m.created_at FROM memory m
         WHERE m.kind = the_kind AND m.audience_member_id IS NULL AND m.invalidated_at IS NULL
           AND (after_at IS NULL OR (m.created_at, m.id) < (after_at, after_id))
           AND (start_at IS NULL OR m.created_at >= start_at)
           AND (end_at IS NULL OR m.created_at < end_at)
           AND (with_superseded OR m.superseded_by_id IS NULL
                OR visible_successor(m.superseded_by_id) IS NULL)
           AND (the_episode IS NULL
                OR (m.episode_id = the_episode
                    AND EXISTS (SELECT 1 FROM episode ep
                                WHERE ep.id = the_episode
                                  AND is_eligible(NULL, ep.audience_member_id, ep.purposes))))
           AND is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
         ORDER BY m.kind, m.created_at DESC, m.id DESC
         LIMIT lim)
        UNION ALL
        (SELECT m.id, m.created_at FROM memory m
         WHERE m.audience_member_id = caller_member() AND m.kind = the_kind
           AND m.invalidated_at IS NULL
           AND (after_at IS NULL OR (m.created_at, m.id) < (after_at, after_id))
           AND (start_at IS NULL OR m.created_at >= start_at)
           AND (end_at IS NULL OR m.created_at < end_at)
           AND (with_superseded OR m.superseded_by_id IS NULL
                OR visible_successor(m.superseded_by_id) IS NULL)
           AND (the_episode IS NULL
                OR (m.episode_id = the_episode
                    AND EXISTS (SELECT 1 FROM episode ep
                                WHERE ep.id = the_episode
                                  AND is_eligible(NULL, ep.audience_member_id, ep.purposes))))
           AND is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
         ORDER BY m.audience_member_id, m.kind, m.created_at DESC, m.id DESC
         LIMIT lim)
    ) AS w
    ORDER BY w.created_at DESC, w.id DESC
    LIMIT lim;
END $$;
