-- An owner's list of some kinds' or one author's memories (ListMemories with
-- kinds or created_by, services/store/domain/owner_view.py) walked one index
-- of the kind (0040) or the author (0032) over every audience and checked the
-- caller's eligibility row by row: a page of Ada's five notes read Bob's
-- 20,000 private notes newer than them (about 20,008 rows a page).
--
-- A caller sees the workspace's memories and their own private ones (design
-- §4, is_eligible), never another member's private ones, never a forgotten
-- one. So each of the two listings has one index per audience class, of the
-- memories not forgotten: the workspace's (audience NULL) and the private
-- ones, keyed first by their member; each listing walks the workspace's and
-- the caller's own in its order and merges the two, a page reading what the
-- caller may see near it (and what their purpose rules out), not what others
-- hold privately. The indexes of 0032 and 0040 stay for other readers.
CREATE INDEX memory_kind_shared_idx ON memory (kind, created_at DESC, id DESC)
    WHERE audience_member_id IS NULL AND invalidated_at IS NULL;
CREATE INDEX memory_kind_private_idx
    ON memory (audience_member_id, kind, created_at DESC, id DESC)
    WHERE audience_member_id IS NOT NULL AND invalidated_at IS NULL;
CREATE INDEX memory_author_shared_idx ON memory (created_by, created_at DESC, id DESC)
    WHERE audience_member_id IS NULL AND invalidated_at IS NULL;
CREATE INDEX memory_author_private_idx
    ON memory (audience_member_id, created_by, created_at DESC, id DESC)
    WHERE audience_member_id IS NOT NULL AND invalidated_at IS NULL;

-- One kind's page (0040, 0052): the workspace's memories of the kind and the
-- caller's own, each walked in its index from the page token's position for a
-- page's worth, then merged. Each row is still checked as before (its
-- purpose; the rules written out, as the policies' are). Unchanged otherwise.
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
         LIMIT lim)
        UNION ALL
        (SELECT m.id, m.created_at FROM memory m
         WHERE m.audience_member_id = caller_member() AND m.kind = the_kind
           AND m.invalidated_at IS NULL
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
         ORDER BY m.audience_member_id, m.kind, m.created_at DESC, m.id DESC
         LIMIT lim)
    ) AS w
    ORDER BY w.created_at DESC, w.id DESC
    LIMIT lim;
END $$;
