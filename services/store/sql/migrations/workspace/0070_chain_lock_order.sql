-- Changes along a chain of successors take its rows in one order, the later
-- memory first: a forget holds its memory, then (successor_forget,
-- 0067_baseline/12_chains.sql) the memories it replaced, to link them past
-- it. A supersede of a memory whose successor is hidden from the caller
-- held the memory and then, linking its new memory before that successor
-- (services/store/domain/memory_revisions.py), the successor: with a forget
-- of the successor at the same moment each waited for the other, and the
-- database broke the deadlock by failing one; a removed member's erase, which
-- takes no lock the link's key check waits for, committed with the new memory
-- linked to its tombstone. So the tools hold a memory's successor first,
-- with this function, then the memory itself (FOR UPDATE, as they read it).
--
-- The successor of `memory` held FOR SHARE (a forget, or an erase, of it
-- waits for the caller's transaction), or NULL when it has none; a successor
-- being forgotten is waited for, and its forget has then linked `memory` past
-- it: read again (a link that stays on a forgotten one is no forget's to
-- wait for: NULL). Runs as the owner, beneath no policy, as the successor may
-- be hidden from the caller; for a memory the caller may see only (NULL
-- otherwise). Each statement reads what committed before it (VOLATILE), so
-- the loop sees the forget it waited for. Bounded as the chain walks are.
CREATE FUNCTION hold_successor(memory uuid) RETURNS uuid
    LANGUAGE plpgsql VOLATILE STRICT SECURITY DEFINER SET search_path = public AS $$
DECLARE
    successor uuid;
    gone uuid;
BEGIN
    FOR hop IN 1..100000 LOOP
        SELECT m.superseded_by_id INTO successor FROM memory m
        WHERE m.id = memory AND is_eligible(m.invalidated_at, m.audience_member_id, m.purposes);
        IF successor IS NULL OR successor = gone THEN
            RETURN NULL;
        END IF;
        PERFORM 1 FROM memory s WHERE s.id = successor AND s.invalidated_at IS NULL FOR SHARE;
        IF FOUND THEN
            RETURN successor;
        END IF;
        gone := successor;
    END LOOP;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION hold_successor(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION hold_successor(uuid) TO recallatron_app;
