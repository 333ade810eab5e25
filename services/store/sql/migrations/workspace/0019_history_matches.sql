-- History search on its index (docs/migration.md, "History in recall"). `@@` is not
-- LEAKPROOF, so beneath history_entry's policy Postgres would not search the
-- GIN index: it read every history row of the owner and matched each one (a
-- parallel scan of 100,000 turns, 29 ms a search, growing with the history).
-- This function runs the index search as its owner (the migration role, which
-- bypasses row security) and applies the policy's own rule to every match:
-- the caller's rows alone, as the policy would return them. It takes a typed
-- tsquery, never SQL text.
CREATE FUNCTION history_matches(query tsquery) RETURNS SETOF history_entry
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = public
    AS $$
    SELECT * FROM history_entry h
    WHERE h.search @@ query AND h.owner_member_id = caller_member()
$$;

REVOKE ALL ON FUNCTION history_matches(tsquery) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION history_matches(tsquery) TO recallatron_app;
