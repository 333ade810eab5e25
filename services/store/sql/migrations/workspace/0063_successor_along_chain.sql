-- A memory is superseded for a caller when its successor is eligible for them
-- (0044), but only its direct successor was asked: Lyon (the workspace's)
-- superseded by Paris (Ada's own draft), Paris by Nice (the workspace's), and
-- Bob read Lyon with no successor and recalled Lyon and Nice both as current,
-- two offices at once, as a forgotten middle did before 0054_successor_chain.
-- A memory is now superseded for the caller when any memory along its chain of
-- successors is eligible for them, and the one it reads as superseded by is
-- the nearest of those; a chain hidden from them all the way still reads as
-- current (0044).

-- The nearest memory from `successor` on along the chain (itself first) that
-- the caller may see, or NULL. Runs as the owner, beneath no policy, so it may
-- step over hidden ones; it names only one the caller may see. A chain never
-- loops (each supersede makes a new memory; forget only shortens it): the
-- bound guards the walk regardless.
CREATE FUNCTION visible_successor(successor uuid) RETURNS uuid
    LANGUAGE plpgsql STABLE STRICT SECURITY DEFINER SET search_path = public AS $$
DECLARE
    step uuid := successor;
    seen boolean;
    next_id uuid;
BEGIN
    FOR hop IN 1..100000 LOOP
        SELECT is_eligible(s.invalidated_at, s.audience_member_id, s.purposes), s.superseded_by_id
        INTO seen, next_id FROM memory s WHERE s.id = step;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        IF seen THEN
            RETURN step;
        END IF;
        IF next_id IS NULL THEN
            RETURN NULL;
        END IF;
        step := next_id;
    END LOOP;
    RETURN NULL;
END $$;

-- Redefined from 0044 (its only definition): the lexical and dense arms' rule.
CREATE OR REPLACE FUNCTION successor_seen(successor uuid) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$ SELECT visible_successor(successor) IS NOT NULL $$;
REVOKE ALL ON FUNCTION visible_successor(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION visible_successor(uuid) TO recallatron_app;
