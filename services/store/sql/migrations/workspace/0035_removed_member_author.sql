-- A removed member authors nothing new (design §10). Migration 0025 checked a
-- new memory's or episode's audience only, so a row for the whole workspace
-- whose author (created_by) was removed still went in: an old-store migration
-- run under an owner removed meanwhile wrote its workspace memories under them.
-- This guard replaces 0025's: a new row takes the write lock (shared, to the
-- end of its transaction) of its audience and of its author and then reads
-- removed_member for both, so the removal (which holds the member's lock
-- alone) comes wholly before or after it, as before. The audience is named
-- first, as 0025 named it; an author refused names created_by (the store maps
-- both as it mapped 0025's refusal; the old-store migration stops and says so).
-- Memories of a removed member already written (kept, or handed over) are
-- updated, never inserted, so they read, correct and forget as before.
CREATE FUNCTION refuse_removed_member() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    member uuid;
    field text;
BEGIN
    FOR member, field IN
        SELECT m, f FROM (VALUES (1, NEW.audience_member_id, 'audience.member_id'),
                                 (2, NEW.created_by, 'created_by')) AS v(o, m, f)
        WHERE m IS NOT NULL ORDER BY o
    LOOP
        PERFORM pg_advisory_xact_lock_shared(7404, hashtext(member::text));
        IF EXISTS (SELECT 1 FROM removed_member WHERE member_id = member) THEN
            RAISE EXCEPTION 'the member was removed'
                USING ERRCODE = 'invalid_parameter_value', COLUMN = field;
        END IF;
    END LOOP;
    RETURN NEW;
END $$;

DROP TRIGGER memory_audience_not_removed ON memory;
DROP TRIGGER episode_audience_not_removed ON episode;
DROP FUNCTION refuse_removed_audience();

CREATE TRIGGER memory_member_not_removed BEFORE INSERT ON memory
    FOR EACH ROW EXECUTE FUNCTION refuse_removed_member();
CREATE TRIGGER episode_member_not_removed BEFORE INSERT ON episode
    FOR EACH ROW EXECUTE FUNCTION refuse_removed_member();
