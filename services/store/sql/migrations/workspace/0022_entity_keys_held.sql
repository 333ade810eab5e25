-- Recall's entity cards ask first whether any entity or alias holds one of
-- the query's name keys at all (docs/graph.md, "Entity cards in recall").
-- Most queries name no entity, and the cards' statement, planned beneath the
-- policies of entity, entity_alias, mention and memory, cost a workspace
-- just woken about 3 ms of planning to find nothing. This probe reads the
-- two name indexes as the function's owner and answers one boolean, nothing
-- of any name: when it says no, no entity the caller may see can match
-- either, and the cards' statement is skipped; when it says yes, that
-- statement decides under the policies, as before.
CREATE FUNCTION entity_keys_held(keys text[]) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = public
    AS $$
    SELECT EXISTS (SELECT 1 FROM entity WHERE name_key = ANY (keys))
        OR EXISTS (SELECT 1 FROM entity_alias WHERE alias_key = ANY (keys))
$$;

REVOKE ALL ON FUNCTION entity_keys_held(text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION entity_keys_held(text[]) TO recallatron_app;
