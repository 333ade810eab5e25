-- An owner's list of some kinds of memories (ListMemories with kinds,
-- services/store/domain/owner_view.py) walked the created_at index over the
-- whole workspace for rows of those kinds: a kind whose memories are few and
-- old (five decisions among 3,000 newer notes) cost the 3,000 on every page.
-- This index gives each kind's memories newest first (the listing's order and
-- its keyset), and memories_of_kind walks it for one kind from the page
-- token's position, stopping after a page's worth the caller may see; the
-- listing merges the kinds asked for (owner_queries.LIST_MEMORIES_OF_KINDS).
--
-- Why a function: beneath the row-level-security policies a kind cannot be an
-- index condition (an enum's equality is not LEAKPROOF). As the workspace
-- timeline's (0031) and the lexical arm's functions do, it runs as its owner
-- and applies the policies' own rules explicitly, row by row: a memory is
-- returned exactly when is_eligible() passes, and an episode filter matches
-- only an episode the caller may see. It returns only ids and takes only
-- typed values, never SQL text.
CREATE INDEX memory_kind_order_idx ON memory (kind, created_at DESC, id DESC);

CREATE FUNCTION memories_of_kind(
    the_kind memory_kind, the_episode uuid, start_at timestamptz, end_at timestamptz,
    with_superseded boolean, after_at timestamptz, after_id uuid, lim integer
) RETURNS SETOF uuid
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    -- A page's worth (the default guess, 1,000, had the listing scan the table).
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
      AND (with_superseded OR m.superseded_by_id IS NULL)
      AND (the_episode IS NULL
           OR (m.episode_id = the_episode
               AND EXISTS (SELECT 1 FROM episode ep
                           WHERE ep.id = the_episode
                             AND is_eligible(NULL, ep.audience_member_id, ep.purposes))))
      AND is_eligible(m.invalidated_at, m.audience_member_id, m.purposes)
    -- The kind first: only this index gives the order, so it is walked
    -- whatever the planner guesses of how many rows of the kind there are.
    ORDER BY m.kind, m.created_at DESC, m.id DESC
    LIMIT lim;
END $$;

REVOKE ALL ON FUNCTION memories_of_kind(memory_kind, uuid, timestamptz, timestamptz, boolean,
                                        timestamptz, uuid, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memories_of_kind(memory_kind, uuid, timestamptz, timestamptz, boolean,
                                           timestamptz, uuid, integer) TO recallatron_app;
