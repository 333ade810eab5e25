-- Lookup by part of a name on its indexes (docs/graph.md, "Looking up and
-- walking"). LIKE and pg_trgm's similarity operators are not LEAKPROOF, so
-- beneath the policies of entity and entity_alias Postgres refused to use the
-- trigram indexes of migration 0016 and checked every row the caller may see:
-- a partial lookup cost the workspace's names (110-185 ms at 10,000
-- entities), not its matches. This function runs the index searches as its
-- owner (the migration role, which bypasses row security) and returns only
-- the matching rows' ids, their route (1: a prefix of the key or of one of its
-- words, 2: alike despite a typo) and closeness, never a name. The lookup
-- joins them back to entity and entity_alias under the policies, so row-level
-- security still decides what any route finds, as for an exact name.
CREATE FUNCTION entity_key_matches(key text, prefix text, word_prefix text)
    RETURNS TABLE (entity_id uuid, alias_id uuid, tier integer, closeness real)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = public
    AS $$
    SELECT e.id, NULL::uuid, 1, similarity(e.name_key, key) FROM entity e
    WHERE e.name_key LIKE prefix OR e.name_key LIKE word_prefix
    UNION ALL
    SELECT a.entity_id, a.id, 1, similarity(a.alias_key, key) FROM entity_alias a
    WHERE a.alias_key LIKE prefix OR a.alias_key LIKE word_prefix
    UNION ALL
    SELECT e.id, NULL::uuid, 2,
           greatest(similarity(e.name_key, key), word_similarity(key, e.name_key))
    FROM entity e WHERE e.name_key % key OR key <% e.name_key
    UNION ALL
    SELECT a.entity_id, a.id, 2,
           greatest(similarity(a.alias_key, key), word_similarity(key, a.alias_key))
    FROM entity_alias a WHERE a.alias_key % key OR key <% a.alias_key
$$;

REVOKE ALL ON FUNCTION entity_key_matches(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION entity_key_matches(text, text, text) TO recallatron_app;
