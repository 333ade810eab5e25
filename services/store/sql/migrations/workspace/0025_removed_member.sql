-- The members removed from this workspace, as its own database knows them
-- (design §10). A write for one member is checked against the control plane
-- first, and the removal may come between that check and the write's commit.
-- So every memory or episode inserted for one member holds that member's
-- write lock (shared, to the end of its transaction) and then reads this
-- table; the removal takes the same lock alone and adds the member here in
-- the transaction that erases or hands over their memories. A write either
-- commits before that transaction (and is erased or handed over with the
-- rest) or is refused after it (docs/api.md, "RemoveMember").
CREATE TABLE removed_member (
    member_id uuid PRIMARY KEY,
    removed_at timestamptz NOT NULL DEFAULT now()
);
GRANT SELECT ON removed_member TO recallatron_app;

-- Volatile, as every plpgsql function is unless declared otherwise: the query
-- after the lock takes a snapshot of its own, so it reads what committed while
-- the lock was waited for. The refusal names the request's field (the store
-- maps invalid_parameter_value with a column to INVALID_ARGUMENT naming it).
CREATE FUNCTION refuse_removed_audience() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(7404, hashtext(NEW.audience_member_id::text));
    IF EXISTS (SELECT 1 FROM removed_member WHERE member_id = NEW.audience_member_id) THEN
        RAISE EXCEPTION 'the member was removed'
            USING ERRCODE = 'invalid_parameter_value', COLUMN = 'audience.member_id';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER memory_audience_not_removed BEFORE INSERT ON memory
    FOR EACH ROW WHEN (NEW.audience_member_id IS NOT NULL)
    EXECUTE FUNCTION refuse_removed_audience();
CREATE TRIGGER episode_audience_not_removed BEFORE INSERT ON episode
    FOR EACH ROW WHEN (NEW.audience_member_id IS NOT NULL)
    EXECUTE FUNCTION refuse_removed_audience();
