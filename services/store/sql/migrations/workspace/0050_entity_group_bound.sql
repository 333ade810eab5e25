-- The bound on a merged entity (MAX_ENTITY_GROUP, design §8.5) is a bound on
-- the group as the workspace holds it. entity_group (0012) runs as the caller,
-- so a merge decided for one purpose did not see the merges decided for
-- another (their entities mentioned only for that purpose), and a group could
-- grow past the bound, whole once a memory mentions its entities for both.
--
-- How many entities the merges in force connect to ids, itself included,
-- whoever may see them. Only a number leaves; a merge asks it of the two
-- entities it is about to join, which its caller may see.
CREATE FUNCTION entity_group_size(ids uuid[]) RETURNS integer
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public AS $$
    WITH RECURSIVE grp(member_id) AS (
        SELECT id FROM unnest(ids) AS id
        UNION
        SELECT CASE WHEN m.kept_id = g.member_id THEN m.merged_id ELSE m.kept_id END
        FROM grp g
        JOIN entity_merge m
          ON (m.kept_id = g.member_id OR m.merged_id = g.member_id) AND m.undone_at IS NULL
    )
    SELECT count(*)::integer FROM grp
$$;

REVOKE ALL ON FUNCTION entity_group_size(uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION entity_group_size(uuid[]) TO recallatron_app;
