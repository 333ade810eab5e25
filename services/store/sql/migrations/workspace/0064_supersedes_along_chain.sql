-- The other direction of 0063_successor_along_chain: a read's chain of the
-- memories a memory supersedes stopped at the first one the caller may not
-- see, so Bob read Lyon as superseded by Nice past Ada's hidden draft, yet Nice
-- as superseding nothing. The nearest memories the caller may see before
-- `successor` along its chain, hidden ones stepped over (a forgotten one is
-- no link of a chain: 0054_successor_chain relinked what it replaced). Runs as
-- the owner, beneath no policy; it names only memories the caller may see.
CREATE FUNCTION visible_predecessors(successor uuid) RETURNS SETOF uuid
    LANGUAGE sql STABLE STRICT SECURITY DEFINER SET search_path = public AS $$
    WITH RECURSIVE back(id, seen, hops) AS (
        SELECT m.id, is_eligible(m.invalidated_at, m.audience_member_id, m.purposes), 1
        FROM memory m WHERE m.superseded_by_id = successor AND m.invalidated_at IS NULL
      UNION ALL
        SELECT m.id, is_eligible(m.invalidated_at, m.audience_member_id, m.purposes), b.hops + 1
        FROM back b JOIN memory m ON m.superseded_by_id = b.id
        WHERE NOT b.seen AND m.invalidated_at IS NULL AND b.hops < 100000
    )
    SELECT id FROM back WHERE seen
$$;
REVOKE ALL ON FUNCTION visible_predecessors(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION visible_predecessors(uuid) TO recallatron_app;
